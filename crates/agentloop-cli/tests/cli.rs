//! The `agentloop` binary, run for real (`CARGO_BIN_EXE_agentloop`) against a testkit mock
//! server started in the test: JSON event output and exit codes, approval without a terminal,
//! session export/import, `--continue`, Ctrl-C, the demo, `models` and `--version`.
//!
//! Every child runs with stdin from /dev/null and stdout/stderr piped, i.e. without a terminal.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentloop_testkit::MockServer;
use serde_json::{Value, json};

const LABEL: &str =
    "scripted demo: the model is a mock server replaying a fixed script; the tools are real";

use support::{Scratch, assert_stderr_has, send_signal, server, stdout_lines, text};

/// The mock's base URL for a `--model` value: Anthropic's has no `/v1`, OpenAI's has.
fn base_url_for(model: &str, server: &MockServer) -> String {
    if model.starts_with("anthropic") || model.starts_with("gemini") {
        server.base_url()
    } else {
        server.openai_base_url()
    }
}

/// `agentloop run --json --model MODEL --base-url URL --workspace ws`, URL being `server` as
/// MODEL's provider takes it, with a key for each provider.
fn run_json_cmd(scratch: &Scratch, model: &str, server: &MockServer) -> Command {
    let mut cmd = scratch.cmd();
    cmd.env("ANTHROPIC_API_KEY", "dummy")
        .args(["run", "--json", "--model", model, "--base-url"])
        .arg(base_url_for(model, server))
        .arg("--workspace")
        .arg(scratch.ws());
    cmd
}

/// Every line parsed as JSON (panics on one that is not).
fn json_lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
        })
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

/// The event-order contract: one agent_start first, one agent_end last, turns balanced and not
/// nested, each tool execution started (inside a turn) before it ends and ended exactly once.
fn check_event_order(events: &[Value]) {
    // `run --json` closes with a `result` summary after the last event.
    let events = match events.split_last() {
        Some((last, rest)) if last["type"] == "result" => rest,
        _ => events,
    };
    let kinds = types(events);
    assert_eq!(kinds.first(), Some(&"agent_start"), "{kinds:?}");
    assert_eq!(kinds.last(), Some(&"agent_end"), "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "agent_start").count(), 1);
    assert_eq!(kinds.iter().filter(|k| **k == "agent_end").count(), 1);
    let mut in_turn = false;
    let mut started = HashSet::new();
    let mut ended = HashSet::new();
    for event in events {
        match event["type"].as_str().unwrap() {
            "turn_start" => {
                assert!(!in_turn, "nested turn_start: {kinds:?}");
                in_turn = true;
            }
            "turn_end" => {
                assert!(in_turn, "turn_end without turn_start: {kinds:?}");
                in_turn = false;
            }
            "tool_execution_start" => {
                assert!(in_turn, "tool execution outside a turn");
                assert!(started.insert(event["call"]["id"].as_str().unwrap().to_owned()));
            }
            "tool_execution_end" => {
                let id = event["call"]["id"].as_str().unwrap();
                // A call refused before it ran ends `blocked` and never started.
                if event["blocked"] == true {
                    assert!(!started.contains(id), "blocked call {id} had a start");
                } else {
                    assert!(started.contains(id), "end before start for {id}");
                    assert!(ended.insert(id.to_owned()), "{id} ended twice");
                }
            }
            _ => {}
        }
    }
    assert!(!in_turn, "unbalanced turns: {kinds:?}");
    assert_eq!(started, ended, "every started tool execution ends");
}

/// The last event before the closing `result` line (if any).
fn last_agent_event(events: &[Value]) -> &Value {
    match events.split_last().unwrap() {
        (last, rest) if last["type"] == "result" => rest.last().unwrap(),
        (last, _) => last,
    }
}

fn tool_ends<'a>(events: &'a [Value], tool: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["call"]["tool_name"] == tool)
        .collect()
}

/// A read_file call on notes.txt, then an answer.
fn read_notes_script() -> Value {
    json!({"turns": [
        {"text": "Reading the notes.", "chunk_size": 4,
         "tool_calls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "The notes say hello.", "chunk_size": 4,
         "usage": {"input_tokens": 150, "output_tokens": 6}}
    ]})
}

/// A workspace holding `notes.txt` ("hello from the notes") and a model playing
/// [`read_notes_script`].
fn notes_and_reader() -> (Scratch, MockServer) {
    let scratch = Scratch::new();
    std::fs::write(scratch.ws().join("notes.txt"), "hello from the notes\n").unwrap();
    (scratch, server(read_notes_script()))
}

#[test]
fn version_prints_the_version() {
    let out = Scratch::new().cmd().arg("--version").output().unwrap();
    assert!(out.status.success());
    // `agentloop 0.1.0 (commit 4a62da0c1e2f, built 2026-12-05)`; `unknown` outside git.
    let line = text(&out.stdout).trim().to_owned();
    let prefix = format!("agentloop {} (commit ", env!("CARGO_PKG_VERSION"));
    let rest = line
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{line}"));
    let (commit, date) = rest
        .split_once(", built ")
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        commit == "unknown" || commit.chars().all(|c| c.is_ascii_hexdigit()),
        "{line}"
    );
    let date = date.strip_suffix(')').unwrap_or_else(|| panic!("{line}"));
    assert_eq!(date.len(), 10, "{line}");
    assert_eq!(
        date.chars().filter(|c| *c == '-').count(),
        2,
        "YYYY-MM-DD: {line}"
    );
}

#[test]
fn run_json_prints_only_events_in_order_and_exits_zero() {
    let (scratch, server) = notes_and_reader();
    let out = scratch.run(&server, &["--json"], "What do the notes say?");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));

    let events = json_lines(&text(&out.stdout));
    check_event_order(&events);
    let kinds = types(&events);
    assert_eq!(kinds.iter().filter(|k| **k == "turn_start").count(), 2);
    assert!(kinds.contains(&"message_update"), "text is streamed");
    let reads = tool_ends(&events, "read_file");
    assert_eq!(reads.len(), 1);
    assert_eq!(reads[0]["result"]["is_error"], false);
    assert!(
        reads[0]["result"]["content"]
            .as_str()
            .unwrap()
            .contains("hello from the notes"),
        "the real file content: {}",
        reads[0]
    );
    let end = events.last().unwrap();
    assert_eq!(end["stop"]["reason"], "done");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[test]
fn every_provider_runs_the_same_conversation() {
    for (model, path) in [
        ("openai-responses:mock", "/v1/responses"),
        ("anthropic:mock", "/v1/messages"),
    ] {
        let (scratch, server) = notes_and_reader();
        // Anthropic's base URL has no /v1; OpenAI's has.
        let out = run_json_cmd(&scratch, model, &server)
            .arg("What do the notes say?")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{model}: {}", text(&out.stderr));
        let events = json_lines(&text(&out.stdout));
        check_event_order(&events);
        let reads = tool_ends(&events, "read_file");
        assert!(
            reads[0]["result"]["content"]
                .as_str()
                .unwrap()
                .contains("hello from the notes"),
            "{model}"
        );
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{model}");
        assert!(requests.iter().all(|r| r.path == path), "{model}");
        assert!(
            server.violations().is_empty(),
            "{model}: {:?}",
            server.violations()
        );
    }
}

/// llama.cpp reports the model file's path as its model id: `--model openai:<id>` takes any id
/// (slashes, colons) and sends it to the server as it is.
#[test]
fn any_model_id_string_reaches_the_server_unchanged() {
    for (flag, id) in [
        ("openai:/models/smollm2.gguf", "/models/smollm2.gguf"),
        ("openai:org/model:q4", "org/model:q4"),
        ("openai-responses:org/model:q4_K_M", "org/model:q4_K_M"),
        ("anthropic:C:/models/x.gguf", "C:/models/x.gguf"),
    ] {
        let scratch = Scratch::new();
        let server = server(json!({"turns": [{"text": "hi"}]}));
        let out = run_json_cmd(&scratch, flag, &server)
            .arg("hello")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{flag}: {}", text(&out.stderr));
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{flag}");
        assert_eq!(requests[0].body["model"], json!(id), "{flag}");
    }
}

#[test]
fn a_missing_key_for_an_official_endpoint_is_a_usage_error() {
    let scratch = Scratch::new();
    let out = scratch
        .cmd()
        .args(["run", "--model", "anthropic:claude-sonnet-4-5", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("ANTHROPIC_API_KEY is not set"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr:?}");
    let out = scratch
        .cmd()
        .args(["run", "--model", "nope:x", "hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("unknown provider"));
}

#[test]
fn run_plain_text_without_a_terminal() {
    let (scratch, server) = notes_and_reader();
    let out = scratch.run(&server, &[], "What do the notes say?");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("Reading the notes."), "{stdout}");
    assert!(stdout.contains("→ read_file path=notes.txt"), "{stdout}");
    assert!(stdout.contains("hello from the notes"), "{stdout}");
    assert!(stdout.contains("The notes say hello."), "{stdout}");
    let last = stdout.lines().last().unwrap();
    assert!(
        last.starts_with("done · 2 turns · 1 tool call · 250 in / 16 out tokens · session "),
        "{last}"
    );
    assert!(
        !stdout.contains('\x1b'),
        "no escape codes without a terminal"
    );
}

#[test]
fn max_turns_with_pending_tool_calls_exits_nonzero_after_agent_end() {
    let scratch = Scratch::new();
    std::fs::write(scratch.ws().join("notes.txt"), "hello\n").unwrap();
    let server = server(read_notes_script());
    let out = scratch.run(&server, &["--json", "--max-turns", "1"], "Read the notes.");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "one line: {stderr:?}");
    assert!(stderr.contains("--max-turns 1"), "{stderr}");
    let events = json_lines(&text(&out.stdout));
    check_event_order(&events);
    let end = last_agent_event(&events);
    assert_eq!(end["type"], "agent_end");
    assert_eq!(end["stop"], json!({"reason": "max_turns", "limit": 1}));
    assert_eq!(server.request_count(), 1);
}

#[test]
fn model_errors_exit_nonzero_with_one_line() {
    let scratch = Scratch::new();
    // HTTP 401 (not retried), as with a bad key.
    let server = server(json!({"turns": [{"text": "unreachable", "faults": [{"status": 401}]}]}));
    let out = scratch.run(&server, &["--json"], "Hello?");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr:?}");
    assert!(stderr.contains("model"), "{stderr}");
    let events = json_lines(&text(&out.stdout));
    assert_eq!(events.last().unwrap()["stop"]["reason"], "model_error");
}

fn write_script() -> Value {
    json!({"turns": [
        {"tool_calls": [{"id": "call_write", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "written by the agent\n"}}]},
        {"text": "Done."}
    ]})
}

#[test]
fn mutating_calls_are_denied_without_a_terminal() {
    let scratch = Scratch::new();
    let server = server(write_script());
    let out = scratch.run(&server, &["--json"], "Write out.txt");
    // Denied for lack of a terminal: exit 4 (3 is a run parked by `--approve defer`) and a line
    // naming what was denied.
    assert_eq!(out.status.code(), Some(4), "stderr: {}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("denied because there is no terminal") && stderr.contains("out.txt"),
        "{stderr}"
    );
    assert!(!scratch.ws().join("out.txt").exists());
    let events = json_lines(&text(&out.stdout));
    let writes = tool_ends(&events, "write_file");
    assert_eq!(writes.len(), 1);
    assert_eq!(writes[0]["result"]["is_error"], true);
    // The model sees why, in its next request.
    let requests = server.requests();
    let second = requests.last().unwrap().body.to_string();
    assert!(second.contains("--approve allow"), "{second}");

    // `--approve never` denies as well, with its own reason.
    let server = self::server(write_script());
    let out = scratch.run(&server, &["--json", "--approve", "deny"], "Write out.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).is_empty(), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("out.txt").exists());
    let events = json_lines(&text(&out.stdout));
    assert_eq!(
        tool_ends(&events, "write_file")[0]["result"]["is_error"],
        true
    );
}

#[test]
fn approve_always_runs_mutating_calls() {
    let scratch = Scratch::new();
    let server = server(write_script());
    let out = scratch.run(&server, &["--json", "--approve", "always"], "Write out.txt");
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    // The old name still works, with a one-line deprecation note.
    assert_stderr_has(&out, "--approve always is deprecated; use --approve allow");
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("out.txt")).unwrap(),
        "written by the agent\n"
    );
}

#[test]
fn sessions_export_then_import_round_trips() {
    let (scratch, server) = notes_and_reader();
    let out = scratch.run(
        &server,
        &["--title", "round trip"],
        "What do the notes say?",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1);
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sessions[0]["title"], "round trip");
    assert_eq!(sessions[0]["model"], "mock");
    assert_eq!(sessions[0]["message_count"], 4);

    let exported = scratch.sessions(&["export", &id]);
    assert!(exported.status.success(), "{}", text(&exported.stderr));
    let original = text(&exported.stdout);
    assert!(original.contains("hello from the notes"));
    let file = scratch.dir.path().join("export.jsonl");
    std::fs::write(&file, &original).unwrap();

    let imported = scratch.sessions(&["import", file.to_str().unwrap()]);
    assert!(imported.status.success(), "{}", text(&imported.stderr));
    let new_id = text(&imported.stdout).trim().to_owned();
    assert!(!new_id.is_empty() && new_id != id, "{new_id:?}");
    assert_eq!(scratch.session_list().len(), 2);

    let again = text(&scratch.sessions(&["export", &new_id]).stdout);
    let (a, b): (Vec<&str>, Vec<&str>) = (original.lines().collect(), again.lines().collect());
    assert_eq!(a.len(), b.len());
    assert_eq!(a[1..], b[1..], "message lines are identical");
    let header = |line: &str| {
        let mut v: Value = serde_json::from_str(line).unwrap();
        let map = v.as_object_mut().unwrap();
        for volatile in ["id", "created_ms", "updated_ms"] {
            map.remove(volatile);
        }
        v
    };
    // The copy is marked as imported (its settings were recorded elsewhere); nothing else
    // differs.
    let mut copy = header(b[0]);
    assert_eq!(copy["settings"]["imported"], true, "{copy}");
    copy["settings"].as_object_mut().unwrap().remove("imported");
    assert_eq!(header(a[0]), copy);

    // show and rm (by a unique prefix).
    let shown = text(&scratch.sessions(&["show", &new_id]).stdout);
    assert!(shown.contains("> What do the notes say?"), "{shown}");
    assert!(shown.contains("→ read_file path=notes.txt"), "{shown}");
    let rm = scratch.sessions(&["rm", &new_id[..8]]);
    assert!(rm.status.success(), "{}", text(&rm.stderr));
    assert_eq!(scratch.session_list().len(), 1);
}

#[test]
fn continue_resumes_the_last_session() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "First answer."}, {"text": "Second answer."}]}));
    let first = scratch.run(&server, &[], "first prompt alpha");
    assert!(first.status.success(), "{}", text(&first.stderr));
    let second = scratch.run(&server, &["--continue"], "second prompt beta");
    assert!(second.status.success(), "{}", text(&second.stderr));
    assert!(text(&second.stdout).contains("Second answer."));

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].to_string();
    for earlier in ["first prompt alpha", "First answer.", "second prompt beta"] {
        assert!(
            messages.contains(earlier),
            "{earlier} missing from {messages}"
        );
    }
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1, "resumed, not a new session");
    assert_eq!(sessions[0]["message_count"], 4);
}

#[test]
fn demo_runs_real_tools_against_the_scripted_server() {
    let scratch = Scratch::new();
    let out = scratch
        .cmd()
        .args(["demo", "--keep-session"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        text(&out.stderr)
    );
    assert!(stdout.contains(LABEL), "{stdout}");
    // The edit happened on disk: the summary diffs the files.
    assert!(stdout.contains("changed: src/lib.rs"), "{stdout}");
    assert!(stdout.contains("+     Some(total(scores) as f64 / scores.len() as f64)"));

    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["title"], "demo");
    let id = sessions[0]["id"].as_str().unwrap();
    let export = text(&scratch.sessions(&["export", id]).stdout);
    let lines = json_lines(&export);
    let lib_read = lines
        .iter()
        .filter(|m| m["role"] == "tool_result")
        .flat_map(|m| m["content"].as_array().unwrap())
        .find(|part| part["call_id"] == "call_lib")
        .expect("the read_file result of src/lib.rs");
    let content = lib_read["content"].as_str().unwrap();
    // Every line of the real sample file, as read_file numbers it.
    let sample = include_str!("../demo/sample/src/lib.rs");
    for (n, line) in sample.lines().enumerate() {
        assert!(
            content.contains(&format!("{:>6}\t{line}", n + 1)),
            "line {} missing from {content}",
            n + 1
        );
    }
}

#[test]
fn demo_json_is_events_only() {
    let scratch = Scratch::new();
    let out = scratch.cmd().args(["demo", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains(LABEL));
    let events = json_lines(&text(&out.stdout));
    check_event_order(&events);
    let readme = include_str!("../demo/sample/README.md");
    let read = tool_ends(&events, "read_file");
    assert!(
        read.iter().any(|e| e["result"]["content"]
            .as_str()
            .unwrap()
            .contains(readme.lines().nth(2).unwrap())),
        "the README's real content was read"
    );
    let edits = tool_ends(&events, "edit_file");
    assert_eq!(edits.len(), 1);
    assert_eq!(edits[0]["result"]["is_error"], false, "{}", edits[0]);
    // Nothing recorded in the normal database without --keep-session.
    assert!(scratch.session_list().is_empty());
}

fn wait_for_line(rx: &mpsc::Receiver<String>, seen: &mut Vec<String>, needle: &str) {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no line containing {needle:?}; got {seen:?}"));
        seen.push(line);
        if seen.last().unwrap().contains(needle) {
            return;
        }
    }
}

#[cfg(unix)]
#[test]
fn ctrl_c_aborts_with_exit_130_after_agent_end() {
    let scratch = Scratch::new();
    // The model takes 30 s to answer: plenty of time to interrupt it.
    let server = server(json!({"turns": [{"text": "too late", "first_byte_delay_ms": 30000}]}));
    let mut child = scratch
        .cmd()
        .args(["run", "--json", "--model", "openai:mock", "--base-url"])
        .arg(server.openai_base_url())
        .arg("--workspace")
        .arg(scratch.ws())
        .arg("Take your time.")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&rx, &mut seen, "\"turn_start\"");
    // Wait until the request is in flight.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.request_count() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    send_signal(child.id(), "INT");
    let status = child.wait().unwrap();
    seen.extend(rx.iter());
    assert_eq!(status.code(), Some(130), "{seen:?}");
    let events: Vec<Value> = seen
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = last_agent_event(&events);
    assert_eq!(end["type"], "agent_end");
    assert_eq!(end["stop"]["reason"], "aborted");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr:?}");
    // The prompt was recorded even though the run was aborted.
    assert_eq!(scratch.session_list()[0]["message_count"], 2);
}

#[cfg(unix)]
#[test]
fn mock_server_subcommand_serves_a_script() {
    let scratch = Scratch::new();
    let script = scratch.dir.path().join("script.json");
    std::fs::write(&script, r#"{"turns": [{"text": "Hello from the mock."}]}"#).unwrap();
    let mut child = scratch
        .cmd()
        .arg("mock-server")
        .arg("--script")
        .arg(&script)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    let mut seen = Vec::new();
    wait_for_line(&rx, &mut seen, "listening on ");
    let base = seen
        .last()
        .unwrap()
        .trim_start_matches("listening on ")
        .to_owned();
    let out = scratch
        .cmd()
        .args(["run", "--model", "openai:mock", "--base-url"])
        .arg(format!("{base}/v1"))
        .arg("--workspace")
        .arg(scratch.ws())
        .arg("Hi")
        .output()
        .unwrap();
    send_signal(child.id(), "INT");
    let status = child.wait().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Hello from the mock."));
    assert!(status.success());
}

/// `agentloop models PROVIDER --json --base-url SERVER` with `key_var` set, which must succeed:
/// the models it listed.
fn models_json(
    scratch: &Scratch,
    provider: &str,
    key_var: &str,
    server: &MockServer,
) -> Vec<Value> {
    let out = scratch
        .cmd()
        .env(key_var, "dummy")
        .args([
            "models",
            provider,
            "--json",
            "--base-url",
            &server.base_url(),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    json_lines(&text(&out.stdout))
}

#[test]
fn models_lists_what_each_provider_reports_sorted_and_paginated() {
    let scratch = Scratch::new();
    let ids = vec!["gpt-b", "gpt-a", "/models/smol.gguf", "org/x:q4"];
    let server = server(json!({"turns": [{"text": "hi"}], "models": ids}));
    let out = scratch
        .cmd()
        .args(["models", "openai", "--base-url", &server.openai_base_url()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "/models/smol.gguf\ngpt-a\ngpt-b\norg/x:q4\n"
    );

    // Anthropic pages 1000 at a time: 2,345 models take three pages, none lost or repeated.
    let many: Vec<String> = (0..2345).map(|i| format!("claude-{i:05}")).collect();
    let server = self::server(json!({"turns": [{"text": "hi"}], "models": many}));
    let listed = models_json(&scratch, "anthropic", "ANTHROPIC_API_KEY", &server);
    assert_eq!(listed.len(), 2345);
    assert_eq!(listed[0]["id"], "claude-00000");
    assert_eq!(listed[2344]["name"], "claude-02344");
    assert!(listed.windows(2).all(|w| w[0]["id"] != w[1]["id"]));

    // Gemini pages with `pageToken`, and lists ids without `models/`.
    let many: Vec<String> = (0..1500).map(|i| format!("gemini-{i:05}")).collect();
    let server = self::server(json!({"turns": [{"text": "hi"}], "models": many}));
    let listed = models_json(&scratch, "gemini", "GEMINI_API_KEY", &server);
    assert_eq!(listed.len(), 1500);
    assert_eq!(listed[0]["id"], "gemini-00000");
    assert_eq!(listed[1499]["name"], "gemini-01499");
}

#[test]
fn models_errors_are_one_clear_line_without_credentials() {
    let scratch = Scratch::new();
    let out = scratch.cmd().args(["models", "bogus"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("unknown provider"));

    let server = server(json!({"turns": [{"text": "hi"}]}));
    let base = server
        .base_url()
        .replace("http://", "http://user:s3cret-pass@")
        + "/nowhere";
    let out = scratch
        .cmd()
        .args(["models", "--base-url", &base])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("HTTP 404"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// A 1×1 PNG (valid file, 67 bytes).
const TINY_PNG: &[u8] = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89\x00\x00\x00\nIDATx\x9cc\x00\x01\x00\x00\x05\x00\x01\r\n-\xb4\x00\x00\x00\x00IEND\xaeB`\x82";

#[test]
fn images_reach_every_provider_from_the_prompt_and_from_read_file() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(TINY_PNG);
    for model in [
        "openai:mock",
        "openai-responses:mock",
        "anthropic:mock",
        "gemini:mock",
    ] {
        let scratch = Scratch::new();
        std::fs::write(scratch.ws().join("shot.png"), TINY_PNG).unwrap();
        let attached = scratch.dir.path().join("attached.png");
        std::fs::write(&attached, TINY_PNG).unwrap();
        let server = server(json!({"turns": [
            {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "shot.png"}}]},
            {"text": "A tiny image."}
        ]}));
        let out = run_json_cmd(&scratch, model, &server)
            .arg("--image")
            .arg(&attached)
            .arg("What is in these images?")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{model}: {}", text(&out.stderr));
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{model}");
        // The prompt's image is in the first request; the second also carries read_file's.
        let first = requests[0].body.to_string();
        let second = requests[1].body.to_string();
        assert_eq!(first.matches(&b64).count(), 1, "{model}: {first}");
        assert_eq!(second.matches(&b64).count(), 2, "{model}: {second}");
        assert!(first.contains("image/png"), "{model}");
        assert!(server.violations().is_empty(), "{model}");
    }

    // Not an image, or missing: a usage error before any request.
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "hi"}]}));
    let not_image = scratch.dir.path().join("notes.png");
    std::fs::write(&not_image, "text").unwrap();
    for path in [not_image, scratch.dir.path().join("missing.png")] {
        let out = scratch
            .cmd()
            .args(["run", "--model", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("--image")
            .arg(&path)
            .arg("--workspace")
            .arg(scratch.ws())
            .arg("hi")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("--image"));
    }
    assert!(server.requests().is_empty());
}

impl Scratch {
    /// `agentloop run` with only a base URL: the model comes from wherever the settings say.
    fn run_configured(&self, server: &MockServer, args: &[&str]) -> (Output, Option<Value>) {
        let before = server.requests().len();
        let out = self
            .cmd()
            .args(["run", "--json", "--base-url"])
            .arg(server.openai_base_url())
            .arg("--workspace")
            .arg(self.ws())
            .args(args)
            .arg("hi")
            .output()
            .unwrap();
        let model = server
            .requests()
            .get(before)
            .map(|r| r.body["model"].clone());
        (out, model)
    }
}

#[test]
fn config_files_profiles_env_and_flags_apply_in_order() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "hi"}], "repeat": true}));
    let user = scratch.user_config(
        "model = \"openai:user-model\"\nmax_turns = 7\n\n[profiles.fast]\nmodel = \"openai:fast-user\"\n\n[profiles.deep]\nmodel = \"openai:deep-model\"\n",
    );
    let (out, model) = scratch.run_configured(&server, &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(model, Some(json!("user-model")));

    let ws = scratch.workspace_config(
        "model = \"openai:ws-model\"\n\n[profiles.fast]\nmodel = \"openai:fast-ws\"\n",
    );
    for (args, env, expected) in [
        (&[][..], None, "ws-model"),
        (&["--profile", "fast"][..], None, "fast-ws"),
        (&["--profile", "deep"][..], None, "deep-model"),
        (&[][..], Some("fast"), "fast-ws"),
        (
            &["--profile", "fast", "--model", "openai:flag-model"][..],
            None,
            "flag-model",
        ),
    ] {
        let mut cmd_args: Vec<&str> = args.to_vec();
        if let Some(profile) = env {
            cmd_args.extend(["--profile", profile]);
        }
        let (out, model) = scratch.run_configured(&server, &cmd_args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert_eq!(model, Some(json!(expected)), "{args:?}");
    }
    // The environment variable beats the files as a flag does.
    let before = server.requests().len();
    let out = scratch
        .cmd()
        .env("AGENTLOOP_MODEL", "openai:env-model")
        .args([
            "run",
            "--base-url",
            &server.openai_base_url(),
            "--workspace",
        ])
        .arg(scratch.ws())
        .arg("hi")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(server.requests()[before].body["model"], "env-model");

    // `config show` says where each value comes from.
    let out = scratch.in_workspace(&["config", "show"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    let line = |key: &str| {
        shown
            .lines()
            .find(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key} ")))
            .unwrap_or_else(|| panic!("{key} missing: {shown}"))
            .to_owned()
    };
    assert!(line("model").contains("\"openai:ws-model\""), "{shown}");
    assert!(line("model").contains(&ws.display().to_string()), "{shown}");
    assert!(line("max_turns").starts_with("max_turns = 7 "), "{shown}");
    assert!(
        line("max_turns").contains(&user.display().to_string()),
        "{shown}"
    );
    assert!(line("approve").ends_with("# default"), "{shown}");
    let out = scratch.in_workspace(&["config", "show", "--profile", "fast"]);
    let shown = text(&out.stdout);
    assert!(shown.contains("[profiles.fast]"), "{shown}");
    assert!(shown.contains("openai:fast-ws"), "{shown}");
}

#[test]
fn config_errors_name_the_file_the_key_and_the_valid_choices() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "hi"}]}));
    for (toml, expected) in [
        (
            "modle = \"openai:x\"\n",
            vec!["modle", "model", "max_turns"],
        ),
        (
            "approve = \"sometimes\"\n",
            vec!["approve", "sometimes", "config.toml", "ask", "defer"],
        ),
        ("max_turns = -3\n", vec!["max_turns", "config.toml"]),
        ("[profiles.fast]\nmodl = 1\n", vec!["profiles", "modl"]),
    ] {
        scratch.workspace_config(toml);
        let (out, model) = scratch.run_configured(&server, &[]);
        assert_eq!(out.status.code(), Some(2), "{toml}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        for word in expected {
            assert!(err.contains(word), "{toml}: {word} not in {err}");
        }
        assert_eq!(model, None, "nothing is sent on a config error");
    }
    scratch.workspace_config("[profiles.fast]\nmodel = \"openai:f\"\n");
    let (out, _) = scratch.run_configured(&server, &["--profile", "slow"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("\"slow\"") && err.contains("fast"), "{err}");
}

#[test]
fn a_fallback_model_answers_when_the_model_fails_and_the_transcript_says_so() {
    let scratch = Scratch::new();
    let run = |json: bool| {
        let primary = server(json!({"turns": [{"text": "unused", "faults": [{"status": 401}]}]}));
        let backup = server(json!({"turns": [{"text": "Answer from the backup"}]}));
        let mut cmd = scratch.cmd();
        cmd.env("ANTHROPIC_API_KEY", "dummy")
            .env("ANTHROPIC_BASE_URL", backup.base_url())
            .args(["run", "--model", "openai:mock", "--base-url"])
            .arg(primary.openai_base_url())
            .args(["--fallback-model", "anthropic:backup-model", "--workspace"])
            .arg(scratch.ws());
        if json {
            cmd.arg("--json");
        }
        let out = cmd.arg("Hello?").output().unwrap();
        assert_eq!(primary.request_count(), 1, "a 401 is not retried");
        assert_eq!(backup.request_count(), 1);
        out
    };
    let out = run(true);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = json_lines(&text(&out.stdout));
    let fallback = events
        .iter()
        .find(|e| e["type"] == "model_fallback")
        .unwrap_or_else(|| panic!("no model_fallback event: {events:?}"));
    assert_eq!(fallback["from"], "openai_chat:mock");
    assert_eq!(fallback["to"], "anthropic:backup-model");
    assert!(fallback["reason"].as_str().unwrap().contains("401"));
    let end = events.iter().rfind(|e| e["type"] == "message_end").unwrap();
    assert_eq!(end["message"]["provider"], "anthropic");
    // The stored transcript records the answering provider too.
    let sessions = scratch.session_list();
    let id = sessions[0]["id"].as_str().unwrap();
    let export = scratch.sessions(&["export", id]);
    assert!(export.status.success(), "{}", text(&export.stderr));
    let stored = json_lines(&text(&export.stdout));
    assert!(
        stored
            .iter()
            .any(|line| line.to_string().contains("\"provider\":\"anthropic\"")),
        "{stored:?}"
    );

    // Plain mode says it on stderr and prints the answer.
    let out = run(false);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("falling back to anthropic:backup-model"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("Answer from the backup"));
}

#[test]
fn requests_carry_the_session_as_prompt_cache_key_unless_switched_off() {
    let scratch = Scratch::new();
    let on = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run(&on, &["--json"], "Hi");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sessions = scratch.session_list();
    let id = sessions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(on.requests()[0].body["prompt_cache_key"], json!(id));

    let off = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run(&off, &["--json", "--no-prompt-cache"], "Hi");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(off.requests()[0].body.get("prompt_cache_key").is_none());
}

// ---------------------------------------------------------------------------------------------
// sessions that behave: per-workspace --continue, stored settings, id prefixes, failed runs,
// `sessions list`

impl Scratch {
    /// A second workspace directory.
    fn ws_b(&self) -> PathBuf {
        let dir = self.dir.path().join("ws-b");
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }
    /// `agentloop run --workspace WS ARGS… PROMPT` with nothing else given.
    fn run_bare(&self, ws: &std::path::Path, args: &[&str], prompt: &str) -> Output {
        self.cmd()
            .arg("run")
            .arg("--workspace")
            .arg(ws)
            .args(args)
            .arg(prompt)
            .output()
            .unwrap()
    }
    /// `agentloop run --model openai:mock --base-url … --workspace WS ARGS… PROMPT`.
    fn run_in(
        &self,
        server: &MockServer,
        ws: &std::path::Path,
        args: &[&str],
        prompt: &str,
    ) -> Output {
        let mut all = vec!["--model", "openai:mock", "--base-url"];
        let base = server.openai_base_url();
        all.push(&base);
        all.extend_from_slice(args);
        self.run_bare(ws, &all, prompt)
    }
}

/// The messages of the last request the server received, as one string.
fn last_messages(server: &MockServer) -> String {
    let requests = server.requests();
    let body = &requests.last().expect("a request").body;
    // Chat Completions sends `messages`, Responses `input`.
    format!("{}{}", body["messages"], body["input"])
}

#[test]
fn continue_resumes_this_workspace_s_session_not_a_newer_one_elsewhere() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    let (a, b) = (scratch.ws(), scratch.ws_b());
    assert!(
        scratch
            .run_in(&server, &a, &[], "alpha prompt")
            .status
            .success()
    );
    assert!(
        scratch
            .run_in(&server, &b, &[], "beta prompt")
            .status
            .success()
    );

    let out = scratch.run_in(&server, &a, &["--continue"], "alpha again");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sent = last_messages(&server);
    assert!(sent.contains("alpha prompt"), "{sent}");
    assert!(
        !sent.contains("beta prompt"),
        "B's newer session was picked: {sent}"
    );

    let out = scratch.run_in(&server, &b, &["--continue"], "beta again");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sent = last_messages(&server);
    assert!(
        sent.contains("beta prompt") && !sent.contains("alpha"),
        "{sent}"
    );
    assert_eq!(
        scratch.session_list().len(),
        2,
        "both continued, none created"
    );

    // A third workspace has nothing to continue: a new session, said on stderr.
    let c = scratch.dir.path().join("ws-c");
    std::fs::create_dir_all(&c).unwrap();
    let out = scratch.run_in(&server, &c, &["--continue"], "gamma");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_stderr_has(&out, "no session to continue");
    assert!(!last_messages(&server).contains("prompt"));
    assert_eq!(scratch.session_list().len(), 3);
}

#[test]
fn continue_restores_the_provider_model_base_url_and_reasoning_of_the_session() {
    let scratch = Scratch::new();
    let first = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    let decoy = server(json!({"turns": [{"text": "wrong server"}], "repeat": true}));
    let out = scratch.run_bare(
        &scratch.ws(),
        &[
            "--model",
            "openai-responses:stored-model",
            "--base-url",
            &first.openai_base_url(),
            "--reasoning",
            "high",
        ],
        "first",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The config files now say otherwise; the session's own settings still win.
    scratch.workspace_config(&format!(
        "model = \"openai:config-model\"\nbase_url = \"{}\"\nreasoning = \"low\"\n",
        decoy.openai_base_url()
    ));
    let out = scratch.run_bare(&scratch.ws(), &["--continue"], "second");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(decoy.request_count(), 0, "the config's base URL was used");
    let requests = first.requests();
    assert_eq!(requests.len(), 2);
    let resumed = &requests[1];
    assert!(resumed.path.ends_with("/responses"), "{}", resumed.path);
    assert_eq!(resumed.body["model"], "stored-model");
    assert_eq!(resumed.body["reasoning"]["effort"], "high");
    assert!(resumed.body["input"].to_string().contains("first"));

    // `--session` with the id restores the same way.
    let id = scratch.session_list()[0]["id"].as_str().unwrap().to_owned();
    let out = scratch.run_bare(&scratch.ws(), &["--session", &id], "third");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first.requests().len(), 3);
    assert_eq!(first.requests()[2].body["model"], "stored-model");
    let listed = &scratch.session_list()[0];
    assert_eq!(listed["settings"]["provider"], "openai-responses");
    assert_eq!(listed["settings"]["model"], "stored-model");
    assert_eq!(listed["settings"]["reasoning"], "high");
    assert_eq!(listed["settings"]["base_url"], first.openai_base_url());
    let ws = std::fs::canonicalize(scratch.ws()).unwrap();
    assert_eq!(listed["settings"]["workspace"], ws.to_str().unwrap());
}

#[test]
fn an_explicit_flag_overrides_the_stored_setting_and_is_stored_for_next_time() {
    let scratch = Scratch::new();
    let first = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    let second = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    let base = first.openai_base_url();
    let out = scratch.run_bare(
        &scratch.ws(),
        &[
            "--model",
            "openai:stored",
            "--base-url",
            &base,
            "--reasoning",
            "low",
        ],
        "first",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    // An explicit model of the same provider keeps the stored base URL and reasoning.
    let out = scratch.run_bare(
        &scratch.ws(),
        &["--continue", "--model", "openai:typed"],
        "two",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let body = &first.requests()[1].body;
    assert_eq!(body["model"], "typed");
    assert_eq!(body["reasoning_effort"], "low");

    // Through the environment variable, as typed; and a base URL flag moves the session.
    let out = scratch
        .cmd()
        .env("AGENTLOOP_MODEL", "openai:from-env")
        .args([
            "run",
            "--continue",
            "--base-url",
            &second.openai_base_url(),
            "--workspace",
        ])
        .arg(scratch.ws())
        .arg("three")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(second.requests()[0].body["model"], "from-env");

    // What the last run used is what the session now stores.
    let out = scratch.run_bare(&scratch.ws(), &["--continue"], "four");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(first.requests().len(), 2);
    let body = &second.requests()[1].body;
    assert_eq!(body["model"], "from-env");
    assert_eq!(body["reasoning_effort"], "low");
    assert!(body["messages"].to_string().contains("first"));
    assert_eq!(scratch.session_list().len(), 1);
}

#[test]
fn session_ids_resolve_by_unique_prefix_and_ambiguous_or_unknown_ones_create_nothing() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "ok"}], "repeat": true}));
    for (id, prompt) in [("abc1-0001", "first one"), ("abc2-0002", "second one")] {
        let out = scratch.run(&server, &["--session", id, "--create"], prompt);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    assert_eq!(scratch.session_list().len(), 2);

    // A unique prefix resumes that session (and says which).
    let out = scratch.run(&server, &["--session", "abc1"], "more");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_stderr_has(&out, "abc1-0001");
    let sent = last_messages(&server);
    assert!(
        sent.contains("first one") && !sent.contains("second one"),
        "{sent}"
    );

    let requests = server.request_count();
    // Ambiguous: an error listing both candidates; nothing sent, nothing created.
    let out = scratch.run(&server, &["--session", "abc"], "which?");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("matches 2 sessions"), "{err}");
    assert!(
        err.contains("abc1-0001") && err.contains("abc2-0002"),
        "{err}"
    );
    assert!(
        err.contains("first one") && err.contains("second one"),
        "titles: {err}"
    );
    // Unknown and shaped like an id: an error; nothing sent, nothing created.
    let out = scratch.run(&server, &["--session", "abd9"], "typo");
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains("no session matches") && err.contains("--create"),
        "{err}"
    );
    assert_eq!(server.request_count(), requests);
    assert_eq!(scratch.session_list().len(), 2);

    // Every command that takes an id resolves it the same way.
    for args in [
        &["sessions", "show", "abc"][..],
        &["sessions", "export", "abc"],
        &["sessions", "rm", "abc"],
        &["approvals", "list", "abc"],
        &["resume", "abc"],
    ] {
        let out = scratch.cmd().args(args).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("abc1-0001") && err.contains("abc2-0002"),
            "{args:?}: {err}"
        );
    }
    let out = scratch.sessions(&["show", "abc2"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("second one"));
    let out = scratch.sessions(&["rm", "zzz"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(scratch.session_list().len(), 2);

    // A name (not shaped like an id) starts a new named session, said on stderr.
    let out = scratch.run(&server, &["--session", "fix-login"], "named");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("new session fix-login"));
    let ids: Vec<String> = scratch
        .session_list()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert!(ids.contains(&"fix-login".to_owned()), "{ids:?}");
}

#[test]
fn a_run_that_failed_before_any_reply_is_not_the_one_continued() {
    let scratch = Scratch::new();
    let good = server(json!({"turns": [{"text": "First answer."}], "repeat": true}));
    let out = scratch.run(&good, &[], "the good prompt");
    assert!(out.status.success(), "{}", text(&out.stderr));
    // A new session whose only model call is refused (HTTP 401, as with a bad key).
    let refusing = server(json!({"turns": [{"text": "x", "faults": [{"status": 401}]}]}));
    let out = scratch.run(&refusing, &[], "the refused prompt");
    assert_eq!(out.status.code(), Some(1));

    let out = scratch.run(&good, &["--continue"], "go on");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sent = last_messages(&good);
    assert!(sent.contains("the good prompt"), "{sent}");
    assert!(!sent.contains("the refused prompt"), "{sent}");

    // The failed session left nothing behind: an empty session is clutter, not history.
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["title"], "the good prompt");
}

#[test]
fn sessions_list_shows_workspace_model_turns_tokens_cost_and_filters_by_workspace() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [
        {"text": "one", "usage": {"input_tokens": 1200, "output_tokens": 34}}
    ], "repeat": true}));
    let (a, b) = (scratch.ws(), scratch.ws_b());
    let run = |ws: &std::path::Path, model: &str, prompt: &str| {
        let out = scratch.run_bare(
            ws,
            &["--model", model, "--base-url", &server.openai_base_url()],
            prompt,
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
    };
    run(&a, "openai:model-in-a", "prompt in a");
    run(&b, "openai:model-in-b", "prompt in b");
    let out = scratch.run_bare(&b, &["--continue"], "again in b");
    assert!(out.status.success(), "{}", text(&out.stderr));

    let out = scratch.sessions(&["list"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&out.stdout);
    let lines: Vec<&str> = listed.lines().collect();
    assert_eq!(lines.len(), 3, "{listed}");
    for column in [
        "ID",
        "UPDATED",
        "WORKSPACE",
        "MODEL",
        "TURNS",
        "TOKENS",
        "COST",
        "TITLE",
    ] {
        assert!(lines[0].contains(column), "{column}: {listed}");
    }
    // Most recent first: b's session, 2 replies, 2 × 1,234 tokens, no known price.
    let row_b = lines[1];
    for cell in ["ws-b", "model-in-b", " 2 ", "2,468", "prompt in b"] {
        assert!(row_b.contains(cell), "{cell:?} missing: {row_b}");
    }
    let row_a = lines[2];
    for cell in ["model-in-a", " 1 ", "1,234", "prompt in a"] {
        assert!(row_a.contains(cell), "{cell:?} missing: {row_a}");
    }
    // The ids shown are prefixes that work as arguments.
    let short = row_a.split_whitespace().next().unwrap();
    let out = scratch.sessions(&["show", short]);
    assert!(out.status.success(), "{short}: {}", text(&out.stderr));

    let only_a = text(
        &scratch
            .sessions(&["list", "--workspace", a.to_str().unwrap()])
            .stdout,
    );
    assert_eq!(only_a.lines().count(), 2, "{only_a}");
    assert!(only_a.contains("prompt in a") && !only_a.contains("prompt in b"));
    // `-w` alone: the current directory.
    let out = scratch
        .cmd()
        .current_dir(&b)
        .args(["sessions", "list", "-w"])
        .output()
        .unwrap();
    let only_b = text(&out.stdout);
    assert!(
        only_b.contains("prompt in b") && !only_b.contains("prompt in a"),
        "{only_b}"
    );
    let json = json_lines(&text(
        &scratch
            .sessions(&["list", "--json", "-w", b.to_str().unwrap()])
            .stdout,
    ));
    assert_eq!(json.len(), 1);
    assert_eq!(json[0]["stats"]["turns"], 2);
    assert_eq!(json[0]["stats"]["usage"]["input_tokens"], 2400);
    assert_eq!(json[0]["settings"]["model"], "model-in-b");
}
