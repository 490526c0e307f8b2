//! `shell{command, timeout_secs?}`: run a command with `sh -c` in the workspace root.
//!
//! Owns the child process's whole life. The command starts in its own session, so it has no
//! controlling terminal (`/dev/tty` cannot be opened, and the user's terminal is not its to
//! type into), with stdin from `/dev/null`, in the workspace directory the agent opened (by
//! its handle: if the workspace path no longer names that directory, the call is refused),
//! sandboxed ([`SandboxMode`]: Landlock and a seccomp filter on Linux; see the `sandbox`
//! module), with a fresh environment built from an allow-list (see the `shell_env` module). Its
//! stdout and stderr are collected together (in arrival order, bounded memory). When the
//! command finishes, times out, or the call is aborted (the handler's future dropped), it and
//! every process it started are killed: on Linux through a cgroup of its own where the agent
//! may create one (see the `cgroup` module), and through a process scan otherwise (see the
//! `procs` module). `shell` stays a mutating tool that needs approval: in the default
//! `workspace-write` mode it can still change everything inside the workspace.
//!
//! The start gate: the child first runs a two-line `sh` script that waits for one line on its
//! stdin (a pipe from the agent) and then `exec`s the real `sh -c COMMAND` with stdin from
//! `/dev/null`. The agent moves the child into the command's cgroup before sending the line,
//! so the user's command, and everything it starts, is born inside the cgroup.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

use process_wrap::tokio::{ChildWrapper, CommandWrap};
use tokio::io::AsyncWriteExt;

use super::jobs::Jobs;
use super::output::OUTPUT_LIMIT;
use super::procs;
use super::retention::{Capture, OutputStore};
use super::sandbox::{SandboxMode, SandboxPlan, restrict_current_thread};
use super::shell_env::filtered_env;
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// How the shell tool runs commands: the sandbox mode and what of the agent's environment a
/// command inherits. `Default` is `workspace-write` with credentials dropped.
///
/// ```
/// use agentloop::builtin::{SandboxMode, ShellOptions};
///
/// let options = ShellOptions::default()
///     .sandbox(SandboxMode::ReadOnly)
///     .allow_env("GITHUB_TOKEN")
///     .hide_env("MY_SERVICE_CODE");
/// assert_eq!(options.sandbox_mode(), SandboxMode::ReadOnly);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ShellOptions {
    sandbox: SandboxMode,
    env_allow: Vec<String>,
    env_hide: Vec<String>,
    writable_roots: Vec<PathBuf>,
    temp_dir: Option<PathBuf>,
    jobs: Jobs,
    runner: Option<Arc<dyn super::sandbox_exec::CommandRunner>>,
    retention: Option<OutputStore>,
}

impl ShellOptions {
    /// Sets the sandbox mode (default [`SandboxMode::WorkspaceWrite`]).
    pub fn sandbox(mut self, mode: SandboxMode) -> Self {
        self.sandbox = mode;
        self
    }

    /// The sandbox mode.
    pub fn sandbox_mode(&self) -> SandboxMode {
        self.sandbox
    }

    /// Lets the variable `name` through even though it looks like a credential.
    pub fn allow_env(mut self, name: impl Into<String>) -> Self {
        self.env_allow.push(name.into());
        self
    }

    /// Drops the variable `name` whatever it is called (e.g. a key the application read).
    pub fn hide_env(mut self, name: impl Into<String>) -> Self {
        self.env_hide.push(name.into());
        self
    }

    /// The table background jobs are kept in (default: a fresh one with the default limit).
    /// Keep a clone to list or kill the jobs from the application.
    pub fn jobs(mut self, jobs: Jobs) -> Self {
        self.jobs = jobs;
        self
    }

    /// The background-job table the tools use.
    pub fn job_table(&self) -> &Jobs {
        &self.jobs
    }

    /// Another directory commands may write below in `workspace-write` mode (e.g. a build cache).
    pub fn writable_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(dir.into());
        self
    }

    /// Forgets every [`writable_root`](Self::writable_root): in `workspace-write` mode commands
    /// may then write only in the workspace and the temporary directory.
    pub fn without_writable_roots(mut self) -> Self {
        self.writable_roots.clear();
        self
    }

    crate::setters! {
        /// Hands foreground commands to `runner` (an editor's terminal), which starts this
        /// executable's sandbox wrapper instead of the command (see
        /// [`CommandRunner`](super::CommandRunner)); the executable must route
        /// [`SANDBOX_EXEC_SUBCOMMAND`](super::SANDBOX_EXEC_SUBCOMMAND) to
        /// [`exec_sandboxed`](super::exec_sandboxed).
        pub fn runner(runner: Arc<dyn super::sandbox_exec::CommandRunner>) => runner = Some(runner);
        /// Keeps the full output of each built-in tool call whose result is cut in `store`: a
        /// command's (`shell`, `job_output`) and a listing's (`grep`, `find_files`, `list_dir`);
        /// a line after the cut then names the call and the output's number. By default only what
        /// the model got exists.
        pub fn retain_outputs(store: OutputStore) => retention = Some(store);
    }

    /// The store full outputs are kept in, if any ([`retain_outputs`](Self::retain_outputs)).
    pub(crate) fn retention(&self) -> Option<&OutputStore> {
        self.retention.as_ref()
    }

    /// The temporary directory of the commands (their `TMPDIR`, and the one they may write in
    /// `workspace-write` mode) instead of the process's. An isolated workspace uses a private
    /// one, so that a checkout under the system's temporary directory stays out of reach.
    pub fn temp_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.temp_dir = Some(dir.into());
        self
    }
}

/// Whether the "sandbox not (fully) enforced" warning was already given.
static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Time limit when the call gives no `timeout_secs`.
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;
/// The largest `timeout_secs` a call may ask for.
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// How long to keep reading output after the command exited or was killed (a background process
/// may still hold the pipes open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    command: String,
    timeout_secs: Option<u64>,
    background: Option<bool>,
}

pub(super) const DESCRIPTION: &str = "Run a shell command (`sh -c`) in the workspace root and \
return its combined stdout and stderr with the exit code. Long output is truncated (the start \
and the end are kept). The command is killed when it exceeds timeout_secs (default 60, at most \
600); background processes it starts are killed when it finishes. There is no stdin: do not run \
interactive programs. With background=true the command starts as a background job and the \
call returns at once with its job id: read its output with job_output, stop it with job_kill \
(use this for servers and watchers). The command may be sandboxed (by default it can write only inside the \
workspace and the temporary directory, and has no network access); credentials are removed \
from its environment.";

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "minLength": 1,
                "description": "The command line, run with `sh -c` in the workspace root, e.g. \"cargo test 2>&1 | tail -50\"."
            },
            "timeout_secs": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_TIMEOUT_SECS,
                "description": "Kill the command after this many seconds (default 60, at most 600)."
            },
            "background": {
                "type": "boolean",
                "description": "Start the command as a background job and return its job id at once (no time limit; read it with job_output, stop it with job_kill)."
            }
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

/// The time limit the tool's spec gets: the longest command plus slack for killing and draining,
/// so the tool's own (more informative) timeout always fires first.
pub(super) fn spec_timeout() -> Duration {
    Duration::from_secs(MAX_TIMEOUT_SECS + 30)
}

/// Kills the command's whole process tree when dropped (including when the handler's future is
/// dropped by an abort or the executor's timeout).
pub(super) struct TreeGuard {
    pub(super) shell_pid: Option<u32>,
    marker: String,
    #[cfg(target_os = "linux")]
    cgroup: Option<super::cgroup::CallCgroup>,
    armed: bool,
}

impl TreeGuard {
    /// Kills the tree now (once; later calls and the drop do nothing).
    pub(super) fn kill(&mut self) {
        if std::mem::take(&mut self.armed) {
            #[cfg(target_os = "linux")]
            if let Some(cgroup) = &self.cgroup {
                cgroup.kill();
            }
            procs::kill_call(self.shell_pid, &self.marker);
        }
    }
}

impl TreeGuard {
    /// Leaves the tree running when the guard drops (a job kept past the agent's exit).
    pub(super) fn disarm(&mut self) {
        self.armed = false;
    }

    /// Makes [`kill`](Self::kill) kill again (after [`disarm`](Self::disarm)).
    pub(super) fn arm(&mut self) {
        self.armed = true;
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The child's first program: wait for the agent's go-ahead line on stdin (sent once the child
/// is in its cgroup; end of input means the agent gave up), then become the real shell, with
/// stdin from `/dev/null`. `$1` is the user's command.
const GATE: &str = "read -r _ || exit 125\nexec sh -c \"$1\" sh </dev/null";

/// Starts each command in a new session (`setsid` in the child, before `exec`), so it has no
/// controlling terminal. The unsafe `pre_exec` hook this needs lives in process-wrap.
#[cfg(unix)]
#[derive(Debug)]
struct NewSession;

#[cfg(unix)]
impl process_wrap::tokio::CommandWrapper for NewSession {
    fn pre_spawn(&mut self, command: &mut Command, core: &CommandWrap) -> std::io::Result<()> {
        process_wrap::tokio::ProcessSession.pre_spawn(command, core)
    }
}

/// Spawns `command` in its own session (Unix).
fn spawn_child(command: Command) -> std::io::Result<Box<dyn ChildWrapper>> {
    let mut wrap = CommandWrap::from(command);
    #[cfg(unix)]
    wrap.wrap(NewSession);
    wrap.spawn()
}

async fn pump(mut pipe: impl AsyncRead + Unpin, sink: Arc<Mutex<Capture>>) {
    let mut chunk = [0u8; 8192];
    loop {
        match pipe.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if let Ok(mut buffer) = sink.lock() {
                    buffer.push(&chunk[..n]);
                }
            }
        }
    }
}

/// Starts `command` confined by `plan`: from a fresh thread that restricts itself first (the
/// restriction is per thread and inherited by the child), so the agent's own threads stay
/// unrestricted. Returns the child and what of the sandbox could not be enforced.
async fn spawn_sandboxed(
    command: Command,
    plan: SandboxPlan,
) -> Result<(Box<dyn ChildWrapper>, Option<String>), ToolError> {
    if plan.mode == SandboxMode::FullAccess {
        let child = spawn_child(command)
            .map_err(|e| ToolError::new(format!("could not start `sh`: {e}")))?;
        return Ok((child, None));
    }
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = tokio::sync::oneshot::channel();
    let spawner = std::thread::Builder::new()
        .name("agentloop-sandbox".into())
        .spawn(move || {
            let _entered = runtime.enter();
            let shortfall = restrict_current_thread(&plan);
            let _ = tx.send(spawn_child(command).map(|child| (child, shortfall)));
        })
        .map_err(|e| ToolError::new(format!("could not start the sandbox thread: {e}")))?;
    drop(spawner);
    match rx.await {
        Ok(Ok(spawned)) => Ok(spawned),
        Ok(Err(e)) => Err(ToolError::new(format!("could not start `sh`: {e}"))),
        Err(_) => Err(ToolError::new(
            "the sandbox thread failed to start the command",
        )),
    }
}

/// Puts the started child into its cgroup (where there is one), then lets it go on to the
/// user's command.
async fn release(child: &mut Box<dyn ChildWrapper>, guard: &TreeGuard) -> Result<(), ToolError> {
    #[cfg(target_os = "linux")]
    if let (Some(cgroup), Some(pid)) = (&guard.cgroup, guard.shell_pid) {
        if let Err(e) = cgroup.add(pid) {
            // The process scan still runs; it needs the agent to be a subreaper.
            tracing::debug!("could not put the shell command into its cgroup: {e}");
            procs::become_subreaper();
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = guard;
    let Some(mut gate) = child.stdin().take() else {
        return Err(ToolError::new("the command's start gate is missing"));
    };
    // A command that already ended (it cannot have: it waits for this line) makes this fail;
    // its status then says what happened.
    let _ = gate.write_all(b"go\n").await;
    drop(gate);
    Ok(())
}

/// A started command: its child process, the guard that kills its tree, and the one-time
/// sandbox warning (empty when there is none to give).
pub(super) struct Started {
    pub(super) child: Box<dyn ChildWrapper>,
    pub(super) guard: TreeGuard,
    pub(super) sandbox_note: String,
}

/// Where a started command's stdout and stderr go.
pub(super) enum Sink {
    /// Two pipes the caller reads.
    Pipes,
    /// One file both streams append to (a background job's log).
    File(std::fs::File),
}

/// Starts `command_line` in the workspace, sandboxed, in its own cgroup where there is one
/// (see the module docs); the returned guard kills its whole tree.
pub(super) async fn start(
    workspace: &Workspace,
    options: &ShellOptions,
    command_line: &str,
    sink: Sink,
    kept: bool,
) -> Result<Started, ToolError> {
    // The workspace path must still name the directory the agent opened; the command then
    // starts in that directory by its handle, not by the path.
    workspace.check_identity()?;
    #[cfg(target_os = "linux")]
    let cgroup = super::cgroup::CallCgroup::create();
    #[cfg(target_os = "linux")]
    if cgroup.is_none() {
        procs::become_subreaper();
    }
    #[cfg(not(target_os = "linux"))]
    procs::become_subreaper();
    // A command meant to outlive the agent is left out of the exit-time sweep.
    #[cfg(target_os = "linux")]
    if let (true, Some(cgroup)) = (kept, &cgroup) {
        cgroup.forget();
    }
    let marker = if kept {
        procs::new_kept_marker()
    } else {
        procs::new_marker()
    };
    let (command, plan) = command_for(workspace, options, command_line, &marker, sink, kept)?;
    let mut guard = TreeGuard {
        shell_pid: None,
        marker,
        #[cfg(target_os = "linux")]
        cgroup,
        armed: true,
    };
    let (mut child, shortfall) = spawn_sandboxed(command, plan).await?;
    guard.shell_pid = child.id();
    release(&mut child, &guard).await?;
    // Said once per process, as a warning line and in the first result the model sees.
    let sandbox_note = shortfall
        .filter(|_| !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed))
        .map(|text| {
            tracing::warn!("shell sandbox ({}): {text}", options.sandbox);
            format!("[sandbox warning: {text}]\n")
        })
        .unwrap_or_default();
    Ok(Started {
        child,
        guard,
        sandbox_note,
    })
}

/// The gated `sh` command for `command_line` (environment, directory, output `sink`) and the
/// sandbox plan it is to be started under.
fn command_for(
    workspace: &Workspace,
    options: &ShellOptions,
    command_line: &str,
    marker: &str,
    sink: Sink,
    kept: bool,
) -> Result<(Command, SandboxPlan), ToolError> {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(GATE)
        .arg("sh")
        .arg(command_line)
        .current_dir(workspace.handle_path())
        .env_clear()
        .envs(filtered_env(&options.env_allow, &options.env_hide))
        .env(procs::MARKER, marker)
        .stdin(Stdio::piped())
        .kill_on_drop(!kept);
    match sink {
        Sink::Pipes => command.stdout(Stdio::piped()).stderr(Stdio::piped()),
        Sink::File(file) => {
            let copy = file
                .try_clone()
                .map_err(|e| ToolError::new(format!("could not open the job's log: {e}")))?;
            command.stdout(Stdio::from(file)).stderr(Stdio::from(copy))
        }
    };
    let temp = options.temp_dir.clone().unwrap_or_else(std::env::temp_dir);
    if options.temp_dir.is_some() {
        command.env("TMPDIR", &temp);
    }
    let mut writable = vec![temp];
    writable.extend(options.writable_roots.iter().cloned());
    let plan =
        SandboxPlan {
            mode: options.sandbox,
            writable,
            #[cfg(unix)]
            writable_handles: vec![workspace.dup_handle().map_err(|e| {
                ToolError::new(format!("could not use the workspace directory: {e}"))
            })?],
        };
    Ok((command, plan))
}

/// Runs one `shell` call; `call` says which call it is and when its run ends (a background
/// job's life is tied to that).
pub(super) async fn run(
    workspace: Workspace,
    options: ShellOptions,
    args: Args,
    call: super::jobs::CallScope,
) -> Result<String, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::new("the command is empty"));
    }
    if args.background == Some(true) {
        return options
            .jobs
            .start(&workspace, &options, &args.command, call)
            .await;
    }
    let secs = args
        .timeout_secs
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .clamp(1, MAX_TIMEOUT_SECS);
    let limit = Duration::from_secs(secs);
    if let Some(runner) = &options.runner {
        return delegate(
            &workspace,
            &options,
            runner.as_ref(),
            &args.command,
            limit,
            &call,
        )
        .await;
    }
    let started = start(&workspace, &options, &args.command, Sink::Pipes, false).await?;
    let sandbox_note = started.sandbox_note.clone();
    // The model gets the head and tail; the whole output streams into the store, if any.
    let spill = options.retention.as_ref().map(|s| s.spill(&call.call_id));
    let capture = Arc::new(Mutex::new(Capture::new(OUTPUT_LIMIT, spill)));
    let status = collect(started, &capture, limit).await;
    let mut output = match capture.lock() {
        Ok(capture) if capture.is_empty() => "(no output)\n".to_owned(),
        Ok(mut capture) => {
            let mut text = capture.finish();
            if !text.ends_with('\n') {
                text.push('\n');
            }
            text
        }
        Err(_) => "(output unavailable)\n".to_owned(),
    };
    output.insert_str(0, &sandbox_note);
    match status {
        None => Err(ToolError::new(format!(
            "{output}[command timed out after {secs}s and was killed; \
             pass a larger timeout_secs (at most {MAX_TIMEOUT_SECS}) or run something quicker]"
        ))),
        Some(Err(e)) => Err(ToolError::new(format!(
            "{output}[could not wait for the command: {e}]"
        ))),
        Some(Ok(status)) => Ok(format!("{output}[{}]", describe(status))),
    }
}

/// Runs `command` through `runner`, as this executable's sandbox wrapper with this call's
/// policy (the same writable directories and environment lists as [`start`]).
async fn delegate(
    workspace: &Workspace,
    options: &ShellOptions,
    runner: &dyn super::sandbox_exec::CommandRunner,
    command: &str,
    timeout: Duration,
    call: &super::jobs::CallScope,
) -> Result<String, ToolError> {
    workspace.check_identity()?;
    let program = std::env::current_exe()
        .map_err(|e| ToolError::new(format!("cannot find agentloop's own executable: {e}")))?;
    let mut writable = vec![options.temp_dir.clone().unwrap_or_else(std::env::temp_dir)];
    writable.extend(options.writable_roots.iter().cloned());
    let (allow, hide) = (&options.env_allow, &options.env_hide);
    let args = super::sandbox_exec::wrapper_args(
        options.sandbox,
        workspace.root(),
        &writable,
        allow,
        hide,
        command,
    );
    let delegated = super::sandbox_exec::DelegatedCommand {
        call_id: call.call_id.clone(),
        command: command.to_owned(),
        program,
        args,
        cwd: workspace.root().to_path_buf(),
        timeout,
    };
    runner.run(delegated).await
}

/// Waits for a started command (at most `limit`) while its stdout and stderr stream into
/// `capture`; then ends every process it started and drains what is still in the pipes.
/// `None` when it ran out of time.
async fn collect(
    started: Started,
    capture: &Arc<Mutex<Capture>>,
    limit: Duration,
) -> Option<std::io::Result<std::process::ExitStatus>> {
    let Started {
        mut child,
        mut guard,
        ..
    } = started;
    let stdout = child.stdout().take();
    let stderr = child.stderr().take();
    let sink = capture.clone();
    let readers = async move {
        let out = async {
            if let Some(pipe) = stdout {
                pump(pipe, sink.clone()).await;
            }
        };
        let err = async {
            if let Some(pipe) = stderr {
                pump(pipe, sink.clone()).await;
            }
        };
        futures::join!(out, err);
    };
    let mut readers = std::pin::pin!(readers);
    let mut readers_done = false;
    let deadline = Instant::now() + limit;
    let status = loop {
        tokio::select! {
            status = child.wait() => break Some(status),
            () = &mut readers, if !readers_done => readers_done = true,
            () = tokio::time::sleep_until(deadline) => break None,
        }
    };
    // The command is over (or out of time): end every process it started, then collect what
    // is still in the pipes.
    guard.kill();
    if status.is_none() {
        let _ = Box::into_pin(child.kill()).await;
    }
    if !readers_done {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
    }
    status
}

/// `exit code: N` or `killed by signal N`.
pub(super) fn describe(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code: {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    "exit status unknown".to_owned()
}
