//! The transcript's JSON shape is a stable contract (sessions, `--json` output and exports use
//! it): these snapshots fail on any change to it, and every message round-trips exactly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop::transcript::{
    ImagePart, Message, Part, StopReason, ThinkingPart, ToolArguments, ToolCallPart,
    ToolResultPart, Usage,
};
use serde_json::{Value, json};

fn fixed(mut m: Message) -> Message {
    m.timestamp_ms = 1_764_000_000_000;
    m
}

fn conversation() -> Vec<Message> {
    let mut assistant = Message::assistant(
        vec![
            Part::Thinking(ThinkingPart {
                thinking: "The user wants an echo.".into(),
                signature: Some("sig-1".into()),
                redacted: false,
            }),
            Part::text("Calling echo."),
            Part::ToolCall(ToolCallPart::new(
                "call-1",
                "echo",
                json!({"text": "hello"}),
            )),
            Part::ToolCall(ToolCallPart {
                id: "call-2".into(),
                tool_name: "echo".into(),
                arguments: ToolArguments::Unparsed("{\"text\": \"hel".into()),
                provider_data: None,
            }),
            Part::ToolCall(ToolCallPart::new("call-3", "echo", Value::Null)),
        ],
        StopReason::ToolUse,
    );
    assistant.model = Some("gpt-test".into());
    assistant.provider = Some("openai_chat".into());
    assistant.usage = Some(Usage {
        input_tokens: 12,
        output_tokens: 7,
        cache_read_tokens: 3,
        cache_write_tokens: 0,
        cost_usd: None,
    });
    let mut errored = Message::assistant(vec![Part::text("partial")], StopReason::Error);
    errored.error_message = Some("stream ended before its terminal event".into());
    vec![
        fixed(Message::user_parts(vec![
            Part::text("Echo this"),
            Part::Image(ImagePart {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }),
        ])),
        fixed(assistant),
        fixed(Message::tool_result(ToolResultPart::success(
            "call-1", "echo", "hello",
        ))),
        fixed(Message::tool_result(ToolResultPart::error(
            "call-2",
            "echo",
            "Malformed arguments for tool \"echo\"",
        ))),
        fixed(Message::custom("note", vec![Part::text("extension note")])),
        fixed(errored),
    ]
}

#[test]
fn json_shape_is_stable() {
    let value = serde_json::to_value(conversation()).unwrap();
    insta::assert_json_snapshot!("conversation", value);
}

#[test]
fn every_message_round_trips() {
    for m in conversation() {
        let text = serde_json::to_string(&m).unwrap();
        let back: Message = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m, "{text}");
    }
}

#[test]
fn unknown_fields_are_ignored_and_missing_optionals_default() {
    let m: Message = serde_json::from_value(json!({
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
        "future_field": {"x": 1}
    }))
    .unwrap();
    assert_eq!(m.text(), "hi");
    assert_eq!(m.stop_reason, None);
    assert_eq!(m.timestamp_ms, 0);
}
