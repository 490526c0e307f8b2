//! The model's plan in the CLI, and plan mode (`--mode plan`, `/plan` in chat): only the
//! read-only tools are offered (with `update_plan`), the shell runs in the `read-only` sandbox,
//! and the system prompt asks for a plan instead of changes. Every successful `update_plan` call is shown as a checklist
//! (human output) or sent as a `plan_update` line (`--json`), and `sessions show` ends with the
//! session's latest plan. The tool itself and its validation live in the library
//! (`agentloop::builtin::plan_tool`).

use agentloop::agent::AgentEvent;
use agentloop::builtin::{
    self, Plan, SandboxMode, ShellOptions, UPDATE_PLAN_TOOL, Workspace, WorkspaceDeps,
};
use agentloop::tooling::ToolSpec;
use agentloop::transcript::ToolArguments;
use serde_json::{Value, json};

use crate::ui::render::Style;
use crate::ui::safe_text::visible;

/// How a run works on the workspace (`--mode`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    /// Every tool, the shell in the `--sandbox` mode.
    #[default]
    Normal,
    /// Read-only tools and `update_plan`; the shell runs read-only; the run ends with a plan.
    Plan,
}

/// What plan mode adds to the system prompt.
pub const PLAN_MODE_PROMPT: &str = "You are in plan mode: do not change anything. Investigate \
with the read-only tools (the shell runs read-only), then set out your plan with update_plan and \
end with a short summary of it. The person will review the plan before any change is made.";

/// The built-in tools plan mode offers: the read-only ones, the shell in the `read-only`
/// sandbox, and the job tools — never `write_file` or `edit_file`.
pub fn plan_mode_tools(
    workspace: &Workspace,
    shell: &ShellOptions,
) -> Vec<ToolSpec<WorkspaceDeps>> {
    let read_only = shell.clone().sandbox(SandboxMode::ReadOnly);
    builtin::tools_with::<WorkspaceDeps>(workspace, &read_only)
        .into_iter()
        .filter(|spec| spec.name() == "shell" || !builtin::is_mutating(spec.name()))
        .collect()
}

/// The plan a finished `update_plan` call set, if `event` is one that succeeded.
pub fn updated(event: &AgentEvent) -> Option<Plan> {
    let AgentEvent::ToolExecutionEnd { call, result, .. } = event else {
        return None;
    };
    if call.tool_name != UPDATE_PLAN_TOOL || result.is_error {
        return None;
    }
    match &call.arguments {
        ToolArguments::Json(arguments) => Plan::parse(arguments).ok(),
        ToolArguments::Unparsed(_) => None,
    }
}

/// The `--json` line of a plan update (see `schema/events.schema.json`).
pub fn json_line(plan: &Plan) -> Value {
    json!({
        "type": "plan_update",
        "explanation": plan.explanation,
        "plan": plan.plan,
    })
}

/// The plan as the person sees it: a title, the explanation (if any), the checklist.
pub fn shown(style: Style, plan: &Plan) -> String {
    let mut text = format!("{}\n", style.bold("Plan"));
    if let Some(explanation) = plan.explanation.as_deref().filter(|e| !e.trim().is_empty()) {
        text.push_str(&format!("{}\n", style.dim(&visible(explanation.trim()))));
    }
    for line in plan.checklist().lines() {
        let line = visible(line);
        let line = if line.starts_with("[x]") {
            style.dim(&line)
        } else if line.starts_with("[>]") {
            style.bold(&line)
        } else {
            line.into_owned()
        };
        text.push_str(&format!("  {line}\n"));
    }
    text
}

/// Shows a plan update: a `plan_update` line with `--json`, else the checklist.
pub fn announce(event: &AgentEvent, json: bool) {
    let Some(plan) = updated(event) else {
        return;
    };
    if json {
        crate::ui::render::out(&format!("{}\n", json_line(&plan)));
    } else {
        let style = Style::new(crate::ui::render::stdout_color());
        crate::ui::render::out(&shown(style, &plan));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_json_line_has_the_documented_fields() {
        let plan = Plan::parse(&json!({"plan": [{"step": "a", "status": "in_progress"}]})).unwrap();
        assert_eq!(
            json_line(&plan),
            json!({"type": "plan_update", "explanation": null,
                   "plan": [{"step": "a", "status": "in_progress"}]})
        );
        assert_eq!(shown(Style::new(false), &plan), "Plan\n  [>] a\n");
    }
}
