//! The session modes an editor can switch between (`session/set_mode`): `ask` is
//! `--approve ask` (mutating calls become `session/request_permission`), `auto` is
//! `--approve allow` (every call runs).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_client_protocol::{SessionMode, SessionModeState};
use agentloop::builtin::ApprovalPolicy;

use crate::cli::ApproveArg;

/// The mode id of `--approve ask`.
pub const ASK: &str = "ask";
/// The mode id of `--approve allow`.
pub const AUTO: &str = "auto";

/// A session's current mode, shared with the running turn's approval asker so a switch applies
/// to the next question of a turn already running.
#[derive(Clone, Debug)]
pub struct Mode(Arc<AtomicBool>);

impl Mode {
    /// The starting mode for the `--approve` flag: `allow` is `auto`, anything else `ask`
    /// (`deny` and `defer` have no editor counterpart; a note on stderr says so).
    pub fn from_flag(flag: ApproveArg) -> Mode {
        let auto = matches!(flag, ApproveArg::Allow | ApproveArg::Always);
        if matches!(
            flag,
            ApproveArg::Deny | ApproveArg::Never | ApproveArg::Defer
        ) {
            eprintln!(
                "agentloop: note: acp sessions start in mode ask (--approve deny and defer are \
                 for terminals and scripts)"
            );
        }
        Mode(Arc::new(AtomicBool::new(auto)))
    }

    /// Whether every call runs without asking.
    pub fn is_auto(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Switches to the mode `id`; false for an unknown id.
    pub fn set(&self, id: &str) -> bool {
        match id {
            ASK => self.0.store(false, Ordering::SeqCst),
            AUTO => self.0.store(true, Ordering::SeqCst),
            _ => return false,
        }
        true
    }

    /// The current mode's id.
    pub fn id(&self) -> &'static str {
        if self.is_auto() { AUTO } else { ASK }
    }

    /// The approval policy of a turn, in either mode: read-only calls run, mutating ones go
    /// to the session's asker, which in mode auto allows them at once. So a mode switch
    /// applies to the next call of a turn already running, both ways, and an edit allowed
    /// without a question is still announced with its diff from the text it will change
    /// (read by the asker, through the editor when it holds the file).
    pub fn policy(&self) -> ApprovalPolicy {
        ApprovalPolicy::Mutating
    }

    /// The modes, as `session/new` and `session/load` return them.
    pub fn state(&self) -> SessionModeState {
        SessionModeState::new(
            self.id(),
            vec![
                SessionMode::new(ASK, "Ask").description(
                    "Read-only tools run; file edits and shell commands ask for permission.",
                ),
                SessionMode::new(AUTO, "Auto").description("Every tool call runs without asking."),
            ],
        )
    }
}
