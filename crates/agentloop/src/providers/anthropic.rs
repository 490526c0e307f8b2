//! Anthropic Messages (`POST {base}/v1/messages`, streaming): the request body, the headers and
//! the SSE parser. It owns the wire mapping only; retries, the idle timeout and the "stream ended
//! before its terminal event" error come from the shared transport, and the cross-provider replay
//! rules from [`replay`].
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
//! empty content); consecutive user turns are merged by the API itself. Like the Chat adapter,
//! this one ignores `deferred_tools` and `tool_search` (client-executed tool search is an OpenAI
//! Responses feature); the tools it declares are exactly `tools`.
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
//! | `tool_use` block, `input_json_delta` (the first fragment may be `""`), `content_block_stop` | tool call, [`ModelDelta::ToolCallStart`] / [`ToolCallArguments`](ModelDelta::ToolCallArguments) (with a [`PartialJson`] snapshot) / [`ToolCallEnd`](ModelDelta::ToolCallEnd) |
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

use serde_json::{Map, Value, json};

use super::ProviderConfig;
use super::partial_json::PartialJson;
use super::replay::{self, ReplayTarget};
use super::sse::SseEvent;
use super::transport::{self, WireParser};
use crate::model::{
    Model, ModelDelta, ModelError, ModelEvent, ModelRequest, ModelStream, ReasoningLevel,
};
use crate::output::OutputFormat;
use crate::transcript::{
    ImagePart, Message, Part, Role, StopReason, ThinkingPart, ToolArguments, ToolCallPart,
    ToolResultPart, Usage,
};

/// The provider name recorded on messages.
pub const PROVIDER: &str = "anthropic";

/// The `anthropic-version` header sent with every request (unless the configured headers set
/// one).
pub const API_VERSION: &str = "2023-06-01";

/// The default base URL (without `/v1`, as in the official SDKs).
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// Output tokens reserved for the answer when the request sets no limit.
const ANSWER_TOKENS: u32 = 8192;

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

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
#[derive(Clone, Debug)]
pub struct Anthropic {
    config: ProviderConfig,
    endpoint: transport::Endpoint,
}

impl Anthropic {
    /// An adapter with explicit settings.
    pub fn new(config: ProviderConfig) -> Self {
        let endpoint = transport::Endpoint::new(&config, "v1/messages");
        Anthropic { config, endpoint }
    }

    /// Like [`new`](Anthropic::new), but a configuration that cannot work (a base URL that does
    /// not parse, a header that is not valid HTTP, an HTTP client that cannot be built) is an
    /// error here instead of the error of every request.
    pub fn try_new(config: ProviderConfig) -> Result<Self, ModelError> {
        let adapter = Anthropic::new(config);
        adapter.endpoint.check()?;
        Ok(adapter)
    }

    /// `ANTHROPIC_BASE_URL` (default `https://api.anthropic.com`) and `ANTHROPIC_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Anthropic::try_new(ProviderConfig::from_env_vars(
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_API_KEY",
            DEFAULT_BASE_URL,
        ))
    }

    /// The settings.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body this adapter sends for `request` (exposed for snapshot tests and
    /// debugging; contains no credentials).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        build_body(&self.config, request)
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

/// The model's output-token limit, as far as it is known (unknown models: 64000).
fn output_cap(model: &str) -> u32 {
    let m = model.to_ascii_lowercase();
    if m.starts_with("claude-3-5") {
        8192
    } else if m.starts_with("claude-3-7") {
        64000
    } else if m.starts_with("claude-3-") {
        4096
    } else if m.starts_with("claude-opus-4-0")
        || m.starts_with("claude-opus-4-1")
        || m.starts_with("claude-opus-4-2025")
        || m.starts_with("claude-4-opus")
    {
        32000
    } else {
        64000
    }
}

/// `max_tokens` and the thinking budget for a request (see the module docs).
fn token_limits(model: &str, request: &ModelRequest<'_>) -> (u32, Option<u32>) {
    let wanted = request.reasoning.and_then(thinking_budget);
    let max_tokens = match request.max_output_tokens {
        Some(n) => n.max(1),
        None => {
            let cap = output_cap(model);
            (ANSWER_TOKENS + wanted.unwrap_or(0)).min(cap)
        }
    };
    let budget = wanted.and_then(|b| {
        (max_tokens > MIN_THINKING_BUDGET).then(|| {
            b.min(max_tokens - MIN_THINKING_BUDGET)
                .max(MIN_THINKING_BUDGET)
        })
    });
    (max_tokens, budget)
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

fn image_block(image: &ImagePart) -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data}
    })
}

fn text_block(text: &str) -> Option<Value> {
    // The API rejects empty and whitespace-only text blocks.
    (!text.trim().is_empty()).then(|| json!({"type": "text", "text": text}))
}

fn user_blocks(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => text_block(text),
            Part::Image(image) => Some(image_block(image)),
            _ => None,
        })
        .collect()
}

fn assistant_blocks(message: &Message) -> Vec<Value> {
    // After `replay::prepare`, the thinking parts left come from this provider and model.
    message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => text_block(text),
            Part::Thinking(t) if t.redacted => t
                .signature
                .as_ref()
                .filter(|data| !data.is_empty())
                .map(|data| json!({"type": "redacted_thinking", "data": data})),
            Part::Thinking(t) => match t.signature.as_deref().filter(|s| !s.is_empty()) {
                Some(signature) => Some(json!({
                    "type": "thinking", "thinking": t.thinking, "signature": signature
                })),
                // Unsigned thinking (a stream cut mid-block) would be rejected: keep it as text.
                None => text_block(&t.thinking),
            },
            Part::ToolCall(c) => Some(tool_use_block(c)),
            _ => None,
        })
        .collect()
}

fn tool_use_block(call: &ToolCallPart) -> Value {
    // The API accepts only an object; the call's result already says it was malformed.
    let input = replay::object_arguments(&call.arguments);
    json!({"type": "tool_use", "id": call.id, "name": call.tool_name, "input": input})
}

fn tool_result_block(result: &ToolResultPart) -> Value {
    let mut content: Vec<Value> = Vec::with_capacity(1 + result.images.len());
    content.extend(text_block(&result.content));
    content.extend(result.images.iter().map(image_block));
    let mut block = Map::new();
    block.insert("type".into(), json!("tool_result"));
    block.insert("tool_use_id".into(), json!(result.call_id));
    if !content.is_empty() {
        block.insert("content".into(), Value::Array(content));
    }
    block.insert("is_error".into(), json!(result.is_error));
    Value::Object(block)
}

/// Whether the conversation is inside a tool loop whose assistant turn does not start with a
/// thinking block. With thinking enabled the API rejects that ("a final assistant message must
/// start with a thinking block"); it happens after a handoff from another provider or model, or
/// when reasoning is switched on mid-loop.
fn unsigned_tool_loop(wire: &[Value]) -> bool {
    let Some(blocks) = wire
        .iter()
        .rev()
        .find(|m| m["role"] == "assistant")
        .and_then(|m| m["content"].as_array())
    else {
        return false;
    };
    let has_tool_use = blocks.iter().any(|b| b["type"] == "tool_use");
    let starts_with_thinking = blocks
        .first()
        .is_some_and(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking");
    has_tool_use && !starts_with_thinking
}

fn build_body(config: &ProviderConfig, request: &ModelRequest<'_>) -> Value {
    let model = request
        .model
        .clone()
        .or_else(|| config.model.clone())
        .unwrap_or_default();
    let target = ReplayTarget::openai(PROVIDER, &model);
    let messages = replay::prepare(&request.messages, &target);

    let mut wire: Vec<Value> = Vec::with_capacity(messages.len());
    // Tool results waiting to be sent as one user turn.
    let mut results: Vec<Value> = Vec::new();
    let flush = |wire: &mut Vec<Value>, results: &mut Vec<Value>| {
        if !results.is_empty() {
            wire.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for m in messages.iter() {
        match m.role {
            Role::ToolResult => {
                results.extend(m.content.iter().filter_map(|p| match p {
                    Part::ToolResult(r) => Some(tool_result_block(r)),
                    _ => None,
                }));
            }
            Role::Assistant => {
                flush(&mut wire, &mut results);
                let blocks = assistant_blocks(m);
                if !blocks.is_empty() {
                    wire.push(json!({"role": "assistant", "content": blocks}));
                }
            }
            _ => {
                flush(&mut wire, &mut results);
                let blocks = user_blocks(m);
                if !blocks.is_empty() {
                    wire.push(json!({"role": "user", "content": blocks}));
                }
            }
        }
    }
    flush(&mut wire, &mut results);
    // Cache everything up to the newest user turn: the next request reads it back.
    if let Some(block) = wire
        .iter_mut()
        .filter(|_| config.prompt_cache)
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), ephemeral());
    }

    let (max_tokens, mut budget) = token_limits(&model, request);
    if budget.is_some() && unsigned_tool_loop(&wire) {
        budget = None;
    }
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(system) = request
        .system_prompt
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        let mut block = json!({"type": "text", "text": system});
        if config.prompt_cache {
            block["cache_control"] = ephemeral();
        }
        body.insert("system".into(), json!([block]));
    }
    body.insert("messages".into(), Value::Array(wire));
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| {
                json!({"name": t.name, "description": t.description, "input_schema": t.parameters})
            })
            .collect();
        let mut tools = tools;
        // A breakpoint after the last tool caches the tool list (it comes before the system
        // prompt in the cache's order), so a long list is not re-read on every turn.
        if let Some(Value::Object(last)) = tools.last_mut().filter(|_| config.prompt_cache) {
            last.insert("cache_control".into(), ephemeral());
        }
        body.insert("tools".into(), Value::Array(tools));
    }
    match budget {
        Some(budget_tokens) => {
            body.insert(
                "thinking".into(),
                json!({"type": "enabled", "budget_tokens": budget_tokens}),
            );
        }
        None => {
            if let Some(t) = request.temperature {
                // Through its shortest decimal form: 0.2f32 goes out as 0.2, not 0.200000003.
                body.insert("temperature".into(), json!(super::wire_temperature(t)));
            }
        }
    }
    if let Some(format) = &request.output {
        body.insert("output_config".into(), anthropic_output_config(format));
    }
    Value::Object(body)
}

/// Native structured output (typed output): `output_config.format` with a `json_schema`
/// (Anthropic accepts the schema only; name and strictness are OpenAI notions).
fn anthropic_output_config(format: &OutputFormat) -> Value {
    json!({"format": {"type": "json_schema", "schema": format.schema}})
}

impl Model for Anthropic {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let body = build_body(&self.config, &request);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let mut auth = Vec::with_capacity(2);
        let custom_version = self
            .config
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("anthropic-version"));
        if !custom_version {
            auth.push(("anthropic-version", API_VERSION.to_owned()));
        }
        if let Some(key) = request.api_key.as_ref().or(self.config.api_key.as_ref()) {
            auth.push(("x-api-key", key.expose().to_owned()));
        }
        self.endpoint.post(
            auth,
            // Serializing a `Value` cannot fail (its keys are strings).
            serde_json::to_vec(&body).unwrap_or_default(),
            move || MessagesParser::new(model.clone()),
        )
    }

    fn provider(&self) -> &str {
        PROVIDER
    }
    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn model_id(&self) -> Option<&str> {
        self.config.model.as_deref()
    }
}

/// What a content block assembles into.
#[derive(Debug)]
enum BlockKind {
    Text,
    Thinking,
    ToolUse {
        /// Position among the message's tool calls.
        call: usize,
        args: PartialJson,
        /// A non-empty `input` sent whole in `content_block_start`.
        start_input: Option<Value>,
    },
    /// A block type this adapter does not assemble (server tools, future types).
    Ignored,
}

#[derive(Debug)]
struct Block {
    wire_index: u64,
    /// Index into `MessagesParser::parts`.
    part: usize,
    kind: BlockKind,
}

/// Assembles Messages API stream events into deltas and the final message.
#[derive(Debug)]
pub(crate) struct MessagesParser {
    model: String,
    /// `message.id` from `message_start`.
    response_id: Option<String>,
    parts: Vec<Part>,
    blocks: Vec<Block>,
    calls: usize,
    stop_reason: Option<String>,
    usage: Option<Usage>,
}

fn unreadable(data: &str, e: serde_json::Error) -> ModelError {
    let mut end = data.len().min(200);
    while !data.is_char_boundary(end) {
        end -= 1;
    }
    ModelError::stream(
        crate::model::StreamErrorKind::Unreadable,
        format!("unreadable event from the provider ({e}): {}", &data[..end]),
    )
}

fn provider_error(value: &Value) -> ModelError {
    let error = &value["error"];
    ModelError::Provider {
        code: error["type"].as_str().unwrap_or("error").to_owned(),
        message: error["message"]
            .as_str()
            .unwrap_or("the provider reported an error")
            .to_owned(),
    }
}

impl MessagesParser {
    pub(crate) fn new(model: String) -> Self {
        MessagesParser {
            model,
            response_id: None,
            parts: Vec::new(),
            blocks: Vec::new(),
            calls: 0,
            stop_reason: None,
            usage: None,
        }
    }

    fn apply_usage(&mut self, u: &Value) {
        if !u.is_object() {
            return;
        }
        let usage = self.usage.get_or_insert_with(Usage::default);
        let field = |name: &str| u.get(name).and_then(Value::as_u64);
        if let Some(n) = field("input_tokens") {
            usage.input_tokens = n;
        }
        if let Some(n) = field("output_tokens") {
            usage.output_tokens = n;
        }
        if let Some(n) = field("cache_read_input_tokens") {
            usage.cache_read_tokens = n;
        }
        if let Some(n) = field("cache_creation_input_tokens") {
            usage.cache_write_tokens = n;
        }
    }

    fn block_mut(&mut self, wire_index: u64) -> Option<&mut Block> {
        // The block being streamed is almost always the last one.
        self.blocks
            .iter_mut()
            .rev()
            .find(|b| b.wire_index == wire_index)
    }

    fn on_block_start(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        let wire_index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let block = &value["content_block"];
        let str_field = |name: &str| block[name].as_str().unwrap_or_default().to_owned();
        let part = self.parts.len();
        let kind = match block["type"].as_str() {
            Some("text") => {
                let text = str_field("text");
                if !text.is_empty() {
                    out.push(ModelEvent::Delta(ModelDelta::Text {
                        delta: text.clone(),
                    }));
                }
                self.parts.push(Part::text(text));
                BlockKind::Text
            }
            Some("thinking") => {
                let thinking = str_field("thinking");
                if !thinking.is_empty() {
                    out.push(ModelEvent::Delta(ModelDelta::Thinking {
                        delta: thinking.clone(),
                    }));
                }
                let signature = Some(str_field("signature")).filter(|s| !s.is_empty());
                self.parts.push(Part::Thinking(ThinkingPart {
                    thinking,
                    signature,
                    redacted: false,
                }));
                BlockKind::Thinking
            }
            Some("redacted_thinking") => {
                self.parts.push(Part::Thinking(ThinkingPart {
                    thinking: String::new(),
                    signature: Some(str_field("data")),
                    redacted: true,
                }));
                BlockKind::Thinking
            }
            Some("tool_use") => {
                let call = self.calls;
                self.calls += 1;
                let name = str_field("name");
                let mut id = str_field("id");
                if id.is_empty() {
                    id = format!("toolu_{call}");
                }
                self.parts.push(Part::ToolCall(ToolCallPart {
                    id: id.clone(),
                    tool_name: name.clone(),
                    arguments: ToolArguments::default(),
                    provider_data: None,
                }));
                out.push(ModelEvent::Delta(ModelDelta::ToolCallStart {
                    index: call,
                    id,
                    name,
                }));
                let start_input = block
                    .get("input")
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                    .cloned();
                if let Some(input) = &start_input {
                    // Sent whole: tell the stream (and its assembler) about it too.
                    out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                        index: call,
                        delta: input.to_string(),
                        partial: Some(input.clone()),
                    }));
                }
                BlockKind::ToolUse {
                    call,
                    args: PartialJson::new(),
                    start_input,
                }
            }
            _ => BlockKind::Ignored,
        };
        self.blocks.push(Block {
            wire_index,
            part,
            kind,
        });
    }

    fn on_block_delta(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        let Some(wire_index) = value["index"].as_u64() else {
            return;
        };
        let delta = &value["delta"];
        let Some(block) = self
            .blocks
            .iter_mut()
            .rev()
            .find(|b| b.wire_index == wire_index)
        else {
            return; // a delta for a block that never started: nothing to attach it to
        };
        let part = self.parts.get_mut(block.part);
        match (delta["type"].as_str(), &mut block.kind, part) {
            (Some("text_delta"), BlockKind::Text, Some(Part::Text { text, .. })) => {
                if let Some(t) = delta["text"].as_str().filter(|t| !t.is_empty()) {
                    text.push_str(t);
                    out.push(ModelEvent::Delta(ModelDelta::Text {
                        delta: t.to_owned(),
                    }));
                }
            }
            (Some("thinking_delta"), BlockKind::Thinking, Some(Part::Thinking(part))) => {
                if let Some(t) = delta["thinking"].as_str().filter(|t| !t.is_empty()) {
                    part.thinking.push_str(t);
                    out.push(ModelEvent::Delta(ModelDelta::Thinking {
                        delta: t.to_owned(),
                    }));
                }
            }
            (Some("signature_delta"), BlockKind::Thinking, Some(Part::Thinking(part))) => {
                if let Some(s) = delta["signature"].as_str() {
                    part.signature.get_or_insert_with(String::new).push_str(s);
                }
            }
            (Some("input_json_delta"), BlockKind::ToolUse { call, args, .. }, _) => {
                if let Some(fragment) = delta["partial_json"].as_str().filter(|f| !f.is_empty()) {
                    let partial = args.push_and_snapshot(fragment);
                    out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                        index: *call,
                        delta: fragment.to_owned(),
                        partial,
                    }));
                }
            }
            // citations_delta, deltas of ignored blocks, and future delta types.
            _ => {}
        }
    }

    fn on_block_stop(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        let Some(wire_index) = value["index"].as_u64() else {
            return;
        };
        if let Some(Block {
            kind: BlockKind::ToolUse { call, .. },
            ..
        }) = self.block_mut(wire_index)
        {
            let index = *call;
            out.push(ModelEvent::Delta(ModelDelta::ToolCallEnd { index }));
        }
    }
}

impl WireParser for MessagesParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        let value: Value = if data.is_empty() {
            Value::Null
        } else {
            super::lossy_json::parse_value(data).map_err(|e| unreadable(data, e))?
        };
        // The payload's `type` is authoritative; the `event:` name is the fallback.
        let kind = value
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(event.event.as_str());
        match kind {
            "message_start" => {
                let message = &value["message"];
                if let Some(id) = message["id"].as_str() {
                    self.response_id = Some(id.to_owned());
                }
                if self.model.is_empty() {
                    if let Some(model) = message["model"].as_str() {
                        self.model = model.to_owned();
                    }
                }
                self.apply_usage(&message["usage"]);
            }
            "content_block_start" => self.on_block_start(&value, out),
            "content_block_delta" => self.on_block_delta(&value, out),
            "content_block_stop" => self.on_block_stop(&value, out),
            "message_delta" => {
                if let Some(reason) = value["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.apply_usage(&value["usage"]);
            }
            "message_stop" => return Ok(true),
            "error" => return Err(provider_error(&value)),
            // `ping` and event types added after this adapter was written.
            _ => {}
        }
        Ok(false)
    }

    fn finish(&mut self) -> Result<Message, ModelError> {
        let stop = match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence" | "pause_turn") => StopReason::Stop,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
            Some("refusal") => StopReason::Refusal,
            _ if self.calls > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        let mut message = self.partial();
        message.stop_reason = Some(stop);
        message.error_message = None;
        Ok(message)
    }

    fn partial(&self) -> Message {
        let mut parts = self.parts.clone();
        for block in &self.blocks {
            if let (
                BlockKind::ToolUse {
                    args, start_input, ..
                },
                Some(Part::ToolCall(call)),
            ) = (&block.kind, parts.get_mut(block.part))
            {
                call.arguments = match start_input {
                    Some(input) if args.text().is_empty() => ToolArguments::Json(input.clone()),
                    _ => ToolArguments::parse(args.text()),
                };
            }
        }
        parts.retain(|p| match p {
            Part::Text { text, .. } => !text.is_empty(),
            Part::Thinking(t) => t.redacted || !t.thinking.is_empty() || t.signature.is_some(),
            _ => true,
        });
        let mut message = Message::assistant(parts, StopReason::Error);
        message.model = Some(self.model.clone());
        message.provider = Some(PROVIDER.to_owned());
        message.usage = self.usage;
        message.response_id.clone_from(&self.response_id);
        message
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::providers::sse::SseDecoder;

    /// One SSE event with the payload's type as its name.
    fn ev(data: Value) -> String {
        let name = data["type"].as_str().unwrap_or("message").to_owned();
        format!("event: {name}\ndata: {data}\n\n")
    }

    fn start(input_tokens: u64) -> String {
        ev(json!({"type": "message_start", "message": {
            "id": "msg_1", "model": "claude-wire", "usage": {"input_tokens": input_tokens, "output_tokens": 1}
        }}))
    }

    fn block_start(index: u64, block: Value) -> String {
        ev(json!({"type": "content_block_start", "index": index, "content_block": block}))
    }

    fn delta(index: u64, delta: Value) -> String {
        ev(json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    fn stop(index: u64) -> String {
        ev(json!({"type": "content_block_stop", "index": index}))
    }

    fn message_delta(reason: &str, usage: Value) -> String {
        ev(json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}))
    }

    fn end() -> String {
        ev(json!({"type": "message_stop"}))
    }

    /// Runs a body through the decoder and parser: the deltas and the terminal outcome (`None`
    /// when no terminal event arrived).
    fn run(
        model: &str,
        body: &str,
    ) -> (
        Vec<ModelDelta>,
        Option<Result<Message, ModelError>>,
        MessagesParser,
    ) {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        decoder.push(body.as_bytes(), &mut events).unwrap();
        let mut parser = MessagesParser::new(model.into());
        let mut out = Vec::new();
        let mut terminal = None;
        for e in events {
            match parser.on_event(e, &mut out) {
                Ok(false) => {}
                Ok(true) => {
                    terminal = Some(parser.finish());
                    break;
                }
                Err(err) => {
                    terminal = Some(Err(err));
                    break;
                }
            }
        }
        let deltas = out
            .into_iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(d) => Some(d),
                _ => None,
            })
            .collect();
        (deltas, terminal, parser)
    }

    fn done(model: &str, body: &str) -> Message {
        match run(model, body).1 {
            Some(Ok(m)) => m,
            other => panic!("expected a message, got {other:?}"),
        }
    }

    #[test]
    fn tool_input_deltas_stream_partial_values_and_end() {
        let body = [
            start(10),
            block_start(
                0,
                json!({"type": "tool_use", "id": "toolu_a", "name": "write", "input": {}}),
            ),
            delta(0, json!({"type": "input_json_delta", "partial_json": ""})),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"path\": \"a.t"}),
            ),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "xt\"}"}),
            ),
            stop(0),
            message_delta("tool_use", json!({"output_tokens": 9})),
            end(),
        ]
        .concat();
        let (deltas, terminal, _) = run("m", &body);
        assert_eq!(
            deltas,
            vec![
                ModelDelta::ToolCallStart {
                    index: 0,
                    id: "toolu_a".into(),
                    name: "write".into()
                },
                ModelDelta::ToolCallArguments {
                    index: 0,
                    delta: "{\"path\": \"a.t".into(),
                    partial: Some(json!({"path": "a.t"})),
                },
                ModelDelta::ToolCallArguments {
                    index: 0,
                    delta: "xt\"}".into(),
                    partial: Some(json!({"path": "a.txt"})),
                },
                ModelDelta::ToolCallEnd { index: 0 },
            ],
            "no delta for the empty first fragment"
        );
        let message = match terminal {
            Some(Ok(m)) => m,
            other => panic!("{other:?}"),
        };
        let calls: Vec<_> = message.tool_calls().collect();
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Json(json!({"path": "a.txt"}))
        );
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
        assert_eq!(message.provider.as_deref(), Some(PROVIDER));
        assert_eq!(message.model.as_deref(), Some("m"), "the requested model");
    }

    #[test]
    fn empty_input_is_an_empty_object_and_whole_start_input_is_kept() {
        let body = [
            start(1),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t1", "name": "now", "input": {}}),
            ),
            stop(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": "t2", "name": "read", "input": {"path": "x"}}),
            ),
            stop(1),
            message_delta("tool_use", json!({"output_tokens": 3})),
            end(),
        ]
        .concat();
        let (deltas, terminal, _) = run("m", &body);
        assert!(deltas.contains(&ModelDelta::ToolCallArguments {
            index: 1,
            delta: "{\"path\":\"x\"}".into(),
            partial: Some(json!({"path": "x"})),
        }));
        let message = terminal.and_then(Result::ok).unwrap_or_else(|| panic!());
        let args: Vec<_> = message.tool_calls().map(|c| c.arguments.clone()).collect();
        assert_eq!(
            args,
            vec![
                ToolArguments::Json(json!({})),
                ToolArguments::Json(json!({"path": "x"}))
            ]
        );
    }

    #[test]
    fn a_tool_block_cut_by_max_tokens_keeps_its_raw_text() {
        let body = [
            start(1),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t1", "name": "write", "input": {}}),
            ),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"text\": \"hel"}),
            ),
            message_delta("max_tokens", json!({"output_tokens": 3})),
            end(),
        ]
        .concat();
        let (deltas, terminal, _) = run("m", &body);
        assert!(
            !deltas
                .iter()
                .any(|d| matches!(d, ModelDelta::ToolCallEnd { .. })),
            "an unfinished call never ends"
        );
        let message = terminal.and_then(Result::ok).unwrap_or_else(|| panic!());
        assert_eq!(message.stop_reason, Some(StopReason::Length));
        assert_eq!(
            message.tool_calls().next().map(|c| c.arguments.clone()),
            Some(ToolArguments::Unparsed("{\"text\": \"hel".into()))
        );
    }

    #[test]
    fn thinking_signatures_and_redacted_thinking() {
        let body = [
            start(1),
            block_start(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
            delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
            delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
            delta(0, json!({"type": "signature_delta", "signature": "sig-1"})),
            stop(0),
            block_start(1, json!({"type": "redacted_thinking", "data": "opaque"})),
            stop(1),
            block_start(2, json!({"type": "text", "text": ""})),
            delta(2, json!({"type": "text_delta", "text": "Hi"})),
            stop(2),
            message_delta("end_turn", json!({"output_tokens": 30})),
            end(),
        ]
        .concat();
        let (deltas, terminal, _) = run("m", &body);
        assert_eq!(
            deltas,
            vec![
                ModelDelta::Thinking {
                    delta: "Let me ".into()
                },
                ModelDelta::Thinking {
                    delta: "think.".into()
                },
                ModelDelta::Text { delta: "Hi".into() },
            ]
        );
        let message = terminal.and_then(Result::ok).unwrap_or_else(|| panic!());
        assert_eq!(
            message.content,
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Let me think.".into(),
                    signature: Some("sig-1".into()),
                    redacted: false,
                }),
                Part::Thinking(ThinkingPart {
                    thinking: String::new(),
                    signature: Some("opaque".into()),
                    redacted: true,
                }),
                Part::text("Hi"),
            ]
        );
    }

    #[test]
    fn usage_comes_from_both_events_and_message_delta_overrides() {
        let body = [
            ev(
                json!({"type": "message_start", "message": {"model": "w", "usage": {
                    "input_tokens": 5, "output_tokens": 1,
                    "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20
                }}}),
            ),
            message_delta(
                "end_turn",
                json!({"input_tokens": 7, "output_tokens": 42, "cache_read_input_tokens": null}),
            ),
            end(),
        ]
        .concat();
        let message = done("m", &body);
        assert_eq!(
            message.usage,
            Some(Usage {
                input_tokens: 7,
                output_tokens: 42,
                cache_read_tokens: 100,
                cache_write_tokens: 20,
                cost_usd: None,
            })
        );
        assert!(message.content.is_empty());
    }

    #[test]
    fn the_wire_model_is_used_when_the_request_named_none() {
        let body = [start(1), message_delta("end_turn", json!({})), end()].concat();
        assert_eq!(done("", &body).model.as_deref(), Some("claude-wire"));
    }

    #[test]
    fn stop_reasons_map_as_documented() {
        for (wire, want) in [
            ("end_turn", StopReason::Stop),
            ("stop_sequence", StopReason::Stop),
            ("pause_turn", StopReason::Stop),
            ("tool_use", StopReason::ToolUse),
            ("max_tokens", StopReason::Length),
            ("model_context_window_exceeded", StopReason::Length),
            ("refusal", StopReason::Refusal),
            ("something_new", StopReason::Stop),
        ] {
            let body = [start(1), message_delta(wire, json!({})), end()].concat();
            assert_eq!(done("m", &body).stop_reason, Some(want), "{wire}");
        }
        // No stop reason at all, but a tool call: the calls decide.
        let body = [
            start(1),
            block_start(
                0,
                json!({"type": "tool_use", "id": "t", "name": "n", "input": {}}),
            ),
            stop(0),
            end(),
        ]
        .concat();
        assert_eq!(done("m", &body).stop_reason, Some(StopReason::ToolUse));
    }

    #[test]
    fn an_error_event_is_a_provider_error_with_its_type_as_code() {
        let body = [
            start(1),
            ev(
                json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
            ),
        ]
        .concat();
        let (_, terminal, _) = run("m", &body);
        let err = match terminal {
            Some(Err(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            err,
            ModelError::Provider {
                code: "overloaded_error".into(),
                message: "Overloaded".into()
            }
        );
        assert!(
            err.to_string().to_ascii_lowercase().contains("overloaded"),
            "the transport's retry check looks for this word"
        );
    }

    #[test]
    fn pings_unknown_events_blocks_and_deltas_are_ignored() {
        let body = [
            start(1),
            ev(json!({"type": "ping"})),
            ev(json!({"type": "some_future_event", "x": 1})),
            block_start(
                0,
                json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
            ),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"q\": 1}"}),
            ),
            stop(0),
            block_start(1, json!({"type": "text", "text": ""})),
            delta(
                1,
                json!({"type": "citations_delta", "citation": {"cited_text": "x"}}),
            ),
            delta(1, json!({"type": "text_delta", "text": "ok"})),
            delta(9, json!({"type": "text_delta", "text": "orphan"})),
            stop(1),
            message_delta("end_turn", json!({"output_tokens": 2})),
            end(),
        ]
        .concat();
        let (deltas, terminal, _) = run("m", &body);
        assert_eq!(deltas, vec![ModelDelta::Text { delta: "ok".into() }]);
        let message = terminal.and_then(Result::ok).unwrap_or_else(|| panic!());
        assert_eq!(message.content, vec![Part::text("ok")]);
    }

    #[test]
    fn the_event_name_is_the_fallback_for_a_payload_without_type() {
        let body = concat!(
            "event: message_start\ndata: {\"message\": {\"usage\": {\"input_tokens\": 3}}}\n\n",
            "event: message_stop\ndata: {}\n\n",
        );
        let message = done("m", body);
        assert_eq!(message.usage.map(|u| u.input_tokens), Some(3));
    }

    #[test]
    fn an_unreadable_event_is_a_stream_error() {
        let (_, terminal, _) = run("m", "event: message_start\ndata: {not json\n\n");
        assert!(
            matches!(terminal, Some(Err(ModelError::Stream { message: m, .. })) if m.contains("{not json"))
        );
    }

    #[test]
    fn the_partial_message_of_a_cut_stream_keeps_what_arrived() {
        let body = [
            start(4),
            block_start(0, json!({"type": "text", "text": ""})),
            delta(0, json!({"type": "text_delta", "text": "Working"})),
            stop(0),
            block_start(
                1,
                json!({"type": "tool_use", "id": "t1", "name": "run", "input": {}}),
            ),
            delta(
                1,
                json!({"type": "input_json_delta", "partial_json": "{\"cmd\""}),
            ),
        ]
        .concat();
        let (_, terminal, parser) = run("m", &body);
        assert!(terminal.is_none());
        let partial = parser.partial();
        assert_eq!(partial.text(), "Working");
        assert_eq!(partial.stop_reason, Some(StopReason::Error));
        assert_eq!(
            partial.tool_calls().next().map(|c| c.arguments.clone()),
            Some(ToolArguments::Unparsed("{\"cmd\"".into()))
        );
        assert_eq!(partial.usage.map(|u| u.input_tokens), Some(4));
    }

    #[test]
    fn token_limits_fit_the_thinking_budget() {
        let request = |reasoning: Option<ReasoningLevel>, max: Option<u32>| {
            let mut r = ModelRequest::new(vec![]);
            r.reasoning = reasoning;
            r.max_output_tokens = max;
            r
        };
        let m = "claude-sonnet-4-5";
        assert_eq!(token_limits(m, &request(None, None)), (8192, None));
        assert_eq!(
            token_limits(m, &request(Some(ReasoningLevel::Off), Some(100))),
            (100, None)
        );
        assert_eq!(
            token_limits(m, &request(Some(ReasoningLevel::High), None)),
            (16384 + 8192, Some(16384))
        );
        // Capped by the model's output limit, budget shrunk to leave room for the answer.
        assert_eq!(
            token_limits(
                "claude-opus-4-1-20250805",
                &request(Some(ReasoningLevel::Xhigh), None)
            ),
            (32000, Some(32000 - 1024))
        );
        assert_eq!(
            token_limits("claude-3-haiku-20240307", &request(None, None)),
            (4096, None)
        );
        // An explicit limit wins; the budget fits under it, never below the minimum.
        assert_eq!(
            token_limits(m, &request(Some(ReasoningLevel::Medium), Some(4000))),
            (4000, Some(4000 - 1024))
        );
        assert_eq!(
            token_limits(m, &request(Some(ReasoningLevel::Minimal), Some(1500))),
            (1500, Some(1024))
        );
        assert_eq!(
            token_limits(m, &request(Some(ReasoningLevel::Low), Some(1024))),
            (1024, None),
            "no room for the minimum budget: thinking stays off"
        );
    }

    #[test]
    fn thinking_without_signature_is_replayed_as_text_and_bad_arguments_as_empty_input() {
        let mut assistant = Message::assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "half a thought".into(),
                    signature: None,
                    redacted: false,
                }),
                Part::Thinking(ThinkingPart {
                    redacted: true,
                    signature: None,
                    thinking: String::new(),
                }),
                Part::text("  "),
                Part::ToolCall(ToolCallPart {
                    id: "t1".into(),
                    tool_name: "w".into(),
                    arguments: ToolArguments::Unparsed("{\"a\": ".into()),
                    provider_data: None,
                }),
                Part::ToolCall(ToolCallPart::new("t2", "w", json!("a string"))),
            ],
            StopReason::ToolUse,
        );
        assistant.provider = Some(PROVIDER.into());
        assistant.model = Some("m".into());
        assert_eq!(
            assistant_blocks(&assistant),
            vec![
                json!({"type": "text", "text": "half a thought"}),
                json!({"type": "tool_use", "id": "t1", "name": "w", "input": {}}),
                json!({"type": "tool_use", "id": "t2", "name": "w", "input": {}}),
            ]
        );
    }
}
