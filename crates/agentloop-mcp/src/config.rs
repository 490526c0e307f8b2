//! How to reach one MCP server and what to take from it: [`McpServerConfig`] (transport,
//! timeouts, tool filters, approval mode, name prefix, deferred loading).
//!
//! This module only describes servers; connecting is [`crate::McpToolset`]'s job. The CLI builds
//! these from `[mcp_servers.NAME]` tables (same key names as codex's config).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// Default time a server gets to start and answer `initialize` + `tools/list`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time one tool call may go without an answer or a progress notification.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default number of times a server that died is started again (on the next call).
pub const DEFAULT_MAX_RESTARTS: u32 = 3;

/// A server started as a child process speaking MCP over its stdin/stdout.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StdioServer {
    /// The program to run (looked up on `PATH`).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment variables (added to the inherited environment).
    pub env: BTreeMap<String, String>,
    /// Working directory; the current one when `None`.
    pub cwd: Option<PathBuf>,
}

/// A server reached over MCP streamable HTTP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpServer {
    /// The endpoint, e.g. `http://127.0.0.1:3001/mcp`.
    pub url: String,
    /// Headers sent with every request (e.g. `Authorization`).
    pub headers: BTreeMap<String, String>,
    /// OAuth: how the client is identified and where its tokens live. `None` sends requests
    /// without tokens (a server answering 401 is then reported as needing login).
    pub oauth: Option<crate::OAuthSettings>,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpTransport {
    /// A child process over stdio.
    Stdio(StdioServer),
    /// Streamable HTTP.
    Http(HttpServer),
}

/// Which of a server's tool calls need approval (the session's approval policy then decides
/// whether "needs approval" means ask, allow or deny, exactly as for the built-in mutating tools).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalMode {
    /// Every call needs approval.
    Always,
    /// Calls of tools not annotated `readOnlyHint: true` need approval (MCP's default for a tool
    /// without annotations is "may be destructive"). Annotations are hints from the server; a
    /// server you do not trust should use [`Always`](Self::Always).
    #[default]
    Mutating,
    /// No call needs approval.
    NeverAsk,
}

agentloop::keywords! {
    ApprovalMode;
    /// The error of parsing an [`ApprovalMode`].
    error ParseApprovalModeError: "MCP approval mode";
    Always => "always",
    Mutating => "mutating",
    NeverAsk => "never-ask" | "never",
}

impl ApprovalMode {
    /// Whether a call of a tool with these hints needs approval under this mode.
    pub fn needs_approval(&self, read_only_hint: Option<bool>) -> bool {
        match self {
            ApprovalMode::Always => true,
            ApprovalMode::Mutating => read_only_hint != Some(true),
            ApprovalMode::NeverAsk => false,
        }
    }
}

/// One MCP server: how to reach it and which of its tools to use, how.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpServerConfig {
    /// The server's name (used in tool names `mcp__<name>__<tool>` and in messages).
    pub name: String,
    /// How to reach it.
    pub transport: McpTransport,
    /// Time to start and list tools.
    pub startup_timeout: Duration,
    /// Time a call may go without an answer; each progress notification restarts it.
    pub tool_timeout: Duration,
    /// Only these tools (server-side names), when set.
    pub enabled_tools: Option<Vec<String>>,
    /// Never these tools (server-side names).
    pub disabled_tools: Vec<String>,
    /// Which calls need approval.
    pub approval: ApprovalMode,
    /// The tool-name prefix; `None` means `mcp__<name>__`, `Some("")` means none.
    pub prefix: Option<String>,
    /// Register the tools as deferred (found through tool search instead of sent every turn).
    pub deferred: bool,
    /// How many times a server that died is started again.
    pub max_restarts: u32,
    /// The least severe log message wanted from the server (asked with `logging/setLevel`
    /// and enforced here too); `None` asks for none and drops any that arrive.
    pub log_level: Option<crate::McpLogLevel>,
    /// How the server's requests for user input (`elicitation/create`) are answered when
    /// there is no `elicitor`.
    pub elicitation: crate::ElicitationMode,
    /// Who answers the server's requests for user input, when a person can (forms and URLs).
    pub elicitor: Option<crate::Elicitor>,
}

impl McpServerConfig {
    /// A server with the given transport and default settings.
    pub fn new(name: impl Into<String>, transport: McpTransport) -> Self {
        McpServerConfig {
            name: name.into(),
            transport,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            enabled_tools: None,
            disabled_tools: Vec::new(),
            approval: ApprovalMode::default(),
            prefix: None,
            deferred: false,
            max_restarts: DEFAULT_MAX_RESTARTS,
            log_level: Some(crate::logging::DEFAULT_LOG_LEVEL),
            elicitation: crate::ElicitationMode::default(),
            elicitor: None,
        }
    }

    /// A stdio server running `command args…`.
    pub fn stdio<I, S>(name: impl Into<String>, command: impl Into<String>, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        McpServerConfig::new(
            name,
            McpTransport::Stdio(StdioServer {
                command: command.into(),
                args: args.into_iter().map(Into::into).collect(),
                ..StdioServer::default()
            }),
        )
    }

    /// A streamable-HTTP server at `url`.
    pub fn http(name: impl Into<String>, url: impl Into<String>) -> Self {
        McpServerConfig::new(
            name,
            McpTransport::Http(HttpServer {
                url: url.into(),
                ..HttpServer::default()
            }),
        )
    }

    agentloop::setters! {
        /// Sets how the server's requests for user input are answered.
        pub fn with_elicitation(mode: crate::ElicitationMode) => elicitation = mode;
        /// Asks `elicitor` for what the server requests (instead of answering by the mode).
        pub fn with_elicitor(elicitor: crate::Elicitor) => elicitor = Some(elicitor);
        /// Sets the least severe server log message wanted (`None`: none).
        pub fn with_log_level(level: Option<crate::McpLogLevel>) => log_level = level;
        /// Sets the startup timeout.
        pub fn with_startup_timeout(timeout: Duration) => startup_timeout = timeout;
        /// Sets the per-call timeout.
        pub fn with_tool_timeout(timeout: Duration) => tool_timeout = timeout;
        /// Sets the approval mode.
        pub fn with_approval(approval: ApprovalMode) => approval = approval;
        /// Sets the name prefix (`""` for none).
        pub fn with_prefix(prefix: impl Into<String>) => prefix = Some(prefix.into());
        /// Marks the tools deferred.
        pub fn with_deferred(deferred: bool) => deferred = deferred;
        /// Keeps only these tools.
        pub fn with_enabled_tools(tools: impl IntoIterator<Item = impl Into<String>>) =>
            enabled_tools = Some(tools.into_iter().map(Into::into).collect());
        /// Drops these tools.
        pub fn with_disabled_tools(tools: impl IntoIterator<Item = impl Into<String>>) =>
            disabled_tools = tools.into_iter().map(Into::into).collect();
    }

    /// Sets an environment variable for a stdio server (ignored for HTTP).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Stdio(s) = &mut self.transport {
            s.env.insert(key.into(), value.into());
        }
        self
    }

    /// Sets a header for an HTTP server (ignored for stdio).
    pub fn with_header(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        if let McpTransport::Http(h) = &mut self.transport {
            h.headers.insert(key.into(), value.into());
        }
        self
    }

    /// Sets the OAuth settings of an HTTP server (ignored for stdio).
    pub fn with_oauth(mut self, oauth: crate::OAuthSettings) -> Self {
        if let McpTransport::Http(h) = &mut self.transport {
            h.oauth = Some(oauth);
        }
        self
    }

    /// Whether the filters let `tool` (a server-side name) through.
    pub fn allows_tool(&self, tool: &str) -> bool {
        let enabled = self
            .enabled_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool));
        enabled && !self.disabled_tools.iter().any(|t| t == tool)
    }

    /// The prefix put before each tool name.
    pub fn effective_prefix(&self) -> String {
        match &self.prefix {
            Some(p) => p.clone(),
            None => format!("mcp__{}__", sanitize(&self.name)),
        }
    }
}

/// Replaces every character providers reject in tool names with `_`.
pub(crate) fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn approval_modes() {
        assert!(ApprovalMode::Mutating.needs_approval(None));
        assert!(ApprovalMode::Mutating.needs_approval(Some(false)));
        assert!(!ApprovalMode::Mutating.needs_approval(Some(true)));
        assert!(ApprovalMode::Always.needs_approval(Some(true)));
        assert!(!ApprovalMode::NeverAsk.needs_approval(None));
        assert_eq!("never-ask".parse(), Ok(ApprovalMode::NeverAsk));
        assert!("sometimes".parse::<ApprovalMode>().is_err());
    }

    #[test]
    fn filters_and_prefix() {
        let c = McpServerConfig::stdio("my server", "x", ["a"])
            .with_enabled_tools(["a", "b"])
            .with_disabled_tools(["b"]);
        assert!(c.allows_tool("a"));
        assert!(!c.allows_tool("b"));
        assert!(!c.allows_tool("c"));
        assert_eq!(c.effective_prefix(), "mcp__my_server__");
        assert_eq!(c.with_prefix("").effective_prefix(), "");
    }
}
