//! Custom slash commands: Markdown prompt files in `~/.config/agentloop/commands/` and, in a
//! trusted workspace, `.agentloop/commands/` (Claude Code's `~/.claude/commands/` and
//! `.claude/commands/` are read too). `/NAME ARGS` (in chat, or as the prompt of
//! `agentloop run`) becomes the file's text with `$ARGUMENTS` replaced by ARGS and `$1`…`$9`
//! by its words. Front matter may set `description` (shown in `/help`), `model` (used when no
//! model was chosen on the command line) and `allowed_tools` (permission rules allowed for that
//! prompt). A workspace command wins over a user command of the same name. See
//! `docs/EXTENDING.md`.

use std::path::{Path, PathBuf};

use agentloop::builtin::{parse_front_matter, split_front_matter};

use crate::config::files::{extension_dirs, load_markdown_defs};
use crate::error::Failure;

/// Longest command file read (bytes).
const MAX_COMMAND_BYTES: u64 = 256 * 1024;

/// One command file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CustomCommand {
    /// `/NAME`: the file name without `.md`.
    pub name: String,
    /// From the front matter (else the body's first line).
    pub description: String,
    /// `model` from the front matter.
    pub model: Option<String>,
    /// `allowed_tools` from the front matter: permission rules for the expanded prompt.
    pub allowed_tools: Vec<String>,
    /// The prompt template.
    pub body: String,
    /// The file.
    pub path: PathBuf,
}

/// A prompt after expansion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expanded {
    /// The prompt text to send.
    pub prompt: String,
    /// The command's `model`, if any.
    pub model: Option<String>,
    /// The command's `allowed_tools`.
    pub allowed_tools: Vec<String>,
}

/// The command directories for `workspace`, most specific first: the workspace's (when
/// trusted), then the user's; Claude Code's `.claude/commands/` after ours at each level, so
/// existing command files work as they are.
fn roots(workspace: &Path, trusted: bool) -> Vec<PathBuf> {
    let mut roots = extension_dirs(workspace, trusted, "commands");
    if let Some(home) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        roots.push(PathBuf::from(home).join(".claude").join("commands"));
    }
    roots
}

/// Every command for `workspace`, by name (the most specific file of a name), and one line per
/// file that could not be read.
pub fn load(workspace: &Path, trusted: bool) -> (Vec<CustomCommand>, Vec<String>) {
    let (mut commands, problems) =
        load_markdown_defs(roots(workspace, trusted), read, |command| &command.name);
    commands.sort_by(|a, b| a.name.cmp(&b.name));
    (commands, problems)
}

fn read(path: &Path) -> Result<CustomCommand, String> {
    use std::io::Read;
    let shown = path.display();
    let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    if !file
        .metadata()
        .map_err(|e| format!("{shown}: {e}"))?
        .is_file()
    {
        return Err(format!("{shown}: not a regular file"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_COMMAND_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{shown}: {e}"))?;
    let text = String::from_utf8_lossy(&bytes);
    let (front, body) = split_front_matter(&text);
    let fields =
        parse_front_matter(front.unwrap_or_default()).map_err(|e| format!("{shown}: {e}"))?;
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_alphanumeric() || "-_.:".contains(c))
    {
        return Err(format!("{shown}: {name:?} is not a command name"));
    }
    let body = body.trim().to_owned();
    let description = fields.description.unwrap_or_else(|| {
        crate::ui::render::one_line(body.lines().next().unwrap_or_default(), 60)
    });
    Ok(CustomCommand {
        name,
        description,
        model: fields.model,
        allowed_tools: fields.allowed_tools,
        body,
        path: path.to_path_buf(),
    })
}

impl CustomCommand {
    /// The prompt for `/NAME arguments`.
    pub fn expand(&self, arguments: &str) -> Expanded {
        let arguments = arguments.trim();
        let words: Vec<&str> = arguments.split_whitespace().collect();
        let mut prompt = String::with_capacity(self.body.len() + arguments.len());
        let mut used = false;
        let mut rest = self.body.as_str();
        while let Some(at) = rest.find('$') {
            prompt.push_str(&rest[..at]);
            let after = &rest[at + 1..];
            if let Some(tail) = after.strip_prefix("ARGUMENTS") {
                prompt.push_str(arguments);
                used = true;
                rest = tail;
            } else if let Some(digit) = after.chars().next().filter(|c| ('1'..='9').contains(c)) {
                let index = digit as usize - '1' as usize;
                prompt.push_str(words.get(index).copied().unwrap_or_default());
                used = true;
                rest = &after[1..];
            } else {
                prompt.push('$');
                rest = after;
            }
        }
        prompt.push_str(rest);
        if !used && !arguments.is_empty() {
            prompt.push_str("\n\n");
            prompt.push_str(arguments);
        }
        Expanded {
            prompt,
            model: self.model.clone(),
            allowed_tools: self.allowed_tools.clone(),
        }
    }
}

/// `/NAME ARGS` → the expansion of the command NAME; `Ok(None)` when `text` is not a slash
/// command or names no custom command.
pub fn expand(commands: &[CustomCommand], text: &str) -> Option<Expanded> {
    let line = text.trim_start().strip_prefix('/')?;
    let (name, arguments) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    commands
        .iter()
        .find(|c| c.name == name)
        .map(|c| c.expand(arguments))
}

/// The `/help` lines for `commands`.
pub fn help_lines(commands: &[CustomCommand]) -> Vec<String> {
    commands
        .iter()
        .map(|c| {
            format!(
                "/{}  {}",
                crate::ui::safe_text::visible_line(&c.name),
                crate::ui::safe_text::visible_line(&c.description)
            )
        })
        .collect()
}

/// A run's prompt: a custom command expanded, else the prompt as given. Errors for a prompt that
/// starts with `/NAME` where NAME looks like a command but is unknown are left to the caller.
pub fn expand_prompt(
    workspace: &Path,
    trusted: bool,
    prompt: &str,
) -> Result<Option<Expanded>, Failure> {
    if !prompt.trim_start().starts_with('/') {
        return Ok(None);
    }
    let (commands, problems) = load(workspace, trusted);
    for problem in problems {
        eprintln!(
            "agentloop: skipped command file: {}",
            crate::ui::safe_text::visible_line(&problem)
        );
    }
    Ok(expand(&commands, prompt))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn command(body: &str) -> CustomCommand {
        CustomCommand {
            name: "fix".into(),
            description: String::new(),
            model: None,
            allowed_tools: Vec::new(),
            body: body.into(),
            path: PathBuf::new(),
        }
    }

    #[test]
    fn arguments_and_positions_are_substituted() {
        let c = command("Fix bug $1 in $2: $ARGUMENTS ($3) costs $5 $x");
        assert_eq!(
            c.expand(" 42 src ").prompt,
            "Fix bug 42 in src: 42 src () costs  $x"
        );
        assert_eq!(
            command("Review.").expand("the parser").prompt,
            "Review.\n\nthe parser"
        );
        assert_eq!(command("Review.").expand("").prompt, "Review.");
        let commands = vec![command("Fix $ARGUMENTS")];
        assert_eq!(
            expand(&commands, "/fix the bug").unwrap().prompt,
            "Fix the bug"
        );
        assert_eq!(expand(&commands, "/fix").unwrap().prompt, "Fix ");
        assert!(expand(&commands, "/other x").is_none());
        assert!(expand(&commands, "fix").is_none());
    }
}
