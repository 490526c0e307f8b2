//! OpenAI Chat Completions streaming (`data: {chunk}` lines, `data: [DONE]`).
//!
//! Shape mirrors the recorded fixtures: a role chunk first, `reasoning_content` deltas, `content`
//! deltas, then `tool_calls` deltas (id, type and name only on each call's first delta, whose
//! `arguments` is `""`), a chunk with an empty delta and the `finish_reason`, the usage chunk
//! with `choices: []` when the request asked for `stream_options.include_usage`, and `[DONE]`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{RenderCtx, Rendered, data_frame, split_even, unix_now};
use crate::script::StopReason;

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let id = format!("chatcmpl-mock-{}", ctx.response_id);
    let created = unix_now();
    let chunk = |delta: Value, finish: Value| {
        data_frame(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": ctx.model,
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
        }))
    };
    let mut frames: Vec<Bytes> = Vec::new();
    let text = ctx.text();
    frames.push(chunk(
        json!({"role": "assistant", "content": if text.is_some() { json!("") } else { Value::Null }}),
        Value::Null,
    ));
    if let Some(thinking) = ctx.thinking() {
        for piece in ctx.pieces(thinking) {
            frames.push(chunk(json!({"reasoning_content": piece}), Value::Null));
        }
    }
    if let Some(text) = text {
        for piece in ctx.pieces(text) {
            frames.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    for (index, call) in ctx.function_calls(true).iter().enumerate() {
        frames.push(chunk(
            json!({"tool_calls": [{
                "index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }]}),
            Value::Null,
        ));
        for piece in split_even(&call.arguments, call.chunks) {
            frames.push(chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                Value::Null,
            ));
        }
    }
    let finish = match ctx.turn.effective_stop_reason() {
        StopReason::Stop => "stop",
        StopReason::ToolUse => "tool_calls",
        StopReason::Length => "length",
    };
    frames.push(chunk(json!({}), json!(finish)));
    if ctx.include_usage {
        let u = ctx.usage;
        frames.push(data_frame(&json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": ctx.model,
            "choices": [],
            "usage": {
                "prompt_tokens": u.input_tokens,
                "completion_tokens": u.output_tokens,
                "total_tokens": u.input_tokens + u.output_tokens,
                "prompt_tokens_details": {"cached_tokens": u.cache_read_tokens},
                "completion_tokens_details": {"reasoning_tokens": 0},
            },
        })));
    }
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    Rendered {
        frames,
        terminal: 1,
    }
}
