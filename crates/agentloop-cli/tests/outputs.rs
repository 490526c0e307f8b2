//! Tool output retention through the binary and the mock model: a command printing 100,000
//! numbered lines reaches the model as its head and tail with a note counting the omitted
//! lines and bytes and naming the call; its full output is kept (0600, in the data directory,
//! not the workspace) and `sessions show --full` prints every line; only the most recent 50
//! calls' outputs are kept, and the pruned ones say so; `sessions rm` deletes them.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::Scratch;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        &text(&out.stderr)
    );
    out
}

fn run(scratch: &Scratch, server: &MockServer) {
    ok(scratch
        .run_cmd(server)
        .args(["--approve", "always", "Do the work."])
        .output()
        .unwrap());
}

fn session_id(scratch: &Scratch) -> String {
    let out = ok(scratch.plain(&["sessions", "list", "--json"]));
    let first: Value = serde_json::from_str(text(&out.stdout).lines().next().unwrap()).unwrap();
    first["id"].as_str().unwrap().to_owned()
}

fn outputs_dir(scratch: &Scratch, session: &str) -> PathBuf {
    scratch.path("data/agentloop/outputs").join(session)
}

/// The content of the tool message answering `call` in the requests the model got.
fn tool_message(server: &MockServer, call: &str) -> String {
    for request in server.requests() {
        for message in request.body["messages"].as_array().into_iter().flatten() {
            if message["role"] == "tool" && message["tool_call_id"] == call {
                return message["content"].as_str().unwrap().to_owned();
            }
        }
    }
    panic!("the model never got the result of {call}");
}

/// The number in `[output truncated: N lines (M bytes) omitted; …]`.
fn omitted_lines(shown: &str) -> usize {
    let note = shown
        .lines()
        .find(|l| l.starts_with("[output truncated: "))
        .unwrap_or_else(|| panic!("no truncation note in {shown}"));
    let count = note["[output truncated: ".len()..]
        .split(' ')
        .next()
        .unwrap();
    count.replace(',', "").parse().unwrap()
}

#[test]
fn the_model_sees_head_and_tail_and_sessions_show_full_every_line() {
    let scratch = Scratch::new();
    let server = MockServer::builder(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c_seq", "name": "shell",
                             "arguments": {"command": "seq 1 100000"}}]},
            {"text": "done"}
        ]}))
        .unwrap(),
    )
    .record_requests(true)
    .start()
    .unwrap();
    run(&scratch, &server);

    let shown = tool_message(&server, "c_seq");
    let numbers: Vec<usize> = shown.lines().filter_map(|l| l.parse().ok()).collect();
    let head = numbers.iter().take_while(|&&n| n < 50_000).count();
    assert_eq!(numbers[..head], (1..=head).collect::<Vec<_>>()[..], "head");
    let tail = &numbers[head..];
    assert_eq!(*tail.last().unwrap(), 100_000, "tail");
    assert!(
        tail.windows(2).all(|w| w[1] == w[0] + 1),
        "the tail is not whole lines"
    );
    assert_eq!(
        head + omitted_lines(&shown) + tail.len(),
        100_000,
        "{shown:.300}"
    );
    assert!(
        shown.contains("[full output kept: call c_seq "),
        "{shown:.300}"
    );
    assert!(shown.len() < 31_000);

    let session = session_id(&scratch);
    let out = ok(scratch.plain(&["sessions", "show", "--full", &session]));
    let full = text(&out.stdout);
    let all: Vec<&str> = full
        .lines()
        .skip_while(|l| *l != "1")
        .take_while(|l| l.parse::<usize>().is_ok())
        .collect();
    let expected: Vec<String> = (1..=100_000).map(|n| n.to_string()).collect();
    assert!(
        all == expected,
        "sessions show --full lacks lines: {} shown",
        all.len()
    );
    assert!(full.contains("full output of call c_seq"), "{full:.500}");

    // Kept in the data directory, private, nothing in the workspace.
    let kept = outputs_dir(&scratch, &session).join("c_seq.out");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let dir_mode = std::fs::metadata(kept.parent().unwrap())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(dir_mode & 0o777, 0o700);
    assert_eq!(std::fs::read_dir(scratch.ws()).unwrap().count(), 0);

    ok(scratch.plain(&["sessions", "rm", &session]));
    assert!(
        !outputs_dir(&scratch, &session).exists(),
        "sessions rm left the outputs"
    );
}

#[test]
fn only_the_last_fifty_calls_outputs_are_kept_and_the_pruned_ones_say_so() {
    let scratch = Scratch::new();
    let calls: Vec<Value> = (0..52)
        .map(|i| {
            json!({"id": format!("c{i:02}"), "name": "shell",
                   "arguments": {"command": format!("seq {i} 20000")}})
        })
        .collect();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [{"tool_calls": calls}, {"text": "done"}]})).unwrap(),
    );
    run(&scratch, &server);
    let session = session_id(&scratch);
    let kept: Vec<String> = std::fs::read_dir(outputs_dir(&scratch, &session))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(kept.len(), 50, "{kept:?}");
    assert!(!kept.contains(&"c00.out".to_owned()) && !kept.contains(&"c01.out".to_owned()));

    let out = ok(scratch.plain(&["sessions", "show", "--full", &session]));
    let full = text(&out.stdout);
    for pruned in ["c00", "c01"] {
        assert!(
            full.contains(&format!("call {pruned}: full output pruned")),
            "{pruned} not said pruned"
        );
    }
    assert!(full.contains("full output of call c51"));
    assert!(!full.contains("call c02: full output pruned"));
}

/// Chat on a pseudo-terminal: `/output` opens the last truncated call's full output in
/// `$PAGER` (here `cat`), lines the model never saw included; an unknown call is one line.
#[test]
fn chat_output_opens_the_full_output_in_the_pager() {
    use expectrl::Session;
    let scratch = Scratch::new();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c_long", "name": "shell",
                             "arguments": {"command": "seq 1 20000"}}]},
            {"text": "All counted."}
        ]}))
        .unwrap(),
    );
    let mut cmd = std::process::Command::new(support::BIN);
    for var in [
        "OPENAI_BASE_URL",
        "AGENTLOOP_DB",
        "AGENTLOOP_MODEL",
        "AGENTLOOP_PROFILE",
    ] {
        cmd.env_remove(var);
    }
    cmd.env("OPENAI_API_KEY", "dummy")
        .env("XDG_DATA_HOME", scratch.path("data"))
        .env("XDG_CONFIG_HOME", scratch.path("config"))
        .env("NO_COLOR", "1")
        .env("PAGER", "cat")
        .arg("--db")
        .arg(scratch.db())
        .args([
            "chat",
            "--model",
            "openai:mock",
            "--approve",
            "allow",
            "--base-url",
        ])
        .arg(server.openai_base_url())
        .arg("--workspace")
        .arg(scratch.ws());
    let mut pty = Session::spawn(cmd).unwrap();
    pty.set_expect_timeout(Some(std::time::Duration::from_secs(60)));
    pty.expect("/help for commands").unwrap();
    pty.send_line("count").unwrap();
    pty.expect("All counted.").unwrap();
    pty.expect("› ").unwrap();
    pty.send_line("/output").unwrap();
    // In the middle: cut from what the model saw, there in full.
    pty.expect("9999\r\n10000\r\n10001\r\n").unwrap();
    pty.expect("19999\r\n20000").unwrap();
    pty.expect("› ").unwrap();
    pty.send_line("/output nope").unwrap();
    pty.expect("this session has no call nope").unwrap();
    pty.expect("› ").unwrap();
    pty.send_line("/exit").unwrap();
    pty.expect(expectrl::Eof).unwrap();
}
