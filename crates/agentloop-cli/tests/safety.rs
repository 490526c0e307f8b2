//! The binary against hostile or unlucky conditions: terminal
//! escapes in stored sessions, two processes on one session, deeply nested tool arguments, a
//! session database that cannot be written, private database files, the default turn ceiling.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agentloop_testkit::MockServer;
use serde_json::{Value, json};

use support::{Scratch, server, text};

/// The scratch directory with the database in a directory of its own that does not exist yet.
fn scratch() -> Scratch {
    Scratch::new().layout("data/sessions.db", "xdg")
}

impl Scratch {
    fn prompt_cmd(&self, server: &MockServer, args: &[&str], prompt: &str) -> Command {
        let mut cmd = self.run_cmd(server);
        cmd.args(args)
            .arg(prompt)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

const RAW: [&str; 5] = ["\x1b]0;", "\x1b]52;", "\x1b[2J", "\u{202e}", "\r"];

#[test]
fn stored_hostile_text_is_shown_with_visible_escapes() {
    let scratch = scratch();
    let hostile = "ok\x1b]0;title\x07\x1b]52;c;eA==\x07\x1b[2J\u{202e}\r";
    let server = server(json!({"turns": [
        {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "evil.txt"}}]},
        {"text": format!("model says {hostile}")}
    ]}));
    std::fs::write(scratch.ws().join("evil.txt"), format!("file {hostile}\n")).unwrap();
    let out = scratch.run(
        &server,
        &["--title", &format!("title {hostile}")],
        "read evil.txt",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let live = text(&out.stdout);
    let id = scratch.sessions(&["list", "--json"]);
    let id: Value = serde_json::from_str(text(&id.stdout).lines().next().unwrap()).unwrap();
    let id = id["id"].as_str().unwrap().to_owned();
    let shown = text(&scratch.sessions(&["show", &id]).stdout);
    let listed = text(&scratch.sessions(&["list"]).stdout);
    for (what, output) in [("run", &live), ("show", &shown), ("list", &listed)] {
        for raw in RAW {
            assert!(
                !output.contains(raw),
                "{what}: {raw:?} reached stdout: {output:?}"
            );
        }
        assert!(
            output.contains("\\e]0;title\\x07\\e]52;c;eA==\\x07\\e[2J\\u{202e}"),
            "{what}: {output}"
        );
    }
    assert!(live.contains("file ok\\e]0;"), "tool output: {live}");
    assert!(live.contains("model says ok\\e]0;"), "model text: {live}");
    // JSON keeps the exact text.
    let server = self::server(json!({"turns": [{"text": hostile}]}));
    let out = scratch.run(&server, &["--json"], "hi");
    let exact = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .any(|e| {
            e["type"] == "message_end"
                && e["message"]
                    .to_string()
                    .contains(&serde_json::to_string(hostile).unwrap()[1..10])
        });
    assert!(exact, "{}", text(&out.stdout));
}

#[test]
fn a_second_process_on_a_session_in_use_fails_clearly_and_a_killed_owner_frees_it() {
    let scratch = scratch();
    let slow = |marker: &str| {
        json!({"turns": [
            {"tool_calls": [{"id": "s1", "name": "shell",
              "arguments": {"command": format!("touch {marker}; sleep 30")}}]},
            {"text": "done"}
        ]})
    };
    let server_a = server(slow("a_started"));
    let mut a = scratch
        .prompt_cmd(
            &server_a,
            &["--approve", "allow", "--session", "shared"],
            "go",
        )
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while !scratch.ws().join("a_started").exists() {
        assert!(
            Instant::now() < deadline,
            "the first run never started its command"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // The second writer is refused, naming the owner; nothing of it is recorded.
    let server_b = server(json!({"turns": [{"text": "second"}]}));
    let b = scratch.run(&server_b, &["--session", "shared"], "interleave");
    assert_ne!(b.status.code(), Some(0));
    let stderr = text(&b.stderr);
    assert!(
        stderr.contains(&format!(
            "session \"shared\" is in use by process {}",
            a.id()
        )),
        "{stderr}"
    );
    assert!(server_b.requests().is_empty());
    let b = scratch.run(&server_b, &["--continue"], "interleave");
    assert_ne!(b.status.code(), Some(0), "{}", text(&b.stderr));

    // SIGKILL the owner: the lock dies with it.
    a.kill().unwrap();
    a.wait().unwrap();
    // The mock picks its turn by the number of assistant messages in the history (one).
    let server_c = server(json!({"turns": [{"text": "unused"}, {"text": "resumed"}]}));
    let c = scratch.run(&server_c, &["--session", "shared"], "after the crash");
    assert_eq!(c.status.code(), Some(0), "{}", text(&c.stderr));
    assert_eq!(server_c.requests().len(), 1);
}

fn nested(depth: usize) -> Value {
    let mut value = json!("leaf");
    for _ in 0..depth {
        value = json!({ "n": value });
    }
    value
}

#[test]
fn deeply_nested_arguments_leave_a_resumable_showable_exportable_session() {
    let scratch = scratch();
    let server = server(json!({"turns": [
        {"tool_calls": [{"id": "deep", "name": "read_file", "arguments": {"path": "x", "deep": nested(200)}}]},
        {"text": "after"}
    ]}));
    let out = scratch.run(&server, &["--session", "deep"], "go");
    assert!(out.status.code().is_some(), "{}", text(&out.stderr));
    let show = scratch.sessions(&["show", "deep"]);
    assert!(show.status.success(), "show: {}", text(&show.stderr));
    let export = scratch.sessions(&["export", "deep"]);
    assert!(export.status.success(), "export: {}", text(&export.stderr));
    let file = scratch.dir.path().join("deep.jsonl");
    std::fs::write(&file, &export.stdout).unwrap();
    let import = scratch.sessions(&["import", file.to_str().unwrap()]);
    assert!(import.status.success(), "import: {}", text(&import.stderr));
    let server = self::server(json!({"turns": [
        {"text": "unused"}, {"text": "unused"}, {"text": "resumed"}
    ]}));
    let resumed = scratch.run(&server, &["--session", "deep"], "again");
    assert_eq!(
        resumed.status.code(),
        Some(0),
        "resume: {}",
        text(&resumed.stderr)
    );
    // The deep call is kept exactly (as its text) in what the model sees again.
    let body = server.requests()[0].body.to_string();
    assert!(body.contains("leaf"), "{body}");
}

#[cfg(unix)]
#[test]
fn the_database_is_private_and_a_failed_append_fails_the_run() {
    use std::os::unix::fs::PermissionsExt;
    let scratch = scratch();
    let server = server(json!({"turns": [{"text": "hello"}]}));
    let out = scratch.run(&server, &["--session", "s"], "hi");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&scratch.db()), 0o600);
    assert_eq!(mode(scratch.db().parent().unwrap()), 0o700);

    // A disk that is full for this process: RLIMIT_FSIZE of 40-80 KiB (set by `sh`, with
    // SIGXFSZ ignored so a write past it fails with EFBIG instead of killing the process):
    // enough to open the database (its 32 KiB shared-memory file), too little for the WAL to
    // take a 300 KB prompt. Unlike file modes this holds for root too. The session's first
    // append must fail the run.
    let prompt = scratch.dir.path().join("prompt.txt");
    std::fs::write(&prompt, "this prompt cannot be stored ".repeat(10_000)).unwrap();
    let server = self::server(json!({"turns": [{"text": "lost"}]}));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("trap '' XFSZ; ulimit -f 80; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_agentloop"))
        .args(["--db"])
        .arg(scratch.db())
        .args(["run", "--model", "openai:mock", "--base-url"])
        .arg(server.openai_base_url())
        .arg("--workspace")
        .arg(scratch.ws())
        .args(["--session", "s", "-"])
        .env("OPENAI_API_KEY", "dummy")
        .env("NO_COLOR", "1")
        .stdin(std::fs::File::open(&prompt).unwrap());
    let out = cmd.output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("could not be recorded in session s"),
        "{stderr}"
    );
    // What was stored before is intact and readable.
    let show = scratch.sessions(&["show", "s"]);
    assert!(show.status.success(), "{}", text(&show.stderr));
    assert!(text(&show.stdout).contains("hello"));
}

#[test]
fn runs_have_a_default_turn_ceiling() {
    let scratch = scratch();
    let out = scratch.cmd().args(["run", "--help"]).output().unwrap();
    let help = text(&out.stdout);
    assert!(help.contains("[default: 100]"), "{help}");
    assert!(help.contains("none"), "{help}");
}
