//! No orphans when the agent exits: `kill_shell_processes`, what the CLI
//! calls on SIGINT/SIGTERM/SIGHUP and at exit, ends a running command and the process it
//! detached with `setsid`. Alone in its binary: it kills every command of the process.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use agentloop::builtin;
use agentloop::tooling::ExecOptions;
use serde_json::json;

#[path = "support/detached.rs"]
mod detached;
use detached::{detach, gone, setup, wait_for_pid};

#[tokio::test]
async fn kill_shell_processes_ends_a_running_command_tree() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let run = s.shell(
        json!({"command": detach(&pidfile, "sleep 100")}),
        ExecOptions::default(),
    );
    let kill = async {
        let pid = wait_for_pid(&pidfile).await;
        tokio::task::spawn_blocking(builtin::kill_shell_processes)
            .await
            .unwrap();
        pid
    };
    let (result, pid) = tokio::join!(run, kill);
    assert!(
        result.content.contains("killed by signal 9"),
        "{}",
        result.content
    );
    assert!(
        gone(pid).await,
        "detached process {pid} survived kill_shell_processes"
    );
}
