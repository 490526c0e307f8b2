//! Each wire format streams text, thinking and tool calls that a client assembles back into the
//! scripted turn; chunking, usage, stop reasons and tool search.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agentloop_testkit::{MockServer, Script, StopReason, ToolCall, ToolSearch, Turn, WireFormat};
use common::{FORMATS, assemble, continue_request, first_request, path, post, post_first};
use serde_json::{Value, json};

fn weather_script() -> Script {
    Script::from_value(json!({"turns": [
        {
            "thinking": "The user wants weather for two cities.",
            "text": "Checking 東京 and Paris.",
            "chunk_size": 5,
            "tool_calls": [
                {"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris", "units": "c"}, "arg_chunks": 4},
                {"id": "call_b", "name": "broken", "arguments": "{\"x\": 1", "arg_chunks": 3}
            ],
            "usage": {"input_tokens": 10, "output_tokens": 20, "cache_read_tokens": 3}
        },
        {"text": "Sunny in both.", "usage": {"input_tokens": 40, "output_tokens": 4}}
    ]}))
    .unwrap()
}

#[tokio::test]
async fn text_thinking_and_tool_calls_assemble_in_every_format() {
    let server = MockServer::start(weather_script());
    for format in FORMATS {
        let mut req = first_request(format, &format!("weather please ({format:?})"));
        let reply = post(&server.base_url(), path(format), &req).await;
        assert_eq!(reply.status, 200, "{format:?}: {}", reply.body);
        assert_eq!(reply.headers["content-type"], "text/event-stream");
        let a = assemble(format, &reply.body);
        assert_eq!(a.text, "Checking 東京 and Paris.", "{format:?}");
        assert_eq!(
            a.thinking, "The user wants weather for two cities.",
            "{format:?}"
        );
        assert_eq!(a.text_deltas, 5, "{format:?}: 22 characters in chunks of 5");
        assert_eq!(a.tool_calls.len(), 2, "{format:?}");
        assert_eq!(a.tool_calls[0].0, "call_a");
        assert_eq!(a.tool_calls[0].1, "get_weather");
        let args: Value = serde_json::from_str(&a.tool_calls[0].2).unwrap();
        assert_eq!(args, json!({"city": "Paris", "units": "c"}));
        assert_eq!(
            a.tool_calls[1],
            ("call_b".into(), "broken".into(), "{\"x\": 1".into())
        );
        // Anthropic sends an empty first input_json_delta, like the real API.
        let extra = usize::from(format == WireFormat::Anthropic);
        assert_eq!(a.arg_deltas, vec![4 + extra, 3 + extra], "{format:?}");
        assert_eq!(a.stop_reason.as_deref(), Some("tool_use"), "{format:?}");
        assert_eq!(a.input_tokens, Some(10), "{format:?}");
        assert_eq!(a.output_tokens, Some(20), "{format:?}");
        assert_eq!(a.cache_read_tokens, Some(3), "{format:?}");
        assert!(a.terminal, "{format:?}");
        if format == WireFormat::Anthropic {
            assert_eq!(a.signature.as_deref(), Some("mock-signature"));
        }

        // The next request (with the tool results) gets turn 1.
        continue_request(format, &mut req, &a);
        let reply = post(&server.base_url(), path(format), &req).await;
        assert_eq!(reply.status, 200, "{format:?}: {}", reply.body);
        let b = assemble(format, &reply.body);
        assert_eq!(b.text, "Sunny in both.");
        assert_eq!(b.text_deltas, 1, "no chunk_size: one delta");
        assert!(b.tool_calls.is_empty());
        assert_eq!(b.stop_reason.as_deref(), Some("stop"), "{format:?}");
        assert_eq!((b.input_tokens, b.output_tokens), (Some(40), Some(4)));
        assert!(b.terminal);
    }
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let turns: Vec<_> = server.requests().iter().map(|r| r.turn).collect();
    assert_eq!(
        turns,
        [Some(0), Some(1), Some(0), Some(1), Some(0), Some(1)]
    );
}

#[tokio::test]
async fn length_stop_reason_in_every_format() {
    let server = MockServer::start(Script::new(vec![
        Turn::text("cut sho").with_stop_reason(StopReason::Length),
    ]));
    for format in FORMATS {
        let reply = post_first(&server, format, "x").await;
        let a = assemble(format, &reply.body);
        assert_eq!(a.stop_reason.as_deref(), Some("length"), "{format:?}");
        assert!(a.terminal);
        assert_eq!(a.text, "cut sho");
    }
    // Raw wire values.
    let chat = post_first(&server, WireFormat::OpenAiChat, "x").await;
    assert!(chat.body.contains(r#""finish_reason":"length""#));
    let anth = post_first(&server, WireFormat::Anthropic, "x").await;
    assert!(anth.body.contains(r#""stop_reason":"max_tokens""#));
    let resp = post_first(&server, WireFormat::OpenAiResponses, "x").await;
    assert!(resp.body.contains("event: response.incomplete\n"));
    assert!(!resp.body.contains("response.completed"));
}

#[tokio::test]
async fn chat_usage_chunk_only_when_requested() {
    let server =
        MockServer::start(Script::new(vec![Turn::text("hi").with_usage(7, 1)]).with_repeat(true));
    let with = post_first(&server, WireFormat::OpenAiChat, "x").await;
    let a = assemble(WireFormat::OpenAiChat, &with.body);
    assert_eq!(a.input_tokens, Some(7));
    assert_eq!(a.events.iter().filter(|e| *e == "usage").count(), 1);
    assert_eq!(a.events.last().map(String::as_str), Some("[DONE]"));
    assert_eq!(
        a.events[a.events.len() - 2],
        "usage",
        "usage chunk just before [DONE]"
    );

    let without = post(
        &server.base_url(),
        "/chat/completions",
        &json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "x"}]}),
    )
    .await;
    let b = assemble(WireFormat::OpenAiChat, &without.body);
    assert_eq!(b.input_tokens, None);
    assert!(b.terminal);
    assert_eq!(b.text, "hi");
}

#[tokio::test]
async fn model_is_echoed_and_usage_estimated_when_unscripted() {
    let server = MockServer::start(Script::new(vec![Turn::text("a fairly long answer text")]));
    for format in FORMATS {
        let req = first_request(format, "x");
        let reply = post(&server.base_url(), path(format), &req).await;
        let a = assemble(format, &reply.body);
        assert!(a.input_tokens.unwrap() >= 1, "{format:?}");
        assert!(a.output_tokens.unwrap() >= 1, "{format:?}");
        assert!(
            reply.body.contains(req["model"].as_str().unwrap()),
            "{format:?}"
        );
    }
}

#[tokio::test]
async fn tool_search_is_an_item_on_responses_and_a_function_call_elsewhere() {
    let script = Script::new(vec![
        Turn::default()
            .with_tool_search(ToolSearch::new("ts_1", json!({"query": "weather"})))
            .with_tool_call(ToolCall::new("call_1", "echo", json!({"s": "x"}))),
        Turn::text("found it"),
    ]);
    let server = MockServer::start(script);
    for format in FORMATS {
        let mut req = first_request(format, &format!("search {format:?}"));
        let reply = post(&server.base_url(), path(format), &req).await;
        let a = assemble(format, &reply.body);
        assert_eq!(a.stop_reason.as_deref(), Some("tool_use"));
        if format == WireFormat::OpenAiResponses {
            assert_eq!(
                a.tool_searches,
                vec![("ts_1".to_string(), json!({"query": "weather"}))]
            );
            assert_eq!(a.tool_calls.len(), 1);
            let added: Vec<Value> = common::parse_sse(&reply.body)
                .into_iter()
                .filter(|e| e.event.as_deref() == Some("response.output_item.added"))
                .map(|e| serde_json::from_str::<Value>(&e.data).unwrap()["item"].clone())
                .filter(|i| i["type"] == "tool_search_call")
                .collect();
            assert_eq!(added.len(), 1);
            assert_eq!(added[0]["call_id"], "ts_1");
            assert_eq!(added[0]["execution"], "client");
            assert_eq!(added[0]["arguments"], json!({}));
            assert_eq!(added[0]["status"], "in_progress");
            assert!(added[0]["id"].as_str().unwrap().starts_with("ts_mock_"));
        } else {
            assert_eq!(a.tool_calls.len(), 2);
            assert_eq!(a.tool_calls[0].0, "ts_1");
            assert_eq!(a.tool_calls[0].1, "search_tools");
            let args: Value = serde_json::from_str(&a.tool_calls[0].2).unwrap();
            assert_eq!(args, json!({"query": "weather"}));
        }
        continue_request(format, &mut req, &a);
        let reply = post(&server.base_url(), path(format), &req).await;
        assert_eq!(reply.status, 200, "{format:?}: {}", reply.body);
        assert_eq!(assemble(format, &reply.body).text, "found it");
    }
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[tokio::test]
async fn empty_turn_still_terminates_and_default_ids_are_generated() {
    let server = MockServer::start(Script::new(vec![Turn::default()]));
    for format in FORMATS {
        let reply = post_first(&server, format, "x").await;
        let a = assemble(format, &reply.body);
        assert!(a.terminal, "{format:?}");
        assert_eq!(a.text, "");
        assert_eq!(a.stop_reason.as_deref(), Some("stop"));
    }
    let server = MockServer::start(
        Script::from_json(r#"[{"tool_calls": [{"name": "f"}, {"name": "g", "arguments": ""}]}]"#)
            .unwrap(),
    );
    for format in FORMATS {
        let reply = post_first(&server, format, "x").await;
        let a = assemble(format, &reply.body);
        assert_eq!(
            a.tool_calls[0],
            ("call_0_0".into(), "f".into(), "{}".into()),
            "{format:?}"
        );
        assert_eq!(
            a.tool_calls[1],
            ("call_0_1".into(), "g".into(), "".into()),
            "{format:?}"
        );
    }
}

#[tokio::test]
async fn thinking_signature_is_scripted_for_anthropic() {
    let server = MockServer::start(
        Script::from_json(
            r#"[{"thinking": "hmm", "thinking_signature": "sig-123", "text": "ok"}]"#,
        )
        .unwrap(),
    );
    let reply = post_first(&server, WireFormat::Anthropic, "x").await;
    let a = assemble(WireFormat::Anthropic, &reply.body);
    assert_eq!(a.signature.as_deref(), Some("sig-123"));
    assert_eq!(a.thinking, "hmm");
    // Thinking block first, then the text block.
    let starts: Vec<_> = common::parse_sse(&reply.body)
        .into_iter()
        .filter(|e| e.event.as_deref() == Some("content_block_start"))
        .map(|e| serde_json::from_str::<Value>(&e.data).unwrap()["content_block"]["type"].clone())
        .collect();
    assert_eq!(starts, vec![json!("thinking"), json!("text")]);
}
