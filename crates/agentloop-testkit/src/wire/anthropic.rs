//! Anthropic Messages streaming (`event: <type>\ndata: {json}`).
//!
//! Shape mirrors the recorded fixtures: `message_start` (usage with `input_tokens`), one `ping`
//! after the first `content_block_start` (or after `message_start` when there is no block),
//! content blocks in order — `thinking` (thinking deltas, then one `signature_delta`), `text`
//! (`text_delta`s), `tool_use` (an empty `input_json_delta` first, then the argument fragments) —
//! each closed by `content_block_stop`, then `message_delta` (stop reason, cumulative usage) and
//! the terminal `message_stop`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{RenderCtx, Rendered, event_frame, split_even};
use crate::script::StopReason;

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let u = ctx.usage;
    let mut frames: Vec<Bytes> = Vec::new();
    frames.push(event_frame(
        "message_start",
        &json!({"type": "message_start", "message": {
            "id": format!("msg_mock_{}", ctx.response_id),
            "type": "message",
            "role": "assistant",
            "model": ctx.model,
            "content": [],
            "stop_reason": null,
            "stop_sequence": null,
            "usage": {
                "input_tokens": u.input_tokens,
                "cache_creation_input_tokens": u.cache_write_tokens,
                "cache_read_input_tokens": u.cache_read_tokens,
                "output_tokens": 1,
            },
        }}),
    ));
    let mut index = 0usize;
    let mut pinged = false;
    let mut block = |frames: &mut Vec<Bytes>, start: Value, deltas: Vec<Value>| {
        frames.push(event_frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        if !pinged {
            frames.push(event_frame("ping", &json!({"type": "ping"})));
            pinged = true;
        }
        for delta in deltas {
            frames.push(event_frame(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        frames.push(event_frame(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    };
    if let Some(thinking) = ctx.thinking() {
        let mut deltas: Vec<Value> = ctx
            .pieces(thinking)
            .into_iter()
            .map(|p| json!({"type": "thinking_delta", "thinking": p}))
            .collect();
        let signature = ctx
            .turn
            .thinking_signature
            .clone()
            .unwrap_or_else(|| "mock-signature".to_string());
        deltas.push(json!({"type": "signature_delta", "signature": signature}));
        block(
            &mut frames,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }
    if let Some(text) = ctx.text() {
        let deltas = ctx
            .pieces(text)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        block(&mut frames, json!({"type": "text", "text": ""}), deltas);
    }
    for call in ctx.function_calls(true) {
        let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
        deltas.extend(
            split_even(&call.arguments, call.chunks)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p})),
        );
        block(
            &mut frames,
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            deltas,
        );
    }
    if !pinged {
        frames.push(event_frame("ping", &json!({"type": "ping"})));
    }
    let stop = match ctx.turn.effective_stop_reason() {
        StopReason::Stop => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::Length => "max_tokens",
    };
    frames.push(event_frame(
        "message_delta",
        &json!({
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": null},
            "usage": {
                "input_tokens": u.input_tokens,
                "cache_creation_input_tokens": u.cache_write_tokens,
                "cache_read_input_tokens": u.cache_read_tokens,
                "output_tokens": u.output_tokens,
            },
        }),
    ));
    frames.push(event_frame(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    Rendered {
        frames,
        terminal: 1,
    }
}
