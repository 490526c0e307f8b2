//! `agentloop run` for scripts, run for real against a testkit mock server: `--quiet`, the
//! `--json` session id and `result` event, `--output-last-message`, and a prompt combined with
//! piped standard input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use agentloop_testkit::MockServer;
use serde_json::{Value, json};

use support::{
    COMPACTING_FLAGS, Scratch, assert_stderr_has, compacting_server, list_call, output_with_stdin,
    server, text,
};

impl Scratch {
    fn cmd_with(&self, server: &MockServer, args: &[&str]) -> Command {
        let mut cmd = self.run_cmd(server);
        cmd.args(args);
        cmd
    }
    fn run_args(&self, server: &MockServer, args: &[&str]) -> Output {
        self.cmd_with(server, args).output().unwrap()
    }
}

fn tool_then_answer() -> Value {
    json!({"turns": [
        {"text": "Let me look.", "tool_calls": [{"id": "c1", "name": "list_dir", "arguments": {"path": "."}}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "The final answer.", "usage": {"input_tokens": 150, "output_tokens": 6}}
    ]})
}

#[test]
fn quiet_prints_only_the_final_answer_on_stdout() {
    let scratch = Scratch::new();
    let server = server(tool_then_answer());
    let out = scratch.run_args(&server, &["-q", "what is here?"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "The final answer.\n");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("list_dir"), "progress on stderr: {stderr}");
    assert!(stderr.contains("Let me look."), "{stderr}");
}

#[test]
fn json_has_the_session_id_and_ends_with_a_result() {
    let scratch = Scratch::new();
    let server = server(tool_then_answer());
    let out = scratch.run_args(&server, &["--json", "--session", "sess-1", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events[0]["type"], "agent_start");
    assert_eq!(events[0]["session_id"], "sess-1");
    let result = events.last().unwrap();
    assert_eq!(result["type"], "result", "{result}");
    assert_eq!(result["session_id"], "sess-1");
    assert_eq!(result["text"], "The final answer.");
    assert_eq!(result["stop"]["reason"], "done");
    assert_eq!(result["success"], true);
    assert_eq!(result["turns"], 2);
    assert_eq!(result["usage"]["input_tokens"], 250);
    assert_eq!(result["usage"]["output_tokens"], 16);
    assert_eq!(events[events.len() - 2]["type"], "agent_end");
}

#[test]
fn a_failed_run_still_ends_with_a_result() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "unreachable", "faults": [{"status": 401}]}]}));
    let out = scratch.run_args(&server, &["--json", "go"]);
    assert_eq!(out.status.code(), Some(1));
    let last: Value = serde_json::from_str(text(&out.stdout).lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "result");
    assert_eq!(last["success"], false);
    assert_eq!(last["stop"]["reason"], "model_error");
}

#[test]
fn output_last_message_writes_the_answer() {
    let scratch = Scratch::new();
    let server = server(tool_then_answer());
    let file = scratch.dir.path().join("last.txt");
    let out = scratch.run_args(
        &server,
        &["--output-last-message", file.to_str().unwrap(), "go"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "The final answer.");
    assert!(text(&out.stdout).contains("The final answer."));
}

#[test]
fn piped_stdin_is_added_to_the_prompt_as_context() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "Seen."}]}));
    let out = output_with_stdin(
        &mut scratch.cmd_with(&server, &["-q", "explain this log"]),
        b"error: disk full on /dev/sda1\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Seen.\n");
    let body = server.requests()[0].body["messages"].to_string();
    assert!(body.contains("explain this log"), "{body}");
    assert!(
        body.contains("<stdin>\\nerror: disk full on /dev/sda1\\n</stdin>"),
        "{body}"
    );
}

#[test]
fn quiet_and_json_conflict() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "x"}]}));
    let out = scratch.run_args(&server, &["-q", "--json", "go"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(server.requests().is_empty());
}

#[test]
fn project_instructions_reach_the_system_prompt_and_the_header() {
    let scratch = Scratch::new();
    // The scratch directory is the repository; the workspace is a directory inside it.
    std::fs::create_dir(scratch.dir.path().join(".git")).unwrap();
    std::fs::write(
        scratch.dir.path().join("AGENTS.md"),
        "Always answer in haiku.",
    )
    .unwrap();
    std::fs::write(scratch.ws().join("CLAUDE.md"), "Prefer tabs.").unwrap();
    let server = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    let mut cmd = scratch.cmd_with(&server, &["go"]);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("project instructions:"), "{stderr}");
    assert!(
        stderr.contains("AGENTS.md") && stderr.contains("CLAUDE.md"),
        "{stderr}"
    );
    let body = server.requests()[0].body["messages"].to_string();
    let haiku = body
        .find("Always answer in haiku.")
        .expect("root file sent");
    let tabs = body.find("Prefer tabs.").expect("nearest file sent");
    assert!(haiku < tabs, "nearest last: {body}");

    let out = scratch.run_args(&server, &["--no-project-instructions", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("project instructions"));
    let body = server.requests()[1].body["messages"].to_string();
    assert!(!body.contains("haiku"), "{body}");
}

#[test]
fn run_compacts_at_the_threshold_and_sessions_show_has_both_views() {
    let scratch = Scratch::new();
    let server = compacting_server();
    let out = scratch.run_args(
        &server,
        &[
            &COMPACTING_FLAGS[..],
            &["--session", "s1", "--title", "t", "list twice"],
        ]
        .concat(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_stderr_has(&out, "context compacted");
    assert_eq!(server.requests().len(), 4);
    let last = server.requests()[3].body["messages"].to_string();
    assert!(
        last.contains("SUMMARY-OF-EARLY-WORK") && !last.contains("\"c1\""),
        "{last}"
    );

    let full = scratch.plain(&["sessions", "show", "s1"]);
    let full = text(&full.stdout);
    assert!(
        full.contains("list twice") && full.contains("SUMMARY-OF-EARLY-WORK"),
        "{full}"
    );
    let context = scratch.plain(&["sessions", "show", "s1", "--context"]);
    let context = text(&context.stdout);
    assert!(context.contains("SUMMARY-OF-EARLY-WORK"), "{context}");
    assert!(
        !context.contains("list twice"),
        "the prompt was summarised: {context}"
    );
}

#[test]
fn compact_subcommand_summarises_a_stored_session() {
    let scratch = Scratch::new();
    let server = server(json!({"mode": "sequential", "turns": [
        list_call("c1", 10), list_call("c2", 10), list_call("c3", 10), {"text": "Answer one."},
        {"text": "HAND-MADE SUMMARY"},
        {"text": "Answer two."}
    ]}));
    let out = scratch.run_args(&server, &["--session", "s2", "--no-compaction", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = scratch.plain(&[
        "compact",
        "s2",
        "--model",
        "openai:mock",
        "--base-url",
        &server.openai_base_url(),
        "--keep-turns",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("older messages summarised"),
        "{}",
        text(&out.stdout)
    );
    let out = scratch.run_args(&server, &["--session", "s2", "again"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = server.requests().last().unwrap().body["messages"].to_string();
    assert!(
        body.contains("HAND-MADE SUMMARY") && body.contains("Answer one."),
        "{body}"
    );
    assert!(!body.contains("\"c1\""), "{body}");
}

#[test]
fn compact_without_a_model_uses_the_sessions_own_model_and_server() {
    let scratch = Scratch::new();
    let server = server(json!({"mode": "sequential", "turns": [
        list_call("c1", 10), list_call("c2", 10), {"text": "Answer one."},
        {"text": "SUMMARY BY THE SESSION'S MODEL"}
    ]}));
    let out = scratch.run_args(&server, &["--session", "s3", "--no-compaction", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // No --model and no --base-url: the session recorded both (openai:mock on the mock
    // server), and the mock server is the only one that answers here.
    let out = scratch.plain(&["compact", "s3", "--keep-turns", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("older messages summarised"));
    let summary_request = server.requests().last().unwrap().body.clone();
    assert_eq!(summary_request["model"], "mock", "{summary_request}");
}
