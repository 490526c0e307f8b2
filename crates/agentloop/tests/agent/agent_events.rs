//! Event order of the agent loop (pi-style), through both the `emit` callback and the stream.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop, ToolExecutionMode};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::transcript::{Message, Role, StopReason};
use common::*;
use serde_json::json;

#[tokio::test]
async fn plain_prompt_gives_two_messages_and_the_exact_event_order() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("Hello there").chunked(4)
    ]));
    let rec = Recorder::default();
    let agent = agent(model.clone(), vec![]).with_emit(rec.callback());
    let out = run_prompt(&agent, "hi").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(out.new_messages().len(), 2);
    assert_eq!(out.new_messages()[1].text(), "Hello there");
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
    // Every delta of the streaming reply became an update.
    let updates = rec
        .events()
        .iter()
        .filter(|e| matches!(e, AgentEvent::MessageUpdate { .. }))
        .count();
    assert_eq!(updates, 3);
    model.assert_consumed();
}

#[tokio::test]
async fn one_tool_call_exact_order() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::text("done"),
    ]));
    let rec = Recorder::default();
    let agent = agent(model.clone(), vec![echo_tool()]).with_emit(rec.callback());
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
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
            "tool_execution_start(A)",
            "tool_execution_end(A)",
            "message_start(tool_result)",
            "message_end(tool_result)",
            "turn_end[A]",
            "turn_start",
            "message_start(assistant)",
            "message_update",
            "message_end(assistant)",
            "turn_end[]",
            "agent_end"
        ]
    );
    let roles: Vec<_> = out.new_messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::ToolResult,
            Role::Assistant
        ]
    );
    // The model saw the tool result on its second call.
    let second = &model.requests()[1];
    assert_eq!(
        second.messages[2]
            .tool_result_part()
            .map(|r| r.content.as_str()),
        Some("x")
    );
}

#[tokio::test(start_paused = true)]
async fn parallel_tools_end_in_completion_order_results_stay_in_call_order() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("A", "sleep", json!({"ms": 200, "label": "a"}))
            .tool_call("B", "sleep", json!({"ms": 5, "label": "b"})),
        ScriptedTurn::text("done"),
    ]));
    let rec = Recorder::default();
    let agent = agent(model.clone(), vec![sleep_tool("sleep")]).with_emit(rec.callback());
    run_prompt(&agent, "go").await;
    let names = rec.names();
    let first_turn: Vec<_> = names
        .iter()
        .skip_while(|n| *n != "tool_execution_start(A)")
        .take(9)
        .map(String::as_str)
        .collect();
    assert_eq!(
        first_turn,
        [
            "tool_execution_start(A)",
            "tool_execution_start(B)",
            "tool_execution_end(B)",
            "tool_execution_end(A)",
            "message_start(tool_result)",
            "message_end(tool_result)",
            "message_start(tool_result)",
            "message_end(tool_result)",
            "turn_end[A,B]"
        ]
    );
    let results: Vec<_> = rec
        .events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::MessageEnd { message } if message.role == Role::ToolResult => {
                message.tool_result_part().map(|r| r.call_id.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(results, ["A", "B"]);
}

#[tokio::test(start_paused = true)]
async fn one_non_parallel_tool_makes_the_batch_sequential() {
    let exclusive = sleep_tool("exclusive").with_parallel_safe(false);
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("A", "sleep", json!({"ms": 100}))
            .tool_call("B", "exclusive", json!({"ms": 1})),
        ScriptedTurn::text("done"),
    ]));
    let rec = Recorder::default();
    let agent = agent(model, vec![sleep_tool("sleep"), exclusive]).with_emit(rec.callback());
    run_prompt(&agent, "go").await;
    let tools: Vec<_> = rec
        .names()
        .into_iter()
        .filter(|n| n.starts_with("tool_execution"))
        .collect();
    assert_eq!(
        tools,
        [
            "tool_execution_start(A)",
            "tool_execution_end(A)",
            "tool_execution_start(B)",
            "tool_execution_end(B)"
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn sequential_mode_runs_calls_in_order() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("A", "sleep", json!({"ms": 80}))
            .tool_call("B", "sleep", json!({"ms": 1})),
        ScriptedTurn::text("done"),
    ]));
    let rec = Recorder::default();
    let config = AgentLoopConfig {
        tool_execution_mode: ToolExecutionMode::Sequential,
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, model, vec![sleep_tool("sleep")]).with_emit(rec.callback());
    run_prompt(&agent, "go").await;
    let ends: Vec<_> = rec
        .names()
        .into_iter()
        .filter(|n| n.starts_with("tool_execution_end"))
        .collect();
    assert_eq!(ends, ["tool_execution_end(A)", "tool_execution_end(B)"]);
}

#[tokio::test]
async fn the_stream_interface_yields_the_same_events_and_ends_with_agent_end() {
    let script = || {
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
            ScriptedTurn::text("done").chunked(2),
        ]))
    };
    let rec = Recorder::default();
    let by_callback = agent(script(), vec![echo_tool()]).with_emit(rec.callback());
    run_prompt(&by_callback, "go").await;
    let by_stream = agent(script(), vec![echo_tool()]);
    let mut stream = by_stream.run_stream(vec![Message::user("go")], vec![]);
    let mut events = Vec::new();
    while let Some(e) = within(futures::StreamExt::next(&mut stream)).await {
        events.push(e);
    }
    assert_eq!(compact(&events), rec.names());
    assert!(matches!(
        events.last(),
        Some(AgentEvent::AgentEnd {
            stop: RunStop::Done,
            ..
        })
    ));
    let outcome = stream.outcome().unwrap().unwrap();
    assert_eq!(outcome.final_text(), "done");
}

#[tokio::test]
async fn continue_starts_directly_with_the_assistant_message() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("continued")]));
    let agent = agent(model, vec![]);
    let events = stream_names(&agent, vec![], vec![]).await;
    // (An empty prompt list on an empty context is still a run: the model is called.)
    assert!(matches!(events.last(), Some(AgentEvent::AgentEnd { .. })));

    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("continued")]));
    let rec = Recorder::default();
    let agent = common::agent(model.clone(), vec![]).with_emit(rec.callback());
    let out = within(agent.run_continue(vec![Message::user("earlier")]))
        .await
        .unwrap();
    assert_eq!(
        rec.names(),
        [
            "agent_start",
            "turn_start",
            "message_start(assistant)",
            "message_update",
            "message_end(assistant)",
            "turn_end[]",
            "agent_end"
        ]
    );
    assert_eq!(out.new_messages().len(), 1);
    assert_eq!(model.requests()[0].messages.len(), 1);
}

#[tokio::test]
async fn continue_preconditions_fail_clearly_and_still_end_the_stream() {
    let model = Arc::new(ScriptedModel::new([]));
    let agent = agent(model, vec![]);
    let err = within(agent.run_continue(vec![])).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "cannot continue: the context has no messages"
    );
    let done = Message::assistant(vec![], StopReason::Stop);
    let err = within(agent.run_continue(vec![Message::user("q"), done.clone()]))
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot continue from an assistant message"),
        "{err}"
    );
    let events: Vec<_> = within(futures::StreamExt::collect::<Vec<_>>(
        agent.run_continue_stream(vec![done]),
    ))
    .await;
    assert_eq!(compact(&events), ["agent_start", "agent_end"]);
}

#[tokio::test]
async fn a_panicking_emit_callback_changes_nothing() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = agent(model, vec![echo_tool()]).with_emit(|e| {
        if matches!(
            e,
            AgentEvent::ToolExecutionStart { .. } | AgentEvent::TurnEnd { .. }
        ) {
            panic!("UI crashed");
        }
    });
    let mut stream = agent.run_stream(vec![Message::user("go")], vec![]);
    let mut last = None;
    while let Some(e) = within(futures::StreamExt::next(&mut stream)).await {
        last = Some(e);
    }
    assert!(matches!(
        last,
        Some(AgentEvent::AgentEnd {
            stop: RunStop::Done,
            ..
        })
    ));
    assert_eq!(stream.outcome().unwrap().unwrap().final_text(), "done");
}

#[tokio::test]
async fn system_prompt_temperature_and_tools_reach_the_model() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
    let config = AgentLoopConfig {
        model: Some("test-model".into()),
        system_prompt: Some("Be brief.".into()),
        temperature: Some(0.2),
        reasoning: Some(agentloop::model::ReasoningLevel::High),
        ..AgentLoopConfig::default()
    };
    let agent = AgentLoop::new(config, model.clone())
        .with_tools(vec![echo_tool()])
        .unwrap();
    let out = run_prompt(&agent, "hi").await;
    let req = &model.requests()[0];
    assert_eq!(req.model.as_deref(), Some("test-model"));
    assert_eq!(req.system_prompt.as_deref(), Some("Be brief."));
    assert_eq!(req.temperature, Some(0.2));
    assert_eq!(req.reasoning, Some(agentloop::model::ReasoningLevel::High));
    assert_eq!(req.tools.len(), 1);
    assert_eq!(req.tools[0].name, "echo");
    let reply = &out.new_messages()[1];
    assert_eq!(reply.model.as_deref(), Some("test-model"));
    assert_eq!(reply.provider.as_deref(), Some("scripted"));
}

#[tokio::test(start_paused = true)]
async fn delays_do_not_reorder_anything() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("slow text")
        .chunked(3)
        .delay(Duration::from_millis(20))
        .chunk_delay(Duration::from_millis(5))]));
    let agent = agent(model, vec![]);
    let events = stream_names(&agent, vec![Message::user("hi")], vec![]).await;
    assert_eq!(
        compact(&events),
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

/// Runs and batches must be spawnable (their futures are `Send`), also for generic deps types.
#[tokio::test]
async fn runs_and_batches_can_be_spawned() {
    async fn spawn_batch<D: agentloop::tooling::ToolDeps>(
        registry: Arc<agentloop::tooling::Registry<D>>,
        deps: Arc<D>,
    ) -> usize {
        tokio::spawn(async move {
            let calls = [agentloop::transcript::ToolCallPart::new(
                "x",
                "missing",
                json!({}),
            )];
            agentloop::tooling::run_tools_with(
                &calls,
                &registry,
                &deps,
                &agentloop::tooling::ExecOptions::default(),
            )
            .await
            .len()
        })
        .await
        .unwrap()
    }
    let registry = Arc::new(agentloop::tooling::Registry::new(vec![echo_tool()]).unwrap());
    assert_eq!(
        spawn_batch(registry, Arc::new(agentloop::tooling::Deps::new())).await,
        1
    );

    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("spawned")]));
    let agent = Arc::new(agent(model, vec![echo_tool()]));
    let handle = {
        let agent = agent.clone();
        tokio::spawn(async move { agent.run(vec![Message::user("hi")], vec![]).await })
    };
    let out = within(handle).await.unwrap().unwrap();
    assert_eq!(out.final_text(), "spawned");
}
