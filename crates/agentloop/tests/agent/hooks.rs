//! Extension hooks: veto (exact rendered text), argument rewrite (validated again), result
//! rewrite, panicking hooks failing closed per call, `context` pruning without writing back,
//! `before_provider_request`, `should_stop_after_turn`, and the no-extension fast path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agentloop::agent::{AgentEvent, Extension, HookKind, ResultRewrite, RunStop, ToolCallDecision};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::transcript::{Message, Role};
use common::*;
use serde_json::json;

fn two_turns(tool_args: serde_json::Value) -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", tool_args),
        ScriptedTurn::text("done"),
    ]))
}

fn result_of(
    out: &agentloop::agent::RunOutcome,
    id: &str,
) -> agentloop::transcript::ToolResultPart {
    out.new_messages()
        .iter()
        .filter_map(Message::tool_result_part)
        .find(|r| r.call_id == id)
        .cloned()
        .unwrap()
}

#[tokio::test]
async fn no_extension_means_no_hook_work() {
    let agent = agent(two_turns(json!({"text": "x"})), vec![echo_tool()]);
    for kind in [
        HookKind::Context,
        HookKind::BeforeProviderRequest,
        HookKind::ToolCall,
        HookKind::ToolResult,
        HookKind::ShouldStopAfterTurn,
    ] {
        assert!(!agent.has_hook_handlers(kind));
    }
    let only_results = agent.with_extension(Extension::new("r").on_tool_result(|_| None));
    assert!(only_results.has_hook_handlers(HookKind::ToolResult));
    assert!(!only_results.has_hook_handlers(HookKind::ToolCall));
}

#[tokio::test]
async fn veto_renders_blocked_by_with_the_reason_and_never_runs_the_tool() {
    let model = two_turns(json!({"text": "rm -rf /"}));
    let rec = Recorder::default();
    let agent = agent(model, vec![echo_tool()])
        .with_extension(Extension::new("policy").on_tool_call(|call| {
            if call.arguments["text"].as_str().unwrap_or("").contains("rm") {
                ToolCallDecision::Block("destructive commands are not allowed".into())
            } else {
                ToolCallDecision::Continue
            }
        }))
        .with_emit(rec.callback());
    let out = run_prompt(&agent, "go").await;
    let r = result_of(&out, "A");
    assert!(r.is_error);
    assert_eq!(
        r.content,
        "⛔ blocked by policy: destructive commands are not allowed"
    );
    // A vetoed call never runs: no start (no spinner), one end flagged blocked.
    let names = rec.names();
    assert!(
        !names.contains(&"tool_execution_start(A)".to_owned()),
        "{names:?}"
    );
    assert!(names.contains(&"tool_execution_end(A)".to_owned()));
    let end = rec.events().into_iter().find_map(|e| match e {
        AgentEvent::ToolExecutionEnd { call, blocked, .. } if call.id == "A" => Some(blocked),
        _ => None,
    });
    assert_eq!(end, Some(true));
    assert_eq!(out.final_text(), "done");
}

#[tokio::test]
async fn argument_rewrite_is_used_and_validated_again() {
    let agent_ok = agent(two_turns(json!({"text": "secret"})), vec![echo_tool()]).with_extension(
        Extension::new("redact")
            .on_tool_call(|_| ToolCallDecision::Rewrite(json!({"text": "[redacted]"}))),
    );
    let out = run_prompt(&agent_ok, "go").await;
    assert_eq!(result_of(&out, "A").content, "[redacted]");

    let agent_bad = agent(two_turns(json!({"text": "fine"})), vec![echo_tool()]).with_extension(
        Extension::new("broken").on_tool_call(|_| ToolCallDecision::Rewrite(json!({"text": 42}))),
    );
    let out = run_prompt(&agent_bad, "go").await;
    let r = result_of(&out, "A");
    assert!(r.is_error);
    assert!(
        r.content.contains("$.text: 42 is not of type \"string\""),
        "{}",
        r.content
    );
}

#[tokio::test]
async fn result_rewrite_changes_content_and_error_flag_before_tool_execution_end() {
    let rec = Recorder::default();
    let agent = agent(two_turns(json!({"text": "raw"})), vec![echo_tool()])
        .with_extension(Extension::new("post").on_tool_result(|fin| {
            Some(ResultRewrite {
                content: Some(format!("{} (checked)", fin.result.content)),
                is_error: Some(true),
            })
        }))
        .with_emit(rec.callback());
    let out = run_prompt(&agent, "go").await;
    let r = result_of(&out, "A");
    assert_eq!(r.content, "raw (checked)");
    assert!(r.is_error);
    let end = rec
        .events()
        .into_iter()
        .find_map(|e| match e {
            AgentEvent::ToolExecutionEnd { result, .. } => Some(result),
            _ => None,
        })
        .unwrap();
    assert_eq!(end, r, "observers see the rewritten result");
}

#[tokio::test]
async fn a_panicking_tool_call_hook_fails_closed_for_that_call_only() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("A", "echo", json!({"text": "boom"}))
            .tool_call("B", "echo", json!({"text": "fine"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = agent(model, vec![echo_tool()]).with_extension(
        Extension::new("fragile").on_tool_call(|call| {
            if call.arguments["text"] == "boom" {
                panic!("hook bug");
            }
            ToolCallDecision::Continue
        }),
    );
    let out = run_prompt(&agent, "go").await;
    let a = result_of(&out, "A");
    assert!(a.is_error);
    assert!(
        a.content.contains("extension \"fragile\" failed") && a.content.contains("hook bug"),
        "{}",
        a.content
    );
    assert_eq!(result_of(&out, "B").content, "fine");
    assert_eq!(out.stop, RunStop::Done);
}

#[tokio::test]
async fn a_panicking_tool_result_hook_withholds_that_result() {
    let agent = agent(two_turns(json!({"text": "x"})), vec![echo_tool()])
        .with_extension(Extension::new("bad-post").on_tool_result(|_| panic!("post bug")));
    let out = run_prompt(&agent, "go").await;
    let r = result_of(&out, "A");
    assert!(r.is_error);
    assert!(r.content.contains("withheld"), "{}", r.content);
    assert_eq!(out.stop, RunStop::Done);
}

#[tokio::test]
async fn context_hook_prunes_what_the_model_sees_without_touching_history() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::text("done"),
    ]));
    let seen_lengths = Arc::new(Mutex::new(Vec::new()));
    let seen = seen_lengths.clone();
    let agent = agent(model.clone(), vec![echo_tool()]).with_extension(
        Extension::new("pruner").on_context(move |messages| {
            seen.lock().unwrap().push(messages.len());
            // Keep only the last message.
            let last = messages.pop();
            messages.clear();
            messages.extend(last);
        }),
    );
    let history = vec![Message::user("old 1"), Message::user("old 2")];
    let out = within(agent.run(vec![Message::user("go")], history))
        .await
        .unwrap();
    assert_eq!(
        *seen_lengths.lock().unwrap(),
        [3, 5],
        "the hook saw the full history"
    );
    let requests = model.requests();
    assert_eq!(requests[0].messages.len(), 1);
    assert_eq!(requests[0].messages[0].text(), "go");
    assert_eq!(requests[1].messages.len(), 1);
    assert_eq!(requests[1].messages[0].role, Role::ToolResult);
    assert_eq!(out.context.len(), 6, "the loop's history is untouched");
    assert_eq!(out.context[0].text(), "old 1");
}

#[tokio::test]
async fn a_panicking_context_hook_leaves_the_context_unchanged() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent =
        agent(model.clone(), vec![]).with_extension(Extension::new("bad").on_context(|messages| {
            messages.clear();
            panic!("context bug");
        }));
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(model.requests()[0].messages.len(), 1);
}

#[tokio::test]
async fn before_provider_request_can_replace_the_request() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let agent = agent(model.clone(), vec![echo_tool()]).with_extension(
        Extension::new("tune").on_before_provider_request(|req| {
            req.temperature = Some(0.0);
            req.system_prompt = Some("patched".into());
            req.tools = std::borrow::Cow::Owned(Vec::new());
        }),
    );
    run_prompt(&agent, "go").await;
    let req = &model.requests()[0];
    assert_eq!(req.temperature, Some(0.0));
    assert_eq!(req.system_prompt.as_deref(), Some("patched"));
    assert!(req.tools.is_empty());
}

#[tokio::test]
async fn should_stop_after_turn_ends_the_run_without_polling_queues() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::text("never"),
    ]));
    let turns = Arc::new(AtomicUsize::new(0));
    let t = turns.clone();
    let agent = agent(model.clone(), vec![echo_tool()]).with_extension(
        Extension::new("one-turn").on_should_stop_after_turn(move |summary| {
            t.fetch_add(1, Ordering::SeqCst);
            summary.tool_results.len() == 1
        }),
    );
    agent.follow_up(Message::user("queued"));
    let out = run_prompt(&agent, "go").await;
    assert_eq!(
        out.stop,
        RunStop::HookStop {
            extension: "one-turn".into()
        }
    );
    assert_eq!(turns.load(Ordering::SeqCst), 1);
    assert_eq!(model.remaining(), 1);
    // The queues were not polled: the follow-up still waits.
    assert_eq!(agent.follow_up_queue().len(), 1);
}
