//! The interactive chat's daily-use conveniences on a real pseudo-terminal (`expectrl`), the
//! binary running against a testkit mock model server:
//!
//! - resuming: `agentloop --resume` and `agentloop resume` list this workspace's top-level
//!   sessions and open the chosen one, showing its earlier conversation; leaving a chat prints
//!   the command that comes back to it; without a terminal, a one-line usage error;
//! - input: Tab completes slash commands and `@path` mentions, an `@file` mention attaches the
//!   file (one outside the workspace is refused), `!command` runs a shell command whose output
//!   goes with the next prompt, `/image PATH` attaches an image.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use agentloop::session::{NewSession, ParentLink, SessionSettings, SessionStore, SqliteStore};
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script};
use expectrl::{Eof, Session};
use serde_json::{Value, json};

/// A scratch directory: the workspace `ws/`, the session database, data and config homes.
struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        Scratch { dir }
    }
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }
    fn db(&self) -> PathBuf {
        self.dir.path().join("sessions.db")
    }
    /// The binary with a clean environment, the scratch homes and database, no colours, an
    /// 80-column terminal; stdio left to the caller.
    fn cmd(&self) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_agentloop"));
        for var in [
            "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "AGENTLOOP_DB",
            "AGENTLOOP_STORE",
            "AGENTLOOP_MODEL",
            "AGENTLOOP_PROFILE",
            "OTEL_EXPORTER_OTLP_ENDPOINT",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("OPENAI_API_KEY", "dummy")
            .env("XDG_DATA_HOME", self.dir.path().join("data"))
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("NO_COLOR", "1")
            .env("COLUMNS", "80")
            .arg("--db")
            .arg(self.db());
        cmd
    }
    /// `agentloop run` (no terminal) with the mock model on the workspace.
    fn run(&self, server: &MockServer, args: &[&str], prompt: &str) {
        let out = self
            .cmd()
            .args(["run", "-m", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("-w")
            .arg(self.ws())
            .args(args)
            .arg(prompt)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    /// The sessions, most recent first.
    fn sessions(&self) -> Vec<Value> {
        let out = self
            .cmd()
            .args(["sessions", "list", "--json", "--all"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    /// `agentloop ARGS… -m openai:mock --base-url URL -w ws` on a pseudo-terminal.
    fn pty(&self, server: &MockServer, args: &[&str]) -> Pty {
        let mut cmd = self.cmd();
        cmd.args(args)
            .args(["-m", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("-w")
            .arg(self.ws());
        let mut session = Session::spawn(cmd).unwrap();
        session.set_expect_timeout(Some(Duration::from_secs(60)));
        Pty {
            session,
            seen: Vec::new(),
        }
    }
}

/// A program on a pseudo-terminal and everything it showed so far.
struct Pty {
    session: Session,
    seen: Vec<u8>,
}

impl Pty {
    /// Waits for `needle`; returns the text shown up to and including it.
    fn expect(&mut self, needle: &str) -> String {
        let found = self.session.expect(needle).unwrap_or_else(|e| {
            panic!(
                "{needle:?} did not appear ({e}); the terminal showed:\n{}",
                String::from_utf8_lossy(&self.seen)
            )
        });
        let mut text = String::from_utf8_lossy(found.before()).into_owned();
        text.push_str(&String::from_utf8_lossy(found.as_bytes()));
        self.seen.extend_from_slice(text.as_bytes());
        text
    }
    fn line(&mut self, line: &str) {
        self.session.send_line(line).unwrap();
    }
    /// Keys without Enter.
    fn keys(&mut self, keys: &str) {
        self.session.send(keys).unwrap();
    }
    /// Reads to the end of the program; returns what it showed since the last expectation.
    fn finish(mut self) -> String {
        match self.session.expect(Eof) {
            Ok(found) => {
                let mut text = String::from_utf8_lossy(found.before()).into_owned();
                text.push_str(&String::from_utf8_lossy(found.as_bytes()));
                text
            }
            Err(e) => panic!(
                "the program did not end ({e}); it showed:\n{}",
                String::from_utf8_lossy(&self.seen)
            ),
        }
    }
}

/// One pseudo-terminal at a time: children forked from this multi-threaded test process at the
/// same moment stall each other's terminals.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static PTY: std::sync::Mutex<()> = std::sync::Mutex::new(());
    PTY.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn server(script: Value) -> MockServer {
    MockServer::start(Script::from_value(script).unwrap())
}

/// The messages of the last request the server received, as one string.
fn last_messages(server: &MockServer) -> String {
    let requests = server.requests();
    requests.last().expect("a request").body["messages"].to_string()
}

// ---------------------------------------------------------------------------------------------
// Resuming.

#[test]
fn the_picker_lists_top_level_sessions_and_opens_one_with_its_earlier_conversation() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "- the answer"}], "repeat": true}));
    // An older session of four exchanges, then a newer one of one.
    scratch.run(&server, &["--session", "alpha-work"], "alpha question 1");
    for n in 2..=4 {
        scratch.run(
            &server,
            &["--session", "alpha-work"],
            &format!("alpha question {n}"),
        );
    }
    scratch.run(&server, &[], "beta question");
    // A sub-agent's child session of it, the most recent of all: never listed.
    let store = SqliteStore::open(scratch.db()).unwrap();
    let beta = scratch.sessions()[0]["id"].as_str().unwrap().to_owned();
    let ws = std::fs::canonicalize(scratch.ws()).unwrap();
    let child = store
        .create(
            NewSession::new()
                .title("child task")
                .settings(SessionSettings::new().workspace(&ws))
                .parent(ParentLink::new(&beta, "c1", "helper")),
        )
        .unwrap();
    store
        .append(&child.id, &Message::user("child task"))
        .unwrap();
    drop(store);

    let mut pty = scratch.pty(&server, &["--resume"]);
    let list = pty.expect("pick a number (Enter = 1, q = quit)");
    let beta_at = list.find("beta question").expect(&list);
    let alpha_at = list.find("alpha question 1").expect(&list);
    assert!(beta_at < alpha_at, "most recent first:\n{list}");
    assert!(
        !list.contains("child task"),
        "a child session listed:\n{list}"
    );
    assert!(list.contains("4 turns"), "{list}");
    assert!(
        list.contains("just now") || list.contains("m ago"),
        "{list}"
    );
    pty.line("2");
    // The earlier conversation: the last three exchanges, rendered, under the count of the rest.
    let shown = pty.expect("› ");
    let shown = format!("{shown}{}", pty.expect("alpha question 4"));
    assert!(shown.contains("… 2 earlier messages"), "{shown}");
    assert!(!shown.contains("alpha question 1"), "{shown}");
    assert!(shown.contains("alpha question 2"), "{shown}");
    pty.expect("• the answer");
    pty.expect("› ");
    pty.line("one more");
    pty.expect("• the answer");
    pty.expect("› ");
    assert!(last_messages(&server).contains("alpha question 4"));
    pty.line("/exit");
    let end = pty.finish();
    assert!(
        end.contains("agentloop chat --session alpha-work"),
        "no resume command at exit:\n{end}"
    );
}

#[test]
fn resume_without_an_id_lists_on_a_terminal_and_is_a_usage_error_without_one() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "an answer"}], "repeat": true}));
    scratch.run(&server, &["--session", "only-one"], "the first prompt");

    let out = scratch
        .cmd()
        .arg("resume")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--session"), "{stderr}");

    // `agentloop resume` (no parked run) on a terminal: the list, Enter takes the first.
    let mut pty = scratch.pty(&server, &["resume"]);
    pty.expect("pick a number");
    pty.line("");
    pty.expect("the first prompt");
    pty.expect("› ");
    pty.line("/exit");
    let end = pty.finish();
    assert!(end.contains("agentloop resume only-one"), "{end}");
    // `agentloop resume ID` of a session with no parked run continues it in chat.
    let mut pty = scratch.pty(&server, &["resume", "only-one"]);
    pty.expect("the first prompt");
    pty.expect("› ");
    pty.line("/exit");
    pty.finish();
    // `q` leaves the list without opening anything.
    let mut pty = scratch.pty(&server, &["--resume"]);
    pty.expect("pick a number");
    pty.line("q");
    let end = pty.finish();
    assert!(!end.contains("agentloop chat ·"), "{end}");
}

// ---------------------------------------------------------------------------------------------
// Input conveniences.

/// A chat on the scratch workspace, at its first prompt.
fn chat(scratch: &Scratch, server: &MockServer) -> Pty {
    let mut pty = scratch.pty(server, &["chat"]);
    pty.expect("› ");
    pty
}

#[test]
fn tab_completes_commands_and_workspace_paths_and_a_mention_attaches_the_file() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.ws().join("src")).unwrap();
    std::fs::write(scratch.ws().join("src/lib.rs"), "pub fn forty_two() {}\n").unwrap();
    let server = server(json!({"turns": [{"text": "seen it"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.keys("/he\t");
    pty.expect("/help");
    pty.keys("\r");
    pty.expect("/image PATH");
    pty.expect("› ");
    pty.keys("explain @sr\t");
    pty.expect("@src/");
    pty.keys("lib.rs please\r");
    let shown = pty.expect("seen it");
    assert!(shown.contains("attached @src/lib.rs"), "{shown}");
    let sent = last_messages(&server);
    assert!(sent.contains("explain @src/lib.rs please"), "{sent}");
    assert!(
        sent.contains("pub fn forty_two()"),
        "the file's contents: {sent}"
    );
    pty.expect("› ");
    pty.line("/exit");
    pty.finish();
}

#[test]
fn a_mention_outside_the_workspace_is_refused() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    std::fs::write(scratch.dir.path().join("outside.txt"), "top secret\n").unwrap();
    std::os::unix::fs::symlink(
        scratch.dir.path().join("outside.txt"),
        scratch.ws().join("inside.txt"),
    )
    .unwrap();
    let server = server(json!({"turns": [{"text": "ok then"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.line("read @../outside.txt and @inside.txt");
    let shown = pty.expect("ok then");
    assert!(
        shown.contains("@../outside.txt is outside the workspace: not attached"),
        "{shown}"
    );
    assert!(
        shown.contains("@inside.txt is outside the workspace"),
        "a link out: {shown}"
    );
    assert!(!last_messages(&server).contains("top secret"));
    pty.expect("› ");
    pty.line("/exit");
    pty.finish();
}

#[test]
fn a_bang_command_shows_its_output_and_the_next_prompt_carries_it() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "noted"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.line("!echo hi from the shell");
    let shown = pty.expect("goes to the model with your next prompt");
    assert!(shown.contains("hi from the shell"), "{shown}");
    assert!(server.requests().is_empty(), "a model call for !command");
    pty.expect("› ");
    pty.line("what did it say?");
    pty.expect("noted");
    let sent = last_messages(&server);
    assert!(
        sent.contains("The user ran `echo hi from the shell`"),
        "{sent}"
    );
    assert!(sent.contains("what did it say?"), "{sent}");
    pty.expect("› ");
    // Only the next prompt carries it.
    pty.line("and now?");
    pty.expect("noted");
    let sent = server.requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(!sent.contains("The user ran"), "{sent}");
    pty.expect("› ");
    pty.line("/exit");
    pty.finish();
}

#[test]
fn image_attaches_an_image_to_the_next_prompt() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let png = scratch.ws().join("shot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n0000IHDR").unwrap();
    std::fs::write(scratch.ws().join("notes.txt"), "not an image").unwrap();
    let server = server(json!({"turns": [{"text": "a picture"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.line(&format!(
        "/image {}",
        scratch.ws().join("notes.txt").display()
    ));
    pty.expect("is not a PNG, JPEG, GIF or WebP image");
    pty.expect("› ");
    pty.line(&format!("/image {}", png.display()));
    pty.expect("goes with your next prompt");
    pty.expect("› ");
    pty.line("what is in it?");
    pty.expect("a picture");
    let sent = last_messages(&server);
    assert!(sent.contains("data:image/png;base64,"), "{sent}");
    assert!(sent.contains("what is in it?"), "{sent}");
    pty.expect("› ");
    pty.line("/exit");
    pty.finish();
}
