//! The HTTP server: routes, turn selection, fault injection, request recording.
//!
//! Every connection speaks HTTP/1.1 or HTTP/2 cleartext with prior knowledge (h2c), detected
//! from its first bytes, on the same port. One h2c connection multiplexes up to
//! [`MockServerBuilder::http2_max_concurrent_streams`] requests.
//!
//! It runs on a dedicated OS thread with its own multi-thread tokio runtime, so it works the same
//! from sync code, from a `#[tokio::test]` (current-thread runtime) and from a benchmark. The hot
//! path takes no lock that grows with the number of connections: turn selection is an atomic
//! (sequential mode) or one shard of a sharded map (fault attempts); recording pushes to a
//! vector under a short lock and can be turned off.

use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::{Bytes, BytesMut};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use serde_json::Value;

use crate::history;
use crate::script::{Fault, Mode, Script, ScriptError, Turn, Usage};
use crate::wire::{self, RenderCtx, WireFormat};

/// One request the server received.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct RecordedRequest {
    /// The request path, e.g. `/v1/chat/completions`.
    pub path: String,
    /// The wire format the path belongs to.
    pub format: WireFormat,
    /// Request headers, names lower-case, repeated headers joined with `", "`. The values of
    /// `x-api-key`, `api-key` and `x-goog-api-key` are `"<redacted>"`; those of `authorization` and
    /// `proxy-authorization` keep their scheme (`"Bearer <redacted>"`).
    pub headers: BTreeMap<String, String>,
    /// The request body as JSON (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The script turn that answered (0-based), `None` when the request was rejected (invalid
    /// body, tool-call invariant, script exhausted).
    pub turn: Option<usize>,
    /// Which attempt at that turn this was (1-based), `None` when rejected.
    pub attempt: Option<u32>,
    /// The fault applied to this response, if any.
    pub fault: Option<Fault>,
    /// When the server had the whole request: the time between two requests is measured where
    /// they arrive, not by polling [`MockServer::request_count`].
    pub received: std::time::Instant,
}

impl RecordedRequest {
    /// A header's value by (case-insensitive) name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The script is invalid.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// Binding the socket or starting the runtime failed.
    #[error("cannot start the mock server: {0}")]
    Io(#[from] std::io::Error),
}

/// Configures and starts a [`MockServer`].
///
/// ```
/// use agentloop_testkit::{MockServer, Script, Turn};
/// let server = MockServer::builder(Script::new(vec![Turn::text("hi")]))
///     .record_requests(false)
///     .start()
///     .unwrap();
/// assert!(server.base_url().starts_with("http://127.0.0.1:"));
/// ```
#[derive(Debug, Clone)]
pub struct MockServerBuilder {
    script: Script,
    host: IpAddr,
    port: u16,
    record: bool,
    worker_threads: usize,
    h2_max_streams: u32,
    reject_status: u16,
    reused_call_ids: bool,
}

/// The default of [`MockServerBuilder::http2_max_concurrent_streams`].
const DEFAULT_H2_MAX_STREAMS: u32 = 100_000;

/// The HTTP/2 connection-level receive window. Request bodies of all the streams of one
/// connection share it; hyper's 1 MiB default would make a burst of thousands of requests with
/// long histories wait for window updates. (The per-stream window stays at hyper's 1 MiB.)
const H2_CONNECTION_WINDOW: u32 = 16 * 1024 * 1024;

/// How long the accept loop waits after an accept error such as `EMFILE` before trying again.
const ACCEPT_ERROR_BACKOFF: Duration = Duration::from_millis(50);

impl MockServerBuilder {
    setters! {
        /// The address to bind. Default `127.0.0.1`.
        pub fn host(host: IpAddr) => host = host;
        /// The port to bind. Default 0 (any free port).
        pub fn port(port: u16) => port = port;
        /// Whether to keep every request for [`MockServer::requests`]. Default `true`; turn it off
        /// for long benchmarks ([`MockServer::request_count`] and violations still work).
        pub fn record_requests(record: bool) => record = record;
        /// Worker threads of the server's runtime. Default 2.
        pub fn worker_threads(n: usize) => worker_threads = n.max(1);
        /// The most HTTP/2 streams (requests) one h2c connection may have open at once, announced
        /// to the client as `SETTINGS_MAX_CONCURRENT_STREAMS`. Default 100,000, so a client can
        /// hold thousands of streams open on a single connection; hyper's own default, 200, would
        /// make it queue the rest until streams end. A client that reaches the limit queues further
        /// requests (the server refuses streams beyond it). 0 is raised to 1. HTTP/1.1 connections
        /// are not affected: they carry one request at a time.
        pub fn http2_max_concurrent_streams(n: u32) => h2_max_streams = n.max(1);
        /// Accepts a history in which a call id comes again once its earlier call has its result,
        /// as some local servers do (they number each turn's calls from `call_0`); by default such
        /// a history breaks the one-call-per-id invariant.
        pub fn allow_reused_call_ids(allow: bool) => reused_call_ids = allow;
    }

    /// The HTTP status of a request whose history breaks an invariant (a call without its
    /// result, arguments that are not a JSON object, …). Default 400, as OpenAI and Anthropic
    /// answer; 500 is what llama.cpp's server answers when it cannot parse a call's arguments.
    /// A value that is not an HTTP error status (below 400 or above 599) is replaced by 400.
    pub fn reject_status(mut self, status: u16) -> Self {
        self.reject_status = if (400..=599).contains(&status) {
            status
        } else {
            400
        };
        self
    }

    /// Binds the socket and starts serving on a background thread.
    pub fn start(self) -> Result<MockServer, ServerError> {
        self.script.validate()?;
        let mut state = AppState::new(self.script, self.record);
        state.reject_status = self.reject_status;
        state.reused_call_ids = self.reused_call_ids;
        let state = Arc::new(state);
        let bind_addr = SocketAddr::new(self.host, self.port);
        let (addr_tx, addr_rx) = std::sync::mpsc::channel::<std::io::Result<SocketAddr>>();
        let (shutdown_tx, shutdown_rx) = tokio::sync::oneshot::channel::<()>();
        let app_state = Arc::clone(&state);
        let workers = self.worker_threads;
        let h2_max_streams = self.h2_max_streams;
        let thread = std::thread::Builder::new()
            .name("agentloop-mock".to_string())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(workers)
                    .thread_name("agentloop-mock-worker")
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = addr_tx.send(Err(e));
                        return;
                    }
                };
                rt.block_on(async move {
                    let listener = match bind(bind_addr) {
                        Ok(l) => l,
                        Err(e) => {
                            let _ = addr_tx.send(Err(e));
                            return;
                        }
                    };
                    let _ = addr_tx.send(listener.local_addr());
                    tokio::select! {
                        () = serve(listener, app_state, h2_max_streams) => {}
                        _ = shutdown_rx => {}
                    }
                });
                // Open streams (stalls included) are dropped with the runtime.
                rt.shutdown_timeout(Duration::from_millis(100));
            })?;
        let addr = match addr_rx.recv() {
            Ok(Ok(addr)) => addr,
            Ok(Err(e)) => {
                let _ = thread.join();
                return Err(ServerError::Io(e));
            }
            Err(_) => {
                let _ = thread.join();
                return Err(ServerError::Io(std::io::Error::other(
                    "the server thread exited before binding",
                )));
            }
        };
        Ok(MockServer {
            addr,
            state,
            shutdown: Some(shutdown_tx),
            thread: Some(thread),
        })
    }
}

/// The accept loop: never returns. Each connection is a task that serves HTTP/1.1 or h2c (told
/// apart by the HTTP/2 connection preface); each h2 stream is a task of its own.
async fn serve(listener: tokio::net::TcpListener, state: Arc<AppState>, h2_max_streams: u32) {
    let app = router(Arc::clone(&state));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http2()
        .max_concurrent_streams(h2_max_streams)
        .initial_connection_window_size(H2_CONNECTION_WINDOW);
    let builder = Arc::new(builder);
    let service = TowerToHyperService::new(app);
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                accept_error(e).await;
                continue;
            }
        };
        state.connection_count.fetch_add(1, Ordering::SeqCst);
        // Small SSE events must not wait for Nagle.
        let _ = tcp.set_nodelay(true);
        let builder = Arc::clone(&builder);
        let service = service.clone();
        tokio::spawn(async move {
            // Errors here are per connection (a client that went away, an injected reset).
            if let Err(e) = builder.serve_connection(TokioIo::new(tcp), service).await {
                tracing::debug!(%peer, error = %e, "agentloop-mock: connection ended with an error");
            }
        });
    }
}

/// An accept error never stops the server. A connection that failed before it was accepted is
/// skipped; anything else (`EMFILE`/`ENFILE` when descriptors run out, `ENOBUFS`, `ENOMEM`) is
/// logged and retried after a short pause, by which time open streams may have ended.
async fn accept_error(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionAborted
            | ErrorKind::ConnectionReset
            | ErrorKind::ConnectionRefused
            | ErrorKind::Interrupted
            | ErrorKind::WouldBlock
    ) {
        tracing::debug!(error = %e, "agentloop-mock: a connection failed before it was accepted");
        return;
    }
    tracing::error!(
        error = %e,
        "agentloop-mock: accept failed; retrying in {} ms",
        ACCEPT_ERROR_BACKOFF.as_millis()
    );
    tokio::time::sleep(ACCEPT_ERROR_BACKOFF).await;
}

fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    // A deep accept queue: benchmarks open thousands of connections at once.
    socket.listen(4096)
}

/// A running mock provider server. Stops on [`MockServer::shutdown`] or drop.
///
/// ```
/// use agentloop_testkit::{MockServer, Script, Turn};
/// let server = MockServer::start(Script::new(vec![Turn::text("Hello!")]));
/// let openai_base = format!("{}/v1", server.base_url());
/// let anthropic_base = server.base_url();
/// # let _ = (openai_base, anthropic_base);
/// assert_eq!(server.request_count(), 0);
/// server.shutdown();
/// ```
#[derive(Debug)]
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<AppState>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MockServer {
    /// Starts a server for `script` on `127.0.0.1` and a free port.
    ///
    /// # Panics
    /// When the script is invalid or the socket cannot be bound; use
    /// [`MockServer::builder`] + [`MockServerBuilder::start`] to get an error instead.
    pub fn start(script: Script) -> MockServer {
        match Self::builder(script).start() {
            Ok(server) => server,
            Err(e) => panic!("agentloop-testkit: {e}"),
        }
    }

    /// A builder for a server with non-default settings.
    pub fn builder(script: Script) -> MockServerBuilder {
        MockServerBuilder {
            script,
            host: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port: 0,
            record: true,
            worker_threads: 2,
            h2_max_streams: DEFAULT_H2_MAX_STREAMS,
            reject_status: 400,
            reused_call_ids: false,
        }
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://HOST:PORT`, without a trailing slash. The OpenAI base URL (Chat Completions and
    /// Responses) is `{base_url}/v1`; the Anthropic base URL is `{base_url}` (the client appends
    /// `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `{base_url}/v1`, the base URL for OpenAI clients.
    pub fn openai_base_url(&self) -> String {
        format!("{}/v1", self.base_url())
    }

    /// Every request received so far, in arrival order (empty when recording is off).
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.state.requests).clone()
    }

    /// The number of requests received so far (counted even when recording is off).
    pub fn request_count(&self) -> u64 {
        self.state.request_count.load(Ordering::SeqCst)
    }

    /// The number of TCP connections accepted so far (HTTP/1.1 or HTTP/2): a client that reuses
    /// its connections opens one per concurrent request (HTTP/1.1) or one in all (HTTP/2).
    pub fn connection_count(&self) -> u64 {
        self.state.connection_count.load(Ordering::SeqCst)
    }

    /// Every broken request invariant seen so far, one message each: a tool call without exactly
    /// one result, a result that refers to no earlier call, or a body that is not JSON. Each
    /// such request was answered with HTTP 400.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.state.violations).clone()
    }

    /// Stops the server and waits for its thread. Open streams are cut.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Stops the server (as [`shutdown`](Self::shutdown)) and says what it served, for a
    /// long-running server's last words: `stopped after N requests, M invariant violations`,
    /// then one indented line per violation.
    pub fn shutdown_report(self) -> String {
        let served = self.request_count();
        let violations = self.violations();
        self.shutdown();
        let mut report = format!(
            "stopped after {served} requests, {} invariant violations",
            violations.len()
        );
        for v in violations {
            report.push_str(&format!("\n  {v}"));
        }
        report
    }

    fn stop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

const SHARDS: usize = 32;

/// (wire format, conversation fingerprint, turn index) -> attempts so far.
type AttemptMap = HashMap<(WireFormat, u64, usize), u32>;

#[derive(Debug)]
struct AppState {
    script: Script,
    record: bool,
    requests: Mutex<Vec<RecordedRequest>>,
    request_count: AtomicU64,
    connection_count: AtomicU64,
    violations: Mutex<Vec<String>>,
    /// (wire format, fingerprint, turn index) -> attempts so far, sharded by key.
    attempts: Vec<Mutex<AttemptMap>>,
    /// Sequential mode: (turn, attempt 1-based) per queue entry.
    queue: Vec<(usize, u32)>,
    next_slot: AtomicUsize,
    next_response: AtomicU64,
    /// The status of a request whose history breaks an invariant.
    reject_status: u16,
    /// Whether a call id may come again once its earlier call has its result.
    reused_call_ids: bool,
}

impl AppState {
    fn new(script: Script, record: bool) -> Self {
        let queue = script
            .turns
            .iter()
            .enumerate()
            .flat_map(|(t, turn)| (1..=turn.faults.len() as u32 + 1).map(move |a| (t, a)))
            .collect();
        AppState {
            script,
            record,
            requests: Mutex::new(Vec::new()),
            request_count: AtomicU64::new(0),
            connection_count: AtomicU64::new(0),
            violations: Mutex::new(Vec::new()),
            attempts: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            queue,
            next_slot: AtomicUsize::new(0),
            next_response: AtomicU64::new(1),
            reject_status: 400,
            reused_call_ids: false,
        }
    }

    fn next_attempt(&self, format: WireFormat, fingerprint: u64, turn_index: usize) -> u32 {
        let shard = (fingerprint as usize ^ turn_index.wrapping_mul(0x9E37_79B9)) % SHARDS;
        let mut map = lock(&self.attempts[shard]);
        let n = map.entry((format, fingerprint, turn_index)).or_insert(0);
        *n += 1;
        *n
    }

    /// (turn, attempt) for a request, or `None` when the script is exhausted.
    fn select(&self, format: WireFormat, hist: &history::History) -> Option<(usize, u32)> {
        let len = self.script.turns.len();
        match self.script.mode {
            Mode::Sequential => {
                let slot = self.next_slot.fetch_add(1, Ordering::SeqCst);
                let slot = if slot < self.queue.len() {
                    slot
                } else if self.script.repeat {
                    slot % self.queue.len()
                } else {
                    return None;
                };
                self.queue.get(slot).copied()
            }
            Mode::ByPosition => {
                let t = hist.turn_index;
                let t = if t < len {
                    t
                } else if self.script.repeat {
                    t % len
                } else {
                    return None;
                };
                Some((
                    t,
                    self.next_attempt(format, hist.fingerprint, hist.turn_index),
                ))
            }
        }
    }

    fn record(&self, req: RecordedRequest) {
        if self.record {
            lock(&self.requests).push(req);
        }
    }
}

fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(speaking(WireFormat::OpenAiChat)),
        )
        .route("/chat/completions", post(speaking(WireFormat::OpenAiChat)))
        .route("/v1/responses", post(speaking(WireFormat::OpenAiResponses)))
        .route("/responses", post(speaking(WireFormat::OpenAiResponses)))
        .route("/v1/messages", post(speaking(WireFormat::Anthropic)))
        .route("/messages", post(speaking(WireFormat::Anthropic)))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        // Gemini names the model and the method in one segment (`gemini-2.5-flash:stream…`).
        .route("/v1beta/models/{target}", post(gemini))
        .route("/v1/models/{target}", post(gemini))
        .route("/v1beta/models", get(gemini_models))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(256 * 1024 * 1024))
        .with_state(state)
}

/// The script's model ids, or `mock-model` when it names none.
fn model_ids(s: &AppState) -> Vec<String> {
    if s.script.models.is_empty() {
        vec!["mock-model".to_owned()]
    } else {
        s.script.models.clone()
    }
}

/// A request's query parameters, as `name=value` pairs (not percent-decoded: the ones the model
/// listings read are ids and numbers).
struct Query<'a>(Vec<(&'a str, &'a str)>);

impl<'a> Query<'a> {
    fn of(uri: &'a Uri) -> Self {
        Query(
            uri.query()
                .unwrap_or("")
                .split('&')
                .filter_map(|pair| pair.split_once('='))
                .collect(),
        )
    }

    fn get(&self, name: &str) -> Option<&'a str> {
        self.0.iter().find(|(k, _)| *k == name).map(|(_, v)| *v)
    }

    /// `name` as a number; `default` when it is missing or not a number.
    fn number(&self, name: &str, default: usize) -> usize {
        self.get(name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
}

/// `GET /v1/models`: the script's model ids, in OpenAI's list shape, or — when the request
/// carries `anthropic-version` — in Anthropic's paginated shape (`limit`, default 20, and
/// `after_id` query parameters; `has_more` and `last_id` in the answer).
async fn models(State(s): State<Arc<AppState>>, uri: Uri, headers: HeaderMap) -> Response {
    let ids = model_ids(&s);
    if !headers.contains_key("anthropic-version") {
        let data: Vec<Value> = ids
            .iter()
            .map(|id| {
                serde_json::json!({"id": id, "object": "model", "created": 0,
                    "owned_by": "agentloop-testkit"})
            })
            .collect();
        return json_response(
            StatusCode::OK,
            &serde_json::json!({"object": "list", "data": data}),
        );
    }
    let query = Query::of(&uri);
    let limit = query.number("limit", 20).clamp(1, 1000);
    let start = match query.get("after_id") {
        Some(after) => match ids.iter().position(|id| id == after) {
            Some(i) => i + 1,
            None => {
                return json_response(
                    StatusCode::BAD_REQUEST,
                    &serde_json::json!({"type": "error", "error": {"type": "invalid_request_error",
                        "message": format!("after_id {after:?} is not a model id")}}),
                );
            }
        },
        None => 0,
    };
    let page: Vec<Value> = ids
        .iter()
        .skip(start)
        .take(limit)
        .map(|id| {
            serde_json::json!({"type": "model", "id": id, "display_name": id,
                "created_at": "2026-01-01T00:00:00Z"})
        })
        .collect();
    let has_more = start + page.len() < ids.len();
    let first_id = page.first().map(|m| m["id"].clone());
    let last_id = page.last().map(|m| m["id"].clone());
    json_response(
        StatusCode::OK,
        &serde_json::json!({"data": page, "has_more": has_more, "first_id": first_id,
            "last_id": last_id}),
    )
}

/// Unknown routes: a JSON 404 that names the real ones (a wrong base URL is the usual cause).
async fn not_found(method: axum::http::Method, uri: Uri) -> Response {
    let msg = format!(
        "agentloop-testkit: no route for {method} {}; the mock serves POST /v1/chat/completions, \
         /v1/responses, /v1/messages and /v1beta/models/{{model}}:streamGenerateContent, and GET \
         /v1/models and /v1beta/models (OpenAI base URL: <base>/v1, Anthropic and Gemini base URL: <base>)",
        uri.path()
    );
    tracing::warn!("{msg}");
    json_response(
        StatusCode::NOT_FOUND,
        &serde_json::json!({"error": {"message": msg, "type": "not_found"}}),
    )
}

/// The `POST` handler of a path that always speaks `format` (chat completions, responses,
/// messages).
fn speaking(
    format: WireFormat,
) -> impl Fn(State<Arc<AppState>>, Uri, HeaderMap, Bytes) -> std::future::Ready<Response>
+ Clone
+ Send
+ Sync
+ 'static {
    move |State(s), uri, headers, body| std::future::ready(handle(&s, format, &uri, &headers, body))
}

/// `POST /v1beta/models/{model}:streamGenerateContent`: the model comes from the path (Gemini
/// bodies do not name it). Any other method on a model is a 404 in Gemini's error shape.
async fn gemini(
    State(s): State<Arc<AppState>>,
    Path(target): Path<String>,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match target.rsplit_once(':') {
        Some((model, "streamGenerateContent")) if !model.is_empty() => {
            handle_with_model(&s, WireFormat::Gemini, &uri, &headers, body, Some(model))
        }
        _ => {
            let msg = format!(
                "agentloop-testkit: no route for POST {}; the mock serves \
                 POST /v1beta/models/{{model}}:streamGenerateContent?alt=sse for Gemini \
                 (base URL: <base>)",
                uri.path()
            );
            json_response(
                StatusCode::NOT_FOUND,
                &wire::error_body(WireFormat::Gemini, 404, &msg),
            )
        }
    }
}

/// `GET /v1beta/models`: the script's model ids in Gemini's paginated shape (`pageSize`,
/// default 50, and `pageToken` query parameters; `nextPageToken` in the answer while more
/// remain).
async fn gemini_models(State(s): State<Arc<AppState>>, uri: Uri) -> Response {
    let ids = model_ids(&s);
    let query = Query::of(&uri);
    let size = query.number("pageSize", 50).clamp(1, 1000);
    let start = query.number("pageToken", 0);
    let page: Vec<Value> = ids
        .iter()
        .skip(start)
        .take(size)
        .map(|id| {
            serde_json::json!({"name": format!("models/{id}"), "displayName": id,
                "supportedGenerationMethods": ["generateContent", "countTokens"]})
        })
        .collect();
    let mut body = serde_json::json!({ "models": page });
    if start + size < ids.len() {
        body["nextPageToken"] = Value::from((start + size).to_string());
    }
    json_response(StatusCode::OK, &body)
}

const REDACTED_HEADERS: [&str; 5] = [
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
];

fn recorded_headers(headers: &HeaderMap) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (name, value) in headers {
        let name = name.as_str().to_ascii_lowercase();
        let value = if REDACTED_HEADERS.contains(&name.as_str()) {
            // Keep the scheme of `authorization` (`Bearer`, `Basic`): tests check which kind
            // of credential arrived, never its value.
            let text = String::from_utf8_lossy(value.as_bytes());
            match text.split_once(' ') {
                Some((scheme, _)) if name.ends_with("authorization") => {
                    format!("{scheme} <redacted>")
                }
                _ => "<redacted>".to_string(),
            }
        } else {
            String::from_utf8_lossy(value.as_bytes()).into_owned()
        };
        out.entry(name)
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    out
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn handle(
    s: &AppState,
    format: WireFormat,
    uri: &Uri,
    headers: &HeaderMap,
    raw: Bytes,
) -> Response {
    handle_with_model(s, format, uri, headers, raw, None)
}

/// [`handle`], with the model named by the path (Gemini) instead of the body.
fn handle_with_model(
    s: &AppState,
    format: WireFormat,
    uri: &Uri,
    headers: &HeaderMap,
    raw: Bytes,
    path_model: Option<&str>,
) -> Response {
    let n = s.request_count.fetch_add(1, Ordering::SeqCst) + 1;
    let rec = RecordedRequest {
        path: uri.path().to_string(),
        format,
        headers: if s.record {
            recorded_headers(headers)
        } else {
            BTreeMap::new()
        },
        body: Value::Null,
        turn: None,
        attempt: None,
        fault: None,
        received: std::time::Instant::now(),
    };
    let (body, turn_idx, attempt, mut rec) = match admit(s, format, n, &raw, rec) {
        Ok(admitted) => admitted,
        Err(response) => return *response,
    };
    let Some(turn) = s.script.turns.get(turn_idx) else {
        return json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &wire::error_body(format, 500, "agentloop-testkit: internal turn index error"),
        );
    };
    let fault = turn.faults.get(attempt as usize - 1).cloned();
    let usage = turn_usage(turn, raw.len());
    let model = reply_model(path_model, &body);
    let include_usage = body
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    rec.turn = Some(turn_idx);
    rec.attempt = Some(attempt);
    rec.fault = fault.clone();
    if s.record {
        rec.body = body;
    }
    s.record(rec);

    if let Some(Fault::Status {
        status,
        headers,
        body,
    }) = &fault
    {
        return status_response(format, *status, headers, body.as_deref());
    }

    let ctx = RenderCtx {
        turn,
        turn_index: turn_idx,
        response_id: s.next_response.fetch_add(1, Ordering::Relaxed),
        model,
        include_usage,
        usage,
    };
    let rendered = wire::render(format, &ctx);
    event_stream(plan(format, turn, rendered, fault.as_ref()))
}

/// The usage a turn reports: the script's, else an estimate (a token per 4 request bytes,
/// at least one, and the output's estimate).
fn turn_usage(turn: &Turn, request_bytes: usize) -> Usage {
    turn.usage.unwrap_or_else(|| Usage {
        input_tokens: (request_bytes as u64 / 4).max(1),
        output_tokens: wire::estimated_output_tokens(turn),
        ..Usage::default()
    })
}

/// The model a reply names: the one in the path (Gemini), else the body's, else a default.
fn reply_model(path_model: Option<&str>, body: &Value) -> String {
    path_model
        .or_else(|| body.get("model").and_then(Value::as_str))
        .unwrap_or("mock-model")
        .to_string()
}

/// The streamed (server-sent events) response playing `steps`.
fn event_stream(steps: Vec<Step>) -> Response {
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream_steps(steps)))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Checks a request before a turn is served: its body is JSON, its history keeps the tool-call
/// invariants, and the script has a turn for it. A rejected request is recorded (with a
/// violation where it breaks a rule) and answered with the error response; an admitted one gives
/// back its body, turn index, attempt and the record to complete.
fn admit(
    s: &AppState,
    format: WireFormat,
    n: u64,
    raw: &Bytes,
    mut rec: RecordedRequest,
) -> Result<(Value, usize, u32, RecordedRequest), Box<Response>> {
    let path = rec.path.clone();
    let body: Value = match serde_json::from_slice(raw) {
        Ok(v) => v,
        Err(e) => {
            let msg = format!("request #{n} POST {path}: the body is not valid JSON: {e}");
            lock(&s.violations).push(msg.clone());
            rec.body = Value::String(String::from_utf8_lossy(raw).into_owned());
            s.record(rec);
            return Err(Box::new(json_response(
                StatusCode::BAD_REQUEST,
                &wire::error_body(format, 400, &msg),
            )));
        }
    };
    let hist = history::analyze(format, &body, s.reused_call_ids);
    if !hist.problems.is_empty() {
        let mut violations = lock(&s.violations);
        for p in &hist.problems {
            violations.push(format!("request #{n} POST {path}: {p}"));
        }
        drop(violations);
        let msg = format!(
            "agentloop-testkit: tool-call invariant violated: {}",
            hist.problems.join("; ")
        );
        tracing::warn!(request = n, %path, "{msg}");
        if s.record {
            rec.body = body;
        }
        s.record(rec);
        let status = StatusCode::from_u16(s.reject_status).unwrap_or(StatusCode::BAD_REQUEST);
        return Err(Box::new(json_response(
            status,
            &wire::error_body(format, s.reject_status, &msg),
        )));
    }
    let Some((turn_idx, attempt)) = s.select(format, &hist) else {
        let msg = format!(
            "agentloop-testkit: the script has no turn for this request (history has {} \
             assistant turns, the script has {} turns, repeat is off)",
            hist.turn_index,
            s.script.turns.len()
        );
        tracing::warn!(request = n, %path, "{msg}");
        if s.record {
            rec.body = body;
        }
        s.record(rec);
        let mut err = wire::error_body(format, 500, &msg);
        if let Some(e) = err.get_mut("error").and_then(Value::as_object_mut) {
            e.insert("code".to_string(), Value::from("script_exhausted"));
        }
        return Err(Box::new(json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            &err,
        )));
    };
    Ok((body, turn_idx, attempt, rec))
}

fn status_response(
    format: WireFormat,
    status: u16,
    headers: &BTreeMap<String, String>,
    body: Option<&str>,
) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let text = match body {
        Some(b) => b.to_string(),
        None => wire::error_body(
            format,
            status,
            &format!("agentloop-testkit: injected HTTP {status}"),
        )
        .to_string(),
    };
    let mut resp = (code, text).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.insert(name, value);
        }
    }
    resp
}

/// One step of a streamed response body.
#[derive(Debug)]
enum Step {
    Data(Bytes),
    Sleep(Duration),
    /// Abort the response (the body errors: on HTTP/1.1 hyper drops the connection mid-chunked
    /// body, on HTTP/2 it resets the stream with `INTERNAL_ERROR`).
    Reset,
    /// Send nothing more, keep the connection open.
    Stall,
    /// Send only keep-alive comments from now on, every [`KEEP_ALIVE_EVERY`].
    KeepAlive,
}

/// How often [`Step::KeepAlive`] sends a comment.
const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(50);

/// Turns the rendered events, the turn's delays and the fault into body steps.
fn plan(
    format: WireFormat,
    turn: &Turn,
    rendered: wire::Rendered,
    fault: Option<&Fault>,
) -> Vec<Step> {
    if let Some(Fault::HugeLineBytes(n)) = fault {
        return huge_line_steps(*n);
    }
    let mut frames = rendered.frames;
    if matches!(fault, Some(Fault::EofWithoutTerminal)) {
        frames.truncate(frames.len().saturating_sub(rendered.terminal));
    }
    let tail = fault.and_then(|fault| apply_fault(format, &mut frames, fault));
    paced_steps(turn, frames, tail)
}

/// A single `data:` line of `n` bytes and no end, sent from shared static pieces: the
/// server holds no copy of the line.
fn huge_line_steps(n: usize) -> Vec<Step> {
    static PIECE: [u8; 64 * 1024] = [b'a'; 64 * 1024];
    let mut steps = vec![Step::Data(Bytes::from_static(b"data: "))];
    let mut left = n;
    while left > 0 {
        let len = left.min(PIECE.len());
        steps.push(Step::Data(Bytes::from_static(&PIECE[..len])));
        left -= len;
    }
    steps
}

/// Applies a body fault to the frames; the step that ends the body instead of its close,
/// when the fault has one.
fn apply_fault(format: WireFormat, frames: &mut Vec<Bytes>, fault: &Fault) -> Option<Step> {
    match fault {
        Fault::ReplaceInBody { find, with } => {
            for f in frames.iter_mut() {
                let text = String::from_utf8_lossy(f).replace(find.as_str(), with);
                *f = Bytes::from(text);
            }
            None
        }
        Fault::KeepAliveAfterBytes(k) => {
            // Whole events only: the comments must start on a line of their own.
            frames.truncate(frames_started_before(frames, *k));
            Some(Step::KeepAlive)
        }
        Fault::ResetAfterBytes(k) | Fault::StallAfterBytes(k) => {
            *frames = cut_after(std::mem::take(frames), *k);
            Some(if matches!(fault, Fault::ResetAfterBytes(_)) {
                Step::Reset
            } else {
                Step::Stall
            })
        }
        Fault::MalformedAfterBytes(k) => {
            let at = first_frame_at(frames, *k);
            frames.insert(at, wire::garbage_frame(format));
            None
        }
        _ => None,
    }
}

/// How many frames start before byte `k` of the body.
fn frames_started_before(frames: &[Bytes], k: usize) -> usize {
    let mut off = 0usize;
    frames
        .iter()
        .take_while(|f| {
            let fits = off < k;
            off += f.len();
            fits
        })
        .count()
}

/// The body's first `k` bytes, as frames (the last one cut mid-frame when `k` falls in it).
fn cut_after(frames: Vec<Bytes>, k: usize) -> Vec<Bytes> {
    let mut kept = Vec::new();
    let mut off = 0usize;
    for f in frames {
        if off + f.len() <= k {
            off += f.len();
            kept.push(f);
        } else {
            if k > off {
                kept.push(f.slice(..k - off));
            }
            break;
        }
    }
    kept
}

/// The index of the first frame starting at or after byte `k` (the end when none does).
fn first_frame_at(frames: &[Bytes], k: usize) -> usize {
    let mut off = 0usize;
    for (i, f) in frames.iter().enumerate() {
        if off >= k {
            return i;
        }
        off += f.len();
    }
    frames.len()
}

/// The body steps: the first-byte delay, then the frames (one write when unpaced, else one
/// per frame with the chunk delay between), then the fault's ending step.
fn paced_steps(turn: &Turn, frames: Vec<Bytes>, tail: Option<Step>) -> Vec<Step> {
    let mut steps = Vec::with_capacity(frames.len() * 2 + 2);
    if turn.first_byte_delay_ms > 0 {
        steps.push(Step::Sleep(Duration::from_millis(turn.first_byte_delay_ms)));
    }
    if turn.chunk_delay_ms == 0 {
        // No pacing: one write for the whole body.
        let mut all = BytesMut::with_capacity(frames.iter().map(Bytes::len).sum());
        for f in &frames {
            all.extend_from_slice(f);
        }
        if !all.is_empty() {
            steps.push(Step::Data(all.freeze()));
        }
    } else {
        let delay = Duration::from_millis(turn.chunk_delay_ms);
        for (i, f) in frames.into_iter().enumerate() {
            if i > 0 {
                steps.push(Step::Sleep(delay));
            }
            steps.push(Step::Data(f));
        }
    }
    if let Some(t) = tail {
        steps.push(t);
    }
    steps
}

fn stream_steps(
    steps: Vec<Step>,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static {
    futures::stream::unfold(steps.into_iter(), |mut it| async move {
        loop {
            match it.next()? {
                Step::Data(b) => return Some((Ok(b), it)),
                Step::Sleep(d) => tokio::time::sleep(d).await,
                Step::Reset => {
                    // Let the connection flush what was sent before cutting it.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    return Some((
                        Err(std::io::Error::new(
                            std::io::ErrorKind::ConnectionReset,
                            "agentloop-testkit: injected connection reset",
                        )),
                        it,
                    ));
                }
                Step::Stall => futures::future::pending::<()>().await,
                Step::KeepAlive => {
                    tokio::time::sleep(KEEP_ALIVE_EVERY).await;
                    // Put the step back in front: it repeats until the client leaves.
                    let rest: Vec<Step> = std::iter::once(Step::KeepAlive).chain(it).collect();
                    return Some((
                        Ok(Bytes::from_static(b": keep-alive\n\n")),
                        rest.into_iter(),
                    ));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::wire::Rendered;

    fn frames() -> Rendered {
        Rendered {
            frames: vec![
                Bytes::from_static(b"aaaa"),
                Bytes::from_static(b"bbbb"),
                Bytes::from_static(b"END!"),
            ],
            terminal: 1,
        }
    }

    fn data(steps: &[Step]) -> Vec<u8> {
        steps
            .iter()
            .filter_map(|s| match s {
                Step::Data(b) => Some(b.to_vec()),
                _ => None,
            })
            .flatten()
            .collect()
    }

    #[test]
    fn plans() {
        let t = Turn::default();
        let f = WireFormat::OpenAiChat;
        assert_eq!(data(&plan(f, &t, frames(), None)), b"aaaabbbbEND!");
        assert_eq!(
            data(&plan(f, &t, frames(), Some(&Fault::EofWithoutTerminal))),
            b"aaaabbbb"
        );
        let reset = plan(f, &t, frames(), Some(&Fault::ResetAfterBytes(6)));
        assert_eq!(data(&reset), b"aaaabb");
        assert!(matches!(reset.last(), Some(Step::Reset)));
        let stall = plan(f, &t, frames(), Some(&Fault::StallAfterBytes(4)));
        assert_eq!(data(&stall), b"aaaa");
        assert!(matches!(stall.last(), Some(Step::Stall)));
        let garbage = wire::garbage_frame(f);
        let m = data(&plan(f, &t, frames(), Some(&Fault::MalformedAfterBytes(5))));
        assert_eq!(m, [b"aaaabbbb".as_slice(), &garbage, b"END!"].concat());
        let m0 = data(&plan(f, &t, frames(), Some(&Fault::MalformedAfterBytes(0))));
        assert_eq!(m0, [&garbage[..], b"aaaabbbbEND!"].concat());
        let paced = plan(f, &t.clone().with_delays(5, 1), frames(), None);
        assert_eq!(paced.len(), 6);
    }

    #[test]
    fn replies_name_the_path_model_then_the_body_model() {
        let body = serde_json::json!({"model": "from-body"});
        assert_eq!(reply_model(Some("from-path"), &body), "from-path");
        assert_eq!(reply_model(None, &body), "from-body");
        assert_eq!(reply_model(None, &Value::Null), "mock-model");
    }

    #[test]
    fn usage_is_the_script_s_or_an_estimate_of_at_least_one_input_token() {
        let turn = Turn::default();
        assert_eq!(turn_usage(&turn, 0).input_tokens, 1);
        assert_eq!(turn_usage(&turn, 400).input_tokens, 100);
        let given = Usage {
            input_tokens: 7,
            ..Usage::default()
        };
        let scripted = Turn {
            usage: Some(given),
            ..Turn::default()
        };
        assert_eq!(turn_usage(&scripted, 400), given);
    }

    #[test]
    fn byte_offsets_pick_frames() {
        let fs = frames().frames;
        assert_eq!(frames_started_before(&fs, 0), 0);
        assert_eq!(frames_started_before(&fs, 1), 1);
        assert_eq!(frames_started_before(&fs, 4), 1);
        assert_eq!(frames_started_before(&fs, 5), 2);
        assert_eq!(frames_started_before(&fs, 100), 3);
        assert_eq!(first_frame_at(&fs, 0), 0);
        assert_eq!(first_frame_at(&fs, 4), 1);
        assert_eq!(first_frame_at(&fs, 5), 2);
        assert_eq!(first_frame_at(&fs, 100), 3);
        assert_eq!(cut_after(fs.clone(), 0), Vec::<Bytes>::new());
        assert_eq!(cut_after(fs.clone(), 8), fs[..2].to_vec());
        assert_eq!(
            cut_after(fs.clone(), 9),
            [&fs[..2], &[Bytes::from_static(b"E")]].concat()
        );
        let keep_alive = plan(
            WireFormat::OpenAiChat,
            &Turn::default(),
            frames(),
            Some(&Fault::KeepAliveAfterBytes(5)),
        );
        assert_eq!(data(&keep_alive), b"aaaabbbb");
        assert!(matches!(keep_alive.last(), Some(Step::KeepAlive)));
        let huge = plan(
            WireFormat::OpenAiChat,
            &Turn::default(),
            frames(),
            Some(&Fault::HugeLineBytes(70_000)),
        );
        assert_eq!(data(&huge).len(), 6 + 70_000);
    }
}
