#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};

use super::request::{build_body, reasoning_item};
use super::*;
use crate::model::{ModelDelta, ModelEvent};
use crate::providers::parser_tests::parse_to_end;
use crate::transcript::{Message, Part, StopReason, ToolArguments, ToolCallPart, ToolResultPart};

fn frame(v: Value) -> String {
    format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
}

fn parse(events: &[Value]) -> (Vec<ModelEvent>, Result<Message, ModelError>) {
    let body: String = events.iter().cloned().map(frame).collect();
    parse_to_end(
        &mut ResponsesParser::new("m".into(), "find_tools".into()),
        &body,
    )
}

fn completed(output: Value) -> Value {
    json!({"type": "response.completed", "response": {"status": "completed", "output": output,
        "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}})
}

#[test]
fn a_client_tool_search_call_becomes_a_call_of_the_search_tool() {
    let item = json!({"id": "ts_1", "type": "tool_search_call", "call_id": "call_s",
        "execution": "client", "arguments": {}, "status": "in_progress"});
    let done = json!({"id": "ts_1", "type": "tool_search_call", "call_id": "call_s",
        "execution": "client", "arguments": {"query": "email"}, "status": "completed"});
    let (events, message) = parse(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        completed(json!([done])),
    ]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    let calls: Vec<_> = message.tool_calls().collect();
    let mut want = ToolCallPart::new("call_s", "find_tools", json!({"query": "email"}));
    want.provider_data = item_data("ts_1", "tool_search_call");
    assert_eq!(calls, [&want]);
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    let usage = message.usage.unwrap_or_default();
    assert_eq!((usage.input_tokens, usage.cache_read_tokens), (6, 4));
    let deltas: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Delta(d) => Some(d.clone()),
            _ => None,
        })
        .collect();
    assert!(matches!(&deltas[0], ModelDelta::ToolCallStart { name, .. } if name == "find_tools"));
    assert!(
        matches!(&deltas[1], ModelDelta::ToolCallArguments { delta, .. } if delta == r#"{"query":"email"}"#)
    );
    assert!(matches!(&deltas[2], ModelDelta::ToolCallEnd { index: 0 }));
}

#[test]
fn server_tool_search_items_are_ignored() {
    let call = json!({"id": "ts_1", "type": "tool_search_call", "call_id": null,
        "execution": "server", "arguments": {"paths": ["crm"]}, "status": "completed"});
    let output = json!({"id": "tso_1", "type": "tool_search_output", "call_id": null,
        "execution": "server", "tools": [], "status": "completed"});
    let (_, message) = parse(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": call}),
        json!({"type": "response.output_item.added", "output_index": 1, "item": output}),
        completed(json!([call, output])),
    ]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(message.tool_calls().count(), 0);
    assert_eq!(message.stop_reason, Some(StopReason::Stop));
}

#[test]
fn encrypted_reasoning_is_kept_in_the_signature_and_summary_parts_are_separated() {
    let added =
        json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "enc-a"});
    let done = json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "enc-b",
        "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}]});
    let (_, message) = parse(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "one"}),
        json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 1, "delta": "two"}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
        completed(json!([done])),
    ]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    let Part::Thinking(t) = &message.content[0] else {
        panic!("{:?}", message.content)
    };
    assert_eq!(t.thinking, "one\n\ntwo");
    assert!(!t.redacted);
    let sig: Value = serde_json::from_str(t.signature.as_deref().unwrap_or(""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sig, json!({"id": "rs_1", "encrypted_content": "enc-b"}));
    assert_eq!(
        reasoning_item(t),
        Some(
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-b",
            "summary": [{"type": "summary_text", "text": "one\n\ntwo"}]})
        )
    );
}

#[test]
fn done_events_fix_up_what_the_deltas_missed() {
    // No deltas at all: arguments and text only in the `.done` items.
    let call = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add", "arguments": ""});
    let call_done = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"x\":1}"});
    let msg_done = json!({"id": "m1", "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "hello"}]});
    let (events, message) = parse(&[
        json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": call_done}),
        // The message item only appears in the terminal output.
        completed(json!([call_done, msg_done])),
    ]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(message.text(), "hello");
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls[0].arguments, ToolArguments::Json(json!({"x": 1})));
    let text_deltas: String = events
        .iter()
        .filter_map(|e| match e {
            ModelEvent::Delta(ModelDelta::Text { delta }) => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text_deltas, "hello", "fix-ups are streamed as deltas too");
}

#[test]
fn error_events_flat_or_nested_are_provider_errors() {
    let (_, flat) = parse(&[
        json!({"type": "error", "code": "server_error", "message": "boom", "param": null}),
    ]);
    assert_eq!(
        flat.err(),
        Some(ModelError::Provider {
            code: "server_error".into(),
            message: "boom".into()
        })
    );
    let (_, failed) = parse(&[json!({"type": "response.failed", "response": {
        "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}})]);
    assert_eq!(
        failed.err(),
        Some(ModelError::Provider {
            code: "rate_limit_exceeded".into(),
            message: "slow down".into()
        })
    );
}

#[test]
fn item_ids_are_kept_and_replayed_to_the_same_model_only() {
    let msg = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [{"type": "output_text", "text": "hi"}]});
    let call = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add",
        "arguments": "{}"});
    let (_, message) = parse(&[completed(json!([msg, call]))]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        message.content[0],
        Part::Text {
            text: "hi".into(),
            provider_data: item_data("msg_1", "message"),
        }
    );
    let history = vec![
        Message::user("q"),
        message,
        Message::tool_result(ToolResultPart::success("c1", "add", "2")),
    ];
    let body = |model: &str| {
        let config = ProviderConfig::new("http://x").model(model);
        build_body(&config, &ModelRequest::new(history.clone()))
    };
    let same = body("m");
    assert_eq!(
        same["input"][1],
        json!({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
            "content": [{"type": "output_text", "text": "hi", "annotations": []}]})
    );
    assert_eq!(
        same["input"][2],
        json!({"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}",
            "id": "fc_1"})
    );
    let other = body("m2");
    assert_eq!(
        other["input"][1],
        json!({"type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "hi"}]})
    );
    assert!(other["input"][2].get("id").is_none());
}

#[test]
fn incomplete_content_filter_is_a_refusal() {
    let (_, message) = parse(&[json!({"type": "response.incomplete", "response": {
        "status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []}})]);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(message.stop_reason, Some(StopReason::Refusal));
}
