//! [`ProviderConfig`]: the connection settings every adapter shares (base URL, key, headers,
//! timeouts, retries, HTTP version, pool, proxy and TLS roots).

use std::time::Duration;

use super::RetryPolicy;
use super::core::Proxy;
use super::sse;
use crate::model::ApiKey;

/// The default per-attempt deadline of a model request (see
/// [`ProviderConfig::request_timeout`]): long enough for a long reasoning reply, short enough
/// that a server trickling keep-alives or endless deltas cannot hold a run forever.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(600);

/// The default of [`ProviderConfig::max_tool_argument_bytes`]: 16 MiB of tool-call arguments
/// per reply, all calls together.
pub const DEFAULT_MAX_TOOL_ARGUMENT_BYTES: usize = 16 * 1024 * 1024;

/// The default of [`ProviderConfig::max_tool_calls`]: 1,024 tool calls per reply.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 1024;

/// Redirects followed within one origin before giving up (the request chain then has at most
/// this many + 1 requests, and is not retried).
pub(crate) const MAX_REDIRECTS: usize = 10;

/// The default of [`ProviderConfig::pool_idle_timeout`]: 90 seconds.
pub const DEFAULT_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// Connection settings shared by every adapter.
#[derive(Clone, Debug)]
pub struct ProviderConfig {
    /// Base URL. OpenAI's includes `/v1` (`https://api.openai.com/v1`); Anthropic's and
    /// Gemini's do not (`https://api.anthropic.com`,
    /// `https://generativelanguage.googleapis.com`), as in the official SDKs.
    pub base_url: String,
    /// API key (`None`: no authentication header, e.g. a local server).
    pub api_key: Option<ApiKey>,
    /// Extra headers sent with every request.
    pub headers: Vec<(String, String)>,
    /// Default model id when the request names none.
    pub model: Option<String>,
    /// Time allowed to connect.
    pub connect_timeout: Duration,
    /// Longest wait for the response headers, and longest time a stream may go without a
    /// field line (`data:`, `event:`…). Keep-alive comments do not reset it: a server that only
    /// sends `: ping` after its first bytes ends at this timeout.
    pub idle_timeout: Duration,
    /// Longest time one attempt of a request may take from sending to its terminal event
    /// (`None`: no limit). Default 10 minutes. A request that hits it ends with a clear error
    /// and is not retried.
    pub request_timeout: Option<Duration>,
    /// Largest server-sent event accepted, in bytes (default
    /// [`sse::DEFAULT_MAX_EVENT_BYTES`], 16 MiB): a larger one ends the request with a clear
    /// error instead of growing memory without bound.
    pub max_event_bytes: usize,
    /// Most bytes of tool-call arguments one reply may carry, all its calls together (default
    /// [`DEFAULT_MAX_TOOL_ARGUMENT_BYTES`], 16 MiB). `max_event_bytes` bounds each event; this
    /// bounds the reply as a whole, so a server streaming endless arguments in small pieces
    /// cannot grow memory without bound: past the limit the reply ends with a
    /// [`StreamErrorKind::TooLarge`](crate::model::StreamErrorKind) error naming this setting
    /// (not retried), carrying the message assembled so far.
    pub max_tool_argument_bytes: usize,
    /// Most tool calls one reply may carry (default [`DEFAULT_MAX_TOOL_CALLS`], 1,024): past
    /// it the reply ends with a [`StreamErrorKind::TooLarge`](crate::model::StreamErrorKind)
    /// error naming this setting (not retried).
    pub max_tool_calls: usize,
    /// Retries of failed requests.
    pub retry: RetryPolicy,
    /// Which HTTP versions to speak.
    pub http_version: HttpVersion,
    /// Over HTTP/2: requests one connection carries before another connection is opened
    /// (default 100, the smallest `SETTINGS_MAX_CONCURRENT_STREAMS` common servers announce).
    pub http2_streams_per_connection: usize,
    /// Over HTTP/2: most connections to the provider (default 256); beyond
    /// `streams × connections` concurrent requests, requests queue on the least busy one.
    pub http2_max_connections: usize,
    /// How long an unused connection stays open for the next request (default
    /// [`DEFAULT_POOL_IDLE_TIMEOUT`], 90 s): an idle HTTP/1.1 connection, or an HTTP/2 one
    /// without a stream, is closed after it.
    pub pool_idle_timeout: Duration,
    /// The proxy requests go through (default [`Proxy::FromEnvironment`]: `HTTPS_PROXY`,
    /// `HTTP_PROXY`, `ALL_PROXY` and `NO_PROXY`, upper- or lower-case).
    pub proxy: Proxy,
    /// Root certificates trusted besides the system's (PEM text; each may hold several). The
    /// system's store honours `SSL_CERT_FILE` and `SSL_CERT_DIR`.
    pub root_certificates: Vec<String>,
    /// Use the provider's prompt cache (default `true`): Anthropic gets cache breakpoints on
    /// the system prompt, the tool list and the newest user turn; OpenAI gets the request's
    /// `prompt_cache_key`. `false` sends neither.
    pub prompt_cache: bool,
}

/// Which HTTP versions an adapter's client speaks.
///
/// Over HTTP/1.1 every in-flight request holds its own connection (with its buffers: tens of
/// KiB each); over HTTP/2 concurrent requests share one connection as streams, which is what
/// lets one process hold thousands of open model streams cheaply. Note that a server limits the
/// streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`, often 100–250): requests beyond it
/// wait for a free stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpVersion {
    /// HTTP/2 when the server offers it during the TLS handshake (ALPN, as `api.openai.com` and
    /// `api.anthropic.com` do), HTTP/1.1 otherwise. Plain `http://` URLs get HTTP/1.1.
    #[default]
    Auto,
    /// HTTP/1.1 only.
    Http1Only,
    /// HTTP/2 without negotiation ("prior knowledge"), also over plain `http://` (h2c): for a
    /// local gateway or server known to speak HTTP/2. Fails against an HTTP/1.1-only server.
    Http2PriorKnowledge,
}

impl ProviderConfig {
    /// Settings for `base_url` with defaults for everything else.
    pub fn new(base_url: impl Into<String>) -> Self {
        ProviderConfig {
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            model: None,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(120),
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            max_event_bytes: sse::DEFAULT_MAX_EVENT_BYTES,
            max_tool_argument_bytes: DEFAULT_MAX_TOOL_ARGUMENT_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
            retry: RetryPolicy::default(),
            http_version: HttpVersion::Auto,
            http2_streams_per_connection: 100,
            http2_max_connections: 256,
            pool_idle_timeout: DEFAULT_POOL_IDLE_TIMEOUT,
            proxy: Proxy::FromEnvironment,
            root_certificates: Vec::new(),
            prompt_cache: true,
        }
    }

    crate::setters! {
        /// Sets the API key.
        pub fn api_key(key: impl Into<String>) => api_key = Some(ApiKey::new(key));
        /// Sets the default model.
        pub fn model(model: impl Into<String>) => model = Some(model.into());
    }

    /// Adds a header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    crate::setters! {
        /// Sets the idle timeout.
        pub fn idle_timeout(timeout: Duration) => idle_timeout = timeout;
        /// Sets the per-attempt deadline (`None`: no limit).
        pub fn request_timeout(timeout: Option<Duration>) => request_timeout = timeout;
        /// Sets the largest server-sent event accepted, in bytes.
        pub fn max_event_bytes(limit: usize) => max_event_bytes = limit;
        /// Sets the most bytes of tool-call arguments one reply may carry (see
        /// [`ProviderConfig::max_tool_argument_bytes`]).
        pub fn max_tool_argument_bytes(limit: usize) => max_tool_argument_bytes = limit;
        /// Sets the most tool calls one reply may carry (see [`ProviderConfig::max_tool_calls`]).
        pub fn max_tool_calls(limit: usize) => max_tool_calls = limit;
        /// Sets the retry policy.
        pub fn retry(retry: RetryPolicy) => retry = retry;
        /// Turns the provider's prompt cache on or off (see [`ProviderConfig::prompt_cache`]).
        pub fn prompt_cache(enabled: bool) => prompt_cache = enabled;
    }

    /// Sets the HTTP/2 connection pool: `streams` requests per connection before another one
    /// is opened, at most `connections` connections.
    pub fn http2_pool(mut self, streams: usize, connections: usize) -> Self {
        self.http2_streams_per_connection = streams;
        self.http2_max_connections = connections;
        self
    }

    crate::setters! {
        /// Sets how long an unused connection stays open (see
        /// [`ProviderConfig::pool_idle_timeout`]).
        pub fn pool_idle_timeout(timeout: Duration) => pool_idle_timeout = timeout;
        /// Sets the proxy (see [`ProviderConfig::proxy`]).
        pub fn proxy(proxy: Proxy) => proxy = proxy;
    }

    /// Trusts the root certificates in `pem` (PEM text) besides the system's.
    pub fn add_root_certificate_pem(mut self, pem: impl Into<String>) -> Self {
        self.root_certificates.push(pem.into());
        self
    }

    /// Whether this configuration can speak HTTP/2 (prior knowledge, or negotiated over TLS).
    pub(crate) fn may_use_http2(&self) -> bool {
        match self.http_version {
            HttpVersion::Http1Only => false,
            HttpVersion::Http2PriorKnowledge => true,
            HttpVersion::Auto => self.base_url.trim_start().starts_with("https://"),
        }
    }

    /// Sets which HTTP versions to speak (see [`HttpVersion`]).
    pub fn http_version(mut self, version: HttpVersion) -> Self {
        self.http_version = version;
        self
    }

    /// `{base_url}/{path}` without doubled slashes.
    pub(crate) fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }
}

impl ProviderConfig {
    /// Settings from the environment: the base URL from `base_var` (else `default_base`) and the
    /// key from `key_var`, as the official SDKs read them.
    pub fn from_env_vars(base_var: &str, key_var: &str, default_base: &str) -> Self {
        EnvSettings {
            base_url_vars: &[base_var],
            api_key_vars: &[key_var],
            default_base_url: default_base,
        }
        .config()
    }
}

/// Where a provider's official SDK reads its settings in the environment; every built-in
/// adapter's `from_env` is one of these. Empty variables count as unset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EnvSettings<'a> {
    /// The variables that may hold the base URL, the first one set winning.
    pub(crate) base_url_vars: &'a [&'a str],
    /// The variables that may hold the API key, the first one set winning.
    pub(crate) api_key_vars: &'a [&'a str],
    /// The base URL when none of `base_url_vars` is set.
    pub(crate) default_base_url: &'a str,
}

impl EnvSettings<'_> {
    /// The settings the environment holds now.
    pub(crate) fn config(&self) -> ProviderConfig {
        self.config_with(env_var)
    }

    /// The settings with variables read by `lookup` (`None`: unset).
    pub(crate) fn config_with(&self, lookup: impl Fn(&str) -> Option<String>) -> ProviderConfig {
        let first_set = |vars: &[&str]| vars.iter().find_map(|name| lookup(name));
        let base = first_set(self.base_url_vars).unwrap_or_else(|| self.default_base_url.into());
        let config = ProviderConfig::new(base);
        match first_set(self.api_key_vars) {
            Some(key) => config.api_key(key),
            None => config,
        }
    }
}

/// The environment the official OpenAI SDK reads, for both OpenAI protocols.
#[cfg(any(feature = "openai-chat", feature = "openai-responses"))]
pub(crate) const OPENAI_ENV: EnvSettings<'static> = EnvSettings {
    base_url_vars: &["OPENAI_BASE_URL"],
    api_key_vars: &["OPENAI_API_KEY"],
    default_base_url: "https://api.openai.com/v1",
};

/// OpenAI's `reasoning_effort` / `reasoning.effort` for a level (`None`: send nothing).
#[cfg(any(feature = "openai-chat", feature = "openai-responses"))]
pub(crate) fn openai_reasoning_effort(level: crate::model::ReasoningLevel) -> Option<&'static str> {
    use crate::model::ReasoningLevel;
    match level {
        ReasoningLevel::Off => None,
        ReasoningLevel::Minimal => Some("minimal"),
        ReasoningLevel::Low => Some("low"),
        ReasoningLevel::Medium => Some("medium"),
        ReasoningLevel::High | ReasoningLevel::Xhigh => Some("high"),
    }
}

/// Reads an environment variable, treating empty as unset.
fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fixtures::assert_reads;

    #[test]
    fn the_first_variable_set_wins_and_the_default_base_fills_in() {
        let env = EnvSettings {
            base_url_vars: &["BASE_A", "BASE_B"],
            api_key_vars: &["KEY_A", "KEY_B"],
            default_base_url: "https://default.example",
        };
        let both = [
            ("BASE_B", "https://b.example"),
            ("BASE_A", "https://a.example"),
            ("KEY_B", "kb"),
            ("KEY_A", "ka"),
        ];
        let blank_first = [
            ("BASE_A", " "),
            ("BASE_B", "https://b.example"),
            ("KEY_B", "kb"),
        ];
        assert_reads(
            &env,
            &[
                (&both, "https://a.example", Some("ka")),
                (&blank_first, "https://b.example", Some("kb")),
                (&[("KEY_A", "")], "https://default.example", None),
            ],
        );
    }
}
