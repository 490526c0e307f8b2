//! How every store writes a message and a session's JSON columns, and reads them back: one
//! encoding, so the stores agree byte for byte (exports, the conformance suite).

// A build without any store (features `sqlite` and `postgres` off) uses none of it.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use super::{SessionError, SessionSettings, SessionStats};
use crate::transcript::{Message, Part, ToolArguments};

/// The deepest JSON nesting a stored message may have. `serde_json` refuses to read anything
/// nested deeper than 128 levels (its recursion limit), so a message written deeper could never
/// be loaded, shown or exported again; the margin covers the message's own envelope.
pub const MAX_STORED_DEPTH: usize = 120;

/// The nesting depth of JSON text (arrays and objects), counted without parsing it (so it
/// cannot hit the recursion limit itself).
pub(crate) fn json_depth(json: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `message` as JSON the reader accepts: tool-call arguments nested too deeply are kept as their
/// exact text ([`ToolArguments::Unparsed`], stored as a string) instead of as nested JSON; a
/// message still too deep after that is refused.
pub(crate) fn storable_json(message: &Message) -> Result<String, SessionError> {
    let json = serde_json::to_string(message).map_err(SessionError::Serialize)?;
    if json_depth(&json) <= MAX_STORED_DEPTH {
        return Ok(json);
    }
    let mut flattened = message.clone();
    for part in &mut flattened.content {
        if let Part::ToolCall(call) = part {
            if let ToolArguments::Json(value) = &call.arguments {
                let text = value.to_string();
                if json_depth(&text) > MAX_STORED_DEPTH / 2 {
                    call.arguments = ToolArguments::Unparsed(text);
                }
            }
        }
    }
    let json = serde_json::to_string(&flattened).map_err(SessionError::Serialize)?;
    if json_depth(&json) > MAX_STORED_DEPTH {
        return Err(SessionError::Invalid {
            what: "message",
            reason: format!(
                "its JSON is nested more than {MAX_STORED_DEPTH} levels deep, more than a \
                 stored session can be read back with"
            ),
        });
    }
    Ok(json)
}

/// The `stats` column's JSON.
pub(crate) fn stats_json(stats: &SessionStats) -> Result<String, SessionError> {
    serde_json::to_string(stats).map_err(SessionError::Serialize)
}

/// The `settings` column's JSON (the workspace has its own column) and the workspace.
pub(crate) fn settings_columns(
    settings: &SessionSettings,
) -> Result<(Option<String>, String), SessionError> {
    let mut settings = settings.clone().sanitized();
    let workspace = settings.workspace.take();
    let json = serde_json::to_string(&settings).map_err(SessionError::Serialize)?;
    Ok((workspace, json))
}

/// A JSON column read leniently: unreadable text (an edited database) gives the default rather
/// than making the whole session unlistable.
pub(crate) fn lenient_json<T: serde::de::DeserializeOwned + Default>(text: Option<String>) -> T {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}
