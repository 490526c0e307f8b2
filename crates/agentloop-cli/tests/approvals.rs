//! `--approve defer` end to end with the real binary: a run stops with exit code 3 after the
//! read-only call, other processes list / approve / deny, and `agentloop resume` runs the
//! approved call and continues — against a testkit mock server whose invariant check rejects
//! any request where a tool call lacks exactly one result.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::{Scratch, text};

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
        stdout.contains("create other.txt") && stdout.contains("│ +two"),
        "the edit as a diff: {stdout}"
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

/// The lines `agentloop approvals` printed for call `call_id` (its header and its body, up to
/// the next call's header).
fn block_of<'a>(listing: &'a str, session: &str, call_id: &str) -> Vec<&'a str> {
    let mut lines = listing
        .lines()
        .skip_while(|l| !(l.starts_with(session) && l.split_whitespace().nth(1) == Some(call_id)));
    let Some(header) = lines.next() else {
        panic!("{call_id} is not listed:\n{listing}");
    };
    std::iter::once(header)
        .chain(lines.take_while(|l| !l.starts_with(session)))
        .collect()
}

/// Bare `agentloop approvals` lists every pending call: a command whole, an edit as a diff of
/// the file; an approved call reads as approved, not as awaiting; `approvals deny --all` denies
/// what is left, in every session.
#[test]
fn bare_approvals_lists_commands_whole_and_edits_as_diffs_and_deny_all_denies_the_rest() {
    let scratch = Scratch::with_notes();
    let command = "echo first\necho second\necho third";
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [
                {"id": "c_edit", "name": "edit_file",
                 "arguments": {"path": "notes.txt", "old_text": "milk", "new_text": "eggs"}},
                {"id": "c_sh", "name": "shell", "arguments": {"command": command}}
            ]},
            {"text": "Done."}
        ], "mode": "sequential"}))
        .unwrap(),
    );
    let out = scratch.agent(&server, &["run", "--approve", "defer", "Change the notes"]);
    assert_eq!(out.status.code(), Some(3), "stderr: {}", text(&out.stderr));
    let after_run = text(&out.stdout);
    assert!(after_run.contains("-remember the milk"), "{after_run}");

    let listed = scratch.plain(&["approvals"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listing = text(&listed.stdout);
    let session = listing.split_whitespace().next().unwrap().to_owned();
    let edit = block_of(&listing, &session, "c_edit").join("\n");
    assert!(edit.contains("│ -remember the milk"), "a diff: {edit}");
    assert!(edit.contains("│ +remember the eggs"), "a diff: {edit}");
    let shell = block_of(&listing, &session, "c_sh").join("\n");
    for line in command.lines() {
        assert!(shell.contains(&format!("│ {line}")), "whole: {shell}");
    }
    assert!(shell.contains("awaiting approval"), "{shell}");

    let approved = scratch.plain(&["approvals", "approve", &session, "c_sh"]);
    assert!(approved.status.success(), "{}", text(&approved.stderr));
    let listing = text(&scratch.plain(&["approvals", "list", &session]).stdout);
    let shell = block_of(&listing, &session, "c_sh").join("\n");
    assert!(shell.contains("[approved]"), "{shell}");
    assert!(
        !shell.contains("awaiting") && !shell.contains("needs a person's approval"),
        "an approved call reads as awaiting: {shell}"
    );
    assert!(
        block_of(&listing, &session, "c_edit")
            .join("\n")
            .contains("awaiting approval")
    );

    let denied = scratch.plain(&["approvals", "deny", "--all"]);
    assert!(denied.status.success(), "{}", text(&denied.stderr));
    assert_eq!(text(&denied.stdout).trim(), "denied c_edit");
    let listed = json_lines(&text(
        &scratch
            .plain(&["approvals", "list", &session, "--json"])
            .stdout,
    ));
    let status = |id: &str| {
        listed
            .iter()
            .find(|p| p["call_id"] == id)
            .map(|p| p["status"].clone())
            .unwrap()
    };
    assert_eq!(status("c_sh")["state"], "approved");
    assert_eq!(status("c_edit")["state"], "denied");
    assert_eq!(status("c_edit")["reason"], DENY_DEFAULT);
    let again = scratch.plain(&["approvals", "deny", "--all"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(text(&again.stderr).contains("no tool call awaits approval"));

    let resumed = scratch.agent(&server, &["resume", &session]);
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap(),
        "remember the milk\n"
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

const DENY_DEFAULT: &str = "the user denied this tool call; do not retry it";
