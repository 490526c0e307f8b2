//! The life of a tool call inside the loop (docs/ARCHITECTURE.md, "The loop"): [`PreparedToolCall`] (found and validated,
//! about to be checked by hooks), [`BlockedCall`] (vetoed or invalid: never ran), [`ErrorCall`]
//! (failed during preparation) and [`FinalizedToolCall`] (ran, has its result). Hooks and events
//! see these; they carry data only.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::transcript::ToolResultPart;

/// A tool call extracted from the model's message whose tool exists and whose arguments passed
/// validation. Its fields are named like [`ToolCallPart`](crate::transcript::ToolCallPart)'s.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreparedToolCall {
    /// Call id (from the model).
    pub id: String,
    /// Tool name (the JSON form also accepts the older key `name`).
    #[serde(alias = "name")]
    pub tool_name: String,
    /// Validated arguments.
    pub arguments: Value,
}

impl PreparedToolCall {
    /// The tool name; renamed to the field [`tool_name`](Self::tool_name), as in
    /// [`ToolCallPart`](crate::transcript::ToolCallPart).
    #[deprecated(note = "use the `tool_name` field, named as in `ToolCallPart`")]
    pub fn name(&self) -> &str {
        &self.tool_name
    }

    /// The arguments deserialized into `T` — the tool's argument type, for a hook or an
    /// approval policy that wants typed access instead of raw JSON. The arguments passed the
    /// tool's schema already; `Err` means `T` is not the type the tool binds them to.
    ///
    /// ```
    /// use agentloop::agent::PreparedToolCall;
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// struct Refund { order: String, cents: u64 }
    ///
    /// let call = PreparedToolCall {
    ///     id: "c1".into(),
    ///     tool_name: "refund".into(),
    ///     arguments: serde_json::json!({"order": "A-1", "cents": 1250}),
    /// };
    /// let refund: Refund = call.arguments_as().unwrap();
    /// assert_eq!((refund.order.as_str(), refund.cents), ("A-1", 1250));
    /// ```
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        T::deserialize(&self.arguments)
    }
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
    /// Tool name (the JSON form also accepts the older key `name`).
    #[serde(alias = "name")]
    pub tool_name: String,
    /// The arguments that were passed (after any rewrite).
    pub arguments: Value,
    /// Whether the execution failed.
    pub is_error: bool,
    /// The result sent to the model.
    pub result: ToolResultPart,
}

impl FinalizedToolCall {
    /// The tool name; renamed to the field [`tool_name`](Self::tool_name).
    #[deprecated(note = "use the `tool_name` field, named as in `ToolCallPart`")]
    pub fn name(&self) -> &str {
        &self.tool_name
    }
}
