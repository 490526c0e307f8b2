//! Helpers of the orphan tests (`orphans.rs`, `orphans_exit.rs`): a shell command that leaves a
//! `setsid`-detached process behind, checks on whether that process is still alive, and a
//! workspace whose `shell` tool runs such commands.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentloop::builtin::{self, Workspace};
use agentloop::tooling::{Deps, ExecOptions, Registry, run_tools_with};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use serde_json::Value;

/// A command that leaves a detached `sleep 300` behind (its pid in `pidfile`), then runs `rest`.
pub fn detach(pidfile: &Path, rest: &str) -> String {
    format!(
        "(setsid sh -c 'echo $$ > {pid}.tmp && mv {pid}.tmp {pid} && exec sleep 300' &) ; {rest}",
        pid = pidfile.display()
    )
}

/// Alive means: exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| !s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

pub async fn wait_for_pid(pidfile: &Path) -> u32 {
    for _ in 0..500 {
        if let Ok(text) = std::fs::read_to_string(pidfile) {
            if let Ok(pid) = text.trim().parse() {
                return pid;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the detached process never wrote its pid");
}

/// Polls (the kill is asynchronous to this check) until the process is gone; false if it stays.
pub async fn gone(pid: u32) -> bool {
    for _ in 0..250 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A scratch workspace and the built-in tools confined to it.
pub struct Setup {
    pub dir: tempfile::TempDir,
    pub registry: Registry<Deps>,
}

impl Setup {
    /// Runs one `shell` call with arguments `args` under `options` to its end and returns its
    /// result.
    pub async fn shell(&self, args: Value, options: ExecOptions) -> ToolResultPart {
        let call = ToolCallPart::new("shell-1", "shell", args);
        let mut out =
            run_tools_with(&[call], &self.registry, &Arc::new(Deps::new()), &options).await;
        out.remove(0).result
    }
}

pub fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let registry = Registry::new(builtin::tools::<Deps>(&workspace)).unwrap();
    Setup { dir, registry }
}
