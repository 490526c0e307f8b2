#![allow(clippy::unwrap_used)]
use super::stream::{ChatParser, ChunkWire};
use crate::model::{ModelError, ModelEvent};
use crate::providers::core::StreamParser;
use crate::providers::parser_tests::parse_to_end;
use crate::providers::sse::SseDecoder;
use crate::transcript::{Message, Part, StopReason, ToolArguments};
use serde_json::json;

fn parse(body: &str) -> (Vec<ModelEvent>, Result<Message, ModelError>) {
    parse_to_end(&mut ChatParser::new("m".into()), body)
}

#[test]
fn quirks_whole_object_arguments_missing_ids_and_empty_arguments() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"hi\",\"tool_calls\":[{\"index\":0,\"function\":{\"name\":\"read\",\"arguments\":{\"path\":\"a\"}}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":1,\"id\":\"read\",\"function\":{\"name\":\"now\",\"arguments\":\"\"}}]}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":2,\"id\":\"read\",\"function\":{\"name\":\"now\",\"arguments\":null}}]},\"finish_reason\":\"tool_calls\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let (_, message) = parse(body);
    let message = message.unwrap_or_else(|e| panic!("{e}"));
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 3);
    assert_eq!(
        calls[0].arguments,
        ToolArguments::Json(json!({"path": "a"}))
    );
    assert_eq!(calls[1].arguments, ToolArguments::default());
    assert_eq!(calls[1].id, "read");
    assert_ne!(calls[2].id, "read", "a reused id is made unique");
    assert!(!calls[0].id.is_empty());
    assert_eq!(message.text(), "hi");
    assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
}

#[test]
fn reasoning_fields_become_thinking() {
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"think\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"reasoning\":\"ing\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\n",
        "data: [DONE]\n\n"
    );
    let message = parse(body).1.unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(&message.content[0], Part::Thinking(t) if t.thinking == "thinking"));
    assert_eq!(message.text(), "ok");
    assert_eq!(message.usage, None, "missing usage is tolerated");
}

#[test]
fn an_error_chunk_is_a_provider_error() {
    let body = "data: {\"error\":{\"message\":\"bad\",\"code\":\"server_error\"}}\n\n";
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    decoder.push(body.as_bytes(), &mut events).unwrap();
    let mut parser = ChatParser::new("m".into());
    let err = parser.on_event(events.remove(0), &mut Vec::new());
    assert_eq!(
        err,
        Err(ModelError::Provider {
            code: "server_error".into(),
            message: "bad".into()
        })
    );
}

#[test]
fn every_recorded_chunk_takes_the_typed_fast_path() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers/openai-chat");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.extension().and_then(|e| e.to_str()) != Some("sse") {
            continue;
        }
        let body = std::fs::read(&path).unwrap_or_default();
        let mut events = Vec::new();
        SseDecoder::new().push(&body, &mut events).unwrap();
        for e in events.iter().filter(|e| e.data.trim() != "[DONE]") {
            let typed = serde_json::from_str::<ChunkWire<'_>>(&e.data);
            assert!(typed.is_ok(), "{}: {:?}", path.display(), typed.err());
            checked += 1;
        }
    }
    assert!(checked > 100, "{checked} chunks");
}
