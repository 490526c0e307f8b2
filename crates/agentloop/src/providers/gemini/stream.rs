//! The `streamGenerateContent` SSE parser: `GenerateContentResponse` chunks into deltas and the
//! assistant message, thought signatures kept on their parts (see the module docs of [`super`]).

use serde_json::{Map, Value, json};

use super::PROVIDER;
use super::request::SIGNATURE;
use crate::model::{MessageAssembler, ModelError, ModelEvent};
use crate::providers::core::{StreamParser, stream_error, unreadable, usage_with_cached_input};
use crate::providers::sse::SseEvent;
use crate::tooling::name_safe;
use crate::transcript::{Part, ProviderData, StopReason, ThinkingPart};

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

/// Assembles Gemini stream chunks into deltas and the final message. The [`StreamParser`] of
/// the protocol; public so that a protocol built on this one can reuse it.
#[derive(Clone, Debug)]
pub struct GeminiParser {
    message: MessageAssembler,
    /// `responseId` of the first chunk that carries one (the prefix of synthesized call ids).
    response_id: Option<String>,
    /// The prefix of synthesized call ids (from the response id, else random), made on the
    /// first call.
    id_prefix: Option<String>,
    /// The last `finishReason` (and its `finishMessage`).
    finish: Option<(String, Option<String>)>,
    /// `promptFeedback.blockReason`: the prompt was refused before any candidate.
    blocked: Option<String>,
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// A random prefix for call ids when the response has no id.
fn random_prefix() -> String {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(crate::transcript::now_ms());
    format!("gemini_{:016x}", hasher.finish())
}

/// `{"error": {code, message, status}}` sent inside the stream: the status is the code.
fn provider_error(error: &Value) -> ModelError {
    stream_error(error, &["status", "code"], "error")
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
    /// A parser for a response to a request for `model` (empty: the response's `modelVersion`).
    pub fn new(model: String) -> Self {
        GeminiParser {
            message: MessageAssembler::for_provider(PROVIDER, model),
            response_id: None,
            id_prefix: None,
            finish: None,
            blocked: None,
        }
    }

    fn apply_usage(&mut self, u: &Value) {
        let count = |key: &str| u.get(key).and_then(Value::as_u64);
        let (Some(prompt), candidates) = (count("promptTokenCount"), count("candidatesTokenCount"))
        else {
            return; // a chunk without counts (only `trafficType`) says nothing new
        };
        let cached = count("cachedContentTokenCount").unwrap_or(0);
        // Thoughts are billed as output; tool-use prompt tokens as input.
        let mut usage = usage_with_cached_input(
            prompt,
            cached,
            candidates.unwrap_or(0) + count("thoughtsTokenCount").unwrap_or(0),
        );
        usage.input_tokens += count("toolUsePromptTokenCount").unwrap_or(0);
        self.message.set_usage(usage);
    }

    fn next_call_id(&mut self) -> String {
        let index = self.message.call_count();
        let prefix = self
            .id_prefix
            .get_or_insert_with(|| match &self.response_id {
                Some(id) if !id.is_empty() => name_safe(id, 40),
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
        // A call arrives whole, in one part.
        let data = signature_data(signature, wire_id);
        let index = self.message.start_call(&id, name, data, out);
        self.message.call_value(index, args, out);
        self.message.end_call(index, out);
    }

    fn on_text(&mut self, text: &str, signature: Option<&str>, out: &mut Vec<ModelEvent>) {
        // Appended to the text before it unless that already has another signature.
        let joins = match self.message.last_part() {
            Some((
                id,
                Part::Text {
                    provider_data: data,
                    ..
                },
            )) if signature.is_none() || data.is_none() => Some(id),
            _ => None,
        };
        match joins {
            Some(id) => {
                self.message.append_text(id, text, out);
                if let Some(Part::Text {
                    provider_data: data @ None,
                    ..
                }) = self.message.part_mut(id)
                {
                    *data = signature_data(signature, None);
                }
            }
            None if text.is_empty() && signature.is_none() => {}
            None => {
                self.message
                    .open_text(text, signature_data(signature, None), out);
            }
        }
    }

    fn on_thought(&mut self, text: &str, signature: Option<&str>, out: &mut Vec<ModelEvent>) {
        let joins = match self.message.last_part() {
            Some((id, Part::Thinking(last))) if signature.is_none() || last.signature.is_none() => {
                Some(id)
            }
            _ => None,
        };
        match joins {
            Some(id) => {
                self.message.append_thinking(id, text, out);
                if let Some(Part::Thinking(last)) = self.message.part_mut(id) {
                    if last.signature.is_none() {
                        last.signature = signature.map(str::to_owned);
                    }
                }
            }
            None if text.is_empty() && signature.is_none() => {}
            None => {
                self.message.open_thinking(
                    ThinkingPart {
                        thinking: text.to_owned(),
                        signature: signature.map(str::to_owned),
                        redacted: false,
                    },
                    out,
                );
            }
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

impl StreamParser for GeminiParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Value =
            crate::json::lossy_json::parse_value(data).map_err(|e| unreadable(data, &e))?;
        if let Some(error) = chunk.get("error").filter(|e| e.is_object()) {
            return Err(provider_error(error));
        }
        if self.response_id.is_none() {
            self.response_id = str_of(&chunk, "responseId").map(str::to_owned);
            self.message
                .response_id_if_unset(self.response_id.as_deref());
        }
        if let Some(model) = str_of(&chunk, "modelVersion") {
            self.message.model_if_unset(model);
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

    fn message(&self) -> &MessageAssembler {
        &self.message
    }

    fn stop_reason(&self) -> Result<StopReason, ModelError> {
        let reason = self.finish.as_ref().map(|(r, _)| r.as_str());
        Ok(match reason {
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
            _ if self.message.call_count() > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        })
    }
}
