//! OTLP export end to end: the `agentloop` binary, run against the testkit mock model with the
//! standard `OTEL_*` variables pointing at an OTLP receiver started by the test — OTLP/HTTP
//! (protobuf), or OTLP/gRPC (a tonic server) with `OTEL_EXPORTER_OTLP_PROTOCOL=grpc` — sends
//! its GenAI spans (decoded here with `opentelemetry-proto`) and metrics, complete once the
//! process has exited, after a normal end and after Ctrl-C. With `OTEL_SDK_DISABLED=true`
//! nothing is sent.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop_testkit::MockServer;
use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

/// What the receiver got: spans with their resource's `service.name`, and metric names.
#[derive(Default)]
struct Received {
    spans: Vec<(String, Span)>,
    metrics: Vec<String>,
}

/// An OTLP receiver on 127.0.0.1 (HTTP/protobuf, or gRPC), on its own thread and runtime.
struct Receiver {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
    grpc: bool,
}

fn string_of(value: &Option<AnyValue>) -> Option<String> {
    match value.as_ref()?.value.as_ref()? {
        any_value::Value::StringValue(s) => Some(s.clone()),
        any_value::Value::IntValue(n) => Some(n.to_string()),
        any_value::Value::DoubleValue(f) => Some(f.to_string()),
        any_value::Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

fn attrs(attributes: &[KeyValue]) -> HashMap<String, String> {
    attributes
        .iter()
        .filter_map(|kv| Some((kv.key.clone(), string_of(&kv.value)?)))
        .collect()
}

async fn traces(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> Vec<u8> {
    record_spans(&received, ExportTraceServiceRequest::decode(body).unwrap());
    Vec::new()
}

fn record_spans(received: &Mutex<Received>, request: ExportTraceServiceRequest) {
    let mut received = received.lock().unwrap();
    for resource in request.resource_spans {
        let service = resource
            .resource
            .as_ref()
            .and_then(|r| attrs(&r.attributes).get("service.name").cloned())
            .unwrap_or_default();
        for scope in resource.scope_spans {
            for span in scope.spans {
                received.spans.push((service.clone(), span));
            }
        }
    }
}

async fn metrics(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> Vec<u8> {
    record_metrics(
        &received,
        ExportMetricsServiceRequest::decode(body).unwrap(),
    );
    Vec::new()
}

fn record_metrics(received: &Mutex<Received>, request: ExportMetricsServiceRequest) {
    let mut received = received.lock().unwrap();
    for resource in request.resource_metrics {
        for scope in resource.scope_metrics {
            for metric in scope.metrics {
                received.metrics.push(metric.name);
            }
        }
    }
}

/// The OTLP/gRPC trace and metrics services, recording like the HTTP handlers.
#[derive(Clone)]
struct Grpc(Arc<Mutex<Received>>);

#[tonic::async_trait]
impl TraceService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        record_spans(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

#[tonic::async_trait]
impl MetricsService for Grpc {
    async fn export(
        &self,
        request: tonic::Request<ExportMetricsServiceRequest>,
    ) -> Result<tonic::Response<ExportMetricsServiceResponse>, tonic::Status> {
        record_metrics(&self.0, request.into_inner());
        Ok(tonic::Response::new(ExportMetricsServiceResponse::default()))
    }
}

impl Receiver {
    fn start() -> Receiver {
        let received = Arc::new(Mutex::new(Received::default()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let state = received.clone();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let app = Router::new()
                    .route("/v1/traces", post(traces))
                    .route("/v1/metrics", post(metrics))
                    .with_state(state);
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        Receiver {
            addr,
            received,
            grpc: false,
        }
    }

    /// An OTLP/gRPC receiver (a tonic server with the trace and metrics services).
    fn start_grpc() -> Receiver {
        let received = Arc::new(Mutex::new(Received::default()));
        let state = received.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let incoming =
                    tonic::transport::server::TcpIncoming::bind("127.0.0.1:0".parse().unwrap())
                        .unwrap();
                tx.send(incoming.local_addr().unwrap()).unwrap();
                tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(Grpc(state.clone())))
                    .add_service(MetricsServiceServer::new(Grpc(state)))
                    .serve_with_incoming(incoming)
                    .await
                    .unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        Receiver {
            addr,
            received,
            grpc: true,
        }
    }

    fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The spans received so far as `(service, name, attributes, span)`.
    fn spans(&self) -> Vec<(String, String, HashMap<String, String>, Span)> {
        self.received
            .lock()
            .unwrap()
            .spans
            .iter()
            .map(|(service, span)| {
                (
                    service.clone(),
                    span.name.clone(),
                    attrs(&span.attributes),
                    span.clone(),
                )
            })
            .collect()
    }
}

use support::{Scratch, assert_ok, send_signal, server};

impl Scratch {
    /// `agentloop run --json` against `server`, exporting to `receiver`.
    fn export_cmd(&self, server: &MockServer, receiver: &Receiver, prompt: &str) -> Command {
        let mut cmd = self.run_cmd(server);
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())
            .env("OTEL_SERVICE_NAME", "agentloop-e2e")
            .env(
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                if receiver.grpc {
                    "grpc"
                } else {
                    "http/protobuf"
                },
            )
            .arg("--json")
            .arg(prompt)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }
}

fn json_lines(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn a_run_exports_its_genai_spans_and_metrics_over_otlp_http() {
    a_run_exports_its_genai_spans_and_metrics(Receiver::start());
}

#[test]
fn a_run_exports_its_genai_spans_and_metrics_over_otlp_grpc() {
    a_run_exports_its_genai_spans_and_metrics(Receiver::start_grpc());
}

fn a_run_exports_its_genai_spans_and_metrics(receiver: Receiver) {
    let scratch = Scratch::with_notes();
    let server = server(json!({"turns": [
        {"tool_calls": [
            {"id": "call_1", "name": "read_file", "arguments": {"path": "notes.txt"}},
            {"id": "call_2", "name": "read_file", "arguments": {"path": "missing.txt"}}
        ], "usage": {"input_tokens": 120, "output_tokens": 12}},
        {"text": "It says to remember the milk.", "usage": {"input_tokens": 200, "output_tokens": 9}}
    ]}));
    let out = scratch
        .export_cmd(&server, &receiver, "What do my notes say?")
        .output()
        .unwrap();
    assert_ok(&out);
    let events = json_lines(&out.stdout);
    assert_eq!(events.last().unwrap()["type"], "result");
    let end = &events[events.len() - 2];
    assert_eq!(end["type"], "agent_end");
    assert_eq!(end["usage"]["input_tokens"], 320);
    assert_eq!(end["usage"]["output_tokens"], 21);
    assert_eq!(end["turns"], 2);

    // Everything arrived by the time the process exited: no waiting here.
    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(spans.len(), 5, "{names:?}");
    assert!(spans.iter().all(|s| s.0 == "agentloop-e2e"));
    let (_, _, run_attrs, run) = spans
        .iter()
        .find(|s| s.1 == "invoke_agent agentloop")
        .expect("the run span");
    assert!(run.parent_span_id.is_empty());
    assert_eq!(run_attrs["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(run_attrs["gen_ai.usage.input_tokens"], "320");
    assert_eq!(run_attrs["gen_ai.usage.output_tokens"], "21");
    // The conversation id is the session id of the recorded session.
    assert_eq!(
        run_attrs["gen_ai.conversation.id"].len(),
        36,
        "{run_attrs:?}"
    );
    for (_, name, attributes, span) in &spans {
        if span.span_id == run.span_id {
            continue;
        }
        assert_eq!(span.trace_id, run.trace_id, "{name}");
        assert_eq!(span.parent_span_id, run.span_id, "{name}");
        assert!(
            !attributes.contains_key("gen_ai.input.messages")
                && !attributes.contains_key("gen_ai.tool.call.arguments"),
            "contents are opt-in: {name}"
        );
    }
    let chats: Vec<_> = spans.iter().filter(|s| s.1 == "chat mock").collect();
    assert_eq!(chats.len(), 2);
    for (_, _, a, span) in &chats {
        assert_eq!(span.kind, 3, "SPAN_KIND_CLIENT");
        assert_eq!(a["gen_ai.provider.name"], "openai");
        assert_eq!(a["gen_ai.request.model"], "mock");
        // The mock's response ids (`chatcmpl-mock-<n>`).
        assert!(
            a.get("gen_ai.response.id")
                .is_some_and(|id| id.starts_with("chatcmpl-mock-")),
            "{a:?}"
        );
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(
            a["server.port"],
            server.base_url().rsplit(':').next().unwrap()
        );
    }
    let tools: Vec<_> = spans
        .iter()
        .filter(|s| s.1 == "execute_tool read_file")
        .collect();
    assert_eq!(tools.len(), 2);
    let missing = tools
        .iter()
        .find(|s| s.2["gen_ai.tool.call.id"] == "call_2")
        .unwrap();
    assert_eq!(missing.2["error.type"], "tool_error");
    let found = tools
        .iter()
        .find(|s| s.2["gen_ai.tool.call.id"] == "call_1")
        .unwrap();
    assert!(!found.2.contains_key("error.type"));

    let metrics = receiver.received.lock().unwrap().metrics.clone();
    assert!(
        metrics.contains(&"gen_ai.client.token.usage".to_owned()),
        "{metrics:?}"
    );
    assert!(metrics.contains(&"gen_ai.client.operation.duration".to_owned()));
}

#[cfg(unix)]
#[test]
fn spans_are_flushed_after_ctrl_c() {
    spans_are_flushed_after_ctrl_c_to(Receiver::start());
}

#[cfg(unix)]
#[test]
fn spans_are_flushed_after_ctrl_c_over_grpc() {
    spans_are_flushed_after_ctrl_c_to(Receiver::start_grpc());
}

#[cfg(unix)]
fn spans_are_flushed_after_ctrl_c_to(receiver: Receiver) {
    let scratch = Scratch::with_notes();
    // The model takes 30 s to answer: plenty of time to interrupt it.
    let server = server(json!({"turns": [{"text": "too late", "first_byte_delay_ms": 30000}]}));
    let mut child = scratch
        .export_cmd(&server, &receiver, "Take your time.")
        .spawn()
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut lines = stdout.lines();
    loop {
        let line = lines.next().expect("output ended early").unwrap();
        if line.contains("\"turn_start\"") {
            break;
        }
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while server.request_count() == 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    send_signal(child.id(), "INT");
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));

    let spans = receiver.spans();
    let names: Vec<&str> = spans.iter().map(|s| s.1.as_str()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.contains(&"invoke_agent agentloop"), "{names:?}");
    let chat = spans.iter().find(|s| s.1 == "chat mock").unwrap();
    assert_eq!(chat.2["gen_ai.response.finish_reasons"], "aborted");
}

#[test]
fn nothing_is_sent_when_the_sdk_is_disabled() {
    let receiver = Receiver::start();
    let scratch = Scratch::with_notes();
    let server = server(json!({"turns": [{"text": "hello"}]}));
    let out = scratch
        .export_cmd(&server, &receiver, "Hi")
        .env("OTEL_SDK_DISABLED", "true")
        .output()
        .unwrap();
    assert!(out.status.success());
    // The process has exited: anything it exported has arrived.
    assert!(receiver.spans().is_empty());
    assert!(receiver.received.lock().unwrap().metrics.is_empty());
}
