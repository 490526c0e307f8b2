//! Wire formats: rendering one scripted [`Turn`] as the SSE body a real provider would send.
//!
//! Each submodule turns a turn into a list of complete SSE events (`Frame`s) and says how many of
//! the trailing ones are terminal (so `eof_without_terminal` can drop them). This module must not
//! know about requests, turn selection or faults beyond the "garbage event" each format uses for
//! `malformed_after_bytes`.

pub(crate) mod anthropic;
pub(crate) mod chat;
pub(crate) mod gemini;
pub(crate) mod responses;

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::script::{ToolArguments, Turn, Usage};

/// Which provider API a request spoke.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum WireFormat {
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    OpenAiChat,
    /// OpenAI Responses (`/v1/responses`).
    OpenAiResponses,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Google Gemini (`/v1beta/models/{model}:streamGenerateContent`).
    Gemini,
}

/// A rendered response body: complete SSE events, the last `terminal` of which are the stream's
/// terminal event(s).
pub(crate) struct Rendered {
    pub frames: Vec<Bytes>,
    pub terminal: usize,
}

/// Everything a renderer needs besides the turn.
pub(crate) struct RenderCtx<'a> {
    pub turn: &'a Turn,
    pub turn_index: usize,
    /// Unique per response (ids like `chatcmpl-mock-<n>`).
    pub response_id: u64,
    /// The request's `model` (Gemini: the model named in the path), echoed back.
    pub model: String,
    /// Chat only: `stream_options.include_usage`.
    pub include_usage: bool,
    pub usage: Usage,
}

/// A tool call with its id and arguments text resolved, as sent on the wire.
pub(crate) struct WireCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
    pub chunks: usize,
}

impl RenderCtx<'_> {
    /// Tool searches (as plain function calls) followed by the tool calls.
    pub fn function_calls(&self, include_searches: bool) -> Vec<WireCall> {
        let t = self.turn_index;
        let mut out = Vec::new();
        if include_searches {
            for (i, s) in self.turn.tool_searches.iter().enumerate() {
                out.push(WireCall {
                    id: s.call_id.clone().unwrap_or_else(|| search_id(t, i)),
                    name: s.name.clone().unwrap_or_else(|| "search_tools".to_string()),
                    arguments: s.arguments.to_wire_string(),
                    chunks: 1,
                });
            }
        }
        for (i, c) in self.turn.tool_calls.iter().enumerate() {
            out.push(WireCall {
                id: c.id.clone().unwrap_or_else(|| format!("call_{t}_{i}")),
                name: c.name.clone(),
                arguments: c.arguments.to_wire_string(),
                chunks: c.arg_chunks.unwrap_or(1),
            });
        }
        out
    }

    pub fn text(&self) -> Option<&str> {
        self.turn.text.as_deref().filter(|s| !s.is_empty())
    }

    pub fn thinking(&self) -> Option<&str> {
        self.turn.thinking.as_deref().filter(|s| !s.is_empty())
    }

    /// Text pieces per the turn's `chunk_size`.
    pub fn pieces<'s>(&self, s: &'s str) -> Vec<&'s str> {
        chunk_by_chars(s, self.turn.chunk_size.unwrap_or(0))
    }
}

pub(crate) fn search_id(turn: usize, i: usize) -> String {
    format!("search_{turn}_{i}")
}

/// The JSON value of a tool search's arguments on the Responses wire: the JSON value itself, or
/// the raw text as a JSON string.
pub(crate) fn search_arguments(args: &ToolArguments) -> Value {
    match args {
        ToolArguments::Json(v) => v.clone(),
        ToolArguments::Raw(s) => Value::String(s.clone()),
    }
}

/// Splits `s` into pieces of `size` characters (the last may be shorter). `size == 0`: one piece.
/// An empty string gives no pieces.
pub(crate) fn chunk_by_chars(s: &str, size: usize) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    if size == 0 {
        return vec![s];
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut count = 0;
    for (i, _) in s.char_indices() {
        if count == size {
            out.push(&s[start..i]);
            start = i;
            count = 0;
        }
        count += 1;
    }
    out.push(&s[start..]);
    out
}

/// Splits `s` into `n` pieces of as equal a character count as possible (fewer when `s` has
/// fewer characters). `n == 0` counts as 1. An empty string gives no pieces.
pub(crate) fn split_even(s: &str, n: usize) -> Vec<&str> {
    let chars = s.chars().count();
    if chars == 0 {
        return Vec::new();
    }
    let n = n.clamp(1, chars);
    let boundaries: Vec<usize> = s
        .char_indices()
        .map(|(i, _)| i)
        .chain(std::iter::once(s.len()))
        .collect();
    (0..n)
        .map(|k| {
            let a = boundaries[k * chars / n];
            let b = boundaries[(k + 1) * chars / n];
            &s[a..b]
        })
        .collect()
}

/// `data: <json>\n\n`
pub(crate) fn data_frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

/// `event: <name>\ndata: <json>\n\n`
pub(crate) fn event_frame(name: &str, v: &Value) -> Bytes {
    Bytes::from(format!("event: {name}\ndata: {v}\n\n"))
}

/// Renders a turn in the given format.
pub(crate) fn render(format: WireFormat, ctx: &RenderCtx<'_>) -> Rendered {
    match format {
        WireFormat::OpenAiChat => chat::render(ctx),
        WireFormat::OpenAiResponses => responses::render(ctx),
        WireFormat::Anthropic => anthropic::render(ctx),
        WireFormat::Gemini => gemini::render(ctx),
    }
}

/// The garbage event `malformed_after_bytes` inserts: an event whose `data:` is not JSON. For
/// the event-typed formats it carries a real delta event name so a client dispatching on the
/// name really tries to parse it.
pub(crate) fn garbage_frame(format: WireFormat) -> Bytes {
    const DATA: &str = "data: {\"agentloop_testkit\": malformed json\n\n";
    Bytes::from(match format {
        WireFormat::OpenAiChat => DATA.to_string(),
        WireFormat::OpenAiResponses => format!("event: response.output_text.delta\n{DATA}"),
        WireFormat::Anthropic => format!("event: content_block_delta\n{DATA}"),
        WireFormat::Gemini => "data: {\"agentloop_testkit\": malformed json\r\n\r\n".to_string(),
    })
}

/// A provider-shaped JSON error body.
pub(crate) fn error_body(format: WireFormat, status: u16, message: &str) -> Value {
    match format {
        WireFormat::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        WireFormat::Gemini => {
            let kind = match status {
                400 => "INVALID_ARGUMENT",
                401 => "UNAUTHENTICATED",
                403 => "PERMISSION_DENIED",
                404 => "NOT_FOUND",
                409 => "ABORTED",
                429 => "RESOURCE_EXHAUSTED",
                499 => "CANCELLED",
                500 => "INTERNAL",
                503 => "UNAVAILABLE",
                504 => "DEADLINE_EXCEEDED",
                _ => "UNKNOWN",
            };
            json!({"error": {"code": status, "message": message, "status": kind}})
        }
        WireFormat::OpenAiChat | WireFormat::OpenAiResponses => {
            let (kind, code) = match status {
                400 => ("invalid_request_error", Value::Null),
                401 => ("invalid_request_error", json!("invalid_api_key")),
                429 => ("requests", json!("rate_limit_exceeded")),
                500..=599 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// Seconds since the Unix epoch (for `created` fields).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Estimated output tokens when the script gives no usage.
pub(crate) fn estimated_output_tokens(turn: &Turn) -> u64 {
    let mut chars = 0usize;
    chars += turn.text.as_deref().map_or(0, |s| s.chars().count());
    chars += turn.thinking.as_deref().map_or(0, |s| s.chars().count());
    for c in &turn.tool_calls {
        chars += c.name.len() + c.arguments.to_wire_string().chars().count();
    }
    for s in &turn.tool_searches {
        chars += s.arguments.to_wire_string().chars().count();
    }
    ((chars / 4) as u64).max(1)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn chunking() {
        assert_eq!(chunk_by_chars("abcde", 2), vec!["ab", "cd", "e"]);
        assert_eq!(chunk_by_chars("abc", 0), vec!["abc"]);
        assert_eq!(chunk_by_chars("東京x", 1), vec!["東", "京", "x"]);
        assert!(chunk_by_chars("", 3).is_empty());
        assert_eq!(split_even("abcdefg", 3), vec!["ab", "cd", "efg"]);
        assert_eq!(split_even("ab", 5), vec!["a", "b"]);
        assert_eq!(split_even("°°°°", 2), vec!["°°", "°°"]);
        assert_eq!(split_even("{}", 0), vec!["{}"]);
        assert!(split_even("", 4).is_empty());
    }
}
