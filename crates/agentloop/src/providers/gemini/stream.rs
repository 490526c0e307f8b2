//! The `streamGenerateContent` SSE parser: `GenerateContentResponse` chunks into deltas and the
//! assistant message, thought signatures kept on their parts (see the module docs of [`super`]).

use serde_json::{Map, Value, json};

use super::PROVIDER;
use super::request::SIGNATURE;
use crate::model::{ModelDelta, ModelError, ModelEvent};
use crate::providers::sse::SseEvent;
use crate::providers::transport::WireParser;
use crate::transcript::{
    Message, Part, ProviderData, StopReason, ThinkingPart, ToolArguments, ToolCallPart, Usage,
};

/// Finish reasons that mean the output was withheld by a filter.
const REFUSALS: [&str; 8] = [
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
];

/// Finish reasons that mean the reply is unusable: the model failed, not the user.
const FAILURES: [&str; 4] = [
    "MALFORMED_FUNCTION_CALL",
    "UNEXPECTED_TOOL_CALL",
    "TOO_MANY_TOOL_CALLS",
    "MISSING_THOUGHT_SIGNATURE",
];

/// Assembles Gemini stream chunks into deltas and the final message.
#[derive(Debug)]
pub(crate) struct GeminiParser {
    model: String,
    /// `responseId` of the first chunk that carries one.
    response_id: Option<String>,
    parts: Vec<Part>,
    /// Tool calls so far.
    calls: usize,
    /// The prefix of synthesized call ids (from the response id, else random), made on the
    /// first call.
    id_prefix: Option<String>,
    /// The last `finishReason` (and its `finishMessage`).
    finish: Option<(String, Option<String>)>,
    /// `promptFeedback.blockReason`: the prompt was refused before any candidate.
    blocked: Option<String>,
    usage: Option<Usage>,
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Letters, digits, `_` and `-` only (what every provider accepts in a call id).
fn id_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect()
}

/// A random prefix for call ids when the response has no id.
fn random_prefix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(crate::transcript::now_ms());
    format!("gemini_{:016x}", hasher.finish())
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

/// `{"error": {code, message, status}}` sent inside the stream.
fn provider_error(error: &Value) -> ModelError {
    let code = str_of(error, "status")
        .map(str::to_owned)
        .or_else(|| error.get("code").map(|c| c.to_string()))
        .unwrap_or_else(|| "error".to_owned());
    ModelError::Provider {
        code,
        message: str_of(error, "message")
            .unwrap_or("the provider reported an error")
            .to_owned(),
    }
}

fn signature_data(signature: Option<&str>, wire_id: Option<&str>) -> Option<ProviderData> {
    if signature.is_none() && wire_id.is_none() {
        return None;
    }
    let mut data = Map::new();
    if let Some(signature) = signature {
        data.insert(SIGNATURE.into(), json!(signature));
    }
    if let Some(id) = wire_id {
        data.insert("id".into(), json!(id));
    }
    Some(ProviderData::new(PROVIDER, Value::Object(data)))
}

impl GeminiParser {
    pub(crate) fn new(model: String) -> Self {
        GeminiParser {
            model,
            response_id: None,
            parts: Vec::new(),
            calls: 0,
            id_prefix: None,
            finish: None,
            blocked: None,
            usage: None,
        }
    }

    fn apply_usage(&mut self, u: &Value) {
        let count = |key: &str| u.get(key).and_then(Value::as_u64);
        let (Some(prompt), candidates) = (count("promptTokenCount"), count("candidatesTokenCount"))
        else {
            return; // a chunk without counts (only `trafficType`) says nothing new
        };
        let cached = count("cachedContentTokenCount").unwrap_or(0);
        let tool_prompt = count("toolUsePromptTokenCount").unwrap_or(0);
        self.usage = Some(Usage {
            input_tokens: prompt.saturating_sub(cached) + tool_prompt,
            output_tokens: candidates.unwrap_or(0) + count("thoughtsTokenCount").unwrap_or(0),
            cache_read_tokens: cached,
            ..Usage::default()
        });
    }

    fn next_call_id(&mut self) -> String {
        let index = self.calls;
        let prefix = self
            .id_prefix
            .get_or_insert_with(|| match &self.response_id {
                Some(id) if !id.is_empty() => id_safe(id),
                _ => random_prefix(),
            });
        format!("{prefix}-{index}")
    }

    fn on_call(&mut self, call: &Value, signature: Option<&str>, out: &mut Vec<ModelEvent>) {
        let Some(name) = str_of(call, "name").filter(|n| !n.is_empty()) else {
            // Streamed arguments (`partialArgs`, `willContinue`) are a Vertex feature this
            // adapter never asks for; a call without a name cannot be run.
            return;
        };
        let wire_id = str_of(call, "id").filter(|id| !id.is_empty());
        let id = match wire_id {
            Some(id) => id.to_owned(),
            None => self.next_call_id(),
        };
        let args = match call.get("args") {
            Some(Value::Null) | None => Value::Object(Map::new()),
            Some(args) => args.clone(),
        };
        let index = self.calls;
        self.calls += 1;
        out.push(ModelEvent::Delta(ModelDelta::ToolCallStart {
            index,
            id: id.clone(),
            name: name.to_owned(),
        }));
        out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
            index,
            delta: args.to_string(),
            partial: Some(args.clone()),
        }));
        out.push(ModelEvent::Delta(ModelDelta::ToolCallEnd { index }));
        self.parts.push(Part::ToolCall(ToolCallPart {
            id,
            tool_name: name.to_owned(),
            arguments: ToolArguments::Json(args),
            provider_data: signature_data(signature, wire_id),
        }));
    }

    fn on_text(&mut self, text: &str, signature: Option<&str>, out: &mut Vec<ModelEvent>) {
        // Appended to the text before it unless that already has another signature.
        match self.parts.last_mut() {
            Some(Part::Text {
                text: last,
                provider_data,
            }) if signature.is_none() || provider_data.is_none() => {
                last.push_str(text);
                if provider_data.is_none() {
                    *provider_data = signature_data(signature, None);
                }
            }
            _ if text.is_empty() && signature.is_none() => return,
            _ => self.parts.push(Part::Text {
                text: text.to_owned(),
                provider_data: signature_data(signature, None),
            }),
        }
        if !text.is_empty() {
            out.push(ModelEvent::Delta(ModelDelta::Text {
                delta: text.to_owned(),
            }));
        }
    }

    fn on_thought(&mut self, text: &str, signature: Option<&str>, out: &mut Vec<ModelEvent>) {
        match self.parts.last_mut() {
            Some(Part::Thinking(last)) if signature.is_none() || last.signature.is_none() => {
                last.thinking.push_str(text);
                if last.signature.is_none() {
                    last.signature = signature.map(str::to_owned);
                }
            }
            _ if text.is_empty() && signature.is_none() => return,
            _ => self.parts.push(Part::Thinking(ThinkingPart {
                thinking: text.to_owned(),
                signature: signature.map(str::to_owned),
                redacted: false,
            })),
        }
        if !text.is_empty() {
            out.push(ModelEvent::Delta(ModelDelta::Thinking {
                delta: text.to_owned(),
            }));
        }
    }

    fn on_part(&mut self, part: &Value, out: &mut Vec<ModelEvent>) {
        let signature = str_of(part, SIGNATURE).filter(|s| !s.is_empty());
        if let Some(call) = part.get("functionCall") {
            self.on_call(call, signature, out);
        } else if let Some(text) = str_of(part, "text") {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                self.on_thought(text, signature, out);
            } else {
                self.on_text(text, signature, out);
            }
        }
        // executableCode, codeExecutionResult, inlineData, …: not assembled.
    }
}

impl WireParser for GeminiParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value =
            crate::providers::lossy_json::parse_value(data).map_err(|e| unreadable(data, e))?;
        if let Some(error) = chunk.get("error").filter(|e| e.is_object()) {
            return Err(provider_error(error));
        }
        if self.response_id.is_none() {
            self.response_id = str_of(&chunk, "responseId").map(str::to_owned);
        }
        if self.model.is_empty() {
            if let Some(model) = str_of(&chunk, "modelVersion") {
                self.model = model.to_owned();
            }
        }
        if let Some(usage) = chunk.get("usageMetadata") {
            self.apply_usage(usage);
        }
        if let Some(reason) = chunk
            .pointer("/promptFeedback/blockReason")
            .and_then(Value::as_str)
        {
            self.blocked = Some(reason.to_owned());
        }
        // Only candidate 0 is assembled (requests never ask for more).
        let candidate = chunk
            .get("candidates")
            .and_then(Value::as_array)
            .and_then(|all| {
                all.iter()
                    .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            });
        if let Some(candidate) = candidate {
            if let Some(parts) = candidate
                .pointer("/content/parts")
                .and_then(Value::as_array)
            {
                for part in parts {
                    self.on_part(part, out);
                }
            }
            if let Some(reason) = str_of(candidate, "finishReason") {
                let message = str_of(candidate, "finishMessage").map(str::to_owned);
                self.finish = Some((reason.to_owned(), message));
            }
        }
        // Gemini has no terminal event: the body ends after the last chunk.
        Ok(false)
    }

    fn complete_at_eof(&self) -> bool {
        self.finish.is_some() || self.blocked.is_some()
    }

    fn finish(&mut self) -> Result<Message, ModelError> {
        let reason = self.finish.as_ref().map(|(r, _)| r.as_str());
        let stop = match reason {
            Some("MAX_TOKENS") => StopReason::Length,
            Some(r) if REFUSALS.contains(&r) => StopReason::Refusal,
            Some(r) if FAILURES.contains(&r) => {
                let message = self
                    .finish
                    .as_ref()
                    .and_then(|(_, m)| m.clone())
                    .unwrap_or_else(|| format!("the model's reply ended with {r}"));
                return Err(ModelError::Provider {
                    code: r.to_owned(),
                    message,
                });
            }
            None if self.blocked.is_some() => StopReason::Refusal,
            _ if self.calls > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        };
        let mut message = self.partial();
        message.stop_reason = Some(stop);
        message.error_message = None;
        Ok(message)
    }

    fn partial(&self) -> Message {
        let parts: Vec<Part> = self
            .parts
            .iter()
            .filter(|p| match p {
                Part::Text {
                    text,
                    provider_data,
                } => !text.is_empty() || provider_data.is_some(),
                Part::Thinking(t) => !t.thinking.is_empty() || t.signature.is_some(),
                _ => true,
            })
            .cloned()
            .collect();
        let mut message = Message::assistant(parts, StopReason::Error);
        message.model = Some(self.model.clone());
        message.provider = Some(PROVIDER.to_owned());
        message.usage = self.usage;
        message.response_id.clone_from(&self.response_id);
        message
    }
}
