//! Sub-agent runs recorded as sessions of their own: the session store's implementation of the
//! loop's [`ChildRecords`], and [`SubAgent::record_in`], which plugs it in.
//!
//! Each call's child run is a session linked to the parent session and the call
//! ([`ParentLink`]), written under the child session's writer lock. A call whose child session
//! already exists — the same call run again after the process died in the middle of the child
//! — gets that session back (loaded with the same repair as any session), and its final answer
//! when the child had already given one.

use std::sync::Arc;

use super::{NewSession, ParentLink, SessionRecorder, SessionSettings, SessionStore};
use crate::agent::{AgentEvent, ChildRecords, EmitFn, OpenedChild, SubAgent};
use crate::tooling::ToolDeps;
use crate::transcript::{Message, Role, StopReason};

/// How long a call waits for its child session's writer lock (held by another process).
const CHILD_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Child runs recorded in `store`, their sessions created with `settings`.
struct StoreChildRecords {
    store: Arc<dyn SessionStore>,
    settings: SessionSettings,
}

impl ChildRecords for StoreChildRecords {
    fn open(
        &self,
        parent_session: &str,
        call_id: &str,
        agent: &str,
    ) -> Result<OpenedChild, String> {
        let store = &self.store;
        let failed = |e: super::SessionError| e.to_string();
        let existing = store
            .children(parent_session)
            .map_err(failed)?
            .into_iter()
            .find(|c| c.parent.as_ref().is_some_and(|p| p.call_id == call_id));
        let id = match existing {
            Some(info) => info.id,
            None => {
                let link = ParentLink::new(parent_session, call_id, agent.to_owned());
                let new = NewSession::new()
                    .settings(self.settings.clone())
                    .parent(link);
                store.create(new).map_err(failed)?.id
            }
        };
        let lock = store.lock_session(&id, CHILD_LOCK_WAIT).map_err(failed)?;
        let context = store.load(&id).map_err(failed)?;
        let finished = context
            .last()
            .filter(|m| is_final_answer(m))
            .map(Message::text);
        let recorder = SessionRecorder::new(store.clone(), &id);
        let listener: EmitFn = Arc::new(move |e: &AgentEvent| recorder.on_event(e));
        Ok(OpenedChild::new(
            context,
            finished,
            listener,
            Box::new(lock),
        ))
    }
}

/// Whether `message` ends a child's run with its answer (not a call, an error or an abort).
fn is_final_answer(message: &Message) -> bool {
    message.role == Role::Assistant
        && message.tool_calls().next().is_none()
        && !matches!(
            message.stop_reason,
            Some(StopReason::Error | StopReason::Aborted)
        )
}

impl<D: ToolDeps> SubAgent<D> {
    /// Records each call's child run in `store` as a session of its own, linked to the parent's
    /// session and call ([`ParentLink`]), with `settings` (workspace, model, …), under the child
    /// session's writer lock. Only calls from a parent run that belongs to a session (its agent
    /// has a session label) are recorded. A call whose child session already exists — the same
    /// call run again after the process died in the middle of the child — continues that
    /// session where it stopped (loaded with the same repair as any session); a child that had
    /// already given its final answer answers with it without a model call.
    pub fn record_in(self, store: Arc<dyn SessionStore>, settings: SessionSettings) -> Self {
        self.recorded_by(Arc::new(StoreChildRecords { store, settings }))
    }
}
