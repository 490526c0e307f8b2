//! `agentloop run --output-schema FILE.json`, run for real against a testkit mock server: stdout
//! carries only the validated JSON (the run's text goes to stderr), `--json` adds it as the last
//! line after the events, a model that never produces a valid value exits 1 with the
//! violations, and a bad schema file is a usage error that creates no session.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::{Scratch, text};

impl Scratch {
    fn schema(&self, schema: &Value) -> PathBuf {
        let path = self.path("ticket.json");
        std::fs::write(&path, schema.to_string()).unwrap();
        path
    }
    fn file_ticket(&self, server: &MockServer, args: &[&str]) -> Output {
        self.run_cmd(server)
            .args(args)
            .arg("File a ticket for the notes")
            .output()
            .unwrap()
    }
}

fn server(turns: Value) -> MockServer {
    MockServer::start(Script::from_value(json!({ "turns": turns })).unwrap())
}

fn ticket_schema() -> Value {
    json!({
        "title": "ticket",
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5}
        },
        "required": ["title", "priority"]
    })
}

#[test]
fn stdout_is_only_the_validated_json() {
    let scratch = Scratch::new();
    std::fs::write(scratch.dir.path().join("ws/notes.txt"), "disk is full\n").unwrap();
    let schema = scratch.schema(&ticket_schema());
    let server = server(json!([
        {"text": "Reading the notes.",
         "tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "{\"title\": \"Disk full\", \"priority\": 9}"},
        {"text": "{\"title\": \"Disk full\", \"priority\": 1}"}
    ]));
    let out = scratch.file_ticket(&server, &["--output-schema", schema.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(stdout, "{\"priority\":1,\"title\":\"Disk full\"}\n");
    // The run's text and tool lines went to stderr.
    let stderr = text(&out.stderr);
    assert!(stderr.contains("Reading the notes."), "{stderr}");
    assert!(stderr.contains("read_file"), "{stderr}");
    // Native structured output on the Chat wire; the repair request named the violation.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].body["response_format"]["json_schema"]["name"],
        "ticket"
    );
    assert!(requests[2].body.to_string().contains("$.priority"));
}

#[test]
fn json_mode_appends_the_output_after_the_events() {
    let scratch = Scratch::new();
    let schema = scratch.schema(&ticket_schema());
    let server = server(json!([
        {"tool_calls": [{"id": "f1", "name": "final_result",
                         "arguments": {"title": "Disk full", "priority": 2}}]}
    ]));
    let out = scratch.file_ticket(
        &server,
        &[
            "--json",
            "--output-strategy",
            "tool",
            "--output-schema",
            schema.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "agent_start");
    // Events, then the validated output, then the closing `result` line.
    assert_eq!(lines[lines.len() - 3]["type"], "agent_end");
    assert_eq!(
        lines[lines.len() - 2],
        json!({"type": "output", "output": {"title": "Disk full", "priority": 2}})
    );
    assert_eq!(lines[lines.len() - 1]["type"], "result");
    // The final tool was offered next to the built-in tools.
    let tools = server.requests()[0].body["tools"].to_string();
    assert!(tools.contains("final_result"), "{tools}");
}

#[test]
fn never_valid_output_exits_nonzero_with_the_violations() {
    let scratch = Scratch::new();
    let schema = scratch.schema(&ticket_schema());
    let server = server(json!([
        {"text": "{\"title\": 5}"},
        {"text": "{\"title\": \"x\"}"}
    ]));
    let out = scratch.file_ticket(
        &server,
        &[
            "--output-retries",
            "1",
            "--output-schema",
            schema.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "", "nothing on stdout");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no valid output"), "{stderr}");
    assert!(
        stderr.contains("\"priority\" is a required property"),
        "{stderr}"
    );
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_bad_schema_file_is_a_usage_error() {
    let scratch = Scratch::new();
    let server = server(json!([{"text": "{}"}]));
    let path = scratch.dir.path().join("bad.json");
    std::fs::write(&path, "{\"type\": 12}").unwrap();
    let out = scratch.file_ticket(&server, &["--output-schema", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--output-schema"));
    std::fs::write(&path, "not json").unwrap();
    let out = scratch.file_ticket(&server, &["--output-schema", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("is not JSON"));
    assert_eq!(server.requests().len(), 0);
    // Checked before the session store is opened: nothing was created.
    assert!(!scratch.dir.path().join("sessions.db").exists());
}
