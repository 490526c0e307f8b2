//! An agent attached to a stored session: one call records every run into a
//! [`SessionStore`], one call continues the stored conversation — in this process or another.
//!
//! [`with_session`](AgentLoop::with_session) adds a [`SessionRecorder`] as one more event
//! listener (it adds up with every [`with_emit`](AgentLoop::with_emit) listener) and labels the
//! runs with the session id; [`run_in_session`](AgentLoop::run_in_session) loads the stored
//! conversation (interrupted tool batches repaired) and runs the prompts on top of it.
//!
//! A reply cut short by an abort is stored as it was streamed (stop reason `aborted`, its
//! unfinished tool calls answered "aborted"), but it is **not resent** on resume: requests to a
//! model leave out aborted and failed assistant messages and the results of their calls
//! ([`providers::replay`](crate::providers::replay)). The prompt it answered is a user message
//! and stays, so the next run's model sees that prompt, then the new one.

use std::sync::Arc;

use super::{NewSession, SessionError, SessionRecorder, SessionStore};
use crate::agent::{AgentError, AgentLoop, RunOutcome};
use crate::tooling::ToolDeps;
use crate::transcript::Message;

impl<D: ToolDeps> AgentLoop<D> {
    /// Records every run of this agent into session `session_id` of `store` — creating the
    /// session when it does not exist yet — and labels the runs with that id (see
    /// [`with_session_label`](Self::with_session_label)). The recorder is one more event
    /// listener, in registration order with those of [`with_emit`](Self::with_emit).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use agentloop::agent::{AgentLoop, AgentLoopConfig};
    /// use agentloop::model::{ScriptedModel, ScriptedTurn};
    /// use agentloop::session::SqliteStore;
    /// use agentloop::transcript::Message;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let store = Arc::new(SqliteStore::open_in_memory()?);
    /// let model = ScriptedModel::new([ScriptedTurn::text("Hello!"), ScriptedTurn::text("Again.")]);
    /// let agent = AgentLoop::new(AgentLoopConfig::default(), model).with_session(store.clone(), "s-1")?;
    /// agent.run_in_session(vec![Message::user("Say hello")]).await?;
    /// // Later, perhaps in another process: the same two calls continue the conversation.
    /// let outcome = agent.run_in_session(vec![Message::user("Once more")]).await?;
    /// assert_eq!(outcome.context.len(), 4);
    /// # Ok(()) }
    /// ```
    pub fn with_session(
        self,
        store: Arc<dyn SessionStore>,
        session_id: impl Into<String>,
    ) -> Result<Self, SessionError> {
        let id = session_id.into();
        match store.info(&id) {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {
                store.create(NewSession::new().id(&id))?;
            }
            Err(e) => return Err(e),
        }
        let recorder = SessionRecorder::new(store, &id);
        let agent = self.with_emit(recorder.emit_fn()).with_session_label(id);
        Ok(AgentLoop {
            attached: Some(Arc::new(recorder)),
            ..agent
        })
    }

    /// [`with_session`](Self::with_session) on the store's most recently updated session, or
    /// on a new one when the store has none.
    pub fn with_last_session(self, store: Arc<dyn SessionStore>) -> Result<Self, SessionError> {
        let id = match store.last()? {
            Some(last) => last.id,
            None => store.create(NewSession::new())?.id,
        };
        self.with_session(store, id)
    }

    /// The recorder of the attached session (its id, failed appends), if any.
    pub fn session(&self) -> Option<&SessionRecorder> {
        self.attached.as_deref()?.downcast_ref()
    }

    /// The attached session's stored conversation, ready to run on
    /// ([`SessionStore::load`]: interrupted tool batches repaired); empty without a session.
    pub fn session_context(&self) -> Result<Vec<Message>, SessionError> {
        match self.session() {
            Some(recorder) => recorder.store().load(recorder.session_id()),
            None => Ok(Vec::new()),
        }
    }

    /// Runs `prompts` on top of the attached session's stored conversation; the run is
    /// recorded into the session as it goes. Without a session it is [`run`](Self::run) on an
    /// empty context. A session parked for approval continues with
    /// [`resume_parked`](Self::resume_parked) instead.
    pub async fn run_in_session(&self, prompts: Vec<Message>) -> Result<RunOutcome, AgentError> {
        let context = self
            .session_context()
            .map_err(|e| AgentError::Session(Box::new(e)))?;
        self.run(prompts, context).await
    }
}
