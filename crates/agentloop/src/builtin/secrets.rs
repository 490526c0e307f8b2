//! The agent's own secrets out of reach of the commands it runs.
//!
//! A shell command runs as the same user as the agent, so without more it could read the
//! agent's memory and its start-up environment — `cat /proc/$PPID/environ` prints every API
//! key the command's own environment filter removed. [`protect_agent_secrets`] marks the agent
//! process non-dumpable (`PR_SET_DUMPABLE 0`): its `/proc/PID/environ`, `mem`, `maps` and
//! `fd` then belong to root and `ptrace` needs `CAP_SYS_PTRACE`, and it writes no core dump.
//! Commands started afterwards are not affected (`exec` makes them dumpable again).
//!
//! Removing the keys from the agent's environment after reading them is not a defence worth
//! having: `std::env::remove_var` is `unsafe` (other threads may read the environment at the
//! same time), and even where it works it only edits the C library's copy — the kernel's
//! `/proc/PID/environ` still shows the environment the process started with. What protects
//! the keys is this function, the Landlock domain of sandboxed commands (which also denies
//! `ptrace`-class access to processes outside it, root's included), and the fresh, allow-listed
//! environment each command gets (see the `shell_env` module).

/// Makes the current process non-dumpable so processes of the same user — including every
/// shell command the agent runs — cannot read its environment (`/proc/PID/environ`) or memory.
/// Call it once, early (the CLI does at start-up, before reading any key). Returns an error
/// where the kernel refuses; off Linux it does nothing.
///
/// Root, and processes with `CAP_SYS_PTRACE`, can still read a non-dumpable process's
/// environment unless a sandbox stops them (a sandboxed command's Landlock domain does).
///
/// ```
/// agentloop::builtin::protect_agent_secrets().unwrap();
/// ```
pub fn protect_agent_secrets() -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)?;
    Ok(())
}
