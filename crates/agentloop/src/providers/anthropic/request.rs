//! The Messages request body: blocks, cache breakpoints, token limits and thinking (see the
//! module docs of [`super`] for the mapping).

use serde_json::{Map, Value, json};

use super::{PROVIDER, thinking_budget};
use crate::model::ModelRequest;
use crate::model::OutputFormat;
use crate::providers::ProviderConfig;
use crate::providers::core::wire_f32;
use crate::providers::replay;
use crate::transcript::{ImagePart, Message, Part, Role, ToolCallPart, ToolResultPart};

/// Output tokens reserved for the answer when the request sets no limit.
const ANSWER_TOKENS: u32 = 8192;

/// The smallest thinking budget the API accepts.
const MIN_THINKING_BUDGET: u32 = 1024;

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
pub(super) fn token_limits(model: &str, request: &ModelRequest<'_>) -> (u32, Option<u32>) {
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

pub(super) fn assistant_blocks(message: &Message) -> Vec<Value> {
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

pub(super) fn build_body(config: &ProviderConfig, request: &ModelRequest<'_>) -> Value {
    let (model, messages) = replay::model_and_messages(config.model.as_ref(), request, PROVIDER);

    let mut wire = wire_messages(&messages);
    if config.prompt_cache {
        mark_newest_user_turn(&mut wire);
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
        body.insert("tools".into(), Value::Array(wire_tools(config, request)));
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
                body.insert("temperature".into(), json!(wire_f32(t)));
            }
        }
    }
    if let Some(format) = &request.output {
        body.insert("output_config".into(), anthropic_output_config(format));
    }
    Value::Object(body)
}

/// The conversation as Anthropic messages: consecutive tool results become one user turn.
fn wire_messages(messages: &[Message]) -> Vec<Value> {
    let mut wire: Vec<Value> = Vec::with_capacity(messages.len());
    // Tool results waiting to be sent as one user turn.
    let mut results: Vec<Value> = Vec::new();
    let flush = |wire: &mut Vec<Value>, results: &mut Vec<Value>| {
        if !results.is_empty() {
            wire.push(json!({"role": "user", "content": std::mem::take(results)}));
        }
    };
    for m in messages.iter() {
        if m.role == Role::ToolResult {
            results.extend(m.content.iter().filter_map(|p| match p {
                Part::ToolResult(r) => Some(tool_result_block(r)),
                _ => None,
            }));
            continue;
        }
        flush(&mut wire, &mut results);
        let (role, blocks) = match m.role {
            Role::Assistant => ("assistant", assistant_blocks(m)),
            _ => ("user", user_blocks(m)),
        };
        if !blocks.is_empty() {
            wire.push(json!({"role": role, "content": blocks}));
        }
    }
    flush(&mut wire, &mut results);
    wire
}

/// Caches everything up to the newest user turn: the next request reads it back.
fn mark_newest_user_turn(wire: &mut [Value]) {
    if let Some(block) = wire
        .iter_mut()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_array_mut())
        .and_then(|blocks| blocks.last_mut())
        .and_then(Value::as_object_mut)
    {
        block.insert("cache_control".into(), ephemeral());
    }
}

/// The request's tools; with prompt caching, a breakpoint after the last one.
fn wire_tools(config: &ProviderConfig, request: &ModelRequest<'_>) -> Vec<Value> {
    let mut tools: Vec<Value> = request
        .tools
        .iter()
        .map(
            |t| json!({"name": t.name, "description": t.description, "input_schema": t.parameters}),
        )
        .collect();
    // A breakpoint after the last tool caches the tool list (it comes before the system prompt
    // in the cache's order), so a long list is not re-read on every turn.
    if let Some(Value::Object(last)) = tools.last_mut().filter(|_| config.prompt_cache) {
        last.insert("cache_control".into(), ephemeral());
    }
    tools
}

/// Native structured output (typed output): `output_config.format` with a `json_schema`
/// (Anthropic accepts the schema only; name and strictness are OpenAI notions).
fn anthropic_output_config(format: &OutputFormat) -> Value {
    json!({"format": {"type": "json_schema", "schema": format.schema}})
}
