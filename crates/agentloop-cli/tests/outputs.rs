//! Tool output retention through the binary and the mock model: a command printing 100,000
//! numbered lines reaches the model as its head and tail with a note counting the omitted
//! lines and bytes and naming the call; its full output is kept (0600, in the data directory,
//! not the workspace) and `sessions show --full` prints every line; only the most recent 50
//! calls' outputs are kept, and the pruned ones say so; `sessions rm` deletes them. Every other
//! built-in tool that cuts its result (grep, find_files, list_dir, job_output) keeps it whole
//! the same way, and a call id the model uses again keeps each output apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::{Scratch, ok, text};

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

/// A mock model playing `turns` that records the requests, and accepts a call id used again
/// in a later turn (as some local servers send).
fn mock(turns: Value) -> MockServer {
    MockServer::builder(Script::from_value(json!({ "turns": turns })).unwrap())
        .record_requests(true)
        .allow_reused_call_ids(true)
        .start()
        .unwrap()
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
    let server = mock(json!([
        {"tool_calls": [{"id": "c_seq", "name": "shell",
                         "arguments": {"command": "seq 1 100000"}}]},
        {"text": "done"}
    ]));
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
    // The store's first output: number 1.
    let kept = outputs_dir(&scratch, &session).join("1-c_seq.out");
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
    // `<number>-<call id>.out`: the call ids kept.
    let kept: Vec<String> = std::fs::read_dir(outputs_dir(&scratch, &session))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter_map(|name| Some(name.split_once('-')?.1.strip_suffix(".out")?.to_owned()))
        .collect();
    assert_eq!(kept.len(), 50, "{kept:?}");
    assert!(!kept.contains(&"c00".to_owned()) && !kept.contains(&"c01".to_owned()));

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
/// `$PAGER` (here `cat`), lines the model never saw included; with a call id the model used in
/// two turns, `/output ID` opens the latest and `/output #N` the numbered one; an unknown call
/// is one line.
#[test]
fn chat_output_opens_the_full_output_in_the_pager() {
    use support::pty::Pty;
    let scratch = Scratch::new();
    let server = mock(json!([
        {"tool_calls": [{"id": "c_long", "name": "shell",
                         "arguments": {"command": "seq 1 20000"}}]},
        {"text": "All counted."},
        // The next prompt's call has the same id.
        {"tool_calls": [{"id": "c_long", "name": "shell",
                         "arguments": {"command": "seq 50001 70000"}}]},
        {"text": "Counted again."}
    ]));
    let mut cmd = scratch.pty_cmd(&server, 80, &["chat", "--approve", "allow"]);
    cmd.env("PAGER", "cat");
    let mut pty = Pty::spawn(cmd);
    pty.expect("/help for commands");
    pty.line("count");
    pty.expect("All counted.");
    pty.expect("› ");
    pty.line("/output");
    // In the middle: cut from what the model saw, there in full.
    pty.expect("9999\r\n10000\r\n10001\r\n");
    pty.expect("19999\r\n20000");
    pty.expect("› ");
    // The same call id again: `/output ID` opens the latest, `/output #1` the first.
    pty.line("count again");
    pty.expect("Counted again.");
    pty.expect("› ");
    pty.line("/output c_long");
    pty.expect("59999\r\n60000\r\n60001\r\n");
    pty.expect("69999\r\n70000");
    pty.expect("› ");
    pty.line("/output #1");
    pty.expect("\r\n1\r\n2\r\n");
    pty.expect("9999\r\n10000\r\n10001\r\n");
    pty.expect("› ");
    pty.line("/output nope");
    pty.expect("this session has no call nope");
    pty.exit_chat();
}

/// The blocks of `sessions show --full` for call `call`, in order: each block's heading and
/// its lines.
fn full_blocks(full: &str, call: &str) -> Vec<(String, Vec<String>)> {
    let mut blocks = Vec::new();
    let mut lines = full.lines();
    while let Some(line) = lines.next() {
        let Some(heading) = line.strip_prefix("┌ ") else {
            continue;
        };
        let body: Vec<String> = lines
            .by_ref()
            .take_while(|l| *l != "└")
            .map(str::to_owned)
            .collect();
        let names_call = heading.contains(&format!("call {call} "))
            || heading.ends_with(&format!("call {call}"))
            || heading.contains(&format!("call {call}:"));
        if names_call {
            blocks.push((heading.to_owned(), body));
        }
    }
    blocks
}

/// Every built-in tool that cuts its result keeps the whole of it: grep past its match cap
/// (and a match line longer than what the model is shown), find_files past its path cap,
/// list_dir past its entry cap, and job_output's lines left out by `tail_lines`.
#[test]
fn every_built_in_tool_that_cuts_its_result_keeps_all_of_it() {
    let scratch = Scratch::new();
    let long = "z".repeat(1_000);
    let hay: String = (0..300)
        .map(|i| {
            let extra = if i == 150 { long.as_str() } else { "" };
            format!("needle {i} {extra}\n")
        })
        .collect();
    std::fs::write(scratch.ws().join("hay.txt"), &hay).unwrap();
    std::fs::create_dir(scratch.ws().join("many")).unwrap();
    for i in 0..1_200 {
        std::fs::write(scratch.ws().join(format!("many/f{i:04}.txt")), "").unwrap();
    }
    let server = mock(json!([
        // One batch with a mutating tool: it runs in call order.
        {"tool_calls": [
            {"id": "c_grep", "name": "grep", "arguments": {"pattern": "needle", "path": "hay.txt"}},
            {"id": "c_find", "name": "find_files", "arguments": {"pattern": "*.txt", "path": "many"}},
            {"id": "c_list", "name": "list_dir", "arguments": {"path": "many"}},
            {"id": "c_job", "name": "shell",
             "arguments": {"command": "seq 1 30000; : > job.done", "background": true}},
            {"id": "c_wait", "name": "shell",
             "arguments": {"command": "while [ ! -e job.done ]; do sleep 0.05; done"}},
            {"id": "c_out", "name": "job_output", "arguments": {"job": 1, "tail_lines": 3}}
        ]},
        {"text": "done"}
    ]));
    run(&scratch, &server);
    let full =
        text(&ok(scratch.plain(&["sessions", "show", "--full", &session_id(&scratch)])).stdout);

    let grep: Vec<String> = (0..300)
        .map(|i| {
            let extra = if i == 150 { long.as_str() } else { "" };
            format!("hay.txt:{}: needle {i} {extra}", i + 1)
        })
        .collect();
    let paths: Vec<String> = (0..1_200).map(|i| format!("many/f{i:04}.txt")).collect();
    let names: Vec<String> = (0..1_200).map(|i| format!("f{i:04}.txt")).collect();
    let numbers: Vec<String> = (1..=30_000).map(|n| n.to_string()).collect();
    for (call, expected) in [
        ("c_grep", &grep),
        ("c_find", &paths),
        ("c_list", &names),
        ("c_out", &numbers),
    ] {
        let shown = tool_message(&server, call);
        assert!(
            shown.contains(&format!("[full output kept: call {call} ")),
            "{call}: the model got no note naming the kept output: {shown:.400}"
        );
        let blocks = full_blocks(&full, call);
        assert_eq!(blocks.len(), 1, "{call}: {blocks:?}");
        let (heading, body) = &blocks[0];
        assert!(
            heading.starts_with(&format!("full output of call {call}")),
            "{heading}"
        );
        let body: Vec<String> = body.iter().map(|l| l.trim_end().to_owned()).collect();
        let expected: Vec<String> = expected.iter().map(|l| l.trim_end().to_owned()).collect();
        assert!(
            body == expected,
            "{call}: sessions show --full has {} lines, {} expected; first: {:?}",
            body.len(),
            expected.len(),
            body.first()
        );
    }
}

/// A model that names every turn's call `call_0`: each call's full output stays its own, and
/// `sessions show --full` shows each under its number.
#[test]
fn a_call_id_reused_in_a_later_turn_keeps_both_outputs() {
    let scratch = Scratch::new();
    let server = mock(json!([
        {"tool_calls": [{"id": "call_0", "name": "shell",
                         "arguments": {"command": "seq 1 20000"}}]},
        {"tool_calls": [{"id": "call_0", "name": "shell",
                         "arguments": {"command": "seq 100001 120000"}}]},
        {"text": "done"}
    ]));
    run(&scratch, &server);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let session = session_id(&scratch);
    let full = text(&ok(scratch.plain(&["sessions", "show", "--full", &session])).stdout);
    let blocks = full_blocks(&full, "call_0");
    assert_eq!(blocks.len(), 2, "{blocks:?}");
    for ((heading, body), first) in blocks.iter().zip([1, 100_001]) {
        let expected: Vec<String> = (first..first + 20_000).map(|n| n.to_string()).collect();
        assert!(
            body[..] == expected[..],
            "{heading}: {} lines from {:?}, expected from {first}",
            body.len(),
            body.first()
        );
    }
    assert_ne!(
        blocks[0].0, blocks[1].0,
        "the two outputs are not told apart"
    );
    let kept = std::fs::read_dir(outputs_dir(&scratch, &session))
        .unwrap()
        .count();
    assert_eq!(kept, 2);
}
