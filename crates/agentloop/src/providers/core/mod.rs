//! The shared core every provider adapter is built on, public so that a crate outside this one
//! can add a provider without re-implementing retries, timeouts or SSE.
//!
//! A provider writes two things:
//! - a [`Protocol`]: the path it posts to, its authentication headers, and how a neutral
//!   [`ModelRequest`] becomes its JSON body ([`encode`](Protocol::encode));
//! - a [`StreamParser`]: how one response's server-sent events become neutral deltas and the
//!   assistant message, recorded through the shared [`MessageAssembler`].
//!
//! The core does the rest: [`Adapter`] is the [`Model`](crate::model::Model) for any protocol
//! (construction from a [`ProviderConfig`], the configuration check, the request's or the
//! configured API key, the model id); the transport posts the body over a pooled HTTP/1.1 or
//! HTTP/2 client, retries what is worth retrying with backoff that honours `Retry-After`,
//! enforces the idle timeout, the per-attempt deadline and the event-size cap, decodes SSE
//! ([`sse`](crate::providers::sse)), follows redirects only within the configured origin, maps
//! HTTP error bodies ([`error_message`], [`error_code`]) and always ends with exactly one
//! terminal event carrying the message so far. Helpers cover what several providers share:
//! in-stream error objects ([`stream_error`]), events that are not JSON ([`unreadable`]),
//! usage with cached input ([`usage_with_cached_input`]), floats on the wire ([`wire_f32`]),
//! bearer authentication ([`bearer`]), the cross-provider replay rules
//! ([`replay`](crate::providers::replay)) and streamed-argument snapshots
//! ([`PartialJson`](crate::json::partial_json::PartialJson), used by the assembler).
//!
//! # Writing a provider
//!
//! A toy protocol whose server streams `{"text": …}` events and ends with `{"done": true}`:
//!
//! ```
//! use agentloop::model::{MessageAssembler, ModelError, ModelEvent, ModelRequest};
//! use agentloop::providers::core::{
//!     Adapter, Protocol, StreamParser, WireBody, WireRequest, bearer, unreadable, wire_f32,
//! };
//! use agentloop::providers::sse::SseEvent;
//! use agentloop::providers::ProviderConfig;
//! use agentloop::model::ApiKey;
//! use agentloop::transcript::{StopReason, Role};
//! use serde_json::{Value, json};
//!
//! #[derive(Clone, Copy, Debug, Default)]
//! struct Echo;
//!
//! impl Protocol for Echo {
//!     type Parser = EchoParser;
//!     fn provider(&self) -> &'static str {
//!         "echo"
//!     }
//!     fn path(&self, _config: &ProviderConfig) -> String {
//!         "v1/echo".to_owned()
//!     }
//!     fn headers(&self, _config: &ProviderConfig, key: Option<&ApiKey>) -> Vec<(&'static str, String)> {
//!         key.map(bearer).into_iter().collect()
//!     }
//!     fn encode(&self, config: &ProviderConfig, request: &ModelRequest<'_>) -> WireRequest<EchoParser> {
//!         let model = request.model.clone().or_else(|| config.model.clone()).unwrap_or_default();
//!         let prompt: Vec<String> = request.messages.iter()
//!             .filter(|m| m.role == Role::User)
//!             .map(|m| m.text())
//!             .collect();
//!         let mut body = json!({"model": model, "prompt": prompt});
//!         if let Some(t) = request.temperature {
//!             body["temperature"] = json!(wire_f32(t));
//!         }
//!         WireRequest::new(WireBody::Json(body), EchoParser {
//!             message: MessageAssembler::for_provider("echo", model),
//!             done: false,
//!         })
//!     }
//! }
//!
//! #[derive(Clone, Debug)]
//! struct EchoParser {
//!     message: MessageAssembler,
//!     done: bool,
//! }
//!
//! impl StreamParser for EchoParser {
//!     fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
//!         let value: Value = serde_json::from_str(&event.data).map_err(|e| unreadable(&event.data, &e))?;
//!         if let Some(text) = value["text"].as_str() {
//!             self.message.text(text, out);
//!         }
//!         self.done = value["done"] == true;
//!         Ok(self.done)
//!     }
//!     fn message(&self) -> &MessageAssembler {
//!         &self.message
//!     }
//!     fn stop_reason(&self) -> Result<StopReason, ModelError> {
//!         Ok(StopReason::Stop)
//!     }
//! }
//!
//! // `Adapter<Echo>` is a `Model`: give it to an agent like any built-in provider.
//! let echo = Adapter::<Echo>::try_new(ProviderConfig::new("http://localhost:8080").model("e-1"))?;
//! let mut request = ModelRequest::new(vec![agentloop::transcript::Message::user("hi")]);
//! request.temperature = Some(0.2);
//! assert_eq!(
//!     echo.request_body(&request),
//!     json!({"model": "e-1", "prompt": ["hi"], "temperature": 0.2})
//! );
//! # Ok::<(), ModelError>(())
//! ```

mod adapter;
mod errors;
pub(crate) mod http;
pub(crate) mod transport;
mod usage;

use serde_json::Value;

pub use adapter::Adapter;
pub use errors::{error_code, error_message, stream_error, unreadable};
pub use http::proxy::{Proxy, ProxyRules};
pub use usage::usage_with_cached_input;

pub use super::sse::SseEvent;
use crate::model::{ApiKey, ModelError, ModelEvent, ModelRequest};
pub use crate::model::{MessageAssembler, ModelCapabilities, PartId};
use crate::providers::ProviderConfig;
use crate::transcript::{Message, StopReason};
pub use transport::RetryPolicy;

/// How one provider's API is spoken: everything about a request that differs between
/// providers. [`Adapter`] turns a protocol into a [`Model`](crate::model::Model).
///
/// A protocol is usually a unit struct (`Default` gives [`Adapter::new`]); one with settings of
/// its own goes through [`Adapter::with_protocol`].
pub trait Protocol: std::fmt::Debug + Send + Sync + 'static {
    /// The parser of one response.
    type Parser: StreamParser + Clone;

    /// The provider name recorded on messages (e.g. `"openai_chat"`). Replay rules compare it:
    /// what a provider needs back verbatim (signatures, item ids) is only sent to the same one.
    fn provider(&self) -> &'static str;

    /// The path under [`ProviderConfig::base_url`] that requests go to (e.g.
    /// `"chat/completions"`). Computed once, when the adapter is built.
    fn path(&self, config: &ProviderConfig) -> String;

    /// The headers of one request beyond the configured ones: its authentication with `key`
    /// (the request's own key, else the configured one; `None`: no key) and any protocol
    /// headers (a version). Names must be lowercase; values are marked sensitive. Default:
    /// [`bearer`] authentication with the key, the scheme of OpenAI and most compatible servers.
    fn headers(
        &self,
        _config: &ProviderConfig,
        key: Option<&ApiKey>,
    ) -> Vec<(&'static str, String)> {
        key.map(bearer).into_iter().collect()
    }

    /// The request on the wire for `request`, and a parser for its response (seen nothing
    /// yet: each attempt gets a clone). Built synchronously, so the stream owns everything it
    /// needs.
    fn encode(
        &self,
        config: &ProviderConfig,
        request: &ModelRequest<'_>,
    ) -> WireRequest<Self::Parser>;

    /// What the provider can do beyond the common request (default: nothing more).
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default()
    }
}

/// One encoded request ([`Protocol::encode`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct WireRequest<P> {
    /// The JSON body.
    pub body: WireBody,
    /// One more path segment after [`Protocol::path`] (Gemini names the model there), if any.
    pub segment: Option<String>,
    /// The parser of the response.
    pub parser: P,
}

impl<P> WireRequest<P> {
    /// A request with `body`, posted to the protocol's path, parsed by `parser`.
    pub fn new(body: WireBody, parser: P) -> Self {
        WireRequest {
            body,
            segment: None,
            parser,
        }
    }

    /// Appends `segment` to the path (percent-encoded where needed).
    pub fn segment(mut self, segment: impl Into<String>) -> Self {
        self.segment = Some(segment.into());
        self
    }
}

/// A request body: built as a JSON value, or already serialized (for a protocol that writes its
/// body straight from borrowed structs to skip building a value tree on every turn).
#[derive(Clone, Debug)]
pub enum WireBody {
    /// A JSON value.
    Json(Value),
    /// Serialized JSON.
    Bytes(Vec<u8>),
}

impl WireBody {
    /// The bytes that go on the wire.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        match self {
            // Serializing a `Value` cannot fail (its keys are strings).
            WireBody::Json(value) => serde_json::to_vec(&value).unwrap_or_default(),
            WireBody::Bytes(bytes) => bytes,
        }
    }

    /// The body as a JSON value (for snapshots and debugging).
    pub(crate) fn into_value(self) -> Value {
        match self {
            WireBody::Json(value) => value,
            WireBody::Bytes(bytes) => serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }
}

/// Turns one response's server-sent events into neutral deltas and the assistant message.
///
/// The parser records everything through its [`MessageAssembler`] (which also emits the
/// deltas), so the core can build the partial message of a failed or aborted stream at any
/// point; it only decides what each event means and how the response ended.
pub trait StreamParser: Send + 'static {
    /// Handles one event, pushing deltas to `out`. Returns `true` when it was the terminal
    /// event. An `Err` is a provider error reported inside the stream (retried by the
    /// transport when it is retryable and nothing was streamed yet).
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError>;

    /// What the response assembled so far.
    fn message(&self) -> &MessageAssembler;

    /// How the response ended, asked once the terminal event arrived (`Err` for a terminal
    /// failure such as Responses' `response.failed`).
    fn stop_reason(&self) -> Result<StopReason, ModelError>;

    /// Whether the end of the body, reached now, is the stream's terminal event. For wires
    /// without a terminal event of their own: Gemini ends the body after the chunk that carries
    /// `finishReason` (and may send a `finishReason` mid-stream, so that chunk cannot end the
    /// stream). The default, `false`, makes the end of the body an error ("the stream ended
    /// before its terminal event").
    fn complete_at_eof(&self) -> bool {
        false
    }

    /// The message so far, for an error terminal (stop reason `error`).
    fn partial(&self) -> Message {
        self.message().partial()
    }

    /// The assembled message, after the terminal event.
    fn finish(&mut self) -> Result<Message, ModelError> {
        let stop = self.stop_reason()?;
        Ok(self.message().finish(stop))
    }
}

/// An `f32` as it goes on the wire: through its shortest decimal form, so `0.2f32` is sent as
/// `0.2`, not as the `f64` widening `0.20000000298023224`. Every float a provider sends
/// (temperature, top-p) goes through here.
///
/// ```
/// use agentloop::providers::core::wire_f32;
/// assert_eq!(serde_json::json!(wire_f32(0.2)).to_string(), "0.2");
/// ```
pub fn wire_f32(value: f32) -> f64 {
    value.to_string().parse::<f64>().unwrap_or(f64::from(value))
}

/// `authorization: Bearer <key>`, the authentication of OpenAI and most compatible servers.
pub fn bearer(key: &ApiKey) -> (&'static str, String) {
    ("authorization", format!("Bearer {}", key.expose()))
}
