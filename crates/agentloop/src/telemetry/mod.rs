//! Observability: the OpenTelemetry GenAI span and attribute names (in one place) and the code
//! that builds the spans of a run — `invoke_agent {agent}` per run, `chat {model}` per model call
//! and `execute_tool {tool}` per tool call — plus the `gen_ai.client.*` metrics (feature `otel`)
//! and, in the `otlp` module (feature `otel`), the helper that exports them over OTLP.
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

use crate::transcript::{Message, Part, Role, StopReason, ToolArguments, Usage};

/// The GenAI semantic conventions these names follow: the `docs/gen-ai` pages of
/// `open-telemetry/semantic-conventions-genai` (read at commit `002c8a6e`).
pub const SEMCONV_GENAI: &str = "open-telemetry/semantic-conventions-genai@002c8a6e";

mod span;
pub(crate) use span::telemetry_span;

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
pub(crate) fn int(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Prompt tokens as the conventions count them: cached ones included.
pub(crate) fn input_tokens(usage: &Usage) -> u64 {
    usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
}

pub(crate) fn record_usage(span: &Span, usage: &Usage) {
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

pub(crate) fn record_error(span: &Span, error_type: &str) {
    span.record(ERROR_TYPE, error_type);
    span.record("otel.status_code", "error");
}

/// The `invoke_agent {agent name}` span of one run (kind INTERNAL).
pub fn agent_span(config: &TelemetryConfig, provider: &str, model: Option<&str>) -> Span {
    let span = telemetry_span!("invoke_agent", kind: "internal",
    fixed: { gen_ai.operation.name = OP_INVOKE_AGENT },
    later: [
        gen_ai.provider.name, gen_ai.agent.name, gen_ai.conversation.id, gen_ai.request.model,
        gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
        gen_ai.usage.cache_read.input_tokens, gen_ai.usage.cache_creation.input_tokens,
        agentloop.usage.cost_usd,
    ]);
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

/// Records a retry of the model call in progress on the current (`chat`) span: the span's
/// `agentloop.model.retries` ends up as the number of retries.
pub fn record_retry(attempt: u32) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record(AGENTLOOP_MODEL_RETRIES, i64::from(attempt));
    }
}

/// One message in the conventions' message shape (`{role, parts: [...]}`).
pub(crate) fn content_message(message: &Message) -> Value {
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
pub(crate) mod metrics {
    use std::sync::{Arc, Mutex, Weak};
    use std::time::Duration;

    use opentelemetry::KeyValue;
    use opentelemetry::metrics::{Histogram, MeterProvider};

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

    pub(crate) fn record_chat(
        provider: &str,
        model: Option<&str>,
        response_model: Option<&str>,
        server: Option<&(String, u16)>,
        usage: Option<&Usage>,
        duration: Duration,
        error: Option<&str>,
    ) {
        let instruments = instruments();
        // Room for every attribute below, the per-measurement one included.
        let mut attributes = Vec::with_capacity(7);
        attributes.push(KeyValue::new(GEN_AI_OPERATION_NAME, OP_CHAT));
        attributes.push(KeyValue::new(GEN_AI_PROVIDER_NAME, provider.to_owned()));
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
        // Each measurement's own attribute goes on the end of the shared list and comes off
        // again after it is recorded: no copy of the list per measurement.
        if let Some(error) = error {
            attributes.push(KeyValue::new(ERROR_TYPE, error.to_owned()));
        }
        let seconds = duration.as_secs_f64();
        instruments.duration.record(seconds, &attributes);
        if error.is_some() {
            attributes.pop();
        }
        let Some(usage) = usage else {
            return;
        };
        for (kind, n) in [
            ("input", super::input_tokens(usage)),
            ("output", usage.output_tokens),
        ] {
            attributes.push(KeyValue::new(GEN_AI_TOKEN_TYPE, kind));
            instruments.tokens.record(n, &attributes);
            attributes.pop();
        }
    }

    /// The two histograms, made from one meter provider.
    struct Instruments {
        /// The provider they were made from (weak: a provider replaced by another is not kept
        /// alive here, and its allocation cannot be reused by the next one while this lives).
        provider: Weak<dyn MeterProvider + Send + Sync>,
        duration: Histogram<f64>,
        tokens: Histogram<u64>,
    }

    /// The histograms of the last global provider seen. Making them is most of what a model
    /// call's metrics cost (with no provider installed, nearly all of it), so they are made
    /// once per provider, and again when another one is installed.
    static INSTRUMENTS: Mutex<Option<Arc<Instruments>>> = Mutex::new(None);

    /// The histograms of the global meter provider installed now.
    fn instruments() -> Arc<Instruments> {
        let provider = opentelemetry::global::meter_provider();
        let mut cached = INSTRUMENTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(instruments) = cached
            .as_ref()
            .filter(|i| Weak::ptr_eq(&i.provider, &Arc::downgrade(&provider)))
        {
            return Arc::clone(instruments);
        }
        let meter = provider.meter("agentloop");
        let instruments = Arc::new(Instruments {
            provider: Arc::downgrade(&provider),
            duration: meter
                .f64_histogram(METRIC_OPERATION_DURATION)
                .with_unit("s")
                .with_description("GenAI operation duration")
                .with_boundaries(DURATION_BUCKETS.to_vec())
                .build(),
            tokens: meter
                .u64_histogram(METRIC_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
        });
        *cached = Some(Arc::clone(&instruments));
        instruments
    }
}

#[cfg(feature = "otel")]
pub mod otlp;
