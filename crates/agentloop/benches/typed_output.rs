//! The extra cost of a typed run over `final_text()`: the same one-turn run against a zero-delay
//! model whose answer is a realistic ~2 KB JSON object (a code-review report with ten
//! findings), returned as text (`run` + `final_text()`), as text parsed by hand with serde (no
//! validation), and as a validated, deserialized `Report` (`run_output`, native strategy: JSON
//! extraction, schema validation, deserialization, plus the per-run plan).
//!
//! Run: `cargo bench -p agentloop --bench typed_output`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use agentloop::agent::{AgentLoop, AgentLoopConfig};
use agentloop::model::{FnModel, ScriptedTurn};
use agentloop::output::{Output, OutputStrategy};
use agentloop::transcript::Message;
use criterion::{Criterion, criterion_group, criterion_main};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Severity {
    Info,
    Warning,
    Error,
}

/// One review finding.
#[derive(Debug, Deserialize, JsonSchema)]
struct Finding {
    file: String,
    line: u32,
    severity: Severity,
    message: String,
    suggestion: Option<String>,
}

/// A code-review report.
#[derive(Debug, Deserialize, JsonSchema)]
struct Report {
    title: String,
    summary: String,
    approved: bool,
    score: f64,
    tags: Vec<String>,
    findings: Vec<Finding>,
}

fn report_json() -> String {
    let findings: Vec<_> = (0..10)
        .map(|i| {
            let severity = ["info", "warning", "error"][i % 3];
            json!({
                "file": format!("crates/agentloop/src/module_{i}.rs"),
                "line": 10 + i * 17,
                "severity": severity,
                "message": format!("Finding {i}: this branch clones the context on every turn, \
                                    which grows with the history."),
                "suggestion": if i % 2 == 0 { json!("Borrow it instead.") } else { json!(null) },
            })
        })
        .collect();
    json!({
        "title": "Review of the streaming changes",
        "summary": "The change is sound overall; a few places copy more than they need to and \
                    two error paths lose their cause.",
        "approved": false,
        "score": 7.5,
        "tags": ["performance", "errors", "streaming"],
        "findings": findings,
    })
    .to_string()
}

fn agent(answer: String) -> AgentLoop {
    let model = FnModel::new(move |_req| ScriptedTurn::text(answer.clone()));
    AgentLoop::new(AgentLoopConfig::default(), model)
}

fn bench_typed(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let answer = report_json();
    assert!((1800..2600).contains(&answer.len()), "{}", answer.len());
    let agent = agent(answer);
    let output = Output::<Report>::of().strategy(OutputStrategy::Native);

    let mut group = c.benchmark_group("typed_output_2kb");
    group.bench_function("run_final_text", |b| {
        b.to_async(&rt).iter(|| async {
            let out = agent
                .run(vec![Message::user("review")], Vec::new())
                .await
                .unwrap();
            out.final_text()
        })
    });
    group.bench_function("run_final_text_serde_unvalidated", |b| {
        b.to_async(&rt).iter(|| async {
            let out = agent
                .run(vec![Message::user("review")], Vec::new())
                .await
                .unwrap();
            serde_json::from_str::<Report>(&out.final_text()).unwrap()
        })
    });
    group.bench_function("run_output_validated", |b| {
        b.to_async(&rt).iter(|| async {
            agent
                .run_output(&output, vec![Message::user("review")], Vec::new())
                .await
                .unwrap()
                .value
        })
    });
    group.finish();
}

criterion_group!(benches, bench_typed);
criterion_main!(benches);
