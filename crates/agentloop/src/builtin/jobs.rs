//! Background jobs: `shell` with `"background": true` starts a command that outlives its call,
//! `job_output` reads what it printed since the last read, `job_kill` ends it.
//!
//! A job is started exactly like a foreground command (same sandbox, same environment filter,
//! same start gate into a cgroup of its own; see the `shell` module), but its stdout and stderr
//! go to a log file in the temporary directory instead of pipes, so the agent holds no more than
//! one bounded read in memory and a job never blocks on a full pipe. Each job has a watcher task
//! that waits for whichever comes first: the command exits, [`Jobs::kill`] (the `job_kill`
//! tool), or the end of the run that started it (the call's scope; an abort ends it too). Then
//! the job's whole process tree is killed with the shell tool's machinery — cgroup, or the
//! subreaper-and-marker scan — so a daemon that left the job's process group or session goes
//! too. A table made with [`Jobs::keep_after_run`] lets its jobs outlive the run and the agent:
//! they are left out of [`kill_shell_processes`](super::kill_shell_processes) and only
//! `job_kill` ends them. The number of running jobs is capped ([`Jobs::with_limit`]).
//!
//! Applications see jobs through [`Jobs::list`] and the [`JobEvent`]s passed to
//! [`Jobs::on_event`].

use std::collections::BTreeMap;
use std::fmt;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::output::thousands;
use super::retention::{Capture, Spill};
use super::shell::{self, ShellOptions, Sink, Started};
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// How many jobs may run at once unless [`Jobs::with_limit`] says otherwise.
pub const DEFAULT_JOB_LIMIT: usize = 8;

/// The most bytes of new output one `job_output` call returns (before its truncation note).
pub const JOB_OUTPUT_LIMIT: usize = 16_000;

/// A job's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobStatus {
    /// Still running.
    Running,
    /// The command exited with this code.
    Exited(i32),
    /// The command was ended by this signal (not by the agent).
    Signaled(i32),
    /// The agent killed it: `job_kill`, the end of its run, or an abort.
    Killed,
}

impl JobStatus {
    /// Whether the job is still running.
    pub fn is_running(self) -> bool {
        self == JobStatus::Running
    }

    /// The exit code, for a job that exited by itself.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            JobStatus::Exited(code) => Some(code),
            _ => None,
        }
    }

    fn from_exit(status: std::process::ExitStatus) -> Self {
        if let Some(code) = status.code() {
            return JobStatus::Exited(code);
        }
        #[cfg(unix)]
        {
            use std::os::unix::process::ExitStatusExt;
            if let Some(signal) = status.signal() {
                return JobStatus::Signaled(signal);
            }
        }
        JobStatus::Killed
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JobStatus::Running => f.write_str("running"),
            JobStatus::Exited(code) => write!(f, "exit code {code}"),
            JobStatus::Signaled(signal) => write!(f, "killed by signal {signal}"),
            JobStatus::Killed => f.write_str("killed"),
        }
    }
}

/// One job as [`Jobs::list`] and [`JobEvent`] show it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobInfo {
    /// The job id the tools take (`{"job": id}`).
    pub id: u64,
    /// The command line.
    pub command: String,
    /// The id of the `shell` call that started it.
    pub call_id: String,
    /// Running, or how it ended.
    pub status: JobStatus,
}

/// A job started or finished (see [`Jobs::on_event`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobEvent {
    /// A background job started.
    Started(JobInfo),
    /// A background job ended (its whole process tree is gone).
    Finished(JobInfo),
}

type Listener = Arc<dyn Fn(&JobEvent) + Send + Sync>;

/// The table of background jobs the `shell`, `job_output` and `job_kill` tools share; cheap to
/// clone (clones share the table). When the last clone is dropped, the jobs still running are
/// killed (unless kept, see [`Jobs::keep_after_run`]).
///
/// ```
/// use agentloop::builtin::{Jobs, ShellOptions};
///
/// let jobs = Jobs::new().with_limit(2);
/// let options = ShellOptions::default().jobs(jobs.clone());
/// assert!(options.job_table().list().is_empty());
/// assert_eq!(jobs.limit(), 2);
/// ```
#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

struct Inner {
    limit: usize,
    keep: bool,
    next: AtomicU64,
    table: Mutex<BTreeMap<u64, Arc<Job>>>,
    listener: Mutex<Option<Listener>>,
}

struct Job {
    id: u64,
    command: String,
    call_id: String,
    log: PathBuf,
    kill: CancellationToken,
    status: watch::Receiver<JobStatus>,
    read_offset: Mutex<u64>,
}

impl Job {
    fn info(&self) -> JobInfo {
        JobInfo {
            id: self.id,
            command: self.command.clone(),
            call_id: self.call_id.clone(),
            status: *self.status.borrow(),
        }
    }
}

/// Which call a `shell` call is, and the token cancelled when its run ends.
pub(crate) struct CallScope {
    pub(crate) call_id: String,
    pub(crate) run_over: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Default for Jobs {
    fn default() -> Self {
        Jobs::new()
    }
}

impl fmt::Debug for Jobs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Jobs")
            .field("limit", &self.inner.limit)
            .field("keep_after_run", &self.inner.keep)
            .field("jobs", &lock(&self.inner.table).len())
            .finish()
    }
}

impl Jobs {
    /// An empty table with [`DEFAULT_JOB_LIMIT`], whose jobs end with their run.
    pub fn new() -> Self {
        Jobs::build(DEFAULT_JOB_LIMIT, false)
    }

    fn build(limit: usize, keep: bool) -> Self {
        Jobs {
            inner: Arc::new(Inner {
                limit,
                keep,
                next: AtomicU64::new(1),
                table: Mutex::new(BTreeMap::new()),
                listener: Mutex::new(None),
            }),
        }
    }

    /// The same settings with at most `limit` jobs running at once (a fresh, empty table).
    pub fn with_limit(self, limit: usize) -> Self {
        Jobs::build(limit, self.inner.keep)
    }

    /// The same settings with jobs that outlive their run and the agent itself (a fresh,
    /// empty table): only `job_kill` or [`Jobs::kill`] ends them.
    pub fn keep_after_run(self, keep: bool) -> Self {
        Jobs::build(self.inner.limit, keep)
    }

    /// Whether the jobs outlive their run (see [`keep_after_run`](Self::keep_after_run)).
    pub fn keeps_after_run(&self) -> bool {
        self.inner.keep
    }

    /// The most jobs that may run at once.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Calls `listener` for every job start and end (from the task that saw it; keep it
    /// short). Replaces an earlier listener.
    pub fn on_event(&self, listener: impl Fn(&JobEvent) + Send + Sync + 'static) {
        *lock(&self.inner.listener) = Some(Arc::new(listener));
    }

    /// Every job started so far, in id order.
    pub fn list(&self) -> Vec<JobInfo> {
        lock(&self.inner.table).values().map(|j| j.info()).collect()
    }

    fn get(&self, id: u64) -> Result<Arc<Job>, ToolError> {
        lock(&self.inner.table).get(&id).cloned().ok_or_else(|| {
            ToolError::new(format!(
                "there is no job {id}; start one with shell and \"background\": true"
            ))
        })
    }

    fn emit(&self, event: JobEvent) {
        let listener = lock(&self.inner.listener).clone();
        if let Some(listener) = listener {
            listener(&event);
        }
    }

    /// Kills job `id` with its whole process tree and waits until it is gone; returns its final
    /// status (that of its own exit if it had already finished).
    pub async fn kill(&self, id: u64) -> Result<JobStatus, ToolError> {
        let job = self.get(id)?;
        job.kill.cancel();
        let mut status = job.status.clone();
        let ended = status.wait_for(|s| !s.is_running()).await.map(|s| *s);
        // The watcher is gone only when the runtime is shutting down; its guard killed the tree.
        Ok(ended.unwrap_or(JobStatus::Killed))
    }

    /// Kills every running job (see [`kill`](Self::kill)).
    pub async fn kill_all(&self) {
        let ids: Vec<u64> = self
            .list()
            .into_iter()
            .filter(|j| j.status.is_running())
            .map(|j| j.id)
            .collect();
        for id in ids {
            let _ = self.kill(id).await;
        }
    }

    /// Starts `command` as a background job (the `shell` tool with `background: true`).
    pub(crate) async fn start(
        &self,
        workspace: &Workspace,
        options: &ShellOptions,
        command: &str,
        call: CallScope,
    ) -> Result<String, ToolError> {
        let running = self.list().iter().filter(|j| j.status.is_running()).count();
        if running >= self.inner.limit {
            return Err(ToolError::new(format!(
                "too many background jobs: {running} are running, the limit is {}; stop one \
                 with job_kill or wait for one to finish (job_output says when)",
                self.inner.limit
            )));
        }
        let id = self.inner.next.fetch_add(1, Ordering::Relaxed);
        let (log, file) = create_log(id)?;
        let keep = self.inner.keep;
        let started = match shell::start(workspace, options, command, Sink::File(file), keep).await
        {
            Ok(started) => started,
            Err(e) => {
                let _ = std::fs::remove_file(&log);
                return Err(e);
            }
        };
        let (tx, rx) = watch::channel(JobStatus::Running);
        let job = Arc::new(Job {
            id,
            command: command.to_owned(),
            call_id: call.call_id,
            log,
            kill: CancellationToken::new(),
            status: rx,
            read_offset: Mutex::new(0),
        });
        lock(&self.inner.table).insert(id, job.clone());
        self.emit(JobEvent::Started(job.info()));
        let note = started.sandbox_note.clone();
        let run_over = (!keep).then_some(call.run_over);
        let table = Arc::downgrade(&self.inner);
        tokio::spawn(watch_job(table, keep, job, started, run_over, tx));
        Ok(format!(
            "{note}started background job {id}: {command}\nRead its output with job_output \
             {{\"job\": {id}}} (each call returns what is new since the last one) and stop it \
             with job_kill {{\"job\": {id}}}; it is killed when this run ends."
        ))
    }

    /// The `job_output` tool; the whole of the new output goes to `spill` when given, and is
    /// kept when the model gets less of it.
    pub(super) fn output(
        &self,
        args: OutputArgs,
        spill: Option<Spill>,
    ) -> Result<String, ToolError> {
        let id = parse_id(&args.job)?;
        let job = self.get(id)?;
        // The status first: if the job had ended, everything it wrote is in the log.
        let status = *job.status.borrow();
        let mut offset = lock(&job.read_offset);
        let mut capture = Capture::new(JOB_OUTPUT_LIMIT, spill);
        let read = read_log(&job, *offset, &mut capture)?;
        *offset += read;
        drop(offset);
        let mut text = if capture.is_empty() {
            "(no new output)\n".to_owned()
        } else {
            capture.finish_with(|text| match args.tail_lines {
                Some(lines) => tail_lines(&text, lines),
                None => (text, false),
            })
        };
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let state = match status {
            JobStatus::Running => format!("[job {id} is still running]"),
            ended => format!("[job {id} finished: {ended}]"),
        };
        Ok(format!("{text}{state}"))
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        for job in lock(&self.table).values() {
            if !self.keep {
                job.kill.cancel();
                if !job.status.borrow().is_running() {
                    let _ = std::fs::remove_file(&job.log);
                }
            }
        }
    }
}

/// Waits for the job to exit, be killed, or outlive its run; then ends its whole tree and
/// publishes how it ended.
async fn watch_job(
    table: std::sync::Weak<Inner>,
    keep: bool,
    job: Arc<Job>,
    started: Started,
    run_over: Option<CancellationToken>,
    status_tx: watch::Sender<JobStatus>,
) {
    let Started {
        mut child,
        mut guard,
        ..
    } = started;
    if keep {
        // Left running when the agent exits (the watcher task is then dropped).
        guard.disarm();
    }
    let run_over = async {
        match &run_over {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    };
    let exited = tokio::select! {
        status = child.wait() => status.ok().map(JobStatus::from_exit),
        () = job.kill.cancelled() => None,
        () = run_over => None,
    };
    guard.arm();
    guard.kill();
    let status = match exited {
        Some(status) => status,
        None => {
            let _ = Box::into_pin(child.kill()).await;
            JobStatus::Killed
        }
    };
    // Announced before the status changes, so whoever waited for the end (job_kill, an
    // application killing its jobs before it exits) has seen the event too.
    let mut info = job.info();
    info.status = status;
    let table = table.upgrade();
    match &table {
        Some(inner) => Jobs {
            inner: inner.clone(),
        }
        .emit(JobEvent::Finished(info)),
        // The table is gone: nobody can read the log any more.
        None => {
            let _ = std::fs::remove_file(&job.log);
        }
    }
    let _ = status_tx.send(status);
}

/// Creates the job's log file (new, private to the user) in the temporary directory.
fn create_log(id: u64) -> Result<(PathBuf, std::fs::File), ToolError> {
    let path = std::env::temp_dir().join(format!(
        "agentloop-job-{}-{id}-{}.log",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default()
    ));
    let mut open = std::fs::OpenOptions::new();
    open.create_new(true).write(true).append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut open, 0o600);
    let file = open.open(&path).map_err(|e| {
        ToolError::new(format!(
            "could not create the job's log {}: {e}",
            path.display()
        ))
    })?;
    Ok((path, file))
}

/// Reads the log from `offset` to its current end into `capture`; returns how many bytes were
/// consumed.
fn read_log(job: &Job, offset: u64, capture: &mut Capture) -> Result<u64, ToolError> {
    let fail = |e: std::io::Error| {
        ToolError::new(format!("could not read the output of job {}: {e}", job.id))
    };
    let mut file = std::fs::File::open(&job.log).map_err(fail)?;
    file.seek(SeekFrom::Start(offset)).map_err(fail)?;
    let mut chunk = vec![0u8; 64 * 1024];
    let mut read = 0u64;
    loop {
        let n = file.read(&mut chunk).map_err(fail)?;
        if n == 0 {
            break;
        }
        capture.push(&chunk[..n]);
        read += n as u64;
    }
    Ok(read)
}

/// The last `n` lines of `text`, after a note saying how many lines came before them; and
/// whether lines were left out.
fn tail_lines(text: &str, n: usize) -> (String, bool) {
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= n {
        return (text.to_owned(), false);
    }
    let skipped = lines.len() - n;
    let shown = format!(
        "[{} earlier line(s) of new output not shown]\n{}\n",
        thousands(skipped),
        lines[skipped..].join("\n")
    );
    (shown, true)
}

/// A job id as the model may send it: `3`, `"3"` or `"job 3"`.
fn parse_id(value: &Value) -> Result<u64, ToolError> {
    let parsed = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s
            .trim()
            .trim_start_matches("job")
            .trim_start_matches(['-', '_', ' ', '#'])
            .parse()
            .ok(),
        _ => None,
    };
    parsed.ok_or_else(|| {
        ToolError::new(format!(
            "`job` must be a job id such as 1 (the number shell returned), not {value}"
        ))
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OutputArgs {
    job: Value,
    tail_lines: Option<usize>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KillArgs {
    job: Value,
}

pub(super) const OUTPUT_DESCRIPTION: &str = "Read what a background job (started with shell and \
\"background\": true) printed since the last job_output call for it, and whether it is still \
running or how it ended. Long output is truncated (start and end kept); tail_lines returns only \
the last lines of the new output.";

pub(super) const KILL_DESCRIPTION: &str = "Stop a background job: kills its command and every \
process it started (daemons included) and returns how it ended.";

fn job_property() -> Value {
    json!({
        "type": ["integer", "string"],
        "description": "The job id shell returned, e.g. 1."
    })
}

pub(super) fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "job": job_property(),
            "tail_lines": {
                "type": "integer",
                "minimum": 1,
                "description": "Return only the last this many lines of the new output."
            }
        },
        "required": ["job"],
        "additionalProperties": false
    })
}

pub(super) fn kill_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"job": job_property()},
        "required": ["job"],
        "additionalProperties": false
    })
}

/// The `job_kill` tool.
pub(super) async fn kill_tool(jobs: Jobs, args: KillArgs) -> Result<String, ToolError> {
    let id = parse_id(&args.job)?;
    let was_running = jobs.get(id)?.status.borrow().is_running();
    let status = jobs.kill(id).await?;
    Ok(if was_running {
        format!("job {id} was killed with every process it started")
    } else {
        format!("job {id} had already finished ({status})")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_read_leniently() {
        assert_eq!(parse_id(&json!(3)).ok(), Some(3));
        assert_eq!(parse_id(&json!("4")).ok(), Some(4));
        assert_eq!(parse_id(&json!("job 5")).ok(), Some(5));
        assert!(parse_id(&json!("five")).is_err());
        assert!(parse_id(&json!(-1)).is_err());
    }

    #[test]
    fn tail_lines_keeps_the_last_lines() {
        assert_eq!(tail_lines("a\nb\nc\n", 5), ("a\nb\nc\n".to_owned(), false));
        assert_eq!(
            tail_lines("a\nb\nc\n", 2),
            (
                "[1 earlier line(s) of new output not shown]\nb\nc\n".to_owned(),
                true
            )
        );
    }
}
