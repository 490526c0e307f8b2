//! What a `pre_tool_use` command hook costs a run: one tool round trip (a tool call, then the
//! answer) with no hook, with a hook whose matcher does not name the tool (should cost
//! nothing measurable: the matcher is a regex check), and with a hook that matches (one
//! process spawn of `sh -c true` per call, with its JSON input on stdin).
//!
//! Run: `cargo bench -p agentloop --bench command_hooks`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentloop::agent::command_hooks::{CommandHook, CommandHooks, HookEvent};
use agentloop::agent::{AgentLoop, AgentLoopConfig};
use agentloop::model::{FnModel, ScriptedTurn};
use agentloop::tooling::Deps;
use agentloop::transcript::Message;
mod common;

use common::echo;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// One tool call, then an answer, statelessly across runs.
fn model() -> FnModel {
    let counter = Arc::new(AtomicUsize::new(0));
    FnModel::new(move |_req| {
        if counter.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
            ScriptedTurn::new().tool_call("call-1", "echo", json!({"text": "hello"}))
        } else {
            ScriptedTurn::text("done")
        }
    })
}

fn agent(hook: Option<CommandHook>) -> AgentLoop<Deps> {
    let agent = AgentLoop::new(AgentLoopConfig::default(), model())
        .with_tools([echo()])
        .unwrap();
    let Some(hook) = hook else {
        return agent;
    };
    let hooks = CommandHooks::new(vec![hook], "bench", std::env::temp_dir());
    let queue = agent.follow_up_queue().clone();
    agent.with_extension(hooks.extension(queue))
}

fn bench_pre_tool_use(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut non_matching = CommandHook::new(HookEvent::PreToolUse, "true");
    non_matching.matcher = Some(regex::Regex::new("shell|write_file").unwrap());
    let cases = [
        ("no_hook", agent(None)),
        ("hook_not_matching", agent(Some(non_matching))),
        (
            "hook_matching",
            agent(Some(CommandHook::new(HookEvent::PreToolUse, "true"))),
        ),
    ];
    let mut group = c.benchmark_group("pre_tool_use_hook");
    for (name, agent) in &cases {
        group.bench_function(*name, |b| {
            b.to_async(&rt).iter(|| async {
                let out = agent
                    .run(vec![Message::user("go")], Vec::new())
                    .await
                    .unwrap();
                assert_eq!(out.turns, 2);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_pre_tool_use);
criterion_main!(benches);
