//! The streaming transport every adapter shares: POST the body, retry what is worth retrying,
//! decode SSE, hand events to the adapter's wire parser, and always end with exactly one terminal
//! event.
//!
//! Retry rules: connection failures, 408, 429, 500, 502, 503, 504, 529 and "overloaded" errors
//! are retried with exponential backoff and full jitter, honouring `Retry-After` (seconds; an
//! HTTP date is not supported) and `retry-after-ms` — or, without either, a
//! `google.rpc.RetryInfo` `retryDelay` in the error body (Gemini) — up to `max_retries`; a server
//! that asks for a longer wait than `max_delay` fails fast with that wait in the error. A stream
//! that broke is retried only if nothing had been delivered to the caller yet. Each retry is
//! reported as a [`ModelEvent::Retry`].
//!
//! A client error reported as a 5xx is not retried blindly: a 5xx whose body says the request
//! could not be parsed (llama.cpp answers 500 "Failed to parse tool call arguments as JSON") fails
//! after one attempt with the server's message; a 500 that repeats the two previous attempts'
//! failure exactly (same status, same message) ends the retries; and a request whose identical
//! body already ended with that 500 (the adapter remembers the last one) gets one attempt.
//! 502/503/504/529 and "overloaded" stay retryable: they say nothing about the request.
//!
//! Bounds on a misbehaving server: the idle timeout counts field lines, not keep-alive comments
//! (`: ping` every second after the first bytes no longer holds a request forever); each attempt
//! has a total deadline ([`ProviderConfig::request_timeout`](crate::providers::ProviderConfig)); an event
//! larger than `max_event_bytes` ends the request; a reply whose tool calls exceed
//! `max_tool_calls` or `max_tool_argument_bytes` (all calls together) ends, not retried; a
//! redirect to another origin is not followed (credentials stay with the configured host) but
//! reported with its target, redacted; and a redirect loop (more than 10 redirects) is final:
//! one request chain, never retried.

use std::collections::VecDeque;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use tokio::time::Instant;

use hyper::body::Bytes;
use hyper::http::Uri;
use hyper::http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::StreamParser;
use super::errors::{error_code, error_message};
use super::http::{Client, HttpError, Response};
use crate::model::{ErrorSource, ModelError, ModelEvent, ModelStream, StreamErrorKind};
use crate::providers::sse::{SseDecoder, SseEvent};
use crate::transcript::Message;

/// How failed requests are retried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 disables retrying).
    pub max_retries: u32,
    /// Backoff before the first retry; doubled each time (with full jitter).
    pub base_delay: Duration,
    /// Longest wait: backoff is capped here, and a server asking for more fails fast.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Backoff before retry number `attempt` (1-based): a random duration in
    /// `[cap/2, cap]` where `cap = min(base · 2^(attempt-1), max_delay)`.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20));
        let cap = exp.min(self.max_delay);
        let half = cap / 2;
        let jitter = random_fraction();
        half + half.mul_f64(jitter)
    }
}

fn random_fraction() -> f64 {
    // RandomState is seeded per instance from the OS: enough randomness for jitter without a
    // dependency.
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(0x9E37_79B9_7F4A_7C15);
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Where an adapter posts: the HTTP client, the parsed URL and the headers every request
/// carries, prepared once when the adapter is built (parsing a URL and header names per request
/// showed up in profiles). A configuration error (a base URL that does not parse, a header that
/// is not a valid HTTP header) is kept and reported by every request instead of panicking.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    target: Result<std::sync::Arc<Target>, String>,
    retry: RetryPolicy,
    idle: Duration,
    request_timeout: Option<Duration>,
    max_event_bytes: usize,
    limits: ReplyLimits,
    /// The last request that ended with a deterministic-looking 500: (body hash, status,
    /// message). Shared by the adapter's requests, so an identical request is not retried again.
    failed: std::sync::Arc<std::sync::Mutex<Option<FailedRequest>>>,
}

/// A request that ended with a server error: (hash of its body, status, message).
type FailedRequest = (u64, u16, String);

/// What every request of an adapter shares, built once.
#[derive(Debug)]
struct Target {
    client: Client,
    /// The URL, for requests that append a path segment.
    url: url::Url,
    /// The same URL as the wire takes it.
    uri: Uri,
    headers: HeaderMap,
    /// The URI of the last appended segment (Gemini names the model in the path: the same
    /// one, request after request).
    last_segment: std::sync::Mutex<Option<(String, Uri)>>,
    /// The headers of the last request that added its own, shared with the next ones that add
    /// the same.
    last_headers: LastHeaders,
}

/// The headers a request added (the API key, as a rule) and the whole header map they made.
#[derive(Default)]
struct LastHeaders(std::sync::Mutex<Option<ExtraHeaders>>);

type ExtraHeaders = (Vec<(&'static str, String)>, std::sync::Arc<HeaderMap>);

impl std::fmt::Debug for LastHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // They carry credentials.
        f.write_str("LastHeaders(..)")
    }
}

impl Target {
    /// The adapter's headers with `extra` added (replacing those of the same name); the map of
    /// the last request that added the same is shared.
    fn headers_with(
        &self,
        extra: Vec<(&'static str, String)>,
    ) -> Result<std::sync::Arc<HeaderMap>, String> {
        let mut last = self
            .last_headers
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, headers)) = last.as_ref()
            && *seen == extra
        {
            return Ok(std::sync::Arc::clone(headers));
        }
        let mut headers = self.headers.clone();
        for (name, value) in &extra {
            // Parsed, not `from_static`: a provider written outside this crate may name a header
            // in capitals, which must be an error, never a panic.
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("{name:?} is not a valid HTTP header name"))?;
            let mut value = HeaderValue::try_from(value.as_str()).map_err(|_| {
                format!("the {name} header is not a valid HTTP header value (check the API key)")
            })?;
            // Request headers carry credentials: never shown in debug output.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let headers = std::sync::Arc::new(headers);
        *last = Some((extra, std::sync::Arc::clone(&headers)));
        Ok(headers)
    }

    /// The URI with `segment` appended as one more path segment (percent-encoded where
    /// needed), the query kept.
    fn uri_with(&self, segment: &str) -> Result<Uri, String> {
        let mut last = self
            .last_segment
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((seen, uri)) = last.as_ref()
            && seen == segment
        {
            return Ok(uri.clone());
        }
        let mut url = self.url.clone();
        // An http(s) URL always has path segments; the error case cannot happen.
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(segment);
        }
        let uri: Uri = url
            .as_str()
            .parse()
            .map_err(|e| format!("the request URL cannot be used: {e}"))?;
        *last = Some((segment.to_owned(), uri.clone()));
        Ok(uri)
    }
}

impl Endpoint {
    /// `{base_url}/{path}` with `content-type: application/json` and the configured extra headers.
    pub(crate) fn new(config: &crate::providers::ProviderConfig, path: &str) -> Self {
        // Nothing is connected, no TLS root loaded and no proxy variable read before the first
        // request (see `http::Client`); a client that cannot work fails every request with its
        // reason, never replaced by a default one that would silently drop the settings.
        let target = target(config, path).and_then(|(url, headers)| {
            let uri: Uri = url
                .as_str()
                .parse()
                .map_err(|e| format!("the provider URL cannot be used: {e}"))?;
            Ok(std::sync::Arc::new(Target {
                client: Client::new(&uri, config)?,
                url,
                uri,
                headers,
                last_segment: std::sync::Mutex::new(None),
                last_headers: LastHeaders::default(),
            }))
        });
        Endpoint {
            target,
            retry: config.retry,
            idle: config.idle_timeout,
            request_timeout: config.request_timeout,
            max_event_bytes: config.max_event_bytes,
            limits: ReplyLimits {
                argument_bytes: config.max_tool_argument_bytes,
                calls: config.max_tool_calls,
            },
            failed: Default::default(),
        }
    }

    /// The configuration error every request would report, if there is one.
    pub(crate) fn check(&self) -> Result<(), ModelError> {
        match &self.target {
            Ok(_) => Ok(()),
            Err(message) => Err(ModelError::InvalidRequest(message.clone())),
        }
    }

    /// Posts `body` (JSON bytes) to the endpoint's URL — with `segment` appended as one more
    /// path segment when given (percent-encoded where needed; the query is kept: Gemini names
    /// the model in the path, `…/models/{model}:streamGenerateContent?alt=sse`) — with the
    /// request's own `headers` added, and streams the response through a clone of `parser`
    /// (a fresh one per attempt). Nothing runs until the stream is polled; dropping the stream
    /// cancels the request.
    pub(crate) fn post<P>(
        &self,
        segment: Option<&str>,
        headers: Vec<(&'static str, String)>,
        body: Vec<u8>,
        parser: P,
    ) -> ModelStream
    where
        P: StreamParser + Clone,
    {
        let request = match self.request(segment, headers, body) {
            Ok(request) => request,
            Err(message) => {
                let terminal = error_terminal(parser.partial(), ModelError::connection(message));
                return Box::pin(futures::stream::iter([terminal]));
            }
        };
        // Boxed so that handing out each event moves a pointer, not the whole exchange. The
        // rarely taken waits (backoff, an error body, draining) are boxed where they are
        // awaited so they do not size the future every in-flight request holds (928 bytes
        // instead of 1,632 when measured).
        let exchange = Box::new(Exchange {
            request,
            parser,
            fresh: None,
            policy: self.retry,
            idle: self.idle,
            request_timeout: self.request_timeout,
            deadline: None,
            max_event_bytes: self.max_event_bytes,
            limits: self.limits,
            attempt: 0,
            failures: Vec::new(),
            failed: std::sync::Arc::clone(&self.failed),
            phase: Phase::Send,
            pending: VecDeque::new(),
            events: Vec::new(),
            out: Vec::new(),
        });
        Box::pin(futures::stream::unfold(
            exchange,
            |mut exchange| async move {
                let event = exchange.next_event().await?;
                Some((event, exchange))
            },
        ))
    }

    fn request(
        &self,
        segment: Option<&str>,
        extra: Vec<(&'static str, String)>,
        body: Vec<u8>,
    ) -> Result<Prepared, String> {
        let target = self.target.as_ref().map_err(Clone::clone)?;
        let uri = match segment {
            Some(segment) => target.uri_with(segment)?,
            None => target.uri.clone(),
        };
        // The adapter's headers are shared, not copied per request (a copy was 416 bytes per
        // request in flight), and so are those with the request's own (the same API key,
        // request after request).
        let headers = if extra.is_empty() {
            None
        } else {
            Some(target.headers_with(extra)?)
        };
        // Held for the whole exchange (each attempt sends it): without the serializer's spare
        // capacity, up to half of the allocation (shrinking a heap block happens in place).
        let mut body = body;
        body.shrink_to_fit();
        Ok(Prepared {
            target: std::sync::Arc::clone(target),
            uri,
            headers,
            // Owned, not copied: each attempt shares these bytes.
            body: Bytes::from(body),
        })
    }
}

/// One request as built: each attempt sends a cheap clone (shared URI, header values and body
/// bytes).
struct Prepared {
    target: std::sync::Arc<Target>,
    uri: Uri,
    /// The request's headers when it adds some to the adapter's (`None`: the adapter's).
    headers: Option<std::sync::Arc<HeaderMap>>,
    body: Bytes,
}

impl Prepared {
    fn headers(&self) -> &HeaderMap {
        self.headers.as_deref().unwrap_or(&self.target.headers)
    }
}

fn target(
    config: &crate::providers::ProviderConfig,
    path: &str,
) -> Result<(url::Url, HeaderMap), String> {
    let shown = crate::providers::redact_url(&config.base_url);
    let url = config.url(path);
    let mut url = url::Url::parse(&url)
        .map_err(|e| format!("the provider base URL {shown:?} is not a valid URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!(
            "the provider base URL {shown:?} is not an http(s) URL"
        ));
    }
    let mut headers = HeaderMap::with_capacity(config.headers.len() + 4);
    // `user:password@` in the base URL is HTTP basic authentication (as curl reads it). It is
    // taken out of the URL, so it can appear in no error or redirect, and sent as a sensitive
    // header; an adapter's own `authorization` header (an API key) replaces it.
    if !url.username().is_empty() || url.password().is_some() {
        use base64::Engine as _;
        let user = percent_decode(url.username());
        let password = percent_decode(url.password().unwrap_or(""));
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        let mut value = HeaderValue::try_from(format!("Basic {token}"))
            .map_err(|_| format!("the credentials in the base URL {shown:?} are not usable"))?;
        value.set_sensitive(true);
        headers.insert(header::AUTHORIZATION, value);
        let _ = url.set_username("");
        let _ = url.set_password(None);
    }
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (name, value) in &config.headers {
        let name = HeaderName::try_from(name.as_str()).map_err(|_| {
            format!("the configured header name {name:?} is not a valid HTTP header name")
        })?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|_| {
            format!(
                "the configured header {name} has a value that is not a valid HTTP header value"
            )
        })?;
        headers.append(name, value);
    }
    // `accept: */*`, as the provider SDKs' HTTP clients send it (and this crate always has).
    headers
        .entry(header::ACCEPT)
        .or_insert(HeaderValue::from_static("*/*"));
    Ok((url, headers))
}

/// `%XX` escapes in a URL's user or password decoded (invalid escapes are kept as written).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(value as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The bounds of one reply as a whole (each event is bounded by `max_event_bytes`).
#[derive(Clone, Copy, Debug)]
struct ReplyLimits {
    /// Most tool-call argument bytes, all calls together (`max_tool_argument_bytes`).
    argument_bytes: usize,
    /// Most tool calls (`max_tool_calls`).
    calls: usize,
}

impl ReplyLimits {
    /// The error for a reply past a limit, if it is. Deterministic (the same request would get
    /// the same reply), so never retried.
    fn check(&self, message: &crate::model::MessageAssembler) -> Option<Failure> {
        let text = if message.call_count() > self.calls {
            format!(
                "the reply has more than {} tool calls (max_tool_calls); it was ended",
                self.calls
            )
        } else if message.argument_bytes() > self.argument_bytes {
            format!(
                "the reply's tool calls carry more than {} bytes of arguments \
                 (max_tool_argument_bytes); it was ended",
                self.argument_bytes
            )
        } else {
            return None;
        };
        Some(Failure::last(ModelError::stream(
            StreamErrorKind::TooLarge,
            text,
        )))
    }
}

/// A failed attempt: the error, and whether this exchange may try again (the error's own
/// [`ModelError::is_retryable`], narrowed by what only the exchange knows).
struct Failure {
    error: ModelError,
    retryable: bool,
}

impl Failure {
    /// A failure retried exactly when its error is retryable.
    fn of(error: ModelError) -> Self {
        Failure {
            retryable: error.is_retryable(),
            error,
        }
    }

    /// A failure that is never retried.
    fn last(error: ModelError) -> Self {
        Failure {
            error,
            retryable: false,
        }
    }
}

/// Where an exchange is.
// One per in-flight request, held in place: boxing the big variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
enum Phase {
    /// Send the request (first attempt or a retry).
    Send,
    /// Back off before the next attempt.
    Wait(Duration),
    /// Reading the response body.
    Body {
        response: Response,
        decoder: SseDecoder,
        /// Whether a delta has been handed out (a broken stream is then not retried).
        delivered: bool,
        /// When the last field line arrived (or the headers): the idle timeout counts from here.
        last_data: Instant,
    },
    /// The terminal event has been queued.
    Done,
}

/// One request with its retries, driven by whoever polls the stream: no task and no channel
/// per request (both cost CPU per event and several KiB per in-flight request).
struct Exchange<P> {
    /// The request as first built; each attempt sends a cheap clone (the body is shared bytes).
    request: Prepared,
    parser: P,
    /// A parser that has seen nothing, each retry starting from a clone of it: copied when the
    /// first event arrives (until then `parser` has seen nothing), so that a request waiting
    /// for its response head holds no second parser.
    fresh: Option<Box<P>>,
    policy: RetryPolicy,
    idle: Duration,
    request_timeout: Option<Duration>,
    /// When the current attempt must have ended (from `request_timeout`).
    deadline: Option<Instant>,
    max_event_bytes: usize,
    limits: ReplyLimits,
    attempt: u32,
    /// The status and message of this exchange's failed 500 attempts, to spot a deterministic
    /// failure.
    failures: Vec<(u16, String)>,
    /// The adapter's memory of the last request that ended with a 500 (see [`Endpoint`]).
    failed: std::sync::Arc<std::sync::Mutex<Option<FailedRequest>>>,
    phase: Phase,
    /// Events ready for the caller, in order.
    pending: VecDeque<ModelEvent>,
    events: Vec<SseEvent>,
    out: Vec<ModelEvent>,
}

impl<P> Exchange<P>
where
    P: StreamParser + Clone,
{
    /// The next event for the caller; `None` after the terminal event.
    async fn next_event(&mut self) -> Option<ModelEvent> {
        loop {
            if let Some(event) = self.pending.pop_front() {
                return Some(event);
            }
            match std::mem::replace(&mut self.phase, Phase::Done) {
                Phase::Done => return None,
                Phase::Wait(delay) => {
                    Box::pin(tokio::time::sleep(delay)).await;
                    self.phase = Phase::Send;
                }
                Phase::Send => {
                    self.start_attempt();
                    match self.send().await {
                        Ok(response) => {
                            self.phase = Phase::Body {
                                response,
                                decoder: SseDecoder::with_max_event_bytes(self.max_event_bytes),
                                delivered: false,
                                last_data: Instant::now(),
                            }
                        }
                        Err(failure) => self.fail(failure),
                    }
                }
                Phase::Body {
                    mut response,
                    mut decoder,
                    mut delivered,
                    mut last_data,
                } => match self
                    .read(&mut response, &mut decoder, &mut delivered, &mut last_data)
                    .await
                {
                    Ok(true) => Box::pin(drain(response)).await,
                    Ok(false) => {
                        self.phase = Phase::Body {
                            response,
                            decoder,
                            delivered,
                            last_data,
                        }
                    }
                    Err(failure) => self.fail(failure),
                },
            }
        }
    }

    /// Before an attempt is sent: a retry starts from a parser that has seen nothing, and each
    /// attempt gets its own deadline.
    fn start_attempt(&mut self) {
        if let Some(fresh) = self.fresh.as_deref().filter(|_| self.attempt > 0) {
            self.parser = fresh.clone();
        }
        self.deadline = self.request_timeout.map(|t| Instant::now() + t);
    }

    /// Decides what a failed attempt leads to: a retry (a `Retry` event, then a wait) or the
    /// error terminal.
    fn fail(&mut self, failure: Failure) {
        if failure.retryable && self.attempt < self.policy.max_retries {
            self.attempt += 1;
            let delay = match failure.error.retry_after() {
                Some(asked) if asked > self.policy.max_delay => {
                    let note = format!(
                        "the provider asked to wait {:.1}s before retrying, longer than the \
                         configured maximum of {:.1}s",
                        asked.as_secs_f64(),
                        self.policy.max_delay.as_secs_f64()
                    );
                    // Keep the real status and message: never a made-up status.
                    let error = match failure.error {
                        ModelError::Status {
                            status,
                            message,
                            code,
                            retry_after,
                        } => ModelError::Status {
                            status,
                            message: format!("{message} — {note}"),
                            code,
                            retry_after,
                        },
                        other => ModelError::connection(format!("{other} — {note}")),
                    };
                    self.terminate(error);
                    return;
                }
                Some(asked) => asked,
                None => self.policy.backoff(self.attempt),
            };
            self.pending.push_back(ModelEvent::Retry {
                attempt: self.attempt,
                delay,
                reason: failure.error.to_string(),
            });
            self.phase = Phase::Wait(delay);
            return;
        }
        self.terminate(failure.error);
    }

    /// Queues the error terminal carrying what was assembled so far.
    fn terminate(&mut self, error: ModelError) {
        self.pending
            .push_back(error_terminal(self.parser.partial(), error));
        self.phase = Phase::Done;
    }

    /// Sends one attempt and waits for a successful status.
    async fn send(&mut self) -> Result<Response, Failure> {
        let idle_end = Instant::now() + self.idle;
        let until = self.deadline.map_or(idle_end, |d| d.min(idle_end));
        let request = &self.request;
        let sent = request
            .target
            .client
            .post(&request.uri, request.headers(), &request.body);
        let mut response = match tokio::time::timeout_at(until, sent).await {
            Err(_) if until < idle_end => return Err(self.deadline_failure()),
            Err(_) => {
                return Err(Failure::of(ModelError::stream(
                    StreamErrorKind::Stalled,
                    format!("no response within {:.1}s", self.idle.as_secs_f64()),
                )));
            }
            Ok(Err(e)) => return Err(connection_failure(e)),
            Ok(Ok(r)) => r,
        };
        let status = response.status.as_u16();
        if response.status.is_success() {
            // The body needs no header: they are released now rather than held for the whole
            // stream (over HTTP/2 their values are slices of the connection's read buffer, which
            // they would keep alive too).
            response.headers = HeaderMap::new();
            return Ok(response);
        }
        if response.status.is_redirection() {
            return Err(redirect_failure(&response, status));
        }
        let wait = retry_after(&response.headers);
        let body = match Box::pin(tokio::time::timeout(self.idle, response.text())).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        };
        let message = error_message(&body);
        let error = ModelError::Status {
            status,
            message: message.clone(),
            code: error_code(&body),
            retry_after: wait.or_else(|| retry_after_in_body(&body)),
        };
        let mut failure = Failure::of(error);
        if status == 500 && !failure.error.is_overloaded() {
            let seen = (status, message.clone());
            let hash = body_hash(&self.request);
            // The identical request failed the same way twice in a row: a third try will too.
            let repeated = self.failures.len() >= 2
                && self.failures[self.failures.len() - 2..]
                    .iter()
                    .all(|f| *f == seen);
            // The identical request already ended with this failure in an earlier call.
            let known = self.failures.is_empty()
                && self
                    .failed
                    .lock()
                    .ok()
                    .is_some_and(|f| f.as_ref() == Some(&(hash, status, message.clone())));
            if repeated || known || rejects_request(&body) {
                failure.retryable = false;
            }
            self.failures.push(seen);
            if let Ok(mut slot) = self.failed.lock() {
                *slot = Some((hash, status, message));
            }
        }
        Err(failure)
    }

    /// Reads one body chunk and queues what it produced. `Ok(true)` once the terminal event is
    /// queued.
    async fn read(
        &mut self,
        response: &mut Response,
        decoder: &mut SseDecoder,
        delivered: &mut bool,
        last_data: &mut Instant,
    ) -> Result<bool, Failure> {
        let Some(chunk) = self.next_chunk(response, *delivered, *last_data).await? else {
            return self.end_of_body(decoder, *delivered);
        };
        let decoded = decoder.push(&chunk, &mut self.events);
        if decoder.take_progress() {
            *last_data = Instant::now();
        }
        let outcome = self.dispatch_events(delivered);
        if let (Ok(false), Err(too_large)) = (&outcome, decoded) {
            // Deterministic: the same request would get the same event again.
            return Err(Failure::last(ModelError::stream(
                StreamErrorKind::TooLarge,
                too_large.to_string(),
            )));
        }
        outcome
    }

    /// The next piece of the body (`None` at its end), waiting no longer than the idle timeout
    /// since the last data and the attempt's deadline.
    async fn next_chunk(
        &mut self,
        response: &mut Response,
        delivered: bool,
        last_data: Instant,
    ) -> Result<Option<Bytes>, Failure> {
        let idle_end = last_data + self.idle;
        let until = self.deadline.map_or(idle_end, |d| d.min(idle_end));
        match tokio::time::timeout_at(until, response.chunk()).await {
            Err(_) if until < idle_end => Err(self.deadline_failure()),
            Err(_) => Err(stream_failure(
                delivered,
                StreamErrorKind::Stalled,
                format!(
                    "the stream stalled: no data for {:.1}s (keep-alive comments do not count)",
                    self.idle.as_secs_f64()
                ),
            )),
            Ok(Err(e)) => Err(stream_failure(
                delivered,
                StreamErrorKind::Broken,
                format!("the connection broke mid-stream: {}", describe(&e)),
            )),
            Ok(Ok(chunk)) => Ok(chunk),
        }
    }

    /// The body ended: the terminal event when the protocol allows ending without one and no
    /// event was cut off, a cut stream otherwise.
    fn end_of_body(&mut self, decoder: &mut SseDecoder, delivered: bool) -> Result<bool, Failure> {
        let cut = decoder.finish();
        if !cut && self.parser.complete_at_eof() {
            self.finish_message();
            return Ok(true);
        }
        Err(stream_failure(
            delivered,
            StreamErrorKind::Cut,
            if cut {
                "the stream was cut off in the middle of an event".to_owned()
            } else {
                "the stream ended before its terminal event".to_owned()
            },
        ))
    }

    /// Hands the decoded events to the parser and queues what it produced, up to the terminal
    /// event, a failure, or a reply limit crossed. `Ok(true)` once the terminal is queued.
    fn dispatch_events(&mut self, delivered: &mut bool) -> Result<bool, Failure> {
        let mut events = std::mem::take(&mut self.events);
        if self.fresh.is_none() && !events.is_empty() && self.policy.max_retries > 0 {
            self.fresh = Some(Box::new(self.parser.clone()));
        }
        let mut outcome = Ok(false);
        for event in events.drain(..) {
            let result = self.parser.on_event(event, &mut self.out);
            if let Some(failure) = self.limits.check(self.parser.message()) {
                // What this event added past the limit is not handed out.
                self.out.clear();
                outcome = Err(failure);
                break;
            }
            for e in self.out.drain(..) {
                *delivered |= matches!(e, ModelEvent::Delta(_));
                self.pending.push_back(e);
            }
            match result {
                Ok(false) => {}
                Ok(true) => {
                    self.finish_message();
                    outcome = Ok(true);
                    break;
                }
                Err(error) => {
                    // Nothing reached the caller yet: an unreadable chunk or a retryable error
                    // event (overloaded, rate limited) is worth another attempt; anything
                    // later is final.
                    outcome = Err(Failure {
                        retryable: error.is_retryable() && !*delivered,
                        error,
                    });
                    break;
                }
            }
        }
        events.clear();
        self.events = events;
        outcome
    }

    /// Queues the terminal event: the finished message, or the error terminal with what was
    /// assembled.
    fn finish_message(&mut self) {
        let terminal = match self.parser.finish() {
            Ok(message) => ModelEvent::Done(message),
            Err(error) => error_terminal(self.parser.partial(), error),
        };
        self.pending.push_back(terminal);
    }

    /// The attempt ran past its `request_timeout`: not retried (another attempt could take as
    /// long again).
    fn deadline_failure(&self) -> Failure {
        let limit = self.request_timeout.unwrap_or_default();
        Failure::last(ModelError::stream(
            StreamErrorKind::Deadline,
            format!(
                "the request did not finish within its deadline of {:.1}s (request_timeout)",
                limit.as_secs_f64()
            ),
        ))
    }
}

/// A redirect that was not followed because it leads to another origin (see the client's
/// redirect policy): reported with its target, credentials redacted. Not retried.
fn redirect_failure(response: &Response, status: u16) -> Failure {
    let target = response
        .headers
        .get(header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(|location| {
            let location = crate::providers::redact_url(location);
            format!("{:.300}", location.as_ref())
        })
        .unwrap_or_else(|| "(no Location header)".to_owned());
    let from = &response.url;
    let origin = format!(
        "{}://{}",
        from.scheme_str().unwrap_or("http"),
        from.host().unwrap_or_default()
    );
    let origin = match from.port_u16() {
        Some(port) => format!("{origin}:{port}"),
        None => origin,
    };
    Failure::last(ModelError::from_status(
        status,
        format!(
            "the provider redirected the request to {target}, another origin than {origin}; \
             it was not followed so that credentials stay with the configured host (use the \
             new address as the base URL if you trust it)"
        ),
    ))
}

/// A hash of a request's body (computed only when an attempt failed with a 500).
fn body_hash(request: &Prepared) -> u64 {
    use std::hash::Hash;
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    request.body.as_ref().hash(&mut hasher);
    hasher.finish()
}

/// Whether a server-error body says the request itself is at fault (it could not be parsed or
/// is invalid): sending it again cannot help. Matched on the body the server sent, once, when
/// the failure is classified.
fn rejects_request(body: &str) -> bool {
    const PHRASES: [&str; 9] = [
        "failed to parse",
        "could not parse",
        "unable to parse",
        "cannot parse",
        "parse error",
        "invalid json",
        "invalid request",
        "invalid_request",
        "bad request",
    ];
    let lower = body.to_ascii_lowercase();
    PHRASES.iter().any(|p| lower.contains(p))
}

/// The longest wait a `Retry-After` value is taken at: anything larger (up to infinity) is
/// clamped here, which is far beyond any `max_delay`, so the request fails fast saying so.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The wait the server asked for, from `retry-after-ms` or `retry-after` (seconds). A value
/// that is malformed, negative or NaN is ignored (the normal backoff applies); a huge or
/// infinite one is clamped to [`RETRY_AFTER_CAP`]. Never panics.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
    };
    let seconds = get("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| get("retry-after"))?;
    wait_of(seconds)
}

/// A server-requested wait of `seconds`: `None` when negative or NaN, clamped to
/// [`RETRY_AFTER_CAP`] when huge or infinite.
fn wait_of(seconds: f64) -> Option<Duration> {
    if seconds.is_nan() || seconds < 0.0 {
        return None;
    }
    Some(Duration::try_from_secs_f64(seconds).map_or(RETRY_AFTER_CAP, |d| d.min(RETRY_AFTER_CAP)))
}

/// The wait an error body asks for when no header does: Google's `google.rpc.RetryInfo` detail
/// (`{"error": {"details": [{"@type": "…/google.rpc.RetryInfo", "retryDelay": "31s"}]}}`, a
/// protobuf JSON duration), which Gemini sends with its 429s instead of `Retry-After`.
fn retry_after_in_body(body: &str) -> Option<Duration> {
    let value: serde_json::Value = serde_json::from_str(body).ok()?;
    let details = value.pointer("/error/details")?.as_array()?;
    let delay = details.iter().find_map(|detail| {
        let kind = detail.get("@type")?.as_str()?;
        if !kind.ends_with("google.rpc.RetryInfo") {
            return None;
        }
        detail.get("retryDelay")?.as_str()
    })?;
    wait_of(delay.trim().strip_suffix('s')?.parse::<f64>().ok()?)
}

/// An HTTP error with its causes ("error connecting: Connection refused"): the outer message
/// alone rarely says what went wrong. The client's errors never carry the URL (it is noise
/// here and could carry secrets).
fn describe(err: &HttpError) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

fn connection_failure(err: HttpError) -> Failure {
    if err.is_redirect_loop() {
        // Too many redirects (a loop): the server answers the same way to the same request,
        // so the whole chain is not sent again.
        return Failure::last(ModelError::Connection {
            message: format!(
                "the provider redirected the request more than {} times (a redirect loop?); \
                 not retried: {}",
                crate::providers::config::MAX_REDIRECTS,
                describe(&err)
            ),
            source: Some(ErrorSource::new(err)),
        });
    }
    if err.is_config() {
        // TLS roots or a proxy setting that cannot work: another attempt would fail the same.
        return Failure::last(ModelError::InvalidRequest(format!(
            "the HTTP client cannot be built: {}",
            describe(&err)
        )));
    }
    Failure::of(ModelError::Connection {
        message: describe(&err),
        source: Some(ErrorSource::new(err)),
    })
}

/// The error terminal: what was assembled so far, marked as failed with the error's text.
fn error_terminal(mut partial: Message, error: ModelError) -> ModelEvent {
    partial.stop_reason = Some(crate::transcript::StopReason::Error);
    partial.error_message = Some(error.to_string());
    ModelEvent::Error {
        message: partial,
        error,
    }
}

/// Longest wait for the end of a body after its terminal event.
const DRAIN_LIMIT: Duration = Duration::from_millis(200);

/// Reads what is left of a body after the terminal event (normally just the end of the chunked
/// encoding, already on its way), then gives the connection back to the pool.
/// A connection is only reused once its response body was read to the end, and only after the
/// pool got it back; without this, the conversation's next request opened a new connection
/// (with thousands of concurrent conversations that doubled the connections and the memory per
/// session).
///
/// The end usually comes with the terminal event or one runtime turn later, so it is first
/// awaited without a timer (arming a timer that fires before every other one wakes the driver:
/// a syscall per request); only then for up to [`DRAIN_LIMIT`]. Anything still arriving after
/// that is dropped with the connection.
async fn drain(mut response: Response) {
    use futures::FutureExt;
    let mut ended = false;
    for _ in 0..3 {
        match response.chunk().now_or_never() {
            // Data after the terminal event: nothing anyone will read.
            Some(Ok(Some(_))) => continue,
            Some(_) => {
                ended = true;
                break;
            }
            None => tokio::task::yield_now().await,
        }
    }
    if !ended {
        let _ = tokio::time::timeout(DRAIN_LIMIT, async {
            while let Ok(Some(_)) = response.chunk().await {}
        })
        .await;
    }
    // The lease goes back to the pool right here, synchronously; a next request that takes it
    // before hyper has finished with this response waits for the connection to be ready
    // (`SendRequest::ready`), not for a runtime turn: no `yield_now` (each one costs the
    // current-thread runtime an extra `epoll_wait`).
    drop(response);
}

/// A stream that failed; retried only when nothing reached the caller yet.
fn stream_failure(delivered: bool, kind: StreamErrorKind, message: String) -> Failure {
    let error = ModelError::stream(kind, message);
    Failure {
        retryable: error.is_retryable() && !delivered,
        error,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn backoff_grows_with_jitter_and_is_capped() {
        let p = RetryPolicy {
            max_retries: 5,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(1000),
        };
        for attempt in 1..=8 {
            let cap = (Duration::from_millis(100) * 2u32.pow(attempt - 1)).min(p.max_delay);
            let d = p.backoff(attempt);
            assert!(d >= cap / 2 && d <= cap, "{attempt}: {d:?} vs {cap:?}");
        }
    }

    #[test]
    fn requests_share_the_headers_of_the_last_request_that_added_the_same() {
        let config = crate::providers::ProviderConfig::new("http://127.0.0.1:1/v1");
        let endpoint = Endpoint::new(&config, "chat/completions");
        let key = |k: &str| vec![("authorization", format!("Bearer {k}"))];
        let a = endpoint.request(None, key("a"), Vec::new()).unwrap();
        let b = endpoint.request(None, key("a"), Vec::new()).unwrap();
        assert!(std::sync::Arc::ptr_eq(
            a.headers.as_ref().unwrap(),
            b.headers.as_ref().unwrap()
        ));
        let c = endpoint.request(None, key("c"), Vec::new()).unwrap();
        assert_eq!(c.headers()[header::AUTHORIZATION], "Bearer c");
        assert_eq!(a.headers()[header::AUTHORIZATION], "Bearer a");
        assert!(c.headers()[header::AUTHORIZATION].is_sensitive());
        assert_eq!(c.headers()[header::CONTENT_TYPE], "application/json");
        let none = endpoint.request(None, Vec::new(), Vec::new()).unwrap();
        assert!(none.headers.is_none());
        assert!(none.headers().get(header::AUTHORIZATION).is_none());
        assert_eq!(none.headers()[header::CONTENT_TYPE], "application/json");
        let bad = endpoint.request(None, vec![("Bad Name", String::new())], Vec::new());
        assert!(bad.is_err());
    }

    #[test]
    fn a_retry_starts_from_the_parser_as_it_was_before_the_first_event() {
        use crate::providers::openai_chat::ChatParser;
        let config = crate::providers::ProviderConfig::new("http://127.0.0.1:1/v1");
        let endpoint = Endpoint::new(&config, "chat/completions");
        let mut exchange = Exchange {
            request: endpoint.request(None, Vec::new(), Vec::new()).unwrap(),
            parser: ChatParser::new("m".into()),
            fresh: None,
            policy: RetryPolicy::default(),
            idle: endpoint.idle,
            request_timeout: None,
            deadline: None,
            max_event_bytes: endpoint.max_event_bytes,
            limits: endpoint.limits,
            attempt: 0,
            failures: Vec::new(),
            failed: Default::default(),
            phase: Phase::Send,
            pending: VecDeque::new(),
            events: Vec::new(),
            out: Vec::new(),
        };
        // Waiting for the head: no second parser yet.
        exchange.start_attempt();
        assert!(exchange.fresh.is_none());
        let chunk = r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#;
        exchange.events.push(SseEvent {
            event: String::new(),
            data: chunk.to_owned(),
            id: None,
        });
        let mut delivered = false;
        assert!(matches!(
            exchange.dispatch_events(&mut delivered),
            Ok(false)
        ));
        assert!(delivered);
        assert_eq!(exchange.parser.partial().text(), "Hel");
        // The retry (after a failure) starts from what the parser was before that event.
        exchange.attempt = 1;
        exchange.start_attempt();
        assert_eq!(exchange.parser.partial().text(), "");
    }

    #[test]
    fn retry_after_headers_are_read() {
        let mut h = HeaderMap::new();
        h.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn a_retry_info_detail_in_the_body_is_a_wait() {
        let body = r#"{"error": {"code": 429, "status": "RESOURCE_EXHAUSTED", "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "31s"}]}}"#;
        assert_eq!(retry_after_in_body(body), Some(Duration::from_secs(31)));
        let fraction = r#"{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.250s"}]}}"#;
        assert_eq!(
            retry_after_in_body(fraction),
            Some(Duration::from_millis(250))
        );
        for hostile in [
            r#"{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "-3s"}]}}"#,
            r#"{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "NaNs"}]}}"#,
            r#"{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": 3}]}}"#,
            r#"{"error": {"details": [{"@type": "other", "retryDelay": "3s"}]}}"#,
            r#"{"error": {"details": "x"}}"#,
            "not json",
        ] {
            assert_eq!(retry_after_in_body(hostile), None, "{hostile}");
        }
        let huge = r#"{"error": {"details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1e300s"}]}}"#;
        assert_eq!(retry_after_in_body(huge), Some(RETRY_AFTER_CAP));
    }

    #[test]
    fn hostile_retry_after_values_never_panic() {
        let with = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, HeaderValue::from_static(value));
            retry_after(&h)
        };
        for name in ["retry-after", "retry-after-ms"] {
            for huge in ["1e20", "1e308", "inf", "Infinity", "18446744073709551616"] {
                assert_eq!(with(name, huge), Some(RETRY_AFTER_CAP), "{name}: {huge}");
            }
            for bad in [
                "-5",
                "-inf",
                "NaN",
                "soon",
                "",
                "Wed, 21 Oct 2015 07:28:00 GMT",
            ] {
                assert_eq!(with(name, bad), None, "{name}: {bad}");
            }
        }
        assert_eq!(with("retry-after", "0.5"), Some(Duration::from_millis(500)));
    }

    #[test]
    fn credentials_in_the_base_url_become_basic_auth_and_leave_the_url() {
        let config =
            crate::providers::ProviderConfig::new("http://us%40er:p%3Aw@gw.example:8080/v1");
        let (url, headers) = target(&config, "chat/completions").unwrap();
        assert_eq!(url.as_str(), "http://gw.example:8080/v1/chat/completions");
        let auth = headers.get(header::AUTHORIZATION).unwrap();
        assert!(auth.is_sensitive());
        // base64("us@er:p:w")
        assert_eq!(auth.to_str().unwrap(), "Basic dXNAZXI6cDp3");
        let bad = crate::providers::ProviderConfig::new("http://u:topsecret@[::1/v1");
        let error = target(&bad, "x").unwrap_err();
        assert!(!error.contains("topsecret"), "{error}");
    }

    #[test]
    fn request_rejections_reported_as_5xx_are_recognised() {
        assert!(rejects_request(
            r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101]","type":"server_error"}}"#
        ));
        assert!(rejects_request("Invalid JSON in request body"));
        assert!(!rejects_request(
            r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error"}}"#
        ));
        assert!(!rejects_request(""));
    }
}
