//! The shell tool's sandbox: which modes exist, and (on Linux) how a command is confined with
//! Landlock before it starts.
//!
//! Modes (like codex's): [`SandboxMode::ReadOnly`] — the command may read everything but write
//! nothing (except `/dev/null` and friends); [`SandboxMode::WorkspaceWrite`] (the default) —
//! writes only inside the workspace, the temporary directory and any extra writable roots;
//! [`SandboxMode::FullAccess`] — no sandbox. In both confined modes TCP `connect`/`bind` is
//! denied (Landlock network rules, kernel ABI 4+), and on ABI 6+ the command can neither signal
//! processes outside its sandbox nor reach abstract UNIX sockets created outside it.
//!
//! In both confined modes a seccomp filter also refuses the terminal ioctls that inject input
//! (`TIOCSTI`, `TIOCLINUX`), and `/dev/tty` is not writable; every command, in every mode,
//! starts in a session of its own without a controlling terminal (see the `shell` module). The
//! workspace's writable rule is built from its open directory handle, not its path.
//!
//! How: Landlock and seccomp restrict the *calling thread* and everything it starts afterwards. So the
//! command is spawned from a fresh, short-lived thread that first restricts itself and then
//! forks; the agent's own threads are never restricted, and no `unsafe` `pre_exec` hook is
//! needed. Where the kernel cannot enforce (part of) the sandbox, [`restrict_current_thread`]
//! says exactly what is missing and the caller reports it once; the command then runs with
//! whatever could be enforced (nothing, on a kernel without Landlock or off Linux).

use std::path::PathBuf;

/// How the shell tool's commands are confined. Parse from `read-only`, `workspace-write` or
/// `full-access`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SandboxMode {
    /// Read anything, write nothing (but `/dev/null`-like devices); no network.
    ReadOnly,
    /// Write only inside the workspace, the temporary directory and configured extra roots;
    /// no network. The default.
    #[default]
    WorkspaceWrite,
    /// No sandbox: the command can do whatever the user running the agent can.
    FullAccess,
}

crate::keywords! {
    SandboxMode;
    /// An unknown sandbox mode name.
    error ParseSandboxModeError: "sandbox mode";
    ReadOnly => "read-only" | "readonly",
    WorkspaceWrite => "workspace-write",
    FullAccess => "full-access" | "danger-full-access" | "none" | "off",
}

/// What the sandbox needs to know about one command.
#[derive(Debug)]
pub(crate) struct SandboxPlan {
    pub(crate) mode: SandboxMode,
    /// Directories the command may write below (workspace-write only), by path.
    pub(crate) writable: Vec<PathBuf>,
    /// Directories the command may write below (workspace-write only), by open handle: the
    /// workspace, so the rule covers the directory the agent opened even if its path is
    /// swapped for a symbolic link.
    #[cfg(unix)]
    pub(crate) writable_handles: Vec<std::os::fd::OwnedFd>,
}

/// What could not be enforced, in words for a warning; `None` when everything asked for is.
pub(crate) type Shortfall = Option<String>;

/// Devices any command may write to (discarding output is not an escape). `/dev/tty` is not
/// one: a command has no terminal (it runs in its own session), and writing to the user's
/// terminal is how a command would type into it.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Confines the calling thread (and every process it starts afterwards) according to `plan`.
/// Call it only on a thread created for this purpose: the restriction cannot be lifted.
#[cfg(target_os = "linux")]
pub(crate) fn restrict_current_thread(plan: &SandboxPlan) -> Shortfall {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, PathBeneath, Ruleset,
        RulesetAttr, RulesetCreatedAttr, Scope, path_beneath_rules,
    };
    use std::os::fd::AsFd;
    if plan.mode == SandboxMode::FullAccess {
        return None;
    }
    let abi = ABI::V6;
    let attempt = || -> Result<landlock::RestrictionStatus, landlock::RulesetError> {
        let mut writable: Vec<PathBuf> = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
        let mut handles = Vec::new();
        if plan.mode == SandboxMode::WorkspaceWrite {
            writable.extend(plan.writable.iter().cloned());
            handles.extend(plan.writable_handles.iter().map(|fd| {
                Ok::<_, landlock::RulesetError>(PathBeneath::new(
                    fd.as_fd(),
                    AccessFs::from_all(abi),
                ))
            }));
        }
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(&writable, AccessFs::from_all(abi)))?
            .add_rules(handles)?
            .restrict_self()
    };
    let shortfall = landlock_shortfall(attempt());
    match deny_terminal_injection() {
        Ok(()) => shortfall,
        Err(e) => {
            let seccomp = format!("terminal input injection (TIOCSTI) is not blocked: {e}");
            Some(match shortfall {
                Some(text) => format!("{text}; {seccomp}"),
                None => seccomp,
            })
        }
    }
}

/// What of the Landlock sandbox is not enforced, from `restrict_self`'s outcome.
#[cfg(target_os = "linux")]
fn landlock_shortfall(
    outcome: Result<landlock::RestrictionStatus, landlock::RulesetError>,
) -> Shortfall {
    use landlock::{LandlockStatus, RulesetStatus};
    match outcome {
        Err(e) => Some(format!(
            "the Landlock sandbox could not be set up ({e}); the command runs unconfined"
        )),
        Ok(status) => match status.ruleset {
            RulesetStatus::FullyEnforced => None,
            RulesetStatus::PartiallyEnforced => {
                let abi = match status.landlock {
                    LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
                    _ => 0,
                };
                let missing = if abi < 4 {
                    "network access is NOT denied (needs Landlock ABI 4, Linux 6.7+)"
                } else {
                    "signal and abstract-socket scoping is missing (needs Landlock ABI 6)"
                };
                Some(format!(
                    "the kernel supports Landlock ABI {abi} only: file writes are confined, but \
                     {missing}"
                ))
            }
            RulesetStatus::NotEnforced => Some(
                "this kernel does not enforce Landlock (not built in or not enabled); shell \
                 commands run unconfined: they can write anywhere the user can and use the \
                 network"
                    .to_owned(),
            ),
        },
    }
}

/// Denies the terminal ioctls that inject input (`TIOCSTI`, which pushes bytes into a
/// terminal's input queue as if typed, and `TIOCLINUX`, whose selection paste does the same on
/// a virtual console) to the calling thread and everything it starts, with `EPERM`, through a
/// seccomp filter. The request is compared on its low 32 bits, as the kernel reads it, so high
/// bits cannot smuggle it past; the x32 ABI's `ioctl` is covered too. The filter also kills a
/// process making system calls of another architecture (a 32-bit binary), which could
/// otherwise reach `ioctl` under another number. Needs `no_new_privs`, which Landlock's
/// `restrict_self` has already set.
#[cfg(target_os = "linux")]
fn deny_terminal_injection() -> Result<(), String> {
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    };
    use std::collections::BTreeMap;
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("no seccomp filter for this architecture: {e}"))?;
    let request = |value: u64| {
        SeccompCondition::new(1, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .and_then(|condition| SeccompRule::new(vec![condition]))
    };
    let ioctl_rules = || -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
        #[allow(clippy::useless_conversion)] // the request type differs between C libraries
        Ok(vec![
            request(u64::from(libc::TIOCSTI as u32))?,
            request(u64::from(libc::TIOCLINUX as u32))?,
        ])
    };
    let mut rules = BTreeMap::new();
    rules.insert(libc::SYS_ioctl, ioctl_rules().map_err(|e| e.to_string())?);
    #[cfg(target_arch = "x86_64")]
    {
        // The x32 ABI's ioctl: its own number with the x32 bit set, same architecture value.
        const X32_IOCTL: i64 = 0x4000_0000 + 514;
        rules.insert(X32_IOCTL, ioctl_rules().map_err(|e| e.to_string())?);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(|e| e.to_string())?;
    let program: seccompiler::BpfProgram = filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())?;
    // Landlock set it already where the kernel has Landlock; without it, set it here.
    rustix::thread::set_no_new_privs(true).map_err(|e| e.to_string())?;
    seccompiler::apply_filter(&program).map_err(|e| e.to_string())
}

/// Off Linux there is no sandbox: say so.
#[cfg(not(target_os = "linux"))]
pub(crate) fn restrict_current_thread(plan: &SandboxPlan) -> Shortfall {
    (plan.mode != SandboxMode::FullAccess).then(|| {
        "the shell sandbox is only available on Linux (Landlock); shell commands run \
         unconfined"
            .to_owned()
    })
}

/// Whether this system can fully enforce `mode`, checked on a throw-away thread; `Err` says
/// what is missing (the same text the shell tool reports once). The CLI calls it at start-up
/// to print the warning before any command runs.
pub fn sandbox_support(mode: SandboxMode) -> Result<(), String> {
    let plan = SandboxPlan {
        mode,
        writable: vec![std::env::temp_dir()],
        #[cfg(unix)]
        writable_handles: Vec::new(),
    };
    match std::thread::spawn(move || restrict_current_thread(&plan)).join() {
        Ok(None) => Ok(()),
        Ok(Some(shortfall)) => Err(shortfall),
        Err(_) => Err("the sandbox check panicked".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for mode in [
            SandboxMode::ReadOnly,
            SandboxMode::WorkspaceWrite,
            SandboxMode::FullAccess,
        ] {
            assert_eq!(mode.as_str().parse::<SandboxMode>(), Ok(mode));
        }
        assert_eq!(SandboxMode::default(), SandboxMode::WorkspaceWrite);
        assert!("sandboxed".parse::<SandboxMode>().is_err());
    }
}
