//! The Anthropic Messages adapter against the recorded corpus
//! (`tests/fixtures/providers/anthropic`), served over real HTTP, whole and in small pieces; plus
//! the request line and headers, a cut stream, and in-stream `error` events.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use agentloop::model::{ModelError, ModelEvent, ModelRequest};
use agentloop::providers::{Anthropic, ProviderConfig, RetryPolicy};
use agentloop::transcript::{Message, Part, StopReason, ToolArguments};
use serde_json::{Value, json};
use support::*;

fn adapter(base_url: &str, retry: RetryPolicy) -> Anthropic {
    Anthropic::new(
        ProviderConfig::new(base_url)
            .api_key("sk-ant-test-secret")
            .model("claude-test")
            .retry(retry),
    )
}

async fn assemble(base_url: &str) -> Capture {
    capture_hi(&adapter(base_url, RetryPolicy::none())).await
}

/// `provider_expect` of every case, by name (the support loader reads only `expect`).
fn provider_expect(case: &str) -> Value {
    manifest_entry("anthropic", case)
        .map(|c| c["provider_expect"].clone())
        .unwrap_or(Value::Null)
}

fn signatures(message: &Message, redacted: bool) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Thinking(t) if t.redacted == redacted => t.signature.clone(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn every_recorded_case_assembles_as_expected() {
    let cases = cases("anthropic");
    assert_eq!(cases.len(), 10);
    for case in cases {
        for piece in [0, 1, 7] {
            if piece == 1 && case.body.len() > 20_000 {
                continue; // byte-at-a-time over loopback is slow for big cases; 7 covers them
            }
            let name = format!("{} (piece {piece})", case.name);
            let server = FixtureServer::start(case.body.clone(), piece).await;
            let outcome = assemble(&server.base_url).await;
            assert!(outcome.error.is_none(), "{name}: {:?}", outcome.error);
            let message = &outcome.message;
            assert_matches(&name, message, &case.expect);
            assert_deltas_agree(&name, &outcome);
            assert_eq!(message.provider.as_deref(), Some("anthropic"), "{name}");
            assert_eq!(message.model.as_deref(), Some("claude-test"), "{name}");

            let extra = provider_expect(&case.name);
            if let Some(want) = extra.get("thinking_signatures") {
                assert_eq!(
                    json!(signatures(message, false)),
                    *want,
                    "{name}: signatures"
                );
            }
            if let Some(want) = extra.get("redacted_thinking") {
                assert_eq!(json!(signatures(message, true)), *want, "{name}: redacted");
                assert!(
                    message.content.iter().all(|p| match p {
                        Part::Thinking(t) => t.redacted && t.thinking.is_empty(),
                        _ => true,
                    }),
                    "{name}: redacted thinking has no readable text"
                );
            }

            let sent = server.requests.lock().unwrap()[0].clone();
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["model"], "claude-test");
            assert_eq!(sent["max_tokens"], 8192);
        }
    }
}

#[tokio::test]
async fn a_tool_input_cut_by_max_tokens_keeps_the_raw_text_and_stops_for_length() {
    let case = corpus_case("anthropic", "max_tokens_mid_tool_input");
    let raw = case.expect["tool_calls"][0]["arguments"]["_raw"]
        .as_str()
        .unwrap()
        .to_owned();
    for piece in [0, 1, 7] {
        let server = FixtureServer::start(case.body.clone(), piece).await;
        let outcome = assemble(&server.base_url).await;
        let message = &outcome.message;
        assert_eq!(message.stop_reason, Some(StopReason::Length));
        let calls: Vec<_> = message.tool_calls().collect();
        assert_eq!(calls.len(), 1);
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Unparsed(raw.clone()),
            "piece {piece}: the received text, byte for byte"
        );
        // The last streamed partial value holds what the SDK's partial parser shows, plus the
        // unfinished string (our partial JSON keeps open strings; the SDK drops them).
        let last_partial = outcome
            .events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(agentloop::model::ModelDelta::ToolCallArguments {
                    partial: Some(p),
                    ..
                }) => Some(p.clone()),
                _ => None,
            })
            .next_back();
        let sdk = provider_expect(&case.name)["sdk_partial_input"].clone();
        let ours = last_partial.expect("partial values were streamed");
        assert_eq!(ours["filename"], sdk["filename"], "piece {piece}");
        let sdk_lines = sdk["lines_of_text"].as_array().unwrap();
        let our_lines = ours["lines_of_text"].as_array().unwrap();
        assert_eq!(
            &our_lines[..sdk_lines.len()],
            &sdk_lines[..],
            "piece {piece}"
        );
        assert_eq!(&our_lines[sdk_lines.len()..], &[json!("Filing taxes")]);
        assert!(
            !outcome.events.iter().any(|e| matches!(
                e,
                ModelEvent::Delta(agentloop::model::ModelDelta::ToolCallEnd { .. })
            )),
            "the cut call never ends"
        );
    }
}

#[tokio::test]
async fn a_stream_cut_before_message_stop_is_an_error_with_the_partial_message() {
    let case = corpus_case("anthropic", "text_then_tool_use");
    let text = String::from_utf8(case.body).unwrap();
    let cut = text.rfind("event: message_stop").unwrap();
    let server = FixtureServer::start(text.as_bytes()[..cut].to_vec(), 0).await;
    let outcome = assemble(&server.base_url).await;
    let message = &outcome.message;
    assert_eq!(message.stop_reason, Some(StopReason::Error));
    assert!(matches!(outcome.error, Some(ModelError::Stream { .. })));
    assert_cut_short(message);
    assert_eq!(
        message.text(),
        "I'll check the current weather in Paris for you."
    );
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "the partial message is kept");
    assert_eq!(
        calls[0].arguments,
        ToolArguments::Json(json!({"location": "Paris"}))
    );
    assert_eq!(message.usage.map(|u| u.output_tokens), Some(65));
    assert_eq!(server.requests.lock().unwrap().len(), 1, "nothing retried");
}

fn sse(events: &[Value]) -> Vec<u8> {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect::<String>()
        .into_bytes()
}

fn message_start() -> Value {
    json!({"type": "message_start", "message": {"id": "msg_1", "model": "claude-test",
        "usage": {"input_tokens": 3, "output_tokens": 1}}})
}

fn overloaded() -> Value {
    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
}

#[tokio::test]
async fn an_overloaded_error_event_before_any_delta_is_retried() {
    let server = FixtureServer::start(sse(&[message_start(), overloaded()]), 0).await;
    let retry = RetryPolicy {
        max_retries: 1,
        base_delay: Duration::from_millis(1),
        max_delay: Duration::from_secs(1),
    };
    let outcome = capture_hi(&adapter(&server.base_url, retry)).await;
    let retries = outcome
        .events
        .iter()
        .filter(|e| matches!(e, ModelEvent::Retry { .. }))
        .count();
    assert_eq!(retries, 1);
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    assert_eq!(
        outcome.error,
        Some(ModelError::Provider {
            code: "overloaded_error".into(),
            message: "Overloaded".into()
        })
    );
    assert_eq!(outcome.message.stop_reason, Some(StopReason::Error));
}

#[tokio::test]
async fn an_error_event_after_streamed_text_is_not_retried_and_keeps_the_text() {
    let body = sse(&[
        message_start(),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Half"}}),
        json!({"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}),
    ]);
    let server = FixtureServer::start(body, 0).await;
    let outcome = capture_hi(&adapter(&server.base_url, RetryPolicy::default())).await;
    assert!(
        !outcome
            .events
            .iter()
            .any(|e| matches!(e, ModelEvent::Retry { .. }))
    );
    assert_eq!(server.requests.lock().unwrap().len(), 1);
    assert_eq!(outcome.message.text(), "Half");
    assert_eq!(outcome.message.stop_reason, Some(StopReason::Error));
    let error = outcome.message.error_message.unwrap_or_default();
    assert!(
        error.contains("api_error") && error.contains("Internal server error"),
        "{error}"
    );
}

fn text_basic() -> Vec<u8> {
    corpus_case("anthropic", "text_basic").body
}

#[tokio::test]
async fn requests_post_to_v1_messages_with_key_and_version_headers() {
    // A trailing slash on the base URL is tolerated.
    let (base, head) = capture_one(text_basic()).await;
    let model = adapter(&format!("{base}/"), RetryPolicy::none());
    let outcome = capture_hi(&model).await;
    assert_eq!(outcome.message.text(), "Hello there!");
    let head = head.await.unwrap();
    assert!(head.starts_with("post /v1/messages http/1.1\r\n"), "{head}");
    assert!(
        head.contains("\r\nx-api-key: sk-ant-test-secret\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\nanthropic-version: 2023-06-01\r\n"),
        "{head}"
    );
    assert!(
        head.contains("\r\ncontent-type: application/json\r\n"),
        "{head}"
    );
    assert!(!head.contains("authorization:"), "{head}");

    // A per-request key overrides the configured one.
    let (base, head) = capture_one(text_basic()).await;
    let model = adapter(&base, RetryPolicy::none());
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.api_key = Some(agentloop::model::ApiKey::new("sk-ant-per-request"));
    capture(&model, request).await;
    let head = head.await.unwrap();
    assert!(
        head.contains("\r\nx-api-key: sk-ant-per-request\r\n"),
        "{head}"
    );
    assert!(!head.contains("sk-ant-test-secret"), "{head}");
}

#[tokio::test]
async fn configured_headers_are_sent_and_may_replace_the_version() {
    let (base, head) = capture_one(text_basic()).await;
    let model = Anthropic::new(
        ProviderConfig::new(base)
            .model("claude-test")
            .header("anthropic-version", "2099-01-01")
            .header("anthropic-beta", "some-feature")
            .retry(RetryPolicy::none()),
    );
    capture_hi(&model).await;
    let head = head.await.unwrap();
    assert!(
        head.contains("\r\nanthropic-version: 2099-01-01\r\n"),
        "{head}"
    );
    assert!(!head.contains("2023-06-01"), "one version header: {head}");
    assert!(
        head.contains("\r\nanthropic-beta: some-feature\r\n"),
        "{head}"
    );
    assert!(!head.contains("x-api-key"), "no key configured: {head}");
}

#[tokio::test]
async fn the_api_key_never_appears_in_errors_or_debug_output() {
    let body = br#"{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}"#;
    let server = FixtureServer::start_with(401, body.to_vec(), 0).await;
    let model = adapter(&server.base_url, RetryPolicy::none());
    assert!(!format!("{model:?}").contains("sk-ant-test-secret"));
    let outcome = capture_hi(&model).await;
    let error = outcome.error.unwrap();
    assert_eq!(
        error,
        ModelError::Status {
            status: 401,
            message: "invalid x-api-key".into(),
            code: Some("authentication_error".into()),
            retry_after: None,
        }
    );
    let shown = format!(
        "{error} {error:?} {:?}",
        outcome.message.error_message.unwrap_or_default()
    );
    assert!(!shown.contains("sk-ant-test-secret"), "{shown}");
}
