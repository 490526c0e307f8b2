//! Context compaction over real HTTP (the testkit mock server, OpenAI Chat wire) with a real
//! SQLite session store: the threshold path and the context-overflow path (compact, then retry
//! once), the stored history keeping every original message, no tool call separated from its
//! result, and an application-provided compactor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::collections::HashSet;
use std::sync::Arc;

use agentloop::agent::compaction::{
    CompactionConfig, CompactionEntry, CompactionInput, Compactor, Summary, effective_context,
};
use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::ModelError;
use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::session::{NewSession, SessionRecorder, SessionStore, SqliteStore};
use agentloop::transcript::{Message, Role};
use agentloop_testkit::{MockServer, Script};
use common::*;
use futures::future::BoxFuture;
use serde_json::{Value, json};

fn call(id: &str, input_tokens: u64) -> Value {
    json!({"tool_calls": [{"id": id, "name": "echo", "arguments": {"text": format!("result of {id}")}}],
           "usage": {"input_tokens": input_tokens, "output_tokens": 5}})
}

struct Harness {
    server: MockServer,
    store: Arc<SqliteStore>,
    session: String,
    events: Recorder,
}

fn harness(script: Value) -> Harness {
    let server = MockServer::start(Script::from_value(script).unwrap());
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = store.create(NewSession::new()).unwrap().id;
    Harness {
        server,
        store,
        session,
        events: Recorder::default(),
    }
}

impl Harness {
    fn agent(&self, compaction: CompactionConfig) -> AgentLoop {
        let model = OpenAiChat::new(
            ProviderConfig::new(self.server.openai_base_url())
                .api_key("sk-test")
                .model("mock")
                .retry(RetryPolicy::none()),
        );
        let recorder = SessionRecorder::new(self.store.clone(), &self.session);
        let events = self.events.callback();
        let config = AgentLoopConfig {
            compaction: Some(compaction),
            ..AgentLoopConfig::default()
        };
        AgentLoop::new(config, model)
            .with_tools(vec![echo_tool()])
            .unwrap()
            .with_emit(move |e| {
                recorder.on_event(e);
                events(e);
            })
    }

    fn bodies(&self) -> Vec<String> {
        self.server
            .requests()
            .iter()
            .map(|r| r.body["messages"].to_string())
            .collect()
    }
}

/// Every tool call in a request body has its result in the same body, and the other way round.
fn calls_and_results_paired(body: &Value) {
    let messages = body["messages"].as_array().unwrap();
    let calls: HashSet<&str> = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().into_iter().flatten())
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    let results: HashSet<&str> = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, results, "{body}");
}

fn check_store(h: &Harness, originals: usize) {
    let raw = h.store.load_raw(&h.session).unwrap();
    let entries: Vec<_> = raw.iter().filter_map(CompactionEntry::parse).collect();
    assert_eq!(entries.len(), 1, "one compaction entry");
    let originals_kept = raw
        .iter()
        .filter(|m| CompactionEntry::parse(m).is_none() && m.role != Role::Custom)
        .count();
    assert!(
        originals_kept >= originals,
        "every original message stays stored: {originals_kept} < {originals}"
    );
    // The resumed context is the compacted one, and it is well-formed.
    let context = effective_context(&h.store.load(&h.session).unwrap());
    assert!(CompactionEntry::parse(&context[0]).is_some());
    assert!(context.len() < raw.len());
}

#[tokio::test]
async fn the_threshold_compacts_older_turns_and_keeps_the_last_ones() {
    let h = harness(json!({"mode": "sequential", "turns": [
        call("c1", 100),
        call("c2", 600),
        {"text": "SUMMARY: echoed c1", "usage": {"input_tokens": 640, "output_tokens": 20}},
        {"text": "All done.", "usage": {"input_tokens": 90, "output_tokens": 3}}
    ]}));
    let agent = h.agent(CompactionConfig {
        context_window: Some(1000),
        threshold: 0.5,
        keep_recent_turns: 1,
        compactor: None,
    });
    let out = run_prompt(&agent, "echo twice").await;
    assert_eq!(out.stop, RunStop::Done);

    let bodies = h.bodies();
    assert_eq!(bodies.len(), 4, "three turns and one summary call");
    assert!(bodies[2].contains("being compacted"), "{}", bodies[2]);
    assert!(!bodies[2].contains("result of c2") || bodies[2].contains("c1"));
    let after = &bodies[3];
    assert!(after.contains("SUMMARY: echoed c1"), "{after}");
    assert!(!after.contains("\"c1\""), "c1 was summarised: {after}");
    assert!(
        after.contains("result of c2"),
        "the last turn stays verbatim: {after}"
    );
    for request in h.server.requests() {
        calls_and_results_paired(&request.body);
    }
    let compactions: Vec<_> = h
        .events
        .events()
        .into_iter()
        .filter(|e| matches!(e, AgentEvent::Compaction { .. }))
        .collect();
    assert_eq!(compactions.len(), 1);
    if let AgentEvent::Compaction {
        trigger,
        summarized,
        ..
    } = &compactions[0]
    {
        assert_eq!(trigger, "threshold");
        assert_eq!(*summarized, 3);
    }
    // user, 2 x (call, result), final answer.
    check_store(&h, 6);
}

#[tokio::test]
async fn an_overflow_error_compacts_and_retries_once() {
    let overflow = json!({"error": {"message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", "type": "invalid_request_error", "code": "context_length_exceeded"}});
    let h = harness(json!({"mode": "sequential", "turns": [
        call("c1", 100),
        call("c2", 200),
        {"text": "SUMMARY after overflow",
         "faults": [{"status": 400, "body": overflow.to_string()}]},
        {"text": "Recovered."}
    ]}));
    let agent = h.agent(CompactionConfig {
        keep_recent_turns: 1,
        ..CompactionConfig::default()
    });
    let out = run_prompt(&agent, "echo twice").await;
    assert_eq!(out.stop, RunStop::Done, "{:?}", out.stop);
    let bodies = h.bodies();
    assert_eq!(
        bodies.len(),
        5,
        "2 turns, the overflow, the summary, the retry"
    );
    assert!(bodies[3].contains("being compacted"));
    assert!(bodies[4].contains("SUMMARY after overflow"));
    assert!(!bodies[4].contains("\"c1\""));
    for request in h.server.requests() {
        calls_and_results_paired(&request.body);
    }
    assert_eq!(out.context.last().unwrap().text(), "Recovered.");
    check_store(&h, 6);
}

#[tokio::test]
async fn without_compaction_an_overflow_ends_the_run() {
    let overflow = json!({"error": {"message": "maximum context length exceeded"}});
    let h = harness(json!({"mode": "sequential", "turns": [
        {"text": "never", "faults": [{"status": 400, "body": overflow.to_string()}]}
    ]}));
    let model = OpenAiChat::new(
        ProviderConfig::new(h.server.openai_base_url())
            .api_key("sk-test")
            .retry(RetryPolicy::none()),
    );
    let agent = AgentLoop::new(AgentLoopConfig::default(), model);
    assert!(
        within(agent.run(vec![Message::user("x")], vec![]))
            .await
            .is_err()
    );
    assert_eq!(h.server.request_count(), 1);
}

struct Fixed;

impl Compactor for Fixed {
    fn compact<'a>(
        &'a self,
        input: CompactionInput<'a>,
    ) -> BoxFuture<'a, Result<Summary, ModelError>> {
        let n = input.messages.len();
        Box::pin(async move {
            Ok(Summary {
                text: format!("APP SUMMARY of {n} messages"),
                usage: None,
            })
        })
    }
}

#[tokio::test]
async fn an_application_compactor_replaces_the_model_call() {
    let h = harness(json!({"mode": "sequential", "turns": [
        call("c1", 100),
        call("c2", 600),
        {"text": "Done."}
    ]}));
    let agent = h.agent(CompactionConfig {
        context_window: Some(1000),
        threshold: 0.5,
        keep_recent_turns: 1,
        compactor: Some(Arc::new(Fixed)),
    });
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    let bodies = h.bodies();
    assert_eq!(bodies.len(), 3, "no model call for the summary");
    assert!(
        bodies[2].contains("APP SUMMARY of 3 messages"),
        "{}",
        bodies[2]
    );
}

/// The measurement behind docs/BENCHMARKS.md ("Context compaction"): a scripted 200-turn
/// session (every turn one tool call with a ~1 KB argument echoed back) with and without
/// compaction; input tokens as the mock server estimates them (request bytes / 4).
/// `cargo test -p agentloop --test agent -- --ignored --nocapture compaction::`
#[tokio::test]
#[ignore = "a measurement, run by hand"]
async fn measure_a_200_turn_session() {
    for compaction in [false, true] {
        let text = "x".repeat(1000);
        // Unique call ids; a summary request takes a turn too (its text is the summary).
        let turns: Vec<Value> = (0..300)
            .map(|i| {
                json!({"text": "Progress: still echoing; nothing else changed.",
                       "tool_calls": [{"id": format!("c{i}"), "name": "echo", "arguments": {"text": text}}]})
            })
            .collect();
        let h = harness(json!({"mode": "sequential", "turns": turns}));
        let mut config = CompactionConfig {
            context_window: Some(32_000),
            threshold: 0.8,
            keep_recent_turns: 4,
            compactor: None,
        };
        if !compaction {
            config.context_window = Some(u64::MAX / 2);
        }
        let agent = AgentLoop::new(
            AgentLoopConfig {
                max_turns: Some(200),
                repeat_tool_call_limit: None,
                compaction: Some(config),
                ..AgentLoopConfig::default()
            },
            OpenAiChat::new(
                ProviderConfig::new(h.server.openai_base_url())
                    .api_key("sk-test")
                    .model("mock")
                    .retry(RetryPolicy::none()),
            ),
        )
        .with_tools(vec![echo_tool()])
        .unwrap();
        let out = agent.run(vec![Message::user("echo forever")], vec![]).await;
        println!(
            "stop: {:?}",
            out.as_ref()
                .map(|o| o.stop.clone())
                .map_err(|e| e.to_string())
        );
        let (mut turns, mut summary) = (0u64, 0u64);
        let (mut n_turns, mut n_summary) = (0, 0);
        for r in h.server.requests() {
            let tokens = r.body.to_string().len() as u64 / 4;
            if r.body["messages"].to_string().contains("being compacted") {
                summary += tokens;
                n_summary += 1;
            } else {
                turns += tokens;
                n_turns += 1;
            }
        }
        println!(
            "compaction={compaction}: {n_turns} turn requests, {turns} input tokens; \
             {n_summary} summary calls, {summary} input tokens"
        );
    }
}
