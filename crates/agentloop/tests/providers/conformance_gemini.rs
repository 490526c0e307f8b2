//! The Gemini adapter against the recorded corpus (`tests/fixtures/providers/gemini`), served over
//! real HTTP, whole and in 1- and 7-byte pieces; plus the request line and headers, a cut stream,
//! in-stream and HTTP errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentloop::model::{ModelError, ModelRequest};
use agentloop::providers::{Gemini, ProviderConfig, RetryPolicy};
use agentloop::transcript::{Message, Part, StopReason, ToolArguments};
use serde_json::{Value, json};
use support::*;

fn adapter(base_url: &str, retry: RetryPolicy) -> Gemini {
    Gemini::new(
        ProviderConfig::new(base_url)
            .api_key("AIza-test-secret")
            .model("gemini-test")
            .retry(retry),
    )
}

async fn assemble(base_url: &str) -> Capture {
    capture_hi(&adapter(base_url, RetryPolicy::none())).await
}

/// The whole manifest entry of a case (the support loader reads only `expect`).
fn manifest(case: &str) -> Value {
    manifest_entry("gemini", case).unwrap()
}

/// The signatures of a message in order, with the kind of part each is on (as the corpus's
/// `provider_expect.thought_signatures` lists them).
fn signatures(m: &Message) -> Vec<Value> {
    m.content
        .iter()
        .filter_map(|p| {
            let (on, signature) = match p {
                Part::Text { provider_data, .. } => (
                    "text",
                    provider_data
                        .as_ref()
                        .and_then(|d| d.get("gemini", "thoughtSignature")),
                ),
                Part::ToolCall(c) => (
                    "function_call",
                    c.provider_data
                        .as_ref()
                        .and_then(|d| d.get("gemini", "thoughtSignature")),
                ),
                Part::Thinking(t) => ("thought", t.signature.as_deref()),
                _ => return None,
            };
            signature.map(|s| json!({"on": on, "signature": s}))
        })
        .collect()
}

fn assert_case(name: &str, message: &Message, entry: &Value) {
    let expect = &entry["expect"];
    let extra = &entry["provider_expect"];
    assert_eq!(
        stop_name(message.stop_reason),
        expect["stop_reason"].as_str().unwrap(),
        "{name}: stop reason"
    );
    assert_eq!(message.text(), expect["text"].as_str().unwrap(), "{name}");
    assert_eq!(
        thinking_text(message),
        expect["thinking"].as_str().unwrap_or(""),
        "{name}: thinking"
    );
    let calls: Vec<_> = message.tool_calls().collect();
    let want = expect["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), want.len(), "{name}: calls");
    let response_id = extra["response_id"].as_str().unwrap();
    for (i, (got, want)) in calls.iter().zip(want).enumerate() {
        assert_eq!(got.tool_name, want["name"].as_str().unwrap(), "{name}");
        assert_eq!(
            got.arguments,
            ToolArguments::Json(want["arguments"].clone()),
            "{name}: arguments"
        );
        // Gemini 3's own id when it sent one, else one made from the response id.
        let id = match want["id"].as_str() {
            Some(id) => id.to_owned(),
            None => format!("{response_id}-{i}"),
        };
        assert_eq!(got.id, id, "{name}: call id");
    }
    let usage = message.usage.unwrap();
    assert_eq!(
        usage.input_tokens + usage.cache_read_tokens,
        expect["usage"]["input_tokens"].as_u64().unwrap(),
        "{name}: input tokens"
    );
    assert_eq!(
        usage.output_tokens,
        expect["usage"]["output_tokens"].as_u64().unwrap(),
        "{name}: output tokens"
    );
    assert_eq!(
        usage.cache_read_tokens,
        extra["cache_read_tokens"].as_u64().unwrap(),
        "{name}: cache reads"
    );
    assert_eq!(
        json!(signatures(message)),
        extra["thought_signatures"],
        "{name}: signatures stay on their parts"
    );
    assert_eq!(message.response_id.as_deref(), Some(response_id), "{name}");
    assert_eq!(message.provider.as_deref(), Some("gemini"), "{name}");
    assert_eq!(message.model.as_deref(), Some("gemini-test"), "{name}");
}

#[tokio::test]
async fn every_recorded_case_assembles_as_expected() {
    let cases = cases("gemini");
    assert_eq!(cases.len(), 12);
    for case in cases {
        let entry = manifest(&case.name);
        for piece in [0, 1, 7] {
            let name = format!("{} (piece {piece})", case.name);
            let server = FixtureServer::start(case.body.clone(), piece).await;
            let outcome = assemble(&server.base_url).await;
            assert!(outcome.error.is_none(), "{name}: {:?}", outcome.error);
            assert_case(&name, &outcome.message, &entry);
            assert_deltas_agree(&name, &outcome);
            let sent = server.requests.lock().unwrap()[0].clone();
            assert_eq!(
                sent["contents"],
                json!([{"role": "user", "parts": [{"text": "hi"}]}])
            );
        }
    }
}

#[tokio::test]
async fn a_recorded_reply_replayed_to_the_same_model_carries_its_signatures_back() {
    for case in ["thought_then_call_with_id", "gemini3_call_long_signature"] {
        let body = corpus_case("gemini", case).body;
        let server = FixtureServer::start(body, 0).await;
        let model = adapter(&server.base_url, RetryPolicy::none());
        let first = assemble(&server.base_url).await.message;
        let tool_call = first.tool_calls().next().cloned().unwrap();
        let history = vec![
            Message::user("hi"),
            first.clone(),
            Message::tool_result(agentloop::transcript::ToolResultPart::success(
                tool_call.id.clone(),
                tool_call.tool_name.clone(),
                "done",
            )),
        ];
        capture(&model, ModelRequest::new(history)).await;
        let sent = server.requests.lock().unwrap().last().cloned().unwrap();
        let signature = manifest(case)["provider_expect"]["thought_signatures"][0]["signature"]
            .as_str()
            .unwrap()
            .to_owned();
        let model_turn = &sent["contents"][1];
        assert_eq!(model_turn["role"], "model");
        let call_part = model_turn["parts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p.get("functionCall").is_some())
            .unwrap();
        assert_eq!(call_part["thoughtSignature"], signature.as_str(), "{case}");
        let response = &sent["contents"][2]["parts"][0]["functionResponse"];
        assert_eq!(response["name"], tool_call.tool_name.as_str());
        assert_eq!(response["response"], json!({"output": "done"}));
        // Gemini 3's call id goes back on the call and its response; a synthesized one does not.
        let wire_id = call_part["functionCall"].get("id").cloned();
        assert_eq!(response.get("id").cloned(), wire_id, "{case}");
    }
}

#[tokio::test]
async fn a_stream_cut_before_its_finish_reason_is_an_error_with_the_partial_message() {
    let case = corpus_case("gemini", "thoughts_then_signed_text");
    let text = String::from_utf8(case.body).unwrap();
    let cut = text.rfind("data: ").unwrap();
    let server = FixtureServer::start(text.as_bytes()[..cut].to_vec(), 0).await;
    let outcome = assemble(&server.base_url).await;
    let message = &outcome.message;
    assert_eq!(message.stop_reason, Some(StopReason::Error));
    assert!(matches!(outcome.error, Some(ModelError::Stream { .. })));
    assert_cut_short(message);
    assert!(message.text().starts_with("The current weather in Tokyo"));
    assert_eq!(
        signatures(message),
        vec![json!({"on": "text", "signature": "signature_REDACTED_2"})],
        "the partial message keeps what arrived"
    );
    // Text had streamed: not retried.
    assert_eq!(server.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn an_error_chunk_after_text_is_a_provider_error_and_keeps_the_text() {
    let body = concat!(
        "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Half\"}], \"role\": \"model\"}, \"index\": 0}]}\r\n\r\n",
        "data: {\"error\": {\"code\": 500, \"message\": \"An internal error has occurred.\", \"status\": \"INTERNAL\"}}\r\n\r\n",
    );
    let server = FixtureServer::start(body.as_bytes().to_vec(), 0).await;
    let outcome = capture_hi(&adapter(&server.base_url, RetryPolicy::default())).await;
    assert_eq!(
        outcome.error,
        Some(ModelError::Provider {
            code: "INTERNAL".into(),
            message: "An internal error has occurred.".into()
        })
    );
    assert_eq!(outcome.message.text(), "Half");
    assert_eq!(server.requests.lock().unwrap().len(), 1, "not retried");
}

fn text_case() -> Vec<u8> {
    corpus_case("gemini", "text_two_chunks").body
}

#[tokio::test]
async fn requests_post_to_stream_generate_content_with_the_key_header() {
    // A trailing slash on the base URL is tolerated; the model may carry a `models/` prefix.
    let (base, head) = capture_one(text_case()).await;
    let model = Gemini::new(
        ProviderConfig::new(format!("{base}/"))
            .api_key("AIza-test-secret")
            .model("models/gemini-2.5-flash")
            .retry(RetryPolicy::none()),
    );
    let outcome = capture_hi(&model).await;
    assert!(outcome.message.text().starts_with("Volcanoes are"));
    let head = head.await.unwrap();
    assert!(
        head.starts_with(
            "post /v1beta/models/gemini-2.5-flash:streamgeneratecontent?alt=sse http/1.1\r\n"
        ),
        "{head}"
    );
    assert!(
        head.contains("\r\nx-goog-api-key: aiza-test-secret\r\n"),
        "{head}"
    );
    assert!(!head.contains("authorization:"), "{head}");

    // A base URL that already names the version; a per-request key and model.
    let (base, head) = capture_one(text_case()).await;
    let model = adapter(&format!("{base}/v1beta"), RetryPolicy::none());
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.api_key = Some(agentloop::model::ApiKey::new("AIza-per-request"));
    request.model = Some("gemini-3-pro-preview".into());
    capture(&model, request).await;
    let head = head.await.unwrap();
    assert!(
        head.starts_with(
            "post /v1beta/models/gemini-3-pro-preview:streamgeneratecontent?alt=sse http/1.1\r\n"
        ),
        "{head}"
    );
    assert!(
        head.contains("\r\nx-goog-api-key: aiza-per-request\r\n"),
        "{head}"
    );
}

#[tokio::test]
async fn an_http_error_reads_google_s_error_body_and_never_shows_the_key() {
    let body = br#"{"error": {"code": 400, "message": "Function call is missing a thought_signature in functionCall parts.", "status": "INVALID_ARGUMENT"}}"#;
    let server = FixtureServer::start_with(400, body.to_vec(), 0).await;
    let model = adapter(&server.base_url, RetryPolicy::none());
    assert!(!format!("{model:?}").contains("AIza-test-secret"));
    let outcome = capture_hi(&model).await;
    let error = outcome.error.unwrap();
    assert_eq!(
        error,
        ModelError::Status {
            status: 400,
            message: "Function call is missing a thought_signature in functionCall parts.".into(),
            code: Some("INVALID_ARGUMENT".into()),
            retry_after: None,
        }
    );
    let shown = format!("{error} {error:?} {:?}", outcome.message.error_message);
    assert!(!shown.contains("AIza-test-secret"), "{shown}");
}
