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

use super::{RenderCtx, Rendered, event_frame, search_arguments, search_id, split_even, unix_now};
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

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let rid = ctx.response_id;
    let resp_id = format!("resp_mock_{rid}");
    let created_at = unix_now();
    let length = ctx.turn.effective_stop_reason() == StopReason::Length;
    let response = |status: &str, output: &[Value], usage: Value| {
        json!({
            "id": resp_id,
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
    };
    let mut ev = Events {
        frames: Vec::new(),
        seq: 0,
    };
    ev.push(
        "response.created",
        json!({"response": response("in_progress", &[], Value::Null)}),
    );
    ev.push(
        "response.in_progress",
        json!({"response": response("in_progress", &[], Value::Null)}),
    );

    let mut output: Vec<Value> = Vec::new();

    if let Some(thinking) = ctx.thinking() {
        let oi = output.len();
        let item_id = format!("rs_mock_{rid}_{oi}");
        let enc = format!("mock-encrypted-{rid}-{oi}");
        ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "reasoning", "summary": [], "encrypted_content": enc,
            }}),
        );
        ev.push(
            "response.reasoning_summary_part.added",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0,
                   "part": {"type": "summary_text", "text": ""}}),
        );
        for piece in ctx.pieces(thinking) {
            ev.push(
                "response.reasoning_summary_text.delta",
                json!({"item_id": item_id, "output_index": oi, "summary_index": 0, "delta": piece}),
            );
        }
        ev.push(
            "response.reasoning_summary_text.done",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0, "text": thinking}),
        );
        ev.push(
            "response.reasoning_summary_part.done",
            json!({"item_id": item_id, "output_index": oi, "summary_index": 0,
                   "part": {"type": "summary_text", "text": thinking}}),
        );
        let item = json!({
            "id": item_id, "type": "reasoning",
            "summary": [{"type": "summary_text", "text": thinking}],
            "encrypted_content": enc,
        });
        ev.push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        output.push(item);
    }

    // The last message or function_call item gets status "incomplete" on a length stop.
    let calls = ctx.function_calls(false);
    let last_status = |is_last: bool| {
        if length && is_last {
            "incomplete"
        } else {
            "completed"
        }
    };
    let text_is_last = calls.is_empty() && ctx.turn.tool_searches.is_empty();

    if let Some(text) = ctx.text() {
        let oi = output.len();
        let item_id = format!("msg_mock_{rid}");
        ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "message", "status": "in_progress", "role": "assistant",
                "content": [],
            }}),
        );
        ev.push(
            "response.content_part.added",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                   "part": {"type": "output_text", "text": "", "annotations": [], "logprobs": []}}),
        );
        for piece in ctx.pieces(text) {
            ev.push(
                "response.output_text.delta",
                json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                       "delta": piece, "logprobs": []}),
            );
        }
        ev.push(
            "response.output_text.done",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0,
                   "text": text, "logprobs": []}),
        );
        let part = json!({"type": "output_text", "text": text, "annotations": [], "logprobs": []});
        ev.push(
            "response.content_part.done",
            json!({"item_id": item_id, "output_index": oi, "content_index": 0, "part": part}),
        );
        let item = json!({
            "id": item_id, "type": "message", "status": last_status(text_is_last),
            "role": "assistant", "content": [part],
        });
        ev.push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        output.push(item);
    }

    for (i, search) in ctx.turn.tool_searches.iter().enumerate() {
        let oi = output.len();
        let item_id = format!("ts_mock_{rid}_{oi}");
        let call_id = search
            .call_id
            .clone()
            .unwrap_or_else(|| search_id(ctx.turn_index, i));
        ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "tool_search_call", "call_id": call_id,
                "execution": "client", "arguments": {}, "status": "in_progress",
            }}),
        );
        let item = json!({
            "id": item_id, "type": "tool_search_call", "call_id": call_id,
            "execution": "client", "arguments": search_arguments(&search.arguments),
            "status": "completed",
        });
        ev.push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        output.push(item);
    }

    let n_calls = calls.len();
    for (i, call) in calls.into_iter().enumerate() {
        let oi = output.len();
        let item_id = format!("fc_mock_{rid}_{oi}");
        ev.push(
            "response.output_item.added",
            json!({"output_index": oi, "item": {
                "id": item_id, "type": "function_call", "status": "in_progress",
                "call_id": call.id, "name": call.name, "arguments": "",
            }}),
        );
        for piece in split_even(&call.arguments, call.chunks) {
            ev.push(
                "response.function_call_arguments.delta",
                json!({"item_id": item_id, "output_index": oi, "delta": piece}),
            );
        }
        ev.push(
            "response.function_call_arguments.done",
            json!({"item_id": item_id, "output_index": oi, "arguments": call.arguments}),
        );
        let item = json!({
            "id": item_id, "type": "function_call", "status": last_status(i + 1 == n_calls),
            "call_id": call.id, "name": call.name, "arguments": call.arguments,
        });
        ev.push(
            "response.output_item.done",
            json!({"output_index": oi, "item": item}),
        );
        output.push(item);
    }

    let u = ctx.usage;
    let usage = json!({
        "input_tokens": u.input_tokens,
        "input_tokens_details": {
            "cached_tokens": u.cache_read_tokens,
            "cache_write_tokens": u.cache_write_tokens,
        },
        "output_tokens": u.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": u.input_tokens + u.output_tokens,
    });
    if length {
        ev.push(
            "response.incomplete",
            json!({"response": response("incomplete", &output, usage)}),
        );
    } else {
        ev.push(
            "response.completed",
            json!({"response": response("completed", &output, usage)}),
        );
    }
    Rendered {
        frames: ev.frames,
        terminal: 1,
    }
}
