//! The library API a newcomer meets: listeners that add up, a session attached in one call and
//! continued by another agent, an abort that ends one run only, blocked calls reported without
//! a start, a declared approval requirement with typed arguments, renamed knobs, the usage
//! limit's whole-number amounts, and keyword settings that all read and print alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::{Arc, Mutex};

use agentloop::agent::{
    AgentEvent, AgentLoop, AgentLoopConfig, Extension, RunStop, ToolCallDecision, UsageLimit,
    UsageLimits,
};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::session::{SessionStore, SqliteStore};
use agentloop::tooling::{Approval, ApprovalRequest, Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role};
use common::*;
use serde::Deserialize;
use serde_json::json;

fn kinds(seen: &Arc<Mutex<Vec<String>>>) -> Vec<String> {
    seen.lock().unwrap().clone()
}

#[tokio::test]
async fn every_listener_gets_every_event_in_registration_order() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (first, second) = (seen.clone(), seen.clone());
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let agent = agent(model, vec![])
        .with_emit(move |e| first.lock().unwrap().push(format!("1:{}", e.kind())))
        .with_emit(move |e| second.lock().unwrap().push(format!("2:{}", e.kind())));
    run_prompt(&agent, "hello").await;
    let seen = kinds(&seen);
    let ones: Vec<_> = seen.iter().filter(|s| s.starts_with("1:")).collect();
    let twos: Vec<_> = seen.iter().filter(|s| s.starts_with("2:")).collect();
    assert!(!ones.is_empty());
    assert_eq!(ones.len(), twos.len(), "{seen:?}");
    // Each event reaches listener 1, then listener 2, before the next event.
    for pair in seen.chunks(2) {
        assert_eq!(pair[0].strip_prefix("1:"), pair[1].strip_prefix("2:"));
    }
    assert_eq!(seen.last().map(String::as_str), Some("2:agent_end"));
}

#[tokio::test]
async fn a_panicking_listener_does_not_starve_the_next_one() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let later = seen.clone();
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("hi")]));
    let agent = agent(model, vec![])
        .with_emit(|_| panic!("listener bug"))
        .with_emit(move |e| later.lock().unwrap().push(e.kind().to_owned()));
    run_prompt(&agent, "hello").await;
    assert_eq!(kinds(&seen).last().map(String::as_str), Some("agent_end"));
}

#[tokio::test]
async fn a_session_attaches_in_one_call_and_another_agent_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let seen = Arc::new(Mutex::new(Vec::new()));
    let listener = seen.clone();
    {
        let store = Arc::new(SqliteStore::open(&path).unwrap());
        let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("Hello!")]));
        // Recorder and a listener of our own, side by side.
        let agent = agent(model, vec![])
            .with_session(store, "support-1")
            .unwrap()
            .with_emit(move |e| listener.lock().unwrap().push(e.kind().to_owned()));
        assert_eq!(agent.session_id(), Some("support-1"));
        within(agent.run_in_session(vec![Message::user("hi")]))
            .await
            .unwrap();
        assert_eq!(agent.session().unwrap().failures(), 0);
    }
    assert!(kinds(&seen).contains(&"agent_end".to_owned()));

    // Later, with a new store handle and agent (as in a second process).
    let store = Arc::new(SqliteStore::open(&path).unwrap());
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("Still here.")]));
    let agent = agent(model.clone(), vec![])
        .with_last_session(store.clone())
        .unwrap();
    assert_eq!(agent.session_id(), Some("support-1"));
    let out = within(agent.run_in_session(vec![Message::user("again")]))
        .await
        .unwrap();
    // The model saw the first exchange, then the new prompt.
    let sent: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(sent, ["hi", "Hello!", "again"]);
    assert_eq!(out.final_text(), "Still here.");
    let stored: Vec<String> = store
        .load("support-1")
        .unwrap()
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(stored, ["hi", "Hello!", "again", "Still here."]);
}

#[tokio::test(start_paused = true)]
async fn an_abort_ends_one_run_and_the_next_starts_clean() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("abcdef").chunked(1).hang_after(2),
        ScriptedTurn::text("fresh"),
    ]));
    let agent = agent(model, vec![]);
    let signal = agent.abort_signal().clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        signal.abort();
    });
    let first = run_prompt(&agent, "one").await;
    assert_eq!(first.stop, RunStop::Aborted);
    assert!(!agent.abort_signal().is_aborted(), "the run consumed it");
    let second = run_prompt(&agent, "two").await;
    assert_eq!(second.stop, RunStop::Done);
    assert_eq!(second.final_text(), "fresh");
}

#[tokio::test]
async fn an_abort_just_before_a_run_starts_ends_that_run_only() {
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ran")]));
    let agent = agent(model.clone(), vec![]);
    agent.abort();
    let first = run_prompt(&agent, "one").await;
    assert_eq!(first.stop, RunStop::Aborted);
    assert_eq!(model.requests().len(), 0);
    let second = run_prompt(&agent, "two").await;
    assert_eq!(second.stop, RunStop::Done);
}

fn end_flags(rec: &Recorder, id: &str) -> (bool, Option<bool>) {
    let events = rec.events();
    let started = events
        .iter()
        .any(|e| matches!(e, AgentEvent::ToolExecutionStart { call } if call.id == id));
    let blocked = events.iter().find_map(|e| {
        e.tool_end()
            .filter(|(c, _, _)| c.id == id)
            .map(|(_, _, b)| b)
    });
    (started, blocked)
}

#[tokio::test]
async fn refused_calls_end_blocked_without_a_start_and_executed_ones_keep_both() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("ok", "echo", json!({"text": "fine"}))
            .tool_call("veto", "echo", json!({"text": "rm -rf"}))
            .tool_call("bad", "echo", json!({"text": 7}))
            .tool_call("ghost", "nope", json!({}))
            .tool_call("denied", "secret", json!({})),
        ScriptedTurn::text("done"),
    ]));
    let secret = ToolSpec::<Deps>::builder("secret", "Never allowed.")
        .blocking_handler(|_c: ToolContext<Deps>, _a: serde_json::Value| "leaked")
        .build()
        .unwrap();
    let deps = Deps::with_approval(|call| match call.tool_name.as_str() {
        "secret" => Approval::deny("no"),
        _ => Approval::Allow,
    });
    let rec = Recorder::default();
    let agent = AgentLoop::with_deps(AgentLoopConfig::default(), model, Arc::new(deps))
        .with_tools([echo_tool(), secret])
        .unwrap()
        .with_extension(Extension::new("policy").on_tool_call(|call| {
            match call.arguments["text"].as_str() {
                Some(t) if t.contains("rm") => ToolCallDecision::Block("no".into()),
                _ => ToolCallDecision::Continue,
            }
        }))
        .with_emit(rec.callback());
    run_prompt(&agent, "go").await;
    assert_eq!(end_flags(&rec, "ok"), (true, Some(false)));
    for id in ["veto", "bad", "ghost", "denied"] {
        assert_eq!(end_flags(&rec, id), (false, Some(true)), "{id}");
    }
    let json = serde_json::to_value(
        rec.events()
            .iter()
            .find(|e| e.tool_end().is_some_and(|(_, _, b)| b))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(json["blocked"], true);
    let ran = serde_json::to_value(
        rec.events()
            .iter()
            .find(|e| e.tool_end().is_some_and(|(_, _, b)| !b))
            .unwrap(),
    )
    .unwrap();
    assert!(ran.get("blocked").is_none(), "{ran}");
}

#[derive(Deserialize)]
struct RefundArgs {
    order: String,
    cents: u64,
}

fn refund_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("refund", "Refund an order.")
        .parameters(json!({
            "type": "object",
            "properties": {"order": {"type": "string"}, "cents": {"type": "integer"}},
            "required": ["order", "cents"]
        }))
        .requires_approval(true)
        .blocking_handler(|_c: ToolContext<Deps>, a: RefundArgs| {
            format!("refunded {} to {}", a.cents, a.order)
        })
        .build()
        .unwrap()
}

fn refund_turns() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("small", "refund", json!({"order": "A-1", "cents": 500}))
            .tool_call("big", "refund", json!({"order": "A-2", "cents": 50_000})),
        ScriptedTurn::text("done"),
    ]))
}

#[tokio::test]
async fn a_tool_that_requires_approval_parks_by_default() {
    assert!(refund_tool().requires_approval());
    let rec = Recorder::default();
    let agent = agent(refund_turns(), vec![refund_tool()]).with_emit(rec.callback());
    let out = run_prompt(&agent, "refund").await;
    let RunStop::AwaitingApproval { pending } = &out.stop else {
        panic!("{:?}", out.stop);
    };
    assert_eq!(pending.len(), 2);
    assert!(
        pending[0].reason.contains("requires approval"),
        "{}",
        pending[0].reason
    );
    // A deferred call never started.
    assert_eq!(end_flags(&rec, "small"), (false, None));
}

#[tokio::test]
async fn the_approver_decides_with_typed_arguments() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    let deps = Deps::with_approver(move |request: ApprovalRequest<'_>| {
        let args: RefundArgs = request.arguments_as().unwrap();
        log.lock()
            .unwrap()
            .push((request.tool_name().to_owned(), request.requires_approval));
        if args.cents > 10_000 {
            Approval::deny("too large")
        } else {
            Approval::Allow
        }
    });
    let agent = AgentLoop::with_deps(AgentLoopConfig::default(), refund_turns(), Arc::new(deps))
        .with_tools([refund_tool()])
        .unwrap();
    let out = run_prompt(&agent, "refund").await;
    assert_eq!(out.stop, RunStop::Done);
    let results: Vec<_> = out
        .new_messages()
        .iter()
        .filter_map(Message::tool_result_part)
        .collect();
    assert_eq!(results[0].content, "refunded 500 to A-1");
    assert!(results[1].is_error && results[1].content.contains("too large"));
    assert_eq!(
        kinds_of(&asked),
        [("refund".to_owned(), true), ("refund".to_owned(), true)]
    );
}

fn kinds_of(v: &Arc<Mutex<Vec<(String, bool)>>>) -> Vec<(String, bool)> {
    v.lock().unwrap().clone()
}

#[tokio::test]
async fn hooks_read_typed_arguments_under_the_tool_name_field() {
    let seen = Arc::new(Mutex::new(None));
    let keep = seen.clone();
    let agent = agent(
        Arc::new(ScriptedModel::new([
            ScriptedTurn::new().tool_call("A", "echo", json!({"text": "typed"})),
            ScriptedTurn::text("done"),
        ])),
        vec![echo_tool()],
    )
    .with_extension(Extension::new("typed").on_tool_call(move |call| {
        #[derive(Deserialize)]
        struct Echo {
            text: String,
        }
        let args: Echo = call.arguments_as().unwrap();
        *keep.lock().unwrap() = Some((call.tool_name.clone(), args.text));
        ToolCallDecision::Continue
    }));
    run_prompt(&agent, "go").await;
    assert_eq!(*seen.lock().unwrap(), Some(("echo".into(), "typed".into())));
}

#[tokio::test]
async fn a_request_limit_reports_whole_numbers() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("A", "echo", json!({"text": "x"})),
        ScriptedTurn::new().tool_call("B", "echo", json!({"text": "y"})),
        ScriptedTurn::text("never"),
    ]));
    let config = AgentLoopConfig {
        usage_limits: UsageLimits {
            max_requests: Some(2),
            ..UsageLimits::default()
        },
        ..AgentLoopConfig::default()
    };
    let out =
        within(agent_with(config, model, vec![echo_tool()]).run(vec![Message::user("go")], vec![]))
            .await
            .unwrap();
    assert_eq!(
        out.stop,
        RunStop::UsageLimit {
            which: UsageLimit::Requests,
            used: 2.0,
            limit: 2.0
        }
    );
    assert_eq!(out.stop.to_string(), "requests limit reached (2 of 2)");
    let json = serde_json::to_string(&out.stop).unwrap();
    assert_eq!(
        json,
        r#"{"reason":"usage_limit","which":"requests","used":2,"limit":2}"#
    );
    let cost = RunStop::UsageLimit {
        which: UsageLimit::CostUsd,
        used: 0.5,
        limit: 0.25,
    };
    assert_eq!(serde_json::to_value(&cost).unwrap()["used"], 0.5);
    assert_eq!(cost.to_string(), "cost_usd limit reached (0.5 of 0.25)");
}

#[tokio::test]
async fn the_per_call_output_cap_is_sent_under_its_new_name_and_the_old_one() {
    for config in [
        AgentLoopConfig {
            max_output_tokens_per_call: Some(123),
            ..AgentLoopConfig::default()
        },
        #[allow(deprecated)]
        AgentLoopConfig {
            max_output_tokens: Some(123),
            ..AgentLoopConfig::default()
        },
    ] {
        let model = Arc::new(ScriptedModel::new([ScriptedTurn::text("ok")]));
        let sent = Arc::new(Mutex::new(None));
        let keep = sent.clone();
        let agent = agent_with(config, model, vec![]).with_extension(
            Extension::new("spy").on_before_provider_request(move |r| {
                *keep.lock().unwrap() = Some(r.max_output_tokens)
            }),
        );
        run_prompt(&agent, "go").await;
        assert_eq!(*sent.lock().unwrap(), Some(Some(123)));
    }
}

#[tokio::test]
async fn text_deltas_read_without_a_nested_pattern() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("streamed reply").chunked(3)
    ]));
    let rec = Recorder::default();
    let agent = agent(model, vec![]).with_emit(rec.callback());
    run_prompt(&agent, "go").await;
    let events = rec.events();
    let text: String = events.iter().filter_map(AgentEvent::text_delta).collect();
    assert_eq!(text, "streamed reply");
    let last = events.last().unwrap();
    assert_eq!(last.run_stop(), Some(&RunStop::Done));
    let assistant = events
        .iter()
        .filter_map(AgentEvent::completed_message)
        .find(|m| m.role == Role::Assistant)
        .unwrap();
    assert_eq!(assistant.text(), "streamed reply");
}

#[tokio::test(start_paused = true)]
async fn an_abort_consumed_by_a_dropped_stream_does_not_reach_the_next_run() {
    use futures::StreamExt;
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::text("abcdef").chunked(1).hang_after(2),
        ScriptedTurn::text("fresh"),
    ]));
    let agent = agent(model, vec![]);
    {
        let mut stream = agent.run_stream(vec![Message::user("one")], vec![]);
        while let Some(event) = within(stream.next()).await {
            if event.text_delta().is_some() {
                break;
            }
        }
        agent.abort();
        // The UI goes away without draining the stream.
    }
    assert!(!agent.abort_signal().is_aborted());
    let next = run_prompt(&agent, "two").await;
    assert_eq!(next.final_text(), "fresh");
}

/// Every keyword setting of the library reads the same way (surrounding space, any case, `_`
/// for `-`, aliases), prints the spelling it reads, and names the accepted words when it does
/// not know one.
#[test]
fn keyword_settings_read_and_print_alike() {
    use agentloop::builtin::{ApprovalPolicy, SandboxMode};
    use agentloop::model::ReasoningLevel;
    use agentloop::output::OutputStrategy;
    use std::fmt::Display;
    use std::str::FromStr;

    fn round_trips<T>(values: &[T])
    where
        T: Copy + Display + FromStr + PartialEq + std::fmt::Debug,
        T::Err: std::fmt::Debug,
    {
        for &value in values {
            let text = value.to_string();
            assert_eq!(text.parse::<T>().unwrap(), value);
            let shouted = format!("  {}\t", text.to_uppercase().replace('-', "_"));
            assert_eq!(shouted.parse::<T>().unwrap(), value, "{shouted:?}");
        }
    }
    round_trips(&[
        ApprovalPolicy::Mutating,
        ApprovalPolicy::Never,
        ApprovalPolicy::Always,
        ApprovalPolicy::Defer,
    ]);
    round_trips(&[
        SandboxMode::ReadOnly,
        SandboxMode::WorkspaceWrite,
        SandboxMode::FullAccess,
    ]);
    round_trips(&[
        ReasoningLevel::Off,
        ReasoningLevel::Minimal,
        ReasoningLevel::Low,
        ReasoningLevel::Medium,
        ReasoningLevel::High,
        ReasoningLevel::Xhigh,
    ]);
    round_trips(&[
        OutputStrategy::Auto,
        OutputStrategy::Native,
        OutputStrategy::Tool,
        OutputStrategy::Prompted,
    ]);

    assert_eq!(" None ".parse(), Ok(ReasoningLevel::Off));
    assert_eq!("prompt".parse(), Ok(OutputStrategy::Prompted));
    assert_eq!("Read_Only".parse(), Ok(SandboxMode::ReadOnly));
    let unknown = "maybe".parse::<ApprovalPolicy>().unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "unknown approval policy `maybe`; use ask, deny, allow or defer"
    );
    let unknown = "extreme".parse::<ReasoningLevel>().unwrap_err();
    assert_eq!(
        unknown.to_string(),
        "unknown reasoning level `extreme`; use off, minimal, low, medium, high or xhigh"
    );
}
