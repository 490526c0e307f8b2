//! The scratch workspace every CLI test runs the binary in: a temporary directory holding the
//! workspace (`ws/`), the session database, and the home, data and config directories, so that
//! nothing the developer has (keys, base URLs, default model, profile or store, OpenTelemetry
//! settings, their own config and sessions) reaches a test, and nothing a test writes reaches
//! them; the mock model server a test scripts; and what the tests share to run a child and
//! check its output.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

#[cfg(target_os = "linux")]
pub mod procs;
#[cfg(unix)]
pub mod pty;
pub mod schema;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agentloop");

/// The ACP `terminal/*` requests agentloop makes for a command that runs to its end, in order:
/// start it, wait for it, read its output, release the terminal.
pub const ACP_TERMINAL_REQUESTS: [&str; 4] = [
    "terminal/create",
    "terminal/wait_for_exit",
    "terminal/output",
    "terminal/release",
];

/// Variables of the developer's environment that would change what the binary does.
const CLEARED: &[&str] = &[
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "AGENTLOOP_DB",
    "AGENTLOOP_STORE",
    "AGENTLOOP_MODEL",
    "AGENTLOOP_PROFILE",
];

/// A temporary directory with an empty workspace `ws/`; removed when dropped.
pub struct Scratch {
    pub dir: tempfile::TempDir,
    /// The session database, relative to `dir`.
    db: &'static str,
    /// `XDG_DATA_HOME`, relative to `dir`.
    data_home: &'static str,
    /// `OPENAI_API_KEY`.
    key: &'static str,
}

impl Scratch {
    /// An empty workspace and an empty `config/agentloop/`; the database is `sessions.db`, the
    /// data home `data/`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        std::fs::create_dir_all(dir.path().join("config/agentloop")).unwrap();
        Scratch {
            dir,
            db: "sessions.db",
            data_home: "data",
            key: "dummy",
        }
    }

    /// A workspace holding `notes.txt` ("remember the milk").
    pub fn with_notes() -> Self {
        let scratch = Scratch::new();
        std::fs::write(scratch.ws().join("notes.txt"), "remember the milk\n").unwrap();
        scratch
    }

    /// The database at `db` and the data home at `data_home` instead (both relative).
    pub fn layout(mut self, db: &'static str, data_home: &'static str) -> Self {
        self.db = db;
        self.data_home = data_home;
        self
    }

    /// `key` as the OpenAI key instead of a dummy one.
    pub fn openai_key(mut self, key: &'static str) -> Self {
        self.key = key;
        self
    }

    /// A path inside the scratch directory.
    pub fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// The workspace.
    pub fn ws(&self) -> PathBuf {
        self.path("ws")
    }

    /// The session database.
    pub fn db(&self) -> PathBuf {
        self.path(self.db)
    }

    /// The home directory of the binary (`HOME`; not created).
    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// The binary with a clean environment: the OpenAI key (a dummy one unless
    /// [`Scratch::openai_key`] says otherwise) and no other keys, base URLs,
    /// default model, profile or store, or `OTEL_*` settings; home, data and config directories
    /// in the scratch directory (and so a git identity of its own, for the commits of isolated
    /// worktrees); no colours. No `--db`, and stdio left to the caller.
    pub fn env_cmd(&self) -> Command {
        self.env_cmd_of(BIN)
    }

    /// [`Scratch::env_cmd`] of another build of the binary.
    pub fn env_cmd_of(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new(program);
        for (var, _) in std::env::vars() {
            if var.starts_with("OTEL_") {
                cmd.env_remove(var);
            }
        }
        for var in CLEARED {
            cmd.env_remove(var);
        }
        cmd.env("OPENAI_API_KEY", self.key)
            .env("HOME", self.home())
            .env("XDG_DATA_HOME", self.path(self.data_home))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("NO_COLOR", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.invalid");
        cmd
    }

    /// [`Scratch::env_cmd`] with `--db` set; stdio left to the caller (a pseudo-terminal).
    pub fn tty_cmd(&self) -> Command {
        let mut cmd = self.env_cmd();
        cmd.arg("--db").arg(self.db());
        cmd
    }

    /// [`Scratch::tty_cmd`] with stdin closed.
    pub fn cmd(&self) -> Command {
        let mut cmd = self.tty_cmd();
        cmd.stdin(Stdio::null());
        cmd
    }

    /// `cmd()` + `run --model openai:mock --base-url SERVER --workspace ws`.
    pub fn run_cmd(&self, server: &MockServer) -> Command {
        self.run_model_cmd(server, "openai:mock")
    }

    /// `cmd()` + `run --model MODEL --base-url SERVER --workspace ws`.
    pub fn run_model_cmd(&self, server: &MockServer, model: &str) -> Command {
        let mut cmd = self.cmd();
        cmd.args(["run", "--model", model, "--base-url"])
            .arg(server.openai_base_url())
            .arg("--workspace")
            .arg(self.ws());
        cmd
    }

    /// `cmd()` with `args`, run to its end.
    pub fn plain(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// `cmd()` with `ARGS… --workspace ws` (a command about the workspace: `config show`,
    /// `mcp list`, …), run to its end.
    pub fn in_workspace(&self, args: &[&str]) -> Output {
        self.cmd()
            .args(args)
            .arg("--workspace")
            .arg(self.ws())
            .output()
            .unwrap()
    }

    /// `run_cmd(server)` + `ARGS… PROMPT`, run to its end.
    pub fn run(&self, server: &MockServer, args: &[&str], prompt: &str) -> Output {
        self.run_cmd(server)
            .args(args)
            .arg(prompt)
            .output()
            .unwrap()
    }

    /// `agentloop sessions ARGS…`, run to its end.
    pub fn sessions(&self, args: &[&str]) -> Output {
        self.cmd().arg("sessions").args(args).output().unwrap()
    }

    /// `agentloop sessions list --json`: this workspace's sessions, most recent first.
    pub fn session_list(&self) -> Vec<Value> {
        let out = self.sessions(&["list", "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Writes the user's config file (`config/agentloop/config.toml`); returns its path.
    pub fn user_config(&self, toml: &str) -> PathBuf {
        let path = self.path("config/agentloop/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, toml).unwrap();
        path
    }

    /// Writes the workspace's config file (`ws/.agentloop/config.toml`); returns its path.
    pub fn workspace_config(&self, toml: &str) -> PathBuf {
        let path = self.ws().join(".agentloop/config.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, toml).unwrap();
        path
    }
}

/// Runs `cmd` to its end with `input` piped to its stdin (closed after it) and its outputs
/// captured. The input is written whole before the outputs are read: keep it small enough for
/// the pipe's buffer.
pub fn output_with_stdin(cmd: &mut Command, input: &[u8]) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// Takes the child's stdout and reads its lines on a thread of their own, so that a test can
/// wait for one with a timeout; the channel ends with the stdout (or its first read error).
pub fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("the child's stdout is piped");
    let (send, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    lines
}

/// Sends the signal `name` (`INT`, `TERM`, …) to process `pid` through kill(1), as a terminal or
/// a supervisor would (Unix); asserts that it was sent.
pub fn send_signal(pid: u32, name: &str) {
    let status = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid.to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} {pid}: {status}");
}

/// Bytes a child wrote, as text.
pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A child's stdout and stderr, labelled, for an assertion's message.
pub fn output_text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that the child's stdout contains `needle`; otherwise shows both of its outputs.
pub fn assert_stdout_has(out: &Output, needle: &str) {
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(needle),
        "stdout lacks {needle:?}\n{}",
        output_text(out)
    );
}

/// Asserts that the child's stderr contains `needle`; otherwise shows both of its outputs.
pub fn assert_stderr_has(out: &Output, needle: &str) {
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(needle),
        "stderr lacks {needle:?}\n{}",
        output_text(out)
    );
}

/// Asserts that the binary ended successfully; otherwise shows its exit code, stdout and stderr.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// [`assert_ok`], handing the output on.
pub fn ok(out: Output) -> Output {
    assert_ok(&out);
    out
}

/// The messages of the last request `server` received, as one string.
pub fn last_messages(server: &MockServer) -> String {
    let requests = server.requests();
    requests.last().expect("a request").body["messages"].to_string()
}

/// A mock model server serving `script` (a testkit script as JSON).
pub fn server(script: Value) -> MockServer {
    MockServer::start(Script::from_value(script).unwrap())
}

/// A model turn calling `list_dir` on the workspace (call `id`) whose usage reports
/// `input_tokens`: how a test fills the context window without large files.
pub fn list_call(id: &str, input_tokens: u64) -> Value {
    json!({"tool_calls": [{"id": id, "name": "list_dir", "arguments": {"path": "."}}],
           "usage": {"input_tokens": input_tokens, "output_tokens": 5}})
}

/// The flags of a 1,000-token context window compacted at half of it, keeping the last turn.
pub const COMPACTING_FLAGS: [&str; 6] = [
    "--context-window",
    "1000",
    "--compact-at",
    "0.5",
    "--keep-turns",
    "1",
];

/// A model whose two tool turns pass half of a 1,000-token window by the second: under
/// [`COMPACTING_FLAGS`] the loop compacts before the third model call, whose reply is the summary
/// (`SUMMARY-OF-EARLY-WORK`); then it answers `Finished.`.
pub fn compacting_server() -> MockServer {
    server(json!({"mode": "sequential", "turns": [
        list_call("c1", 100),
        list_call("c2", 900),
        {"text": "SUMMARY-OF-EARLY-WORK"},
        {"text": "Finished."}
    ]}))
}
