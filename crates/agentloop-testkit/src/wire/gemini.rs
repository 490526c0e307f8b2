//! Google Gemini streaming (`POST /v1beta/models/{model}:streamGenerateContent?alt=sse`:
//! `data: {GenerateContentResponse}` events framed with `\r\n\r\n`, no terminal event).
//!
//! Shape mirrors the recorded fixtures (`crates/agentloop/tests/fixtures/providers/gemini`):
//! one chunk per thinking piece (`{"text": …, "thought": true}` parts), one per text piece, then
//! one chunk holding every function call (tool searches first, as plain function calls named
//! [`ToolSearch::name`](crate::ToolSearch::name), default `search_tools`), then the final chunk:
//! an empty text part, `finishReason` (`STOP`, also for function calls, or `MAX_TOKENS`) and the
//! full `usageMetadata`. Every chunk carries `modelVersion` (the model named in the path) and a
//! `responseId` unique to the process (`mock-<nonce>-<n>`).
//!
//! Thought signatures, as Gemini 3 sends them: on the first function call of the turn, or, when
//! the turn has no calls, on the empty text part of the final chunk. The value is the turn's
//! `thinking_signature`, or `mock-sig-<responseId>`.
//!
//! Function calls have no `id` unless the script gives one (Gemini 2.5 sends none, Gemini 3
//! does). Arguments are the script's JSON value; raw (non-JSON) script arguments are sent as a
//! JSON string, since Gemini's `args` is always structured.
//!
//! The final chunk is the terminal one: `eof_without_terminal` drops it, so the client never
//! sees a `finishReason`.

use std::sync::OnceLock;

use bytes::Bytes;
use serde_json::{Value, json};

use super::{RenderCtx, Rendered};
use crate::script::{StopReason, ToolArguments};

/// `data: <json>\r\n\r\n`, Gemini's framing.
pub(crate) fn frame(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\r\n\r\n"))
}

/// A per-process random part of response ids, so two mock servers in one process never issue
/// the same `responseId` (clients derive call ids from it).
fn nonce() -> &'static str {
    static NONCE: OnceLock<String> = OnceLock::new();
    NONCE.get_or_init(|| {
        use std::hash::{BuildHasher, Hasher};
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        format!("{:08x}", hasher.finish() as u32)
    })
}

fn args_value(args: &ToolArguments) -> Value {
    match args {
        ToolArguments::Json(v) => v.clone(),
        ToolArguments::Raw(s) => Value::String(s.clone()),
    }
}

pub(crate) fn render(ctx: &RenderCtx<'_>) -> Rendered {
    let response_id = format!("mock-{}-{}", nonce(), ctx.response_id);
    let chunk = |parts: Value, finish: Option<&str>, usage: Value| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(reason) = finish {
            candidate["finishReason"] = json!(reason);
        }
        frame(&json!({
            "candidates": [candidate],
            "usageMetadata": usage,
            "modelVersion": ctx.model,
            "responseId": response_id,
        }))
    };
    let u = ctx.usage;
    let prompt = u.input_tokens + u.cache_read_tokens;
    let early_usage = json!({"promptTokenCount": prompt, "totalTokenCount": prompt});
    let signature = ctx
        .turn
        .thinking_signature
        .clone()
        .unwrap_or_else(|| format!("mock-sig-{response_id}"));

    let mut frames: Vec<Bytes> = Vec::new();
    if let Some(thinking) = ctx.thinking() {
        for piece in ctx.pieces(thinking) {
            frames.push(chunk(
                json!([{"text": piece, "thought": true}]),
                None,
                early_usage.clone(),
            ));
        }
    }
    if let Some(text) = ctx.text() {
        for piece in ctx.pieces(text) {
            frames.push(chunk(json!([{ "text": piece }]), None, early_usage.clone()));
        }
    }
    let mut calls: Vec<Value> = Vec::new();
    for s in &ctx.turn.tool_searches {
        let name = s.name.clone().unwrap_or_else(|| "search_tools".to_string());
        let mut call = json!({"name": name, "args": args_value(&s.arguments)});
        if let Some(id) = &s.call_id {
            call["id"] = json!(id);
        }
        calls.push(json!({ "functionCall": call }));
    }
    for c in &ctx.turn.tool_calls {
        let mut call = json!({"name": c.name, "args": args_value(&c.arguments)});
        if let Some(id) = &c.id {
            call["id"] = json!(id);
        }
        calls.push(json!({ "functionCall": call }));
    }
    let mut last = json!({"text": ""});
    match calls.first_mut() {
        Some(first) => first["thoughtSignature"] = json!(signature),
        None => last["thoughtSignature"] = json!(signature),
    }
    if !calls.is_empty() {
        frames.push(chunk(Value::Array(calls), None, early_usage.clone()));
    }
    let finish = match ctx.turn.effective_stop_reason() {
        StopReason::Stop | StopReason::ToolUse => "STOP",
        StopReason::Length => "MAX_TOKENS",
    };
    let mut usage = json!({
        "promptTokenCount": prompt,
        "candidatesTokenCount": u.output_tokens,
        "totalTokenCount": prompt + u.output_tokens,
    });
    if u.cache_read_tokens > 0 {
        usage["cachedContentTokenCount"] = json!(u.cache_read_tokens);
    }
    frames.push(chunk(json!([last]), Some(finish), usage));
    Rendered {
        frames,
        terminal: 1,
    }
}
