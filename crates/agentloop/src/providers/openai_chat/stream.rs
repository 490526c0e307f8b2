//! The Chat Completions SSE parser: chunks into deltas and the assistant message (see the
//! module docs of [`super`] for the quirks it tolerates).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::Value;

use super::PROVIDER;
use crate::model::{MessageAssembler, ModelError, ModelEvent};
use crate::providers::core::{StreamParser, stream_error, unreadable, usage_with_cached_input};
use crate::providers::sse::SseEvent;
use crate::transcript::StopReason;

/// Assembles Chat Completions chunks into deltas and the final message. The [`StreamParser`] of
/// the protocol; public so that a protocol built on this one can reuse it.
#[derive(Clone, Debug)]
pub struct ChatParser {
    message: MessageAssembler,
    /// The wire `index` of each tool call, in call order (a call's deltas are keyed by it).
    calls: Vec<u64>,
    /// Each wire `index`'s position in `calls`: finding a call is O(1), so a reply with many
    /// calls is parsed in linear time.
    by_wire: HashMap<u64, usize>,
    finish_reason: Option<String>,
}

impl ChatParser {
    /// A parser for a response to a request for `model` (the message names it).
    pub fn new(model: String) -> Self {
        ChatParser {
            message: MessageAssembler::for_provider(PROVIDER, model),
            calls: Vec::new(),
            by_wire: HashMap::new(),
            finish_reason: None,
        }
    }

    fn on_usage(&mut self, prompt: Option<u64>, cached: Option<u64>, completion: Option<u64>) {
        self.message.set_usage(usage_with_cached_input(
            prompt.unwrap_or(0),
            cached.unwrap_or(0),
            completion.unwrap_or(0),
        ));
    }

    /// The text channels of choice 0's delta: reasoning (`reasoning_content` or `reasoning`),
    /// content and refusal.
    fn on_delta_text(
        &mut self,
        thinking: Option<&str>,
        content: Option<&str>,
        refusal: Option<&str>,
        out: &mut Vec<ModelEvent>,
    ) {
        if let Some(t) = thinking {
            self.message.thinking(t, out);
        }
        if let Some(t) = content {
            self.message.text(t, out);
        }
        if let Some(t) = refusal {
            self.message.refusal(t);
        }
    }

    fn on_chunk(&mut self, chunk: &Value, out: &mut Vec<ModelEvent>) -> Result<(), ModelError> {
        if let Some(err) = chunk.get("error") {
            return Err(stream_error(err, &["code", "type"], "error"));
        }
        self.message
            .response_id_if_unset(chunk.get("id").and_then(Value::as_str));
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            self.on_usage(
                u["prompt_tokens"].as_u64(),
                u.pointer("/prompt_tokens_details/cached_tokens")
                    .and_then(Value::as_u64),
                u["completion_tokens"].as_u64(),
            );
        }
        let Some(choices) = chunk.get("choices").and_then(Value::as_array) else {
            return Ok(());
        };
        for choice in choices {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            let delta = &choice["delta"];
            let text = |key: &str| delta.get(key).and_then(Value::as_str);
            let thinking = ["reasoning_content", "reasoning"]
                .into_iter()
                .find_map(|key| text(key).filter(|t| !t.is_empty()));
            self.on_delta_text(thinking, text("content"), text("refusal"), out);
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
        let index = match self.by_wire.get(&wire_index).copied() {
            Some(index) => {
                // The name may come in a later delta than the call's start.
                if let (Some(name), Some(part)) =
                    (function["name"].as_str(), self.message.call_mut(index))
                {
                    if part.tool_name.is_empty() {
                        name.clone_into(&mut part.tool_name);
                    }
                }
                index
            }
            None => {
                let name = function["name"].as_str().unwrap_or_default();
                // Missing ids, and ids reused across calls (some servers use the function
                // name), would break the call/result pairing: made unique.
                let id = self
                    .message
                    .unique_call_id(call["id"].as_str().unwrap_or_default(), name);
                self.by_wire.insert(wire_index, self.calls.len());
                self.calls.push(wire_index);
                self.message.start_call(&id, name, None, out)
            }
        };
        match &function["arguments"] {
            Value::String(fragment) => self.message.call_arguments(index, fragment, out),
            // Sent whole as a JSON value (some gateways).
            value @ (Value::Object(_) | Value::Array(_)) => {
                self.message.call_value(index, value.clone(), out);
            }
            _ => {}
        }
    }

    /// Same semantics as `on_chunk`, on the typed fast-path shape.
    fn on_typed_chunk(&mut self, chunk: ChunkWire<'_>, out: &mut Vec<ModelEvent>) {
        if let Some(u) = chunk.usage {
            self.on_usage(
                u.prompt_tokens,
                u.prompt_tokens_details.and_then(|d| d.cached_tokens),
                u.completion_tokens,
            );
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
                self.on_delta_text(
                    thinking.as_deref(),
                    delta.content.as_deref(),
                    delta.refusal.as_deref(),
                    out,
                );
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

/// The usual shape of a Chat Completions chunk, borrowed from the SSE data.
#[derive(serde::Deserialize)]
pub(super) struct ChunkWire<'a> {
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

impl StreamParser for ChatParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data == "[DONE]" {
            for index in 0..self.calls.len() {
                self.message.end_call(index, out);
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
                self.message.response_id_if_unset(chunk.id.as_deref());
                self.on_typed_chunk(chunk, out);
                return Ok(false);
            }
        }
        let chunk: Value =
            crate::json::lossy_json::parse_value(data).map_err(|e| unreadable(data, &e))?;
        self.on_chunk(&chunk, out)?;
        Ok(false)
    }

    fn message(&self) -> &MessageAssembler {
        &self.message
    }

    fn stop_reason(&self) -> Result<StopReason, ModelError> {
        Ok(match self.finish_reason.as_deref() {
            Some("length") => StopReason::Length,
            Some("content_filter") => StopReason::Refusal,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            _ if !self.calls.is_empty() => StopReason::ToolUse,
            _ if self.message.has_refusal() && self.message.is_empty() => StopReason::Refusal,
            _ => StopReason::Stop,
        })
    }
}
