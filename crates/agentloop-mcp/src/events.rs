//! [`McpEvent`]: lifecycle notices of MCP servers (started, failed, died, restarted, tool list
//! changed), delivered to an optional callback so an application can show them.

use std::sync::Arc;

/// Something that happened to an MCP server.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpEvent {
    /// The server started and offers this many tools (after filtering).
    Started {
        /// The server's name.
        server: String,
        /// Tools offered.
        tools: usize,
    },
    /// The server failed to start; its tools are absent or answer with an error.
    Failed {
        /// The server's name.
        server: String,
        /// Why.
        error: String,
    },
    /// The server's connection closed (crash, exit).
    Died {
        /// The server's name.
        server: String,
    },
    /// The server was started again after it died.
    Restarted {
        /// The server's name.
        server: String,
    },
    /// The server said its tool list changed.
    ToolsChanged {
        /// The server's name.
        server: String,
    },
}

impl std::fmt::Display for McpEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            McpEvent::Started { server, tools } => {
                write!(f, "MCP server `{server}` started ({tools} tools)")
            }
            McpEvent::Failed { server, error } => {
                write!(f, "MCP server `{server}` unavailable: {error}")
            }
            McpEvent::Died { server } => write!(f, "MCP server `{server}` stopped"),
            McpEvent::Restarted { server } => write!(f, "MCP server `{server}` restarted"),
            McpEvent::ToolsChanged { server } => {
                write!(f, "MCP server `{server}` changed its tool list")
            }
        }
    }
}

/// The callback type for [`McpEvent`]s.
pub type McpEventFn = Arc<dyn Fn(&McpEvent) + Send + Sync>;

/// An optional event callback, cheap to clone.
#[derive(Clone, Default)]
pub(crate) struct EventSink(pub(crate) Option<McpEventFn>);

impl EventSink {
    pub(crate) fn emit(&self, event: McpEvent) {
        tracing::info!("{event}");
        if let Some(f) = &self.0 {
            f(&event);
        }
    }
}
