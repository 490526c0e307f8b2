//! OpenAI Responses streaming (`event: <type>\ndata: {json}`, no `[DONE]`).
//!
//! Shape mirrors the recorded fixtures: `response.created`, `response.in_progress`, then one
//! output item per part — `reasoning` (summary part and text deltas), `message` (one
//! `output_text` content part), `tool_search_call` (client execution; see below),
//! `function_call` (argument deltas) — each opened by `response.output_item.added` and closed by
//! `response.output_item.done`, then the terminal `response.completed` (or `response.incomplete`
//! with `incomplete_details.reason = "max_output_tokens"` for a `length` stop) carrying all output
//! items and the usage. Every event has a `sequence_number` counting from 0.
//!
//! A `tool_search_call` item streams no delta events:
//! `output_item.added` carries `{"id": "ts_…", "type": "tool_search_call", "call_id": …,
//! "execution": "client", "arguments": {}, "status": "in_progress"}` and `output_item.done` the
//! same item with the full `arguments` (a JSON value) and `"status": "completed"`.

use bytes::Bytes;
use serde_json::{Value, json};

use super::{
    RenderCtx, Rendered, WireCall, event_frame, search_arguments, search_id, split_even, unix_now,
};
use crate::script::StopReason;

struct Events {
    frames: Vec<Bytes>,
    seq: u64,
}

impl Events {
    fn push(&mut self, kind: &str, mut body: Value) {
        if let Value::Object(map) = &mut body {
            map.insert("type".to_string(), json!(kind));
            map.insert("sequence_number".to_string(), json!(self.seq));
        }
        self.seq += 1;
        self.frames.push(event_frame(kind, &body));
    }
}

/// The `response` object of the lifecycle events, with `output` and `usage` so far.
fn response(
    ctx: &RenderCtx<'_>,
    created_at: u64,
    status: &str,
    output: &[Value],
    usage: Value,
) -> Value {
    json!({
        "id": format!("resp_mock_{}", ctx.response_id),
        "object": "response",
        "created_at": created_at,
        "status": status,
        "error": null,
        "incomplete_details": if status == "incomplete" {
            json!({"reason": "max_output_tokens"})
        } else {
            Value::Null
        },
        "model": ctx.model,
        "output": output,
        "parallel_tool_calls": true,
        "previous_response_id": null,
        "usage": usage,
    })
}

/// The output items of one response as they are streamed.
struct Items<'c, 'a> {
    ctx: &'c RenderCtx<'a>,
    ev: Events,
    output: Vec<Value>,
}

impl Items<'_, '_> {
    /// Closes the item at the current output index and keeps it for the terminal event.
    fn done(&mut self, item: Value) {
        let oi = self.output.len();
        self.ev.push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        self.output.push(item);
    }

    fn reasoning(&mut self, thinking: &str) {
        let (rid, oi) = (self.ctx.response_id, self.output.len());
        let item_id = format!("rs_mock_{rid}_{oi}");
        let enc = format!("mock-encrypted-{rid}-{oi}");
        self.ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "reasoning", "summary": [], "encrypted_content": enc,
            }}),
        );
        self.ev.push(
            "response.reasoning_summary_part.added",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0,
                   "part": {"type": "summary_text", "text": ""}}),
        );
        for piece in self.ctx.pieces(thinking) {
            self.ev.push(
                "response.reasoning_summary_text.delta",
                json!({"item_id": item_id, "output_index": oi, "summary_index": 0, "delta": piece}),
            );
        }
        self.ev.push(
            "response.reasoning_summary_text.done",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0, "text": thinking}),
        );
        self.ev.push(
            "response.reasoning_summary_part.done",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0,
                   "part": {"type": "summary_text", "text": thinking}}),
        );
        self.done(json!({
            "id": item_id, "type": "reasoning",
            "summary": [{"type": "summary_text", "text": thinking}],
            "encrypted_content": enc,
        }));
    }

    fn message(&mut self, text: &str, status: &str) {
        let oi = self.output.len();
        let item_id = format!("msg_mock_{}", self.ctx.response_id);
        self.ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": [],
            }}),
        );
        self.ev.push(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
        );
        for piece in self.ctx.pieces(text) {
            self.ev.push(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                       "delta": piece, "logprobs": []}),
            );
        }
        self.ev.push(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                   "text": text, "logprobs": []}),
        );
        let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        self.ev.push(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0, "part": part}),
        );
        self.done(json!({
            "id": item_id, "type": "message", "status": status,
            "role": "assistant", "content": [part],
        }));
    }

    fn tool_searches(&mut self) {
        let ctx = self.ctx;
        for (i, search) in ctx.turn.tool_searches.iter().enumerate() {
            let oi = self.output.len();
            let item_id = format!("ts_mock_{}_{oi}", ctx.response_id);
            let call_id = search
                .call_id
                .clone()
                .unwrap_or_else(|| search_id(ctx.turn_index, i));
            self.ev.push(
                "response.output_item.added",
                json!({"output_index": oi, "item": {
                    "id": item_id, "type": "tool_search_call", "call_id": call_id,
                    "execution": "client", "arguments": {}, "status": "in_progress",
                }}),
            );
            self.done(json!({
                "id": item_id, "type": "tool_search_call", "call_id": call_id,
                "execution": "client", "arguments": search_arguments(&search.arguments),
                "status": "completed",
            }));
        }
    }

    fn function_call(&mut self, call: WireCall, status: &str) {
        let oi = self.output.len();
        let item_id = format!("fc_mock_{}_{oi}", self.ctx.response_id);
        self.ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "function_call", "status": "in_progress",
                "call_id": call.id, "name": call.name, "arguments": "",
            }}),
        );
        for piece in split_even(&call.arguments, call.chunks) {
            self.ev.push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": oi, "delta": piece}),
            );
        }
        self.ev.push(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": oi, "arguments": call.arguments}),
        );
        self.done(json!({
            "id": item_id, "type": "function_call", "status": status,
            "call_id": call.id, "name": call.name, "arguments": call.arguments,
        }));
    }
}

fn wire_usage(ctx: &RenderCtx<'_>) -> Value {
    let u = ctx.usage;
    json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens,
    })
}

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let created_at = unix_now();
    let length = ctx.turn.effective_stop_reason() == StopReason::Length;
    let mut items = Items {
        ctx,
        ev: Events {
            frames: Vec::new(),
            seq: 0,
        },
        output: Vec::new(),
    };
    let started = json!({"response": response(ctx, created_at, "in_progress", &[], Value::Null)});
    items.ev.push("response.created", started.clone());
    items.ev.push("response.in_progress", started);
    if let Some(thinking) = ctx.thinking() {
        items.reasoning(thinking);
    }
    // The last message or function_call item gets status "incomplete" on a length stop.
    let calls = ctx.function_calls(false);
    let status = |is_last: bool| {
        if length && is_last {
            "incomplete"
        } else {
            "completed"
        }
    };
    if let Some(text) = ctx.text() {
        let text_is_last = calls.is_empty() && ctx.turn.tool_searches.is_empty();
        items.message(text, status(text_is_last));
    }
    items.tool_searches();
    let n_calls = calls.len();
    for (i, call) in calls.into_iter().enumerate() {
        items.function_call(call, status(i + 1 == n_calls));
    }
    let (kind, status) = if length {
        ("response.incomplete", "incomplete")
    } else {
        ("response.completed", "completed")
    };
    let end = response(ctx, created_at, status, &items.output, wire_usage(ctx));
    items.ev.push(kind, json!({"response": end}));
    Rendered {
        frames: items.ev.frames,
        terminal: 1,
    }
}
