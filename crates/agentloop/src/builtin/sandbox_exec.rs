//! Shell commands run by someone else, still in agentloop's sandbox: an application (an editor
//! hosting the agent, which shows commands in its own terminals) plugs a [`CommandRunner`] into
//! [`ShellOptions::runner`](super::ShellOptions::runner), and the `shell` tool hands it each
//! foreground command instead of starting it. The runner must not start the command itself:
//! it starts the program it is given ([`DelegatedCommand::program`] and
//! [`args`](DelegatedCommand::args)), which is the application's own executable running
//! [`exec_sandboxed`] (a hidden subcommand of the application). That wrapper confines itself
//! as the shell tool confines its commands — the same [`SandboxMode`], Landlock rules (the
//! workspace, the temporary directory and the extra writable roots writable; no TCP), seccomp
//! filter against terminal input injection, the same environment allow-list applied to the
//! environment it is given, a session of its own — and then `exec`s `sh -c COMMAND` in the
//! workspace.
//!
//! What differs from the shell tool's own commands: the runner owns the process's life (the
//! tool's timeout and cancellation reach it through the runner, which must kill the command),
//! there is no cgroup or process-scan sweep of what it left behind, and the workspace is named
//! by its path (checked when the call starts), not by the agent's open handle. Background jobs
//! (`background: true`) still run locally.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;

use super::sandbox::{SandboxMode, SandboxPlan, restrict_current_thread};
use super::shell_env::filtered_env;
use crate::tooling::ToolError;

/// Runs the `shell` tool's foreground commands somewhere else (an editor's terminal), by
/// starting the sandbox wrapper it is given.
pub trait CommandRunner: Send + Sync {
    /// Runs `command` to its end (or its timeout, or until the future is dropped: then the
    /// process must be killed). `Ok` is the tool's result text (its output and exit status),
    /// `Err` an error result.
    fn run(&self, command: DelegatedCommand) -> BoxFuture<'static, Result<String, ToolError>>;
}

impl fmt::Debug for dyn CommandRunner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CommandRunner")
    }
}

/// One command for a [`CommandRunner`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct DelegatedCommand {
    /// The tool call that runs it.
    pub call_id: String,
    /// The command line as the model wrote it (for display; it is the last of
    /// [`args`](Self::args)).
    pub command: String,
    /// The program to start: the application's executable.
    pub program: PathBuf,
    /// Its arguments: the wrapper's subcommand, the sandbox policy, `--`, the command.
    pub args: Vec<String>,
    /// The directory to start it in: the workspace root.
    pub cwd: PathBuf,
    /// How long it may run before it must be killed.
    pub timeout: Duration,
}

/// The hidden subcommand an application routes to [`exec_sandboxed`].
pub const SANDBOX_EXEC_SUBCOMMAND: &str = "__sandbox-exec";

/// The wrapper's arguments after [`SANDBOX_EXEC_SUBCOMMAND`]: the policy, `--`, the command.
pub(super) fn wrapper_args(
    mode: SandboxMode,
    workspace: &std::path::Path,
    writable: &[PathBuf],
    env_allow: &[String],
    env_hide: &[String],
    command: &str,
) -> Vec<String> {
    let mut args = vec![
        SANDBOX_EXEC_SUBCOMMAND.to_owned(),
        "--mode".into(),
        mode.as_str().into(),
        "--workspace".into(),
        workspace.display().to_string(),
    ];
    for dir in writable {
        args.extend(["--writable".into(), dir.display().to_string()]);
    }
    for name in env_allow {
        args.extend(["--allow-env".into(), name.clone()]);
    }
    for name in env_hide {
        args.extend(["--hide-env".into(), name.clone()]);
    }
    args.extend(["--".into(), command.to_owned()]);
    args
}

/// The policy and command the wrapper was started with.
struct Wrapped {
    mode: SandboxMode,
    workspace: PathBuf,
    writable: Vec<PathBuf>,
    allow: Vec<String>,
    hide: Vec<String>,
    command: String,
}

fn parse(args: &[OsString]) -> Result<Wrapped, String> {
    let mut args = args.iter().map(|a| a.to_string_lossy().into_owned());
    let mut wrapped = Wrapped {
        mode: SandboxMode::WorkspaceWrite,
        workspace: PathBuf::new(),
        writable: Vec::new(),
        allow: Vec::new(),
        hide: Vec::new(),
        command: String::new(),
    };
    while let Some(flag) = args.next() {
        if flag == "--" {
            wrapped.command = args.next().ok_or("no command after `--`")?;
            return match args.next() {
                Some(extra) => Err(format!("unexpected argument `{extra}` after the command")),
                None if wrapped.workspace.as_os_str().is_empty() => Err("no --workspace".into()),
                None => Ok(wrapped),
            };
        }
        const FLAGS: &[&str] = &[
            "--mode",
            "--workspace",
            "--writable",
            "--allow-env",
            "--hide-env",
        ];
        if !FLAGS.contains(&flag.as_str()) {
            return Err(format!("unknown argument `{flag}`"));
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--mode" => wrapped.mode = value.parse().map_err(|e| format!("{e}"))?,
            "--workspace" => wrapped.workspace = PathBuf::from(value),
            "--writable" => wrapped.writable.push(PathBuf::from(value)),
            "--allow-env" => wrapped.allow.push(value),
            _ => wrapped.hide.push(value),
        }
    }
    Err("no `-- COMMAND`".into())
}

/// The wrapper: confines this process as the `shell` tool confines its commands, then becomes
/// `sh -c COMMAND` in the workspace. `args` are the ones after [`SANDBOX_EXEC_SUBCOMMAND`].
/// Returns only when it could not: the reason, in one line. Where the kernel cannot enforce
/// part of the sandbox, a `[sandbox warning: …]` line goes to stderr and the command runs with
/// what could be enforced, as in the shell tool.
///
/// Call it from the main thread of a process that has started no other threads that matter
/// (the restriction is per thread, and `exec` keeps the calling thread's).
pub fn exec_sandboxed(args: &[OsString]) -> String {
    let wrapped = match parse(args) {
        Ok(wrapped) => wrapped,
        Err(e) => return format!("{SANDBOX_EXEC_SUBCOMMAND}: {e}"),
    };
    let workspace = match std::fs::File::open(&wrapped.workspace) {
        Ok(dir) => dir,
        Err(e) => {
            return format!(
                "{SANDBOX_EXEC_SUBCOMMAND}: cannot open the workspace {}: {e}",
                wrapped.workspace.display()
            );
        }
    };
    // The environment first: the allow-list reads this process's own environment.
    let env = filtered_env(&wrapped.allow, &wrapped.hide);
    let plan = SandboxPlan {
        mode: wrapped.mode,
        writable: wrapped.writable.clone(),
        #[cfg(unix)]
        writable_handles: vec![std::os::fd::OwnedFd::from(workspace)],
    };
    if let Some(shortfall) = restrict_current_thread(&plan) {
        eprintln!("[sandbox warning: {shortfall}]");
    }
    exec_shell(&wrapped, env)
}

#[cfg(unix)]
fn exec_shell(
    wrapped: &Wrapped,
    env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) -> String {
    use std::os::unix::process::CommandExt;
    // No controlling terminal, as for the shell tool's commands (fails harmlessly when this
    // process already leads a session).
    let _ = rustix::process::setsid();
    let error = std::process::Command::new("sh")
        .arg("-c")
        .arg(&wrapped.command)
        .current_dir(&wrapped.workspace)
        .env_clear()
        .envs(env)
        .exec();
    format!("{SANDBOX_EXEC_SUBCOMMAND}: cannot start `sh`: {error}")
}

#[cfg(not(unix))]
fn exec_shell(
    _wrapped: &Wrapped,
    _env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString>,
) -> String {
    format!("{SANDBOX_EXEC_SUBCOMMAND}: only supported on Unix")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_wrapper_reads_back_the_arguments_it_is_given() {
        let args = wrapper_args(
            SandboxMode::ReadOnly,
            std::path::Path::new("/w s"),
            &[PathBuf::from("/tmp")],
            &["TOKEN".into()],
            &["KEY".into()],
            "echo -- hi",
        );
        assert_eq!(args[0], SANDBOX_EXEC_SUBCOMMAND);
        let os: Vec<OsString> = args[1..].iter().map(OsString::from).collect();
        let wrapped = parse(&os).unwrap();
        assert_eq!(wrapped.mode, SandboxMode::ReadOnly);
        assert_eq!(wrapped.workspace, PathBuf::from("/w s"));
        assert_eq!(wrapped.writable, [PathBuf::from("/tmp")]);
        assert_eq!(
            (wrapped.allow, wrapped.hide),
            (vec!["TOKEN".into()], vec!["KEY".into()])
        );
        assert_eq!(wrapped.command, "echo -- hi");
        assert!(parse(&[OsString::from("--mode")]).is_err());
        assert!(parse(&[OsString::from("--"), OsString::from("x")]).is_err());
    }
}
