//! No orphans: a process a shell command detaches with `setsid` — directly
//! or double-forked, so it is neither in the command's process group nor its child — is gone
//! after the call times out, after it is aborted, and after it finishes normally. So is a
//! process that starts a new session *and* clears its environment (the per-call marker with
//! it), one that moves to its own process group and clears its environment, and one that does
//! both and then forks and lets its parent exit every 100 µs (on Linux with cgroups, each
//! command's cgroup holds them all).
//! (`kill_shell_processes`, which kills every command of the process, is tested in
//! `orphans_exit.rs` so it cannot hit these tests' commands.)
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use agentloop::tooling::ExecOptions;
use serde_json::json;
use tokio_util::sync::CancellationToken;

#[path = "../support/detached.rs"]
pub(crate) mod detached;
use detached::{alive, detach, gone, setup, wait_for_pid};

#[tokio::test]
async fn a_setsid_child_is_gone_after_a_timeout() {
    let s = setup();
    let pidfile = s.dir.path().join("pid");
    let result = s
        .shell(
            json!({"command": detach(&pidfile, "sleep 100"), "timeout_secs": 1}),
            ExecOptions::default(),
        )
        .await;
    assert!(result.content.contains("timed out"), "{}", result.content);
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
    let run = s.shell(json!({"command": detach(&pidfile, "sleep 100")}), options);
    let abort = async {
        let pid = wait_for_pid(&pidfile).await;
        assert!(alive(pid));
        cancel.cancel();
        pid
    };
    let (result, pid) = tokio::join!(run, abort);
    assert!(result.is_error, "{}", result.content);
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
    let result = s
        .shell(json!({"command": command}), ExecOptions::default())
        .await;
    assert!(result.content.contains("started"), "{}", result.content);
    let pid = wait_for_pid(&pidfile).await;
    assert!(
        gone(pid).await,
        "detached process {pid} outlived the finished command"
    );
}

/// A process tagged by an argument no other process has, and everything it forks.
struct Tagged {
    tag: String,
}

impl Tagged {
    fn new(name: &str) -> Tagged {
        Tagged {
            tag: format!("agentloop-orphan-{name}-{}", std::process::id()),
        }
    }

    /// Live (non-zombie) processes whose command line has the tag.
    fn pids(&self) -> Vec<u32> {
        let mut pids = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            if String::from_utf8_lossy(&cmdline).contains(&self.tag) && alive(pid) {
                pids.push(pid);
            }
        }
        pids
    }

    /// Polls until no tagged process is alive; false if some stay.
    async fn all_gone(&self) -> bool {
        for _ in 0..250 {
            if self.pids().is_empty() {
                return true;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        false
    }
}

impl Drop for Tagged {
    /// Whatever the test found, leaves no tagged process behind: stop them all (a forking
    /// chain cannot outrun that), then kill them.
    fn drop(&mut self) {
        use rustix::process::{Pid, Signal, kill_process};
        let signal_all = |signal: Signal| {
            let pids = self.pids();
            for &pid in &pids {
                if let Some(pid) = Pid::from_raw(pid as i32) {
                    let _ = kill_process(pid, signal);
                }
            }
            pids.len()
        };
        for _ in 0..200 {
            if signal_all(Signal::STOP) == 0 {
                break;
            }
        }
        for _ in 0..200 {
            if signal_all(Signal::KILL) == 0 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

/// A command that starts `perl -e SCRIPT TAG` in the background through `prefix` (`setsid`,
/// `env -i`, …), waits until the script created the file `ready`, and ends. `READY` in the
/// script stands for that file's path.
fn background(prefix: &str, script: &str, tagged: &Tagged, ready: &std::path::Path) -> String {
    let script = script.replace("READY", &ready.display().to_string());
    format!(
        "{prefix} perl -e '{script}' {tag} & while [ ! -f {r} ]; do sleep 0.01; done; echo started",
        tag = tagged.tag,
        r = ready.display()
    )
}

/// Runs a call that leaves `perl -e SCRIPT` behind through `prefix` and asserts that nothing
/// tagged survives the call.
async fn assert_no_escape(name: &str, prefix: &str, script: &str) {
    let s = setup();
    let ready = s.dir.path().join("ready");
    let tagged = Tagged::new(name);
    let out = s
        .shell(
            json!({"command": background(prefix, script, &tagged, &ready)}),
            ExecOptions::default(),
        )
        .await
        .content;
    assert!(out.contains("started"), "{out}");
    assert!(
        tagged.all_gone().await,
        "`{prefix} perl` ({name}) outlived the call: {:?}",
        tagged.pids()
    );
}

#[tokio::test]
async fn a_new_session_with_an_empty_environment_is_gone_after_the_call() {
    assert_no_escape(
        "setsid",
        "setsid env -i",
        r#"open(F, ">", "READY"); close F; sleep 120"#,
    )
    .await;
}

#[tokio::test]
async fn a_new_process_group_with_an_empty_environment_is_gone_after_the_call() {
    assert_no_escape(
        "setpgid",
        "env -i",
        r#"setpgrp(0, 0); open(F, ">", "READY"); close F; sleep 120"#,
    )
    .await;
}

#[tokio::test]
async fn a_process_that_forks_away_every_100_microseconds_is_gone_after_the_call() {
    assert_no_escape(
        "forker",
        "setsid env -i",
        // The chain stops by itself after two minutes: should the sandbox and this test's own
        // cleanup both fail (or the test binary be killed), it must not load the machine forever.
        r#"my $end = time + 120; open(F, ">", "READY"); close F; while (time < $end) { my $p = fork; exit 0 if $p; select(undef, undef, undef, 0.0001) }"#,
    )
    .await;
}
