//! No orphans when the CLI ends: while the model's `shell` call runs a
//! command that detached a `setsid` child, the `agentloop` process gets SIGTERM, SIGHUP (the
//! terminal closed), SIGINT, SIGQUIT, SIGUSR1 or SIGALRM; the detached child is gone afterwards.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::process::Stdio;

use serde_json::json;

mod support;

use support::procs::{alive, gone, read_pid};
use support::{Scratch, send_signal, server};

/// Runs the CLI on a script whose first turn calls `shell` with a command that detaches a
/// `sleep 300` (pid in `ws/pid`) and then waits; sends `signal` once the detached process
/// exists; returns the CLI's exit code and the detached pid.
fn signal_during_shell(signal: &str) -> (Option<i32>, u32) {
    let scratch = Scratch::new();
    let pidfile = scratch.ws().join("pid");
    let command =
        "(setsid sh -c 'echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 300' &) ; sleep 100";
    let server = server(json!({"turns": [
        {"tool_calls": [{"id": "call_sh", "name": "shell", "arguments": {"command": command}}]},
        {"text": "done"}
    ]}));
    let mut child = scratch
        .run_cmd(&server)
        .args(["--json", "--approve", "always", "Run it."])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = read_pid(&pidfile);
    assert!(alive(pid));
    send_signal(child.id(), signal);
    let code = child.wait().unwrap().code();
    (code, pid)
}

#[test]
fn sigterm_of_the_cli_kills_the_detached_child() {
    let (code, pid) = signal_during_shell("TERM");
    assert_eq!(code, Some(143));
    assert!(
        gone(pid),
        "detached process {pid} survived SIGTERM of the CLI"
    );
}

#[test]
fn sighup_of_the_cli_kills_the_detached_child() {
    let (code, pid) = signal_during_shell("HUP");
    assert_eq!(code, Some(129));
    assert!(
        gone(pid),
        "detached process {pid} survived SIGHUP of the CLI"
    );
}

#[test]
fn sigint_of_the_cli_kills_the_detached_child() {
    let (code, pid) = signal_during_shell("INT");
    assert_eq!(code, Some(130));
    assert!(
        gone(pid),
        "detached process {pid} survived Ctrl-C of the CLI"
    );
}

#[test]
fn sigquit_sigusr1_and_sigalrm_of_the_cli_kill_the_detached_child() {
    for (signal, number) in [("QUIT", 3), ("USR1", 10), ("ALRM", 14)] {
        let (code, pid) = signal_during_shell(signal);
        assert_eq!(code, Some(128 + number), "SIG{signal}");
        assert!(
            gone(pid),
            "detached process {pid} survived SIG{signal} of the CLI"
        );
    }
}
