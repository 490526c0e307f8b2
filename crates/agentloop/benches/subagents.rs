//! What a sub-agent call costs: one parent run whose model delegates one task and then answers,
//! with the task done (a) by a plain tool returning the answer and (b) by a sub-agent whose
//! child loop answers in one turn (the `task` path: [`SubAgent`]), plus (c) that child agent run
//! on its own. (b) − (a) is what the child's loop adds to the parent's run; set against (c),
//! what running it as a child (the event relay, the run scope, the usage roll-up) adds to an
//! agent run's own overhead. Each variant's cost is this thread's CPU time per run (the
//! current-thread runtime and the zero-delay model keep all the work on it); the variants are
//! measured interleaved, round after round, and the medians over the rounds are compared, so
//! the ratio comes from one run on a shared machine.
//!
//! (c) runs the child back to back with itself, so its code and data stay hot in the caches
//! and branch predictors; inside (b) the child runs between the parent's turns, which evict
//! part of that. So the benchmark also measures (c′): the same child run, each one right after
//! a run of the plain parent (a), timed on its own (less the cost of reading the clock). (b) − (a)
//! set against (c′) compares a child with a run in the same conditions; against (c), with a
//! run in a tight loop.
//!
//! Run: `cargo bench -p agentloop --bench subagents`
//!
//! Profile one variant alone (for `perf record`): set `SUBAGENTS_PROFILE` to `plain`, `task` or
//! `alone`, with `+listener` for the variant with an `emit` listener (e.g.
//! `SUBAGENTS_PROFILE=task+listener`); it runs that variant `SUBAGENTS_PROFILE_RUNS` times
//! (default [`RUNS`] × ([`ROUNDS`] + 1)), reads no clock and prints nothing. Instructions per
//! run under callgrind: the difference of two such processes (e.g. 1,000 and 3,000 runs) over
//! the difference of their runs.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentloop::agent::{AgentLoop, AgentLoopConfig, SubAgent};
use agentloop::model::{FnModel, ScriptedTurn};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use serde_json::{Value, json};

/// Runs per variant per round, and rounds.
const RUNS: u32 = 200;
const ROUNDS: usize = 101;

/// A parent model that calls `tool` once and then answers (stateless across runs).
fn parent_model(tool: &'static str) -> FnModel {
    let counter = Arc::new(AtomicUsize::new(0));
    FnModel::new(move |_req| {
        if counter.fetch_add(1, Ordering::Relaxed) % 2 == 0 {
            ScriptedTurn::new().tool_call("call-1", tool, json!({"prompt": "Capital of France?"}))
        } else {
            ScriptedTurn::text("Done.")
        }
    })
}

/// The child: one turn, its answer.
fn child() -> AgentLoop<Deps> {
    AgentLoop::new(
        AgentLoopConfig {
            system_prompt: Some("Answer the question.".into()),
            ..AgentLoopConfig::default()
        },
        FnModel::new(|_req| ScriptedTurn::text("Paris.")),
    )
}

/// The same work as a plain tool.
fn plain_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("answer", "Answers a question.")
        .parameters(json!({
            "type": "object",
            "properties": {"prompt": {"type": "string"}},
            "required": ["prompt"],
            "additionalProperties": false
        }))
        .handler(|_c: ToolContext<Deps>, _a: Value| async move { "Paris.".to_owned() })
        .build()
        .unwrap()
}

fn thread_cpu_ns() -> u128 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u128 * 1_000_000_000 + t.tv_nsec as u128
}

/// CPU µs per run of `agent` on `prompt`, over [`RUNS`] runs.
fn per_run(rt: &tokio::runtime::Runtime, agent: &AgentLoop<Deps>) -> f64 {
    let start = thread_cpu_ns();
    for _ in 0..RUNS {
        let out = rt
            .block_on(agent.run(vec![Message::user("go")], Vec::new()))
            .unwrap();
        assert_eq!(out.stop, agentloop::agent::RunStop::Done);
    }
    (thread_cpu_ns() - start) as f64 / 1000.0 / f64::from(RUNS)
}

/// CPU µs per run of `child` when each run comes right after a run of `parent` (which is not
/// counted), over [`RUNS`] pairs: the child in a cache state like the one it finds inside a
/// parent's run.
/// The clock is read around each child run, so the cost of one reading is measured in the same
/// loop and taken off.
fn per_run_after(
    rt: &tokio::runtime::Runtime,
    parent: &AgentLoop<Deps>,
    child: &AgentLoop<Deps>,
) -> f64 {
    let run = |agent: &AgentLoop<Deps>| {
        let out = rt
            .block_on(agent.run(vec![Message::user("go")], Vec::new()))
            .unwrap();
        assert_eq!(out.stop, agentloop::agent::RunStop::Done);
    };
    let (mut child_ns, mut clock_ns) = (0, 0);
    for _ in 0..RUNS {
        run(parent);
        let start = thread_cpu_ns();
        run(child);
        let end = thread_cpu_ns();
        child_ns += end - start;
        clock_ns += thread_cpu_ns() - end;
    }
    child_ns.saturating_sub(clock_ns) as f64 / 1000.0 / f64::from(RUNS)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn with_listener(agent: AgentLoop<Deps>) -> AgentLoop<Deps> {
    let events = Arc::new(AtomicUsize::new(0));
    agent.with_emit(move |_e| {
        events.fetch_add(1, Ordering::Relaxed);
    })
}

/// The variants' agents: plain tool call, task call, child alone.
fn build(listener: bool) -> [AgentLoop<Deps>; 3] {
    let plain = AgentLoop::new(AgentLoopConfig::default(), parent_model("answer"))
        .with_tools([plain_tool()])
        .unwrap();
    let task = AgentLoop::new(AgentLoopConfig::default(), parent_model("helper"))
        .with_tools([SubAgent::new(child(), "helper", "Answers questions.")
            .into_tool()
            .unwrap()])
        .unwrap();
    let alone = child();
    if listener {
        [
            with_listener(plain),
            with_listener(task),
            with_listener(alone),
        ]
    } else {
        [plain, task, alone]
    }
}

/// Runs one variant only (`SUBAGENTS_PROFILE`), `runs` times, for a profiler. It reads no
/// clock: under valgrind, rustix's vDSO lookup cannot run.
#[inline(never)]
fn profile_runs(rt: &tokio::runtime::Runtime, agent: &AgentLoop<Deps>, runs: u32) {
    for _ in 0..runs {
        let out = rt
            .block_on(agent.run(vec![Message::user("go")], Vec::new()))
            .unwrap();
        assert_eq!(out.stop, agentloop::agent::RunStop::Done);
    }
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if let Ok(which) = std::env::var("SUBAGENTS_PROFILE") {
        let (variant, listener) = match which.strip_suffix("+listener") {
            Some(variant) => (variant, true),
            None => (which.as_str(), false),
        };
        let index = ["plain", "task", "alone"]
            .iter()
            .position(|v| *v == variant)
            .expect("SUBAGENTS_PROFILE: plain, task or alone, optionally with +listener");
        let agent = &build(listener)[index];
        let runs = std::env::var("SUBAGENTS_PROFILE_RUNS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(RUNS * (ROUNDS as u32 + 1));
        profile_runs(&rt, agent, runs);
        return;
    }
    println!(
        "sub-agent call cost: CPU µs per run, median of {ROUNDS} interleaved rounds of {RUNS} runs"
    );
    for listener in [false, true] {
        let agents = build(listener);
        // Warm-up: allocator, schema caches.
        for agent in &agents {
            per_run(&rt, agent);
        }
        let mut samples = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
        for _ in 0..ROUNDS {
            for (agent, sample) in agents.iter().zip(samples.iter_mut()) {
                sample.push(per_run(&rt, agent));
            }
            samples[3].push(per_run_after(&rt, &agents[0], &agents[2]));
        }
        let [plain, task, alone, after] = samples.map(median);
        let added = task - plain;
        println!(
            "{}: plain tool call {plain:.1} µs | task call, one-turn child {task:.1} µs | \
             child run alone {alone:.1} µs (after a parent run: {after:.1} µs) | added by the \
             child {added:.1} µs = {:.3} × the child run alone, {:.3} × the child run after a \
             parent run",
            if listener {
                "with a listener"
            } else {
                "no listener"
            },
            added / alone,
            added / after,
        );
    }
}
