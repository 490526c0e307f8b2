//! MCP prompts as slash commands: each prompt of a running server that announced the `prompts`
//! capability is `/mcp__<server>__<prompt>`, and a line starting with such a command expands to
//! the prompt's text (from `prompts/get`) before it reaches the model.
//!
//! Arguments follow the command, separated by spaces (quote with `"…"` or `'…'` to keep spaces):
//! `name=value` sets an argument by name, any other word fills the next argument not yet set,
//! in the order the server declares them; words beyond the last argument are appended to it, so
//! `/mcp__docs__summarize some long text` works for a one-argument prompt. A missing required
//! argument or an unknown command is an error naming what is expected.

use std::collections::BTreeMap;

use rmcp::model::{CallToolResult, GetPromptRequestParams, Role};

use crate::client::ServerHandle;
use crate::config::sanitize;
use crate::error::McpError;

/// One server prompt offered as a slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptCommand {
    /// The command without its slash: `mcp__<server>__<prompt>`.
    pub command: String,
    /// The server's name.
    pub server: String,
    /// The prompt's name on the server.
    pub prompt: String,
    /// The prompt's description (or title), possibly empty.
    pub description: String,
    /// Its arguments, in the server's order.
    pub arguments: Vec<PromptArg>,
}

/// One argument of a [`PromptCommand`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PromptArg {
    /// Its name.
    pub name: String,
    /// Its description, possibly empty.
    pub description: String,
    /// Whether the prompt needs it.
    pub required: bool,
}

impl PromptCommand {
    /// A usage line: `/mcp__s__p <required> [optional]`.
    pub fn usage(&self) -> String {
        let mut line = format!("/{}", self.command);
        for a in &self.arguments {
            if a.required {
                line.push_str(&format!(" <{}>", a.name));
            } else {
                line.push_str(&format!(" [{}]", a.name));
            }
        }
        line
    }
}

/// The slash command of `prompt` on `server`.
pub(crate) fn command_name(server: &str, prompt: &str) -> String {
    format!("mcp__{}__{}", sanitize(server), sanitize(prompt))
}

/// The prompts of one server as commands (empty when it offers none or is down).
pub(crate) async fn commands_of(server: &ServerHandle) -> Vec<PromptCommand> {
    if server.capabilities().is_none_or(|c| c.prompts.is_none()) {
        return Vec::new();
    }
    let Ok(peer) = server.peer().await else {
        return Vec::new();
    };
    let timeout = server.config.tool_timeout;
    let prompts = match tokio::time::timeout(timeout, peer.list_all_prompts()).await {
        Ok(Ok(prompts)) => prompts,
        Ok(Err(e)) => {
            tracing::warn!(server = %server.name(), "MCP prompts/list failed: {e}");
            return Vec::new();
        }
        Err(_) => {
            tracing::warn!(server = %server.name(), "MCP prompts/list timed out");
            return Vec::new();
        }
    };
    prompts
        .into_iter()
        .map(|p| PromptCommand {
            command: command_name(server.name(), &p.name),
            server: server.name().to_owned(),
            description: p.description.or(p.title).unwrap_or_default(),
            arguments: p
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|a| PromptArg {
                    name: a.name,
                    description: a.description.unwrap_or_default(),
                    required: a.required == Some(true),
                })
                .collect(),
            prompt: p.name,
        })
        .collect()
}

/// Splits `rest` into words, honouring `"…"` and `'…'` quotes and `\` before a character.
pub(crate) fn words(rest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (None, '"' | '\'') => {
                quote = Some(c);
                in_word = true;
            }
            (_, '\\') => {
                if let Some(next) = chars.next() {
                    word.push(next);
                }
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (_, c) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        out.push(word);
    }
    out
}

/// Maps the words after a command onto the prompt's arguments (see the module docs).
pub(crate) fn map_arguments(
    command: &PromptCommand,
    rest: &str,
) -> Result<BTreeMap<String, String>, String> {
    let mut values: BTreeMap<String, String> = BTreeMap::new();
    let mut positional = Vec::new();
    for word in words(rest) {
        match word.split_once('=') {
            Some((name, value)) if command.arguments.iter().any(|a| a.name == name) => {
                values.insert(name.to_owned(), value.to_owned());
            }
            _ => positional.push(word),
        }
    }
    let free: Vec<&str> = command
        .arguments
        .iter()
        .map(|a| a.name.as_str())
        .filter(|n| !values.contains_key(*n))
        .collect();
    if !positional.is_empty() && free.is_empty() {
        return Err(format!(
            "takes no more arguments (got `{}`); usage: {}",
            positional.join(" "),
            command.usage()
        ));
    }
    let mut positional = positional.into_iter();
    for (i, name) in free.iter().enumerate() {
        let value = if i + 1 == free.len() {
            positional.by_ref().collect::<Vec<_>>().join(" ")
        } else {
            positional.next().unwrap_or_default()
        };
        if !value.is_empty() {
            values.insert((*name).to_owned(), value);
        }
    }
    let missing: Vec<&str> = command
        .arguments
        .iter()
        .filter(|a| a.required && !values.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing required argument(s) {}; usage: {}",
            missing.join(", "),
            command.usage()
        ));
    }
    Ok(values)
}

/// Gets the prompt from its server and renders its messages as one prompt text: user messages
/// as they are, assistant messages marked `[assistant]`, embedded resources with their URI.
pub(crate) async fn get(
    server: &ServerHandle,
    command: &PromptCommand,
    arguments: BTreeMap<String, String>,
) -> Result<String, McpError> {
    let fail = |message: String| McpError::Prompt {
        command: command.command.clone(),
        message,
    };
    let peer = server.peer().await.map_err(|e| fail(e.to_string()))?;
    let args = arguments
        .into_iter()
        .map(|(k, v)| (k, serde_json::Value::String(v)))
        .collect();
    let params = GetPromptRequestParams::new(command.prompt.clone()).with_arguments(args);
    let timeout = server.config.tool_timeout;
    let result = tokio::time::timeout(timeout, peer.get_prompt(params))
        .await
        .map_err(|_| fail(format!("server `{}` did not answer in time", server.name())))?
        .map_err(|e| fail(server.request_failed("prompts/get", e).to_string()))?;
    let mut parts = Vec::new();
    for message in result.messages {
        let (text, images) =
            match crate::client::map_result(CallToolResult::success(vec![message.content])) {
                Ok(out) => (out.content, out.images.len()),
                Err(e) => (e.to_string(), 0),
            };
        let mut text = text;
        if images > 0 {
            text.push_str("[an image of the prompt is left out]");
        }
        parts.push(match message.role {
            Role::Assistant => format!("[assistant]\n{text}"),
            _ => text,
        });
    }
    if parts.is_empty() {
        return Err(fail("the server returned no messages".into()));
    }
    Ok(parts.join("\n\n"))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn command(args: &[(&str, bool)]) -> PromptCommand {
        PromptCommand {
            command: "mcp__s__p".into(),
            server: "s".into(),
            prompt: "p".into(),
            description: String::new(),
            arguments: args
                .iter()
                .map(|(n, r)| PromptArg {
                    name: (*n).into(),
                    description: String::new(),
                    required: *r,
                })
                .collect(),
        }
    }

    #[test]
    fn words_honour_quotes_and_escapes() {
        assert_eq!(
            words(r#"a "b c" 'd e' f\ g  "#),
            vec!["a", "b c", "d e", "f g"]
        );
        assert_eq!(words(r#"x="" y"#), vec!["x=", "y"]);
    }

    #[test]
    fn arguments_map_by_name_and_position() {
        let c = command(&[("city", true), ("state", false)]);
        let m = map_arguments(&c, "Paris state=Texas").unwrap();
        assert_eq!(m["city"], "Paris");
        assert_eq!(m["state"], "Texas");
        let m = map_arguments(&c, "state=Texas Paris").unwrap();
        assert_eq!(m["city"], "Paris");
        let m = map_arguments(&c, "Paris Texas").unwrap();
        assert_eq!(
            (m["city"].as_str(), m["state"].as_str()),
            ("Paris", "Texas")
        );
        // Extra words join the last argument.
        let m = map_arguments(&c, "\"New York\" New York State").unwrap();
        assert_eq!(m["state"], "New York State");
        let err = map_arguments(&c, "state=Texas").unwrap_err();
        assert!(err.contains("missing required argument(s) city"), "{err}");
        assert!(err.contains("/mcp__s__p <city> [state]"), "{err}");
        let err = map_arguments(&command(&[]), "extra").unwrap_err();
        assert!(err.contains("takes no more arguments"), "{err}");
        // An `=` in a word that names no argument is a positional value.
        let m = map_arguments(&c, "a=b").unwrap();
        assert_eq!(m["city"], "a=b");
    }
}
