//! Observability: the OpenTelemetry GenAI span and attribute names (in one place) and the code
//! that builds the spans of a run — `invoke_agent {agent}` per run, `chat {model}` per model call
//! and `execute_tool {tool}` per tool call — plus the `gen_ai.client.*` metrics (feature `otel`)
//! and, in [`otlp`] (feature `otel`), the helper that exports them over OTLP.
//!
//! Spans are plain [`tracing`] spans at `INFO` level with target `agentloop::telemetry`: with no
//! subscriber they cost a disabled-callsite check, and any `tracing` subscriber sees them. The
//! `tracing-opentelemetry` layer turns them into OpenTelemetry spans, taking the span name from
//! the `otel.name` field and the kind from `otel.kind`.
//!
//! Names and attributes follow the OpenTelemetry GenAI semantic conventions as published in the
//! `open-telemetry/semantic-conventions-genai` repository ([`SEMCONV_GENAI`]; status
//! *Development*). The `gen_ai.*` constants of `opentelemetry-semantic-conventions` are deprecated
//! there, so the names are defined here. Two deliberate simplifications: the finish reason is
//! recorded as a single string (a message has exactly one, and `tracing` fields cannot be
//! arrays), and the message-content attributes are JSON strings — both as the conventions allow
//! for attribute backends without array/structured values. Message contents (prompts, answers,
//! tool arguments and results) are only recorded when [`TelemetryConfig::capture_content`] is on.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tracing::Span;
use tracing::field::Empty;

use crate::model::{ModelError, ModelRequest};
use crate::tooling::{ToolErrorKind, ToolOutcome};
use crate::transcript::{Message, Part, Role, StopReason, ToolArguments, ToolCallPart, Usage};

/// The GenAI semantic conventions these names follow: the `docs/gen-ai` pages of
/// `open-telemetry/semantic-conventions-genai` (read at commit `002c8a6e`).
pub const SEMCONV_GENAI: &str = "open-telemetry/semantic-conventions-genai@002c8a6e";

/// Attribute, span and metric names (GenAI conventions, plus two `agentloop.*` extras).
pub mod names {
    /// `gen_ai.operation.name`: `invoke_agent`, `chat` or `execute_tool`.
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// `gen_ai.provider.name`: `openai`, `anthropic`, `gcp.gemini`, ….
    pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// `gen_ai.agent.name`.
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    /// `gen_ai.conversation.id`: the session id.
    pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// `gen_ai.request.model`.
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    /// `gen_ai.request.temperature`.
    pub const GEN_AI_REQUEST_TEMPERATURE: &str = "gen_ai.request.temperature";
    /// `gen_ai.request.max_tokens`.
    pub const GEN_AI_REQUEST_MAX_TOKENS: &str = "gen_ai.request.max_tokens";
    /// `gen_ai.response.model`.
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// `gen_ai.response.id`.
    pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
    /// `gen_ai.response.finish_reasons`.
    pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// `gen_ai.usage.input_tokens` (cached prompt tokens included).
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// `gen_ai.usage.output_tokens`.
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// `gen_ai.usage.cache_read.input_tokens`.
    pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
    /// `gen_ai.usage.cache_creation.input_tokens`.
    pub const GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: &str =
        "gen_ai.usage.cache_creation.input_tokens";
    /// `gen_ai.tool.name`.
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// `gen_ai.tool.call.id`.
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// `gen_ai.tool.type`: `function` for registered tools.
    pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
    /// `gen_ai.tool.call.arguments` (opt-in content).
    pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    /// `gen_ai.tool.call.result` (opt-in content).
    pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    /// `gen_ai.system_instructions` (opt-in content).
    pub const GEN_AI_SYSTEM_INSTRUCTIONS: &str = "gen_ai.system_instructions";
    /// `gen_ai.input.messages` (opt-in content).
    pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
    /// `gen_ai.output.messages` (opt-in content).
    pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
    /// `gen_ai.token.type` (metric attribute): `input` or `output`.
    pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
    /// `server.address`.
    pub const SERVER_ADDRESS: &str = "server.address";
    /// `server.port`.
    pub const SERVER_PORT: &str = "server.port";
    /// `error.type`: the class of a failure.
    pub const ERROR_TYPE: &str = "error.type";
    /// `agentloop.model.retries`: how many times the provider retried the model call.
    pub const AGENTLOOP_MODEL_RETRIES: &str = "agentloop.model.retries";
    /// `agentloop.usage.cost_usd`: the cost of the call or run in US dollars, when known.
    pub const AGENTLOOP_USAGE_COST_USD: &str = "agentloop.usage.cost_usd";
    /// Metric `gen_ai.client.token.usage` (histogram, `{token}`).
    pub const METRIC_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// Metric `gen_ai.client.operation.duration` (histogram, seconds).
    pub const METRIC_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// Operation `invoke_agent`.
    pub const OP_INVOKE_AGENT: &str = "invoke_agent";
    /// Operation `chat`.
    pub const OP_CHAT: &str = "chat";
    /// Operation `execute_tool`.
    pub const OP_EXECUTE_TOOL: &str = "execute_tool";
}

use names::*;

/// What the spans of a run carry beyond the defaults. `Default`: no agent name, no conversation
/// id, no message contents.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TelemetryConfig {
    /// `gen_ai.agent.name`, also the `invoke_agent {name}` span name.
    pub agent_name: Option<String>,
    /// `gen_ai.conversation.id` (e.g. the session id).
    pub conversation_id: Option<String>,
    /// Record message contents (system instructions, input and output messages, tool arguments
    /// and results). Off by default: they contain user data.
    pub capture_content: bool,
}

/// The `gen_ai.provider.name` for one of our provider names.
pub fn provider_name(provider: &str) -> &str {
    match provider {
        "openai_chat" | "openai_responses" => "openai",
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// The `error.type` of a failed model call.
pub fn model_error_type(error: &ModelError) -> String {
    error.error_type()
}

/// The `error.type` of a failed tool call.
pub fn tool_error_type(kind: ToolErrorKind) -> &'static str {
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

/// The GenAI finish reason of a stop reason.
pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Refusal => "content_filter",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
        #[allow(unreachable_patterns)]
        _ => "error",
    }
}

/// A count as an OpenTelemetry integer attribute (the `tracing` bridge exports `u64` values as
/// strings).
fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Prompt tokens as the conventions count them: cached ones included.
fn input_tokens(usage: &Usage) -> u64 {
    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
}

fn record_usage(span: &Span, usage: &Usage) {
    span.record(GEN_AI_USAGE_INPUT_TOKENS, int(input_tokens(usage)));
    span.record(GEN_AI_USAGE_OUTPUT_TOKENS, int(usage.output_tokens));
    if usage.cache_read_tokens > 0 {
        span.record(
            GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
            int(usage.cache_read_tokens),
        );
    }
    if usage.cache_write_tokens > 0 {
        span.record(
            GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS,
            int(usage.cache_write_tokens),
        );
    }
    if let Some(cost) = usage.cost_usd {
        span.record(AGENTLOOP_USAGE_COST_USD, cost);
    }
}

fn record_error(span: &Span, error_type: &str) {
    span.record(ERROR_TYPE, error_type);
    span.record("otel.status_code", "error");
}

/// The `invoke_agent {agent name}` span of one run (kind INTERNAL).
pub fn agent_span(config: &TelemetryConfig, provider: &str, model: Option<&str>) -> Span {
    let span = tracing::info_span!(
        target: "agentloop::telemetry",
        "invoke_agent",
        otel.name = Empty,
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = OP_INVOKE_AGENT,
        gen_ai.provider.name = Empty,
        gen_ai.agent.name = Empty,
        gen_ai.conversation.id = Empty,
        gen_ai.request.model = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        agentloop.usage.cost_usd = Empty,
        "error.type" = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    match &config.agent_name {
        Some(name) => {
            span.record("otel.name", format!("{OP_INVOKE_AGENT} {name}"));
            span.record(GEN_AI_AGENT_NAME, name.as_str());
        }
        None => {
            span.record("otel.name", OP_INVOKE_AGENT);
        }
    }
    span.record(GEN_AI_PROVIDER_NAME, provider_name(provider));
    if let Some(id) = &config.conversation_id {
        span.record(GEN_AI_CONVERSATION_ID, id.as_str());
    }
    if let Some(model) = model {
        span.record(GEN_AI_REQUEST_MODEL, model);
    }
    span
}

/// Records the end of a run on its `invoke_agent` span: the summed usage, and `error.type` when
/// it did not end normally (`None` for a normal end).
pub fn record_run_end(span: &Span, usage: &Usage, error_type: Option<&str>) {
    if span.is_disabled() {
        return;
    }
    record_usage(span, usage);
    if let Some(error_type) = error_type {
        record_error(span, error_type);
    }
}

/// One model call being observed: its `chat {model}` span (kind CLIENT), its start time for the
/// duration metric and what the metrics need to label it.
#[derive(Debug)]
pub struct ChatCall {
    span: Span,
    provider: String,
    model: Option<String>,
    server: Option<(String, u16)>,
    capture: bool,
    started: std::time::Instant,
}

impl ChatCall {
    /// Opens the span for `request` to `provider`; `base_url` gives `server.address`/`port`.
    pub fn start(
        request: &ModelRequest<'_>,
        provider: &str,
        base_url: Option<&str>,
        config: &TelemetryConfig,
    ) -> ChatCall {
        let span = tracing::info_span!(
            target: "agentloop::telemetry",
            "chat",
            otel.name = Empty,
            otel.kind = "client",
            otel.status_code = Empty,
            gen_ai.operation.name = OP_CHAT,
            gen_ai.provider.name = Empty,
            gen_ai.request.model = Empty,
            gen_ai.request.temperature = Empty,
            gen_ai.request.max_tokens = Empty,
            gen_ai.response.model = Empty,
            gen_ai.response.id = Empty,
            gen_ai.response.finish_reasons = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            agentloop.usage.cost_usd = Empty,
            agentloop.model.retries = Empty,
            server.address = Empty,
            server.port = Empty,
            "error.type" = Empty,
            gen_ai.system_instructions = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
        );
        let server = base_url.and_then(server_of);
        let call = ChatCall {
            provider: provider_name(provider).to_owned(),
            model: request.model.clone(),
            server,
            capture: config.capture_content,
            started: std::time::Instant::now(),
            span,
        };
        if call.span.is_disabled() {
            return call;
        }
        let span = &call.span;
        let model = request.model.as_deref().unwrap_or_default();
        span.record(
            "otel.name",
            if model.is_empty() {
                OP_CHAT.to_owned()
            } else {
                format!("{OP_CHAT} {model}")
            },
        );
        span.record(GEN_AI_PROVIDER_NAME, call.provider.as_str());
        if !model.is_empty() {
            span.record(GEN_AI_REQUEST_MODEL, model);
        }
        if let Some(t) = request.temperature {
            span.record(GEN_AI_REQUEST_TEMPERATURE, f64::from(t));
        }
        if let Some(n) = request.max_output_tokens {
            span.record(GEN_AI_REQUEST_MAX_TOKENS, i64::from(n));
        }
        if let Some((host, port)) = &call.server {
            span.record(SERVER_ADDRESS, host.as_str());
            span.record(SERVER_PORT, i64::from(*port));
        }
        if call.capture {
            if let Some(system) = &request.system_prompt {
                let parts = json!([{"type": "text", "content": system}]);
                span.record(GEN_AI_SYSTEM_INSTRUCTIONS, parts.to_string());
            }
            let messages: Vec<Value> = request.messages.iter().map(content_message).collect();
            span.record(GEN_AI_INPUT_MESSAGES, Value::Array(messages).to_string());
        }
        call
    }

    /// The span (to instrument the call's future with).
    pub fn span(&self) -> &Span {
        &self.span
    }

    /// Records the answered call: response model and id, finish reason, usage.
    pub fn finish(self, message: &Message) {
        self.record_message(message);
        self.metrics(message.usage.as_ref(), message.model.as_deref(), None);
    }

    /// Records the failed call: what was received, plus `error.type` and an error status.
    pub fn fail(self, message: &Message, error: &ModelError) {
        self.record_message(message);
        let error_type = model_error_type(error);
        if !self.span.is_disabled() {
            record_error(&self.span, &error_type);
        }
        self.metrics(
            message.usage.as_ref(),
            message.model.as_deref(),
            Some(&error_type),
        );
    }

    fn record_message(&self, message: &Message) {
        let span = &self.span;
        if span.is_disabled() {
            return;
        }
        if let Some(model) = &message.model {
            span.record(GEN_AI_RESPONSE_MODEL, model.as_str());
        }
        if let Some(id) = &message.response_id {
            span.record(GEN_AI_RESPONSE_ID, id.as_str());
        }
        if let Some(stop) = message.stop_reason {
            span.record(GEN_AI_RESPONSE_FINISH_REASONS, finish_reason(stop));
        }
        if let Some(usage) = &message.usage {
            record_usage(span, usage);
        }
        if self.capture {
            let mut out = content_message(message);
            if let Some(stop) = message.stop_reason {
                out["finish_reason"] = json!(finish_reason(stop));
            }
            span.record(GEN_AI_OUTPUT_MESSAGES, json!([out]).to_string());
        }
    }

    #[cfg(feature = "otel")]
    fn metrics(&self, usage: Option<&Usage>, response_model: Option<&str>, error: Option<&str>) {
        metrics::record_chat(
            &self.provider,
            self.model.as_deref(),
            response_model,
            self.server.as_ref(),
            usage,
            self.started.elapsed(),
            error,
        );
    }

    #[cfg(not(feature = "otel"))]
    fn metrics(&self, usage: Option<&Usage>, response_model: Option<&str>, error: Option<&str>) {
        let _ = (
            usage,
            response_model,
            error,
            &self.provider,
            &self.model,
            self.started,
        );
    }
}

/// `(host, port)` of a base URL (the scheme's default port when none is given).
fn server_of(base_url: &str) -> Option<(String, u16)> {
    let url = url::Url::parse(base_url).ok()?;
    let host = url.host_str()?.to_owned();
    let port = url.port_or_known_default()?;
    Some((host, port))
}

/// Records a retry of the model call in progress on the current (`chat`) span: the span's
/// `agentloop.model.retries` ends up as the number of retries.
pub fn record_retry(attempt: u32) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record(AGENTLOOP_MODEL_RETRIES, i64::from(attempt));
    }
}

/// The `execute_tool {tool name}` span of one call (kind INTERNAL).
pub fn tool_span(call: &ToolCallPart, capture_content: bool) -> Span {
    let span = tracing::info_span!(
        target: "agentloop::telemetry",
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = OP_EXECUTE_TOOL,
        gen_ai.tool.name = call.tool_name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        "error.type" = Empty,
    );
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
pub fn record_tool_outcome(span: &Span, outcome: &ToolOutcome, capture_content: bool) {
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
pub fn answered_tool_call(call: &ToolCallPart, error_type: &str) {
    let span = tool_span(call, false);
    if !span.is_disabled() {
        record_error(&span, error_type);
    }
}

/// One message in the conventions' message shape (`{role, parts: [...]}`).
fn content_message(message: &Message) -> Value {
    let role = match message.role {
        Role::User | Role::Custom => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool",
        #[allow(unreachable_patterns)]
        _ => "user",
    };
    let parts: Vec<Value> = message
        .content
        .iter()
        .map(|part| match part {
            Part::Text { text, .. } => json!({"type": "text", "content": text}),
            Part::Thinking(t) => json!({"type": "reasoning", "content": t.thinking}),
            Part::Image(image) => {
                json!({"type": "blob", "mime_type": image.media_type, "modality": "image"})
            }
            Part::ToolCall(call) => json!({
                "type": "tool_call",
                "id": call.id,
                "name": call.tool_name,
                "arguments": match &call.arguments {
                    ToolArguments::Json(v) => v.clone(),
                    ToolArguments::Unparsed(t) => Value::String(t.clone()),
                },
            }),
            Part::ToolResult(result) => json!({
                "type": "tool_call_response",
                "id": result.call_id,
                "response": result.content,
            }),
            #[allow(unreachable_patterns)]
            _ => json!({"type": "unknown"}),
        })
        .collect();
    json!({"role": role, "parts": parts})
}

/// The `gen_ai.client.*` histograms, recorded through the global OpenTelemetry meter provider
/// (a no-op until one is installed, e.g. by `otlp::install_from_env`).
#[cfg(feature = "otel")]
mod metrics {
    use std::time::Duration;

    use opentelemetry::KeyValue;

    use super::names::*;
    use crate::transcript::Usage;

    /// Bucket boundaries the conventions recommend for `gen_ai.client.token.usage`.
    const TOKEN_BUCKETS: [f64; 14] = [
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0,
        4194304.0, 16777216.0, 67108864.0,
    ];
    /// Bucket boundaries the conventions recommend for `gen_ai.client.operation.duration`.
    const DURATION_BUCKETS: [f64; 14] = [
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
    ];

    pub(super) fn record_chat(
        provider: &str,
        model: Option<&str>,
        response_model: Option<&str>,
        server: Option<&(String, u16)>,
        usage: Option<&Usage>,
        duration: Duration,
        error: Option<&str>,
    ) {
        let meter = opentelemetry::global::meter("agentloop");
        let mut attributes = vec![
            KeyValue::new(GEN_AI_OPERATION_NAME, OP_CHAT),
            KeyValue::new(GEN_AI_PROVIDER_NAME, provider.to_owned()),
        ];
        if let Some(model) = model {
            attributes.push(KeyValue::new(GEN_AI_REQUEST_MODEL, model.to_owned()));
        }
        if let Some(model) = response_model {
            attributes.push(KeyValue::new(GEN_AI_RESPONSE_MODEL, model.to_owned()));
        }
        if let Some((host, port)) = server {
            attributes.push(KeyValue::new(SERVER_ADDRESS, host.clone()));
            attributes.push(KeyValue::new(SERVER_PORT, i64::from(*port)));
        }
        let mut timed = attributes.clone();
        if let Some(error) = error {
            timed.push(KeyValue::new(ERROR_TYPE, error.to_owned()));
        }
        meter
            .f64_histogram(METRIC_OPERATION_DURATION)
            .with_unit("s")
            .with_description("GenAI operation duration")
            .with_boundaries(DURATION_BUCKETS.to_vec())
            .build()
            .record(duration.as_secs_f64(), &timed);
        let Some(usage) = usage else {
            return;
        };
        let tokens = meter
            .u64_histogram(METRIC_TOKEN_USAGE)
            .with_unit("{token}")
            .with_description("Number of input and output tokens used")
            .with_boundaries(TOKEN_BUCKETS.to_vec())
            .build();
        for (kind, n) in [
            ("input", super::input_tokens(usage)),
            ("output", usage.output_tokens),
        ] {
            let mut labels = attributes.clone();
            labels.push(KeyValue::new(GEN_AI_TOKEN_TYPE, kind));
            tokens.record(n, &labels);
        }
    }
}

#[cfg(feature = "otel")]
pub mod otlp;
