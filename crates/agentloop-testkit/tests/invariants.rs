//! Requests whose history breaks the tool-call invariant get HTTP 400 and are recorded; request
//! recording redacts credentials.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agentloop_testkit::{MockServer, Script, ToolCall, Turn, WireFormat};
use common::{FORMATS, assemble, continue_request, first_request, path, post};
use serde_json::{Value, json};

fn script() -> Script {
    Script::new(vec![
        Turn::tool_calls(vec![
            ToolCall::new("call_1", "a", json!({})),
            ToolCall::new("call_2", "b", json!({})),
        ]),
        Turn::text("done"),
    ])
}

/// The history after turn 0, with the result for `call_2` missing.
async fn missing_result(format: WireFormat, server: &MockServer) -> Value {
    let mut req = first_request(format, &format!("missing {format:?}"));
    let body = post(&server.base_url(), path(format), &req).await.body;
    let a = assemble(format, &body);
    continue_request(format, &mut req, &a);
    // Drop the last result.
    match format {
        WireFormat::OpenAiChat => {
            req["messages"].as_array_mut().unwrap().pop();
        }
        WireFormat::OpenAiResponses => {
            req["input"].as_array_mut().unwrap().pop();
        }
        _ => {
            let last = req["messages"].as_array_mut().unwrap().last_mut().unwrap();
            last["content"].as_array_mut().unwrap().pop();
        }
    }
    req
}

#[tokio::test]
async fn a_call_without_a_result_is_rejected_and_recorded() {
    let server = MockServer::start(script());
    for format in FORMATS {
        let req = missing_result(format, &server).await;
        let reply = post(&server.base_url(), path(format), &req).await;
        assert_eq!(reply.status, 400, "{format:?}");
        let err: Value = serde_json::from_str(&reply.body).unwrap();
        let message = if format == WireFormat::Anthropic {
            assert_eq!(err["type"], "error");
            assert_eq!(err["error"]["type"], "invalid_request_error");
            err["error"]["message"].as_str().unwrap().to_string()
        } else {
            assert_eq!(err["error"]["type"], "invalid_request_error");
            err["error"]["message"].as_str().unwrap().to_string()
        };
        assert!(message.contains("call_2"), "{message}");
        assert!(message.contains("no result"), "{message}");
    }
    let v = server.violations();
    assert_eq!(v.len(), 3, "{v:?}");
    assert!(v[0].contains("/v1/chat/completions") && v[0].contains("call_2"));
    assert!(v[1].contains("/v1/responses"));
    assert!(v[2].contains("/v1/messages") && v[2].contains("tool_use"));
    // Rejected requests are recorded, but took no turn.
    let rejected: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.turn.is_none())
        .collect();
    assert_eq!(rejected.len(), 3);
}

#[tokio::test]
async fn orphan_and_duplicate_results_are_rejected() {
    let server = MockServer::start(script());
    let cases = [
        (
            WireFormat::OpenAiChat,
            json!({"model": "m", "messages": [
                {"role": "user", "content": "x"},
                {"role": "tool", "tool_call_id": "ghost", "content": "?"},
            ]}),
            "ghost",
        ),
        (
            WireFormat::OpenAiResponses,
            json!({"model": "m", "input": [
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "c", "name": "a", "arguments": "{}"},
                {"type": "function_call_output", "call_id": "c", "output": "1"},
                {"type": "function_call_output", "call_id": "c", "output": "2"},
            ]}),
            "more than one",
        ),
        (
            WireFormat::Anthropic,
            json!({"model": "m", "max_tokens": 5, "messages": [
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "early", "content": "?"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "early", "name": "a", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "early", "content": "ok"}]},
            ]}),
            "no earlier",
        ),
    ];
    for (format, body, needle) in cases {
        let reply = post(&server.base_url(), path(format), &body).await;
        assert_eq!(reply.status, 400, "{format:?}");
        assert!(reply.body.contains(needle), "{format:?}: {}", reply.body);
    }
    assert_eq!(server.violations().len(), 3, "{:?}", server.violations());
}

#[tokio::test]
async fn invalid_json_is_a_violation() {
    let server = MockServer::start(script());
    let resp = common::client()
        .post(format!("{}/v1/chat/completions", server.base_url()))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert_eq!(server.violations().len(), 1);
    assert_eq!(server.requests()[0].body, json!("{not json"));
    let violation = server.violations().remove(0);
    assert_eq!(
        server.shutdown_report(),
        format!("stopped after 1 requests, 1 invariant violations\n  {violation}")
    );
}

#[tokio::test]
async fn valid_histories_pass_and_credentials_are_redacted() {
    let server = MockServer::start(script());
    for format in FORMATS {
        let resp = common::client()
            .post(format!("{}{}", server.base_url(), path(format)))
            .header("authorization", "Bearer sk-very-secret")
            .header("x-api-key", "sk-ant-very-secret")
            .header("api-key", "azure-secret")
            .header("anthropic-version", "2023-06-01")
            .header("content-type", "application/json")
            .body(first_request(format, "hello").to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let _ = resp.text().await.unwrap();
    }
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert_eq!(r.header("Authorization"), Some("Bearer <redacted>"));
        assert_eq!(r.header("x-api-key"), Some("<redacted>"));
        assert_eq!(r.header("api-key"), Some("<redacted>"));
        assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
        let dump = format!("{r:?}");
        assert!(!dump.contains("secret"), "{dump}");
        assert_eq!(r.turn, Some(0));
        assert_eq!(r.attempt, Some(1));
    }
    assert_eq!(reqs[0].path, "/v1/chat/completions");
    assert_eq!(reqs[0].format, WireFormat::OpenAiChat);
    assert_eq!(reqs[1].body["input"][0]["content"], "hello");
    assert!(server.violations().is_empty());
}

#[tokio::test]
async fn unknown_routes_say_which_routes_exist() {
    let server = MockServer::start(script());
    let reply = post(&server.base_url(), "/v1/v1/chat/completions", &json!({})).await;
    assert_eq!(reply.status, 404);
    assert!(
        reply.body.contains("/v1/chat/completions"),
        "{}",
        reply.body
    );
    assert!(
        reply.body.contains("/v1/v1/chat/completions"),
        "{}",
        reply.body
    );
    assert_eq!(server.request_count(), 0);
}
