//! Test support for provider tests: a minimal HTTP server that answers every request with a fixed
//! SSE body (optionally written in small pieces) and records the request bodies, plus the
//! fixture corpus loader and the neutral-shape comparison the corpus README describes, and the
//! wire formats for tests that run each adapter against the testkit's mock server.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop::model::{
    MessageAssembler, Model, ModelError, ModelEvent, ModelRequest, ReasoningLevel,
};
use agentloop::providers::{Anthropic, Gemini, OpenAiChat, OpenAiResponses, ProviderConfig};
use agentloop::tooling::{Deps, ToolContext, ToolSchema, ToolSpec};
use agentloop::transcript::{ImagePart, Message, Part, StopReason, ToolArguments, ToolResultPart};
use agentloop_testkit::MockServer;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server that answers each request with `status`, `content-type: text/event-stream` and
/// `body`, written in pieces of `piece` bytes (0 = all at once).
pub struct FixtureServer {
    pub base_url: String,
    pub requests: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FixtureServer {
    pub async fn start(body: Vec<u8>, piece: usize) -> FixtureServer {
        FixtureServer::start_with(200, body, piece).await
    }

    pub async fn start_with(status: u16, body: Vec<u8>, piece: usize) -> FixtureServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = requests.clone();
        let body = Arc::new(body);
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let body = body.clone();
                let recorded = recorded.clone();
                tokio::spawn(async move {
                    let request = read_request(&mut socket).await;
                    if let Some(json) = request {
                        recorded.lock().unwrap().push(json);
                    }
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    if piece == 0 {
                        let _ = socket.write_all(&body).await;
                    } else {
                        for chunk in body.chunks(piece) {
                            if socket.write_all(chunk).await.is_err() {
                                return;
                            }
                            let _ = socket.flush().await;
                        }
                    }
                    let _ = socket.shutdown().await;
                });
            }
        });
        FixtureServer {
            base_url: format!("http://{addr}"),
            requests,
            task,
        }
    }
}

/// Reads one HTTP/1.1 request and returns its JSON body.
async fn read_request(socket: &mut tokio::net::TcpStream) -> Option<Value> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 8192];
    let header_end = loop {
        let n = tokio::time::timeout(Duration::from_secs(5), socket.read(&mut tmp))
            .await
            .ok()?
            .ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&tmp[..n]);
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).to_ascii_lowercase();
    let len = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    while buf.len() < header_end + len {
        let n = socket.read(&mut tmp).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    serde_json::from_slice(&buf[header_end..]).ok()
}

/// A (truncated) PNG, the image a user sends in the request-body tests.
pub fn png_image() -> ImagePart {
    ImagePart {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    }
}

/// The request-body tests' `screenshot` result (call `call_2`): a text and a (truncated) JPEG.
pub fn screenshot_result() -> ToolResultPart {
    let mut screenshot = ToolResultPart::success("call_2", "screenshot", "captured");
    screenshot.images.push(ImagePart {
        media_type: "image/jpeg".into(),
        data: "/9j/4AAQ".into(),
    });
    screenshot
}

/// The tools of the request-body tests' conversation: `read_file` (of a path) and
/// `screenshot`.
pub fn read_file_and_screenshot_tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "read_file".into(),
            description: "Read a text file.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        },
        ToolSchema {
            name: "screenshot".into(),
            description: "Capture the screen.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ]
}

/// The wire formats the provider adapters speak, for tests that run each adapter against the
/// testkit's mock server (which speaks them all).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Wire {
    Chat,
    Responses,
    Anthropic,
    Gemini,
}

impl Wire {
    /// Every wire.
    pub const ALL: [Wire; 4] = [Wire::Chat, Wire::Responses, Wire::Anthropic, Wire::Gemini];

    /// The base URL this wire's adapter is configured with to reach `server` (the OpenAI
    /// wires' ends in `/v1`, as OpenAI's own does).
    pub fn base_url(self, server: &MockServer) -> String {
        match self {
            Wire::Chat | Wire::Responses => server.openai_base_url(),
            Wire::Anthropic | Wire::Gemini => server.base_url(),
        }
    }

    /// This wire's adapter, configured with `config`.
    pub fn adapter(self, config: ProviderConfig) -> Arc<dyn Model> {
        match self {
            Wire::Chat => Arc::new(OpenAiChat::new(config)),
            Wire::Responses => Arc::new(OpenAiResponses::new(config)),
            Wire::Anthropic => Arc::new(Anthropic::new(config)),
            Wire::Gemini => Arc::new(Gemini::new(config)),
        }
    }

    /// The path on the mock server that streams this wire's reply, as a redirect's same-origin
    /// location (the mock serves the OpenAI paths with and without `/v1`).
    pub fn stream_path(self) -> &'static str {
        match self {
            Wire::Chat => "/chat/completions",
            Wire::Responses => "/responses",
            Wire::Anthropic => "/messages",
            Wire::Gemini => "/v1/models/mock:streamGenerateContent?alt=sse",
        }
    }
}

/// One corpus case.
pub struct Case {
    pub name: String,
    pub body: Vec<u8>,
    pub expect: Value,
}

pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers")
}

/// Loads every case of a corpus folder (`openai-chat`, `anthropic`, `openai-responses`).
pub fn cases(folder: &str) -> Vec<Case> {
    let dir = fixtures_dir().join(folder);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cases.json")).unwrap()).unwrap();
    manifest
        .as_array()
        .unwrap()
        .iter()
        .map(|c| Case {
            name: c["case"].as_str().unwrap().to_owned(),
            body: std::fs::read(dir.join(c["file"].as_str().unwrap())).unwrap(),
            expect: c["expect"].clone(),
        })
        .collect()
}

/// Every reasoning setting a request can carry, by name (`none`: not set).
pub const REASONING_LEVELS: [(&str, Option<ReasoningLevel>); 7] = [
    ("none", None),
    ("off", Some(ReasoningLevel::Off)),
    ("minimal", Some(ReasoningLevel::Minimal)),
    ("low", Some(ReasoningLevel::Low)),
    ("medium", Some(ReasoningLevel::Medium)),
    ("high", Some(ReasoningLevel::High)),
    ("xhigh", Some(ReasoningLevel::Xhigh)),
];

/// The whole manifest entry (`FOLDER/cases.json`) of case `name`, where the corpus loader reads
/// only its `expect`.
pub fn manifest_entry(folder: &str, name: &str) -> Option<Value> {
    let path = fixtures_dir().join(folder).join("cases.json");
    let manifest: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    manifest
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["case"] == name)
        .cloned()
}

/// Case `name` of the corpus folder `folder`.
pub fn corpus_case(folder: &str, name: &str) -> Case {
    cases(folder)
        .into_iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no case {name} in {folder}"))
}

/// Asserts that `message` says its stream ended before the terminal event.
pub fn assert_cut_short(message: &Message) {
    assert!(
        message
            .error_message
            .as_deref()
            .unwrap_or("")
            .contains("ended before its terminal event"),
        "{:?}",
        message.error_message
    );
}

pub fn stop_name(s: Option<StopReason>) -> &'static str {
    match s {
        Some(StopReason::Stop) => "stop",
        Some(StopReason::Length) => "length",
        Some(StopReason::ToolUse) => "tool_use",
        Some(StopReason::Refusal) => "refusal",
        Some(StopReason::Error) => "error",
        Some(StopReason::Aborted) => "aborted",
        _ => "none",
    }
}

/// Compares an assembled message with a corpus `expect` object (README "How a test should use
/// it"). Refusal text is kept as the message's text with stop reason `refusal`.
pub fn assert_matches(case: &str, message: &Message, expect: &Value) {
    let stop = stop_name(message.stop_reason);
    if let Some(want) = expect.get("stop_reason").and_then(Value::as_str) {
        assert_eq!(stop, want, "{case}: stop reason");
    }
    let text = message.text();
    if let Some(refusal) = expect.get("refusal").and_then(Value::as_str) {
        assert_eq!(stop, "refusal", "{case}: refusal stop");
        assert_eq!(text, refusal, "{case}: refusal text");
    } else {
        assert_eq!(text, expect["text"].as_str().unwrap_or(""), "{case}: text");
    }
    if let Some(want) = expect.get("thinking").and_then(Value::as_str) {
        let thinking: String = message
            .content
            .iter()
            .filter_map(|p| match p {
                Part::Thinking(t) => Some(t.thinking.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thinking, want, "{case}: thinking");
    }
    let calls: Vec<Value> = message
        .tool_calls()
        .map(|c| {
            let args = match &c.arguments {
                ToolArguments::Json(v) => v.clone(),
                ToolArguments::Unparsed(raw) => json!({"_raw": raw}),
            };
            json!({"id": c.id, "name": c.tool_name, "arguments": args})
        })
        .collect();
    let want_calls = expect["tool_calls"].as_array().cloned().unwrap_or_default();
    assert_eq!(calls, want_calls, "{case}: tool calls");
    if let Some(usage) = expect.get("usage") {
        let got = message.usage.unwrap_or_default();
        assert_eq!(
            got.input_tokens + got.cache_read_tokens,
            usage["input_tokens"].as_u64().unwrap(),
            "{case}: input tokens"
        );
        assert_eq!(
            got.output_tokens,
            usage["output_tokens"].as_u64().unwrap(),
            "{case}: output tokens"
        );
    }
    if let Some(error) = expect.get("error") {
        let msg = message.error_message.clone().unwrap_or_default();
        if let Some(m) = error.get("message").and_then(Value::as_str) {
            assert!(msg.contains(m), "{case}: error message {msg:?} lacks {m:?}");
        }
    }
}

/// Everything one model call streamed: every event in order, and the terminal message with its
/// error when the call failed.
pub struct Capture {
    pub events: Vec<ModelEvent>,
    pub message: Message,
    pub error: Option<ModelError>,
}

impl Capture {
    /// The deltas, assembled the way the agent loop does for a partial message.
    pub fn streamed(&self) -> Message {
        let mut assembler = MessageAssembler::new();
        for event in &self.events {
            if let ModelEvent::Delta(d) = event {
                assembler.push(d);
            }
        }
        assembler.to_message(StopReason::Stop)
    }
}

/// Runs one model call to its end and keeps what it streamed. The stream must end with exactly
/// one terminal event (`Done` or `Error`), and within a minute (a hang guard).
pub async fn capture(model: &dyn Model, request: ModelRequest<'_>) -> Capture {
    let events: Vec<ModelEvent> =
        tokio::time::timeout(Duration::from_secs(60), model.stream(request).collect())
            .await
            .expect("the model call did not end within a minute");
    let (message, error) = match events.last() {
        Some(ModelEvent::Done(m)) => (m.clone(), None),
        Some(ModelEvent::Error { message, error }) => (message.clone(), Some(error.clone())),
        other => panic!("the stream must end with a terminal event, got {other:?}"),
    };
    let terminals = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::Done(_) | ModelEvent::Error { .. }))
        .count();
    assert_eq!(terminals, 1, "exactly one terminal event");
    Capture {
        events,
        message,
        error,
    }
}

/// `capture` of the plainest request: one user message, "hi".
pub async fn capture_hi(model: &dyn Model) -> Capture {
    capture(model, ModelRequest::new(vec![Message::user("hi")])).await
}

/// The text of a message's thinking parts, joined.
pub fn thinking_text(m: &Message) -> String {
    m.content
        .iter()
        .filter_map(|p| match p {
            Part::Thinking(t) => Some(t.thinking.as_str()),
            _ => None,
        })
        .collect()
}

/// A message's tool calls without their provider data (which deltas do not carry): id, tool
/// name and arguments.
pub fn call_triples(m: &Message) -> Vec<(String, String, ToolArguments)> {
    m.tool_calls()
        .map(|c| (c.id.clone(), c.tool_name.clone(), c.arguments.clone()))
        .collect()
}

/// The deltas, replayed through the loop's assembler, say the same as the terminal message
/// (what a UI shows while streaming is what gets recorded): the same text, thinking and tool
/// calls.
pub fn assert_deltas_agree(case: &str, outcome: &Capture) {
    let streamed = outcome.streamed();
    assert_eq!(streamed.text(), outcome.message.text(), "{case}: text");
    assert_eq!(
        thinking_text(&streamed),
        thinking_text(&outcome.message),
        "{case}: thinking"
    );
    assert_eq!(
        call_triples(&streamed),
        call_triples(&outcome.message),
        "{case}: tool calls"
    );
}

/// Accepts one request, returns its head (request line and headers, lowercased) and answers
/// with `body` as an event stream.
pub async fn capture_one(body: Vec<u8>) -> (String, tokio::task::JoinHandle<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = Vec::new();
        let mut tmp = [0u8; 8192];
        let head_end = loop {
            let n = socket.read(&mut tmp).await.unwrap();
            assert!(n > 0, "the request ended early");
            buf.extend_from_slice(&tmp[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = socket.read(&mut tmp).await.unwrap();
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&tmp[..n]);
        }
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
            body.len()
        );
        socket.write_all(response.as_bytes()).await.unwrap();
        socket.write_all(&body).await.unwrap();
        let _ = socket.shutdown().await;
        head
    });
    (base, task)
}

/// A tool `lookup` that answers "definition of WORD" for its `word`.
pub fn lookup() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("lookup", "Look a word up.")
        .handler(|_c: ToolContext<Deps>, a: Value| async move {
            format!("definition of {}", a["word"].as_str().unwrap_or("?"))
        })
        .build()
        .unwrap()
}
