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
//! How: Landlock restricts the *calling thread* and everything it starts afterwards. So the
//! command is spawned from a fresh, short-lived thread that first restricts itself and then
//! forks; the agent's own threads are never restricted, and no `unsafe` `pre_exec` hook is
//! needed. Where the kernel cannot enforce (part of) the sandbox, [`restrict_current_thread`]
//! says exactly what is missing and the caller reports it once; the command then runs with
//! whatever could be enforced (nothing, on a kernel without Landlock or off Linux).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

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

impl SandboxMode {
    /// The mode's name as the CLI spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::FullAccess => "full-access",
        }
    }
}

impl fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown sandbox mode name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode `{0}`; use read-only, workspace-write or full-access")]
pub struct ParseSandboxModeError(pub String);

impl FromStr for SandboxMode {
    type Err = ParseSandboxModeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "read-only" | "readonly" => Ok(SandboxMode::ReadOnly),
            "workspace-write" => Ok(SandboxMode::WorkspaceWrite),
            "full-access" | "danger-full-access" | "none" | "off" => Ok(SandboxMode::FullAccess),
            _ => Err(ParseSandboxModeError(s.to_owned())),
        }
    }
}

/// What the sandbox needs to know about one command.
#[derive(Clone, Debug)]
pub(crate) struct SandboxPlan {
    pub(crate) mode: SandboxMode,
    /// Directories the command may write below (workspace-write only).
    pub(crate) writable: Vec<PathBuf>,
}

/// What could not be enforced, in words for a warning; `None` when everything asked for is.
pub(crate) type Shortfall = Option<String>;

/// Devices any command may write to (discarding output is not an escape).
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// Confines the calling thread (and every process it starts afterwards) according to `plan`.
/// Call it only on a thread created for this purpose: the restriction cannot be lifted.
#[cfg(target_os = "linux")]
pub(crate) fn restrict_current_thread(plan: &SandboxPlan) -> Shortfall {
    use landlock::{
        ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, LandlockStatus, Ruleset,
        RulesetAttr, RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
    };
    if plan.mode == SandboxMode::FullAccess {
        return None;
    }
    let abi = ABI::V6;
    let attempt = || -> Result<landlock::RestrictionStatus, landlock::RulesetError> {
        let mut writable: Vec<PathBuf> = WRITABLE_DEVICES.iter().map(PathBuf::from).collect();
        if plan.mode == SandboxMode::WorkspaceWrite {
            writable.extend(plan.writable.iter().cloned());
        }
        Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(AccessFs::from_all(abi))?
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
            .scope(Scope::from_all(abi))?
            .create()?
            .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))?
            .add_rules(path_beneath_rules(&writable, AccessFs::from_all(abi)))?
            .restrict_self()
    };
    match attempt() {
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
