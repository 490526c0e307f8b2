//! The `agentloop-worker` binary's command line, without a Restate server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Command;

fn worker() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentloop-worker"));
    command.env_remove("RUST_LOG").env_remove("AGENTLOOP_STORE");
    command
}

#[test]
fn a_log_filter_it_cannot_read_is_a_clear_error_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let out = worker()
        .env("RUST_LOG", "agentloop_restate=loud")
        .args(["--listen", "127.0.0.1:0", "--workspace"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("RUST_LOG=\"agentloop_restate=loud\" is not a log filter"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn help_documents_the_pipelining_switch() {
    let out = worker().arg("--help").output().unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--no-pipeline"), "{help}");
    assert!(help.contains("--listen"), "{help}");
}

#[test]
fn an_unknown_approval_policy_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = worker()
        .args([
            "--listen",
            "127.0.0.1:0",
            "--approve",
            "sometimes",
            "--workspace",
        ])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown approval policy"), "{stderr}");
}
