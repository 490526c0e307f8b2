//! The blocking view: tools called from plain functions with no runtime, from inside the blocking
//! context of an existing runtime (private runtime or shared handle), and clean shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use crate::common::{HANG_GUARD, Meeting};

use agentloop::blocking::{BlockingTools, SyncRuntime};
use agentloop::tool;
use agentloop::tooling::{
    Approval, Deps, ExecOptions, Registry, ToolContext, ToolErrorKind, ToolSpec,
};
use agentloop::transcript::ToolCallPart;
use serde_json::{Value, json};

/// Shout the text.
#[tool]
fn shout(text: String) -> String {
    text.to_uppercase()
}

/// Wait, then answer (async: needs the runtime's timer).
#[tool]
async fn wait_then(ms: u64, text: String) -> String {
    tokio::time::sleep(Duration::from_millis(ms)).await;
    text
}

/// Sleep on the blocking pool.
#[tool]
fn sleep_sync(ms: u64) -> String {
    std::thread::sleep(Duration::from_millis(ms));
    "slept".into()
}

/// Spawn a task on the current runtime and await it.
#[tool]
async fn spawn_inside() -> String {
    tokio::spawn(async { "spawned".to_owned() })
        .await
        .unwrap_or_else(|e| e.to_string())
}

fn registry() -> Registry<Deps> {
    Registry::new([
        shout_tool(),
        wait_then_tool(),
        sleep_sync_tool(),
        spawn_inside_tool(),
        ToolSpec::<Deps>::builder("too_slow", "Never finishes in time.")
            .timeout(Duration::from_millis(50))
            .handler(|_ctx: ToolContext<Deps>, _args: Value| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            })
            .build()
            .unwrap(),
    ])
    .unwrap()
}

fn exercise(tools: &BlockingTools<Deps>) {
    assert_eq!(
        tools.call("shout", json!({"text": "hi"})).unwrap().content,
        "HI"
    );
    assert_eq!(
        tools
            .call("wait_then", json!({"ms": 20, "text": "waited"}))
            .unwrap()
            .content,
        "waited"
    );
    assert_eq!(
        tools.call("sleep_sync", json!({"ms": 10})).unwrap().content,
        "slept"
    );
    assert_eq!(
        tools.call("spawn_inside", json!({})).unwrap().content,
        "spawned"
    );
    let err = tools.call("too_slow", json!({})).unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Timeout);
    let err = tools.call("shout", json!({"text": 1})).unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
    let err = tools.call("nope", json!({})).unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::UnknownTool);
}

/// Like `fn main`: no runtime anywhere on this thread.
#[test]
fn from_a_plain_function_without_a_runtime() {
    assert!(tokio::runtime::Handle::try_current().is_err());
    let tools = BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap();
    assert!(tools.runtime().is_private());
    exercise(&tools);

    // A batch runs concurrently and keeps call order: the sync and the async call each wait
    // for the other, so they answer "met" only if both were running at the same time.
    let meeting = Meeting::new(2);
    let tools = BlockingTools::new(meeting_registry(&meeting), Arc::new(Deps::new())).unwrap();
    let calls = [
        ToolCallPart::new("1", "meet_sync", json!({})),
        ToolCallPart::new("2", "meet_async", json!({})),
        ToolCallPart::new("3", "shout", json!({"text": "c"})),
    ];
    let results = tools.run_tools(&calls);
    let contents: Vec<&str> = results.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents, ["met", "met", "C"]);
}

/// `shout` plus a sync and an async tool that both arrive at `meeting`.
fn meeting_registry(meeting: &Meeting) -> Registry<Deps> {
    let (sync_side, async_side) = (meeting.clone(), meeting.clone());
    Registry::new([
        shout_tool(),
        ToolSpec::<Deps>::builder("meet_sync", "Meet on the blocking pool.")
            .blocking_handler(move |_ctx: ToolContext<Deps>, _args: Value| sync_side.arrive())
            .build()
            .unwrap(),
        ToolSpec::<Deps>::builder("meet_async", "Meet from async code.")
            .handler(move |_ctx: ToolContext<Deps>, _args: Value| {
                let meeting = async_side.clone();
                async move { meeting.arrive_async().await }
            })
            .build()
            .unwrap(),
    ])
    .unwrap()
}

#[test]
fn goes_through_the_approval_hook() {
    let deps = Deps::with_approval(|call| {
        if call.tool_name == "shout" {
            Approval::deny("no shouting")
        } else {
            Approval::Allow
        }
    });
    let tools = BlockingTools::new(registry(), Arc::new(deps)).unwrap();
    let err = tools.call("shout", json!({"text": "hi"})).unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Denied);
    assert!(err.message().contains("no shouting"));
}

#[test]
fn exec_options_apply() {
    let tools = BlockingTools::new(registry(), Arc::new(Deps::new()))
        .unwrap()
        .exec_options(ExecOptions {
            default_timeout: Some(Duration::from_millis(30)),
            ..ExecOptions::default()
        });
    let err = tools
        .call("wait_then", json!({"ms": 2000, "text": "x"}))
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Timeout);
}

/// From a `spawn_blocking` closure of an application's multi-thread runtime: both a private
/// runtime and the shared handle work, and dropping the private one inside the closure is fine.
#[test]
fn from_the_blocking_context_of_a_multi_thread_runtime() {
    let app = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = app.handle().clone();
    app.block_on(async move {
        tokio::task::spawn_blocking(move || {
            let private = BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap();
            exercise(&private);
            drop(private);

            let shared = BlockingTools::with_handle(registry(), Arc::new(Deps::new()), handle);
            assert!(!shared.runtime().is_private());
            exercise(&shared);
        })
        .await
        .unwrap();
    });
}

/// The same from a current-thread runtime (the `#[tokio::main(flavor = "current_thread")]`
/// shape): its thread waits in `block_on` while the closure runs on the blocking pool.
#[test]
fn from_the_blocking_context_of_a_current_thread_runtime() {
    let app = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let handle = app.handle().clone();
    app.block_on(async move {
        tokio::task::spawn_blocking(move || {
            exercise(&BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap());
            exercise(&BlockingTools::with_handle(
                registry(),
                Arc::new(Deps::new()),
                handle,
            ));
        })
        .await
        .unwrap();
    });
}

/// From a plain thread the application spawned next to its runtime, sharing the handle; the
/// shared runtime keeps working after the view is dropped.
#[test]
fn shared_runtime_outlives_the_view() {
    let app = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = app.handle().clone();
    std::thread::spawn(move || {
        let tools = BlockingTools::with_handle(registry(), Arc::new(Deps::new()), handle);
        exercise(&tools);
    })
    .join()
    .unwrap();
    assert_eq!(app.block_on(async { 1 + 1 }), 2);
}

/// Dropping the view stops its private runtime and thread promptly, even right after work, and
/// even when dropped inside async code (it never drops a runtime in an async context).
#[test]
fn dropping_a_private_view_shuts_its_runtime_down() {
    let tools = BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap();
    exercise(&tools);
    let handle = tools.runtime().handle().clone();
    // Dropped on another thread, so a drop that hangs fails here instead of hanging the test.
    let (dropped, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        drop(tools);
        let _ = dropped.send(());
    });
    done.recv_timeout(HANG_GUARD)
        .expect("dropping the view did not return");
    // The runtime is gone: its tasks are never polled.
    let probe = handle.spawn(async { 1 });
    let joined = futures::executor::block_on(probe);
    assert!(joined.is_err(), "the runtime still runs tasks");

    let app = tokio::runtime::Runtime::new().unwrap();
    app.block_on(async {
        let tools = BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap();
        drop(tools);
    });
}

#[test]
fn sync_runtime_runs_borrowing_non_send_futures() {
    let runtime = SyncRuntime::new().unwrap();
    let local = std::rc::Rc::new(5);
    let borrowed = &local;
    let doubled = runtime.run(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        **borrowed * 2
    });
    assert_eq!(doubled, 10);
    // Clones share the runtime.
    let clone = runtime.clone();
    drop(runtime);
    assert_eq!(clone.run(async { 3 }), 3);
}

#[test]
fn an_agent_runs_from_plain_synchronous_code_with_tools() {
    use agentloop::agent::{AgentLoop, AgentLoopConfig};
    use agentloop::blocking::BlockingAgent;
    use agentloop::model::{ScriptedModel, ScriptedTurn};
    use agentloop::transcript::Message;

    let model = ScriptedModel::new([
        ScriptedTurn::new().tool_call("c1", "shout", serde_json::json!({"text": "hey"})),
        ScriptedTurn::text("done"),
    ]);
    let shout =
        agentloop::tooling::ToolSpec::<agentloop::tooling::Deps>::builder("shout", "Upper-case.")
            .blocking_handler(
                |_c: agentloop::tooling::ToolContext<agentloop::tooling::Deps>,
                 a: serde_json::Value| {
                    a["text"].as_str().unwrap_or_default().to_uppercase()
                },
            )
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
    let agent = AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools([shout])
        .unwrap_or_else(|e| panic!("{e}"));
    let blocking = BlockingAgent::new(agent).unwrap_or_else(|e| panic!("{e}"));
    let out = blocking
        .run(vec![Message::user("go")], vec![])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.new_messages()[2]
            .tool_result_part()
            .map(|r| r.content.as_str()),
        Some("HEY")
    );
    assert_eq!(out.final_text(), "done");
    drop(blocking); // shuts its runtime down cleanly
}

mod agent_methods {
    use super::*;
    use agentloop::agent::{AgentError, AgentLoop, AgentLoopConfig, ParkedRun, RunStop};
    use agentloop::blocking::BlockingAgent;
    use agentloop::model::{ScriptedModel, ScriptedTurn};
    use agentloop::output::Output;
    use agentloop::transcript::Message;

    #[agentloop::schema]
    #[derive(serde::Deserialize, Debug, PartialEq)]
    struct Verdict {
        ok: bool,
    }

    fn agent(turns: Vec<ScriptedTurn>) -> AgentLoop<Deps> {
        AgentLoop::new(AgentLoopConfig::default(), ScriptedModel::new(turns))
            .with_tools([shout_tool()])
            .unwrap()
    }

    /// Every run method of the async agent has a blocking twin.
    #[test]
    fn a_blocking_agent_has_every_run_method() {
        // A scripted model gets the final-result tool strategy by default.
        let verdict = || ScriptedTurn::new().tool_call("f", "final_result", json!({"ok": true}));
        let blocking = BlockingAgent::new(agent(vec![
            verdict(),
            verdict(),
            ScriptedTurn::text("streamed"),
            ScriptedTurn::text("continued"),
        ]))
        .unwrap();
        let typed = blocking
            .run_typed::<Verdict>(vec![Message::user("judge")], vec![])
            .unwrap();
        assert_eq!(typed.value, Verdict { ok: true });
        let output = blocking
            .run_output(
                &Output::<Verdict>::of(),
                vec![Message::user("again")],
                vec![],
            )
            .unwrap();
        assert_eq!(output.value, Verdict { ok: true });

        let mut events = blocking.run_stream(vec![Message::user("stream")], vec![]);
        let text: String = events
            .by_ref()
            .filter_map(|e| e.text_delta().map(str::to_owned))
            .collect();
        assert_eq!(text, "streamed");
        let outcome = events.outcome().unwrap().unwrap();
        assert_eq!(outcome.stop, RunStop::Done);

        let mut context = outcome.context;
        context.push(Message::user("more"));
        let names: Vec<&str> = blocking
            .run_continue_stream(context)
            .map(|e| e.kind())
            .collect();
        assert_eq!(names.first(), Some(&"agent_start"));
        assert_eq!(names.last(), Some(&"agent_end"));
    }

    #[test]
    fn a_blocking_agent_resumes_a_parked_run() {
        let deps = Deps::with_approval(|_| Approval::defer("ask a person"));
        let model = ScriptedModel::new([
            ScriptedTurn::new().tool_call("c1", "shout", json!({"text": "hey"})),
            ScriptedTurn::text("done"),
        ]);
        let agent = AgentLoop::with_deps(AgentLoopConfig::default(), model, Arc::new(deps))
            .with_tools([shout_tool()])
            .unwrap();
        let blocking = BlockingAgent::new(agent).unwrap();
        let parked = blocking.run(vec![Message::user("go")], vec![]).unwrap();
        let mut decision = ParkedRun::from_stop(&parked.stop).unwrap();
        decision.approve_all();
        let done = blocking.resume_parked(parked.context, decision).unwrap();
        assert_eq!(done.final_text(), "done");
    }

    /// Inside `#[tokio::main]`-style async code a blocking view used to panic ("Cannot start a
    /// runtime from within a runtime"); on its own runtime it now runs on a helper thread.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn inside_a_multi_thread_runtime_a_private_view_runs() {
        let blocking = BlockingAgent::new(agent(vec![ScriptedTurn::text("hi")])).unwrap();
        let out = blocking.run(vec![Message::user("go")], vec![]).unwrap();
        assert_eq!(out.final_text(), "hi");
        let tools = BlockingTools::new(registry(), Arc::new(Deps::new())).unwrap();
        assert_eq!(
            tools.call("shout", json!({"text": "a"})).unwrap().content,
            "A"
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn inside_a_current_thread_runtime_a_private_view_runs() {
        let blocking = BlockingAgent::new(agent(vec![ScriptedTurn::text("hi")])).unwrap();
        let mut events = blocking.run_stream(vec![Message::user("go")], vec![]);
        assert_eq!(events.by_ref().last().map(|e| e.kind()), Some("agent_end"));
        assert_eq!(events.outcome().unwrap().unwrap().final_text(), "hi");
    }

    /// The one case no thread can serve: waiting for a current-thread runtime from its own
    /// async code. A clear error, not a panic or a hang.
    #[tokio::test(flavor = "current_thread")]
    async fn a_view_on_its_own_current_thread_runtime_is_an_error_in_async_code() {
        let runtime = SyncRuntime::with_handle(tokio::runtime::Handle::current());
        let blocking = BlockingAgent::with_runtime(agent(vec![ScriptedTurn::text("hi")]), runtime);
        let err = blocking.run(vec![Message::user("go")], vec![]).unwrap_err();
        assert!(matches!(err, AgentError::InsideRuntime), "{err}");
        assert!(err.to_string().contains("await the async API"), "{err}");
        // The async API still works right there.
        let out = blocking
            .agent()
            .run(vec![Message::user("go")], vec![])
            .await
            .unwrap();
        assert_eq!(out.final_text(), "hi");
    }
}
