//! `shell{command, timeout_secs?}`: run a command with `sh -c` in the workspace root.
//!
//! Owns the child process's whole life: it starts in its own process group, sandboxed
//! ([`SandboxMode`], Landlock on Linux; see the `sandbox` module), with an environment stripped
//! of credentials ([`looks_like_credential`](super::looks_like_credential)); its stdout and
//! stderr are collected together (in arrival order, bounded memory); and when the command
//! finishes, times out, or the call is aborted (the handler's future dropped), it and every
//! process it started — `setsid`/double-forked ones included — are killed (see the `procs`
//! module). `shell` stays a mutating tool that needs approval: in the default
//! `workspace-write` mode it can still change everything inside the workspace.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

use super::output::{OUTPUT_LIMIT, OutputBuffer};
use super::procs;
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

    /// Another directory commands may write below in `workspace-write` mode (e.g. a build cache).
    pub fn writable_root(mut self, dir: impl Into<PathBuf>) -> Self {
        self.writable_roots.push(dir.into());
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
}

pub(super) const DESCRIPTION: &str = "Run a shell command (`sh -c`) in the workspace root and \
return its combined stdout and stderr with the exit code. Long output is truncated (the start \
and the end are kept). The command is killed when it exceeds timeout_secs (default 60, at most \
600); background processes it starts are killed when it finishes. There is no stdin: do not run \
interactive programs. The command may be sandboxed (by default it can write only inside the \
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
struct TreeGuard {
    shell_pid: Option<u32>,
    marker: String,
    armed: bool,
}

impl TreeGuard {
    fn kill(&mut self) {
        if std::mem::take(&mut self.armed) {
            procs::kill_call(self.shell_pid, &self.marker);
        }
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn pump(mut pipe: impl AsyncRead + Unpin, sink: Arc<Mutex<OutputBuffer>>) {
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
    mut command: Command,
    plan: SandboxPlan,
) -> Result<(tokio::process::Child, Option<String>), ToolError> {
    if plan.mode == SandboxMode::FullAccess {
        let child = command
            .spawn()
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
            let _ = tx.send(command.spawn().map(|child| (child, shortfall)));
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

pub(super) async fn run(
    workspace: Workspace,
    options: ShellOptions,
    args: Args,
) -> Result<String, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::new("the command is empty"));
    }
    let secs = args
        .timeout_secs
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .clamp(1, MAX_TIMEOUT_SECS);
    let limit = Duration::from_secs(secs);

    procs::become_subreaper();
    let marker = procs::new_marker();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&args.command)
        .current_dir(workspace.root())
        .env_clear()
        .envs(filtered_env(&options.env_allow, &options.env_hide))
        .env(procs::MARKER, &marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut writable = vec![workspace.root().to_path_buf(), std::env::temp_dir()];
    writable.extend(options.writable_roots.iter().cloned());
    let plan = SandboxPlan {
        mode: options.sandbox,
        writable,
    };
    let mut guard = TreeGuard {
        shell_pid: None,
        marker,
        armed: true,
    };
    let (mut child, shortfall) = spawn_sandboxed(command, plan).await?;
    guard.shell_pid = child.id();
    // Said once per process, as a warning line and in the first result the model sees.
    let sandbox_note = shortfall
        .filter(|_| !WARNED.swap(true, std::sync::atomic::Ordering::Relaxed))
        .map(|text| {
            tracing::warn!("shell sandbox ({}): {text}", options.sandbox);
            format!("[sandbox warning: {text}]\n")
        })
        .unwrap_or_default();

    let buffer = Arc::new(Mutex::new(OutputBuffer::new(OUTPUT_LIMIT)));
    let stdout = child.stdout.take();
    let stderr = child.stderr.take();
    let sink = buffer.clone();
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
        let _ = child.kill().await;
    }
    if !readers_done {
        let _ = tokio::time::timeout(DRAIN_GRACE, &mut readers).await;
    }

    let mut output = match buffer.lock() {
        Ok(buffer) if buffer.is_empty() => "(no output)\n".to_owned(),
        Ok(buffer) => {
            let mut text = buffer.render();
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

fn describe(status: std::process::ExitStatus) -> String {
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
