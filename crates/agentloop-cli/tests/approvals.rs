//! `--approve defer` end to end with the real binary: a run stops with exit code 3 after the
//! read-only call, other processes list / approve / deny, and `agentloop resume` runs the
//! approved call and continues — against a testkit mock server whose invariant check rejects
//! any request where a tool call lacks exactly one result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::Scratch;

impl Scratch {
    fn agent(&self, server: &MockServer, args: &[&str]) -> Output {
        self.cmd()
            .args(args)
            .args(["--model", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("--workspace")
            .arg(self.ws())
            .output()
            .unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}")))
        .collect()
}

fn script() -> Value {
    json!({"turns": [
        {"tool_calls": [
            {"id": "c_read", "name": "read_file", "arguments": {"path": "notes.txt"}},
            {"id": "c_w1", "name": "write_file", "arguments": {"path": "out.txt", "content": "one\n"}},
            {"id": "c_w2", "name": "write_file", "arguments": {"path": "other.txt", "content": "two\n"}}
        ]},
        {"text": "Done."}
    ], "mode": "sequential"})
}

#[test]
fn defer_stops_with_exit_3_then_approve_deny_and_resume_in_new_processes() {
    let scratch = Scratch::with_notes();
    let server = MockServer::start(Script::from_value(script()).unwrap());

    let out = scratch.agent(
        &server,
        &[
            "run",
            "--json",
            "--approve",
            "defer",
            "Read the notes, write two files",
        ],
    );
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let events = json_lines(&text(&out.stdout));
    let requested: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .collect();
    assert_eq!(requested.len(), 2, "{events:#?}");
    let session = requested[0]["session_id"].as_str().unwrap().to_owned();
    assert_eq!(requested[0]["call_id"], "c_w1");
    assert_eq!(requested[0]["tool_name"], "write_file");
    assert_eq!(
        requested[1]["arguments"],
        json!({"path": "other.txt", "content": "two\n"})
    );
    // `--json` ends with the `agent_end` event, then the `result` summary line.
    assert_eq!(events.last().unwrap()["type"], "result");
    let last = &events[events.len() - 2];
    assert_eq!(last["type"], "agent_end");
    assert_eq!(last["stop"]["reason"], "awaiting_approval");
    assert!(!scratch.ws().join("out.txt").exists());
    // The read-only call ran.
    assert!(events.iter().any(|e| e["type"] == "tool_execution_end"
        && e["call"]["id"] == "c_read"
        && e["result"]["is_error"] == false));

    let listed = scratch.plain(&["approvals", "list", "--json"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listed = json_lines(&text(&listed.stdout));
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["session_id"], session.as_str());
    let human = scratch.plain(&["approvals", "list", &session]);
    assert!(
        text(&human.stdout).contains("other.txt"),
        "{}",
        text(&human.stdout)
    );

    let approved = scratch.plain(&["approve", &session[..8], "c_w1"]);
    assert!(approved.status.success(), "{}", text(&approved.stderr));
    let denied = scratch.plain(&["deny", &session, "c_w2", "--reason", "not that file"]);
    assert!(denied.status.success(), "{}", text(&denied.stderr));
    let unknown = scratch.plain(&["approve", &session, "nope"]);
    assert_eq!(unknown.status.code(), Some(1));

    let resumed = scratch.agent(&server, &["resume", &session, "--json"]);
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "stderr: {}",
        text(&resumed.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).unwrap(),
        "one\n"
    );
    assert!(!scratch.ws().join("other.txt").exists());
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = requests[1].body.to_string();
    assert!(body.contains("not that file"), "{body}");
    let events = json_lines(&text(&resumed.stdout));
    assert_eq!(events.last().unwrap()["stop"]["reason"], "done");

    let listed = scratch.plain(&["approvals", "list", "--json"]);
    assert!(text(&listed.stdout).trim().is_empty());
    let again = scratch.agent(&server, &["resume", &session]);
    assert_eq!(again.status.code(), Some(1), "nothing left to resume");
}

#[test]
fn text_mode_prints_the_pending_calls_and_run_continue_resumes() {
    let scratch = Scratch::with_notes();
    let server = MockServer::start(Script::from_value(script()).unwrap());
    let out = scratch.agent(&server, &["run", "--approve", "defer", "Write two files"]);
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("awaiting approval (2 call(s))"), "{stdout}");
    assert!(
        stdout.contains("\"content\": \"two\\n\""),
        "full arguments: {stdout}"
    );
    let listed = json_lines(&text(
        &scratch.plain(&["approvals", "list", "--json"]).stdout,
    ));
    let session = listed[0]["session_id"].as_str().unwrap().to_owned();
    assert!(
        scratch
            .plain(&["approve", &session, "--all"])
            .status
            .success()
    );
    let cont = scratch.agent(
        &server,
        &["run", "--continue", "--approve", "defer", "And then?"],
    );
    assert_eq!(
        cont.status.code(),
        Some(0),
        "stderr: {}",
        text(&cont.stderr)
    );
    assert!(scratch.ws().join("out.txt").exists());
    assert!(scratch.ws().join("other.txt").exists());
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    // The new prompt was delivered (as steering) before the model's next request.
    let body = server.requests()[1].body.to_string();
    assert!(body.contains("And then?"), "{body}");
}
