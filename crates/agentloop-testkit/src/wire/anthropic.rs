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

use super::{RenderCtx, Rendered, WireCall, event_frame, split_even};
use crate::script::StopReason;

/// The content blocks of one message as they are streamed: each opened, its deltas, closed;
/// one `ping` after the first block starts.
struct Blocks {
    frames: Vec<Bytes>,
    index: usize,
    pinged: bool,
}

impl Blocks {
    fn block(&mut self, start: Value, deltas: Vec<Value>) {
        let index = self.index;
        self.frames.push(event_frame(
            "content_block_start",
            &json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        self.ping();
        for delta in deltas {
            self.frames.push(event_frame(
                "content_block_delta",
                &json!({"type": "content_block_delta", "index": index, "delta": delta}),
            ));
        }
        self.frames.push(event_frame(
            "content_block_stop",
            &json!({"type": "content_block_stop", "index": index}),
        ));
        self.index += 1;
    }

    fn ping(&mut self) {
        if !self.pinged {
            self.frames
                .push(event_frame("ping", &json!({"type": "ping"})));
            self.pinged = true;
        }
    }

    fn thinking(&mut self, ctx: &RenderCtx<'_>, thinking: &str) {
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
        self.block(
            json!({"type": "thinking", "thinking": "", "signature": ""}),
            deltas,
        );
    }

    fn tool_use(&mut self, call: WireCall) {
        let mut deltas = vec![json!({"type": "input_json_delta", "partial_json": ""})];
        deltas.extend(
            split_even(&call.arguments, call.chunks)
                .into_iter()
                .map(|p| json!({"type": "input_json_delta", "partial_json": p})),
        );
        self.block(
            json!({"type": "tool_use", "id": call.id, "name": call.name, "input": {}}),
            deltas,
        );
    }
}

fn message_start(ctx: &RenderCtx<'_>) -> Bytes {
    let u = ctx.usage;
    event_frame(
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
    )
}

fn message_delta(ctx: &RenderCtx<'_>) -> Bytes {
    let u = ctx.usage;
    let stop = match ctx.turn.effective_stop_reason() {
        StopReason::Stop => "end_turn",
        StopReason::ToolUse => "tool_use",
        StopReason::Length => "max_tokens",
    };
    event_frame(
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
    )
}

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let mut blocks = Blocks {
        frames: vec![message_start(ctx)],
        index: 0,
        pinged: false,
    };
    if let Some(thinking) = ctx.thinking() {
        blocks.thinking(ctx, thinking);
    }
    if let Some(text) = ctx.text() {
        let deltas = ctx
            .pieces(text)
            .into_iter()
            .map(|p| json!({"type": "text_delta", "text": p}))
            .collect();
        blocks.block(json!({"type": "text", "text": ""}), deltas);
    }
    for call in ctx.function_calls(true) {
        blocks.tool_use(call);
    }
    blocks.ping();
    let mut frames = blocks.frames;
    frames.push(message_delta(ctx));
    frames.push(event_frame(
        "message_stop",
        &json!({"type": "message_stop"}),
    ));
    Rendered {
        frames,
        terminal: 1,
    }
}
