//! `update_plan{explanation?, plan}`: the model keeps a short checklist of the steps of its
//! task, each `pending`, `in_progress` or `completed`, and replaces it whole with every call.
//!
//! The tool has no side effect: its arguments are the plan. This module validates them (at most
//! one step in progress, no empty step, a known status — each refusal a one-line error the model
//! can act on), renders a plan as a checklist ([`Plan::checklist`]), and finds the latest plan
//! in a transcript ([`Plan::latest`]), which is where a plan is stored: in the session, as the
//! `update_plan` call that set it.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::tooling::{SpecError, ToolContext, ToolDeps, ToolError, ToolSpec};
use crate::transcript::{Message, ToolArguments};

/// The tool's name.
pub const UPDATE_PLAN_TOOL: &str = "update_plan";

/// A step's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum StepStatus {
    /// Not started.
    Pending,
    /// Being worked on (at most one step at a time).
    InProgress,
    /// Done.
    Completed,
}

/// One step of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PlanStep {
    /// What the step does, in a few words.
    pub step: String,
    /// Its state.
    pub status: StepStatus,
}

/// A plan as `update_plan` sets it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Plan {
    /// Why the plan is what it is (or changed), if the model said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    /// The steps, in order.
    pub plan: Vec<PlanStep>,
}

/// Why `update_plan`'s arguments were refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The arguments do not have the tool's shape.
    #[error("invalid plan: {0}")]
    Shape(String),
    /// A step has no text.
    #[error("step {0} is empty; give every step a short description")]
    EmptyStep(usize),
    /// More than one step is `in_progress`.
    #[error(
        "{0} steps are in_progress; at most one step may be in_progress at a time (mark the \
         others pending or completed)"
    )]
    SeveralInProgress(usize),
}

impl PlanError {
    /// Whether more than one step was in progress.
    pub fn is_several_in_progress(&self) -> bool {
        matches!(self, PlanError::SeveralInProgress(_))
    }
}

impl Plan {
    /// Reads and validates `update_plan`'s arguments.
    ///
    /// ```
    /// use agentloop::builtin::Plan;
    /// use serde_json::json;
    ///
    /// let plan = Plan::parse(&json!({"plan": [
    ///     {"step": "Read the code", "status": "completed"},
    ///     {"step": "Fix the bug", "status": "in_progress"},
    /// ]})).unwrap();
    /// assert_eq!(plan.checklist(), "[x] Read the code\n[>] Fix the bug\n");
    /// assert!(Plan::parse(&json!({"plan": [{"step": "a", "status": "done"}]})).is_err());
    /// ```
    pub fn parse(arguments: &Value) -> Result<Plan, PlanError> {
        let plan: Plan = serde_json::from_value(arguments.clone())
            .map_err(|e| PlanError::Shape(shape_message(&e.to_string())))?;
        if let Some(at) = plan.plan.iter().position(|s| s.step.trim().is_empty()) {
            return Err(PlanError::EmptyStep(at + 1));
        }
        let busy = plan
            .plan
            .iter()
            .filter(|s| s.status == StepStatus::InProgress)
            .count();
        if busy > 1 {
            return Err(PlanError::SeveralInProgress(busy));
        }
        Ok(plan)
    }

    /// The plan as a checklist, one line per step: `[x]` completed, `[>]` in progress, `[ ]`
    /// pending.
    pub fn checklist(&self) -> String {
        self.plan
            .iter()
            .map(|s| {
                let mark = match s.status {
                    StepStatus::Completed => "[x]",
                    StepStatus::InProgress => "[>]",
                    StepStatus::Pending => "[ ]",
                };
                format!("{mark} {}\n", s.step.trim())
            })
            .collect()
    }

    /// The plan the last valid `update_plan` call in `messages` set, if any.
    pub fn latest(messages: &[Message]) -> Option<Plan> {
        messages.iter().rev().find_map(|m| {
            m.tool_calls()
                .filter(|c| c.tool_name == UPDATE_PLAN_TOOL)
                .filter_map(|c| match &c.arguments {
                    ToolArguments::Json(v) => Plan::parse(v).ok(),
                    ToolArguments::Unparsed(_) => None,
                })
                .last()
        })
    }
}

/// serde's message with the field names the model knows.
fn shape_message(text: &str) -> String {
    text.replace(
        "unknown variant",
        "unknown status (use pending, in_progress or completed):",
    )
}

const DESCRIPTION: &str = "Keep a short plan of your task: a checklist of steps, each \
pending, in_progress or completed, replaced whole with every call (send all steps). At most one \
step may be in_progress. Update it as you finish steps; the person sees it.";

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "explanation": {
                "type": "string",
                "description": "Why the plan is what it is, or what changed (optional)."
            },
            "plan": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "step": {"type": "string", "minLength": 1},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                    },
                    "required": ["step", "status"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["plan"],
        "additionalProperties": false
    })
}

/// The `update_plan` tool (read-only: it changes nothing but the plan the person sees).
pub fn plan_tool<D: ToolDeps>() -> Result<ToolSpec<D>, SpecError> {
    ToolSpec::builder(UPDATE_PLAN_TOOL, DESCRIPTION)
        .parameters(schema())
        .blocking_handler(move |_ctx: ToolContext<D>, args: Value| {
            let plan = Plan::parse(&args).map_err(|e| ToolError::new(e.to_string()))?;
            Ok::<_, ToolError>(format!("Plan updated:\n{}", plan.checklist()))
        })
        .build()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::transcript::{Part, StopReason, ToolCallPart};

    #[test]
    fn two_steps_in_progress_are_refused() {
        let err = Plan::parse(&json!({"plan": [
            {"step": "a", "status": "in_progress"},
            {"step": "b", "status": "in_progress"},
        ]}))
        .unwrap_err();
        assert!(err.is_several_in_progress());
        assert!(
            err.to_string()
                .contains("at most one step may be in_progress")
        );
    }

    #[test]
    fn bad_shapes_get_clear_errors() {
        let err = Plan::parse(&json!({"plan": [{"step": "a", "status": "done"}]})).unwrap_err();
        assert!(
            err.to_string()
                .contains("use pending, in_progress or completed"),
            "{err}"
        );
        let err = Plan::parse(&json!({"plan": [{"step": " ", "status": "pending"}]})).unwrap_err();
        assert_eq!(err, PlanError::EmptyStep(1));
        assert!(Plan::parse(&json!({"steps": []})).is_err());
    }

    #[test]
    fn the_latest_valid_plan_is_found() {
        let call = |id: &str, args: Value| {
            Message::assistant(
                vec![Part::ToolCall(ToolCallPart::new(
                    id,
                    UPDATE_PLAN_TOOL,
                    args,
                ))],
                StopReason::ToolUse,
            )
        };
        let messages = vec![
            call("1", json!({"plan": [{"step": "old", "status": "pending"}]})),
            call(
                "2",
                json!({"plan": [{"step": "new", "status": "completed"}], "explanation": "why"}),
            ),
            call("3", json!({"plan": "not a list"})),
        ];
        let plan = Plan::latest(&messages).unwrap();
        assert_eq!(plan.plan[0].step, "new");
        assert_eq!(plan.explanation.as_deref(), Some("why"));
        assert_eq!(Plan::latest(&[]), None);
    }
}
