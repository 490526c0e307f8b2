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
    /// The server asks for an authorization it was not given (no tokens, tokens it no
    /// longer accepts, or a token without the scope it needs); its tools are absent (or, when
    /// a call was refused, refused) until someone logs in.
    NeedsLogin {
        /// The server's name.
        server: String,
        /// The server's reason, as one line.
        reason: String,
        /// The scopes the server asked for when it refused a token for want of scope (403
        /// `insufficient_scope`); empty when it wants a login at all.
        scopes: Vec<String>,
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
    /// The server sent a log message at or above its configured level (for the application's
    /// log only: never shown to the model).
    Log {
        /// The server's name.
        server: String,
        /// The message's severity.
        level: crate::McpLogLevel,
        /// The logger the server named, if any.
        logger: Option<String>,
        /// The message as one line (control characters replaced).
        message: String,
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
            McpEvent::NeedsLogin { server, reason, .. } => {
                write!(f, "MCP server `{server}` needs login ({reason})")
            }
            McpEvent::Died { server } => write!(f, "MCP server `{server}` stopped"),
            McpEvent::Restarted { server } => write!(f, "MCP server `{server}` restarted"),
            McpEvent::ToolsChanged { server } => {
                write!(f, "MCP server `{server}` changed its tool list")
            }
            McpEvent::Log {
                server,
                level,
                logger,
                message,
            } => {
                write!(f, "MCP server `{server}` log [{level}]")?;
                if let Some(logger) = logger {
                    write!(
                        f,
                        " {}:",
                        crate::logging::message_text(&logger.as_str().into())
                    )?;
                }
                write!(f, " {message}")
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
        match &event {
            McpEvent::Log { level, .. } if *level >= crate::McpLogLevel::Error => {
                tracing::error!("{event}")
            }
            McpEvent::Log { level, .. } if *level >= crate::McpLogLevel::Warning => {
                tracing::warn!("{event}")
            }
            McpEvent::Log { level, .. } if *level >= crate::McpLogLevel::Info => {
                tracing::info!("{event}")
            }
            McpEvent::Log { .. } => tracing::debug!("{event}"),
            _ => tracing::info!("{event}"),
        }
        if let Some(f) = &self.0 {
            f(&event);
        }
    }
}
