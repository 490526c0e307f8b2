//! Background jobs through the CLI and the mock model server: a job the model starts (and the
//! daemon it detached with `setsid`) is gone after the run ends, after SIGINT and after SIGTERM
//! to the CLI; `--keep-jobs` leaves it running; `--json` announces it with `job_started` and
//! `job_finished` lines that match the documented schema. The daemons are `sleep 100`, so a
//! failed test leaves nothing that burns CPU or lives long.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

mod support;

use std::process::{Child, Stdio};

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::procs::{alive, gone, read_pid};
use support::schema::schema_checked;
use support::{Scratch, assert_ok, send_signal};

/// The job's command: record its own pid in `job.pid`, detach a daemon whose pid goes to
/// `pid`, then wait.
const JOB: &str = "echo $$ > job.pid; (setsid sh -c 'echo $$ > pid.tmp && mv pid.tmp pid && \
                   exec sleep 100' &); echo started; exec sleep 100";

/// A script that starts [`JOB`] in the background, then waits in the foreground until the
/// daemon exists and runs `then`, then answers.
fn script(then: &str) -> Script {
    let wait = format!("while [ ! -s pid ]; do sleep 0.02; done; {then}");
    Script::from_value(json!({"turns": [
        {"tool_calls": [{"id": "call_bg", "name": "shell",
                         "arguments": {"command": JOB, "background": true}}]},
        {"tool_calls": [{"id": "call_wait", "name": "shell", "arguments": {"command": wait}}]},
        {"text": "done"}
    ]}))
    .unwrap()
}

fn spawn(scratch: &Scratch, server: &MockServer, extra: &[&str]) -> Child {
    scratch
        .run_cmd(server)
        .args(["--json", "--approve", "always"])
        .args(extra)
        .arg("Start the server.")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_job_and_its_daemon_are_gone_after_the_run_and_json_announces_them() {
    let scratch = Scratch::new();
    let server = MockServer::start(script("true"));
    let out = spawn(&scratch, &server, &[]).wait_with_output().unwrap();
    assert_ok(&out);
    let daemon = read_pid(&scratch.ws().join("pid"));
    let job = read_pid(&scratch.ws().join("job.pid"));
    assert!(gone(daemon), "the job's daemon {daemon} survived the run");
    assert!(gone(job), "the job {job} survived the run");
    let lines = schema_checked(&out.stdout);
    let started = lines.iter().find(|l| l["type"] == "job_started").unwrap();
    assert_eq!(started["job"], 1);
    assert_eq!(started["call_id"], "call_bg");
    assert_eq!(started["command"], JOB);
    let finished = lines.iter().find(|l| l["type"] == "job_finished").unwrap();
    assert_eq!(finished["job"], 1);
    assert_eq!(finished["status"], "killed");
    assert_eq!(finished["exit_code"], Value::Null);
    let result = lines
        .iter()
        .find(|l| l["type"] == "tool_execution_end" && l["call"]["id"] == "call_bg")
        .unwrap();
    let text = result["result"]["content"].as_str().unwrap();
    assert!(text.contains("started background job 1"), "{text}");
}

/// Sends `signal` to the CLI while its foreground call waits, once the job's daemon exists;
/// returns the exit code, and the job's and the daemon's pids.
fn signal_during_run(signal: &str) -> (Option<i32>, u32, u32) {
    let scratch = Scratch::new();
    let server = MockServer::start(script("sleep 100"));
    let mut child = spawn(&scratch, &server, &[]);
    let daemon = read_pid(&scratch.ws().join("pid"));
    let job = read_pid(&scratch.ws().join("job.pid"));
    assert!(alive(daemon) && alive(job));
    send_signal(child.id(), signal);
    let code = child.wait().unwrap().code();
    (code, job, daemon)
}

#[test]
fn sigint_of_the_cli_kills_the_job_and_its_daemon() {
    let (code, job, daemon) = signal_during_run("INT");
    assert_eq!(code, Some(130));
    assert!(gone(daemon), "the job's daemon {daemon} survived SIGINT");
    assert!(gone(job), "the job {job} survived SIGINT");
}

#[test]
fn sigterm_of_the_cli_kills_the_job_and_its_daemon() {
    let (code, job, daemon) = signal_during_run("TERM");
    assert_eq!(code, Some(143));
    assert!(gone(daemon), "the job's daemon {daemon} survived SIGTERM");
    assert!(gone(job), "the job {job} survived SIGTERM");
}

#[test]
fn keep_jobs_leaves_the_job_running_after_the_cli_exits() {
    let scratch = Scratch::new();
    let server = MockServer::start(script("true"));
    let out = spawn(&scratch, &server, &["--keep-jobs"])
        .wait_with_output()
        .unwrap();
    assert_ok(&out);
    let daemon = read_pid(&scratch.ws().join("pid"));
    let job = read_pid(&scratch.ws().join("job.pid"));
    let both_alive = alive(daemon) && alive(job);
    for pid in [daemon, job] {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
    assert!(both_alive, "--keep-jobs did not keep the job");
    let lines = schema_checked(&out.stdout);
    assert!(lines.iter().any(|l| l["type"] == "job_started"));
    assert!(!lines.iter().any(|l| l["type"] == "job_finished"));
}
