//! What the GenAI telemetry costs per W1-shaped run (one model turn with two parallel tool calls,
//! then the final answer; usage on both replies and a priced model, so the cost lookup runs
//! too), in process CPU time (all threads, so the exporters' background work counts):
//!
//! - `none`: no `tracing` subscriber (the spans are disabled callsites);
//! - `in_memory`: the OpenTelemetry layer with the SDK's in-memory exporter (simple processor);
//! - `otlp_http`: the OpenTelemetry layer with a batch processor exporting OTLP/HTTP protobuf to
//!   a local receiver (an in-process HTTP server that discards the body), plus the
//!   `gen_ai.client.*` metrics through a meter provider.
//!
//! Run: `cargo bench -p agentloop --bench telemetry`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentloop::agent::{AgentLoop, AgentLoopConfig, TelemetryConfig};
use agentloop::model::{FnModel, Model, ModelRequest, ModelStream, ScriptedTurn};
use agentloop::telemetry::otlp;
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Usage};
use criterion::{Criterion, criterion_group, criterion_main};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

/// A scripted model that reports itself as OpenAI Chat, so replies get priced (or as a scripted
/// model, which is never priced, for the `none_unpriced` baseline).
struct Priced(FnModel, &'static str);

impl Model for Priced {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        self.0.stream(request)
    }
    fn provider(&self) -> &str {
        self.1
    }
    fn base_url(&self) -> Option<&str> {
        Some("http://127.0.0.1:9/v1")
    }
}

fn w1_model(provider: &'static str) -> Priced {
    let counter = Arc::new(AtomicUsize::new(0));
    let usage = Usage {
        input_tokens: 400,
        cache_read_tokens: 100,
        output_tokens: 30,
        ..Usage::default()
    };
    Priced(
        FnModel::new(move |_req| {
            if counter.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
                ScriptedTurn::new()
                    .tool_call("call-add", "add", json!({"a": 2, "b": 3}))
                    .tool_call("call-upper", "upper", json!({"text": "hi"}))
                    .usage(usage)
            } else {
                ScriptedTurn::text("5 and HI").usage(usage)
            }
        }),
        provider,
    )
}

fn w1_agent(provider: &'static str) -> AgentLoop<Deps> {
    let add = ToolSpec::<Deps>::builder("add", "Add two numbers.")
        .handler(|_c: ToolContext<Deps>, a: Value| async move {
            (a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)).to_string()
        })
        .build()
        .unwrap();
    let upper = ToolSpec::<Deps>::builder("upper", "Upper-case text.")
        .handler(|_c: ToolContext<Deps>, a: Value| async move {
            a["text"].as_str().unwrap_or_default().to_uppercase()
        })
        .build()
        .unwrap();
    let config = AgentLoopConfig {
        model: Some("gpt-4o-mini".into()),
        telemetry: TelemetryConfig {
            agent_name: Some("bench".into()),
            conversation_id: Some("session".into()),
            capture_content: false,
        },
        ..AgentLoopConfig::default()
    };
    AgentLoop::new(config, w1_model(provider))
        .with_tools([add, upper])
        .unwrap()
}

/// CPU time of the whole process (every thread).
fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// A minimal HTTP/1.1 sink for OTLP: reads each request and answers 200 with an empty body.
fn start_sink() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 1 << 16];
                let mut pending = Vec::new();
                loop {
                    let n = match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    pending.extend_from_slice(&buf[..n]);
                    // Answer every complete request (headers + content-length body).
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
                        let len = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if pending.len() < end + 4 + len {
                            break;
                        }
                        pending.drain(..end + 4 + len);
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n",
                        );
                    }
                }
            });
        }
    });
    format!("http://{addr}")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let agent = w1_agent("openai_chat");
    let run = |i: u64| {
        rt.block_on(agent.run(vec![Message::user(format!("Run {i}"))], vec![]))
            .unwrap()
    };
    let unpriced = w1_agent("scripted");
    let mut group = c.benchmark_group("telemetry_w1");
    group.measurement_time(Duration::from_secs(8));

    // The same run without the price lookup: `none` minus this is what cost accounting adds.
    group.bench_function("none_unpriced", |b| {
        b.iter_custom(|iters| {
            let start = process_cpu();
            for i in 0..iters {
                rt.block_on(unpriced.run(vec![Message::user(format!("Run {i}"))], vec![]))
                    .unwrap();
            }
            process_cpu() - start
        })
    });

    group.bench_function("none", |b| {
        b.iter_custom(|iters| {
            let start = process_cpu();
            for i in 0..iters {
                run(i);
            }
            process_cpu() - start
        })
    });

    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber = tracing_subscriber::registry().with(otlp::layer(provider.tracer("bench")));
    let dispatch = tracing::Dispatch::new(subscriber);
    group.bench_function("in_memory", |b| {
        b.iter_custom(|iters| {
            let _guard = tracing::dispatcher::set_default(&dispatch);
            let start = process_cpu();
            for i in 0..iters {
                run(i);
            }
            let spent = process_cpu() - start;
            assert_eq!(
                exporter.get_finished_spans().unwrap().len() as u64,
                iters * 5
            );
            exporter.reset();
            spent
        })
    });

    let endpoint = start_sink();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_endpoint(format!("{endpoint}/v1/traces"))
        .build()
        .unwrap();
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(format!("{endpoint}/v1/metrics"))
        .build()
        .unwrap();
    let meters = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    let subscriber = tracing_subscriber::registry().with(otlp::layer(provider.tracer("bench")));
    let dispatch = tracing::Dispatch::new(subscriber);
    group.bench_function("otlp_http", |b| {
        b.iter_custom(|iters| {
            let _guard = tracing::dispatcher::set_default(&dispatch);
            let start = process_cpu();
            for i in 0..iters {
                run(i);
            }
            // The export is part of the cost: flush inside the measurement.
            provider.force_flush().unwrap();
            process_cpu() - start
        })
    });
    group.finish();
    provider.shutdown().unwrap();
    meters.shutdown().unwrap();
}

criterion_group!(benches, bench);
criterion_main!(benches);
