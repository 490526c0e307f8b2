//! [`AgentError`] and [`completed_messages`]: an error that ends a run never loses the messages
//! the run had already completed.

use crate::model::ModelError;
use crate::transcript::Message;

/// Why a run could not start or did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// `run_continue` was called with no messages.
    #[error("cannot continue: the context has no messages")]
    EmptyContext,
    /// `run_continue` was called on a context that ends with an assistant message.
    #[error(
        "cannot continue from an assistant message: the context must end with a user, custom or tool-result message"
    )]
    ContinueFromAssistant,
    /// The configuration is unusable.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The model failed mid-run.
    #[error("the model failed: {error}")]
    Model {
        /// What failed.
        error: ModelError,
        /// The partial assistant message (stop reason `error`), as streamed.
        partial: Box<Message>,
        /// Every message completed before the failure (prompts included).
        completed: Vec<Message>,
    },
    /// The attached session's conversation could not be loaded (see
    /// [`AgentLoop::run_in_session`](crate::agent::AgentLoop::run_in_session)); the run did
    /// not start.
    /// The source is the store's `SessionError` (downcast it to act on its kind).
    #[error("could not load the session: {0}")]
    Session(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A blocking view was called from the async code of the current-thread runtime it runs
    /// on, where waiting would wait for the very thread that must do the work (see
    /// `agentloop::blocking`); the run did not start.
    #[error(
        "a blocking view on this current-thread runtime was called from that runtime's own async code; await the async API instead (or give the view its own runtime with SyncRuntime::new)"
    )]
    InsideRuntime,
    /// The loop failed unexpectedly (a bug, reported as an error instead of a panic).
    #[error("the agent loop failed unexpectedly: {message}")]
    Internal {
        /// What failed.
        message: String,
        /// Every message completed before the failure.
        completed: Vec<Message>,
    },
}

impl AgentError {
    /// The messages completed before this error ended the run (empty when the run never
    /// started).
    pub fn completed_messages(&self) -> &[Message] {
        match self {
            AgentError::Model { completed, .. } | AgentError::Internal { completed, .. } => {
                completed
            }
            _ => &[],
        }
    }
}

/// The messages an agent run had already completed when `err` ended it; empty for any other
/// error, so callers can ask unconditionally (the loop contract's `completed_messages`).
///
/// ```
/// use agentloop::agent::{completed_messages, AgentError};
///
/// let io = std::io::Error::other("disk full");
/// assert!(completed_messages(&io).is_empty());
/// assert!(completed_messages(&AgentError::EmptyContext).is_empty());
/// ```
pub fn completed_messages(err: &(dyn std::error::Error + 'static)) -> Vec<Message> {
    if let Some(e) = err.downcast_ref::<crate::agent::output::OutputError>() {
        return e.completed_messages().to_vec();
    }
    err.downcast_ref::<AgentError>()
        .map(|e| e.completed_messages().to_vec())
        .unwrap_or_default()
}
