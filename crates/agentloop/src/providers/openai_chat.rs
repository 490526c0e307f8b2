//! OpenAI Chat Completions (`POST {base}/chat/completions`, streaming), which also covers
//! OpenAI-compatible servers: Ollama, vLLM, llama.cpp, OpenRouter and gateways.
//!
//! Tolerated quirks (each broke someone): usage missing or in a final chunk with empty
//! `choices`; reasoning as `reasoning_content` or `reasoning`; arguments streamed as text or sent
//! whole as an object; `""` or `null` arguments for a tool without parameters; tool-call deltas
//! keyed by `index` that repeat or omit `id` (a missing or duplicate id gets a unique one); content
//! and tool-call deltas in the same chunk; refusals on their own channel. Only choice 0 is
//! assembled (requests never ask for `n > 1`).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::ProviderConfig;
use super::partial_json::PartialJson;
use super::replay::{self, ReplayTarget};
use super::sse::SseEvent;
use super::transport::{self, WireParser};
use crate::model::{Model, ModelDelta, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::output::OutputFormat;
use crate::transcript::{
    Message, Part, Role, StopReason, ThinkingPart, ToolArguments, ToolCallPart, Usage,
};

/// The provider name recorded on messages.
pub const PROVIDER: &str = "openai_chat";

/// OpenAI Chat Completions adapter. See the module docs.
///
/// ```no_run
/// use agentloop::providers::{OpenAiChat, ProviderConfig};
///
/// // api.openai.com with OPENAI_API_KEY / OPENAI_BASE_URL from the environment:
/// let openai = OpenAiChat::from_env().unwrap();
/// // A local OpenAI-compatible server (base URLs include `/v1`, as in the official SDK):
/// let ollama = OpenAiChat::new(ProviderConfig::new("http://localhost:11434/v1").model("llama3.2"));
/// # let _ = (openai, ollama);
/// ```
#[derive(Clone, Debug)]
pub struct OpenAiChat {
    config: ProviderConfig,
    endpoint: transport::Endpoint,
}

impl OpenAiChat {
    /// An adapter with explicit settings.
    pub fn new(config: ProviderConfig) -> Self {
        let endpoint = transport::Endpoint::new(&config, "chat/completions");
        OpenAiChat { config, endpoint }
    }

    /// Like [`new`](OpenAiChat::new), but a configuration that cannot work (a base URL that does
    /// not parse, a header that is not valid HTTP, an HTTP client that cannot be built) is an
    /// error here instead of the error of every request.
    pub fn try_new(config: ProviderConfig) -> Result<Self, ModelError> {
        let adapter = OpenAiChat::new(config);
        adapter.endpoint.check()?;
        Ok(adapter)
    }

    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        OpenAiChat::try_new(ProviderConfig::from_env_vars(
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "https://api.openai.com/v1",
        ))
    }

    /// The settings.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body this adapter sends for `request` (exposed for snapshot tests and
    /// debugging; contains no credentials).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        with_body(&self.config, request, |body| {
            serde_json::to_value(body).unwrap_or(Value::Null)
        })
    }
}

/// The request body, borrowing from the request: serialized straight to bytes (building a
/// `serde_json::Value` tree first cost an allocation per key and a copy of every tool schema on
/// every turn, and grew with the history).
#[derive(Serialize)]
struct ChatBody<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// `null` for a message that only calls tools.
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

fn image_url<'a>(media_type: &str, data: &str) -> ContentPart<'a> {
    ContentPart::ImageUrl {
        image_url: ImageUrl {
            url: format!("data:{media_type};base64,{data}"),
        },
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// A JSON-encoded string, as the API wants it.
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Builds the body for `request` and hands it to `f` (the body borrows from the request and
/// from the replay-prepared messages, which live only for this call).
fn with_body<R>(
    config: &ProviderConfig,
    request: &ModelRequest<'_>,
    f: impl FnOnce(&ChatBody<'_>) -> R,
) -> R {
    let model = request
        .model
        .as_deref()
        .or(config.model.as_deref())
        .unwrap_or_default();
    // Chat Completions rejects tool-call ids longer than 40 characters.
    let target = ReplayTarget::openai(PROVIDER, model).max_id_len(40);
    let messages = replay::prepare(&request.messages, &target);
    let mut wire: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = &request.system_prompt {
        wire.push(WireMessage::System { content: system });
    }
    for m in messages.iter() {
        match m.role {
            Role::Assistant => {
                // Separate text parts (e.g. another provider's reasoning turned into text, then
                // the answer) instead of gluing them together.
                let mut texts = m.content.iter().filter_map(|p| match p {
                    Part::Text { text, .. } if !text.is_empty() => Some(text.as_str()),
                    _ => None,
                });
                let text: Cow<'_, str> = match (texts.next(), texts.next()) {
                    (None, _) => Cow::Borrowed(""),
                    (Some(only), None) => Cow::Borrowed(only),
                    (Some(first), Some(second)) => {
                        let mut joined = format!("{first}\n\n{second}");
                        for t in texts {
                            joined.push_str("\n\n");
                            joined.push_str(t);
                        }
                        Cow::Owned(joined)
                    }
                };
                let tool_calls: Vec<WireCall<'_>> = m
                    .tool_calls()
                    .map(|c| WireCall {
                        id: &c.id,
                        kind: "function",
                        function: WireFunction {
                            name: &c.tool_name,
                            // Only an object is accepted (see `replay`); the transcript keeps
                            // the raw text.
                            arguments: Cow::Owned(replay::wire_arguments(&c.arguments)),
                        },
                    })
                    .collect();
                let content = if text.is_empty() && !tool_calls.is_empty() {
                    None
                } else {
                    Some(text)
                };
                wire.push(WireMessage::Assistant {
                    content,
                    tool_calls,
                });
            }
            Role::ToolResult => {
                if let Some(r) = m.tool_result_part() {
                    wire.push(WireMessage::Tool {
                        tool_call_id: &r.call_id,
                        content: &r.content,
                    });
                    if !r.images.is_empty() {
                        // Tool messages carry text only: show the images in a user turn.
                        let mut parts = vec![ContentPart::Text {
                            text: Cow::Owned(format!(
                                "Images returned by tool call {}:",
                                r.call_id
                            )),
                        }];
                        parts.extend(r.images.iter().map(|i| image_url(&i.media_type, &i.data)));
                        wire.push(WireMessage::User {
                            content: UserContent::Parts(parts),
                        });
                    }
                }
            }
            _ => {
                let has_images = m.content.iter().any(|p| matches!(p, Part::Image(_)));
                let content = if has_images {
                    UserContent::Parts(
                        m.content
                            .iter()
                            .filter_map(|p| match p {
                                Part::Text { text, .. } => Some(ContentPart::Text {
                                    text: Cow::Borrowed(text),
                                }),
                                Part::Image(i) => Some(image_url(&i.media_type, &i.data)),
                                _ => None,
                            })
                            .collect(),
                    )
                } else {
                    let mut texts = m.content.iter().filter_map(|p| match p {
                        Part::Text { text, .. } => Some(text.as_str()),
                        _ => None,
                    });
                    match (texts.next(), texts.next()) {
                        (Some(only), None) => UserContent::Text(Cow::Borrowed(only)),
                        _ => UserContent::Text(Cow::Owned(m.text())),
                    }
                };
                wire.push(WireMessage::User { content });
            }
        }
    }
    let tools = request
        .tools
        .iter()
        .map(|t| WireTool {
            kind: "function",
            function: WireToolFunction {
                name: &t.name,
                description: &t.description,
                parameters: &t.parameters,
            },
        })
        .collect();
    let body = ChatBody {
        model,
        messages: wire,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools,
        temperature: request.temperature,
        max_completion_tokens: request.max_output_tokens,
        reasoning_effort: request.reasoning.and_then(super::openai_reasoning_effort),
        response_format: request.output.as_ref().map(chat_response_format),
        prompt_cache_key: request
            .prompt_cache_key
            .as_deref()
            .filter(|_| config.prompt_cache),
    };
    f(&body)
}

/// Native structured output (typed output): `response_format` with a `json_schema`.
fn chat_response_format(format: &OutputFormat) -> Value {
    let mut schema = serde_json::Map::new();
    schema.insert("name".into(), Value::String(format.name.clone()));
    if let Some(description) = &format.description {
        schema.insert("description".into(), Value::String(description.clone()));
    }
    schema.insert("schema".into(), format.schema.clone());
    schema.insert("strict".into(), Value::Bool(format.strict));
    serde_json::json!({"type": "json_schema", "json_schema": schema})
}

impl Model for OpenAiChat {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let (body, model) = with_body(&self.config, &request, |body| {
            // The body holds strings, numbers and JSON values only: serializing it cannot fail.
            (
                serde_json::to_vec(body).unwrap_or_default(),
                body.model.to_owned(),
            )
        });
        let auth: Vec<(&'static str, String)> = request
            .api_key
            .as_ref()
            .or(self.config.api_key.as_ref())
            .map(|key| ("authorization", format!("Bearer {}", key.expose())))
            .into_iter()
            .collect();
        self.endpoint
            .post(auth, body, move || ChatParser::new(model.clone()))
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

#[derive(Debug)]
struct CallSlot {
    wire_index: u64,
    id: String,
    name: String,
    args: PartialJson,
    whole: Option<Value>,
}

/// Assembles Chat Completions chunks into deltas and the final message.
#[derive(Debug)]
pub(crate) struct ChatParser {
    model: String,
    /// The completion's `id` (every chunk repeats it; the first one wins).
    response_id: Option<String>,
    parts: Vec<Part>,
    calls: Vec<CallSlot>,
    refusal: String,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl ChatParser {
    pub(crate) fn new(model: String) -> Self {
        ChatParser {
            model,
            response_id: None,
            parts: Vec::new(),
            calls: Vec::new(),
            refusal: String::new(),
            finish_reason: None,
            usage: None,
            done: false,
        }
    }

    fn push_text(&mut self, text: &str, thinking: bool) {
        match (self.parts.last_mut(), thinking) {
            (Some(Part::Text { text: t, .. }), false) => t.push_str(text),
            (Some(Part::Thinking(t)), true) => t.thinking.push_str(text),
            (_, false) => self.parts.push(Part::text(text)),
            (_, true) => self.parts.push(Part::Thinking(ThinkingPart {
                thinking: text.to_owned(),
                ..ThinkingPart::default()
            })),
        }
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(err) = chunk.get("error") {
            return Err(ModelError::Provider {
                code: err
                    .get("code")
                    .or_else(|| err.get("type"))
                    .map(|c| {
                        c.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| c.to_string())
                    })
                    .unwrap_or_else(|| "error".into()),
                message: err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("the provider reported an error")
                    .to_owned(),
            });
        }
        if self.response_id.is_none() {
            self.response_id = chunk.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let prompt = u["prompt_tokens"].as_u64().unwrap_or(0);
            let cached = u
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_u64)
                .unwrap_or(0);
            self.usage = Some(Usage {
                input_tokens: prompt.saturating_sub(cached),
                output_tokens: u["completion_tokens"].as_u64().unwrap_or(0),
                cache_read_tokens: cached,
                ..Usage::default()
            });
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            for key in ["reasoning_content", "reasoning"] {
                if let Some(t) = delta
                    .get(key)
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    self.push_text(t, true);
                    out.push(ModelEvent::Delta(ModelDelta::Thinking {
                        delta: t.to_owned(),
                    }));
                    break;
                }
            }
            if let Some(t) = delta
                .get("content")
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
            {
                self.push_text(t, false);
                out.push(ModelEvent::Delta(ModelDelta::Text {
                    delta: t.to_owned(),
                }));
            }
            if let Some(t) = delta.get("refusal").and_then(Value::as_str) {
                self.refusal.push_str(t);
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in calls.iter().enumerate() {
                    self.on_tool_delta(call, position as u64, out);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        Ok(())
    }

    fn on_tool_delta(&mut self, call: &Value, position: u64, out: &mut Vec<ModelEvent>) {
        let wire_index = call
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position);
        let function = &call["function"];
        let slot = match self.calls.iter().position(|c| c.wire_index == wire_index) {
            Some(i) => i,
            None => {
                let index = self.calls.len();
                let name = function["name"].as_str().unwrap_or_default().to_owned();
                let mut id = call["id"].as_str().unwrap_or_default().to_owned();
                // Missing ids, and ids reused across calls (some servers use the function name),
                // would break the call/result pairing: make them unique.
                if id.is_empty() || self.calls.iter().any(|c| c.id == id) {
                    id = format!(
                        "call_{index}_{}",
                        if name.is_empty() { "tool" } else { &name }
                    );
                }
                self.calls.push(CallSlot {
                    wire_index,
                    id: id.clone(),
                    name: name.clone(),
                    args: PartialJson::new(),
                    whole: None,
                });
                self.parts.push(Part::ToolCall(ToolCallPart {
                    id: id.clone(),
                    tool_name: name.clone(),
                    arguments: ToolArguments::default(),
                    provider_data: None,
                }));
                out.push(ModelEvent::Delta(ModelDelta::ToolCallStart {
                    index,
                    id,
                    name,
                }));
                index
            }
        };
        let entry = &mut self.calls[slot];
        if entry.name.is_empty() {
            if let Some(name) = function["name"].as_str() {
                entry.name = name.to_owned();
            }
        }
        match &function["arguments"] {
            Value::String(fragment) if !fragment.is_empty() => {
                let partial = entry.args.push_and_snapshot(fragment);
                out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                    index: slot,
                    delta: fragment.clone(),
                    partial,
                }));
            }
            Value::Object(_) | Value::Array(_) => {
                // Sent whole as a JSON value (some gateways).
                let value = function["arguments"].clone();
                out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                    index: slot,
                    delta: value.to_string(),
                    partial: Some(value.clone()),
                }));
                entry.whole = Some(value);
            }
            _ => {}
        }
    }
}

/// The usual shape of a Chat Completions chunk, borrowed from the SSE data.
#[derive(serde::Deserialize)]
struct ChunkWire<'a> {
    #[serde(default)]
    error: Option<serde::de::IgnoredAny>,
    /// The completion's id (owned: ids may contain escapes).
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    usage: Option<UsageWire>,
    #[serde(default, borrow)]
    choices: Option<Vec<ChoiceWire<'a>>>,
}

#[derive(serde::Deserialize)]
struct UsageWire {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    #[serde(default)]
    prompt_tokens_details: Option<UsageDetailsWire>,
}

#[derive(serde::Deserialize)]
struct UsageDetailsWire {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(serde::Deserialize)]
struct ChoiceWire<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(default, borrow)]
    delta: Option<DeltaWire<'a>>,
    #[serde(default, borrow)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(serde::Deserialize)]
struct DeltaWire<'a> {
    #[serde(default, borrow)]
    content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    reasoning: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    refusal: Option<Cow<'a, str>>,
    #[serde(default)]
    tool_calls: Option<Vec<Value>>,
}

impl ChatParser {
    /// Same semantics as `on_chunk`, on the typed fast-path shape.
    fn on_typed_chunk(&mut self, chunk: ChunkWire<'_>, out: &mut Vec<ModelEvent>) {
        if let Some(u) = chunk.usage {
            let prompt = u.prompt_tokens.unwrap_or(0);
            let cached = u
                .prompt_tokens_details
                .and_then(|d| d.cached_tokens)
                .unwrap_or(0);
            self.usage = Some(Usage {
                input_tokens: prompt.saturating_sub(cached),
                output_tokens: u.completion_tokens.unwrap_or(0),
                cache_read_tokens: cached,
                ..Usage::default()
            });
        }
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.delta {
                let thinking = delta
                    .reasoning_content
                    .filter(|t| !t.is_empty())
                    .or(delta.reasoning.filter(|t| !t.is_empty()));
                if let Some(t) = thinking {
                    self.push_text(&t, true);
                    out.push(ModelEvent::Delta(ModelDelta::Thinking {
                        delta: t.into_owned(),
                    }));
                }
                if let Some(t) = delta.content.filter(|t| !t.is_empty()) {
                    self.push_text(&t, false);
                    out.push(ModelEvent::Delta(ModelDelta::Text {
                        delta: t.into_owned(),
                    }));
                }
                if let Some(t) = delta.refusal {
                    self.refusal.push_str(&t);
                }
                for (position, call) in delta.tool_calls.unwrap_or_default().iter().enumerate() {
                    self.on_tool_delta(call, position as u64, out);
                }
            }
            if let Some(reason) = choice.finish_reason {
                self.finish_reason = Some(reason.into_owned());
            }
        }
    }
}

impl WireParser for ChatParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            self.done = true;
            for index in 0..self.calls.len() {
                out.push(ModelEvent::Delta(ModelDelta::ToolCallEnd { index }));
            }
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        // Fast path: the common chunk shapes deserialize into borrowed structs without building
        // a `Value` tree; anything unusual falls back to the lenient `Value` path below.
        if let Ok(chunk) = serde_json::from_str::<ChunkWire<'_>>(data) {
            if chunk.error.is_none() {
                if self.response_id.is_none() {
                    self.response_id.clone_from(&chunk.id);
                }
                self.on_typed_chunk(chunk, out);
                return Ok(false);
            }
        }
        let chunk: Value = super::lossy_json::parse_value(data).map_err(|e| {
            ModelError::stream(
                crate::model::StreamErrorKind::Unreadable,
                format!("unreadable chunk from the provider ({e}): {data:.200}"),
            )
        })?;
        self.on_chunk(&chunk, out)?;
        Ok(false)
    }

    fn finish(&mut self) -> Result<Message, ModelError> {
        let stop = match self.finish_reason.as_deref() {
            Some("length") => StopReason::Length,
            Some("content_filter") => StopReason::Refusal,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            _ if !self.refusal.is_empty() && self.parts.is_empty() => StopReason::Refusal,
            _ => StopReason::Stop,
        };
        let mut message = self.partial();
        message.stop_reason = Some(stop);
        message.error_message = None;
        Ok(message)
    }

    fn partial(&self) -> Message {
        let mut parts = self.parts.clone();
        let mut call = 0;
        for part in parts.iter_mut() {
            if let Part::ToolCall(c) = part {
                if let Some(slot) = self.calls.get(call) {
                    c.tool_name = slot.name.clone();
                    c.arguments = match &slot.whole {
                        Some(v) => ToolArguments::Json(v.clone()),
                        None => ToolArguments::parse(slot.args.text()),
                    };
                }
                call += 1;
            }
        }
        if !self.refusal.is_empty() && !parts.iter().any(|p| matches!(p, Part::Text { .. })) {
            parts.push(Part::text(self.refusal.clone()));
        }
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
    use serde_json::json;

    fn parse(body: &str) -> (Vec<ModelEvent>, Result<Message, ModelError>) {
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        decoder.push(body.as_bytes(), &mut events).unwrap();
        let mut parser = ChatParser::new("m".into());
        let mut out = Vec::new();
        for e in events {
            if parser.on_event(e, &mut out).unwrap_or(false) {
                return (out, parser.finish());
            }
        }
        (
            out,
            Err(ModelError::stream(
                crate::model::StreamErrorKind::Cut,
                "no terminal",
            )),
        )
    }

    #[test]
    fn quirks_whole_object_arguments_missing_ids_and_empty_arguments() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"read\",\"function\":{\"name\":\"now\",\"arguments\":\"\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"read\",\"function\":{\"name\":\"now\",\"arguments\":null}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let (_, message) = parse(body);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        let calls: Vec<_> = message.tool_calls().collect();
        assert_eq!(calls.len(), 3);
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Json(json!({"path": "a"}))
        );
        assert_eq!(calls[1].arguments, ToolArguments::default());
        assert_eq!(calls[1].id, "read");
        assert_ne!(calls[2].id, "read", "a reused id is made unique");
        assert!(!calls[0].id.is_empty());
        assert_eq!(message.text(), "hi");
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    }

    #[test]
    fn reasoning_fields_become_thinking() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"ing\"}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let message = parse(body).1.unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(&message.content[0], Part::Thinking(t) if t.thinking == "thinking"));
        assert_eq!(message.text(), "ok");
        assert_eq!(message.usage, None, "missing usage is tolerated");
    }

    #[test]
    fn an_error_chunk_is_a_provider_error() {
        let body = "data: {\"error\":{\"message\":\"bad\",\"code\":\"server_error\"}}\n\n";
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        decoder.push(body.as_bytes(), &mut events).unwrap();
        let mut parser = ChatParser::new("m".into());
        let err = parser.on_event(events.remove(0), &mut Vec::new());
        assert_eq!(
            err,
            Err(ModelError::Provider {
                code: "server_error".into(),
                message: "bad".into()
            })
        );
    }

    #[test]
    fn every_recorded_chunk_takes_the_typed_fast_path() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/providers/openai-chat");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("sse") {
                continue;
            }
            let body = std::fs::read(&path).unwrap_or_default();
            let mut events = Vec::new();
            SseDecoder::new().push(&body, &mut events).unwrap();
            for e in events.iter().filter(|e| e.data.trim() != "[DONE]") {
                let typed = serde_json::from_str::<ChunkWire<'_>>(&e.data);
                assert!(typed.is_ok(), "{}: {:?}", path.display(), typed.err());
                checked += 1;
            }
        }
        assert!(checked > 100, "{checked} chunks");
    }
}
