//! The Messages SSE parser: content blocks into deltas and the assistant message, thinking
//! signatures and redacted thinking kept (see the module docs of [`super`]).

use std::collections::HashMap;

use serde_json::Value;

use super::PROVIDER;
use crate::model::{MessageAssembler, ModelError, ModelEvent, PartId};
use crate::providers::core::{StreamParser, stream_error, unreadable};
use crate::providers::sse::SseEvent;
use crate::transcript::{Part, StopReason, ThinkingPart};

/// What a content block assembles into.
#[derive(Clone, Copy, Debug)]
enum BlockKind {
    Text(PartId),
    Thinking(PartId),
    /// A tool call, by its position among the message's calls.
    ToolUse(usize),
    /// A block type this adapter does not assemble (server tools, future types).
    Ignored,
}

/// Assembles Messages API stream events into deltas and the final message. The [`StreamParser`] of
/// the protocol; public so that a protocol built on this one can reuse it.
#[derive(Clone, Debug)]
pub struct MessagesParser {
    message: MessageAssembler,
    /// Every block's kind, in the order they started.
    blocks: Vec<BlockKind>,
    /// Each wire index's newest block in `blocks`: O(1) per event, however many blocks.
    by_wire: HashMap<u64, usize>,
    stop_reason: Option<String>,
}

impl MessagesParser {
    /// A parser for a response to a request for `model` (empty: the model the response names).
    pub fn new(model: String) -> Self {
        MessagesParser {
            message: MessageAssembler::for_provider(PROVIDER, model),
            blocks: Vec::new(),
            by_wire: HashMap::new(),
            stop_reason: None,
        }
    }

    /// Usage fields present here override earlier ones (`message_delta` counts are
    /// cumulative); `input_tokens` already excludes the cache.
    fn apply_usage(&mut self, u: &Value) {
        if !u.is_object() {
            return;
        }
        let usage = self.message.usage_mut();
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

    fn block(&self, wire_index: u64) -> Option<BlockKind> {
        let at = *self.by_wire.get(&wire_index)?;
        self.blocks.get(at).copied()
    }

    fn on_block_start(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        let wire_index = value["index"].as_u64().unwrap_or(self.blocks.len() as u64);
        let block = &value["content_block"];
        let str_field = |name: &str| block[name].as_str().unwrap_or_default().to_owned();
        let kind = match block["type"].as_str() {
            Some("text") => BlockKind::Text(self.message.open_text(&str_field("text"), None, out)),
            Some("thinking") => {
                let signature = Some(str_field("signature")).filter(|s| !s.is_empty());
                let part = ThinkingPart {
                    thinking: str_field("thinking"),
                    signature,
                    redacted: false,
                };
                BlockKind::Thinking(self.message.open_thinking(part, out))
            }
            Some("redacted_thinking") => {
                let part = ThinkingPart {
                    thinking: String::new(),
                    signature: Some(str_field("data")),
                    redacted: true,
                };
                BlockKind::Thinking(self.message.open_thinking(part, out))
            }
            Some("tool_use") => {
                let mut id = str_field("id");
                if id.is_empty() {
                    id = format!("toolu_{}", self.message.call_count());
                }
                let call = self.message.start_call(&id, &str_field("name"), None, out);
                // Some gateways send the input whole here; deltas that follow replace it.
                if let Some(input) = block
                    .get("input")
                    .filter(|v| v.as_object().is_some_and(|o| !o.is_empty()))
                {
                    self.message.call_value(call, input.clone(), out);
                }
                BlockKind::ToolUse(call)
            }
            _ => BlockKind::Ignored,
        };
        self.by_wire.insert(wire_index, self.blocks.len());
        self.blocks.push(kind);
    }

    fn on_block_delta(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        let Some(kind) = value["index"].as_u64().and_then(|i| self.block(i)) else {
            return; // a delta for a block that never started: nothing to attach it to
        };
        let delta = &value["delta"];
        let text = |key: &str| delta[key].as_str().unwrap_or_default();
        match (delta["type"].as_str(), kind) {
            (Some("text_delta"), BlockKind::Text(part)) => {
                self.message.append_text(part, text("text"), out);
            }
            (Some("thinking_delta"), BlockKind::Thinking(part)) => {
                self.message.append_thinking(part, text("thinking"), out);
            }
            (Some("signature_delta"), BlockKind::Thinking(part)) => {
                if let (Some(s), Some(Part::Thinking(thinking))) =
                    (delta["signature"].as_str(), self.message.part_mut(part))
                {
                    thinking
                        .signature
                        .get_or_insert_with(String::new)
                        .push_str(s);
                }
            }
            (Some("input_json_delta"), BlockKind::ToolUse(call)) => {
                // The first fragment may be `""`: no delta for it.
                self.message.call_arguments(call, text("partial_json"), out);
            }
            // citations_delta, deltas of ignored blocks, and future delta types.
            _ => {}
        }
    }

    fn on_block_stop(&mut self, value: &Value, out: &mut Vec<ModelEvent>) {
        if let Some(BlockKind::ToolUse(call)) = value["index"].as_u64().and_then(|i| self.block(i))
        {
            self.message.end_call(call, out);
        }
    }
}

impl StreamParser for MessagesParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        let value: Value = if data.is_empty() {
            Value::Null
        } else {
            crate::json::lossy_json::parse_value(data).map_err(|e| unreadable(data, &e))?
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
                    self.message.set_response_id(id);
                }
                if let Some(model) = message["model"].as_str() {
                    self.message.model_if_unset(model);
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
            "error" => return Err(stream_error(&value["error"], &["type"], "error")),
            // `ping` and event types added after this adapter was written.
            _ => {}
        }
        Ok(false)
    }

    fn message(&self) -> &MessageAssembler {
        &self.message
    }

    fn stop_reason(&self) -> Result<StopReason, ModelError> {
        Ok(match self.stop_reason.as_deref() {
            Some("end_turn" | "stop_sequence" | "pause_turn") => StopReason::Stop,
            Some("tool_use") => StopReason::ToolUse,
            Some("max_tokens" | "model_context_window_exceeded") => StopReason::Length,
            Some("refusal") => StopReason::Refusal,
            _ if self.message.call_count() > 0 => StopReason::ToolUse,
            _ => StopReason::Stop,
        })
    }
}
