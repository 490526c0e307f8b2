//! The provider-neutral transcript: messages, their parts, usage and stop reasons.
//!
//! Everything the loop, the providers, the executor and the session store exchange is expressed in
//! these types. They own no behaviour beyond construction helpers and a stable serde shape; they
//! must not know about HTTP, tools' handlers or storage.
//!
//! # JSON shape (stable)
//!
//! A [`Message`] serializes as an object with `role` (`"user"`, `"assistant"`, `"tool_result"`,
//! `"custom"`), `content` (an array of parts) and `timestamp_ms`. Assistant messages add `model`,
//! `provider`, `response_id`, `usage`, `stop_reason` and `error_message` when set; custom messages add
//! `custom_type`. Optional fields are omitted when empty, and unknown fields are ignored on read,
//! so newer writers stay readable.
//!
//! Each part is an object tagged by `type`:
//!
//! ```json
//! {"type": "text", "text": "hello"}
//! {"type": "thinking", "thinking": "…", "signature": "…"}
//! {"type": "image", "media_type": "image/png", "data": "<base64>"}
//! {"type": "tool_call", "id": "call-1", "tool_name": "echo", "arguments": {"text": "hi"}}
//! {"type": "tool_call", "id": "call-2", "tool_name": "echo", "raw_arguments": "{\"text\": "}
//! {"type": "tool_result", "call_id": "call-1", "tool_name": "echo", "content": "hi", "is_error": false}
//! ```
//!
//! Text and tool-call parts may also carry `provider_data`, an opaque object that only the adapter
//! that produced the part reads back (see [`ProviderData`]):
//!
//! ```json
//! {"type": "text", "text": "hello", "provider_data": {"provider": "openai_responses", "data": {"id": "msg_1"}}}
//! {"type": "tool_call", "id": "call-3", "tool_name": "echo", "arguments": {}, "provider_data": {"provider": "gemini", "data": {"thoughtSignature": "…"}}}
//! ```
//!
//! A tool call's `arguments` hold whatever JSON value the model sent (normally an object, but a
//! string, `null` or an array are kept as received); text that was not JSON at all is stored under
//! `raw_arguments` instead, byte for byte, so the executor can answer "malformed arguments" and a
//! replay sends back exactly what the model produced.

use std::collections::HashSet;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Who produced a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Role {
    /// A person (or the application speaking for one).
    User,
    /// The model.
    Assistant,
    /// The result of one tool call, sent back to the model.
    ToolResult,
    /// A message injected by an extension; kept in the transcript and shown to the model as a
    /// user message.
    Custom,
}

/// Why the model stopped producing an assistant message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StopReason {
    /// The model finished its answer.
    Stop,
    /// The output-token limit cut the answer off.
    Length,
    /// The model asked for tool calls.
    ToolUse,
    /// The model refused; the refusal text is kept in the message.
    Refusal,
    /// The provider or the stream failed; see the message's `error_message`.
    Error,
    /// The caller aborted the run while the message was streaming.
    Aborted,
}

/// Token usage of one assistant message (as reported by the provider).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens not read from the cache.
    pub input_tokens: u64,
    /// Generated tokens (including reasoning tokens where the provider counts them there).
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache.
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the provider's prompt cache.
    #[serde(skip_serializing_if = "is_zero")]
    pub cache_write_tokens: u64,
    /// Cost in US dollars, when a price is known for the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Usage {
    /// Adds another message's usage to this running total.
    pub fn accumulate(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
        };
    }
}

/// An image, inline as base64.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePart {
    /// MIME type, e.g. `image/png`.
    pub media_type: String,
    /// Base64-encoded bytes.
    pub data: String,
}

impl ImagePart {
    /// The image type of a file that starts with `head`, from its magic bytes: PNG, JPEG, GIF
    /// or WebP (the formats every supported provider accepts), else `None`.
    ///
    /// ```
    /// use agentloop::transcript::ImagePart;
    /// assert_eq!(ImagePart::sniff_media_type(b"\x89PNG\r\n\x1a\n...."), Some("image/png"));
    /// assert_eq!(ImagePart::sniff_media_type(b"hello"), None);
    /// ```
    pub fn sniff_media_type(head: &[u8]) -> Option<&'static str> {
        if head.starts_with(b"\x89PNG\r\n\x1a\n") {
            Some("image/png")
        } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
            Some("image/jpeg")
        } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
            Some("image/gif")
        } else if head.len() >= 12 && head.starts_with(b"RIFF") && &head[8..12] == b"WEBP" {
            Some("image/webp")
        } else {
            None
        }
    }

    /// An image part holding `bytes`, typed by [`sniff_media_type`](Self::sniff_media_type);
    /// `None` when the bytes are not a recognised image.
    pub fn from_bytes(bytes: &[u8]) -> Option<ImagePart> {
        use base64::Engine as _;
        let media_type = Self::sniff_media_type(bytes)?;
        Some(ImagePart {
            media_type: media_type.to_owned(),
            data: base64::engine::general_purpose::STANDARD.encode(bytes),
        })
    }
}

/// Opaque data a provider attached to a part of its reply, to be sent back verbatim when the
/// conversation is replayed to the same provider and model: Gemini's `thoughtSignature` on a
/// function call or text part, the OpenAI Responses output-item ids (`msg_…`, `fc_…`) that must
/// accompany encrypted reasoning. (Reasoning itself carries its payload in
/// [`ThinkingPart::signature`].)
///
/// Only the adapter named by `provider` reads `data`; every other adapter, and the same adapter
/// talking to another model, drops it on replay (see
/// [`providers::replay`](crate::providers::replay)). The session store keeps it as part of the
/// message's JSON, so a resumed session replays it too.
///
/// ```
/// use agentloop::transcript::ProviderData;
/// use serde_json::json;
///
/// let data = ProviderData::new("gemini", json!({"thoughtSignature": "c2ln"}));
/// assert_eq!(data.get("gemini", "thoughtSignature"), Some("c2ln"));
/// assert_eq!(data.get("anthropic", "thoughtSignature"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ProviderData {
    /// The adapter that produced the data (its provider name, e.g. `"gemini"`).
    pub provider: String,
    /// The data itself, in the adapter's own shape (normally an object).
    pub data: Value,
}

impl ProviderData {
    /// Data for `provider`.
    pub fn new(provider: impl Into<String>, data: Value) -> Self {
        ProviderData {
            provider: provider.into(),
            data,
        }
    }

    /// The string at `key` of the data, when the data belongs to `provider` and holds one.
    pub fn get(&self, provider: &str, key: &str) -> Option<&str> {
        if self.provider != provider {
            return None;
        }
        self.data.get(key).and_then(Value::as_str)
    }
}

/// A model's reasoning, as far as the provider exposes it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingPart {
    /// Readable reasoning text (may be a summary); empty when redacted.
    #[serde(default)]
    pub thinking: String,
    /// Provider signature or encrypted payload that must be sent back verbatim to the same model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// True when the provider sent only an opaque (redacted / encrypted) payload.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redacted: bool,
}

/// The arguments of a tool call, exactly as the model produced them.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolArguments {
    /// Valid JSON. Normally an object; any other value (a string, `null`, an array) is kept as
    /// received and answered by the executor with a "malformed arguments" result.
    Json(Value),
    /// Text that is not valid JSON (truncated or garbled output), kept byte for byte.
    Unparsed(String),
}

impl ToolArguments {
    /// Parses streamed argument text: an empty string (what many servers send for a tool without
    /// parameters) becomes `{}`, valid JSON becomes [`ToolArguments::Json`], anything else is kept
    /// as [`ToolArguments::Unparsed`].
    pub fn parse(text: &str) -> Self {
        if text.trim().is_empty() {
            return ToolArguments::Json(Value::Object(Default::default()));
        }
        // A lone surrogate escape (`\ud800`) becomes U+FFFD rather than making the arguments
        // unreadable.
        match crate::json::lossy_json::parse_value(text) {
            Ok(value) => ToolArguments::Json(value),
            Err(_) => ToolArguments::Unparsed(text.to_owned()),
        }
    }

    /// The arguments as a JSON object, when they are one.
    pub fn as_object(&self) -> Option<&serde_json::Map<String, Value>> {
        match self {
            ToolArguments::Json(Value::Object(map)) => Some(map),
            _ => None,
        }
    }

    /// The arguments rendered as JSON text (unparsed text is returned as received).
    pub fn to_json_string(&self) -> String {
        match self {
            ToolArguments::Json(value) => value.to_string(),
            ToolArguments::Unparsed(text) => text.clone(),
        }
    }
}

impl Default for ToolArguments {
    fn default() -> Self {
        ToolArguments::Json(Value::Object(Default::default()))
    }
}

impl From<Value> for ToolArguments {
    fn from(value: Value) -> Self {
        ToolArguments::Json(value)
    }
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCallPart {
    /// Provider-assigned call id; the matching result carries it as `call_id`.
    pub id: String,
    /// Name of the tool to run.
    pub tool_name: String,
    /// Arguments as received.
    pub arguments: ToolArguments,
    /// Opaque data of the provider that produced the call (see [`ProviderData`]).
    pub provider_data: Option<ProviderData>,
}

impl ToolCallPart {
    /// Builds a call with JSON arguments.
    pub fn new(id: impl Into<String>, tool_name: impl Into<String>, arguments: Value) -> Self {
        ToolCallPart {
            id: id.into(),
            tool_name: tool_name.into(),
            arguments: ToolArguments::Json(arguments),
            provider_data: None,
        }
    }
}

// Serialized by hand so that unparsed text lives under its own key (`raw_arguments`) instead of
// being confused with a JSON string argument.
#[derive(Serialize, Deserialize)]
struct ToolCallWire {
    id: String,
    tool_name: String,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    arguments: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    raw_arguments: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    provider_data: Option<ProviderData>,
}

/// Distinguishes `"arguments": null` (present, JSON null) from a missing key.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl Serialize for ToolCallPart {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let (arguments, raw_arguments) = match &self.arguments {
            ToolArguments::Json(v) => (Some(v.clone()), None),
            ToolArguments::Unparsed(t) => (None, Some(t.clone())),
        };
        ToolCallWire {
            id: self.id.clone(),
            tool_name: self.tool_name.clone(),
            arguments,
            raw_arguments,
            provider_data: self.provider_data.clone(),
        }
        .serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ToolCallPart {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let wire = ToolCallWire::deserialize(deserializer)?;
        let arguments = match (wire.arguments, wire.raw_arguments) {
            (_, Some(raw)) => ToolArguments::Unparsed(raw),
            (Some(v), None) => ToolArguments::Json(v),
            (None, None) => ToolArguments::default(),
        };
        Ok(ToolCallPart {
            id: wire.id,
            tool_name: wire.tool_name,
            arguments,
            provider_data: wire.provider_data,
        })
    }
}

/// The outcome of one tool call, sent back to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResultPart {
    /// Id of the call this answers.
    pub call_id: String,
    /// Name of the tool that was called (as the model spelled it).
    pub tool_name: String,
    /// Text content for the model. Tool return values that are strings pass unchanged; other
    /// values are compact JSON.
    pub content: String,
    /// Images returned by the tool, if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
    /// True when the call failed; `content` then explains why in words a model can act on.
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResultPart {
    /// A successful text result.
    pub fn success(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ToolResultPart {
            call_id: call_id.into(),
            tool_name: tool_name.into(),
            content: content.into(),
            images: Vec::new(),
            is_error: false,
        }
    }

    /// An error result with model-visible text.
    pub fn error(
        call_id: impl Into<String>,
        tool_name: impl Into<String>,
        content: impl Into<String>,
    ) -> Self {
        ToolResultPart {
            is_error: true,
            ..ToolResultPart::success(call_id, tool_name, content)
        }
    }
}

/// One piece of a message.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Part {
    /// Visible text.
    Text {
        /// The text.
        text: String,
        /// Opaque data of the provider that produced the text (see [`ProviderData`]).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        provider_data: Option<ProviderData>,
    },
    /// Reasoning.
    Thinking(ThinkingPart),
    /// An image.
    Image(ImagePart),
    /// A tool call (assistant messages).
    ToolCall(ToolCallPart),
    /// A tool result (tool-result messages).
    ToolResult(ToolResultPart),
}

impl Part {
    /// A text part.
    pub fn text(text: impl Into<String>) -> Self {
        Part::Text {
            text: text.into(),
            provider_data: None,
        }
    }
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Who produced it.
    pub role: Role,
    /// Its parts, in order.
    #[serde(default)]
    pub content: Vec<Part>,
    /// Extension-defined kind of a [`Role::Custom`] message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_type: Option<String>,
    /// Model that produced an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Provider (adapter) that produced an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The provider's id of the response that produced an assistant message (Chat Completions
    /// `id`, Responses `response.id`, Anthropic `message.id`), when it sent one. Recorded as
    /// `gen_ai.response.id` on the `chat` span; useful to find the call in the provider's logs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    /// Token usage of an assistant message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
    /// Why an assistant message ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
    /// Operator-facing error text when `stop_reason` is `error` (never contains credentials).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// Milliseconds since the Unix epoch when the message was completed.
    #[serde(default)]
    pub timestamp_ms: u64,
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Message {
    fn with_role(role: Role, content: Vec<Part>) -> Self {
        Message {
            role,
            content,
            custom_type: None,
            model: None,
            provider: None,
            response_id: None,
            usage: None,
            stop_reason: None,
            error_message: None,
            timestamp_ms: now_ms(),
        }
    }

    /// A user message with one text part.
    pub fn user(text: impl Into<String>) -> Self {
        Message::with_role(Role::User, vec![Part::text(text)])
    }

    /// A user message with the given parts (text and images).
    pub fn user_parts(content: Vec<Part>) -> Self {
        Message::with_role(Role::User, content)
    }

    /// An assistant message with the given parts and stop reason.
    pub fn assistant(content: Vec<Part>, stop_reason: StopReason) -> Self {
        let mut m = Message::with_role(Role::Assistant, content);
        m.stop_reason = Some(stop_reason);
        m
    }

    /// A tool-result message answering one call.
    pub fn tool_result(result: ToolResultPart) -> Self {
        Message::with_role(Role::ToolResult, vec![Part::ToolResult(result)])
    }

    /// A custom (extension-injected) message; the model sees it as a user message.
    pub fn custom(custom_type: impl Into<String>, content: Vec<Part>) -> Self {
        let mut m = Message::with_role(Role::Custom, content);
        m.custom_type = Some(custom_type.into());
        m
    }

    /// All text parts joined in order ("" when there are none).
    pub fn text(&self) -> String {
        let mut out = String::new();
        for part in &self.content {
            if let Part::Text { text, .. } = part {
                out.push_str(text);
            }
        }
        out
    }

    /// The tool calls of an assistant message, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCallPart> {
        self.content.iter().filter_map(|p| match p {
            Part::ToolCall(c) => Some(c),
            _ => None,
        })
    }

    /// The tool result carried by a tool-result message.
    pub fn tool_result_part(&self) -> Option<&ToolResultPart> {
        self.content.iter().find_map(|p| match p {
            Part::ToolResult(r) => Some(r),
            _ => None,
        })
    }
}

/// The model-visible text of the synthetic result given to a call that never finished.
/// Sessions give it on resume; the loop gives it to parked calls that can no longer run.
pub fn interrupted_result_text(tool_name: &str) -> String {
    format!(
        "Tool call \"{tool_name}\" was interrupted before it finished (the process stopped); it \
         did not complete."
    )
}

/// The ids of the tool calls among `messages`.
pub fn call_ids(messages: &[Message]) -> HashSet<&str> {
    messages
        .iter()
        .flat_map(Message::tool_calls)
        .map(|c| c.id.as_str())
        .collect()
}

/// The ids of the calls answered by the tool results among `messages`.
pub fn answered_call_ids(messages: &[Message]) -> HashSet<&str> {
    messages
        .iter()
        .filter_map(|m| Some(m.tool_result_part()?.call_id.as_str()))
        .collect()
}

/// The synthetic error result for a call that never finished.
pub fn interrupted_result(call: &ToolCallPart) -> ToolResultPart {
    ToolResultPart::error(
        &call.id,
        &call.tool_name,
        interrupted_result_text(&call.tool_name),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn round_trip(m: &Message) -> Message {
        let text = serde_json::to_string(m).unwrap_or_default();
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    #[test]
    fn arguments_parse_keeps_what_is_not_an_object() {
        assert_eq!(ToolArguments::parse(""), ToolArguments::default());
        assert_eq!(ToolArguments::parse("  "), ToolArguments::default());
        assert_eq!(
            ToolArguments::parse("\"s\""),
            ToolArguments::Json(json!("s"))
        );
        assert_eq!(
            ToolArguments::parse("null"),
            ToolArguments::Json(Value::Null)
        );
        assert_eq!(
            ToolArguments::parse("{\"a\": 1"),
            ToolArguments::Unparsed("{\"a\": 1".into())
        );
    }

    #[test]
    fn tool_call_json_null_and_missing_arguments_differ() {
        let null: ToolCallPart =
            serde_json::from_value(json!({"id": "1", "tool_name": "t", "arguments": null}))
                .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(null.arguments, ToolArguments::Json(Value::Null));
        let missing: ToolCallPart = serde_json::from_value(json!({"id": "1", "tool_name": "t"}))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(missing.arguments, ToolArguments::default());
    }

    #[test]
    fn every_argument_shape_round_trips() {
        for args in [
            ToolArguments::Json(json!({"a": [1, 2]})),
            ToolArguments::Json(json!("a string")),
            ToolArguments::Json(Value::Null),
            ToolArguments::Json(json!([1, 2])),
            ToolArguments::Unparsed("{\"text\": \"hel".into()),
            ToolArguments::Unparsed("".into()),
        ] {
            let m = Message::assistant(
                vec![Part::ToolCall(ToolCallPart {
                    id: "c".into(),
                    tool_name: "t".into(),
                    arguments: args.clone(),
                    provider_data: None,
                })],
                StopReason::ToolUse,
            );
            let back = round_trip(&m);
            assert_eq!(back, m, "{args:?}");
        }
    }

    #[test]
    fn provider_data_round_trips_and_is_omitted_when_absent() {
        let gemini = ProviderData::new("gemini", json!({"thoughtSignature": "c2ln"}));
        let mut call = ToolCallPart::new("c1", "t", json!({"a": 1}));
        call.provider_data = Some(gemini.clone());
        let m = Message::assistant(
            vec![
                Part::Text {
                    text: "hi".into(),
                    provider_data: Some(ProviderData::new(
                        "openai_responses",
                        json!({"id": "msg_1"}),
                    )),
                },
                Part::ToolCall(call),
                Part::text("plain"),
            ],
            StopReason::ToolUse,
        );
        assert_eq!(round_trip(&m), m);
        let value = serde_json::to_value(&m).unwrap_or_default();
        assert_eq!(
            value["content"][1]["provider_data"],
            json!({"provider": "gemini", "data": {"thoughtSignature": "c2ln"}})
        );
        assert!(value["content"][2].get("provider_data").is_none());
        assert_eq!(gemini.get("gemini", "thoughtSignature"), Some("c2ln"));
        assert_eq!(gemini.get("openai_responses", "thoughtSignature"), None);
    }

    #[test]
    fn messages_stored_before_provider_data_still_load() {
        let old = json!({"role": "assistant", "timestamp_ms": 1, "content": [
            {"type": "text", "text": "hi"},
            {"type": "tool_call", "id": "c", "tool_name": "t", "arguments": {}}
        ]});
        let m: Message = serde_json::from_value(old).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(m.content[0], Part::text("hi"));
        assert_eq!(
            m.tool_calls().next().and_then(|c| c.provider_data.clone()),
            None
        );
    }

    #[test]
    fn usage_accumulates() {
        let mut total = Usage::default();
        total.accumulate(&Usage {
            input_tokens: 3,
            output_tokens: 4,
            cache_read_tokens: 1,
            cache_write_tokens: 2,
            cost_usd: Some(0.5),
        });
        total.accumulate(&Usage {
            input_tokens: 1,
            ..Usage::default()
        });
        assert_eq!(total.input_tokens, 4);
        assert_eq!(total.output_tokens, 4);
        assert_eq!(total.cache_read_tokens, 1);
        assert_eq!(total.cost_usd, Some(0.5));
    }
}
