//! `shell{command, timeout_secs?}`: run a command with `sh -c` in the workspace root.
//!
//! Owns the child process's whole life: it starts in its own process group, its stdout and
//! stderr are collected together (in arrival order, bounded memory), and when the command
//! finishes, times out, or the call is aborted (the handler's future dropped), the whole group is
//! killed so no stray background process outlives the call. The command itself is not
//! sandboxed: it can reach anything the user running the agent can, which is why `shell` is a
//! mutating tool that needs approval.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::Command;
use tokio::time::Instant;

use super::output::{OUTPUT_LIMIT, OutputBuffer};
use super::workspace::Workspace;
use crate::tooling::ToolError;

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
interactive programs.";

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

/// Kills the process group when dropped (including when the handler's future is dropped by an
/// abort or the executor's timeout).
struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    fn kill(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            kill_group(pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(unix)]
fn kill_group(pgid: u32) {
    use rustix::process::{Pid, Signal, kill_process_group};
    if let Some(pid) = i32::try_from(pgid).ok().and_then(Pid::from_raw) {
        // ESRCH (the group is already gone) is the common, harmless failure.
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_pgid: u32) {
    // No process groups: `kill_on_drop` still ends the direct child.
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

pub(super) async fn run(workspace: Workspace, args: Args) -> Result<String, ToolError> {
    if args.command.trim().is_empty() {
        return Err(ToolError::new("the command is empty"));
    }
    let secs = args
        .timeout_secs
        .unwrap_or(DEFAULT_TIMEOUT_SECS)
        .clamp(1, MAX_TIMEOUT_SECS);
    let limit = Duration::from_secs(secs);

    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(&args.command)
        .current_dir(workspace.root())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command
        .spawn()
        .map_err(|e| ToolError::new(format!("could not start `sh`: {e}")))?;
    let mut guard = GroupGuard { pgid: child.id() };

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

    let output = match buffer.lock() {
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
