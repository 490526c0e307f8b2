//! No orphans: a process a shell command detaches with `setsid` — directly
//! or double-forked, so it is neither in the command's process group nor its child — is gone
//! after the call times out, after it is aborted, and after it finishes normally.
//! (`kill_shell_processes`, which kills every command of the process, is tested in
//! `orphans_exit.rs` so it cannot hit these tests' commands.)
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::sync::Arc;

use agentloop::tooling::{Deps, ExecOptions, run_tools_with};
use agentloop::transcript::ToolCallPart;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "../support/detached.rs"]
mod detached;
use detached::{alive, detach, gone, setup, wait_for_pid};

#[tokio::test]
async fn a_setsid_child_is_gone_after_a_timeout() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let call = ToolCallPart::new(
        "t",
        "shell",
        json!({"command": detach(&pidfile, "sleep 100"), "timeout_secs": 1}),
    );
    let out = run_tools_with(
        &[call],
        &s.registry,
        &Arc::new(Deps::new()),
        &ExecOptions::default(),
    )
    .await;
    assert!(
        out[0].result.content.contains("timed out"),
        "{}",
        out[0].result.content
    );
    let pid = wait_for_pid(&pidfile).await;
    assert!(
        gone(pid).await,
        "detached process {pid} survived the timeout"
    );
}

#[tokio::test]
async fn a_setsid_child_is_gone_after_an_abort() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let cancel = CancellationToken::new();
    let options = ExecOptions {
        cancel: cancel.clone(),
        ..ExecOptions::default()
    };
    let call = ToolCallPart::new(
        "a",
        "shell",
        json!({"command": detach(&pidfile, "sleep 100")}),
    );
    let registry = &s.registry;
    let run = async { run_tools_with(&[call], registry, &Arc::new(Deps::new()), &options).await };
    let abort = async {
        let pid = wait_for_pid(&pidfile).await;
        assert!(alive(pid));
        cancel.cancel();
        pid
    };
    let (out, pid) = tokio::join!(run, abort);
    assert!(out[0].result.is_error, "{}", out[0].result.content);
    assert!(gone(pid).await, "detached process {pid} survived the abort");
}

#[tokio::test]
async fn a_setsid_child_is_gone_when_the_command_finishes() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let command = detach(
        &pidfile,
        &format!(
            "while [ ! -f {} ]; do sleep 0.05; done; echo started",
            pidfile.display()
        ),
    );
    let call = ToolCallPart::new("f", "shell", json!({"command": command}));
    let out = run_tools_with(
        &[call],
        &s.registry,
        &Arc::new(Deps::new()),
        &ExecOptions::default(),
    )
    .await;
    assert!(
        out[0].result.content.contains("started"),
        "{}",
        out[0].result.content
    );
    let pid = wait_for_pid(&pidfile).await;
    assert!(
        gone(pid).await,
        "detached process {pid} outlived the finished command"
    );
}
