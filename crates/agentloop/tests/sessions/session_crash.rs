//! Crash safety of recorded sessions: a child process runs a real agent whose tool batch has
//! two fast calls and one that sleeps 30 s, recording into SQLite; the parent waits until the
//! two finished results are durable, kills the child with SIGKILL, and resumes the session in a
//! new agent from what the store kept.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::session::{
    NewSession, SessionRecorder, SessionStore, SqliteStore, interrupted_result_text,
};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role, StopReason};
use serde_json::{Value, json};

use crate::store_conformance::TempDir;

const CHILD_ENV: &str = "AGENTLOOP_SESSION_CRASH_CHILD";
const PROMPT: &str = "Look up a and b, and take a nap";

fn tools() -> Vec<ToolSpec<Deps>> {
    #[derive(serde::Deserialize)]
    struct Lookup {
        key: String,
    }
    let lookup = ToolSpec::<Deps>::builder("lookup", "Looks a key up.")
        .parameters(json!({
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"]
        }))
        .handler(
            |_c: ToolContext<Deps>, args: Lookup| async move { format!("value of {}", args.key) },
        )
        .build()
        .unwrap();
    let nap = ToolSpec::<Deps>::builder("nap", "Sleeps for 30 seconds.")
        .handler(|_c: ToolContext<Deps>, _a: Value| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            "rested"
        })
        .build()
        .unwrap();
    vec![lookup, nap]
}

/// Child side: runs the agent until the parent kills it. A no-op in a normal test run.
#[test]
fn crash_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (db, session) = spec.split_once('|').unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store = Arc::new(SqliteStore::open(db).unwrap());
        let recorder = SessionRecorder::new(store, session);
        let model = ScriptedModel::new([
            ScriptedTurn::new()
                .with_text("Looking both up while I nap.")
                .tool_call("call-a", "lookup", json!({"key": "a"}))
                .tool_call("call-nap", "nap", json!({}))
                .tool_call("call-b", "lookup", json!({"key": "b"})),
            ScriptedTurn::text("not reached: the process is killed during the nap"),
        ]);
        let config = AgentLoopConfig {
            model: Some("scripted-crash".into()),
            ..AgentLoopConfig::default()
        };
        let agent = AgentLoop::new(config, model)
            .with_tools(tools())
            .unwrap()
            .with_emit(recorder.emit_fn());
        let _ = agent.run(vec![Message::user(PROMPT)], vec![]).await;
    });
    panic!("the child should have been killed during the nap");
}

fn tool_results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(|m| m.tool_result_part())
        .map(|r| (r.call_id.clone(), r.content.clone(), r.is_error))
        .collect()
}

#[test]
fn a_killed_run_keeps_finished_results_and_resumes_with_the_rest_interrupted() {
    let dir = TempDir::new("crash");
    let db = dir.db();
    let store = SqliteStore::open(&db).unwrap();
    let session = store.create(NewSession::new()).unwrap();

    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_name(module_path!(), "crash_child"),
            "--nocapture",
        ])
        .env(CHILD_ENV, format!("{}|{}", db.display(), session.id))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();

    // Wait (polling the database, as another process would) for the two quick results.
    let deadline = Instant::now() + Duration::from_secs(60);
    let raw = loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the child exited before it was killed: {status}");
        }
        let raw = store.load_raw(&session.id).unwrap();
        if tool_results(&raw).len() >= 2 {
            break raw;
        }
        assert!(
            Instant::now() < deadline,
            "the finished results never reached the store"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    child.kill().unwrap(); // SIGKILL on Unix: no destructor, no flush, nothing runs.
    let status = child.wait().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(9), "killed by SIGKILL: {status}");
    }
    #[cfg(not(unix))]
    assert!(!status.success());

    // What the killed process made durable: prompt, assistant, the two finished results.
    let after_kill = store.load_raw(&session.id).unwrap();
    assert_eq!(
        after_kill, raw,
        "nothing was lost or added by the kill after the results"
    );
    assert_eq!(after_kill.len(), 4, "{after_kill:#?}");
    assert_eq!(
        after_kill[0],
        Message::user(PROMPT).with_timestamp_of(&after_kill[0])
    );
    assert_eq!(after_kill[1].role, Role::Assistant);
    assert_eq!(after_kill[1].stop_reason, Some(StopReason::ToolUse));
    assert_eq!(after_kill[1].tool_calls().count(), 3);
    let mut finished = tool_results(&after_kill);
    finished.sort();
    assert_eq!(
        finished,
        [
            ("call-a".to_owned(), "value of a".to_owned(), false),
            ("call-b".to_owned(), "value of b".to_owned(), false),
        ]
    );
    let info = store.info(&session.id).unwrap();
    assert_eq!(info.title.as_deref(), Some(PROMPT));
    assert_eq!(info.model.as_deref(), Some("scripted-crash"));

    // Loading repairs the batch: the nap gets its "interrupted" result, in call order.
    let context = store.load(&session.id).unwrap();
    assert_eq!(context.len(), 5);
    assert_eq!(context[..2], after_kill[..2]);
    assert_eq!(
        tool_results(&context),
        [
            ("call-a".to_owned(), "value of a".to_owned(), false),
            ("call-nap".to_owned(), interrupted_result_text("nap"), true),
            ("call-b".to_owned(), "value of b".to_owned(), false),
        ]
    );

    // A new agent continues from the loaded context and records into the same session.
    let store = Arc::new(store);
    let recorder = SessionRecorder::new(store.clone(), &session.id);
    let model = Arc::new(ScriptedModel::new([ScriptedTurn::text(
        "a and b are looked up; the nap was interrupted.",
    )]));
    let agent = AgentLoop::new(AgentLoopConfig::default(), model.clone())
        .with_tools(tools())
        .unwrap()
        .with_emit(recorder.emit_fn());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let outcome = runtime
        .block_on(async {
            tokio::time::timeout(Duration::from_secs(20), agent.run_continue(context.clone())).await
        })
        .unwrap()
        .unwrap();
    assert_eq!(outcome.stop, RunStop::Done);
    assert_eq!(
        outcome.final_text(),
        "a and b are looked up; the nap was interrupted."
    );
    let requests = model.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0].messages, context,
        "the model saw the repaired context"
    );
    assert!(recorder.take_error().is_none());

    let resumed = store.load(&session.id).unwrap();
    assert_eq!(resumed.len(), 6);
    assert_eq!(resumed[..5], context[..]);
    assert_eq!(resumed[5], outcome.context[5]);
    assert_eq!(store.load_raw(&session.id).unwrap().len(), 5);
}

trait WithTimestamp {
    fn with_timestamp_of(self, other: &Message) -> Self;
}

impl WithTimestamp for Message {
    fn with_timestamp_of(mut self, other: &Message) -> Self {
        self.timestamp_ms = other.timestamp_ms;
        self
    }
}
