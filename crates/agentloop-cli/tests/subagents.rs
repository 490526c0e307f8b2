//! Sub-agents through the real binary against the testkit mock model: agent files (trusted and
//! untrusted workspaces), the built-in `explore` agent, the `task` tool, and the `--json` fields
//! of a child's events. Parent and child share the mock's one script, in request order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("config").join("agentloop")).unwrap();
        std::fs::write(
            dir.path().join("ws").join("notes.txt"),
            "the answer is 42\n",
        )
        .unwrap();
        Scratch { dir }
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    fn agent_file(&self, dir: &str, name: &str, text: &str) {
        let dir = self.ws().join(dir).join("agents");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
    }
    fn run(&self, server: &MockServer, args: &[&str], prompt: &str) -> Output {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentloop"));
        for var in [
            "OPENAI_BASE_URL",
            "AGENTLOOP_DB",
            "AGENTLOOP_MODEL",
            "AGENTLOOP_PROFILE",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("OPENAI_API_KEY", "dummy")
            .env("XDG_DATA_HOME", self.path("data"))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("NO_COLOR", "1")
            .arg("--db")
            .arg(self.path("sessions.db"))
            .args(["run", "--model", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("--workspace")
            .arg(self.ws())
            .args(args)
            .arg(prompt)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn server(script: Value) -> MockServer {
    MockServer::start(Script::from_value(script).unwrap())
}

/// Every stdout line, each checked against `schema/events.schema.json`.
fn events(out: &Output) -> Vec<Value> {
    let schema: Value = serde_json::from_str(include_str!("../schema/events.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    text(&out.stdout)
        .lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{line}\n{}", errors.join("\n"));
            value
        })
        .collect()
}

/// The parent's `task` call, the child's `read_file` call and answer, the parent's answer.
fn delegation(agent: &str) -> Value {
    json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": agent, "prompt": "What does notes.txt say?"}}]},
        {"tool_calls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "notes.txt says the answer is 42."},
        {"text": "Done."}
    ]})
}

/// The tool names offered in request `i`.
fn tool_names(server: &MockServer, i: usize) -> Vec<String> {
    server.requests()[i].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn task_result(lines: &[Value]) -> Value {
    lines
        .iter()
        .find(|e| {
            e["type"] == "tool_execution_end"
                && e["call"]["id"] == "call_task"
                && e.get("parent_call_id").is_none()
        })
        .expect("the task call ended")["result"]
        .clone()
}

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews notes carefully\ntools: read_file, grep\nmodel: openai:mock-small\nmax_turns: 4\n---\nYou are the REVIEWER-INSTRUCTIONS agent.\n";

#[test]
fn an_agent_file_in_a_trusted_workspace_runs_as_a_child_with_tagged_json_events() {
    let scratch = Scratch::new();
    scratch.agent_file(".agentloop", "reviewer", REVIEWER);
    let server = server(delegation("reviewer"));
    let out = scratch.run(&server, &["--json", "--trust-project"], "Delegate it.");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = events(&out);

    // The parent sees one `task` tool that lists the agents.
    let parent_tools = tool_names(&server, 0);
    assert!(
        parent_tools.contains(&"task".to_owned()),
        "{parent_tools:?}"
    );
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("reviewer") && first.contains("Reviews notes carefully"),
        "{first}"
    );
    assert!(first.contains("explore"), "{first}");
    // The child got its instructions, the prompt, and only the tools its file names.
    let child = server.requests()[1].body.to_string();
    assert!(child.contains("REVIEWER-INSTRUCTIONS"), "{child}");
    assert!(child.contains("What does notes.txt say?"), "{child}");
    let mut child_tools = tool_names(&server, 1);
    child_tools.sort();
    assert_eq!(child_tools, ["grep", "read_file"]);
    // Its file names a model of the same provider; the parent keeps its own.
    assert_eq!(server.requests()[1].body["model"], "mock-small");
    assert_eq!(server.requests()[0].body["model"], "mock");

    // The child's answer is the task call's result.
    let result = task_result(&lines);
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["content"], "notes.txt says the answer is 42.");

    // The child's events carry the task call and the agent's name, and keep their fields.
    let child_lines: Vec<&Value> = lines
        .iter()
        .filter(|e| e.get("parent_call_id").is_some())
        .collect();
    assert!(
        child_lines
            .iter()
            .all(|e| e["parent_call_id"] == "call_task" && e["agent"] == "reviewer")
    );
    assert_eq!(child_lines.first().unwrap()["type"], "agent_start");
    let read = child_lines
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the child's read_file call");
    assert_eq!(read["call"]["tool_name"], "read_file");
    assert!(
        read["result"]["content"]
            .as_str()
            .unwrap()
            .contains("the answer is 42")
    );
    let child_end = child_lines
        .iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap();
    assert_eq!(child_end["stop"]["reason"], "done");
    assert_eq!(child_end["turns"], 2);
    // The parent's own stream ends once, untagged, counting only its own turns.
    let ends: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "agent_end" && e.get("parent_call_id").is_none())
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["turns"], 2);
    assert_eq!(ends[0]["tool_calls"], 1);
}

#[test]
fn the_built_in_explore_agent_needs_no_file_and_gets_read_only_tools() {
    let scratch = Scratch::new();
    let server = server(delegation("explore"));
    let out = scratch.run(&server, &["--json"], "Explore.");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = events(&out);
    assert_eq!(
        task_result(&lines)["content"],
        "notes.txt says the answer is 42."
    );
    let child_tools = tool_names(&server, 1);
    assert!(
        child_tools.contains(&"read_file".to_owned()),
        "{child_tools:?}"
    );
    for mutating in ["write_file", "edit_file", "shell", "job_kill", "task"] {
        assert!(
            !child_tools.contains(&mutating.to_owned()),
            "{child_tools:?}"
        );
    }
}

#[test]
fn an_untrusted_workspaces_agent_file_is_ignored_and_unknown_agents_list_the_known_ones() {
    let scratch = Scratch::new();
    scratch.agent_file(".claude", "reviewer", REVIEWER);
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "reviewer", "prompt": "Review."}}]},
        {"text": "Done."}
    ]}));
    let out = scratch.run(&server, &["--json"], "Delegate it.");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = server.requests()[0].body.to_string();
    assert!(!first.contains("Reviews notes carefully"), "{first}");
    let result = task_result(&events(&out));
    assert_eq!(result["is_error"], true, "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("unknown agent") && content.contains("explore"),
        "{content}"
    );
    // Only two requests: no child ran.
    assert_eq!(server.requests().len(), 2);

    // Trusted, the same `.claude/agents` file is used.
    let server = self::server(delegation("reviewer"));
    let out = scratch.run(&server, &["--json", "--trust-project"], "Delegate it.");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(task_result(&events(&out))["is_error"], false);
}

#[test]
fn the_human_output_shows_a_childs_tool_calls_indented_under_its_agent() {
    let scratch = Scratch::new();
    let server = server(delegation("explore"));
    let out = scratch.run(&server, &[], "Explore.");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("[explore]"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("  ") && line.contains("read_file"),
        "{line}"
    );
}

#[test]
fn in_plan_mode_an_agent_cannot_write_whatever_its_file_lists() {
    let scratch = Scratch::new();
    scratch.agent_file(
        ".agentloop",
        "writer",
        "---\ndescription: Writes files\ntools: write_file, read_file\n---\nWrite what you are asked.\n",
    );
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "writer", "prompt": "Write out.txt."}}]},
        {"tool_calls": [{"id": "call_write", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "I could not write."},
        {"text": "Done."}
    ]}));
    let out = scratch.run(
        &server,
        &["--json", "--trust-project", "--mode", "plan"],
        "Delegate it.",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("out.txt").exists());
    let child_tools = tool_names(&server, 1);
    assert_eq!(child_tools, ["read_file"]);
}
