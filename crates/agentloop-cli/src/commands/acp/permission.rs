//! Approval through the editor: a call the policy asks about becomes a
//! `session/request_permission` with allow-once, allow-always and reject options. The answer
//! is applied as the terminal prompt's is: "always" remembers the call under the same key
//! (`crate::ui::prompt::always_key`) for the rest of the session, and a cancelled or failed request
//! denies.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest,
    ToolCallStatus, ToolCallUpdate,
};
use agentloop::builtin::Workspace;
use agentloop::tooling::Approval;
use agentloop::transcript::ToolCallPart;

use super::modes::Mode;
use super::outbound::Queue;
use super::updates::{Updates, fields};

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT: &str = "reject";

/// What the model is told when the person rejects a call.
pub const REJECTED: &str = "the user rejected this tool call in the editor";
/// What the model is told when the question was cancelled (the turn was cancelled, or the
/// editor could not answer).
pub const CANCELLED: &str = "the permission request was cancelled, so the call did not run";

/// One session's approval asker (cloned into each turn).
#[derive(Clone)]
pub struct Asker {
    session_id: String,
    root: PathBuf,
    mode: Mode,
    always: Arc<Mutex<HashSet<String>>>,
}

impl Asker {
    /// An asker for `session_id` in workspace `root`, following `mode`.
    pub fn new(session_id: &str, root: PathBuf, mode: Mode) -> Asker {
        Asker {
            session_id: session_id.to_owned(),
            root,
            mode,
            always: Arc::default(),
        }
    }

    /// Decides `call`: runs at once in mode auto or when allowed always before; otherwise asks,
    /// showing an edit's diff from the text the editor has when `workspace` reads through it.
    pub async fn ask(
        &self,
        call: ToolCallPart,
        updates: Updates,
        queue: Queue,
        workspace: Workspace,
    ) -> Approval {
        let key = crate::ui::prompt::always_key(&call);
        let old = file_text(&call, workspace).await;
        if self.mode.is_auto() || self.remembered(&key) {
            // Announced here, not when it starts: the diff must start from the text the
            // edit will change (the editor's buffer), which only this async path can read.
            if old.is_some() {
                updates.announce_with(&call, ToolCallStatus::Pending, old);
            }
            return Approval::Allow;
        }
        updates.announce_with(&call, ToolCallStatus::Pending, old.clone());
        let request = RequestPermissionRequest::new(
            self.session_id.clone(),
            ToolCallUpdate::new(call.id.clone(), fields(&call, &self.root, old)),
            vec![
                PermissionOption::new(ALLOW_ONCE, "Allow", PermissionOptionKind::AllowOnce),
                PermissionOption::new(
                    ALLOW_ALWAYS,
                    "Allow always",
                    PermissionOptionKind::AllowAlways,
                ),
                PermissionOption::new(REJECT, "Reject", PermissionOptionKind::RejectOnce),
            ],
        );
        let Some(answer) = queue.permission(request).await else {
            return Approval::deny(CANCELLED);
        };
        match answer.outcome {
            RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                ALLOW_ONCE => Approval::Allow,
                ALLOW_ALWAYS => {
                    self.always
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .insert(key);
                    Approval::Allow
                }
                _ => Approval::deny(REJECTED),
            },
            _ => Approval::deny(CANCELLED),
        }
    }

    fn remembered(&self, key: &str) -> bool {
        self.always
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(key)
    }
}

/// The current text of the file an edit (`write_file`, `edit_file`) changes, read as the edit
/// will read it: through the editor when the workspace reads through it, else from disk
/// (bounded, text only). `None` when the call is no edit or its path is refused by the
/// workspace (which is then neither read nor sent to the editor); `Some(None)` when there is
/// no such file. Read on a blocking thread, as the file tools read.
async fn file_text(call: &ToolCallPart, workspace: Workspace) -> Option<Option<String>> {
    let path = super::updates::edited_path(call)?.to_owned();
    let read = tokio::task::spawn_blocking(move || {
        let Some(files) = workspace.text_files().filter(|f| f.reads()) else {
            return crate::ui::prompt::current_text(Some(&workspace), &path).ok();
        };
        let resolved = workspace.resolve(&path).ok()?;
        Some(files.read_text(&resolved).ok())
    });
    read.await.ok().flatten()
}
