//! The `execute_tool {tool}` span of one tool call: opened by the executor around each call and
//! closed with the call's outcome. The names it uses are in [`crate::telemetry::names`].

use tracing::Span;

use super::{ToolErrorKind, ToolOutcome};
use crate::telemetry::names::*;
use crate::telemetry::{record_error, telemetry_span};
use crate::transcript::{ToolArguments, ToolCallPart};

/// The `error.type` of a failed tool call.
pub(crate) fn tool_error_type(kind: ToolErrorKind) -> &'static str {
    match kind {
        ToolErrorKind::Failed => "tool_error",
        ToolErrorKind::MalformedArguments => "malformed_arguments",
        ToolErrorKind::InvalidArguments => "invalid_arguments",
        ToolErrorKind::ArgumentsMismatch => "arguments_mismatch",
        ToolErrorKind::UnknownTool => "unknown_tool",
        ToolErrorKind::Denied => "denied",
        ToolErrorKind::ApprovalFailed => "approval_failed",
        ToolErrorKind::Timeout => "timeout",
        ToolErrorKind::Panicked => "panicked",
        ToolErrorKind::Aborted => "aborted",
        #[allow(unreachable_patterns)]
        _ => "_OTHER",
    }
}

/// The `execute_tool {tool name}` span of one call (kind INTERNAL).
pub(crate) fn tool_span(call: &ToolCallPart, capture_content: bool) -> Span {
    let span = telemetry_span!("execute_tool", kind: "internal",
        fixed: {
            gen_ai.operation.name = OP_EXECUTE_TOOL,
            gen_ai.tool.name = call.tool_name.as_str(),
            gen_ai.tool.call.id = call.id.as_str(),
            gen_ai.tool.type = "function",
        },
        later: [gen_ai.tool.call.arguments, gen_ai.tool.call.result]);
    if span.is_disabled() {
        return span;
    }
    span.record("otel.name", format!("{OP_EXECUTE_TOOL} {}", call.tool_name));
    if capture_content {
        let arguments = match &call.arguments {
            ToolArguments::Json(v) => v.to_string(),
            ToolArguments::Unparsed(text) => text.clone(),
        };
        span.record(GEN_AI_TOOL_CALL_ARGUMENTS, arguments);
    }
    span
}

/// Records a tool call's outcome on its span: `error.type` for an error result (the executor's
/// error class; `tool_error` for an error a `tool_result` hook made up), the result on opt-in.
pub(crate) fn record_tool_outcome(span: &Span, outcome: &ToolOutcome, capture_content: bool) {
    if span.is_disabled() {
        return;
    }
    if outcome.result.is_error {
        let kind = outcome
            .error
            .as_ref()
            .map_or("tool_error", |e| tool_error_type(e.kind()));
        record_error(span, kind);
    }
    if capture_content {
        span.record(GEN_AI_TOOL_CALL_RESULT, outcome.result.content.as_str());
    }
}

/// A span for a call answered without running (blocked by a hook, not loaded, cut off): opened
/// and closed at once with its `error.type`.
pub(crate) fn answered_tool_call(call: &ToolCallPart, error_type: &str) {
    let span = tool_span(call, false);
    if !span.is_disabled() {
        record_error(&span, error_type);
    }
}
