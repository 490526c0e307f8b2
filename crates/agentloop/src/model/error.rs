//! [`ModelError`]: why a model call failed, structured so that retries, fallbacks and
//! compaction decide on its variants and predicates ([`is_retryable`](ModelError::is_retryable),
//! [`is_rate_limited`](ModelError::is_rate_limited), [`is_auth`](ModelError::is_auth),
//! [`is_context_overflow`](ModelError::is_context_overflow), [`status`](ModelError::status),
//! [`retry_after`](ModelError::retry_after)) — never on its text.

use std::sync::Arc;
use std::time::Duration;

/// Why a model call failed. Messages never contain credentials.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The request could not be sent or the response not received (connection refused, DNS,
    /// TLS, no response in time…).
    #[error("could not reach the model provider: {message}")]
    Connection {
        /// What failed, with the causes' text.
        message: String,
        /// The underlying error (from the HTTP client), when there is one.
        #[source]
        source: Option<ErrorSource>,
    },
    /// The provider answered with an HTTP error status.
    #[error("the model provider answered HTTP {status}: {message}")]
    Status {
        /// HTTP status code.
        status: u16,
        /// The provider's error message.
        message: String,
        /// The provider's error type or code from the body (`rate_limit_error`,
        /// `context_length_exceeded`…), when it sent one.
        code: Option<String>,
        /// How long the provider asked to wait (`Retry-After`, `retry-after-ms`), if it said.
        retry_after: Option<Duration>,
    },
    /// The provider reported an error inside the stream.
    #[error("the model provider reported an error ({code}): {message}")]
    Provider {
        /// Provider error code or type.
        code: String,
        /// Provider message.
        message: String,
    },
    /// The stream broke: it stalled, ran past its deadline, was cut, or sent something
    /// unreadable or too large.
    #[error("the model stream failed: {message}")]
    Stream {
        /// What kind of failure.
        kind: StreamErrorKind,
        /// What happened.
        message: String,
    },
    /// The request was not valid for this model (missing key, unsupported input…).
    #[error("invalid model request: {0}")]
    InvalidRequest(String),
    /// A scripted model ran out of turns or was told to fail.
    #[error("scripted model: {0}")]
    Script(String),
}

/// How a stream failed (see [`ModelError::Stream`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum StreamErrorKind {
    /// No data (keep-alives aside) for longer than the idle timeout.
    Stalled,
    /// The attempt ran past its total deadline (`request_timeout`).
    Deadline,
    /// The body ended before the terminal event, or in the middle of an event.
    Cut,
    /// The connection broke mid-stream.
    Broken,
    /// A chunk could not be read (not JSON, not the expected shape).
    Unreadable,
    /// An event exceeded the configured size cap (`max_event_bytes`), or a reply its bounds
    /// (`max_tool_calls`, `max_tool_argument_bytes`).
    TooLarge,
    /// Anything else (a failure reported by a layer above the wire).
    Other,
}

/// The cause of a [`ModelError`], shared so the error stays cheap to clone. Two sources compare
/// equal when their messages do.
#[derive(Clone)]
pub struct ErrorSource(Arc<dyn std::error::Error + Send + Sync>);

impl ErrorSource {
    /// Wraps an error as a cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        ErrorSource(Arc::new(error))
    }

    /// The wrapped error.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl std::fmt::Debug for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.0, f)
    }
}

impl std::fmt::Display for ErrorSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for ErrorSource {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for ErrorSource {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for ErrorSource {}

/// Provider error codes (Anthropic `error.type`, OpenAI `error.code`/`type`, Gemini `status`)
/// that say "try again later".
const RETRYABLE_CODES: [&str; 9] = [
    "overloaded_error",
    "overloaded",
    "rate_limit_error",
    "rate_limit_exceeded",
    "api_error",
    "server_error",
    "internal_error",
    "unavailable",
    "resource_exhausted",
];

impl ModelError {
    /// A connection failure without an underlying error value.
    pub fn connection(message: impl Into<String>) -> Self {
        ModelError::Connection {
            message: message.into(),
            source: None,
        }
    }

    /// An HTTP error status with no code and no requested wait.
    pub fn from_status(status: u16, message: impl Into<String>) -> Self {
        ModelError::Status {
            status,
            message: message.into(),
            code: None,
            retry_after: None,
        }
    }

    /// A stream failure of `kind`.
    pub fn stream(kind: StreamErrorKind, message: impl Into<String>) -> Self {
        ModelError::Stream {
            kind,
            message: message.into(),
        }
    }

    /// The HTTP status, when the provider answered with one.
    pub fn status(&self) -> Option<u16> {
        match self {
            ModelError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// How long the provider asked to wait before a retry, if it said.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ModelError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The provider's error code or type, when it sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            ModelError::Status { code, .. } => code.as_deref(),
            ModelError::Provider { code, .. } => Some(code),
            _ => None,
        }
    }

    /// The provider's message (or this error's own description for failures without one).
    pub fn message(&self) -> &str {
        match self {
            ModelError::Connection { message, .. }
            | ModelError::Status { message, .. }
            | ModelError::Provider { message, .. }
            | ModelError::Stream { message, .. }
            | ModelError::InvalidRequest(message)
            | ModelError::Script(message) => message,
        }
    }

    /// The kind of stream failure, for [`ModelError::Stream`].
    pub fn stream_kind(&self) -> Option<StreamErrorKind> {
        match self {
            ModelError::Stream { kind, .. } => Some(*kind),
            _ => None,
        }
    }

    /// Rate limited: HTTP 429, or a rate-limit error code.
    pub fn is_rate_limited(&self) -> bool {
        self.status() == Some(429)
            || self
                .code()
                .is_some_and(|c| c.to_ascii_lowercase().contains("rate_limit"))
    }

    /// The provider is overloaded: HTTP 503 or 529, or an "overloaded" error code.
    pub fn is_overloaded(&self) -> bool {
        matches!(self.status(), Some(503 | 529))
            || self
                .code()
                .is_some_and(|c| c.to_ascii_lowercase().starts_with("overloaded"))
    }

    /// The credentials were refused: HTTP 401 or 403, or an authentication/permission error
    /// code.
    pub fn is_auth(&self) -> bool {
        matches!(self.status(), Some(401 | 403))
            || self.code().is_some_and(|c| {
                let c = c.to_ascii_lowercase();
                c.contains("authentication")
                    || c.contains("permission")
                    || c.contains("invalid_api_key")
                    || c == "unauthenticated"
            })
    }

    /// A timeout: the stream stalled or ran past its deadline.
    pub fn is_timeout(&self) -> bool {
        matches!(
            self.stream_kind(),
            Some(StreamErrorKind::Stalled | StreamErrorKind::Deadline)
        )
    }

    /// The request was longer than the model's context window. Providers phrase it
    /// differently (a 400 with `context_length_exceeded`, "prompt is too long"…); this is the
    /// one place that knows how.
    pub fn is_context_overflow(&self) -> bool {
        if self.code().is_some_and(|c| c.contains("context_length")) {
            return true;
        }
        let text = match self {
            ModelError::Status {
                status, message, ..
            } if matches!(*status, 400 | 413 | 422) => message,
            ModelError::Provider { message, .. } => message,
            _ => return false,
        };
        let text = text.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "context length",
            "context window",
            "maximum context",
            "prompt is too long",
            "too many tokens",
            "input is too long",
            "exceeds the context",
        ]
        .iter()
        .any(|needle| text.contains(needle))
    }

    /// Whether the same request may succeed if sent again later: connection failures, HTTP
    /// 408/429/500/502/503/504/529, retryable provider codes (overloaded, rate limit, server
    /// error), and streams that stalled, broke, were cut or unreadable. A request that ran
    /// past its deadline or sent an oversized event, a client error, an invalid request and a
    /// script failure are not. (The transport adds what it alone knows: a stream that already
    /// delivered deltas is never retried, nor a 500 that repeats or says the request is bad.)
    pub fn is_retryable(&self) -> bool {
        match self {
            ModelError::Connection { .. } => true,
            ModelError::Status { status, .. } => {
                matches!(status, 408 | 429 | 500 | 502 | 503 | 504 | 529)
                    || self.is_overloaded()
                    || self.is_rate_limited()
            }
            ModelError::Provider { code, .. } => {
                let code = code.to_ascii_lowercase();
                RETRYABLE_CODES.iter().any(|c| code == *c)
            }
            ModelError::Stream { kind, .. } => matches!(
                kind,
                StreamErrorKind::Stalled
                    | StreamErrorKind::Cut
                    | StreamErrorKind::Broken
                    | StreamErrorKind::Unreadable
            ),
            ModelError::InvalidRequest(_) | ModelError::Script(_) => false,
        }
    }

    /// A short machine-readable name of the error class, as telemetry's `error.type` reports
    /// it: the HTTP status, the provider code, or `connection`/`stream`/….
    pub fn error_type(&self) -> String {
        match self {
            ModelError::Connection { .. } => "connection".into(),
            ModelError::Status { status, .. } => status.to_string(),
            ModelError::Provider { code, .. } => code.clone(),
            ModelError::Stream {
                kind: StreamErrorKind::Stalled | StreamErrorKind::Deadline,
                ..
            } => "timeout".into(),
            ModelError::Stream { .. } => "stream".into(),
            ModelError::InvalidRequest(_) => "invalid_request".into(),
            ModelError::Script(_) => "script".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16) -> ModelError {
        ModelError::from_status(code, "x")
    }

    #[test]
    fn predicates_per_status_class() {
        for s in [408, 429, 500, 502, 503, 504, 529] {
            assert!(status(s).is_retryable(), "{s}");
        }
        for s in [400, 401, 403, 404, 413, 422] {
            assert!(!status(s).is_retryable(), "{s}");
        }
        assert!(status(429).is_rate_limited() && !status(503).is_rate_limited());
        assert!(status(529).is_overloaded() && status(503).is_overloaded());
        assert!(status(401).is_auth() && status(403).is_auth() && !status(400).is_auth());
        assert_eq!(status(418).status(), Some(418));
        assert_eq!(ModelError::connection("x").status(), None);
        let waited = ModelError::Status {
            status: 429,
            message: "slow down".into(),
            code: Some("rate_limit_exceeded".into()),
            retry_after: Some(Duration::from_secs(3)),
        };
        assert_eq!(waited.retry_after(), Some(Duration::from_secs(3)));
        assert!(waited.is_rate_limited());
    }

    #[test]
    fn provider_codes_and_stream_kinds() {
        let p = |code: &str| ModelError::Provider {
            code: code.into(),
            message: "m".into(),
        };
        assert!(p("overloaded_error").is_retryable() && p("overloaded_error").is_overloaded());
        assert!(p("rate_limit_error").is_rate_limited());
        assert!(p("authentication_error").is_auth() && !p("authentication_error").is_retryable());
        assert!(!p("invalid_request_error").is_retryable());
        assert!(ModelError::stream(StreamErrorKind::Stalled, "s").is_retryable());
        assert!(ModelError::stream(StreamErrorKind::Stalled, "s").is_timeout());
        assert!(!ModelError::stream(StreamErrorKind::Deadline, "s").is_retryable());
        assert!(!ModelError::stream(StreamErrorKind::TooLarge, "s").is_retryable());
        assert!(ModelError::connection("refused").is_retryable());
        assert!(!ModelError::InvalidRequest("no key".into()).is_retryable());
    }

    #[test]
    fn context_overflow_is_recognised_by_code_or_phrase() {
        let overflow = ModelError::Status {
            status: 400,
            message: "This model's maximum context length is 8192 tokens".into(),
            code: Some("context_length_exceeded".into()),
            retry_after: None,
        };
        assert!(overflow.is_context_overflow());
        assert!(
            ModelError::from_status(400, "prompt is too long: 210000 tokens").is_context_overflow()
        );
        assert!(!ModelError::from_status(500, "prompt is too long").is_context_overflow());
        assert!(!ModelError::from_status(400, "bad temperature").is_context_overflow());
    }

    #[test]
    fn sources_are_kept_and_compared_by_text() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = ModelError::Connection {
            message: "connect: refused".into(),
            source: Some(ErrorSource::new(io)),
        };
        let source = std::error::Error::source(&e).map(ToString::to_string);
        assert_eq!(source.as_deref(), Some("refused"));
        assert_eq!(e.clone(), e);
    }
}
