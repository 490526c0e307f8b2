//! Loop overhead per turn against a zero-delay model, for 1, 5 and 25 turns with one tool call
//! each (is per-turn cost flat as the conversation grows?), with and without an event listener,
//! and agent construction time.
//!
//! Run: `cargo bench -p agentloop --bench agent_loop`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentloop::agent::{AgentLoop, AgentLoopConfig};
use agentloop::model::{FnModel, ScriptedTurn};
use agentloop::tooling::Deps;
use agentloop::transcript::Message;
mod common;

use common::echo;
use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use serde_json::json;

/// A model that makes `tool_turns` tool calls and then answers, statelessly across runs (a
/// counter wraps around), so one agent serves every iteration.
fn model(tool_turns: usize) -> FnModel {
    let counter = Arc::new(AtomicUsize::new(0));
    FnModel::new(move |_req| {
        let k = counter.fetch_add(1, Ordering::Relaxed) % (tool_turns + 1);
        if k < tool_turns {
            ScriptedTurn::new().tool_call(format!("call-{k}"), "echo", json!({"text": "hello"}))
        } else {
            ScriptedTurn::text("done")
        }
    })
}

fn agent(tool_turns: usize) -> AgentLoop<Deps> {
    AgentLoop::new(AgentLoopConfig::default(), model(tool_turns))
        .with_tools([echo()])
        .unwrap()
}

fn bench_turns(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("agent_run");
    for turns in [1usize, 5, 25] {
        let quiet = agent(turns);
        group.bench_with_input(BenchmarkId::new("no_listener", turns), &turns, |b, _| {
            b.to_async(&rt).iter(|| async {
                let out = quiet
                    .run(vec![Message::user("go")], Vec::new())
                    .await
                    .unwrap();
                assert_eq!(out.turns as usize, turns + 1);
            })
        });
        let events = Arc::new(AtomicUsize::new(0));
        let e = events.clone();
        let observed = agent(turns).with_emit(move |_ev| {
            e.fetch_add(1, Ordering::Relaxed);
        });
        group.bench_with_input(BenchmarkId::new("with_listener", turns), &turns, |b, _| {
            b.to_async(&rt).iter(|| async {
                observed
                    .run(vec![Message::user("go")], Vec::new())
                    .await
                    .unwrap()
            })
        });
    }
    group.finish();
}

fn bench_construction(c: &mut Criterion) {
    c.bench_function("agent_construction/one_tool", |b| {
        b.iter(|| {
            AgentLoop::new(AgentLoopConfig::default(), model(1))
                .with_tools([echo()])
                .unwrap()
        })
    });
    c.bench_function("agent_construction/no_tools", |b| {
        b.iter(|| AgentLoop::new(AgentLoopConfig::default(), model(1)))
    });
}

criterion_group!(benches, bench_turns, bench_construction);
criterion_main!(benches);
