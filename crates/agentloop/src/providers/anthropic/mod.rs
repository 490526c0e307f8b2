//! Anthropic Messages (`POST {base}/v1/messages`, streaming): the request body (built in
//! `request`), the headers and the SSE parser (`stream`). It owns the wire mapping only;
//! retries, the idle timeout, message assembly and the "stream ended before its terminal event"
//! error come from the shared [`core`](super::core), and the cross-provider replay rules from
//! [`replay`].
//!
//! # Request
//!
//! | neutral | Messages API |
//! |---|---|
//! | system prompt | `system: [{type: text, text, cache_control: {type: ephemeral}}]` (omitted when empty) |
//! | user text / image | `text` / `image {source: {type: base64, media_type, data}}` blocks |
//! | assistant text | `text` block (blank text is dropped: the API rejects it) |
//! | thinking, same provider and model, with signature | `thinking {thinking, signature}` |
//! | redacted thinking, same provider and model | `redacted_thinking {data}` (the signature holds the data) |
//! | thinking without a signature (a cut stream) | plain `text`, or dropped when blank |
//! | thinking from another provider or model | plain `text` ([`replay::prepare`]) |
//! | tool call | `tool_use {id, name, input}`; arguments that are not a JSON object (unparsed text, a string, `null`) are sent as `{}`: the API accepts only an object there, and the call's result already tells the model what went wrong |
//! | tool results | `tool_result {tool_use_id, content: [text, images…], is_error}` blocks; consecutive results form **one** user turn, as the API requires |
//! | prompt caching | `cache_control: {type: ephemeral}` on the system prompt and on the last block of the last user turn |
//! | tools | `[{name, description, input_schema}]` |
//! | temperature | `temperature`, omitted when thinking is on (the API requires the default then) |
//! | reasoning level | `thinking: {type: enabled, budget_tokens}` — see [`thinking_budget`] |
//! | max output tokens | `max_tokens` (required by the API) — see below |
//!
//! Tool-call ids from other providers are already normalised by [`replay::prepare`] to
//! `[A-Za-z0-9_-]{1,64}`, which is exactly what the Messages API accepts for `tool_use.id`.
//! Custom messages arrive as user messages. Empty user messages are skipped (the API rejects
//! empty content); consecutive user turns are merged by the API itself.
//!
//! `max_tokens` is `max_output_tokens` when the request sets it; otherwise 8192 for the answer,
//! plus the thinking budget when thinking is on, capped at the model's output limit (4096 for
//! Claude 3, 8192 for Claude 3.5, 32000 for Claude Opus 4 and 4.1, 64000 for the others). With
//! thinking, `budget_tokens` must be at least 1024 and below `max_tokens`: the budget is reduced
//! to leave 1024 tokens for the answer (never below 1024), and thinking is left off when
//! `max_tokens` is 1024 or less. Thinking is also left off (for that request only) while the
//! newest assistant turn has tool calls but does not start with a thinking block — after a
//! handoff from another provider or model, or when reasoning is switched on mid tool loop —
//! because the API rejects thinking requests whose tool loop lost its signed thinking. It
//! resumes as soon as the newest assistant turn has no tool calls (a plain answer).
//!
//! # Response
//!
//! | wire | neutral |
//! |---|---|
//! | `message_start` | usage: `input_tokens` (already excludes the cache), `cache_read_input_tokens` → `cache_read_tokens`, `cache_creation_input_tokens` → `cache_write_tokens`; the model when the request named none |
//! | `text` block, `text_delta` | text part, [`ModelDelta::Text`] |
//! | `thinking` block, `thinking_delta`, `signature_delta` | [`ThinkingPart`] with its `signature`, [`ModelDelta::Thinking`] |
//! | `redacted_thinking` block (data only in the start event) | `ThinkingPart { thinking: "", signature: Some(data), redacted: true }` |
//! | `tool_use` block, `input_json_delta` (the first fragment may be `""`), `content_block_stop` | tool call, [`ModelDelta::ToolCallStart`] / [`ToolCallArguments`](crate::model::ModelDelta::ToolCallArguments) (with a [`PartialJson`] snapshot) / [`ToolCallEnd`](crate::model::ModelDelta::ToolCallEnd) |
//! | `message_delta` | stop reason; usage fields present there override (they are cumulative) |
//! | `message_stop` | terminal |
//! | `ping`, unknown events, unknown block and delta types (server tools, citations) | ignored |
//! | `error` event `{error: {type, message}}` | [`ModelError::Provider`] with the type as code; `overloaded_error` is retried by the transport when nothing was streamed yet |
//!
//! A tool call's arguments are parsed once, from the complete text: empty text is `{}`, text that
//! is not JSON (a block cut by `max_tokens` that never got `content_block_stop`) is kept verbatim
//! as [`ToolArguments::Unparsed`] so the call is answered "malformed arguments", never executed.
//! A `tool_use` start that already carries a non-empty `input` object (some gateways send the
//! input whole) is used when no deltas follow. Empty text parts are not kept.
//!
//! | `stop_reason` | [`StopReason`] |
//! |---|---|
//! | `end_turn`, `stop_sequence` | `Stop` |
//! | `pause_turn` (a server tool paused a long turn) | `Stop`: nothing is left for the client to execute |
//! | `tool_use` | `ToolUse` |
//! | `max_tokens`, `model_context_window_exceeded` | `Length` |
//! | `refusal` | `Refusal` (the API sends no refusal text; any text streamed before it is kept) |
//! | missing or unknown | `ToolUse` when the message has tool calls, else `Stop` |
//!
//! [`replay`]: super::replay
//! [`replay::prepare`]: super::replay::prepare
//! [`ThinkingPart`]: crate::transcript::ThinkingPart
//! [`ModelDelta::Text`]: crate::model::ModelDelta::Text
//! [`ModelDelta::Thinking`]: crate::model::ModelDelta::Thinking
//! [`ModelDelta::ToolCallStart`]: crate::model::ModelDelta::ToolCallStart
//! [`PartialJson`]: crate::json::partial_json::PartialJson
//! [`ToolArguments::Unparsed`]: crate::transcript::ToolArguments::Unparsed
//! [`StopReason`]: crate::transcript::StopReason

mod request;
mod stream;

#[cfg(test)]
mod tests;

use super::core::{Adapter, Protocol, WireBody, WireRequest};
use super::{EnvSettings, ProviderConfig};
use crate::model::{ApiKey, ModelError, ModelRequest, ReasoningLevel};

pub use stream::MessagesParser;

/// The provider name recorded on messages.
pub const PROVIDER: &str = "anthropic";

/// The `anthropic-version` header sent with every request (unless the configured headers set
/// one).
pub const API_VERSION: &str = "2023-06-01";

/// The default base URL (without `/v1`, as in the official SDKs).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// Where the official SDKs read the settings.
const ENV: EnvSettings<'static> = EnvSettings {
    base_url_vars: &["ANTHROPIC_BASE_URL"],
    api_key_vars: &["ANTHROPIC_API_KEY"],
    default_base_url: DEFAULT_BASE_URL,
};

/// Anthropic Messages adapter. See the module docs for the wire mapping.
///
/// ```no_run
/// use agentloop::providers::{Anthropic, ProviderConfig};
///
/// // api.anthropic.com with ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL from the environment:
/// let claude = Anthropic::from_env().unwrap();
/// // Explicit settings (the base URL has no `/v1`, as in the official SDKs):
/// let proxy = Anthropic::new(
///     ProviderConfig::new("https://llm-proxy.example.com")
///         .api_key("sk-ant-…")
///         .model("claude-sonnet-4-5"),
/// );
/// # let _ = (claude, proxy);
/// ```
pub type Anthropic = Adapter<Messages>;

/// The Messages API protocol (see the module docs); [`Anthropic`] is its adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Messages;

impl Adapter<Messages> {
    /// `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`) and `ANTHROPIC_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Anthropic::try_new(ENV.config())
    }
}

impl Protocol for Messages {
    type Parser = MessagesParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn path(&self, _config: &ProviderConfig) -> String {
        "v1/messages".to_owned()
    }

    fn headers(
        &self,
        config: &ProviderConfig,
        key: Option<&ApiKey>,
    ) -> Vec<(&'static str, String)> {
        let mut headers = Vec::with_capacity(2);
        let custom_version = config
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("anthropic-version"));
        if !custom_version {
            headers.push(("anthropic-version", API_VERSION.to_owned()));
        }
        if let Some(key) = key {
            headers.push(("x-api-key", key.expose().to_owned()));
        }
        headers
    }

    fn encode(
        &self,
        config: &ProviderConfig,
        request: &ModelRequest<'_>,
    ) -> WireRequest<MessagesParser> {
        let body = request::build_body(config, request);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        WireRequest::new(WireBody::Json(body), MessagesParser::new(model))
    }
}

/// The thinking budget (`budget_tokens`) for a reasoning level; `None` means thinking off.
///
/// | level | `budget_tokens` |
/// |---|---|
/// | `Off` (or no level) | thinking off |
/// | `Minimal` | 1024 (the API's minimum) |
/// | `Low` | 2048 |
/// | `Medium` | 8192 |
/// | `High` | 16384 |
/// | `Xhigh` | 32768 |
///
/// The budget actually sent may be smaller, to fit under `max_tokens` (see the module docs).
pub fn thinking_budget(level: ReasoningLevel) -> Option<u32> {
    match level {
        ReasoningLevel::Off => None,
        ReasoningLevel::Minimal => Some(1024),
        ReasoningLevel::Low => Some(2048),
        ReasoningLevel::Medium => Some(8192),
        ReasoningLevel::High => Some(16384),
        ReasoningLevel::Xhigh => Some(32768),
    }
}
