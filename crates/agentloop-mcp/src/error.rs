//! [`McpError`]: what can go wrong connecting to MCP servers or turning their tools into
//! agentloop tools. Tool *calls* never return it: they end in an error result for the model.

use std::time::Duration;

/// An MCP toolset error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    /// The server could not be started or did not complete `initialize` / `tools/list`.
    #[error("MCP server `{server}` failed to start: {message}")]
    Connect {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
    },
    /// The server did not finish starting within its startup timeout.
    #[error("MCP server `{server}` did not start within {} s", timeout.as_secs_f64())]
    StartupTimeout {
        /// The server's name.
        server: String,
        /// The timeout that passed.
        timeout: Duration,
    },
    /// The server asks for authorization (401, or 403 for more scope) that was not given.
    #[error("MCP server `{server}` needs login")]
    NeedsLogin {
        /// The server's name.
        server: String,
        /// The server's `WWW-Authenticate` challenge, as it sent it.
        challenge: String,
    },
    /// An OAuth step (discovery, registration, authorization, token exchange, the token
    /// store) failed.
    #[error("MCP server `{server}`: OAuth failed: {message}")]
    Auth {
        /// The server's name.
        server: String,
        /// What failed.
        message: String,
    },
    /// The server is not running.
    #[error("MCP server `{server}` is down: {reason}")]
    Down {
        /// The server's name.
        server: String,
        /// Why.
        reason: String,
    },
    /// Two tools (from the same or different servers) map to the same agentloop name.
    #[error(
        "tool name `{name}` is used by both {first} and {second}; set a different `prefix` for one of the servers or disable one of the tools"
    )]
    NameCollision {
        /// The colliding agentloop tool name.
        name: String,
        /// `server/tool` of the first.
        first: String,
        /// `server/tool` of the second.
        second: String,
    },
    /// Two servers have the same name.
    #[error("two MCP servers are named `{0}`")]
    DuplicateServer(String),
    /// A `/mcp__server__prompt` command could not be expanded.
    #[error("/{command}: {message}")]
    Prompt {
        /// The command, without its slash.
        command: String,
        /// What went wrong (unknown prompt, missing argument, server error).
        message: String,
    },
    /// The server answered `initialize` with a protocol version agentloop does not speak.
    #[error(
        "MCP server `{server}` answered protocol version {answered}, which agentloop does not support (agentloop proposed {proposed}; it supports {supported})"
    )]
    UnsupportedProtocolVersion {
        /// The server's name.
        server: String,
        /// The version agentloop proposed.
        proposed: String,
        /// The version the server answered.
        answered: String,
        /// The versions agentloop accepts, comma-separated.
        supported: String,
    },
}

impl McpError {
    /// Whether this is a name collision between tools.
    pub fn is_collision(&self) -> bool {
        matches!(self, McpError::NameCollision { .. })
    }

    /// Whether the server needs a login (`agentloop mcp login NAME` in the CLI).
    pub fn is_needs_login(&self) -> bool {
        matches!(self, McpError::NeedsLogin { .. })
    }

    /// Whether an OAuth step failed.
    pub fn is_auth(&self) -> bool {
        matches!(self, McpError::Auth { .. })
    }

    /// Whether a prompt command could not be expanded.
    pub fn is_prompt(&self) -> bool {
        matches!(self, McpError::Prompt { .. })
    }

    /// Whether the server answered a protocol version agentloop does not support.
    pub fn is_unsupported_protocol_version(&self) -> bool {
        matches!(self, McpError::UnsupportedProtocolVersion { .. })
    }
}
