//! Agent runs on a real Restate server with real worker processes: a worker killed mid-batch
//! loses nothing and repeats nothing; many sessions spread over two workers; an approval parks a
//! run that another worker resumes; cancellation aborts a run mid-batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use agentloop_testkit::{MockServer, Script};
use serde_json::json;
use support::{Restate, WorkerSpec, eventually, free_port, server_or_skip, wait_until};

fn script(turns: serde_json::Value) -> Script {
    Script::from_json(&json!({ "turns": turns }).to_string()).unwrap()
}

fn spec(mock: &MockServer, dir: &std::path::Path, approve: &'static str) -> WorkerSpec {
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    WorkerSpec {
        model_base: mock.openai_base_url(),
        workspace,
        store: Some(dir.join("sessions.db")),
        approve,
        log_dir: dir.to_path_buf(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_batch_repeats_no_model_call_and_no_finished_tool_call() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [
            {"id": "call_fast", "name": "shell",
             "arguments": {"command": "echo once >> counter.txt"}},
            {"id": "call_slow", "name": "shell",
             "arguments": {"command": "touch slow-started; sleep 4; echo slept"}}
        ]},
        {"text": "Both commands ran."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    // The worker dies while the slow call runs; the fast call's result is already journaled.
    let (restate, _worker, output) =
        run_across_a_worker_death(&server, &spec, "s-death", "count, then wait", || {}).await;
    assert_eq!(output["final_text"], "Both commands ran.", "{output}");
    assert_eq!(output["stop"]["reason"], "done", "{output}");
    let counter = std::fs::read_to_string(spec.workspace.join("counter.txt")).unwrap();
    assert_eq!(counter, "once\n", "the finished call ran exactly once");
    assert_eq!(
        mock.request_count(),
        2,
        "one model request per scripted turn, none replayed"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());

    let history = history(&restate, "s-death").await;
    let results: Vec<_> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "every call answered once: {history}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_read_journaled_with_its_model_step_is_not_read_again_after_a_worker_dies() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [{"id": "call_read", "name": "read_file",
                         "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"id": "call_slow", "name": "shell",
                         "arguments": {"command": "touch slow-started; sleep 4; echo slept"}}]},
        {"text": "Read and waited."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    std::fs::write(
        spec.workspace.join("notes.txt"),
        "written before the crash\n",
    )
    .unwrap();
    let notes = spec.workspace.join("notes.txt");
    let (restate, _worker, output) =
        run_across_a_worker_death(&server, &spec, "s-read-death", "read, then wait", || {
            // What a second read would see: the replay must answer from the journal instead.
            std::fs::write(notes, "written after the crash\n").unwrap();
        })
        .await;
    assert_eq!(output["final_text"], "Read and waited.", "{output}");
    assert_eq!(
        mock.request_count(),
        3,
        "one model request per scripted turn"
    );
    let history = history(&restate, "s-read-death").await;
    let results = tool_results(&history);
    assert_eq!(results.len(), 2, "every call answered once: {history}");
    let read = results[0].to_string();
    assert!(read.contains("written before the crash"), "{read}");
    assert!(
        !read.contains("after"),
        "the read ran again on replay: {read}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_edit_journaled_as_a_step_is_not_applied_again_after_a_worker_dies() {
    let Some(server) = server_or_skip() else {
        return;
    };
    // Applied twice, this edit would leave two "line2" lines.
    let mock = MockServer::start(script(json!([
        {"tool_calls": [{"id": "call_edit", "name": "edit_file",
                         "arguments": {"path": "counter.txt", "old_text": "line\n",
                                       "new_text": "line\nline2\n"}}]},
        {"tool_calls": [{"id": "call_slow", "name": "shell",
                         "arguments": {"command": "touch slow-started; sleep 4; echo slept"}}]},
        {"text": "Edited and waited."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    std::fs::write(spec.workspace.join("counter.txt"), "line\n").unwrap();
    let (restate, _worker, output) =
        run_across_a_worker_death(&server, &spec, "s-edit-death", "edit, then wait", || {}).await;
    assert_eq!(output["final_text"], "Edited and waited.", "{output}");
    assert_eq!(
        std::fs::read_to_string(spec.workspace.join("counter.txt")).unwrap(),
        "line\nline2\n",
        "the edit was applied exactly once"
    );
    assert_eq!(
        mock.request_count(),
        3,
        "one model request per scripted turn"
    );
    let history = history(&restate, "s-edit-death").await;
    let results = tool_results(&history);
    assert_eq!(results.len(), 2, "every call answered once: {history}");
    assert_eq!(
        results[0]["content"][0]["is_error"], false,
        "{}",
        results[0]
    );
}

/// Starts a server and one worker registered with it.
async fn server_with_one_worker(
    server: &std::path::Path,
    spec: &WorkerSpec,
) -> (Restate, support::WorkerProc) {
    let restate = Restate::start(server).await;
    let worker = spec.start(free_port(), "only").await;
    restate.register(&format!("http://{}", worker.addr)).await;
    (restate, worker)
}

/// Starts a server and a worker, sends `prompt` to `session`, and kills the worker once the
/// run's slow call has started (the script's slow call touches `slow-started`); then runs
/// `after_kill`, starts another worker on the same port and waits for the run's output. Returns
/// the server, the new worker and the output.
async fn run_across_a_worker_death(
    server: &std::path::Path,
    spec: &WorkerSpec,
    session: &str,
    prompt: &str,
    after_kill: impl FnOnce(),
) -> (Restate, support::WorkerProc, serde_json::Value) {
    let restate = Restate::start(server).await;
    let port = free_port();
    let mut worker = spec.start(port, "a").await;
    restate.register(&format!("http://{}", worker.addr)).await;

    let run = restate.spawn_run(session, prompt);
    let ws = spec.workspace.clone();
    eventually("the slow call to start", Duration::from_secs(60), || {
        ws.join("slow-started").exists()
    })
    .await;
    worker.proc.kill();
    after_kill();
    let worker = spec.start(port, "b").await;
    let output = finished(run, "the run finishes after the restart").await;
    (restate, worker, output)
}

/// The session's messages as of its last finished run.
async fn history(restate: &Restate, session: &str) -> serde_json::Value {
    restate
        .call(&format!("AgentSession/{session}/history"), json!(null))
        .await
        .unwrap()
}

/// The output of a run started with `Restate::spawn_run`, which must end within two minutes.
async fn finished(
    run: tokio::task::JoinHandle<serde_json::Value>,
    what: &str,
) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect(what)
        .unwrap()
}

/// How long the balancer holds back each frame the server sends to the worker in the pipelining
/// test: every acknowledgement of a journaled step arrives at least this late.
const ACK_DELAY: Duration = Duration::from_millis(1000);

/// The time between the mock model's first and second request, for a run whose first turn is a
/// lone read, on a worker started with `flags` behind a balancer that delays every
/// acknowledgement by [`ACK_DELAY`]. A first run (another conversation, so the mock model plays
/// the script again from its start) warms the worker up: its first tool call prepares the
/// argument validators, which takes a while in a debug build.
async fn gap_between_first_two_requests(server: &std::path::Path, flags: &[&str]) -> Duration {
    let mock = MockServer::start(script(json!([
        {"tool_calls": [{"id": "call_a", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"tool_calls": [{"id": "call_b", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "Read twice."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "ask");
    std::fs::write(spec.workspace.join("notes.txt"), "notes\n").unwrap();
    let restate = Restate::start(server).await;
    let worker = spec.start_with(free_port(), "a", flags).await;
    let balancer = support::balancer::Balancer::start_delayed(vec![worker.addr], ACK_DELAY).await;
    restate.register(&format!("http://{}", balancer.addr)).await;
    let warm = restate
        .call("AgentSession/s-warm/run", json!({"prompt": "warm up"}))
        .await
        .unwrap();
    assert_eq!(warm["final_text"], "Read twice.", "{warm}");

    let run = restate.spawn_run("s-pipeline", "read twice");
    // The run's second model request is the fifth the mock sees (the warm-up made three).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while mock.request_count() < 5 {
        assert!(tokio::time::Instant::now() < deadline, "no second request");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    if flags.is_empty() {
        // The first turn's reply is not journaled yet when the second request leaves early
        // (its acknowledgement is held back): the store shows none of that turn, only the
        // prompt.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let store = agentloop::session::SqliteStore::open(spec.store.as_ref().unwrap()).unwrap();
        let shown = agentloop::session::SessionStore::entries(&store, "s-pipeline")
            .map(|entries| entries.len())
            .unwrap_or(0);
        assert!(
            shown <= 1,
            "the store shows an unjournaled turn ({shown} messages)"
        );
    }
    let output = finished(run, "the run finishes").await;
    assert_eq!(output["final_text"], "Read twice.", "{output}");
    assert_eq!(
        mock.request_count(),
        6,
        "one model request per scripted turn"
    );
    let history = history(&restate, "s-pipeline").await;
    assert_eq!(tool_results(&history).len(), 2, "{history}");
    // Measured where the requests arrive: polling the count could miss the moment between
    // two requests that leave almost at once.
    let requests = mock.requests();
    requests[4].received - requests[3].received
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_model_request_leaves_while_the_engine_journals_the_reply_and_the_store_waits_for_it()
 {
    let Some(server) = server_or_skip() else {
        return;
    };
    // By default the worker hands the reply to the loop as soon as the step's closure returns,
    // and the loop's next request leaves without waiting for the (delayed) acknowledgement.
    // Half the delay on both sides, a margin for a busy machine.
    let pipelined = gap_between_first_two_requests(&server, &[]).await;
    assert!(
        pipelined < ACK_DELAY / 2,
        "the second request waited for the acknowledgement: {pipelined:?}"
    );
    // With --no-pipeline it waits: the same measurement can tell the two apart.
    let waited = gap_between_first_two_requests(&server, &["--no-pipeline"]).await;
    assert!(
        waited >= ACK_DELAY / 2,
        "without pipelining the second request must wait for the acknowledgement: {waited:?}"
    );
}

/// Polls `status` until `call_id` is the one pending call.
async fn wait_for_pending(restate: &Restate, session: &str, call_id: &str) -> serde_json::Value {
    let mut status = json!(null);
    for _ in 0..600 {
        status = restate
            .call(&format!("AgentSession/{session}/status"), json!(null))
            .await
            .unwrap();
        if status["pending"]
            .as_array()
            .is_some_and(|p| p.len() == 1 && p[0]["call_id"] == call_id)
        {
            return status;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{call_id} never became pending: {status}");
}

/// Sends a decision (`{"call_id", "decision", "reason"?}`) to the session's `approve` handler.
async fn approve(
    restate: &Restate,
    session: &str,
    decision: serde_json::Value,
) -> Result<serde_json::Value, String> {
    restate
        .call(&format!("AgentSession/{session}/approve"), decision)
        .await
}

/// The output of a parked run's invocation once a decision has resumed it.
async fn resumed_output(restate: &Restate, invocation: &str) -> serde_json::Value {
    tokio::time::timeout(Duration::from_secs(120), restate.output(invocation))
        .await
        .expect("the run resumes")
        .unwrap()
}

fn tool_results(history: &serde_json::Value) -> Vec<serde_json::Value> {
    history
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool_result")
        .cloned()
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_read_runs_in_its_model_step_a_lone_write_is_a_step_and_the_rest_go_to_the_executor()
{
    let Some(server) = server_or_skip() else {
        return;
    };
    let read =
        |id: &str| json!({"id": id, "name": "read_file", "arguments": {"path": "README.md"}});
    let mock = MockServer::start(script(json!([
        {"tool_calls": [read("lone_read")]},
        {"tool_calls": [{"id": "lone_write", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "written\n"}}]},
        {"tool_calls": [{"id": "lone_shell", "name": "shell",
                         "arguments": {"command": "cat out.txt"}}]},
        {"tool_calls": [read("batch_read"),
                        {"id": "batch_list", "name": "list_dir", "arguments": {"path": "."}}]},
        {"text": "done"}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    std::fs::write(
        spec.workspace.join("README.md"),
        "hello from the workspace\n",
    )
    .unwrap();
    let (restate, _worker) = server_with_one_worker(&server, &spec).await;

    let output = restate
        .call("AgentSession/s-dispatch/run", json!({"prompt": "go"}))
        .await
        .unwrap();
    assert_eq!(output["final_text"], "done", "{output}");
    assert_eq!(
        std::fs::read_to_string(spec.workspace.join("out.txt")).unwrap(),
        "written\n"
    );
    let history = history(&restate, "s-dispatch").await;
    let results = tool_results(&history);
    let ids: Vec<_> = results
        .iter()
        .map(|r| r["content"][0]["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        ids,
        [
            "lone_read",
            "lone_write",
            "lone_shell",
            "batch_read",
            "batch_list"
        ],
        "{history}"
    );
    for result in &results {
        assert_eq!(result["content"][0]["is_error"], false, "{result}");
    }
    assert!(
        results[0].to_string().contains("hello from the workspace"),
        "{}",
        results[0]
    );

    assert!(
        results[2].to_string().contains("written"),
        "the shell saw the write: {}",
        results[2]
    );

    // The lone read ran inside its model step: no step or call of its own. The lone write was
    // a step of its own. The lone shell call (it may run for minutes) and both calls of the
    // batch were durable calls of the executor.
    let executed = restate
        .query(
            "SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'ToolExecutor'",
        )
        .await;
    assert_eq!(executed[0]["n"], 3, "{executed:?}");
    let steps = restate
        .query(
            "SELECT j.name AS name FROM sys_journal j JOIN sys_invocation i ON j.id = i.id \
             WHERE i.target_service_name = 'AgentSession' AND j.entry_type = 'Command: Run' \
             ORDER BY j.index",
        )
        .await;
    let names: Vec<_> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "model call 1",
            "model call 2",
            "tool call write_file (lone_write)",
            "model call 3",
            "model call 4",
            "model call 5"
        ],
        "{steps:?}"
    );

    // Every message was mirrored into the worker's store by the time the run answered.
    let store = agentloop::session::SqliteStore::open(spec.store.as_ref().unwrap()).unwrap();
    let stored = agentloop::session::SessionStore::entries(&store, "s-dispatch").unwrap();
    assert_eq!(
        stored.len(),
        history.as_array().unwrap().len(),
        "the store mirrors the history"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_parks_the_run_and_another_worker_resumes_it() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [
            {"id": "call_write", "name": "write_file",
             "arguments": {"path": "note.txt", "content": "approved\n"}},
            {"id": "call_shell", "name": "shell",
             "arguments": {"command": "echo denied > denied.txt"}}
        ]},
        {"text": "Done as far as allowed."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "ask");
    let restate = Restate::start(&server).await;
    let port = free_port();
    let mut first = spec.start(port, "first").await;
    restate.register(&format!("http://{}", first.addr)).await;

    let invocation = restate
        .send(
            "AgentSession/s-approve/run",
            json!({"prompt": "write a note"}),
        )
        .await;
    // The batch is sequential (both tools mutate), so the calls wait for a person one at a time.
    let status = wait_for_pending(&restate, "s-approve", "call_write").await;
    assert_eq!(status["running"], true, "{status}");
    assert_eq!(status["pending"][0]["tool"], "write_file");
    assert_eq!(status["pending"][0]["arguments"]["content"], "approved\n");
    assert!(
        !spec.workspace.join("note.txt").exists(),
        "nothing ran before approval"
    );

    // The worker that parked the run goes away; another one takes its place.
    first.proc.kill();
    let _second = spec.start(port, "second").await;

    // An unknown call id is refused with the pending ones listed.
    let unknown = approve(
        &restate,
        "s-approve",
        json!({"call_id": "nope", "decision": "allow"}),
    )
    .await
    .unwrap_err();
    assert!(unknown.contains("call_write"), "{unknown}");

    approve(
        &restate,
        "s-approve",
        json!({"call_id": "call_write", "decision": "allow"}),
    )
    .await
    .unwrap();
    wait_for_pending(&restate, "s-approve", "call_shell").await;
    assert_eq!(
        std::fs::read_to_string(spec.workspace.join("note.txt")).unwrap(),
        "approved\n"
    );
    approve(
        &restate,
        "s-approve",
        json!({"call_id": "call_shell", "decision": "deny", "reason": "no shell today"}),
    )
    .await
    .unwrap();

    let output = resumed_output(&restate, &invocation).await;
    assert_eq!(output["final_text"], "Done as far as allowed.", "{output}");
    assert_eq!(
        std::fs::read_to_string(spec.workspace.join("note.txt")).unwrap(),
        "approved\n"
    );
    assert!(
        !spec.workspace.join("denied.txt").exists(),
        "the denied call never ran"
    );
    assert_eq!(mock.request_count(), 2, "no model call repeated");
    let history = history(&restate, "s-approve").await;
    let results = tool_results(&history);
    assert_eq!(results.len(), 2, "{history}");
    let denied = results[1].to_string();
    assert!(denied.contains("no shell today"), "{denied}");
    let status = restate
        .call("AgentSession/s-approve/status", json!(null))
        .await
        .unwrap();
    assert_eq!(status["running"], false);
    assert!(
        status["pending"].as_array().is_none_or(|p| p.is_empty()),
        "{status}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_write_waits_for_approval_then_runs_as_a_step_of_the_session() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [{"id": "call_write", "name": "write_file",
                         "arguments": {"path": "note.txt", "content": "approved\n"}}]},
        {"text": "Written."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "ask");
    let (restate, _worker) = server_with_one_worker(&server, &spec).await;

    let invocation = restate
        .send(
            "AgentSession/s-lone-approve/run",
            json!({"prompt": "write"}),
        )
        .await;
    wait_for_pending(&restate, "s-lone-approve", "call_write").await;
    assert!(
        !spec.workspace.join("note.txt").exists(),
        "nothing ran before approval"
    );
    approve(
        &restate,
        "s-lone-approve",
        json!({"call_id": "call_write", "decision": "allow"}),
    )
    .await
    .unwrap();
    let output = resumed_output(&restate, &invocation).await;
    assert_eq!(output["final_text"], "Written.", "{output}");
    assert_eq!(
        std::fs::read_to_string(spec.workspace.join("note.txt")).unwrap(),
        "approved\n"
    );
    // The approval was an awakeable; the approved call then ran as a step, after it.
    let entries = restate
        .query(
            "SELECT j.entry_type AS kind, j.name AS name FROM sys_journal j \
             JOIN sys_invocation i ON j.id = i.id \
             WHERE i.target_service_name = 'AgentSession' ORDER BY j.index",
        )
        .await;
    let kinds: Vec<String> = entries
        .iter()
        .map(|e| format!("{} {}", e["kind"], e["name"]))
        .collect();
    let awakeable = kinds.iter().position(|k| k.contains("Awakeable"));
    let step = kinds
        .iter()
        .position(|k| k.contains("tool call write_file (call_write)"));
    assert!(
        matches!((awakeable, step), (Some(a), Some(s)) if a < s),
        "{kinds:?}"
    );
    let executed = restate
        .query(
            "SELECT count(*) AS n FROM sys_invocation WHERE target_service_name = 'ToolExecutor'",
        )
        .await;
    assert_eq!(executed[0]["n"], 0, "{executed:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_invocation_aborts_the_batch_with_a_result_for_every_call() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [
            {"id": "call_a", "name": "shell",
             "arguments": {"command": "touch a-started; sleep 20"}},
            {"id": "call_b", "name": "shell", "arguments": {"command": "sleep 20"}}
        ]},
        {"text": "unreachable"}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    let (restate, _worker) = server_with_one_worker(&server, &spec).await;

    let invocation = restate
        .send("AgentSession/s-cancel/run", json!({"prompt": "wait"}))
        .await;
    let ws = spec.workspace.clone();
    eventually("the first call to start", Duration::from_secs(60), || {
        ws.join("a-started").exists()
    })
    .await;
    restate.cancel(&invocation).await;
    let output = tokio::time::timeout(Duration::from_secs(60), restate.output(&invocation))
        .await
        .expect("the cancelled run ends")
        .unwrap();
    assert_eq!(output["stop"]["reason"], "aborted", "{output}");
    assert_eq!(mock.request_count(), 1, "no model call after the abort");
    let history = history(&restate, "s-cancel").await;
    let results = tool_results(&history);
    assert_eq!(results.len(), 2, "every call has its result: {history}");
    for result in &results {
        assert_eq!(result["content"][0]["is_error"], true, "{result}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_on_two_workers_all_finish_with_valid_transcripts() {
    let Some(server) = server_or_skip() else {
        return;
    };
    let mock = MockServer::start(script(json!([
        {"tool_calls": [
            {"id": "call_1", "name": "shell", "arguments": {"command": "echo one"}},
            {"id": "call_2", "name": "read_file", "arguments": {"path": "README.md"}}
        ]},
        {"text": "Finished."}
    ])));
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    std::fs::write(spec.workspace.join("README.md"), "hello\n").unwrap();
    let restate = Restate::start(&server).await;
    let a = spec.start(free_port(), "a").await;
    let b = spec.start(free_port(), "b").await;
    let balancer = support::balancer::Balancer::start(vec![a.addr, b.addr]).await;
    restate.register(&format!("http://{}", balancer.addr)).await;

    let sessions = 50;
    let mut runs = Vec::new();
    for i in 0..sessions {
        runs.push(restate.spawn_run(&format!("fan-{i}"), &format!("session {i}")));
    }
    for run in runs {
        let output = tokio::time::timeout(Duration::from_secs(300), run)
            .await
            .expect("every run finishes")
            .unwrap();
        assert_eq!(output["final_text"], "Finished.", "{output}");
    }
    assert_eq!(
        mock.request_count(),
        2 * sessions,
        "two model calls per session"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    for i in 0..sessions {
        let history = history(&restate, &format!("fan-{i}")).await;
        let ids: Vec<_> = tool_results(&history)
            .iter()
            .map(|m| m["content"][0]["call_id"].as_str().unwrap_or("").to_owned())
            .collect();
        assert_eq!(ids, ["call_1", "call_2"], "session {i}: {history}");
    }
    let counts: Vec<usize> = balancer
        .per_backend
        .iter()
        .map(|c| c.load(std::sync::atomic::Ordering::Relaxed))
        .collect();
    assert!(
        counts.iter().all(|&c| c > 0),
        "load spread over both workers: {counts:?}"
    );
}

/// The number of `ToolExecutor` invocations the server has completed.
async fn completed_tool_calls(restate: &Restate) -> u64 {
    let rows = restate
        .query(
            "SELECT count(*) AS n FROM sys_invocation \
             WHERE target_service_name = 'ToolExecutor' AND status = 'completed'",
        )
        .await;
    rows[0]["n"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_inside_a_task_child_resumes_it_and_the_parent_gets_one_result() {
    let Some(server) = server_or_skip() else {
        return;
    };
    // One queue for the parent's and the child's requests, in the order they must come: a
    // repeated request would take the next entry and derail the run.
    let mock = MockServer::start(
        Script::from_json(
            &json!({"mode": "sequential", "turns": [
                {"tool_calls": [{"id": "call_task", "name": "task",
                                 "arguments": {"prompt": "count, then wait"}}],
                 "usage": {"input_tokens": 1, "output_tokens": 2}},
                {"tool_calls": [
                    {"id": "call_fast", "name": "shell",
                     "arguments": {"command": "echo once >> child-counter.txt"}},
                    {"id": "call_slow", "name": "shell",
                     "arguments": {"command": "touch slow-started; sleep 4; echo slept"}}
                 ],
                 "usage": {"input_tokens": 10, "output_tokens": 20}},
                {"text": "Child done.", "usage": {"input_tokens": 100, "output_tokens": 200}},
                {"text": "Parent done.", "usage": {"input_tokens": 1000, "output_tokens": 2000}}
            ]})
            .to_string(),
        )
        .unwrap(),
    );
    let dir = tempfile::tempdir().unwrap();
    let spec = spec(&mock, dir.path(), "allow");
    let restate = Restate::start(&server).await;
    let port = free_port();
    let mut worker = spec.start(port, "a").await;
    restate.register(&format!("http://{}", worker.addr)).await;

    let run = restate.spawn_run("s-task", "delegate");
    // The child's first batch: its fast call is done (its result is journaled by the engine),
    // its slow call runs, and its second model call has not been made.
    let slow = spec.workspace.join("slow-started");
    wait_until(
        "the child's fast call to finish",
        Duration::from_secs(60),
        async || slow.exists() && completed_tool_calls(&restate).await >= 1,
    )
    .await;
    assert_eq!(
        mock.request_count(),
        2,
        "the parent's and the child's first calls"
    );
    worker.proc.kill();
    let _worker = spec.start(port, "b").await;
    let output = finished(run, "the parent finishes after the restart").await;

    assert_eq!(output["final_text"], "Parent done.", "{output}");
    assert_eq!(output["stop"]["reason"], "done", "{output}");
    assert_eq!(
        mock.request_count(),
        4,
        "one request per scripted turn: no model call of the child or the parent repeated"
    );
    assert!(mock.violations().is_empty(), "{:?}", mock.violations());
    let counter = std::fs::read_to_string(spec.workspace.join("child-counter.txt")).unwrap();
    assert_eq!(
        counter, "once\n",
        "the child's finished call ran exactly once"
    );
    // The child's tokens are in the parent's totals.
    assert_eq!(output["usage"]["input_tokens"], 1111, "{output}");
    assert_eq!(output["usage"]["output_tokens"], 2222, "{output}");

    // The parent has exactly one result for its task call: the child's answer.
    let parent = history(&restate, "s-task").await;
    let results = tool_results(&parent);
    assert_eq!(results.len(), 1, "{parent}");
    assert_eq!(results[0]["content"][0]["call_id"], "call_task", "{parent}");
    assert!(results[0].to_string().contains("Child done."), "{parent}");
    // The child ran as its own object, keyed by the parent's key and the call id, once.
    let child = history(&restate, "s-task:call_task").await;
    let child_results = tool_results(&child);
    assert_eq!(
        child_results.len(),
        2,
        "every child call answered once: {child}"
    );
    assert!(child.to_string().contains("Child done."), "{child}");
    let children = restate
        .query(
            "SELECT count(*) AS n FROM sys_invocation \
             WHERE target_service_name = 'AgentSession' AND target_handler_name = 'task'",
        )
        .await;
    assert_eq!(children[0]["n"], 1, "one child invocation: {children:?}");
    let keys = restate
        .query(
            "SELECT target_service_key AS key FROM sys_invocation \
             WHERE target_handler_name = 'task'",
        )
        .await;
    assert_eq!(keys[0]["key"], "s-task:call_task", "{keys:?}");
}
