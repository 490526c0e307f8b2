//! Per-turn cost of a run on Restate, next to the same run in-process and next to the engine's
//! floor (a handler that only journals no-op steps, and one that only calls a no-op handler),
//! for runs whose turns each call `read_file` (a lone read-only call: journaled inside the
//! session's step) and runs whose turns each call `write_file` (a mutating call: a durable call
//! of the `ToolExecutor` service); then the throughput of `CONCURRENT`
//! sessions sent at once to one worker and to two (behind the tests' round-robin balancer), all
//! against a real Restate server and the testkit's mock model on loopback.
//!
//! `cargo bench -p agentloop-restate --bench overhead` (needs `.ci/setup-restate` or
//! `AGENTLOOP_RESTATE_SERVER`). Prints one line per figure. `AGENTLOOP_BENCH_TURNS` sets the tool
//! turns per run; `AGENTLOOP_BENCH_KEEP_LOG=PATH` keeps the workers' logs as `PATH.read` and
//! `PATH.write`.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::Instant;

use agentloop::agent::{AgentLoop, AgentLoopConfig};
use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::providers::{OpenAiChat, ProviderConfig};
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script};
use restate_sdk::context::RequestTarget;
use restate_sdk::prelude::*;
use serde_json::json;
use support::{Restate, WorkerSpec, free_port, restate_server_binary};

/// Tool turns per run (each: one model call and one `read_file` call), then a final text turn.
/// `AGENTLOOP_BENCH_TURNS` overrides it (how the per-turn cost grows with the run's length).
static TURNS: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::env::var("AGENTLOOP_BENCH_TURNS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(10)
});
const RUNS: usize = 10;
/// How long each step of `Floor/working_steps` works.
const WORK: std::time::Duration = std::time::Duration::from_millis(1);
/// Sessions sent at once in the throughput figures.
const CONCURRENT: usize = 40;

struct Floor;

#[restate_sdk::service]
impl Floor {
    /// `steps` journaled no-op steps.
    #[handler]
    async fn steps(&self, ctx: Context<'_>, steps: u32) -> Result<u32, HandlerError> {
        for i in 0..steps {
            ctx.run(|| async move { Ok(i) }).name("noop").await?;
        }
        Ok(steps)
    }

    /// `steps` journaled steps that each work for `WORK` before returning (what a model call
    /// does inside its step): the engine's floor for a step that is not instant.
    #[handler]
    async fn working_steps(&self, ctx: Context<'_>, steps: u32) -> Result<u32, HandlerError> {
        for i in 0..steps {
            ctx.run(|| async move {
                let start = Instant::now();
                while start.elapsed() < WORK {
                    tokio::task::yield_now().await;
                }
                Ok(i)
            })
            .name("work")
            .await?;
        }
        Ok(steps)
    }

    /// `calls` calls, one after another, to the no-op handler `Floor/noop` (what a tool call
    /// to the worker's `ToolExecutor` service costs the engine at least).
    #[handler]
    async fn calls(&self, ctx: Context<'_>, calls: u32) -> Result<u32, HandlerError> {
        for i in 0..calls {
            ctx.request::<_, u32>(RequestTarget::service("Floor", "noop"), i)
                .call()
                .await?;
        }
        Ok(calls)
    }

    /// Returns its input.
    #[handler]
    async fn noop(&self, _ctx: Context<'_>, n: u32) -> Result<u32, HandlerError> {
        Ok(n)
    }
}

/// What each tool turn of a run calls.
#[derive(Clone, Copy)]
enum Turn {
    /// One `read_file` call: a lone read-only call, which runs inside the session's own step.
    Read,
    /// One `write_file` call: a mutating call, sent to the `ToolExecutor` service.
    Write,
}

fn script(kind: Turn) -> Script {
    let mut turns: Vec<_> = (0..*TURNS)
        .map(|i| match kind {
            Turn::Read => json!({"tool_calls": [{"id": format!("call_{i}"), "name": "read_file",
                                    "arguments": {"path": "README.md"}}]}),
            Turn::Write => json!({"tool_calls": [{"id": format!("call_{i}"), "name": "write_file",
                                    "arguments": {"path": "out.txt", "content": format!("{i}\n")}}]}),
        })
        .collect();
    turns.push(json!({"text": "done"}));
    Script::from_json(&json!({ "turns": turns }).to_string()).unwrap()
}

/// Per-turn time of `RUNS` runs in-process and on Restate (a fresh server and worker).
async fn per_turn(
    server: &std::path::Path,
    kind: Turn,
    dir: &std::path::Path,
) -> (std::time::Duration, std::time::Duration) {
    let mock = MockServer::start(script(kind));
    let ws = dir.join("ws");

    // In-process: the same loop, tools and mock.
    let workspace = Workspace::new(&ws).unwrap();
    let model = Arc::new(OpenAiChat::new(
        ProviderConfig::new(mock.openai_base_url()).model("mock-model"),
    ));
    let deps = Arc::new(WorkspaceDeps::new(
        workspace.clone(),
        ApprovalPolicy::Always,
    ));
    let agent = AgentLoop::with_deps(AgentLoopConfig::default(), model, deps)
        .with_tools(builtin::tools::<WorkspaceDeps>(&workspace))
        .unwrap();
    let start = Instant::now();
    for _ in 0..RUNS {
        let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
        assert_eq!(out.final_text(), "done");
    }
    let local = start.elapsed() / (RUNS * (*TURNS + 1)) as u32;

    // On Restate.
    let restate = Restate::start(server).await;
    let spec = WorkerSpec {
        model_base: mock.openai_base_url(),
        workspace: ws.clone(),
        store: dir.join("sessions.db"),
        approve: "allow",
        log_dir: dir.to_path_buf(),
    };
    let tag = match kind {
        Turn::Read => "read",
        Turn::Write => "write",
    };
    let worker = spec.start(free_port(), tag).await;
    restate.register(&format!("http://{}", worker.addr)).await;
    // Warm up (connections, deployment discovery).
    restate
        .call(
            &format!("AgentSession/warm-{tag}/run"),
            json!({"prompt": "go"}),
        )
        .await
        .unwrap();
    let start = Instant::now();
    for i in 0..RUNS {
        let out = restate
            .call(
                &format!("AgentSession/{tag}-{i}/run"),
                json!({"prompt": "go"}),
            )
            .await
            .unwrap();
        assert_eq!(out["final_text"], "done");
    }
    let durable = start.elapsed() / (RUNS * (*TURNS + 1)) as u32;
    if let Ok(keep) = std::env::var("AGENTLOOP_BENCH_KEEP_LOG") {
        std::fs::copy(
            dir.join(format!("worker-{tag}.log")),
            format!("{keep}.{tag}"),
        )
        .unwrap();
    }
    (local, durable)
}

fn main() {
    let Some(server) = restate_server_binary() else {
        println!("restate overhead: skipped (no restate-server; run .ci/setup-restate)");
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("README.md"), "hello\n").unwrap();
        let (local_read, durable_read) = per_turn(&server, Turn::Read, dir.path()).await;
        let (local_write, durable_write) = per_turn(&server, Turn::Write, dir.path()).await;
        let mock = MockServer::start(script(Turn::Read));
        let restate = Restate::start(&server).await;
        let spec = WorkerSpec {
            model_base: mock.openai_base_url(),
            workspace: ws.clone(),
            store: dir.path().join("sessions.db"),
            approve: "allow",
            log_dir: dir.path().to_path_buf(),
        };

        // The floor: journaled no-op steps in a handler served by this process.
        let floor_port = free_port();
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", floor_port))
            .await
            .unwrap();
        // Served like the worker's endpoint (TCP_NODELAY), so the floor is the engine's alone.
        tokio::spawn(agentloop_restate::serve_endpoint(
            Endpoint::builder().bind(Floor).build(),
            listener,
            std::future::pending::<()>(),
        ));
        restate
            .register(&format!("http://127.0.0.1:{floor_port}"))
            .await;
        let steps = (*TURNS * 2 + 1) as u32;
        restate.call("Floor/steps", json!(steps)).await.unwrap();
        let start = Instant::now();
        for _ in 0..RUNS {
            restate.call("Floor/steps", json!(steps)).await.unwrap();
        }
        let floor_step = start.elapsed() / (RUNS as u32 * steps);
        restate
            .call("Floor/working_steps", json!(steps))
            .await
            .unwrap();
        let start = Instant::now();
        for _ in 0..RUNS {
            restate
                .call("Floor/working_steps", json!(steps))
                .await
                .unwrap();
        }
        let floor_working_step = (start.elapsed() / (RUNS as u32 * steps)).saturating_sub(WORK);
        println!(
            "engine floor     per step that works {WORK:?} (minus the work): {floor_working_step:?}"
        );
        let calls = *TURNS as u32;
        restate.call("Floor/calls", json!(calls)).await.unwrap();
        let start = Instant::now();
        for _ in 0..RUNS {
            restate.call("Floor/calls", json!(calls)).await.unwrap();
        }
        let floor_call = start.elapsed() / (RUNS as u32 * calls);

        // Throughput: CONCURRENT sessions at once, on one worker, then on two.
        let mut throughput = Vec::new();
        for workers in [1usize, 2] {
            let restate = Restate::start(&server).await;
            let mut procs = Vec::new();
            for w in 0..workers {
                procs.push(spec.start(free_port(), &format!("tp{workers}-{w}")).await);
            }
            let balancer =
                support::balancer::Balancer::start(procs.iter().map(|p| p.addr).collect()).await;
            restate.register(&format!("http://{}", balancer.addr)).await;
            restate
                .call("AgentSession/warm/run", json!({"prompt": "go"}))
                .await
                .unwrap();
            let start = Instant::now();
            let runs: Vec<_> = (0..CONCURRENT)
                .map(|i| {
                    let ingress = restate.ingress.clone();
                    let http = restate.http.clone();
                    tokio::spawn(async move {
                        http.post(format!("{ingress}/AgentSession/tp-{i}/run"))
                            .json(&json!({"prompt": "go"}))
                            .send()
                            .await
                            .unwrap()
                            .json::<serde_json::Value>()
                            .await
                            .unwrap()
                    })
                })
                .collect();
            for run in runs {
                assert_eq!(run.await.unwrap()["final_text"], "done");
            }
            let elapsed = start.elapsed();
            throughput.push((workers, elapsed));
            drop(procs);
        }

        println!(
            "turns per run: {} tool turns + 1 final turn; runs: {RUNS}",
            *TURNS
        );
        println!("engine floor     per step: {floor_step:?} (a no-op ctx.run)");
        println!("engine floor     per call: {floor_call:?} (a call to a no-op handler)");
        let ratio = |overhead: std::time::Duration, floor: std::time::Duration| {
            overhead.as_secs_f64() / floor.as_secs_f64().max(1e-9)
        };
        let read = durable_read.saturating_sub(local_read);
        println!(
            "read_file turns:  in-process {local_read:?}, on Restate {durable_read:?} per turn; \
             overhead {read:?} = {:.2} x (2 x floor step) (journaled: the model reply and the \
             call's result, two steps)",
            ratio(read, 2 * floor_step)
        );
        let write = durable_write.saturating_sub(local_write);
        println!(
            "write_file turns: in-process {local_write:?}, on Restate {durable_write:?} per turn; \
             overhead {write:?} = {:.2} x (floor step + floor call) (journaled: the model reply, \
             then a call of ToolExecutor)",
            ratio(write, floor_step + floor_call)
        );
        for (workers, elapsed) in throughput {
            println!(
                "{CONCURRENT} sessions at once on {workers} worker(s): {elapsed:?} \
                 ({:.1} sessions/s, {:.0} turns/s)",
                CONCURRENT as f64 / elapsed.as_secs_f64(),
                (CONCURRENT * (*TURNS + 1)) as f64 / elapsed.as_secs_f64()
            );
        }
    });
}
