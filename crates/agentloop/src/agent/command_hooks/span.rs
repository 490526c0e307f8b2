//! The `hook {event}` span of one hook run (kind INTERNAL), so a trace shows where a run waited
//! for a hook and what the hook decided: `agentloop.hook.event`, `agentloop.hook.command`, the
//! tool for tool events, then `agentloop.hook.exit_code` and `agentloop.hook.outcome`
//! (`continue`, `block` or `error`; an error also sets `error.type` = `hook_error`).

use tracing::Span;

use super::{CommandHook, HookReport};
use crate::telemetry::{record_error, telemetry_span};

/// Opens the span of `hook`'s run (for `tool`, on tool events).
pub(super) fn hook_span(hook: &CommandHook, tool: Option<&str>) -> Span {
    let span = telemetry_span!("hook", kind: "internal",
        fixed: {
            agentloop.hook.event = hook.event.as_str(),
            agentloop.hook.command = hook.command.as_str(),
        },
        later: [gen_ai.tool.name, agentloop.hook.exit_code, agentloop.hook.outcome]);
    if span.is_disabled() {
        return span;
    }
    span.record("otel.name", format!("hook {}", hook.event.as_str()));
    if let Some(tool) = tool {
        span.record("gen_ai.tool.name", tool);
    }
    span
}

/// Records what the run did on its span.
pub(super) fn record_report(span: &Span, report: &HookReport) {
    if span.is_disabled() {
        return;
    }
    span.record("agentloop.hook.outcome", report.outcome);
    if let Some(code) = report.exit_code {
        span.record("agentloop.hook.exit_code", i64::from(code));
    }
    if report.outcome == "error" {
        record_error(span, "hook_error");
    }
}
