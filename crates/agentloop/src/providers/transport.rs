//! The streaming transport every adapter shares: POST the body, retry what is worth retrying,
//! decode SSE, hand events to the adapter's wire parser, and always end with exactly one terminal
//! event.
//!
//! Retry rules: connection failures, 408, 429, 500, 502, 503, 504, 529 and "overloaded" errors
//! are retried with exponential backoff and full jitter, honouring `Retry-After` (seconds or an
//! HTTP date is not supported: seconds only) and `retry-after-ms`, up to `max_retries`; a server
//! that asks for a longer wait than `max_delay` fails fast with that wait in the error. A stream
//! that broke is retried only if nothing had been delivered to the caller yet. Each retry is
//! reported as a [`ModelEvent::Retry`].

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::sse::{SseDecoder, SseEvent};
use crate::model::{ModelError, ModelEvent, ModelStream};
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

/// What an adapter's wire parser does with SSE events.
pub(crate) trait WireParser: Send + 'static {
    /// Handles one event, pushing deltas to `out`. Returns true when it was the terminal event.
    /// An `Err` is a provider error reported inside the stream.
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError>;
    /// The assembled message, after the terminal event (`Err` for a terminal failure such as
    /// Responses' `response.failed`).
    fn finish(&mut self) -> Result<Message, ModelError>;
    /// What has been assembled so far, for an error terminal (stop reason `error`).
    fn partial(&self) -> Message;
}

/// One HTTP request, ready to send (and re-send).
pub(crate) struct WireRequest {
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Vec<u8>,
}

/// A failed attempt.
struct Failure {
    error: ModelError,
    retryable: bool,
    retry_after: Option<Duration>,
}

/// Starts the request on a task and returns its events. Dropping the stream aborts the task
/// (and with it the HTTP request).
pub(crate) fn stream<P, F>(
    client: reqwest::Client,
    request: WireRequest,
    make_parser: F,
    policy: RetryPolicy,
    idle: Duration,
) -> ModelStream
where
    P: WireParser,
    F: Fn() -> P + Send + 'static,
{
    let (tx, rx) = mpsc::channel(64);
    let task = tokio::spawn(run(client, request, make_parser, policy, idle, tx));
    Box::pin(TaskStream { rx, task })
}

/// Posts `body` as JSON to `{base}/{path}` with the adapter's auth `headers` plus the configured
/// extra headers, and streams the response through `make_parser`'s parser.
pub(crate) fn post_json<P, F>(
    client: &reqwest::Client,
    config: &super::ProviderConfig,
    path: &str,
    auth_headers: Vec<(String, String)>,
    body: &serde_json::Value,
    make_parser: F,
) -> ModelStream
where
    P: WireParser,
    F: Fn() -> P + Send + 'static,
{
    let mut headers = Vec::with_capacity(auth_headers.len() + config.headers.len() + 1);
    headers.push(("content-type".to_owned(), "application/json".to_owned()));
    headers.extend(auth_headers);
    headers.extend(config.headers.iter().cloned());
    let request = WireRequest {
        url: config.url(path),
        headers,
        body: body.to_string().into_bytes(),
    };
    stream(
        client.clone(),
        request,
        make_parser,
        config.retry,
        config.idle_timeout,
    )
}

struct TaskStream {
    rx: mpsc::Receiver<ModelEvent>,
    task: JoinHandle<()>,
}

impl Stream for TaskStream {
    type Item = ModelEvent;
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ModelEvent>> {
        self.rx.poll_recv(cx)
    }
}

impl Drop for TaskStream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500 | 502 | 503 | 504 | 529)
}

fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    get("retry-after")
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.max(0.0)))
}

/// Extracts a readable message from a provider's error body (`{"error": {"message": …}}` and
/// variants), falling back to the (bounded) raw text.
pub(crate) fn error_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(|m| m.as_str())
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| {
        let trimmed = body.trim();
        let mut end = trimmed.len().min(500);
        while !trimmed.is_char_boundary(end) {
            end -= 1;
        }
        if trimmed.is_empty() {
            "(empty body)".to_owned()
        } else {
            trimmed[..end].to_owned()
        }
    })
}

fn connection_failure(err: reqwest::Error) -> Failure {
    // Drop the URL from the message: it is noise here and could in principle carry secrets.
    let err = err.without_url();
    Failure {
        error: ModelError::Connection(err.to_string()),
        retryable: true,
        retry_after: None,
    }
}

async fn run<P, F>(
    client: reqwest::Client,
    request: WireRequest,
    make_parser: F,
    policy: RetryPolicy,
    idle: Duration,
    tx: mpsc::Sender<ModelEvent>,
) where
    P: WireParser,
    F: Fn() -> P,
{
    let mut attempt = 0u32;
    loop {
        let mut parser = make_parser();
        let failure = match attempt_once(&client, &request, &mut parser, idle, &tx).await {
            Ok(()) => return,
            Err(failure) => failure,
        };
        if failure.retryable && attempt < policy.max_retries {
            attempt += 1;
            let delay = match failure.retry_after {
                Some(asked) if asked > policy.max_delay => {
                    let error = ModelError::Status {
                        status: 0,
                        message: format!(
                            "{} — the server asked to retry after {:.1}s, longer than the \
                             configured maximum of {:.1}s",
                            failure.error,
                            asked.as_secs_f64(),
                            policy.max_delay.as_secs_f64()
                        ),
                    };
                    send_error(&tx, parser.partial(), error).await;
                    return;
                }
                Some(asked) => asked,
                None => policy.backoff(attempt),
            };
            let event = ModelEvent::Retry {
                attempt,
                delay,
                reason: failure.error.to_string(),
            };
            if tx.send(event).await.is_err() {
                return;
            }
            tokio::time::sleep(delay).await;
            continue;
        }
        send_error(&tx, parser.partial(), failure.error).await;
        return;
    }
}

async fn send_error(tx: &mpsc::Sender<ModelEvent>, mut partial: Message, error: ModelError) {
    partial.stop_reason = Some(crate::transcript::StopReason::Error);
    partial.error_message = Some(error.to_string());
    let _ = tx
        .send(ModelEvent::Error {
            message: partial,
            error,
        })
        .await;
}

/// One attempt. `Ok` means a terminal event was delivered (or the caller went away).
async fn attempt_once<P: WireParser>(
    client: &reqwest::Client,
    request: &WireRequest,
    parser: &mut P,
    idle: Duration,
    tx: &mpsc::Sender<ModelEvent>,
) -> Result<(), Failure> {
    let mut builder = client.post(&request.url).body(request.body.clone());
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let response = match tokio::time::timeout(idle, builder.send()).await {
        Err(_) => {
            return Err(Failure {
                error: ModelError::Connection(format!(
                    "no response within {:.1}s",
                    idle.as_secs_f64()
                )),
                retryable: true,
                retry_after: None,
            });
        }
        Ok(Err(e)) => return Err(connection_failure(e)),
        Ok(Ok(r)) => r,
    };
    let status = response.status().as_u16();
    if !response.status().is_success() {
        let wait = retry_after(response.headers());
        let body = match tokio::time::timeout(idle, response.text()).await {
            Ok(Ok(text)) => text,
            _ => String::new(),
        };
        let message = error_message(&body);
        let overloaded = body.to_ascii_lowercase().contains("overloaded");
        return Err(Failure {
            retryable: is_retryable_status(status) || overloaded,
            retry_after: wait,
            error: ModelError::Status { status, message },
        });
    }

    let mut body = response.bytes_stream();
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    let mut out = Vec::new();
    let mut delivered = false;
    loop {
        let chunk = match tokio::time::timeout(idle, body.next()).await {
            Err(_) => {
                return Err(stream_failure(
                    delivered,
                    format!("the stream stalled: no data for {:.1}s", idle.as_secs_f64()),
                ));
            }
            Ok(None) => {
                let cut = decoder.finish();
                return Err(stream_failure(
                    delivered,
                    if cut {
                        "the stream was cut off in the middle of an event".to_owned()
                    } else {
                        "the stream ended before its terminal event".to_owned()
                    },
                ));
            }
            Ok(Some(Err(e))) => {
                return Err(stream_failure(
                    delivered,
                    format!("the connection broke mid-stream: {}", e.without_url()),
                ));
            }
            Ok(Some(Ok(bytes))) => bytes,
        };
        decoder.push(&chunk, &mut events);
        for event in events.drain(..) {
            let result = parser.on_event(event, &mut out);
            for e in out.drain(..) {
                delivered |= matches!(e, ModelEvent::Delta(_));
                if tx.send(e).await.is_err() {
                    return Ok(());
                }
            }
            match result {
                Ok(false) => {}
                Ok(true) => {
                    let terminal = match parser.finish() {
                        Ok(message) => ModelEvent::Done(message),
                        Err(error) => {
                            let mut message = parser.partial();
                            message.stop_reason = Some(crate::transcript::StopReason::Error);
                            message.error_message = Some(error.to_string());
                            ModelEvent::Error { message, error }
                        }
                    };
                    let _ = tx.send(terminal).await;
                    return Ok(());
                }
                Err(error) => {
                    // Nothing reached the caller yet: an unreadable chunk or an "overloaded"
                    // error event is worth another attempt; anything later is final.
                    let overloaded = error
                        .to_string()
                        .to_ascii_lowercase()
                        .contains("overloaded");
                    let unreadable = matches!(error, ModelError::Stream(_));
                    return Err(Failure {
                        retryable: (overloaded || unreadable) && !delivered,
                        retry_after: None,
                        error,
                    });
                }
            }
        }
    }
}

fn stream_failure(delivered: bool, message: String) -> Failure {
    Failure {
        error: ModelError::Stream(message),
        retryable: !delivered,
        retry_after: None,
    }
}

#[cfg(test)]
mod tests {
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
    fn retry_after_headers_are_read() {
        let mut h = reqwest::header::HeaderMap::new();
        h.insert(
            "retry-after",
            reqwest::header::HeaderValue::from_static("2"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_secs(2)));
        h.insert(
            "retry-after-ms",
            reqwest::header::HeaderValue::from_static("250"),
        );
        assert_eq!(retry_after(&h), Some(Duration::from_millis(250)));
    }

    #[test]
    fn provider_error_bodies_become_readable_messages() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Rate limit reached", "type": "x"}}"#),
            "Rate limit reached"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(error_message("plain text"), "plain text");
        assert_eq!(error_message(""), "(empty body)");
    }
}
