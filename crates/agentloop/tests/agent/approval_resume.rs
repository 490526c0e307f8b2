//! Runs that pause for approval and resume in another process, over HTTP against the mock
//! provider server (whose invariant check rejects a request where a tool call lacks exactly one
//! result), with a real SQLite file and real child processes (this test binary re-run with an
//! env variable naming the phase).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::agent::{
    AgentEvent, AgentLoop, AgentLoopConfig, MessageQueue, ParkedRun, PendingStatus, RunOutcome,
    RunStop,
};
use agentloop::model::Model;
use agentloop::providers::{Anthropic, OpenAiChat, OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::session::{
    NewSession, SessionRecorder, SessionStore, SqliteStore, interrupted_result_text, load_parked,
};
use agentloop::tooling::{Approval, Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role};
use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

const PHASE: &str = "AGENTLOOP_APPROVAL_CHILD";

fn model(wire: &str, base: &str) -> Arc<dyn Model> {
    let config = |url: String| {
        ProviderConfig::new(url)
            .api_key("test")
            .model(format!("{wire}-model"))
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10))
    };
    match wire {
        "chat" => Arc::new(OpenAiChat::new(config(format!("{base}/v1")))),
        "responses" => Arc::new(OpenAiResponses::new(config(format!("{base}/v1")))),
        _ => Arc::new(Anthropic::new(config(base.to_owned()))),
    }
}

fn log_line(log: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .unwrap();
    writeln!(f, "{line}").unwrap();
    f.sync_all().unwrap();
}

fn ran(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Resumes the run `parked` (after `context`) to its successful end; a hang fails the test
/// after 30 s.
async fn resume_to_end(agent: &AgentLoop, context: Vec<Message>, parked: ParkedRun) -> RunOutcome {
    tokio::time::timeout(
        Duration::from_secs(30),
        agent.resume_parked(context, parked),
    )
    .await
    .unwrap()
    .unwrap()
}

/// `read` runs freely (and queues a steering message when `steer` is given); every other tool
/// is deferred. Each execution is logged with its idempotency key.
fn make_agent(
    wire: &str,
    base: &str,
    log: &Path,
    store: Arc<dyn SessionStore>,
    session: &str,
    steer: Option<MessageQueue>,
) -> (AgentLoop, SessionRecorder) {
    let deps = Deps::with_approval(|call| {
        if call.tool_name == "read" {
            Approval::Allow
        } else {
            Approval::defer(format!("{} changes things", call.tool_name))
        }
    });
    let steering = steer.clone().unwrap_or_default();
    let mut tools = Vec::new();
    for name in ["read", "write_a", "write_b", "nap"] {
        let log = log.to_owned();
        let steer = steer.clone();
        tools.push(
            ToolSpec::<Deps>::builder(name, "A test tool.")
                .handler(move |ctx: ToolContext<Deps>, _a: Value| {
                    let log = log.clone();
                    let steer = steer.clone();
                    async move {
                        log_line(&log, &format!("{name} {}", ctx.idempotency_key()));
                        if let Some(queue) = steer {
                            queue.push(Message::user("also check the README"));
                        }
                        if name == "nap" {
                            tokio::time::sleep(Duration::from_secs(60)).await;
                        }
                        format!("{name} done")
                    }
                })
                .build()
                .unwrap(),
        );
    }
    let recorder = SessionRecorder::new(store, session);
    let agent = AgentLoop::with_deps(
        AgentLoopConfig::default(),
        model(wire, base),
        Arc::new(deps),
    )
    .with_tools(tools)
    .unwrap()
    .with_steering_queue(steering)
    .with_session_label(session)
    .with_emit(recorder.emit_fn());
    (agent, recorder)
}

/// Child side: `park` runs the prompt until it stops for approval; `resume` resumes the session.
#[test]
fn approval_child() {
    let Ok(spec) = std::env::var(PHASE) else {
        return;
    };
    let parts: Vec<&str> = spec.split('|').collect();
    let [phase, wire, base, db, session, log] = parts[..] else {
        panic!("bad child spec {spec}");
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(db).unwrap());
        let log = PathBuf::from(log);
        if phase == "park" {
            let steer = MessageQueue::new();
            let (agent, recorder) = make_agent(wire, base, &log, store, session, Some(steer));
            let out = agent
                .run(vec![Message::user("do the three things")], vec![])
                .await
                .unwrap();
            assert!(matches!(out.stop, RunStop::AwaitingApproval { .. }));
            assert!(recorder.take_error().is_none());
        } else {
            let (context, parked) = load_parked(&*store, session).unwrap();
            let (agent, _recorder) = make_agent(wire, base, &log, store, session, None);
            let _ = agent.resume_parked(context, parked.unwrap()).await;
        }
    });
    // Exit at once, like a CLI process would: nothing is flushed by destructors.
    std::process::exit(0);
}

fn child(
    phase: &str,
    wire: &str,
    base: &str,
    db: &Path,
    session: &str,
    log: &Path,
) -> std::process::Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_name(module_path!(), "approval_child"),
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            PHASE,
            format!(
                "{phase}|{wire}|{base}|{}|{session}|{}",
                db.display(),
                log.display()
            ),
        )
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn results(messages: &[Message]) -> Vec<(String, String, bool)> {
    messages
        .iter()
        .filter_map(Message::tool_result_part)
        .map(|r| (r.call_id.clone(), r.content.clone(), r.is_error))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_paused_mid_way_resumes_in_another_process_on_every_wire() {
    for wire in ["chat", "responses", "anthropic"] {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let log = dir.path().join("ran.log");
        let server = MockServer::start(
            Script::from_value(json!({"turns": [
                {"text": "On it.", "tool_calls": [
                    {"id": "w1", "name": "write_a", "arguments": {}},
                    {"id": "r1", "name": "read", "arguments": {}},
                    {"id": "w2", "name": "write_b", "arguments": {"x": 1}}
                ]},
                {"text": "All done."}
            ], "mode": "sequential"}))
            .unwrap(),
        );
        let store = Arc::new(SqliteStore::open(&db).unwrap());
        let session = store.create(NewSession::new()).unwrap().id;

        // Process 1 runs until it needs approval, then exits.
        let status = child("park", wire, &server.base_url(), &db, &session, &log)
            .wait()
            .unwrap();
        assert!(status.success(), "{wire}: {status}");
        assert_eq!(ran(&log), [format!("read {session}/r1")], "{wire}");
        let raw = store.load_raw(&session).unwrap();
        assert_eq!(
            results(&raw),
            [("r1".to_owned(), "read done".to_owned(), false)],
            "{wire}: only the read-only result is stored"
        );
        let parked = store
            .parked(&session)
            .unwrap()
            .expect("parked state stored");
        let ids: Vec<_> = parked.pending.iter().map(|p| p.call_id.as_str()).collect();
        assert_eq!(ids, ["w1", "w2"], "{wire}");
        assert_eq!(parked.pending[1].arguments, json!({"x": 1}));
        assert!(
            parked
                .pending
                .iter()
                .all(|p| p.status == PendingStatus::Awaiting)
        );
        assert_eq!(
            parked.steering.len(),
            1,
            "{wire}: steering queued at the stop is stored"
        );
        assert_eq!(store.awaiting_approval().unwrap().len(), 1);

        // This process decides.
        store
            .decide(&session, "w1", &PendingStatus::Approved)
            .unwrap();
        store
            .decide(
                &session,
                "w2",
                &PendingStatus::Denied {
                    reason: "not today".into(),
                },
            )
            .unwrap();

        // And resumes.
        let (context, parked) = load_parked(&*store, &session).unwrap();
        let (agent, recorder) = make_agent(
            wire,
            &server.base_url(),
            &log,
            store.clone(),
            &session,
            None,
        );
        let out = resume_to_end(&agent, context, parked.unwrap()).await;
        assert_eq!(out.stop, RunStop::Done, "{wire}");
        assert_eq!(out.final_text(), "All done.");
        assert!(
            server.violations().is_empty(),
            "{wire}: {:?}",
            server.violations()
        );
        assert_eq!(server.requests().len(), 2, "{wire}");
        assert!(recorder.take_error().is_none());
        let res = results(&out.context);
        assert_eq!(res.len(), 3, "{wire}: {res:?}");
        assert_eq!(res[0], ("w1".to_owned(), "write_a done".to_owned(), false));
        assert_eq!(res[1], ("r1".to_owned(), "read done".to_owned(), false));
        assert_eq!(res[2].0, "w2");
        assert!(res[2].2 && res[2].1.contains("not today"), "{res:?}");
        // The steering message queued at the stop is delivered before the next model call.
        let steer_at = out
            .context
            .iter()
            .position(|m| m.role == Role::User && m.text() == "also check the README")
            .expect("steering delivered");
        assert_eq!(steer_at, 5, "{wire}");
        assert_eq!(
            ran(&log),
            [
                format!("read {session}/r1"),
                format!("write_a {session}/w1")
            ],
            "{wire}: the approved tool ran exactly once, the denied one never"
        );
        assert_eq!(store.parked(&session).unwrap(), None, "{wire}");
        assert_eq!(
            results(&store.load(&session).unwrap()),
            results(&out.context),
            "{wire}: the stored transcript has the batch in call order"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_during_the_approved_call_gives_interrupted_never_a_second_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let log = dir.path().join("ran.log");
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "n1", "name": "nap", "arguments": {}}]},
            {"text": "The nap was interrupted."}
        ], "mode": "sequential"}))
        .unwrap(),
    );
    let base = server.base_url();
    let store = Arc::new(SqliteStore::open(&db).unwrap());
    let session = store.create(NewSession::new()).unwrap().id;
    assert!(
        child("park", "chat", &base, &db, &session, &log)
            .wait()
            .unwrap()
            .success()
    );
    assert!(ran(&log).is_empty());
    store
        .decide(&session, "n1", &PendingStatus::Approved)
        .unwrap();

    let mut resumer = child("resume", "chat", &base, &db, &session, &log);
    let deadline = Instant::now() + Duration::from_secs(60);
    while ran(&log).is_empty() {
        assert!(
            resumer.try_wait().unwrap().is_none(),
            "the resumer exited early"
        );
        assert!(Instant::now() < deadline, "the approved call never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    resumer.kill().unwrap(); // SIGKILL
    resumer.wait().unwrap();
    let parked = store.parked(&session).unwrap().unwrap();
    assert_eq!(parked.pending[0].status, PendingStatus::Started);
    assert!(
        store
            .decide(&session, "n1", &PendingStatus::Approved)
            .is_err(),
        "a started call cannot be approved again"
    );

    let (context, parked) = load_parked(&*store, &session).unwrap();
    let (agent, _recorder) = make_agent("chat", &base, &log, store.clone(), &session, None);
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    // Replaces the helper's emit callback: record and collect event names.
    let recorder = SessionRecorder::new(store.clone(), &session);
    let agent = agent.with_emit({
        let events = events.clone();
        move |e: &AgentEvent| {
            recorder.on_event(e);
            events.lock().unwrap().push(e.kind());
        }
    });
    let out = resume_to_end(&agent, context, parked.unwrap()).await;
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(
        results(&out.context),
        [("n1".to_owned(), interrupted_result_text("nap"), true)]
    );
    assert_eq!(ran(&log).len(), 1, "never a second execution");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    assert_eq!(store.parked(&session).unwrap(), None);
    assert_eq!(events.lock().unwrap().last(), Some(&"agent_end"));
}

#[tokio::test]
async fn undecided_calls_stay_pending_and_resume_on_the_same_agent_works_without_a_store() {
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [
                {"id": "a", "name": "write_a", "arguments": {}},
                {"id": "b", "name": "write_b", "arguments": {}}
            ]},
            {"text": "done"}
        ], "mode": "sequential"}))
        .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ran.log");
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = store.create(NewSession::new()).unwrap().id;
    let (agent, _r) = make_agent("chat", &server.base_url(), &log, store, &session, None);
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    let mut parked = ParkedRun::from_stop(&out.stop).unwrap();
    assert_eq!(parked.pending.len(), 2);
    assert!(parked.approve("a"));
    assert!(!parked.approve("nope"));
    let again = agent.resume_parked(out.context, parked).await.unwrap();
    let RunStop::AwaitingApproval { pending } = &again.stop else {
        panic!("still awaiting: {:?}", again.stop);
    };
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].call_id, "b");
    assert_eq!(
        server.requests().len(),
        1,
        "no model call while b is undecided"
    );
    let mut parked = ParkedRun::from_stop(&again.stop).unwrap();
    parked.deny("b", "no");
    let done = agent.resume_parked(again.context, parked).await.unwrap();
    assert_eq!(done.stop, RunStop::Done);
    assert_eq!(ran(&log).len(), 1);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

/// Measurement for docs/BENCHMARKS.md (ignored; run with
/// `cargo test -p agentloop --release --test agent -- --ignored --nocapture approval_resume::`):
/// the time from `decide` (approve, in a freshly opened store) to the first streamed token of
/// the resumed run's model request, and the size of a paused run's stored state.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore]
async fn measure_approve_to_first_model_token_and_parked_size() {
    let mut samples = Vec::new();
    let mut store_phase = Vec::new();
    let mut agent_phase = Vec::new();
    let mut parked_bytes = 0;
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let log = dir.path().join("ran.log");
        let server = MockServer::start(
            Script::from_value(json!({"turns": [
                {"tool_calls": [
                    {"id": "r1", "name": "read", "arguments": {}},
                    {"id": "w1", "name": "write_a", "arguments": {"path": "src/main.rs", "content": "fn main() {}\n".repeat(20)}},
                    {"id": "w2", "name": "write_b", "arguments": {"x": 1}}
                ]},
                {"text": "ok"}
            ], "mode": "sequential"}))
            .unwrap(),
        );
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).unwrap());
        let session = store.create(NewSession::new()).unwrap().id;
        let (agent, _r) = make_agent(
            "chat",
            &server.base_url(),
            &log,
            store.clone(),
            &session,
            Some(MessageQueue::new()),
        );
        agent.run(vec![Message::user("go")], vec![]).await.unwrap();
        drop(agent);
        drop(store);
        let parked = SqliteStore::open(&db)
            .unwrap()
            .parked(&session)
            .unwrap()
            .unwrap();
        parked_bytes = serde_json::to_string(&parked).unwrap().len();

        let started = Instant::now();
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).unwrap());
        store
            .decide(&session, "w1", &PendingStatus::Approved)
            .unwrap();
        store
            .decide(&session, "w2", &PendingStatus::Approved)
            .unwrap();
        let (context, parked) = load_parked(&*store, &session).unwrap();
        store_phase.push(started.elapsed());
        let (agent, recorder) = make_agent("chat", &server.base_url(), &log, store, &session, None);
        agent_phase.push(started.elapsed());
        let first = Arc::new(std::sync::Mutex::new(None));
        let agent = agent.with_emit({
            let first = first.clone();
            move |e: &AgentEvent| {
                recorder.on_event(e);
                let mut first = first.lock().unwrap();
                if first.is_none() && matches!(e, AgentEvent::MessageUpdate { .. }) {
                    *first = Some(started.elapsed());
                }
            }
        });
        agent.resume_parked(context, parked.unwrap()).await.unwrap();
        samples.push(first.lock().unwrap().unwrap());
    }
    samples.sort();
    store_phase.sort();
    agent_phase.sort();
    println!(
        "… + build the agent (provider HTTP client, tools, recorder): median {:?}",
        agent_phase[agent_phase.len() / 2]
    );
    println!(
        "open + decide ×2 + load_parked: median {:?}, min {:?}, max {:?}",
        store_phase[store_phase.len() / 2],
        store_phase[0],
        store_phase[store_phase.len() - 1]
    );
    println!(
        "approve→first model token: median {:?}, min {:?}, max {:?} (n={}); parked state JSON {} bytes",
        samples[samples.len() / 2],
        samples[0],
        samples[samples.len() - 1],
        samples.len(),
        parked_bytes
    );
}
