//! No orphans when the agent exits (issue 11, item 6): `kill_shell_processes`, what the CLI
//! calls on SIGINT/SIGTERM/SIGHUP and at exit, ends a running command and the process it
//! detached with `setsid`. Alone in its binary: it kills every command of the process.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentloop::builtin::{self, Workspace};
use agentloop::tooling::{Deps, ExecOptions, Registry, run_tools_with};
use agentloop::transcript::ToolCallPart;
use serde_json::json;

/// A command that leaves a detached `sleep 300` behind (its pid in `pidfile`), then runs `rest`.
fn detach(pidfile: &Path, rest: &str) -> String {
    format!(
        "(setsid sh -c 'echo $$ > {pid}.tmp && mv {pid}.tmp {pid} && exec sleep 300' &) ; {rest}",
        pid = pidfile.display()
    )
}

/// Alive means: exists and is not a zombie.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| !s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

async fn wait_for_pid(pidfile: &Path) -> u32 {
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
async fn gone(pid: u32) -> bool {
    for _ in 0..250 {
        if !alive(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

struct Setup {
    dir: tempfile::TempDir,
    registry: Registry<Deps>,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let registry = Registry::new(builtin::tools::<Deps>(&workspace)).unwrap();
    Setup { dir, registry }
}

#[tokio::test]
async fn kill_shell_processes_ends_a_running_command_tree() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let call = ToolCallPart::new(
        "k",
        "shell",
        json!({"command": detach(&pidfile, "sleep 100")}),
    );
    let registry = &s.registry;
    let run = async {
        run_tools_with(
            &[call],
            registry,
            &Arc::new(Deps::new()),
            &ExecOptions::default(),
        )
        .await
    };
    let kill = async {
        let pid = wait_for_pid(&pidfile).await;
        tokio::task::spawn_blocking(builtin::kill_shell_processes)
            .await
            .unwrap();
        pid
    };
    let (out, pid) = tokio::join!(run, kill);
    assert!(
        out[0].result.content.contains("killed by signal 9"),
        "{}",
        out[0].result.content
    );
    assert!(
        gone(pid).await,
        "detached process {pid} survived kill_shell_processes"
    );
}
