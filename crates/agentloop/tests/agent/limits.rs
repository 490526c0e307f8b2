//! Limits and failures: max_turns, repeat_tool_call_limit, max_retries, length-truncated tool
//! calls, model errors (nothing completed is lost), broken streams, malformed arguments and
//! custom messages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentloop::agent::{AgentError, AgentEvent, AgentLoopConfig, RunStop, completed_messages};
use agentloop::model::{ModelError, ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, ToolContext, ToolError, ToolSpec};
use agentloop::transcript::{Message, Part, Role, StopReason};
use common::*;
use serde_json::{Value, json};

fn failing_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("fail", "Always fails.")
        .handler(|_c: ToolContext<Deps>, _a: Value| async move {
            Err::<String, _>(ToolError::new("nope"))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn max_turns_stops_after_that_many_model_calls() {
    let model = Arc::new(ScriptedModel::new((0..5).map(|i| {
        ScriptedTurn::new().tool_call(format!("c{i}"), "echo", json!({"text": "again"}))
    })));
    let config = AgentLoopConfig {
        max_turns: Some(2),
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, model.clone(), vec![echo_tool()]);
    let out = run_prompt(&agent, "loop").await;
    assert_eq!(out.stop, RunStop::MaxTurns { limit: 2 });
    assert_eq!(out.turns, 2);
    assert_eq!(model.requests().len(), 2);
    // Both turns' calls have their results.
    let results = out
        .new_messages()
        .iter()
        .filter(|m| m.role == Role::ToolResult)
        .count();
    assert_eq!(results, 2);
}

#[tokio::test]
async fn max_turns_zero_is_a_configuration_error() {
    let config = AgentLoopConfig {
        max_turns: Some(0),
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, Arc::new(ScriptedModel::new([])), vec![]);
    let err = within(agent.run(vec![Message::user("x")], vec![]))
        .await
        .unwrap_err();
    assert!(matches!(err, AgentError::Config(_)));
}

#[tokio::test]
async fn repeated_identical_failing_batches_stop_the_run() {
    let model = Arc::new(ScriptedModel::new((0..6).map(|i| {
        ScriptedTurn::new().tool_call(format!("c{i}"), "fail", json!({"path": "same"}))
    })));
    let agent = agent(model.clone(), vec![failing_tool()]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::RepeatedToolFailures { turns: 3 });
    assert_eq!(model.requests().len(), 3);
}

#[tokio::test]
async fn changing_arguments_do_not_count_as_repeats() {
    let mut turns: Vec<_> = (0..5)
        .map(|i| ScriptedTurn::new().tool_call(format!("c{i}"), "fail", json!({"attempt": i})))
        .collect();
    turns.push(ScriptedTurn::text("gave up politely"));
    let model = Arc::new(ScriptedModel::new(turns));
    let agent = agent(model.clone(), vec![failing_tool()]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    model.assert_consumed();
}

#[tokio::test]
async fn a_success_resets_the_repeat_count() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("1", "fail", json!({})),
        ScriptedTurn::new().tool_call("2", "fail", json!({})),
        ScriptedTurn::new().tool_call("3", "echo", json!({"text": "ok"})),
        ScriptedTurn::new().tool_call("4", "fail", json!({})),
        ScriptedTurn::new().tool_call("5", "fail", json!({})),
        ScriptedTurn::text("end"),
    ]));
    let agent = agent(model.clone(), vec![failing_tool(), echo_tool()]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
}

#[tokio::test]
async fn repeat_limit_none_disables_the_check() {
    let mut turns: Vec<_> = (0..4)
        .map(|i| ScriptedTurn::new().tool_call(format!("c{i}"), "fail", json!({})))
        .collect();
    turns.push(ScriptedTurn::text("end"));
    let model = Arc::new(ScriptedModel::new(turns));
    let config = AgentLoopConfig {
        repeat_tool_call_limit: None,
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, model.clone(), vec![failing_tool()]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
}

#[tokio::test]
async fn max_retries_reruns_a_retryable_failure_before_the_model_sees_it() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a = attempts.clone();
    let flaky = ToolSpec::<Deps>::builder("flaky", "Fails once.")
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let n = a.fetch_add(1, Ordering::SeqCst);
            async move {
                if n == 0 {
                    Err(ToolError::retryable("connection reset"))
                } else {
                    Ok("recovered".to_owned())
                }
            }
        })
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("r", "flaky", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let config = AgentLoopConfig {
        max_retries: 2,
        tool_retry_backoff: Duration::from_millis(1),
        ..AgentLoopConfig::default()
    };
    let agent = agent_with(config, model, vec![flaky]);
    let out = run_prompt(&agent, "go").await;
    let r = out.new_messages()[2].tool_result_part().unwrap();
    assert_eq!(r.content, "recovered");
    assert!(!r.is_error);
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn length_truncated_tool_calls_are_not_run_and_ask_to_reissue() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let counted = ToolSpec::<Deps>::builder("write", "Writes.")
        .blocking_handler(move |_c: ToolContext<Deps>, _a: Value| {
            r.fetch_add(1, Ordering::SeqCst);
            "written"
        })
        .build()
        .unwrap();
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call_raw("t1", "write", "{\"content\": \"very lo")
            .stop_reason(StopReason::Length),
        ScriptedTurn::new().tool_call("t2", "write", json!({"content": "short"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = agent(model, vec![counted]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.stop, RunStop::Done);
    let first = out.new_messages()[2].tool_result_part().unwrap();
    assert!(first.is_error);
    assert!(
        first.content.contains("cut off by the output-token limit")
            && first.content.contains("Re-issue"),
        "{}",
        first.content
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the re-issued call ran");
}

#[tokio::test]
async fn model_error_in_turn_three_keeps_turns_one_and_two() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("a", "echo", json!({"text": "1"})),
        ScriptedTurn::new().tool_call("b", "echo", json!({"text": "2"})),
        ScriptedTurn::text("partial answer")
            .chunked(4)
            .fail_after(2, "overloaded"),
    ]));
    let rec = Recorder::default();
    let agent = agent(model, vec![echo_tool()]).with_emit(rec.callback());
    let err = within(agent.run(vec![Message::user("go")], vec![]))
        .await
        .unwrap_err();
    let completed = completed_messages(&err);
    let roles: Vec<_> = completed.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::User,
            Role::Assistant,
            Role::ToolResult,
            Role::Assistant,
            Role::ToolResult
        ]
    );
    match &err {
        AgentError::Model { error, partial, .. } => {
            assert_eq!(error, &ModelError::Script("overloaded".into()));
            assert_eq!(partial.text(), "partial ");
            assert_eq!(partial.stop_reason, Some(StopReason::Error));
        }
        other => panic!("{other:?}"),
    }
    let names = rec.names();
    assert_eq!(
        &names[names.len() - 3..],
        ["message_end(assistant)", "turn_end[]", "agent_end"]
    );
    match rec.events().last() {
        Some(AgentEvent::AgentEnd {
            stop: RunStop::ModelError { message },
            messages,
        }) => {
            assert!(message.contains("overloaded"));
            assert_eq!(messages.len(), 6, "completed plus the errored partial");
        }
        other => panic!("{other:?}"),
    }
    // Unrelated errors carry nothing.
    assert!(completed_messages(&std::io::Error::other("x")).is_empty());
}

#[tokio::test]
async fn a_stream_that_ends_without_its_terminal_event_is_an_error() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("cut")
        .chunked(1)
        .end_without_terminal_after(2)]));
    let agent = agent(model, vec![]);
    let err = within(agent.run(vec![Message::user("go")], vec![]))
        .await
        .unwrap_err();
    match err {
        AgentError::Model {
            error,
            partial,
            completed,
        } => {
            assert!(
                matches!(error, ModelError::Stream { ref message, .. } if message.contains("without a terminal event"))
            );
            assert_eq!(partial.text(), "cu");
            assert_eq!(completed.len(), 1);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn malformed_arguments_from_the_model_get_an_error_result_and_the_loop_goes_on() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call_raw("m", "echo", "{\"text\": oops}"),
        ScriptedTurn::new().tool_call("n", "echo", json!({"text": "fixed"})),
        ScriptedTurn::text("done"),
    ]));
    let agent = agent(model, vec![echo_tool()]);
    let out = run_prompt(&agent, "go").await;
    let bad = out.new_messages()[2].tool_result_part().unwrap();
    assert!(bad.is_error);
    assert!(
        bad.content
            .starts_with("Malformed arguments for tool \"echo\"")
    );
    assert!(
        bad.content.contains("{\"text\": oops}"),
        "the model sees what it sent"
    );
    assert_eq!(
        out.new_messages()[4].tool_result_part().unwrap().content,
        "fixed"
    );
}

#[tokio::test]
async fn custom_messages_stay_in_the_transcript_and_reach_the_model_as_user_messages() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("noted")]));
    let agent = agent(model.clone(), vec![]);
    let note = Message::custom("reminder", vec![Part::text("remember the milk")]);
    let out = within(agent.run(vec![Message::user("hi"), note], vec![]))
        .await
        .unwrap();
    assert_eq!(out.new_messages()[1].role, Role::Custom);
    let sent = &model.requests()[0].messages;
    assert_eq!(sent[1].role, Role::User);
    assert_eq!(sent[1].text(), "remember the milk");
}

#[tokio::test]
async fn usage_is_summed_over_the_run() {
    let usage = |i, o| agentloop::transcript::Usage {
        input_tokens: i,
        output_tokens: o,
        ..Default::default()
    };
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("a", "echo", json!({"text": "1"}))
            .usage(usage(10, 2)),
        ScriptedTurn::text("done").usage(usage(15, 3)),
    ]));
    let agent = agent(model, vec![echo_tool()]);
    let out = run_prompt(&agent, "go").await;
    assert_eq!(out.usage.input_tokens, 25);
    assert_eq!(out.usage.output_tokens, 5);
    assert_eq!(out.turns, 2);
}
