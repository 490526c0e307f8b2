//! Sub-agents: an agent as a tool of another agent — the child's answer as the tool result,
//! its events tagged with the path of calls, abort, usage roll-up, the depth limit and parallel
//! children.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;

use agentloop::agent::{
    AbortSignal, AgentEvent, AgentLoop, AgentLoopConfig, RunOutcome, RunStop, SubAgent, UsageLimits,
};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role, Usage};
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

fn tool_result<'a>(
    messages: &'a [Message],
    call_id: &str,
) -> &'a agentloop::transcript::ToolResultPart {
    messages
        .iter()
        .filter_map(Message::tool_result_part)
        .find(|r| r.call_id == call_id)
        .expect("a result for the call")
}

/// The child events of `events` that came through the parent call `call_id`, unwrapped one level.
fn child_events(events: &[AgentEvent], call_id: &str) -> Vec<AgentEvent> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Child {
                parent_call_id,
                event,
                ..
            } if &**parent_call_id == call_id => Some((**event).clone()),
            _ => None,
        })
        .collect()
}

/// A parent turn calling the `helper` child with call `id`.
fn call_helper(id: &str) -> ScriptedTurn {
    ScriptedTurn::new().tool_call(id, "helper", json!({"prompt": "go"}))
}

/// `child` as the parent's only tool, `helper`.
fn as_helper(child: AgentLoop<Deps>) -> Vec<ToolSpec<Deps>> {
    vec![child.into_tool("helper", "Helps.").unwrap()]
}

/// The default configuration with at most `turns` turns.
fn max_turns(turns: u32) -> AgentLoopConfig {
    AgentLoopConfig {
        max_turns: Some(turns),
        ..AgentLoopConfig::default()
    }
}

/// The default configuration with `limits`.
fn limited(limits: UsageLimits) -> AgentLoopConfig {
    AgentLoopConfig {
        usage_limits: limits,
        ..AgentLoopConfig::default()
    }
}

/// The whole run of `prompt` on an empty context through the event stream, which must succeed:
/// every event it streamed, and its outcome.
async fn run_streamed(agent: &AgentLoop<Deps>, prompt: &str) -> (Vec<AgentEvent>, RunOutcome) {
    let mut stream = agent.run_stream(vec![Message::user(prompt)], vec![]);
    let mut events = Vec::new();
    while let Some(event) = within(stream.next()).await {
        events.push(event);
    }
    (events, stream.outcome().unwrap().unwrap())
}

/// Asserts that a run stopped at a usage limit with `want` of it used.
#[track_caller]
fn assert_usage_limit(stop: &RunStop, want: f64) {
    assert!(
        matches!(stop, RunStop::UsageLimit { used, .. } if *used == want),
        "{stop:?}"
    );
}

/// The run of a parent under `limits` whose first turn is `first` (a call of `helper`, which is
/// `child`) and whose second, were it reached, answers "never"; and the parent's model, to see
/// whether that turn was left.
async fn run_limited_parent(
    limits: UsageLimits,
    first: ScriptedTurn,
    child: AgentLoop<Deps>,
) -> (RunOutcome, Arc<ScriptedModel>) {
    let parent_model = Arc::new(ScriptedModel::new([first, ScriptedTurn::text("never")]));
    let parent = agent_with(limited(limits), parent_model.clone(), as_helper(child));
    (run_prompt(&parent, "x").await, parent_model)
}

fn upper_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("upper", "Upper-case text.")
        .blocking_handler(|_ctx: ToolContext<Deps>, args: Value| {
            args["text"].as_str().unwrap_or_default().to_uppercase()
        })
        .build()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn the_childs_answer_is_the_result_and_its_events_reach_the_parent_tagged() {
    let child_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("c-1", "upper", json!({"text": "paris"})),
        ScriptedTurn::text("The capital is PARIS."),
    ]));
    let child = agent(child_model.clone(), vec![upper_tool()]);
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("p-1", "researcher", json!({"prompt": "Capital of France?"})),
        ScriptedTurn::text("Done."),
    ]));
    let tool = child.into_tool("researcher", "Answers questions.").unwrap();
    let parent = agent(parent_model, vec![tool]);

    let (events, out) = run_streamed(&parent, "Ask.").await;
    assert_eq!(out.stop, RunStop::Done);
    let result = tool_result(out.new_messages(), "p-1");
    assert!(!result.is_error, "{}", result.content);
    assert_eq!(result.content, "The capital is PARIS.");
    // The child saw the prompt as its user message.
    let asked = &child_model.requests()[0];
    assert!(format!("{asked:?}").contains("Capital of France?"));

    // The parent's stream ends once, with its own AgentEnd.
    let ends = events.iter().filter(|e| e.kind() == "agent_end").count();
    assert_eq!(ends, 1);
    assert_eq!(events.last().unwrap().kind(), "agent_end");
    // The child's whole run is there, tagged with the call and the agent's name.
    let child = child_events(&events, "p-1");
    assert_eq!(child.first().unwrap().kind(), "agent_start");
    assert!(matches!(
        child.last(),
        Some(AgentEvent::AgentEnd {
            stop: RunStop::Done,
            ..
        })
    ));
    assert!(child.iter().any(|e| matches!(e,
        AgentEvent::ToolExecutionEnd { result, .. } if result.content == "PARIS")));
    assert!(events.iter().all(|e| match e {
        AgentEvent::Child { agent, .. } => &**agent == "researcher",
        _ => true,
    }));
    // Every child event precedes the parent's end of the call that ran it.
    let call_end = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolExecutionEnd { call, .. } if call.id == "p-1"))
        .unwrap();
    let last_child = events.iter().rposition(|e| e.kind() == "child").unwrap();
    assert!(last_child < call_end);
    let json = serde_json::to_value(&events[last_child]).unwrap();
    assert_eq!(json["type"], "child");
    assert_eq!(json["parent_call_id"], "p-1");
    assert_eq!(json["agent"], "researcher");
    assert_eq!(json["event"]["type"], "agent_end");
}

#[tokio::test(start_paused = true)]
async fn a_failed_child_gives_an_error_result_with_its_reason() {
    let child = agent(
        Arc::new(ScriptedModel::new([ScriptedTurn::error(
            "provider exploded",
        )])),
        vec![],
    );
    let parent_model = Arc::new(ScriptedModel::new([
        call_helper("p-1"),
        ScriptedTurn::text("ok"),
    ]));
    let parent = agent(parent_model, as_helper(child));
    let out = run_prompt(&parent, "x").await;
    let result = tool_result(out.new_messages(), "p-1");
    assert!(result.is_error);
    assert!(
        result.content.contains("Sub-agent \"helper\" failed"),
        "{}",
        result.content
    );
    assert!(
        result.content.contains("provider exploded"),
        "{}",
        result.content
    );

    // A child that stops early (its turn limit) is an error too, with the stop reason.
    let child = agent_with(
        max_turns(1),
        Arc::new(ScriptedModel::new([ScriptedTurn::new().tool_call(
            "c-1",
            "upper",
            json!({"text": "a"}),
        )])),
        vec![upper_tool()],
    );
    let parent_model = Arc::new(ScriptedModel::new([
        call_helper("p-2"),
        ScriptedTurn::text("ok"),
    ]));
    let parent = agent(parent_model, as_helper(child));
    let out = run_prompt(&parent, "x").await;
    let result = tool_result(out.new_messages(), "p-2");
    assert!(result.is_error);
    assert!(result.content.contains("max_turns"), "{}", result.content);
}

/// A parent with its own abort signal whose model calls `worker` (call `p-1`, 1 + 1 tokens), a
/// child whose `hang` tool aborts the parent's signal, then never finishes on its own (the
/// child's model spends 70 + 7 tokens on the call). `child_listener` listens to the child itself.
fn parent_of_aborting_child(child_listener: Option<&Recorder>) -> AgentLoop<Deps> {
    let signal = AbortSignal::new();
    let hang = {
        let signal = signal.clone();
        ToolSpec::<Deps>::builder("hang", "Waits forever.")
            .handler(move |_ctx: ToolContext<Deps>, _args: Value| {
                let signal = signal.clone();
                async move {
                    signal.abort();
                    std::future::pending::<()>().await;
                    "never"
                }
            })
            .build()
            .unwrap()
    };
    let mut child = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new()
                .tool_call("c-1", "hang", json!({}))
                .usage(usage(70, 7)),
            ScriptedTurn::text("never reached"),
        ])),
        vec![hang],
    );
    if let Some(listener) = child_listener {
        child = child.with_emit(listener.callback());
    }
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("p-1", "worker", json!({"prompt": "work"}))
            .usage(usage(1, 1)),
        ScriptedTurn::text("never reached"),
    ]));
    agent(
        parent_model,
        vec![child.into_tool("worker", "Works.").unwrap()],
    )
    .with_abort_signal(signal)
}

#[tokio::test(start_paused = true)]
async fn aborting_the_parent_aborts_the_child_and_every_call_gets_one_result() {
    let rec = Recorder::default();
    let parent = parent_of_aborting_child(None).with_emit(rec.callback());
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Aborted);
    // The aborted child's tokens still count in the parent's total.
    assert_eq!(out.usage.input_tokens, 71);
    assert_eq!(out.usage.output_tokens, 8);
    let result = tool_result(out.new_messages(), "p-1");
    assert!(result.is_error);
    assert!(result.content.contains("abort"), "{}", result.content);

    let events = rec.events();
    assert_eq!(events.iter().filter(|e| e.kind() == "agent_end").count(), 1);
    assert_eq!(events.last().unwrap().kind(), "agent_end");
    let child = child_events(&events, "p-1");
    // The child's call started once and ended once, as an error.
    let starts = child
        .iter()
        .filter(|e| e.kind() == "tool_execution_start")
        .count();
    let ends: Vec<_> = child
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd { result, .. } => Some(result),
            _ => None,
        })
        .collect();
    assert_eq!(starts, 1);
    assert_eq!(ends.len(), 1);
    assert!(ends[0].is_error && ends[0].call_id == "c-1");
    // The child's stream ended exactly once, aborted, before the parent answered its call.
    let child_ends: Vec<_> = child.iter().filter(|e| e.kind() == "agent_end").collect();
    assert_eq!(child_ends.len(), 1);
    assert!(matches!(
        child_ends[0],
        AgentEvent::AgentEnd {
            stop: RunStop::Aborted,
            ..
        }
    ));
    assert_lists_completed_messages(&child);
    let call_end = events
        .iter()
        .position(|e| matches!(e, AgentEvent::ToolExecutionEnd { call, .. } if call.id == "p-1"))
        .unwrap();
    assert!(events.iter().rposition(|e| e.kind() == "child").unwrap() < call_end);
}

/// The closing `AgentEnd` of an aborted child (the last of `child`, its unwrapped events) lists
/// every message the child completed — its prompt and its reply — in order.
fn assert_lists_completed_messages(child: &[AgentEvent]) {
    let completed: Vec<_> = child
        .iter()
        .filter_map(AgentEvent::completed_message)
        .collect();
    assert_eq!(completed.len(), 2, "{completed:?}");
    let Some(AgentEvent::AgentEnd { messages, .. }) = child.last() else {
        panic!("the child's stream does not end with its AgentEnd: {child:?}")
    };
    assert_eq!(messages.iter().collect::<Vec<_>>(), completed);
}

/// Through the parent's event stream (and a listener beside it), an aborted child's events are
/// the same as for a listener alone: one aborted `AgentEnd` that lists what the child completed.
#[tokio::test(start_paused = true)]
async fn an_aborted_child_seen_through_the_parents_stream_closes_with_its_completed_messages() {
    let rec = Recorder::default();
    let parent = parent_of_aborting_child(None).with_emit(rec.callback());
    let (streamed, out) = run_streamed(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Aborted);
    assert_eq!(streamed, rec.events());
    let child = child_events(&streamed, "p-1");
    let ends: Vec<_> = child.iter().filter_map(AgentEvent::run_stop).collect();
    assert_eq!(ends, [&RunStop::Aborted], "one AgentEnd, aborted");
    assert_lists_completed_messages(&child);
}

/// With nobody listening to the parent, the child builds no tagged events, yet an aborted
/// child's tokens still reach the parent and the child's own listener still sees its stream
/// closed exactly once.
#[tokio::test(start_paused = true)]
async fn an_aborted_child_of_an_unobserved_parent_rolls_up_usage_and_closes_its_own_stream() {
    let own = Recorder::default();
    let parent = parent_of_aborting_child(Some(&own));
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Aborted);
    assert_eq!(out.usage.input_tokens, 71);
    assert_eq!(out.usage.output_tokens, 8);

    let events = own.events();
    assert!(events.iter().all(|e| e.kind() != "child"), "untagged");
    let ends: Vec<_> = events.iter().filter_map(AgentEvent::run_stop).collect();
    assert_eq!(ends, [&RunStop::Aborted], "one AgentEnd, aborted");
    assert_eq!(events.last().unwrap().kind(), "agent_end");
    let results: Vec<_> = events.iter().filter_map(AgentEvent::tool_end).collect();
    assert_eq!(results.len(), 1);
    assert!(results[0].1.is_error && results[0].0.id == "c-1");
    // The closing `AgentEnd` lists what the child completed: its prompt and its reply.
    let Some(AgentEvent::AgentEnd { messages, .. }) = events.last() else {
        panic!("no AgentEnd")
    };
    assert_eq!(messages.len(), 2, "{messages:?}");
}

/// A child run somewhere else (a durable invocation, another process) reports its usage with
/// `add_child_usage` from the tool handler that ran it: the parent's totals and limits see it.
#[tokio::test(start_paused = true)]
async fn usage_added_by_a_tool_counts_in_the_runs_totals_and_limits() {
    let remote = ToolSpec::<Deps>::builder("remote", "Runs a task elsewhere.")
        .handler(|_ctx: ToolContext<Deps>, _args: Value| async move {
            agentloop::agent::add_child_usage(&usage(300, 30), 2);
            "done elsewhere"
        })
        .build()
        .unwrap();
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("p-1", "remote", json!({}))
            .usage(usage(1, 1)),
        ScriptedTurn::text("never"),
    ]));
    let parent = agent_with(
        limited(UsageLimits {
            max_requests: Some(3),
            ..UsageLimits::default()
        }),
        parent_model.clone(),
        vec![remote],
    );
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.usage.input_tokens, 301);
    assert_eq!(out.usage.output_tokens, 31);
    assert_usage_limit(&out.stop, 3.0);
    assert_eq!(parent_model.remaining(), 1);
    // Outside a run it does nothing.
    agentloop::agent::add_child_usage(&usage(1, 1), 1);
}

#[tokio::test(start_paused = true)]
async fn child_usage_rolls_up_and_counts_against_the_parents_limits() {
    let child = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new()
                .tool_call("c-1", "upper", json!({"text": "a"}))
                .usage(usage(100, 10)),
            ScriptedTurn::text("A").usage(usage(200, 20)),
        ])),
        vec![upper_tool()],
    );
    let parent_model = Arc::new(ScriptedModel::new([
        call_helper("p-1").usage(usage(1, 1)),
        ScriptedTurn::text("done").usage(usage(2, 2)),
    ]));
    let parent = agent(parent_model, as_helper(child));
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(out.usage.input_tokens, 1 + 100 + 200 + 2);
    assert_eq!(out.usage.output_tokens, 1 + 10 + 20 + 2);

    // The parent's token ceiling sees the child's tokens: 1 + 300 input tokens stop it before
    // its second model call, which its own usage (1) would never have done.
    let child = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::text("A").usage(usage(300, 1))
        ])),
        vec![],
    );
    let (out, parent_model) = run_limited_parent(
        UsageLimits {
            max_input_tokens: Some(100),
            ..UsageLimits::default()
        },
        call_helper("p-1").usage(usage(1, 1)),
        child,
    )
    .await;
    assert_usage_limit(&out.stop, 301.0);
    assert_eq!(parent_model.remaining(), 1);

    // Requests: the child's model call counts against the parent's request ceiling.
    let child = agent(
        Arc::new(ScriptedModel::new([ScriptedTurn::text("A")])),
        vec![],
    );
    let (out, _) = run_limited_parent(
        UsageLimits {
            max_requests: Some(2),
            ..UsageLimits::default()
        },
        call_helper("p-1"),
        child,
    )
    .await;
    assert_usage_limit(&out.stop, 2.0);
}

/// A grandchild's tokens reach the top-level run once (not once per level), without any
/// listener; the middle agent's own run counts them too.
#[tokio::test(start_paused = true)]
async fn a_grandchilds_usage_counts_once_in_every_ancestor() {
    let leaf = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::text("leaf answer").usage(usage(1000, 100))
        ])),
        vec![],
    );
    let leaf_tool = SubAgent::new(leaf, "leaf", "Leaf.")
        .max_depth(2)
        .into_tool()
        .unwrap();
    let middle_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("m-1", "leaf", json!({"prompt": "deeper"}))
            .usage(usage(10, 1)),
        ScriptedTurn::text("middle answer").usage(usage(20, 2)),
    ]));
    let middle = agent(middle_model, vec![leaf_tool]);
    let middle_tool = SubAgent::new(middle, "middle", "Middle.")
        .max_depth(2)
        .into_tool()
        .unwrap();
    let parent = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new()
                .tool_call("p-1", "middle", json!({"prompt": "go"}))
                .usage(usage(1, 0)),
            ScriptedTurn::text("done").usage(usage(2, 0)),
        ])),
        vec![middle_tool],
    );
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(out.usage.input_tokens, 1 + 10 + 1000 + 20 + 2);
    assert_eq!(out.usage.output_tokens, 1 + 100 + 2);
}

/// A parent whose child (`middle`) has a grandchild tool (`leaf`); `limits` are the max depths
/// of `middle` and `leaf`.
async fn nested_run(middle_depth: u32, leaf_depth: u32) -> (Vec<AgentEvent>, Vec<Message>) {
    let leaf = agent(
        Arc::new(ScriptedModel::new([ScriptedTurn::text("leaf answer")])),
        vec![],
    );
    let leaf_tool = SubAgent::new(leaf, "leaf", "Leaf.")
        .max_depth(leaf_depth)
        .into_tool()
        .unwrap();
    let middle = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("m-1", "leaf", json!({"prompt": "deeper"})),
            ScriptedTurn::text("middle answer"),
        ])),
        vec![leaf_tool],
    );
    let middle_tool = SubAgent::new(middle, "middle", "Middle.")
        .max_depth(middle_depth)
        .into_tool()
        .unwrap();
    let rec = Recorder::default();
    let parent = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("p-1", "middle", json!({"prompt": "go"})),
            ScriptedTurn::text("done"),
        ])),
        vec![middle_tool],
    )
    .with_emit(rec.callback());
    let out = run_prompt(&parent, "x").await;
    (rec.events(), out.new_messages().to_vec())
}

/// The grandchild's result as the middle agent saw it (through the doubly tagged events).
fn leaf_result(events: &[AgentEvent]) -> agentloop::transcript::ToolResultPart {
    child_events(events, "p-1")
        .iter()
        .find_map(|e| match e {
            AgentEvent::ToolExecutionEnd { call, result, .. } if call.id == "m-1" => {
                Some(result.clone())
            }
            _ => None,
        })
        .expect("the middle agent answered its leaf call")
}

#[tokio::test(start_paused = true)]
async fn a_child_cannot_spawn_children_by_default() {
    let (events, messages) = nested_run(1, 1).await;
    let leaf = leaf_result(&events);
    assert!(leaf.is_error);
    assert!(leaf.content.contains("depth 2"), "{}", leaf.content);
    // The middle agent still answered the parent.
    assert_eq!(tool_result(&messages, "p-1").content, "middle answer");
    // No grandchild ran: nothing is wrapped twice.
    assert!(
        !child_events(&events, "p-1")
            .iter()
            .any(|e| e.kind() == "child")
    );

    // The middle's limit caps the leaf's: the leaf allowing depth 2 is not enough.
    let (events, _) = nested_run(1, 2).await;
    assert!(leaf_result(&events).is_error);
}

#[tokio::test(start_paused = true)]
async fn grandchildren_run_when_every_level_allows_them_and_their_events_carry_the_path() {
    let (events, messages) = nested_run(2, 2).await;
    let leaf = leaf_result(&events);
    assert!(!leaf.is_error, "{}", leaf.content);
    assert_eq!(leaf.content, "leaf answer");
    assert_eq!(tool_result(&messages, "p-1").content, "middle answer");
    // A grandchild's event: Child(p-1, middle) wrapping Child(m-1, leaf) wrapping the event.
    let nested = events.iter().find_map(|e| match e {
        AgentEvent::Child {
            parent_call_id,
            agent,
            event,
        } if &**parent_call_id == "p-1" && &**agent == "middle" => match &**event {
            AgentEvent::Child {
                parent_call_id,
                agent,
                event,
            } if &**parent_call_id == "m-1" && &**agent == "leaf" => Some((**event).clone()),
            _ => None,
        },
        _ => None,
    });
    assert!(matches!(nested, Some(AgentEvent::AgentStart)), "{nested:?}");
}

#[tokio::test(start_paused = true)]
async fn several_children_in_one_reply_run_in_parallel() {
    // Each child's tool waits at a barrier for two: it opens only when both children are in
    // their tool at the same time, which sequential children never are.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let child = |name: &str| {
        let barrier = barrier.clone();
        let meet = ToolSpec::<Deps>::builder("meet", "Meets the other child.")
            .handler(move |_ctx: ToolContext<Deps>, _args: Value| {
                let barrier = barrier.clone();
                async move {
                    barrier.wait().await;
                    "met"
                }
            })
            .build()
            .unwrap();
        let model = Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("c-1", "meet", json!({})),
            ScriptedTurn::text(format!("{name} met")),
        ]));
        agent(model, vec![meet])
            .into_tool(name, "A child.")
            .unwrap()
    };
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("p-1", "left", json!({"prompt": "meet"}))
            .tool_call("p-2", "right", json!({"prompt": "meet"})),
        ScriptedTurn::text("both met"),
    ]));
    let parent = agent(parent_model, vec![child("left"), child("right")]);
    // With the paused clock, a deadlock (children run one after the other) fails at once.
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(tool_result(out.new_messages(), "p-1").content, "left met");
    assert_eq!(tool_result(out.new_messages(), "p-2").content, "right met");
    assert!(
        out.new_messages()
            .iter()
            .any(|m| m.role == Role::Assistant && m.text() == "both met")
    );
}

#[tokio::test(start_paused = true)]
async fn a_typed_child_answers_with_its_validated_output() {
    #[derive(serde::Deserialize, schemars::JsonSchema)]
    #[allow(dead_code)]
    struct Verdict {
        ok: bool,
    }
    let child = agent(
        Arc::new(ScriptedModel::new([
            // An invalid output first: the child repairs it before answering.
            ScriptedTurn::new().tool_call("f-1", "final_result", json!({"ok": "yes"})),
            ScriptedTurn::new().tool_call("f-2", "final_result", json!({"ok": true})),
        ])),
        vec![],
    );
    let tool = SubAgent::new(child, "judge", "Judges.")
        .output(&agentloop::agent::output::Output::<Verdict>::of())
        .unwrap()
        .into_tool()
        .unwrap();
    let parent = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("p-1", "judge", json!({"prompt": "judge it"})),
            ScriptedTurn::text("done"),
        ])),
        vec![tool],
    );
    let out = run_prompt(&parent, "x").await;
    let result = tool_result(out.new_messages(), "p-1");
    assert!(!result.is_error, "{}", result.content);
    let value: Value = serde_json::from_str(&result.content).unwrap();
    assert_eq!(value, json!({"ok": true}));
}

#[tokio::test(start_paused = true)]
async fn the_child_keeps_its_own_turn_limit_apart_from_the_parents() {
    // The child may take 3 turns although the parent allows itself only 2.
    let child_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("c-1", "upper", json!({"text": "a"})),
        ScriptedTurn::new().tool_call("c-2", "upper", json!({"text": "b"})),
        ScriptedTurn::text("AB"),
    ]));
    let child = agent_with(max_turns(3), child_model.clone(), vec![upper_tool()]);
    let parent = agent_with(
        max_turns(2),
        Arc::new(ScriptedModel::new([
            call_helper("p-1"),
            ScriptedTurn::text("done"),
        ])),
        as_helper(child),
    );
    let out = run_prompt(&parent, "x").await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(out.turns, 2);
    assert_eq!(tool_result(out.new_messages(), "p-1").content, "AB");
    assert_eq!(child_model.remaining(), 0);
}

/// A parent recorded in session `parent_id` of `store` whose model calls `researcher` with
/// call `p-1`, then answers; the child (`child_model`) is recorded in the same store.
fn recorded_parent(
    store: &Arc<agentloop::session::SqliteStore>,
    parent_id: &str,
    child_model: Arc<ScriptedModel>,
) -> agentloop::agent::AgentLoop<Deps> {
    use agentloop::session::{SessionSettings, SessionStore};
    let child = agent(child_model, vec![upper_tool()]);
    let store_dyn: Arc<dyn SessionStore> = store.clone();
    let tool = SubAgent::new(child, "researcher", "Answers questions.")
        .record_in(
            store_dyn.clone(),
            SessionSettings::new().model("child-model"),
        )
        .into_tool()
        .unwrap();
    let parent_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("p-1", "researcher", json!({"prompt": "Capital of France?"})),
        ScriptedTurn::text("Done."),
    ]));
    agent(parent_model, vec![tool])
        .with_session(store_dyn, parent_id)
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_recorded_childs_run_is_a_session_linked_to_its_parent_and_call() {
    use agentloop::session::{ParentLink, SessionFilter, SessionStore, SqliteStore};
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let child_model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("c-1", "upper", json!({"text": "paris"})),
        ScriptedTurn::text("The capital is PARIS."),
    ]));
    let parent = recorded_parent(&store, "parent", child_model);
    let out = within(parent.run_in_session(vec![Message::user("Ask.")]))
        .await
        .unwrap();
    assert_eq!(
        tool_result(out.new_messages(), "p-1").content,
        "The capital is PARIS."
    );
    let children = store.children("parent").unwrap();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert_eq!(
        child.parent,
        Some(ParentLink::new("parent", "p-1", "researcher"))
    );
    assert_eq!(child.settings.model.as_deref(), Some("child-model"));
    let roles: Vec<Role> = store
        .load_raw(&child.id)
        .unwrap()
        .iter()
        .map(|m| m.role)
        .collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::ToolResult,
            Role::Assistant
        ]
    );
    // The parent's own transcript holds only its messages; listing keeps the two apart.
    assert_eq!(store.info("parent").unwrap().message_count, 4);
    let top = store
        .list_where(&SessionFilter::new().top_level(true))
        .unwrap();
    assert_eq!(top.len(), 1);
    assert_eq!(top[0].id, "parent");
}

#[tokio::test(start_paused = true)]
async fn the_same_call_run_again_continues_its_interrupted_child_session() {
    use agentloop::session::{NewSession, ParentLink, SessionStore, SqliteStore};
    use agentloop::transcript::{Part, StopReason, ToolCallPart};
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    // What a process killed in the middle of the child left: the child asked for a tool, and
    // the process died before its result.
    let asked = Message::assistant(
        vec![Part::ToolCall(ToolCallPart::new(
            "c-1",
            "upper",
            json!({"text": "x"}),
        ))],
        StopReason::ToolUse,
    );
    store
        .create_with(
            NewSession::new()
                .id("child-1")
                .parent(ParentLink::new("parent", "p-1", "researcher")),
            &[Message::user("Capital of France?"), asked],
        )
        .unwrap();
    store.create(NewSession::new().id("parent")).unwrap();
    let child_model = Arc::new(ScriptedModel::new([ScriptedTurn::text(
        "Recovered: PARIS.",
    )]));
    let parent = recorded_parent(&store, "parent", child_model.clone());
    let out = within(parent.run_in_session(vec![Message::user("Ask.")]))
        .await
        .unwrap();
    assert_eq!(
        tool_result(out.new_messages(), "p-1").content,
        "Recovered: PARIS."
    );
    // No second child session: the stored one went on, from its repaired context.
    assert_eq!(store.children("parent").unwrap().len(), 1);
    let request = &child_model.requests()[0];
    let sent = serde_json::to_string(&request.messages).unwrap();
    assert_eq!(sent.matches("Capital of France?").count(), 1, "{sent}");
    assert!(
        sent.contains("was interrupted before it finished"),
        "{sent}"
    );
    let stored = store.load("child-1").unwrap();
    assert_eq!(stored.last().unwrap().text(), "Recovered: PARIS.");

    // Run once more: the finished child answers with its stored answer, without a model call.
    let again_model = Arc::new(ScriptedModel::new([]));
    let parent = recorded_parent(&store, "parent", again_model.clone());
    let out = within(parent.run_in_session(vec![Message::user("Again.")]))
        .await
        .unwrap();
    assert_eq!(
        tool_result(out.new_messages(), "p-1").content,
        "Recovered: PARIS."
    );
    assert!(again_model.requests().is_empty());
}
