//! The model's plan through the CLI and the mock model server: `update_plan` is offered by
//! default, a valid plan becomes a `plan_update` line with `--json` (schema-checked) and a
//! checklist in human output, an invalid one (two steps in progress) is refused with a clear
//! error and not shown, and `sessions show` ends with the latest plan.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::schema::schema_checked;
use support::{Scratch, assert_ok};

fn script() -> Script {
    Script::from_value(json!({"turns": [
        {"tool_calls": [{"id": "call_plan", "name": "update_plan", "arguments": {
            "explanation": "Small fix.",
            "plan": [
                {"step": "Read the code", "status": "completed"},
                {"step": "Fix the bug", "status": "in_progress"},
                {"step": "Run the tests", "status": "pending"}
            ]}}]},
        {"tool_calls": [{"id": "call_bad", "name": "update_plan", "arguments": {
            "plan": [
                {"step": "One", "status": "in_progress"},
                {"step": "Two", "status": "in_progress"}
            ]}}]},
        {"text": "done"}
    ]}))
    .unwrap()
}

#[test]
fn a_plan_is_a_json_line_and_an_invalid_one_is_refused() {
    let scratch = Scratch::new();
    let server = MockServer::start(script());
    let out = scratch
        .run_cmd(&server)
        .args(["--json", "Fix it."])
        .output()
        .unwrap();
    assert_ok(&out);
    let lines = schema_checked(&out.stdout);
    let plans: Vec<&Value> = lines
        .iter()
        .filter(|l| l["type"] == "plan_update")
        .collect();
    assert_eq!(plans.len(), 1, "only the valid plan is sent: {plans:?}");
    assert_eq!(plans[0]["explanation"], "Small fix.");
    assert_eq!(
        plans[0]["plan"][1],
        json!({"step": "Fix the bug", "status": "in_progress"})
    );
    let bad = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end" && l["call"]["id"] == "call_bad")
        .unwrap();
    assert_eq!(bad["result"]["is_error"], true);
    let text = bad["result"]["content"].as_str().unwrap();
    assert!(
        text.contains("at most one step may be in_progress"),
        "{text}"
    );

    let session = lines[0]["session_id"].as_str().unwrap();
    let shown = scratch.plain(&["sessions", "show", session]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    let tail = &shown[shown.rfind("Plan\n").expect("no plan in sessions show")..];
    assert!(tail.contains("[x] Read the code\n"), "{tail}");
    assert!(tail.contains("[>] Fix the bug\n"), "{tail}");
    assert!(tail.contains("[ ] Run the tests\n"), "{tail}");
}

#[test]
fn human_output_shows_the_plan_as_a_checklist() {
    let scratch = Scratch::new();
    let server = MockServer::start(script());
    let out = scratch.run_cmd(&server).arg("Fix it.").output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(
            "Plan\nSmall fix.\n  [x] Read the code\n  [>] Fix the bug\n  [ ] Run the tests\n"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains("[>] Two"), "{stdout}");
}

#[test]
fn plan_mode_offers_only_read_only_tools_and_update_plan() {
    let scratch = Scratch::new();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "call_write", "name": "write_file",
                             "arguments": {"path": "x.txt", "content": "no"}}]},
            {"tool_calls": [{"id": "call_sh", "name": "shell",
                             "arguments": {"command": "echo no > y.txt"}}]},
            {"tool_calls": [{"id": "call_plan", "name": "update_plan", "arguments": {
                "plan": [{"step": "Change x.txt", "status": "pending"}]}}]},
            {"text": "The plan is ready."}
        ]}))
        .unwrap(),
    );
    let out = scratch
        .run_cmd(&server)
        .args(["--json", "--approve", "allow", "--mode", "plan", "Plan it."])
        .output()
        .unwrap();
    assert_ok(&out);
    let body = &server.requests()[0].body;
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    for offered in [
        "read_file",
        "list_dir",
        "find_files",
        "grep",
        "shell",
        "update_plan",
    ] {
        assert!(names.contains(&offered), "{offered} missing from {names:?}");
    }
    for hidden in ["write_file", "edit_file"] {
        assert!(
            !names.contains(&hidden),
            "{hidden} offered in plan mode: {names:?}"
        );
    }
    assert!(body.to_string().contains("You are in plan mode"), "{body}");
    assert!(
        !scratch.ws().join("x.txt").exists(),
        "plan mode wrote a file"
    );
    // The shell is read-only where the kernel can enforce it (Landlock).
    if agentloop::builtin::sandbox_support(agentloop::builtin::SandboxMode::ReadOnly).is_ok() {
        assert!(
            !scratch.ws().join("y.txt").exists(),
            "the shell wrote in plan mode"
        );
    }
    let lines = schema_checked(&out.stdout);
    assert!(lines.iter().any(|l| l["type"] == "plan_update"));
}
