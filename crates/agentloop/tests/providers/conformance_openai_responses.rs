//! The OpenAI Responses adapter against the recorded corpus
//! (`tests/fixtures/providers/openai-responses`), served over real HTTP, whole and in small
//! pieces; plus the streams the corpus cannot hold (cut before the terminal event, HTTP errors).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentloop::model::ModelError;
use agentloop::providers::{OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::transcript::Part;
use serde_json::{Value, json};
use support::*;

async fn assemble(base_url: &str) -> Capture {
    let model = OpenAiResponses::new(
        ProviderConfig::new(format!("{base_url}/v1"))
            .api_key("sk-test-secret")
            .model("gpt-test")
            .retry(RetryPolicy::none()),
    );
    capture_hi(&model).await
}

/// `provider_expect.function_call_item_ids` of a case (the support loader reads only `expect`).
fn item_ids(case: &str) -> Option<Value> {
    manifest_entry("openai-responses", case)
        .and_then(|c| c["provider_expect"].get("function_call_item_ids").cloned())
}

#[tokio::test]
async fn every_recorded_case_assembles_as_expected() {
    let cases = cases("openai-responses");
    assert_eq!(cases.len(), 10);
    for case in cases {
        for piece in [0, 1, 7] {
            if piece == 1 && case.body.len() > 10_000 {
                continue; // byte-at-a-time over loopback is slow for the big cases; 7 covers them
            }
            let name = format!("{} (piece {piece})", case.name);
            let server = FixtureServer::start(case.body.clone(), piece).await;
            let out = assemble(&server.base_url).await;
            assert_matches(&name, &out.message, &case.expect);

            // The deltas tell the same story as the final message.
            if case.expect.get("refusal").is_none() {
                assert_eq!(
                    out.streamed().text(),
                    out.message.text(),
                    "{name}: text deltas"
                );
            }
            assert_eq!(
                thinking_text(&out.streamed()),
                thinking_text(&out.message),
                "{name}: thinking deltas"
            );
            // The deltas carry no provider data (the output-item ids are on the final parts).
            assert_eq!(
                call_triples(&out.streamed()),
                call_triples(&out.message),
                "{name}: tool-call deltas"
            );
            // Each call keeps its output-item id (`fc_…`) for replay.
            if let Some(ids) = item_ids(&case.name) {
                let kept: Vec<Value> = out
                    .message
                    .tool_calls()
                    .map(|c| {
                        json!(
                            c.provider_data
                                .as_ref()
                                .and_then(|d| d.get("openai_responses", "id"))
                        )
                    })
                    .collect();
                assert_eq!(json!(kept), ids, "{name}: output-item ids");
            }

            assert_eq!(
                out.message.provider.as_deref(),
                Some("openai_responses"),
                "{name}"
            );
            assert_eq!(out.message.model.as_deref(), Some("gpt-test"), "{name}");
            match case.expect.get("error") {
                Some(error) => {
                    let code = error["code"].as_str().unwrap();
                    let message = error["message"].as_str().unwrap();
                    assert_eq!(
                        out.error,
                        Some(ModelError::Provider {
                            code: code.into(),
                            message: message.into()
                        }),
                        "{name}: error"
                    );
                    let shown = out.message.error_message.clone().unwrap_or_default();
                    assert!(shown.contains(code), "{name}: {shown:?} lacks the code");
                }
                None => assert_eq!(out.error, None, "{name}: unexpected error"),
            }

            let sent = server.requests.lock().unwrap()[0].clone();
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["store"], false);
            assert_eq!(sent["model"], "gpt-test");
            assert_eq!(
                sent["input"][0]["content"][0],
                serde_json::json!({"type": "input_text", "text": "hi"})
            );
        }
    }
}

#[tokio::test]
async fn encrypted_reasoning_is_kept_for_the_next_turn() {
    let case = corpus_case("openai-responses", "reasoning_summary_then_text");
    let server = FixtureServer::start(case.body, 0).await;
    let message = assemble(&server.base_url).await.message;
    let Part::Thinking(t) = &message.content[0] else {
        panic!("{:?}", message.content)
    };
    assert!(!t.redacted);
    let signature: Value = serde_json::from_str(t.signature.as_deref().unwrap()).unwrap();
    assert_eq!(signature["id"], "rs_REDACTED_1");
    // The payload is the item's final one (the scrubber numbered each occurrence).
    assert!(
        signature["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("encrypted_content_REDACTED_"),
        "{signature}"
    );

    // Reasoning with no summary at all keeps its payload as redacted thinking.
    let case = corpus_case("openai-responses", "incomplete_reasoning_only");
    let server = FixtureServer::start(case.body, 0).await;
    let message = assemble(&server.base_url).await.message;
    assert!(
        matches!(&message.content[..], [Part::Thinking(t)] if t.redacted && t.thinking.is_empty() && t.signature.is_some()),
        "{:?}",
        message.content
    );
}

fn cut_before(case: &str, marker: &str) -> Vec<u8> {
    let case = corpus_case("openai-responses", case);
    let text = String::from_utf8(case.body).unwrap();
    let cut = text.find(marker).unwrap();
    text.as_bytes()[..cut].to_vec()
}

#[tokio::test]
async fn a_stream_cut_before_response_completed_is_an_error_with_the_partial_message() {
    let body = cut_before("function_call_nested_args", "event: response.completed");
    let server = FixtureServer::start(body, 0).await;
    let out = assemble(&server.base_url).await;
    assert_eq!(stop_name(out.message.stop_reason), "error");
    assert!(
        matches!(&out.error, Some(ModelError::Stream { message: m, .. }) if m.contains("ended before its terminal event")),
        "{:?}",
        out.error
    );
    assert_cut_short(&out.message);
    let calls: Vec<_> = out.message.tool_calls().collect();
    assert_eq!(calls.len(), 1, "the partial message is kept");
    assert_eq!(calls[0].id, "call_REDACTED_1");
    assert_eq!(calls[0].tool_name, "plan_trip");
    assert_eq!(
        calls[0]
            .arguments
            .as_object()
            .map(|o| o.contains_key("itinerary")),
        Some(true)
    );

    // Cut in the middle of the text: what streamed so far is kept.
    let body = cut_before("text_plain", "event: response.output_text.done");
    let text = String::from_utf8(body).unwrap();
    let mid = text
        .match_indices("event: response.output_text.delta")
        .nth(10)
        .unwrap()
        .0;
    let server = FixtureServer::start(text.as_bytes()[..mid].to_vec(), 3).await;
    let out = assemble(&server.base_url).await;
    assert_eq!(stop_name(out.message.stop_reason), "error");
    let partial = out.message.text();
    assert!(!partial.is_empty());
    let full = "The next solar eclipse is an annular eclipse on October 14, 2023. It will be \
                visible across parts of the western United States, Central America, and South \
                America.";
    assert!(
        full.starts_with(&partial) && partial.len() < full.len(),
        "{partial:?}"
    );
    assert_eq!(partial, out.streamed().text());
}

#[tokio::test]
async fn http_errors_name_the_status_and_never_the_key() {
    let body = br#"{"error":{"message":"Incorrect API key provided: sk-te*****ret.","type":"invalid_request_error","code":"invalid_api_key"}}"#;
    let server = FixtureServer::start_with(401, body.to_vec(), 0).await;
    let out = assemble(&server.base_url).await;
    assert_eq!(stop_name(out.message.stop_reason), "error");
    assert!(
        matches!(&out.error, Some(ModelError::Status { status: 401, message, .. }) if message.contains("Incorrect API key")),
        "{:?}",
        out.error
    );
    let shown = format!("{:?} {:?}", out.error, out.message);
    assert!(!shown.contains("sk-test-secret"), "{shown}");
}
