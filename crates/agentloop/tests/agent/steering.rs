//! Steering and follow-up queues: when queued messages are delivered, how many at a time, and that
//! they survive a stop or an abort.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentLoopConfig, MessageQueue, QueueMode, RunStop};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role};
use common::*;
use serde_json::{Value, json};

/// A tool that pushes `texts` onto `queue` when it runs, then sleeps `ms`.
fn steering_tool(queue: MessageQueue, texts: Vec<&'static str>) -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("steer_me", "Queues steering messages while running.")
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let queue = queue.clone();
            let texts = texts.clone();
            async move {
                for t in texts {
                    queue.push(Message::user(t));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                "steered"
            }
        })
        .build()
        .unwrap()
}

fn texts(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m.role {
            Role::ToolResult => format!(
                "result:{}",
                m.tool_result_part()
                    .map(|r| r.call_id.as_str())
                    .unwrap_or("")
            ),
            Role::Assistant => "assistant".to_owned(),
            _ => m.text(),
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn steering_arriving_mid_batch_is_delivered_after_both_results() {
    let queue = MessageQueue::new();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("A", "steer_me", json!({}))
            .tool_call("B", "sleep", json!({"ms": 150})),
        ScriptedTurn::text("adjusted"),
    ]));
    let rec = Recorder::default();
    let agent = agent(
        model.clone(),
        vec![
            steering_tool(queue.clone(), vec!["change of plan"]),
            sleep_tool("sleep"),
        ],
    )
    .with_steering_queue(queue.clone())
    .with_emit(rec.callback());
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    // Both calls ran (the slow sibling was not skipped) and the steering message comes after them.
    assert_eq!(
        texts(&model.requests()[1].messages),
        ["go", "assistant", "result:A", "result:B", "change of plan"]
    );
    let names = rec.names();
    let at = names.iter().position(|n| n == "turn_end[A,B]").unwrap();
    assert_eq!(
        &names[at..at + 4],
        [
            "turn_end[A,B]",
            "turn_start",
            "message_start(user)",
            "message_end(user)"
        ]
    );
    assert!(queue.is_empty());
}

#[tokio::test]
async fn follow_ups_wait_until_the_agent_would_stop() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::text("first answer"),
        ScriptedTurn::text("answer to follow-up"),
    ]));
    let agent = agent(model.clone(), vec![echo_tool()]);
    agent.follow_up(Message::user("and another thing"));
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert!(
        !texts(&requests[1].messages).contains(&"and another thing".to_owned()),
        "a follow-up must not interrupt a turn with tool calls"
    );
    assert_eq!(
        texts(&requests[2].messages),
        [
            "go",
            "assistant",
            "result:A",
            "assistant",
            "and another thing"
        ]
    );
    assert_eq!(out.final_text(), "answer to follow-up");
    model.assert_consumed();
}

#[tokio::test(start_paused = true)]
async fn one_at_a_time_delivers_a_single_message_per_turn() {
    let queue = MessageQueue::new();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "steer_me", json!({})),
        ScriptedTurn::text("saw one"),
        ScriptedTurn::text("saw two"),
    ]));
    let agent = agent(
        model.clone(),
        vec![steering_tool(queue.clone(), vec!["s1", "s2"])],
    )
    .with_steering_queue(queue);
    let out = run_prompt(&agent, "go").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[1].messages.last().map(Message::text),
        Some("s1".into())
    );
    assert_eq!(
        requests[2].messages.last().map(Message::text),
        Some("s2".into())
    );
    assert_eq!(out.final_text(), "saw two");
}

#[tokio::test(start_paused = true)]
async fn all_mode_delivers_every_queued_message_at_once() {
    let queue = MessageQueue::new();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "steer_me", json!({})),
        ScriptedTurn::text("saw both"),
    ]));
    let config = AgentLoopConfig {
        steering_mode: QueueMode::All,
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(
        config,
        model.clone(),
        vec![steering_tool(queue.clone(), vec!["s1", "s2"])],
    )
    .with_steering_queue(queue);
    run_prompt(&agent, "go").await;
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    let tail: Vec<_> = requests[1].messages[3..]
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(tail, ["s1", "s2"]);
    model.assert_consumed();
}

#[tokio::test]
async fn follow_up_all_mode() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("first"),
        ScriptedTurn::text("both answered"),
    ]));
    let config = AgentLoopConfig {
        follow_up_mode: QueueMode::All,
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, model.clone(), vec![]);
    agent.follow_up(Message::user("f1"));
    agent.follow_up(Message::user("f2"));
    run_prompt(&agent, "go").await;
    let last = &model.requests()[1].messages;
    let tail: Vec<_> = last[2..].iter().map(Message::text).collect();
    assert_eq!(tail, ["f1", "f2"]);
}

#[tokio::test(start_paused = true)]
async fn queued_messages_survive_an_abort_for_the_next_run() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("never finishes")
            .chunked(1)
            .hang_after(3),
        ScriptedTurn::text("answered the steer"),
        ScriptedTurn::text("answered the follow-up"),
    ]));
    let agent = agent(model.clone(), vec![]);
    let signal = agent.abort_signal().clone();
    let (steer, follow) = (
        agent.steering_queue().clone(),
        agent.follow_up_queue().clone(),
    );
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Queued while the model is streaming, then the run is aborted.
        steer.push(Message::user("pending steer"));
        follow.push(Message::user("pending follow-up"));
        signal.abort();
    });
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Aborted);
    assert_eq!(agent.follow_up_queue().len(), 1);
    assert_eq!(agent.steering_queue().len(), 1);

    // The next run delivers them: steering before its first model call, the follow-up when the
    // agent would otherwise stop.
    agent.abort_signal().reset();
    let mut context = out.context.clone();
    context.push(Message::user("resume"));
    let out = within(agent.run_continue(context)).await.unwrap();
    assert_eq!(out.stop, RunStop::Done);
    let requests = model.requests();
    assert_eq!(
        requests[1].messages.last().map(Message::text),
        Some("pending steer".into())
    );
    assert_eq!(
        requests[2].messages.last().map(Message::text),
        Some("pending follow-up".into())
    );
    assert_eq!(out.final_text(), "answered the follow-up");
    assert!(agent.steering_queue().is_empty() && agent.follow_up_queue().is_empty());
    model.assert_consumed();
}
