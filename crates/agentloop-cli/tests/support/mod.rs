//! The scratch workspace every CLI test runs the binary in: a temporary directory holding the
//! workspace (`ws/`), the session database, and the data and config homes, so that nothing the
//! developer has (keys, base URLs, default model or profile, OpenTelemetry settings, their own
//! config and sessions) reaches a test, and nothing a test writes reaches them.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentloop_testkit::MockServer;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_agentloop");

/// Variables of the developer's environment that would change what the binary does.
const CLEARED: &[&str] = &[
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "AGENTLOOP_DB",
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
}

impl Scratch {
    /// An empty workspace; the database is `sessions.db`, the data home `data/`.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        Scratch {
            dir,
            db: "sessions.db",
            data_home: "data",
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

    /// The binary with a clean environment: a dummy OpenAI key and no other keys, base URLs,
    /// default model or profile, or `OTEL_*` settings; data and config homes in the scratch
    /// directory; no colours; `--db` set; stdin closed.
    pub fn cmd(&self) -> Command {
        let mut cmd = Command::new(BIN);
        for (var, _) in std::env::vars() {
            if var.starts_with("OTEL_") {
                cmd.env_remove(var);
            }
        }
        for var in CLEARED {
            cmd.env_remove(var);
        }
        cmd.env("OPENAI_API_KEY", "dummy")
            .env("XDG_DATA_HOME", self.path(self.data_home))
            .env("XDG_CONFIG_HOME", self.path("config"))
            .env("NO_COLOR", "1")
            .arg("--db")
            .arg(self.db())
            .stdin(Stdio::null());
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
}
