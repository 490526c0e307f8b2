//! The `chat {model}` span of one model call and its metrics: what the telemetry records about
//! a [`ModelRequest`] and its reply or [`ModelError`]. The names it uses are in
//! [`crate::telemetry::names`]; the loop opens one [`ChatCall`] per model call.

use serde_json::{Value, json};
use tracing::Span;

use super::{ModelError, ModelRequest};
#[cfg(feature = "otel")]
use crate::telemetry::metrics;
use crate::telemetry::names::*;
use crate::telemetry::{
    TelemetryConfig, content_message, finish_reason, provider_name, record_error, record_usage,
    telemetry_span,
};
use crate::transcript::{Message, Usage};

/// The `error.type` of a failed model call.
pub(crate) fn model_error_type(error: &ModelError) -> String {
    error.error_type()
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
        let span = telemetry_span!("chat", kind: "client",
        fixed: { gen_ai.operation.name = OP_CHAT },
        later: [
            gen_ai.provider.name, gen_ai.request.model, gen_ai.request.temperature,
            gen_ai.request.max_tokens, gen_ai.response.model, gen_ai.response.id,
            gen_ai.response.finish_reasons,
            gen_ai.usage.input_tokens, gen_ai.usage.output_tokens,
            gen_ai.usage.cache_read.input_tokens, gen_ai.usage.cache_creation.input_tokens,
            agentloop.usage.cost_usd, agentloop.model.retries, server.address, server.port,
            gen_ai.system_instructions, gen_ai.input.messages, gen_ai.output.messages,
        ]);
        let server = base_url.and_then(server_cached);
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

/// [`server_of`] for the last base URL seen on this thread: an agent asks the same provider
/// again and again, and parsing its URL for every call was a measurable part of a short run.
fn server_cached(base_url: &str) -> Option<(String, u16)> {
    type Last = Option<(Box<str>, Option<(String, u16)>)>;
    thread_local! {
        static LAST: std::cell::RefCell<Last> = const { std::cell::RefCell::new(None) };
    }
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if let Some((url, server)) = last.as_ref()
            && **url == *base_url
        {
            return server.clone();
        }
        let server = server_of(base_url);
        *last = Some((base_url.into(), server.clone()));
        server
    })
}

/// `(host, port)` of a base URL (the scheme's default port when none is given).
fn server_of(base_url: &str) -> Option<(String, u16)> {
    let url = url::Url::parse(base_url).ok()?;
    let host = url.host_str()?.to_owned();
    let port = url.port_or_known_default()?;
    Some((host, port))
}
