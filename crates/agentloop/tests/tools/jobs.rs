//! Background jobs: `shell` with `background: true` returns at once with a job id; `job_output`
//! reads incrementally with the job's state; `job_kill` ends the job's whole tree; the running
//! jobs are capped; and a daemon a job detached with `setsid` is gone after `job_kill`, after
//! the run that started it ends, after that run is aborted, and when the table is dropped.
//! The daemons are `sleep 300`, so a failed test leaves nothing that burns CPU or lives long.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::sync::Arc;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::builtin::{self, JobEvent, JobStatus, Jobs, ShellOptions, Workspace};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, ExecOptions, Registry, run_tools_with};
use agentloop::transcript::{Message, ToolCallPart};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::orphans::detached::{alive, detach, gone, wait_for_pid};

struct JobSetup {
    dir: tempfile::TempDir,
    registry: Registry<Deps>,
    jobs: Jobs,
    finished: mpsc::UnboundedReceiver<JobEvent>,
}

fn job_setup(jobs: Jobs) -> JobSetup {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let (tx, finished) = mpsc::unbounded_channel();
    jobs.on_event(move |event| {
        if matches!(event, JobEvent::Finished(_)) {
            let _ = tx.send(event.clone());
        }
    });
    let options = ShellOptions::default().jobs(jobs.clone());
    let registry = Registry::new(builtin::tools_with::<Deps>(&workspace, &options)).unwrap();
    JobSetup {
        dir,
        registry,
        jobs,
        finished,
    }
}

impl JobSetup {
    async fn call(&self, tool: &str, args: Value) -> (bool, String) {
        let call = ToolCallPart::new("c", tool, args);
        let out = run_tools_with(
            &[call],
            &self.registry,
            &Arc::new(Deps::new()),
            &ExecOptions::default(),
        )
        .await;
        (out[0].result.is_error, out[0].result.content.clone())
    }

    async fn next_finished(&mut self) -> builtin::JobInfo {
        match self.finished.recv().await {
            Some(JobEvent::Finished(info)) => info,
            other => panic!("expected a finished job, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_background_job_returns_at_once_and_its_output_is_read_after_it_exits() {
    let mut s = job_setup(Jobs::new());
    let (err, text) = s
        .call(
            "shell",
            json!({"command": "echo hello; echo oops >&2; exit 3", "background": true}),
        )
        .await;
    assert!(!err, "{text}");
    assert!(text.contains("started background job 1"), "{text}");
    assert!(text.contains("job_output"), "{text}");
    let info = s.next_finished().await;
    assert_eq!(info.id, 1);
    assert_eq!(info.status, JobStatus::Exited(3));
    assert_eq!(info.call_id, "c");
    let (err, out) = s.call("job_output", json!({"job": 1})).await;
    assert!(!err, "{out}");
    assert!(out.contains("hello\n") && out.contains("oops\n"), "{out}");
    assert!(out.ends_with("[job 1 finished: exit code 3]"), "{out}");
    assert_eq!(s.jobs.list()[0].status, JobStatus::Exited(3));
}

#[tokio::test]
async fn job_output_returns_only_what_is_new_and_tail_lines_cuts_it() {
    let mut s = job_setup(Jobs::new());
    let command = "echo one; while [ ! -e go ]; do sleep 0.02; done; seq 1 100";
    let (err, text) = s
        .call("shell", json!({"command": command, "background": true}))
        .await;
    assert!(!err, "{text}");
    // The job waits for `go`, so "one" is all there is until the test creates it.
    let mut first = String::new();
    while !first.contains("one") {
        let (_, out) = s.call("job_output", json!({"job": "1"})).await;
        assert!(out.ends_with("[job 1 is still running]"), "{out}");
        first.push_str(&out);
    }
    std::fs::write(s.dir.path().join("go"), "").unwrap();
    assert_eq!(s.next_finished().await.status, JobStatus::Exited(0));
    let (_, out) = s
        .call("job_output", json!({"job": 1, "tail_lines": 3}))
        .await;
    assert!(!out.contains("one"), "old output came again: {out}");
    assert!(
        out.starts_with("[97 earlier line(s) of new output not shown]\n98\n99\n100\n"),
        "{out}"
    );
    let (_, out) = s.call("job_output", json!({"job": 1})).await;
    assert_eq!(out, "(no new output)\n[job 1 finished: exit code 0]");
}

#[tokio::test]
async fn job_kill_ends_the_job_and_the_daemon_it_detached() {
    let mut s = job_setup(Jobs::new());
    let pidfile = s.dir.path().join("pid");
    let (err, text) = s
        .call(
            "shell",
            json!({"command": detach(&pidfile, "sleep 100"), "background": true}),
        )
        .await;
    assert!(!err, "{text}");
    let pid = wait_for_pid(&pidfile).await;
    assert!(alive(pid));
    let (err, out) = s.call("job_kill", json!({"job": 1})).await;
    assert!(!err, "{out}");
    assert_eq!(out, "job 1 was killed with every process it started");
    assert!(gone(pid).await, "daemon {pid} survived job_kill");
    assert_eq!(s.next_finished().await.status, JobStatus::Killed);
    let (_, out) = s.call("job_kill", json!({"job": 1})).await;
    assert_eq!(out, "job 1 had already finished (killed)");
    let (err, out) = s.call("job_output", json!({"job": 9})).await;
    assert!(err && out.contains("there is no job 9"), "{out}");
}

#[tokio::test]
async fn jobs_past_the_limit_are_refused_with_a_clear_error() {
    let s = job_setup(Jobs::new().with_limit(1));
    let background = json!({"command": "sleep 100", "background": true});
    let (err, _) = s.call("shell", background.clone()).await;
    assert!(!err);
    let (err, out) = s.call("shell", background.clone()).await;
    assert!(err, "{out}");
    assert!(
        out.contains("too many background jobs: 1 are running, the limit is 1"),
        "{out}"
    );
    s.jobs.kill_all().await;
    let (err, out) = s.call("shell", background).await;
    assert!(!err, "a killed job still counted: {out}");
    s.jobs.kill_all().await;
}

#[tokio::test]
async fn dropping_the_table_kills_its_jobs() {
    let s = job_setup(Jobs::new());
    let pidfile = s.dir.path().join("pid");
    let (err, _) = s
        .call(
            "shell",
            json!({"command": detach(&pidfile, "sleep 100"), "background": true}),
        )
        .await;
    assert!(!err);
    let pid = wait_for_pid(&pidfile).await;
    let JobSetup {
        dir,
        registry,
        jobs,
        finished,
    } = s;
    drop((registry, jobs, finished));
    assert!(gone(pid).await, "daemon {pid} survived the job table");
    drop(dir);
}

/// An agent whose first turn starts `detach(pid)` as a job, whose second turn waits in the
/// foreground until the daemon wrote its pid (then runs `then`), and whose third turn ends.
fn job_agent(dir: &std::path::Path, then: &str) -> AgentLoop<Deps> {
    let workspace = Workspace::new(dir).unwrap();
    let pidfile = dir.join("pid");
    let wait = format!("while [ ! -s pid ]; do sleep 0.02; done; {then}");
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call(
            "start",
            "shell",
            json!({"command": detach(&pidfile, "sleep 100"), "background": true}),
        ),
        ScriptedTurn::new().tool_call("wait", "shell", json!({"command": wait})),
        ScriptedTurn::text("done"),
    ]));
    AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools(builtin::tools::<Deps>(&workspace))
        .unwrap()
}

#[tokio::test]
async fn a_job_and_its_daemon_are_gone_when_the_run_ends() {
    let dir = tempfile::tempdir().unwrap();
    let agent = job_agent(dir.path(), "true");
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    assert_eq!(out.stop, RunStop::Done);
    let pid = wait_for_pid(&dir.path().join("pid")).await;
    // The agent (and so its job table) is still alive: only the run's end killed the job.
    assert!(gone(pid).await, "daemon {pid} survived the end of the run");
    drop(agent);
}

#[tokio::test]
async fn a_job_and_its_daemon_are_gone_when_the_run_is_aborted() {
    let dir = tempfile::tempdir().unwrap();
    let agent = job_agent(dir.path(), "sleep 100");
    let signal = agent.abort_signal().clone();
    let pidfile = dir.path().join("pid");
    let abort = async {
        let pid = wait_for_pid(&pidfile).await;
        assert!(alive(pid));
        signal.abort();
        pid
    };
    let (out, pid) = tokio::join!(agent.run(vec![Message::user("go")], vec![]), abort);
    assert_eq!(out.unwrap().stop, RunStop::Aborted);
    assert!(gone(pid).await, "daemon {pid} survived the abort");
    drop(agent);
}

#[tokio::test]
async fn a_kept_job_outlives_the_run_until_job_kill() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let jobs = Jobs::new().keep_after_run(true);
    let options = ShellOptions::default().jobs(jobs.clone());
    let pidfile = dir.path().join("pid");
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call(
            "start",
            "shell",
            json!({"command": detach(&pidfile, "sleep 100"), "background": true}),
        ),
        ScriptedTurn::new().tool_call(
            "wait",
            "shell",
            json!({"command": "while [ ! -s pid ]; do sleep 0.02; done"}),
        ),
        ScriptedTurn::text("done"),
    ]));
    let agent = AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools(builtin::tools_with::<Deps>(&workspace, &options))
        .unwrap();
    agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    let pid = wait_for_pid(&pidfile).await;
    assert!(alive(pid), "a kept job's daemon died with the run");
    assert!(jobs.list()[0].status.is_running());
    assert_eq!(jobs.kill(1).await.unwrap(), JobStatus::Killed);
    assert!(gone(pid).await, "daemon {pid} survived job_kill");
}
