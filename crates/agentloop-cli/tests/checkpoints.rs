//! Workspace checkpoints through the binary and the mock model: files written, edited,
//! created, moved and deleted by `write_file`, `edit_file`, shell commands and a background
//! job all come back byte for byte after `rewind --to` (modes, symbolic links and deleted
//! directories included); someone else's edit is kept unless `--force`; `checkpoints --json`
//! has its documented fields; `--no-checkpoints` records nothing; `diff` shows the changes.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

mod support;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::{Scratch, ok, text};

fn server(turns: Value) -> MockServer {
    MockServer::start(Script::from_value(json!({ "turns": turns })).unwrap())
}

/// A model that writes "agent" to notes.txt (call `c1`), then says "done".
fn agent_writes_notes() -> MockServer {
    server(json!([
        {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "notes.txt", "content": "agent\n"}}]},
        {"text": "done"}
    ]))
}

fn run(scratch: &Scratch, server: &MockServer, extra: &[&str]) -> Output {
    scratch
        .run_cmd(server)
        .args(["--approve", "always"])
        .args(extra)
        .arg("Do the work.")
        .output()
        .unwrap()
}

/// Runs `agentloop ARGS` in the workspace (so the default session is its last one).
fn in_ws(scratch: &Scratch, args: &[&str]) -> Output {
    scratch
        .cmd()
        .current_dir(scratch.ws())
        .args(args)
        .output()
        .unwrap()
}

/// Every path of a tree with what identifies it: file bytes and mode, link target, dir mode.
fn tree(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let rel = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let meta = std::fs::symlink_metadata(&path).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&path).unwrap();
            out.insert(rel, format!("link {}", target.display()));
        } else if meta.is_dir() {
            out.insert(rel, format!("dir {mode:o}"));
            walk(root, &path, out);
        } else {
            let bytes = std::fs::read(&path).unwrap();
            out.insert(rel, format!("file {mode:o} {bytes:?}"));
        }
    }
}

fn checkpoints_json(scratch: &Scratch) -> Vec<Value> {
    let out = ok(in_ws(scratch, &["checkpoints", "--json"]));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A workspace with one of each thing the agent will change.
fn populated() -> Scratch {
    let scratch = Scratch::new();
    let ws = scratch.ws();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(ws.join("b.txt"), "one two\n").unwrap();
    std::fs::write(ws.join("c.txt"), "one\n").unwrap();
    std::fs::write(ws.join("gone.txt"), "delete me\n").unwrap();
    std::fs::write(ws.join("moved.txt"), "move me\n").unwrap();
    std::fs::write(ws.join("bin.dat"), [0u8, 159, 146, 150, 255, 0, 1]).unwrap();
    std::fs::create_dir_all(ws.join("dir/sub")).unwrap();
    std::fs::write(ws.join("dir/sub/keep.txt"), "deep\n").unwrap();
    std::fs::write(ws.join("script.sh"), "#!/bin/sh\necho hi\n").unwrap();
    std::fs::set_permissions(ws.join("script.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", ws.join("link")).unwrap();
    scratch
}

const SHELL_CHANGES: &str = "sed -i 's/one/ONE/' c.txt && rm gone.txt && mv moved.txt moved2.txt \
     && mkdir -p made/deep && echo x > made/deep/f && rm -r dir && chmod -x script.sh \
     && rm link && ln -s b.txt link && printf '\\001\\002' > bin.dat";

fn every_kind_of_change() -> Value {
    json!([
        {"tool_calls": [
            {"id": "c_write", "name": "write_file", "arguments": {"path": "a.txt", "content": "changed\n"}},
            {"id": "c_new", "name": "write_file", "arguments": {"path": "new/file.txt", "content": "created\n"}}
        ]},
        {"tool_calls": [{"id": "c_edit", "name": "edit_file",
                         "arguments": {"path": "b.txt", "old_text": "two", "new_text": "TWO"}}]},
        {"tool_calls": [{"id": "c_shell", "name": "shell", "arguments": {"command": SHELL_CHANGES}}]},
        {"tool_calls": [{"id": "c_bg", "name": "shell",
                         "arguments": {"command": "echo from the job > bg.txt", "background": true}}]},
        {"tool_calls": [{"id": "c_wait", "name": "shell",
                         "arguments": {"command": "while [ ! -s bg.txt ]; do sleep 0.02; done"}}]},
        {"text": "done"}
    ])
}

#[test]
fn rewind_puts_back_every_file_the_run_changed_and_forks_the_conversation() {
    let scratch = populated();
    let before = tree(&scratch.ws());
    let server = server(every_kind_of_change());
    ok(run(&scratch, &server, &[]));
    let after = tree(&scratch.ws());
    assert_ne!(before, after);
    assert!(scratch.ws().join("bg.txt").exists(), "the job did not run");

    let list = checkpoints_json(&scratch);
    let tools: Vec<&str> = list.iter().map(|c| c["tool"].as_str().unwrap()).collect();
    assert_eq!(
        tools,
        [
            "write_file",
            "write_file",
            "edit_file",
            "shell",
            "shell",
            "shell"
        ]
    );
    assert_eq!(list[0]["call_id"], "c_write");
    assert_eq!(list[0]["files"], json!(["a.txt"]));
    assert_eq!(list[0]["turn"], 1);
    assert_eq!(list[2]["turn"], 2);
    assert_eq!(list[2]["files"], json!(["b.txt"]));
    // What the background job wrote belongs to the run's checkpoints.
    let all: Vec<&str> = list
        .iter()
        .flat_map(|c| c["files"].as_array().unwrap())
        .map(|f| f.as_str().unwrap())
        .collect();
    assert!(all.contains(&"bg.txt"), "{all:?}");

    let first = list[0]["id"].to_string();
    let out = ok(in_ws(&scratch, &["rewind", "--to", &first]));
    assert_eq!(tree(&scratch.ws()), before, "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("forked the conversation"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn rewinding_to_a_later_checkpoint_keeps_the_earlier_changes() {
    let scratch = populated();
    let server = server(every_kind_of_change());
    ok(run(&scratch, &server, &[]));
    let list = checkpoints_json(&scratch);
    let shell = list.iter().find(|c| c["call_id"] == "c_shell").unwrap();
    ok(in_ws(
        &scratch,
        &["rewind", "--to", &shell["id"].to_string(), "--files-only"],
    ));
    let ws = scratch.ws();
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "changed\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt")).unwrap(),
        "one TWO\n"
    );
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "one\n");
    assert_eq!(
        std::fs::read_to_string(ws.join("dir/sub/keep.txt")).unwrap(),
        "deep\n"
    );
    assert!(!ws.join("made").exists() && !ws.join("bg.txt").exists());
    let mode = std::fs::metadata(ws.join("script.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(
        std::fs::read_link(ws.join("link")).unwrap(),
        Path::new("a.txt")
    );
}

#[test]
fn a_file_someone_else_changed_is_skipped_unless_forced() {
    let scratch = Scratch::with_notes();
    let server = agent_writes_notes();
    ok(run(&scratch, &server, &[]));
    let notes = scratch.ws().join("notes.txt");
    std::fs::write(&notes, "the user's own edit\n").unwrap();

    let out = ok(in_ws(&scratch, &["rewind", "--to", "1", "--files-only"]));
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "the user's own edit\n"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("skipped notes.txt") && stderr.contains("--force"),
        "{stderr}"
    );

    ok(in_ws(
        &scratch,
        &["rewind", "--to", "1", "--files-only", "--force"],
    ));
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "remember the milk\n"
    );
}

#[test]
fn no_checkpoints_records_nothing() {
    let scratch = Scratch::with_notes();
    let server = agent_writes_notes();
    ok(run(&scratch, &server, &["--no-checkpoints"]));
    let store = scratch.path("data/agentloop/checkpoints");
    assert!(!store.exists(), "the store was created");
    assert!(checkpoints_json(&scratch).is_empty());
}

#[test]
fn diff_shows_text_changes_as_a_unified_diff_and_binary_ones_as_a_line() {
    let scratch = populated();
    let server = server(every_kind_of_change());
    ok(run(&scratch, &server, &[]));
    let out = ok(in_ws(&scratch, &["diff"]));
    let diff = text(&out.stdout);
    for expected in [
        "--- a/a.txt\n+++ b/a.txt\n",
        "-alpha\n+changed\n",
        "--- /dev/null\n+++ b/new/file.txt\n",
        "+created\n",
        "-one two\n+one TWO\n",
        "--- a/gone.txt\n+++ /dev/null\n",
        "bin.dat: binary file changed\n",
        "link: symbolic link to a.txt → symbolic link to b.txt\n",
        "mode of script.sh: 755 → 644\n",
    ] {
        assert!(
            diff.contains(expected),
            "{expected:?} missing from:\n{diff}"
        );
    }
    // After a rewind of everything, nothing is left to show.
    ok(in_ws(&scratch, &["rewind", "--to", "1", "--files-only"]));
}

#[test]
fn conversation_only_forks_without_touching_files() {
    let scratch = Scratch::with_notes();
    let server = agent_writes_notes();
    ok(run(&scratch, &server, &[]));
    let out = ok(in_ws(
        &scratch,
        &["rewind", "--to", "1", "--conversation-only"],
    ));
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap(),
        "agent\n"
    );
    let stdout = text(&out.stdout);
    let fork = stdout
        .split("into session ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap();
    let shown = ok(scratch.plain(&["sessions", "export", fork]));
    let lines: Vec<Value> = text(&shown.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The header and the prompt: the fork ends before the reply that wrote the file.
    assert_eq!(lines.len(), 2, "{lines:?}");
}

/// Chat on a pseudo-terminal: `/diff` shows the turn's change, `/rewind` lists the checkpoints,
/// takes an id, puts the file back and continues in the fork.
#[test]
fn chat_diff_and_rewind_picker() {
    use support::pty::Pty;
    let scratch = Scratch::with_notes();
    let server = server(json!([
        {"tool_calls": [{"id": "c1", "name": "write_file",
                         "arguments": {"path": "notes.txt", "content": "written by the agent\n"}}]},
        {"text": "All written."}
    ]));
    let mut pty = Pty::spawn(scratch.pty_cmd(&server, 100, &["chat", "--approve", "allow"]));
    pty.expect("/help for commands");
    pty.line("rewrite the notes");
    pty.expect("All written.");
    // A line typed while the turn runs steers it: wait for the prompt.
    pty.expect("› ");
    pty.line("/diff");
    pty.expect("-remember the milk");
    pty.expect("+written by the agent");
    pty.expect("› ");
    pty.line("/rewind");
    pty.expect("write_file");
    pty.expect("Rewind to which checkpoint?");
    pty.line("1");
    pty.expect("restored notes.txt");
    pty.expect("now in session");
    pty.exit_chat();
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap(),
        "remember the milk\n"
    );
}

#[test]
fn an_unknown_checkpoint_is_one_clear_error() {
    let scratch = Scratch::with_notes();
    let server = agent_writes_notes();
    ok(run(&scratch, &server, &[]));
    let out = in_ws(&scratch, &["rewind", "--to", "99"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("no checkpoint 99"), "{stderr}");
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap(),
        "agent\n"
    );
}
