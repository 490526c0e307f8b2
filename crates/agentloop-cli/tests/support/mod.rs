//! The scratch workspace every CLI test runs the binary in: a temporary directory holding the
//! workspace (`ws/`), the session database, and the home, data and config directories, so that
//! nothing the developer has (keys, base URLs, default model, profile or store, OpenTelemetry
//! settings, their own config and sessions) reaches a test, and nothing a test writes reaches
//! them; and the mock model server a test scripts.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentloop_testkit::{MockServer, Script};
use serde_json::Value;

#[cfg(target_os = "linux")]
pub mod procs;
#[cfg(unix)]
pub mod pty;
pub mod schema;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agentloop");

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
