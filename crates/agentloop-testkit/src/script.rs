//! The script: what the mock model answers, turn by turn, and which faults it injects.
//!
//! This module owns the JSON script format and its Rust mirror (plain data plus small builder
//! methods). It knows nothing about HTTP or about any provider's wire format: `wire` renders a
//! [`Turn`] into SSE frames, `server` decides which turn and which fault a request gets.
//!
//! The exact JSON shape is documented in the crate's README and on [`Script`].

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A whole script: the turns the mock model plays and how requests are matched to them.
///
/// JSON form (every key but `turns` is optional; a bare JSON array is accepted as `turns`):
///
/// ```json
/// {
///   "mode": "by_position",
///   "repeat": false,
///   "turns": [
///     {"text": "Let me look.", "tool_calls": [{"id": "call_1", "name": "read_file", "arguments": {"path": "a.txt"}}]},
///     {"text": "Done."}
///   ]
/// }
/// ```
///
/// ```
/// use agentloop_testkit::{Script, Turn, ToolCall};
/// let script = Script::from_json(r#"[{"text": "hi"}]"#).unwrap();
/// assert_eq!(script.turns[0].text.as_deref(), Some("hi"));
///
/// let built = Script::new(vec![
///     Turn::tool_calls(vec![ToolCall::new("call_1", "read_file", serde_json::json!({"path": "a"}))]),
///     Turn::text("done"),
/// ]);
/// assert_eq!(built.turns.len(), 2);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// How a request is matched to a turn. Default: [`Mode::ByPosition`].
    #[serde(default)]
    pub mode: Mode,
    /// What happens past the last turn. `false` (default): such a request gets HTTP 500 with a
    /// `script_exhausted` error. `true`: the turns start over (turn index modulo the number of
    /// turns; in sequential mode the queue starts over, faults included).
    #[serde(default)]
    pub repeat: bool,
    /// The turns, in conversation order.
    pub turns: Vec<Turn>,
    /// The model ids `GET /v1/models` lists (default: `["mock-model"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub models: Vec<String>,
}

/// How a request is matched to a turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Mode {
    /// The turn index is the number of assistant turns already in the request's history, so
    /// every conversation plays the script from the start independently (many concurrent
    /// conversations can share one server). Fault attempts are counted per
    /// (wire format, conversation fingerprint, turn index); see the crate docs.
    #[default]
    ByPosition,
    /// Requests take entries from one global queue in arrival order, whatever their content.
    /// A turn with `n` faults occupies `n + 1` queue entries: its faults, then the normal answer.
    Sequential,
}

/// One assistant turn: what the model "says" in answer to one request.
///
/// Rendering order in every wire format: thinking, then text, then tool searches, then tool
/// calls. Empty or absent parts are not emitted.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Visible text. Absent or `""`: no text part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Reasoning text (Chat `reasoning_content`, Responses reasoning summary, Anthropic
    /// `thinking` block). Absent or `""`: no thinking part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The Anthropic thinking block's signature (sent as one `signature_delta`; default
    /// `"mock-signature"`) and the Gemini `thoughtSignature` (default `mock-sig-<responseId>`).
    /// Ignored by the OpenAI formats.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_signature: Option<String>,
    /// Tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Client-executed tool searches. OpenAI Responses: `tool_search_call` output items (see the
    /// crate docs for the exact shape). Chat and Anthropic: ordinary tool calls of the function
    /// named [`ToolSearch::name`] (default `search_tools`), emitted before `tool_calls`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_searches: Vec<ToolSearch>,
    /// Token usage reported for this turn. Absent: estimated (input: request body bytes / 4,
    /// output: generated characters / 4, each at least 1; no cache tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why the turn ends. Default: `tool_use` when the turn has tool calls or tool searches,
    /// else `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Characters per text (and thinking) delta. Absent or 0: the whole text in one delta.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Delay before the first byte of the response body (after the headers), in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first_byte_delay_ms: u64,
    /// Delay before every SSE event after the first one, in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub chunk_delay_ms: u64,
    /// Faults for successive attempts at this turn: attempt 1 gets `faults[0]`, attempt 2
    /// `faults[1]`, …; once the list is used up the turn is served normally.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub faults: Vec<Fault>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// One tool call in a [`Turn`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The call id (Chat `tool_calls[].id`, Responses `call_id`, Anthropic `tool_use.id`).
    /// Absent: `call_<turn>_<n>` (turn index and position in the turn, both from 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool name.
    pub name: String,
    /// The arguments. Default `{}`.
    #[serde(default)]
    pub arguments: ToolArguments,
    /// Number of argument deltas the arguments text is split into (by characters, as evenly as
    /// possible). Absent or 0: one delta. Anthropic additionally sends an empty first fragment,
    /// as the real API does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg_chunks: Option<usize>,
}

/// Tool-call arguments as written in the script.
///
/// In JSON, a string is [`ToolArguments::Raw`] (sent verbatim, so it can be invalid JSON);
/// anything else is [`ToolArguments::Json`] (sent in compact serialization).
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    /// A JSON value, serialized compactly on the wire.
    Json(Value),
    /// Text sent verbatim as the arguments string.
    Raw(String),
}

impl Default for ToolArguments {
    fn default() -> Self {
        ToolArguments::Json(Value::Object(serde_json::Map::new()))
    }
}

impl ToolArguments {
    /// The arguments text as it goes on the wire.
    pub fn to_wire_string(&self) -> String {
        match self {
            ToolArguments::Json(v) => v.to_string(),
            ToolArguments::Raw(s) => s.clone(),
        }
    }
}

impl Serialize for ToolArguments {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolArguments::Json(v) => v.serialize(s),
            ToolArguments::Raw(r) => r.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ToolArguments {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Value::deserialize(d)? {
            Value::String(s) => ToolArguments::Raw(s),
            other => ToolArguments::Json(other),
        })
    }
}

/// A client-executed tool search in a [`Turn`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSearch {
    /// The call id. Absent: `search_<turn>_<n>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<String>,
    /// The search arguments, e.g. `{"query": "weather"}`. Default `{}`.
    #[serde(default)]
    pub arguments: ToolArguments,
    /// The function name used on the Chat and Anthropic wires, where a tool search is an
    /// ordinary tool call. Default `search_tools`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Token usage for a turn. Values go on the wire verbatim, in each provider's field
/// (no provider-specific arithmetic).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Chat `prompt_tokens`, Responses `input_tokens`, Anthropic `input_tokens`; on the Gemini
    /// wire `promptTokenCount` is this plus the cache reads.
    #[serde(default)]
    pub input_tokens: u64,
    /// Chat `completion_tokens`, Responses `output_tokens`, Anthropic `output_tokens`, Gemini
    /// `candidatesTokenCount`.
    #[serde(default)]
    pub output_tokens: u64,
    /// Chat `prompt_tokens_details.cached_tokens`, Responses
    /// `input_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, Gemini
    /// `cachedContentTokenCount`.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// Responses `input_tokens_details.cache_write_tokens`, Anthropic
    /// `cache_creation_input_tokens`. Not sent on the Chat and Gemini wires.
    #[serde(default)]
    pub cache_write_tokens: u64,
}

/// Why a turn ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// Chat `stop`, Anthropic `end_turn`, Responses `response.completed`.
    #[serde(alias = "end_turn")]
    Stop,
    /// Chat `tool_calls`, Anthropic `tool_use`, Responses `response.completed`.
    #[serde(alias = "tool_calls")]
    ToolUse,
    /// Chat `length`, Anthropic `max_tokens`, Responses `response.incomplete` with
    /// `incomplete_details.reason = "max_output_tokens"`.
    #[serde(alias = "max_tokens")]
    Length,
}

/// A fault injected into one attempt at a turn.
///
/// JSON: an object with exactly one fault kind:
/// `{"status": 429, "headers": {"retry-after": "1"}, "body": "..."}`,
/// `{"reset_after_bytes": K}`, `{"stall_after_bytes": K}`, `{"malformed_after_bytes": K}`,
/// `{"eof_without_terminal": true}`, `{"keep_alive_after_bytes": K}`, `{"huge_line_bytes": N}`
/// or `{"replace_in_body": {"find": "…", "with": "…"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawFault", into = "RawFault")]
#[non_exhaustive]
pub enum Fault {
    /// An HTTP error response instead of a stream.
    Status {
        /// The HTTP status code.
        status: u16,
        /// Extra response headers (e.g. `retry-after`).
        headers: BTreeMap<String, String>,
        /// The response body. Absent: a provider-shaped JSON error body. The content type is
        /// `application/json` unless `headers` sets one.
        body: Option<String>,
    },
    /// Send the first K bytes of the normal body, then abort the connection without finishing
    /// the chunked body (the client sees an incomplete body / connection error). On HTTP/2 only
    /// the stream is reset (`RST_STREAM`, `INTERNAL_ERROR`).
    ResetAfterBytes(usize),
    /// Send the first K bytes of the normal body, then nothing more; the connection stays open
    /// until the server shuts down (the client has to time out).
    StallAfterBytes(usize),
    /// Insert a garbage SSE event (a `data:` line that is not valid JSON) at the first event
    /// boundary at or after byte K of the normal body, then continue with the rest of the
    /// normal stream, terminal event included.
    MalformedAfterBytes(usize),
    /// The normal stream minus its terminal event(s) (`data: [DONE]`, `message_stop`,
    /// `response.completed` / `response.incomplete`), then a clean end of the body.
    EofWithoutTerminal,
    /// Send the first K bytes of the normal body, then only SSE keep-alive comments
    /// (`: keep-alive`, every 50 ms) until the client gives up.
    KeepAliveAfterBytes(usize),
    /// Instead of the normal body, one `data:` line of N bytes that never ends (no newline),
    /// sent in 64 KiB pieces, then the end of the body.
    HugeLineBytes(usize),
    /// The normal body with every occurrence of `find` replaced by `with` (raw bytes on the
    /// wire: e.g. a lone surrogate escape no JSON encoder would produce).
    ReplaceInBody {
        /// Text to find in the rendered body.
        find: String,
        /// Its replacement.
        with: String,
    },
}

impl Fault {
    /// An HTTP error with the default body and no extra headers.
    pub fn status(status: u16) -> Self {
        Fault::Status {
            status,
            headers: BTreeMap::new(),
            body: None,
        }
    }

    /// An HTTP 429 with `retry-after: <secs>`.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        let mut headers = BTreeMap::new();
        headers.insert("retry-after".to_string(), retry_after_secs.to_string());
        Fault::Status {
            status: 429,
            headers,
            body: None,
        }
    }
}

#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFault {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<u16>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    headers: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reset_after_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    stall_after_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    malformed_after_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    eof_without_terminal: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keep_alive_after_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    huge_line_bytes: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    replace_in_body: Option<RawReplace>,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawReplace {
    find: String,
    with: String,
}

impl TryFrom<RawFault> for Fault {
    type Error = String;

    fn try_from(r: RawFault) -> Result<Self, String> {
        let present = [
            ("status", r.status.is_some()),
            ("reset_after_bytes", r.reset_after_bytes.is_some()),
            ("stall_after_bytes", r.stall_after_bytes.is_some()),
            ("malformed_after_bytes", r.malformed_after_bytes.is_some()),
            ("eof_without_terminal", r.eof_without_terminal == Some(true)),
            ("keep_alive_after_bytes", r.keep_alive_after_bytes.is_some()),
            ("huge_line_bytes", r.huge_line_bytes.is_some()),
            ("replace_in_body", r.replace_in_body.is_some()),
        ];
        let kinds: Vec<&str> = present
            .iter()
            .filter(|(_, set)| *set)
            .map(|(kind, _)| *kind)
            .collect();
        if kinds.len() != 1 {
            return Err(format!(
                "a fault needs exactly one of status, reset_after_bytes, stall_after_bytes, \
                 malformed_after_bytes, eof_without_terminal: true, keep_alive_after_bytes, \
                 huge_line_bytes, replace_in_body (found: {kinds:?})"
            ));
        }
        if r.status.is_none() && (r.headers.is_some() || r.body.is_some()) {
            return Err("`headers` and `body` only go with `status`".to_string());
        }
        Ok(if let Some(status) = r.status {
            if !(100..=999).contains(&status) {
                return Err(format!("invalid HTTP status {status}"));
            }
            Fault::Status {
                status,
                headers: r.headers.unwrap_or_default(),
                body: r.body,
            }
        } else if let Some(k) = r.reset_after_bytes {
            Fault::ResetAfterBytes(k)
        } else if let Some(k) = r.stall_after_bytes {
            Fault::StallAfterBytes(k)
        } else if let Some(k) = r.malformed_after_bytes {
            Fault::MalformedAfterBytes(k)
        } else if let Some(k) = r.keep_alive_after_bytes {
            Fault::KeepAliveAfterBytes(k)
        } else if let Some(n) = r.huge_line_bytes {
            Fault::HugeLineBytes(n)
        } else if let Some(RawReplace { find, with }) = r.replace_in_body {
            if find.is_empty() {
                return Err("`replace_in_body.find` must not be empty".to_string());
            }
            Fault::ReplaceInBody { find, with }
        } else {
            Fault::EofWithoutTerminal
        })
    }
}

impl From<Fault> for RawFault {
    fn from(f: Fault) -> Self {
        // Each fault sets one field (a status its three) of an otherwise empty raw fault.
        let mut raw = RawFault::default();
        match f {
            Fault::Status {
                status,
                headers,
                body,
            } => {
                raw.status = Some(status);
                raw.headers = (!headers.is_empty()).then_some(headers);
                raw.body = body;
            }
            Fault::ResetAfterBytes(k) => raw.reset_after_bytes = Some(k),
            Fault::StallAfterBytes(k) => raw.stall_after_bytes = Some(k),
            Fault::MalformedAfterBytes(k) => raw.malformed_after_bytes = Some(k),
            Fault::EofWithoutTerminal => raw.eof_without_terminal = Some(true),
            Fault::KeepAliveAfterBytes(k) => raw.keep_alive_after_bytes = Some(k),
            Fault::HugeLineBytes(n) => raw.huge_line_bytes = Some(n),
            Fault::ReplaceInBody { find, with } => {
                raw.replace_in_body = Some(RawReplace { find, with })
            }
        }
        raw
    }
}

/// A script that could not be loaded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The script file could not be read.
    #[error("cannot read script {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The text is not a valid script.
    #[error("invalid script: {0}")]
    Json(#[from] serde_json::Error),
    /// The script parsed but makes no sense (e.g. no turns).
    #[error("invalid script: {0}")]
    Invalid(String),
}

impl Script {
    /// A by-position script with these turns.
    pub fn new(turns: Vec<Turn>) -> Self {
        Script {
            mode: Mode::ByPosition,
            repeat: false,
            turns,
            models: Vec::new(),
        }
    }

    /// A sequential script with these turns.
    pub fn sequential(turns: Vec<Turn>) -> Self {
        Script {
            mode: Mode::Sequential,
            repeat: false,
            turns,
            models: Vec::new(),
        }
    }

    setters! {
        /// Sets [`Script::models`].
        pub fn with_models(models: Vec<String>) => models = models;
        /// Sets [`Script::repeat`].
        pub fn with_repeat(repeat: bool) => repeat = repeat;
    }

    /// Parses a script from JSON text: an object (see [`Script`]) or a bare array of turns.
    pub fn from_json(text: &str) -> Result<Self, ScriptError> {
        let value: Value = serde_json::from_str(text)?;
        Self::from_value(value)
    }

    /// Parses a script from a JSON value: an object (see [`Script`]) or a bare array of turns.
    pub fn from_value(value: Value) -> Result<Self, ScriptError> {
        let script = match value {
            Value::Array(_) => Script::new(serde_json::from_value(value)?),
            other => serde_json::from_value(other)?,
        };
        script.validate()?;
        Ok(script)
    }

    /// Reads and parses a script file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Io {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_json(&text)
    }

    /// Checks what serde cannot: at least one turn, non-empty tool names.
    pub fn validate(&self) -> Result<(), ScriptError> {
        if self.turns.is_empty() {
            return Err(ScriptError::Invalid("the script has no turns".to_string()));
        }
        for (t, turn) in self.turns.iter().enumerate() {
            for call in &turn.tool_calls {
                if call.name.is_empty() {
                    return Err(ScriptError::Invalid(format!(
                        "turn {t}: a tool call has an empty name"
                    )));
                }
            }
        }
        Ok(())
    }
}

impl Turn {
    /// A turn that answers with this text.
    pub fn text(text: impl Into<String>) -> Self {
        Turn {
            text: Some(text.into()),
            ..Turn::default()
        }
    }

    /// A turn that makes these tool calls.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Turn {
            tool_calls: calls,
            ..Turn::default()
        }
    }

    setters! {
        /// Sets the text.
        pub fn with_text(text: impl Into<String>) => text = Some(text.into());
        /// Sets the thinking text.
        pub fn with_thinking(thinking: impl Into<String>) => thinking = Some(thinking.into());
    }

    /// Adds a tool call.
    pub fn with_tool_call(mut self, call: ToolCall) -> Self {
        self.tool_calls.push(call);
        self
    }

    /// Adds a client-executed tool search.
    pub fn with_tool_search(mut self, search: ToolSearch) -> Self {
        self.tool_searches.push(search);
        self
    }

    /// Sets the usage.
    pub fn with_usage(mut self, input_tokens: u64, output_tokens: u64) -> Self {
        self.usage = Some(Usage {
            input_tokens,
            output_tokens,
            ..Usage::default()
        });
        self
    }

    setters! {
        /// Sets the stop reason.
        pub fn with_stop_reason(stop_reason: StopReason) => stop_reason = Some(stop_reason);
        /// Sets the characters per text delta.
        pub fn with_chunk_size(chars: usize) => chunk_size = Some(chars);
    }

    /// Sets the first-byte and per-event delays, in milliseconds.
    pub fn with_delays(mut self, first_byte_delay_ms: u64, chunk_delay_ms: u64) -> Self {
        self.first_byte_delay_ms = first_byte_delay_ms;
        self.chunk_delay_ms = chunk_delay_ms;
        self
    }

    /// Adds a fault for the next attempt not yet covered by a fault.
    pub fn with_fault(mut self, fault: Fault) -> Self {
        self.faults.push(fault);
        self
    }

    /// The effective stop reason: the scripted one, or `tool_use` when there are tool calls or
    /// tool searches, else `stop`.
    pub fn effective_stop_reason(&self) -> StopReason {
        self.stop_reason.unwrap_or(
            if self.tool_calls.is_empty() && self.tool_searches.is_empty() {
                StopReason::Stop
            } else {
                StopReason::ToolUse
            },
        )
    }
}

impl ToolCall {
    /// A call with this id, name and JSON arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCall {
            id: Some(id.into()),
            name: name.into(),
            arguments: ToolArguments::Json(arguments),
            arg_chunks: None,
        }
    }

    /// A call whose arguments text is sent verbatim (it may be invalid JSON).
    pub fn raw(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            arguments: ToolArguments::Raw(arguments.into()),
            ..ToolCall::new(id, name, Value::Null)
        }
    }

    /// Splits the arguments into `n` deltas.
    pub fn with_arg_chunks(mut self, n: usize) -> Self {
        self.arg_chunks = Some(n);
        self
    }
}

impl ToolSearch {
    /// A tool search with this call id and arguments.
    pub fn new(call_id: impl Into<String>, arguments: Value) -> Self {
        ToolSearch {
            call_id: Some(call_id.into()),
            arguments: ToolArguments::Json(arguments),
            name: None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn full_script_parses() {
        let s = Script::from_value(json!({
            "mode": "sequential",
            "repeat": true,
            "turns": [{
                "text": "hi", "thinking": "hmm", "chunk_size": 2,
                "tool_calls": [{"id": "c1", "name": "f", "arguments": {"a": 1}, "arg_chunks": 3},
                               {"name": "g", "arguments": "{\"broken"}],
                "usage": {"input_tokens": 5, "output_tokens": 7, "cache_read_tokens": 2},
                "stop_reason": "length",
                "first_byte_delay_ms": 10, "chunk_delay_ms": 1,
                "faults": [{"status": 429, "headers": {"retry-after": "1"}, "body": "{}"},
                           {"reset_after_bytes": 10}, {"stall_after_bytes": 3},
                           {"malformed_after_bytes": 0}, {"eof_without_terminal": true}]
            }]
        }))
        .unwrap();
        assert_eq!(s.mode, Mode::Sequential);
        let t = &s.turns[0];
        assert_eq!(
            t.tool_calls[1].arguments,
            ToolArguments::Raw("{\"broken".into())
        );
        assert_eq!(t.faults.len(), 5);
        assert_eq!(t.faults[1], Fault::ResetAfterBytes(10));
        assert_eq!(t.effective_stop_reason(), StopReason::Length);
        // Round trip.
        let back = Script::from_value(serde_json::to_value(&s).unwrap()).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn bad_faults_and_typos_are_rejected() {
        let two = Script::from_json(r#"[{"faults": [{"status": 500, "reset_after_bytes": 1}]}]"#)
            .unwrap_err()
            .to_string();
        assert!(
            two.contains(r#"(found: ["status", "reset_after_bytes"])"#),
            "{two}"
        );
        assert!(Script::from_json(r#"[{"faults": [{}]}]"#).is_err());
        // `eof_without_terminal: false` is no fault kind.
        assert!(Script::from_json(r#"[{"faults": [{"eof_without_terminal": false}]}]"#).is_err());
        assert!(Script::from_json(r#"[{"faults": [{"eof_without_terminal": true}]}]"#).is_ok());
        assert!(Script::from_json(r#"[{"txt": "typo"}]"#).is_err());
        assert!(Script::from_json(r#"[]"#).is_err());
    }

    #[test]
    fn default_stop_reason() {
        assert_eq!(Turn::text("x").effective_stop_reason(), StopReason::Stop);
        let t = Turn::tool_calls(vec![ToolCall::new("a", "b", json!({}))]);
        assert_eq!(t.effective_stop_reason(), StopReason::ToolUse);
    }
}
