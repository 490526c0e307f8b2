#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};

use super::request::{assistant_blocks, token_limits};
use super::*;
use crate::model::ModelDelta;
use crate::providers::core::StreamParser;
use crate::providers::fixtures::{recorded, redacted_thinking, thinking};
use crate::providers::parser_tests::{deltas, parse_sse};
use crate::transcript::{Message, Part, StopReason, ToolArguments, ToolCallPart, Usage};

/// One SSE event with the payload's type as its name.
fn ev(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or("message").to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

fn start(input_tokens: u64) -> String {
    ev(json!({"type": "message_start", "message": {
        "id": "msg_1", "model": "claude-wire", "usage": {"input_tokens": input_tokens, "output_tokens": 1}
    }}))
}

fn block_start(index: u64, block: Value) -> String {
    ev(json!({"type": "content_block_start", "index": index, "content_block": block}))
}

/// The start of a `tool_use` block.
fn tool_start(index: u64, id: &str, name: &str, input: Value) -> String {
    block_start(
        index,
        json!({"type": "tool_use", "id": id, "name": name, "input": input}),
    )
}

/// A piece of a tool block's JSON input.
fn json_delta(index: u64, partial: &str) -> String {
    delta(
        index,
        json!({"type": "input_json_delta", "partial_json": partial}),
    )
}

fn delta(index: u64, delta: Value) -> String {
    ev(json!({"type": "content_block_delta", "index": index, "delta": delta}))
}

fn stop(index: u64) -> String {
    ev(json!({"type": "content_block_stop", "index": index}))
}

fn message_delta(reason: &str, usage: Value) -> String {
    ev(json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": usage}))
}

fn end() -> String {
    ev(json!({"type": "message_stop"}))
}

/// Runs a body through the decoder and parser: the deltas and the terminal outcome (`None`
/// when no terminal event arrived).
fn run(
    model: &str,
    body: &str,
) -> (
    Vec<ModelDelta>,
    Option<Result<Message, ModelError>>,
    MessagesParser,
) {
    let mut parser = MessagesParser::new(model.into());
    let (events, end) = parse_sse(&mut parser, body);
    (deltas(events), end, parser)
}

fn done(model: &str, body: &str) -> Message {
    match run(model, body).1 {
        Some(Ok(m)) => m,
        other => panic!("expected a message, got {other:?}"),
    }
}

/// Runs `events` (model `m`) to a completed message: the deltas and the message.
fn deltas_and_message(events: &[String]) -> (Vec<ModelDelta>, Message) {
    match run("m", &events.concat()) {
        (deltas, Some(Ok(message)), _) => (deltas, message),
        (_, other, _) => panic!("expected a message, got {other:?}"),
    }
}

#[test]
fn tool_input_deltas_stream_partial_values_and_end() {
    let (deltas, message) = deltas_and_message(&[
        start(10),
        tool_start(0, "toolu_a", "write", json!({})),
        json_delta(0, ""),
        json_delta(0, "{\"path\": \"a.t"),
        json_delta(0, "xt\"}"),
        stop(0),
        message_delta("tool_use", json!({"output_tokens": 9})),
        end(),
    ]);
    assert_eq!(
        deltas,
        vec![
            ModelDelta::ToolCallStart {
                index: 0,
                id: "toolu_a".into(),
                name: "write".into()
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "{\"path\": \"a.t".into(),
                partial: Some(json!({"path": "a.t"})),
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "xt\"}".into(),
                partial: Some(json!({"path": "a.txt"})),
            },
            ModelDelta::ToolCallEnd { index: 0 },
        ],
        "no delta for the empty first fragment"
    );
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(
        calls[0].arguments,
        ToolArguments::Json(json!({"path": "a.txt"}))
    );
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
    assert_eq!(message.provider.as_deref(), Some(PROVIDER));
    assert_eq!(message.model.as_deref(), Some("m"), "the requested model");
}

#[test]
fn empty_input_is_an_empty_object_and_whole_start_input_is_kept() {
    let (deltas, message) = deltas_and_message(&[
        start(1),
        tool_start(0, "t1", "now", json!({})),
        stop(0),
        tool_start(1, "t2", "read", json!({"path": "x"})),
        stop(1),
        message_delta("tool_use", json!({"output_tokens": 3})),
        end(),
    ]);
    assert!(deltas.contains(&ModelDelta::ToolCallArguments {
        index: 1,
        delta: "{\"path\":\"x\"}".into(),
        partial: Some(json!({"path": "x"})),
    }));
    let args: Vec<_> = message.tool_calls().map(|c| c.arguments.clone()).collect();
    assert_eq!(
        args,
        vec![
            ToolArguments::Json(json!({})),
            ToolArguments::Json(json!({"path": "x"}))
        ]
    );
}

#[test]
fn a_tool_block_cut_by_max_tokens_keeps_its_raw_text() {
    let (deltas, message) = deltas_and_message(&[
        start(1),
        tool_start(0, "t1", "write", json!({})),
        json_delta(0, "{\"text\": \"hel"),
        message_delta("max_tokens", json!({"output_tokens": 3})),
        end(),
    ]);
    assert!(
        !deltas
            .iter()
            .any(|d| matches!(d, ModelDelta::ToolCallEnd { .. })),
        "an unfinished call never ends"
    );
    assert_eq!(message.stop_reason, Some(StopReason::Length));
    assert_eq!(
        message.tool_calls().next().map(|c| c.arguments.clone()),
        Some(ToolArguments::Unparsed("{\"text\": \"hel".into()))
    );
}

#[test]
fn thinking_signatures_and_redacted_thinking() {
    let (deltas, message) = deltas_and_message(&[
        start(1),
        block_start(
            0,
            json!({"type": "thinking", "thinking": "", "signature": ""}),
        ),
        delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        delta(0, json!({"type": "signature_delta", "signature": "sig-1"})),
        stop(0),
        block_start(1, json!({"type": "redacted_thinking", "data": "opaque"})),
        stop(1),
        block_start(2, json!({"type": "text", "text": ""})),
        delta(2, json!({"type": "text_delta", "text": "Hi"})),
        stop(2),
        message_delta("end_turn", json!({"output_tokens": 30})),
        end(),
    ]);
    assert_eq!(
        deltas,
        vec![
            ModelDelta::Thinking {
                delta: "Let me ".into()
            },
            ModelDelta::Thinking {
                delta: "think.".into()
            },
            ModelDelta::Text { delta: "Hi".into() },
        ]
    );
    assert_eq!(
        message.content,
        vec![
            thinking("Let me think.", Some("sig-1")),
            redacted_thinking(Some("opaque")),
            Part::text("Hi"),
        ]
    );
}

#[test]
fn usage_comes_from_both_events_and_message_delta_overrides() {
    let body = [
        ev(
            json!({"type": "message_start", "message": {"model": "w", "usage": {
                "input_tokens": 5, "output_tokens": 1,
                "cache_read_input_tokens": 100, "cache_creation_input_tokens": 20
            }}}),
        ),
        message_delta(
            "end_turn",
            json!({"input_tokens": 7, "output_tokens": 42, "cache_read_input_tokens": null}),
        ),
        end(),
    ]
    .concat();
    let message = done("m", &body);
    assert_eq!(
        message.usage,
        Some(Usage {
            input_tokens: 7,
            output_tokens: 42,
            cache_read_tokens: 100,
            cache_write_tokens: 20,
            cost_usd: None,
        })
    );
    assert!(message.content.is_empty());
}

#[test]
fn the_wire_model_is_used_when_the_request_named_none() {
    let body = [start(1), message_delta("end_turn", json!({})), end()].concat();
    assert_eq!(done("", &body).model.as_deref(), Some("claude-wire"));
}

#[test]
fn stop_reasons_map_as_documented() {
    let unknown = "something_new";
    for (want, wires) in [
        (
            StopReason::Stop,
            &["end_turn", "stop_sequence", "pause_turn", unknown][..],
        ),
        (StopReason::ToolUse, &["tool_use"]),
        (
            StopReason::Length,
            &["max_tokens", "model_context_window_exceeded"],
        ),
        (StopReason::Refusal, &["refusal"]),
    ] {
        for wire in wires {
            let body = [start(1), message_delta(wire, json!({})), end()].concat();
            assert_eq!(done("m", &body).stop_reason, Some(want), "{wire}");
        }
    }
    // No stop reason at all, but a tool call: the calls decide.
    let body = [start(1), tool_start(0, "t", "n", json!({})), stop(0), end()].concat();
    assert_eq!(done("m", &body).stop_reason, Some(StopReason::ToolUse));
}

#[test]
fn an_error_event_is_a_provider_error_with_its_type_as_code() {
    let body = [
        start(1),
        ev(
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ),
    ]
    .concat();
    let (_, terminal, _) = run("m", &body);
    let err = match terminal {
        Some(Err(e)) => e,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        err,
        ModelError::Provider {
            code: "overloaded_error".into(),
            message: "Overloaded".into()
        }
    );
    assert!(
        err.to_string().to_ascii_lowercase().contains("overloaded"),
        "the transport's retry check looks for this word"
    );
}

#[test]
fn pings_unknown_events_blocks_and_deltas_are_ignored() {
    let (deltas, message) = deltas_and_message(&[
        start(1),
        ev(json!({"type": "ping"})),
        ev(json!({"type": "some_future_event", "x": 1})),
        block_start(
            0,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}),
        ),
        json_delta(0, "{\"q\": 1}"),
        stop(0),
        block_start(1, json!({"type": "text", "text": ""})),
        delta(
            1,
            json!({"type": "citations_delta", "citation": {"cited_text": "x"}}),
        ),
        delta(1, json!({"type": "text_delta", "text": "ok"})),
        delta(9, json!({"type": "text_delta", "text": "orphan"})),
        stop(1),
        message_delta("end_turn", json!({"output_tokens": 2})),
        end(),
    ]);
    assert_eq!(deltas, vec![ModelDelta::Text { delta: "ok".into() }]);
    assert_eq!(message.content, vec![Part::text("ok")]);
}

#[test]
fn the_event_name_is_the_fallback_for_a_payload_without_type() {
    let body = concat!(
        "event: message_start\ndata: {\"message\": {\"usage\": {\"input_tokens\": 3}}}\n\n",
        "event: message_stop\ndata: {}\n\n",
    );
    let message = done("m", body);
    assert_eq!(message.usage.map(|u| u.input_tokens), Some(3));
}

#[test]
fn an_unreadable_event_is_a_stream_error() {
    let (_, terminal, _) = run("m", "event: message_start\ndata: {not json\n\n");
    assert!(
        matches!(terminal, Some(Err(ModelError::Stream { message: m, .. })) if m.contains("{not json"))
    );
}

#[test]
fn the_partial_message_of_a_cut_stream_keeps_what_arrived() {
    let body = [
        start(4),
        block_start(0, json!({"type": "text", "text": ""})),
        delta(0, json!({"type": "text_delta", "text": "Working"})),
        stop(0),
        tool_start(1, "t1", "run", json!({})),
        json_delta(1, "{\"cmd\""),
    ]
    .concat();
    let (_, terminal, parser) = run("m", &body);
    assert!(terminal.is_none());
    let partial = parser.partial();
    assert_eq!(partial.text(), "Working");
    assert_eq!(partial.stop_reason, Some(StopReason::Error));
    assert_eq!(
        partial.tool_calls().next().map(|c| c.arguments.clone()),
        Some(ToolArguments::Unparsed("{\"cmd\"".into()))
    );
    assert_eq!(partial.usage.map(|u| u.input_tokens), Some(4));
}

#[test]
fn token_limits_fit_the_thinking_budget() {
    let request = |reasoning: Option<ReasoningLevel>, max: Option<u32>| {
        let mut r = ModelRequest::new(vec![]);
        r.reasoning = reasoning;
        r.max_output_tokens = max;
        r
    };
    let m = "claude-sonnet-4-5";
    assert_eq!(token_limits(m, &request(None, None)), (8192, None));
    assert_eq!(
        token_limits(m, &request(Some(ReasoningLevel::Off), Some(100))),
        (100, None)
    );
    assert_eq!(
        token_limits(m, &request(Some(ReasoningLevel::High), None)),
        (16384 + 8192, Some(16384))
    );
    // Capped by the model's output limit, budget shrunk to leave room for the answer.
    assert_eq!(
        token_limits(
            "claude-opus-4-1-20250805",
            &request(Some(ReasoningLevel::Xhigh), None)
        ),
        (32000, Some(32000 - 1024))
    );
    assert_eq!(
        token_limits("claude-3-haiku-20240307", &request(None, None)),
        (4096, None)
    );
    // An explicit limit wins; the budget fits under it, never below the minimum.
    assert_eq!(
        token_limits(m, &request(Some(ReasoningLevel::Medium), Some(4000))),
        (4000, Some(4000 - 1024))
    );
    assert_eq!(
        token_limits(m, &request(Some(ReasoningLevel::Minimal), Some(1500))),
        (1500, Some(1024))
    );
    assert_eq!(
        token_limits(m, &request(Some(ReasoningLevel::Low), Some(1024))),
        (1024, None),
        "no room for the minimum budget: thinking stays off"
    );
}

#[test]
fn thinking_without_signature_is_replayed_as_text_and_bad_arguments_as_empty_input() {
    let assistant = recorded(
        PROVIDER,
        "m",
        vec![
            thinking("half a thought", None),
            redacted_thinking(None),
            Part::text("  "),
            Part::ToolCall(ToolCallPart {
                id: "t1".into(),
                tool_name: "w".into(),
                arguments: ToolArguments::Unparsed("{\"a\": ".into()),
                provider_data: None,
            }),
            Part::ToolCall(ToolCallPart::new("t2", "w", json!("a string"))),
        ],
        StopReason::ToolUse,
    );
    assert_eq!(
        assistant_blocks(&assistant),
        vec![
            json!({"type": "text", "text": "half a thought"}),
            json!({"type": "tool_use", "id": "t1", "name": "w", "input": {}}),
            json!({"type": "tool_use", "id": "t2", "name": "w", "input": {}}),
        ]
    );
}
