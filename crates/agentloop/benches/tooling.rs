//! Micro-benchmarks of the tool executor: `run_tools` for 1 and 8 trivial calls (async and
//! blocking handlers) and argument validation against a compiled JSON Schema.
//!
//! Run: `cargo bench -p agentloop --bench tooling`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use agentloop::tooling::{Deps, Registry, ToolContext, ToolSpec, run_tools};
use agentloop::transcript::ToolCallPart;
use criterion::{Criterion, criterion_group, criterion_main};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string", "maxLength": 1000}},
        "required": ["text"],
        "additionalProperties": false
    })
}

fn registry() -> Registry<Deps> {
    let async_echo = ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(schema())
        .handler(|_c: ToolContext<Deps>, a: EchoArgs| async move { a.text })
        .build()
        .unwrap();
    let blocking_echo = ToolSpec::<Deps>::builder("echo_blocking", "Return the supplied text.")
        .parameters(schema())
        .blocking_handler(|_c: ToolContext<Deps>, a: EchoArgs| a.text)
        .build()
        .unwrap();
    Registry::new(vec![async_echo, blocking_echo]).unwrap()
}

fn calls(tool: &str, n: usize) -> Vec<ToolCallPart> {
    (0..n)
        .map(|i| ToolCallPart::new(format!("call-{i}"), tool, json!({"text": "hello"})))
        .collect()
}

fn bench_run_tools(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let registry = registry();
    let deps = Arc::new(Deps::new());
    let mut group = c.benchmark_group("run_tools");
    for (label, tool) in [("async", "echo"), ("blocking", "echo_blocking")] {
        for n in [1usize, 8] {
            let batch = calls(tool, n);
            group.bench_function(format!("{label}/{n}_calls"), |b| {
                b.to_async(&rt)
                    .iter(|| async { run_tools(&batch, &registry, &deps, None).await })
            });
        }
    }
    group.finish();
}

fn bench_validation(c: &mut Criterion) {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    let good = json!({"text": "hello"});
    let bad = json!({"text": 5, "extra": true});
    let mut group = c.benchmark_group("validation");
    group.bench_function("valid_args", |b| b.iter(|| validator.is_valid(&good)));
    group.bench_function("invalid_args_all_errors", |b| {
        b.iter(|| validator.iter_errors(&bad).count())
    });
    group.finish();
}

criterion_group!(benches, bench_run_tools, bench_validation);
criterion_main!(benches);
