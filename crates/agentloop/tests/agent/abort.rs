//! Abort: before the start, mid-stream (the partial message is kept) and mid-batch (finished
//! results kept, unfinished calls answered "aborted", even for a tool that ignores cancellation).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentloop::agent::{AgentEvent, RunStop};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::transcript::{Message, Role, StopReason};
use common::*;
use serde_json::json;

fn abort_after(agent_signal: agentloop::agent::AbortSignal, ms: u64) {
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(ms)).await;
        agent_signal.abort();
    });
}

#[tokio::test]
async fn abort_before_start_runs_nothing() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("never")]));
    let agent = agent(model.clone(), vec![]);
    agent.abort();
    let events = stream_names(&agent, vec![Message::user("hi")], vec![]).await;
    assert_eq!(compact(&events), ["agent_start", "agent_end"]);
    assert!(matches!(
        events.last(),
        Some(AgentEvent::AgentEnd {
            stop: RunStop::Aborted,
            ..
        })
    ));
    assert_eq!(model.requests().len(), 0);
    assert_eq!(model.remaining(), 1);
}

#[tokio::test(start_paused = true)]
async fn abort_mid_stream_keeps_the_partial_message() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("abcdefghij")
        .chunked(1)
        .hang_after(4)]));
    let rec = Recorder::default();
    let agent = agent(model, vec![]).with_emit(rec.callback());
    abort_after(agent.abort_signal().clone(), 100);
    let out = run_prompt(&agent, "hi").await;
    assert_eq!(out.stop, RunStop::Aborted);
    let last = out.new_messages().last().unwrap();
    assert_eq!(last.role, Role::Assistant);
    assert_eq!(last.stop_reason, Some(StopReason::Aborted));
    assert_eq!(last.text(), "abcd");
    assert_eq!(
        rec.names(),
        [
            "agent_start",
            "turn_start",
            "message_start(user)",
            "message_end(user)",
            "message_start(assistant)",
            "message_update",
            "message_end(assistant)",
            "turn_end[]",
            "agent_end"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn abort_mid_stream_answers_streamed_tool_calls_without_running_them() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::new()
        .tool_call("A", "echo", json!({"text": "x"}))
        .with_text("still talking")
        .hang_after(3)]));
    let agent = agent(model, vec![echo_tool()]);
    abort_after(agent.abort_signal().clone(), 100);
    let out = run_prompt(&agent, "hi").await;
    assert_eq!(out.stop, RunStop::Aborted);
    let msgs = out.new_messages();
    assert_eq!(msgs[1].stop_reason, Some(StopReason::Aborted));
    assert_eq!(msgs[1].tool_calls().count(), 1);
    let result = msgs[2].tool_result_part().unwrap();
    assert!(result.is_error);
    assert_eq!(result.call_id, "A");
    assert!(result.content.contains("aborted"), "{}", result.content);
}

#[tokio::test]
async fn abort_mid_batch_keeps_finished_results_and_ends_promptly_despite_a_stubborn_tool() {
    // This tool ignores its cancellation token entirely and stays busy until the test lets it go.
    let release = Latch::default();
    let finished = Arc::new(AtomicBool::new(false));
    let stubborn = stuck_tool("stubborn", None, release.clone(), finished.clone());
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("fast", "sleep", json!({"ms": 5, "label": "fast done"}))
            .tool_call("slow", "stubborn", json!({})),
        ScriptedTurn::text("never reached"),
    ]));
    let rec = Recorder::default();
    let agent = agent(model.clone(), vec![sleep_tool("sleep"), stubborn]);
    // Abort as soon as the fast call has its result, while the stubborn one is still busy.
    let signal = agent.abort_signal().clone();
    let record = rec.callback();
    let agent = agent.with_emit(move |e: &AgentEvent| {
        record(e);
        if matches!(e, AgentEvent::ToolExecutionEnd { call, .. } if call.id == "fast") {
            signal.abort();
        }
    });
    let out = run_prompt(&agent, "go").await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the run waited for the stubborn tool"
    );
    release.open();
    assert_eq!(out.stop, RunStop::Aborted);
    let results: Vec<_> = out
        .new_messages()
        .iter()
        .filter_map(Message::tool_result_part)
        .collect();
    assert_eq!(results.len(), 2, "every call has exactly one result");
    assert_eq!(results[0].content, "fast done");
    assert!(!results[0].is_error);
    assert!(results[1].is_error);
    assert_eq!(
        results[1].content,
        "Tool \"stubborn\" was aborted before it finished."
    );
    assert_eq!(model.remaining(), 1, "no model call after the abort");
    assert_eq!(rec.names().last().map(String::as_str), Some("agent_end"));
}

#[tokio::test]
async fn a_tool_that_ignores_cancellation_ends_within_its_timeout() {
    let release = Latch::default();
    let finished = Arc::new(AtomicBool::new(false));
    let stubborn = stuck_tool(
        "stubborn",
        Some(Duration::from_millis(100)),
        release.clone(),
        finished.clone(),
    );
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("s", "stubborn", json!({})),
        ScriptedTurn::text("moved on"),
    ]));
    let agent = agent(model, vec![stubborn]);
    let out = run_prompt(&agent, "go").await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "the run waited for the stubborn tool"
    );
    release.open();
    let result = out.new_messages()[2].tool_result_part().unwrap();
    assert_eq!(result.content, "Tool \"stubborn\" timed out after 100ms.");
    assert_eq!(out.final_text(), "moved on");
}

#[tokio::test(start_paused = true)]
async fn abort_stream_interface_terminates_with_agent_end() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("x").hang_after(0)]));
    let agent = agent(model, vec![]);
    abort_after(agent.abort_signal().clone(), 50);
    let events = stream_names(&agent, vec![Message::user("hi")], vec![]).await;
    assert!(matches!(
        events.last(),
        Some(AgentEvent::AgentEnd {
            stop: RunStop::Aborted,
            ..
        })
    ));
}
