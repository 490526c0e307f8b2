//! Cross-provider handoff: a conversation recorded on each adapter (with thinking and a tool
//! call) is continued on each of the other three, over HTTP; the receiving mock server checks that
//! every tool call in the replayed history has exactly one result (and, for Gemini, that every
//! replayed function call of the current turn carries a thought signature).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::Model;
use agentloop::providers::{ProviderConfig, RetryPolicy};
use agentloop::transcript::{Message, Part, Role};
use agentloop_testkit::{MockServer, Script};
use serde_json::json;

use crate::support::{Wire, lookup};

fn model(wire: Wire, server: &MockServer) -> Arc<dyn Model> {
    wire.adapter(
        ProviderConfig::new(wire.base_url(server))
            .api_key("test")
            .model(format!("{wire:?}-model"))
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10)),
    )
}

async fn record(wire: Wire) -> Vec<Message> {
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"thinking": "I should look it up.", "text": "Looking it up.",
             "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"word": "agent"}}]},
            {"text": "An agent acts.", "chunk_size": 4}
        ]}))
        .unwrap(),
    );
    let agent = AgentLoop::new(AgentLoopConfig::default(), model(wire, &server))
        .with_tools([lookup()])
        .unwrap();
    let out = agent
        .run(vec![Message::user("Define agent")], vec![])
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Done, "{wire:?}");
    assert!(server.violations().is_empty());
    out.context
}

#[tokio::test]
async fn transcripts_recorded_on_each_adapter_continue_on_the_other_three() {
    for from in Wire::ALL {
        let mut history = record(from).await;
        // The recording holds a tool call with its result (and the thinking the wire carried).
        assert_eq!(
            history
                .iter()
                .filter(|m| m.role == Role::ToolResult)
                .count(),
            1,
            "{from:?}"
        );
        // What the other adapters must never see: Responses item ids, Gemini signatures.
        let stored = serde_json::to_string(&history).unwrap();
        match from {
            Wire::Responses => assert!(stored.contains("fc_mock_") && stored.contains("msg_mock_")),
            Wire::Gemini => assert!(stored.contains("mock-sig-")),
            _ => {}
        }
        if from != Wire::Chat {
            assert!(
                history[1]
                    .content
                    .iter()
                    .any(|p| matches!(p, Part::Thinking(_))),
                "{from:?}: thinking recorded"
            );
        }
        // An unanswered call and an errored message, as a crash or a failure would leave them.
        let mut dangling = Message::assistant(
            vec![Part::ToolCall(agentloop::transcript::ToolCallPart::new(
                "call|weird/id",
                "lookup",
                json!({"word": "x"}),
            ))],
            agentloop::transcript::StopReason::ToolUse,
        );
        dangling.provider = Some(format!("{from:?}"));
        history.push(dangling);
        history.push(Message::user("And a loop?"));
        for to in Wire::ALL {
            if to == from {
                continue;
            }
            let server = MockServer::start(
                Script::from_value(
                    json!({"turns": [{"text": "A loop repeats."}], "mode": "sequential"}),
                )
                .unwrap(),
            );
            let agent = AgentLoop::new(AgentLoopConfig::default(), model(to, &server))
                .with_tools([lookup()])
                .unwrap();
            let out = agent.run_continue(history.clone()).await;
            let out = out.unwrap_or_else(|e| panic!("{from:?} -> {to:?}: {e}"));
            assert_eq!(out.final_text(), "A loop repeats.", "{from:?} -> {to:?}");
            assert!(
                server.violations().is_empty(),
                "{from:?} -> {to:?}: {:?}",
                server.violations()
            );
            let body = serde_json::to_string(&server.requests()[0].body).unwrap();
            assert!(!body.contains("call|weird/id"), "ids are normalised");
            assert!(body.contains("No result provided"), "{from:?} -> {to:?}");
            if from != Wire::Chat {
                assert!(
                    body.contains("I should look it up."),
                    "{from:?} -> {to:?}: foreign thinking is replayed as text"
                );
            }
            // Provider data never crosses providers: no Gemini signature, no Responses item id
            // reaches another adapter; Gemini gets the documented sentinel instead.
            assert!(!body.contains("mock-sig-"), "{from:?} -> {to:?}: {body}");
            assert!(!body.contains("msg_mock_"), "{from:?} -> {to:?}: {body}");
            assert!(!body.contains("fc_mock_"), "{from:?} -> {to:?}: {body}");
            if to == Wire::Gemini {
                assert!(
                    body.contains("skip_thought_signature_validator"),
                    "{from:?} -> {to:?}: {body}"
                );
            }
        }
    }
}
