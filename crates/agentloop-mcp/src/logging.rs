//! Server log messages (`notifications/message`): the level agentloop asks each server for
//! (`logging/setLevel`, [`McpLogLevel`], warning by default) and the one-line text a message
//! becomes. Log messages go to the application's log as [`McpEvent::Log`](crate::McpEvent)
//! events and `tracing` records, never into a tool result or anything else the model sees.

use serde_json::Value;

/// The severity of a server's log message (RFC 5424 levels, as MCP names them), least severe
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum McpLogLevel {
    /// Debug details.
    Debug,
    /// Informational.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning (the default threshold).
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken immediately.
    Alert,
    /// The system is unusable.
    Emergency,
}

/// The level asked of servers unless configured otherwise.
pub const DEFAULT_LOG_LEVEL: McpLogLevel = McpLogLevel::Warning;

agentloop::keywords! {
    McpLogLevel;
    /// A log level name that is not one of MCP's.
    error ParseLogLevelError: "MCP log level";
    Debug => "debug",
    Info => "info",
    Notice => "notice",
    Warning => "warning",
    Error => "error",
    Critical => "critical",
    Alert => "alert",
    Emergency => "emergency",
}

#[allow(deprecated)] // MCP logging is deprecated in newer revisions, still used by servers.
pub(crate) fn to_rmcp(level: McpLogLevel) -> rmcp::model::LoggingLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        McpLogLevel::Debug => L::Debug,
        McpLogLevel::Info => L::Info,
        McpLogLevel::Notice => L::Notice,
        McpLogLevel::Warning => L::Warning,
        McpLogLevel::Error => L::Error,
        McpLogLevel::Critical => L::Critical,
        McpLogLevel::Alert => L::Alert,
        McpLogLevel::Emergency => L::Emergency,
    }
}

#[allow(deprecated)]
pub(crate) fn from_rmcp(level: rmcp::model::LoggingLevel) -> McpLogLevel {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => McpLogLevel::Debug,
        L::Info => McpLogLevel::Info,
        L::Notice => McpLogLevel::Notice,
        L::Warning => McpLogLevel::Warning,
        L::Error => McpLogLevel::Error,
        L::Critical => McpLogLevel::Critical,
        L::Alert => McpLogLevel::Alert,
        L::Emergency => McpLogLevel::Emergency,
    }
}

/// Longest message text kept (a server may log whole documents).
const MAX_MESSAGE_CHARS: usize = 2000;

/// A log message's data as one line: a string as it is, anything else as compact JSON; control
/// characters (escape sequences, newlines) become spaces so a server cannot redraw a terminal.
pub(crate) fn message_text(data: &Value) -> String {
    let raw = match data {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut text: String = raw
        .chars()
        .take(MAX_MESSAGE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if raw.chars().count() > MAX_MESSAGE_CHARS {
        text.push('…');
    }
    text
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_order_and_print() {
        assert_eq!(
            "WARNING".parse::<McpLogLevel>().unwrap(),
            McpLogLevel::Warning
        );
        assert!(McpLogLevel::Debug < McpLogLevel::Error);
        assert_eq!(McpLogLevel::Critical.to_string(), "critical");
        let err = "loud".parse::<McpLogLevel>().unwrap_err();
        assert!(err.to_string().contains("unknown MCP log level `loud`"));
        use McpLogLevel::*;
        for level in [
            Debug, Info, Notice, Warning, Error, Critical, Alert, Emergency,
        ] {
            assert_eq!(from_rmcp(to_rmcp(level)), level);
            assert_eq!(level.as_str().parse::<McpLogLevel>().unwrap(), level);
        }
    }

    #[test]
    fn messages_are_one_safe_line() {
        assert_eq!(
            message_text(&Value::String("a\nb\u{1b}[2J".into())),
            "a b [2J"
        );
        assert_eq!(message_text(&serde_json::json!({"k": 1})), r#"{"k":1}"#);
        assert!(message_text(&Value::String("x".repeat(5000))).ends_with('…'));
    }
}
