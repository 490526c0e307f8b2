//! The JSON shapes that cross the engine: handler inputs and outputs, and the values journaled
//! for model replies and tool results. Everything here is plain serde data, so a journal written
//! by one worker is read by any other.

use agentloop::transcript::{ImagePart, Message, ToolCallPart, Usage};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Input of `AgentSession/{id}/run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunInput {
    /// The user's prompt.
    pub prompt: String,
}

/// Output of `AgentSession/{id}/run`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunOutput {
    /// Why the run ended (the same JSON as the CLI's `agent_end.stop`).
    pub stop: Value,
    /// The final assistant text.
    pub final_text: String,
    /// Tokens used by this run.
    pub usage: Usage,
    /// Model calls made by this run.
    pub turns: u32,
}

/// Input of `AgentSession/{child key}/task`: one `task` call of a parent run, run as a child
/// run of its own (see [`AgentSession`](crate::AgentSession)).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TaskInput {
    /// The task, the child's first user message.
    pub prompt: String,
    /// The parent run's session id.
    pub parent_session: String,
    /// The parent's `task` call.
    pub call_id: String,
}

/// A person's decision on one pending call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run the call.
    Allow,
    /// Do not run it; the model gets an error result with the reason.
    Deny,
}

/// Input of `AgentSession/{id}/approve`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ApprovalInput {
    /// Which pending call.
    pub call_id: String,
    /// Allow or deny.
    pub decision: ApprovalDecision,
    /// Why (shown to the model when denied).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A call waiting for a person.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// The arguments exactly as the model sent them.
    pub arguments: Value,
    /// The awakeable that resolves it (internal; `approve` uses it).
    pub awakeable_id: String,
}

/// Output of `AgentSession/{id}/status`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct SessionStatus {
    /// A run is in progress.
    pub running: bool,
    /// Messages in the session.
    pub messages: usize,
    /// Calls waiting for approval.
    pub pending: Vec<PendingApproval>,
    /// How the last finished run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_stop: Option<Value>,
}

/// Input of `ToolExecutor/execute`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ToolCallInput {
    /// The call (id, tool name, arguments).
    pub call: ToolCallPart,
    /// `session id:call id`, stable across retries of the same call.
    pub idempotency_key: String,
}

/// Output of `ToolExecutor/execute`: the journaled result of one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCallOutcome {
    /// The handler failed (its message is in `content`).
    pub is_error: bool,
    /// Model-visible text.
    pub content: String,
    /// Images for the model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImagePart>,
}

impl ToolCallOutcome {
    /// A failed call: `message` is what the model reads, with no images.
    pub fn error(message: impl Into<String>) -> Self {
        ToolCallOutcome {
            is_error: true,
            content: message.into(),
            images: Vec::new(),
        }
    }
}

/// The journaled value of one model call: the whole assembled reply, or the failure with the
/// partial message.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub(crate) enum ModelReply {
    /// The model answered.
    Done {
        /// The assembled assistant message.
        message: Message,
        /// When the message asks for exactly one call and its tool only reads: that call's
        /// result, computed inside the same step (see `session.rs`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lone_read: Option<ToolCallOutcome>,
    },
    /// The model failed after the adapter's own retries.
    Failed {
        /// The partial message (stop reason error/aborted).
        message: Message,
        /// What went wrong.
        error: String,
    },
}

impl ModelReply {
    /// A failure with no partial message: an empty assistant message (stop reason error)
    /// carrying `error`.
    pub(crate) fn failed(error: String) -> ModelReply {
        let mut message = Message::assistant(Vec::new(), agentloop::transcript::StopReason::Error);
        message.error_message = Some(error.clone());
        ModelReply::Failed { message, error }
    }
}
