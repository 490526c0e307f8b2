//! The OpenAI Chat adapter against the recorded corpus (`tests/fixtures/providers/openai-chat`),
//! served over real HTTP, whole and in small pieces.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::transcript::Message;
use support::*;

async fn assemble(base_url: &str) -> Message {
    let model = OpenAiChat::new(
        ProviderConfig::new(format!("{base_url}/v1"))
            .api_key("sk-test")
            .model("gpt-test")
            .retry(RetryPolicy::none()),
    );
    capture_hi(&model).await.message
}

#[tokio::test]
async fn every_recorded_case_assembles_as_expected() {
    let cases = cases("openai-chat");
    assert_eq!(cases.len(), 12);
    for case in cases {
        for piece in [0, 1, 7] {
            if piece == 1 && case.body.len() > 20_000 {
                continue; // byte-at-a-time over loopback is slow for the big cases; 7 covers them
            }
            let server = FixtureServer::start(case.body.clone(), piece).await;
            let message = assemble(&server.base_url).await;
            assert_matches(
                &format!("{} (piece {piece})", case.name),
                &message,
                &case.expect,
            );
            let sent = server.requests.lock().unwrap()[0].clone();
            assert_eq!(sent["stream"], true);
            assert_eq!(sent["model"], "gpt-test");
        }
    }
}

#[tokio::test]
async fn a_stream_cut_before_done_is_an_error_with_the_partial_message() {
    let case = corpus_case("openai-chat", "tool_call_single");
    let text = String::from_utf8(case.body).unwrap();
    let cut = text.rfind("data: [DONE]").unwrap();
    let server = FixtureServer::start(case_prefix(&text, cut), 0).await;
    let message = assemble(&server.base_url).await;
    assert_eq!(stop_name(message.stop_reason), "error");
    assert_cut_short(&message);
    assert_eq!(
        message.tool_calls().count(),
        1,
        "the partial message is kept"
    );
}

fn case_prefix(text: &str, cut: usize) -> Vec<u8> {
    text.as_bytes()[..cut].to_vec()
}
