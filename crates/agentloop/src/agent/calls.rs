//! The life of a tool call inside the loop (docs/ARCHITECTURE.md, "The loop"): [`PreparedToolCall`] (found and validated,
//! about to be checked by hooks), [`BlockedCall`] (vetoed or invalid: never ran), [`ErrorCall`]
//! (failed during preparation) and [`FinalizedToolCall`] (ran, has its result). Hooks and events
//! see these; they carry data only.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transcript::ToolResultPart;

/// A tool call extracted from the model's message whose tool exists and whose arguments passed
/// validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreparedToolCall {
    /// Call id (from the model).
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Validated arguments.
    pub arguments: Value,
}

/// A call that was not run because it was blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BlockedCall {
    /// The call.
    pub call: PreparedToolCall,
    /// Why it was blocked.
    pub error: String,
    /// The extension that vetoed it through a `tool_call` hook; `None` for blocks that are not a
    /// veto (e.g. a hook that failed and so failed closed).
    pub blocked_by_extension: Option<String>,
}

impl BlockedCall {
    /// The text the model sees: `⛔ blocked by <name>: <reason>` for a veto, the error otherwise.
    pub fn render(&self) -> String {
        match &self.blocked_by_extension {
            Some(name) => format!("⛔ blocked by {name}: {}", self.error),
            None => self.error.clone(),
        }
    }
}

/// A call that failed while being prepared.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorCall {
    /// The call.
    pub call: PreparedToolCall,
    /// What went wrong.
    pub error: String,
}

/// A call after execution.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FinalizedToolCall {
    /// Call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// The arguments that were passed (after any rewrite).
    pub arguments: Value,
    /// Whether the execution failed.
    pub is_error: bool,
    /// The result sent to the model.
    pub result: ToolResultPart,
}
