//! Agent runs on a real Restate server with real worker processes: a worker killed mid-batch
//! loses nothing and repeats nothing; many sessions spread over two workers; an approval parks a
//! run that another worker resumes; cancellation aborts a run mid-batch.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::time::Duration;

use agentloop_testkit::{MockServer, Script};
use serde_json::json;
use support::{Restate, WorkerSpec, eventually, free_port, server_or_skip};

fn script(turns: serde_json::Value) -> Script {
    Script::from_json(&json!({ "turns": turns }).to_string()).unwrap()
}

fn spec(mock: &MockServer, dir: &std::path::Path, approve: &'static str) -> WorkerSpec {
    let workspace = dir.join("ws");
    std::fs::create_dir_all(&workspace).unwrap();
    WorkerSpec {
        model_base: mock.openai_base_url(),
        workspace,
        store: dir.join("sessions.db"),
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
    let restate = Restate::start(&server).await;
    let port = free_port();
    let mut worker = spec.start(port, "a").await;
    restate.register(&format!("http://{}", worker.addr)).await;

    let run = tokio::spawn({
        let ingress = restate.ingress.clone();
        let http = restate.http.clone();
        async move {
            http.post(format!("{ingress}/AgentSession/s-death/run"))
                .json(&json!({"prompt": "count, then wait"}))
                .send()
                .await
                .unwrap()
                .json::<serde_json::Value>()
                .await
                .unwrap()
        }
    });

    let ws = spec.workspace.clone();
    eventually("the slow call to start", Duration::from_secs(60), || {
        ws.join("slow-started").exists()
    })
    .await;
    // The worker dies while the slow call runs; the fast call's result is already journaled.
    worker.proc.kill();
    let _worker = spec.start(port, "b").await;

    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .expect("the run finishes after the restart")
        .unwrap();
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

    let history = restate
        .call("AgentSession/s-death/history", json!(null))
        .await
        .unwrap();
    let results: Vec<_> = history
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 2, "every call answered once: {history}");
}
