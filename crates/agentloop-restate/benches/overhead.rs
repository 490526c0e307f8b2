//! Per-turn cost of a run on Restate, next to the same run in-process and next to the engine's
//! floor (a handler that only journals no-op steps), for runs whose turns each call
//! `read_file` (a lone read-only call: run and journaled inside the model's step) and runs whose
//! turns each call `write_file` (a lone call of a file tool that writes: a journaled step of its
//! own after the model's); then the throughput of `CONCURRENT`
//! sessions sent at once to one worker and to two (behind the tests' round-robin balancer), all
//! against a real Restate server and the testkit's mock model on loopback.
//!
//! `cargo bench -p agentloop-restate --bench overhead` (needs `.ci/setup-restate` or
//! `AGENTLOOP_RESTATE_SERVER`). Prints one line per figure. `AGENTLOOP_BENCH_TURNS` sets the tool
//! turns per run; `AGENTLOOP_BENCH_KEEP_LOG=PATH` keeps the workers' logs as `PATH.read` and
//! `PATH.write`; `AGENTLOOP_BENCH_NO_PIPELINE=1` starts the workers with `--no-pipeline`;
//! `AGENTLOOP_BENCH_ROUNDS` sets the rounds (11); `AGENTLOOP_BENCH_MODEL_MS` delays each of the
//! mock model's replies (see [`MODEL_MS`]); `AGENTLOOP_BENCH_STORE=sqlite` records every run
//! into a SQLite session store, on both sides alike (see [`STORE`]).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig};
use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::providers::{OpenAiChat, ProviderConfig};
use agentloop::session::{NewSession, SessionRecorder, SessionStore, SqliteStore};
use agentloop::tooling::ToolSpec;
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script};
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
/// Measurement rounds (each: runs, then the floors, back to back); figures are medians.
/// `AGENTLOOP_BENCH_ROUNDS` overrides it (the machine is noisy: more rounds, steadier medians).
static ROUNDS: std::sync::LazyLock<usize> = std::sync::LazyLock::new(|| {
    std::env::var("AGENTLOOP_BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .filter(|&r| r > 0)
        .unwrap_or(11)
});
/// Whether runs record their transcripts, on both sides alike: with
/// `AGENTLOOP_BENCH_STORE=sqlite` the workers mirror into a SQLite file (`--store`) and each
/// in-process run builds its agent with a `SessionRecorder` into a SQLite file of its own, as
/// `agentloop run` does; unset, neither records, and the overhead is the engine's alone.
static STORE: std::sync::LazyLock<bool> =
    std::sync::LazyLock::new(|| match std::env::var("AGENTLOOP_BENCH_STORE").as_deref() {
        Ok("sqlite") => true,
        Ok("" | "none") | Err(_) => false,
        Ok(other) => panic!("AGENTLOOP_BENCH_STORE: \"sqlite\" or \"none\", not {other:?}"),
    });
/// How long the mock model takes before the first byte of each reply, in milliseconds
/// (`AGENTLOOP_BENCH_MODEL_MS`; 0: it answers at once). A hosted model takes hundreds of
/// milliseconds; with a delay, the figures show how much of the engine's journaling pipelining
/// hides under the next model call.
static MODEL_MS: std::sync::LazyLock<u64> = std::sync::LazyLock::new(|| {
    std::env::var("AGENTLOOP_BENCH_MODEL_MS")
        .ok()
        .and_then(|ms| ms.parse().ok())
        .unwrap_or(0)
});
/// Runs of each kind per round, in-process and on Restate.
const RUNS_PER_ROUND: usize = 2;
/// How long each step of `Floor/working_steps` works.
const WORK: std::time::Duration = std::time::Duration::from_millis(1);
/// Sessions sent at once in the throughput figures.
const CONCURRENT: usize = 40;

/// The engine's floor: handlers that journal what a run journals and do nothing else. A virtual
/// object, like `AgentSession` (each measurement on a key of its own, like a new session).
struct Floor;

#[restate_sdk::object]
impl Floor {
    /// `steps` journaled no-op steps.
    #[handler]
    async fn steps(&self, ctx: ObjectContext<'_>, steps: u32) -> Result<u32, HandlerError> {
        for i in 0..steps {
            ctx.run(|| async move { Ok(i) }).name("noop").await?;
        }
        Ok(steps)
    }

    /// `steps` journaled steps that each work for `WORK` before returning (what a model call
    /// does inside its step): the engine's floor for a step that is not instant.
    #[handler]
    async fn working_steps(&self, ctx: ObjectContext<'_>, steps: u32) -> Result<u32, HandlerError> {
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

    /// `GAP_STEPS` journaled steps that each wait `wait_ms` (idle, as a step waiting on a model
    /// does) before returning; returns the microseconds the steps' closures took in all, so the
    /// caller can subtract them and keep the engine's part.
    #[handler]
    async fn waiting_steps(
        &self,
        ctx: ObjectContext<'_>,
        wait_ms: u64,
    ) -> Result<u64, HandlerError> {
        let mut inside = 0;
        for _ in 0..GAP_STEPS {
            inside += ctx
                .run(|| async move {
                    let start = Instant::now();
                    if wait_ms > 0 {
                        tokio::time::sleep(Duration::from_millis(wait_ms)).await;
                    }
                    Ok(start.elapsed().as_micros() as u64)
                })
                .name("wait")
                .await?;
        }
        Ok(inside)
    }
}

/// Steps per invocation of `Floor/waiting_steps`.
const GAP_STEPS: u32 = 11;
/// The waits, in milliseconds, for which the bench reports the engine's cost per step.
const GAPS_MS: [u64; 3] = [0, 1, 20];

/// The engine's part of a step (the invocation's time minus the steps' own) after a wait of
/// `wait_ms` inside each step: median per step over `times` invocations.
async fn engine_per_step(setup: &mut Setup, wait_ms: u64, times: usize) -> f64 {
    let mut per_step = Vec::new();
    for _ in 0..times {
        setup.runs += 1;
        let path = format!("Floor/gap-{}/waiting_steps", setup.runs);
        let start = Instant::now();
        let inside = setup.restate.call(&path, json!(wait_ms)).await.unwrap();
        let engine = start.elapsed().as_secs_f64() * 1e6 - inside.as_f64().unwrap_or(0.0);
        per_step.push(engine / f64::from(GAP_STEPS) / 1e3);
    }
    median(per_step)
}

/// Set in the child process that serves the floor handlers: the port to serve them on.
const SERVE_FLOOR: &str = "AGENTLOOP_BENCH_SERVE_FLOOR";

/// Serves the floor handlers on `port` until killed (the bench's child process).
fn serve_floor(port: u16) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        agentloop_restate::serve_endpoint(
            Endpoint::builder().bind(Floor).build(),
            listener,
            std::future::pending::<()>(),
        )
        .await;
    });
}

/// The workers' extra flags: `--no-pipeline` when `AGENTLOOP_BENCH_NO_PIPELINE` is set.
fn worker_flags() -> Vec<&'static str> {
    match std::env::var_os("AGENTLOOP_BENCH_NO_PIPELINE") {
        Some(_) => vec!["--no-pipeline"],
        None => Vec::new(),
    }
}

/// What each tool turn of a run calls.
#[derive(Clone, Copy)]
enum Turn {
    /// One `read_file` call: a lone read-only call, which runs inside the model's step.
    Read,
    /// One `write_file` call: a lone call of a file tool that writes, a step of its own.
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
    for turn in &mut turns {
        turn["first_byte_delay_ms"] = json!(*MODEL_MS);
    }
    Script::from_json(&json!({ "turns": turns }).to_string()).unwrap()
}

/// One kind of run, ready to be timed: the in-process loop, and a Restate server with a worker
/// (and the floor handlers) registered.
struct Setup {
    kind: Turn,
    _mock: MockServer,
    agent: AgentLoop<WorkspaceDeps>,
    /// What an in-process run needs to build its own recording agent (with [`STORE`]).
    recording: Option<Recording>,
    restate: Restate,
    _worker: support::WorkerProc,
    runs: usize,
}

impl Setup {
    async fn start(
        server: &std::path::Path,
        kind: Turn,
        dir: &std::path::Path,
        floor: &str,
    ) -> Setup {
        let mock = MockServer::start(script(kind));
        let ws = dir.join("ws");
        let workspace = Workspace::new(&ws).unwrap();
        let model = Arc::new(OpenAiChat::new(
            ProviderConfig::new(mock.openai_base_url()).model("mock-model"),
        ));
        let deps = Arc::new(WorkspaceDeps::new(
            workspace.clone(),
            ApprovalPolicy::Always,
        ));
        let tools = builtin::tools::<WorkspaceDeps>(&workspace);
        let recording = STORE.then(|| Recording {
            model: model.clone(),
            deps: deps.clone(),
            tools: tools.clone(),
            store: Arc::new(
                SqliteStore::open(dir.join(format!("local-{}.db", kind.tag()))).unwrap(),
            ),
        });
        let agent = AgentLoop::with_deps(AgentLoopConfig::default(), model, deps)
            .with_tools(tools)
            .unwrap();
        let restate = Restate::start(server).await;
        let spec = WorkerSpec {
            model_base: mock.openai_base_url(),
            workspace: ws,
            store: STORE.then(|| dir.join("sessions.db")),
            approve: "allow",
            log_dir: dir.to_path_buf(),
        };
        let worker = spec
            .start_with(free_port(), kind.tag(), &worker_flags())
            .await;
        restate.register(&format!("http://{}", worker.addr)).await;
        restate.register(floor).await;
        let mut setup = Setup {
            kind,
            _mock: mock,
            agent,
            recording,
            restate,
            _worker: worker,
            runs: 0,
        };
        // Warm up (connections, deployment discovery, the floor handlers).
        setup.local().await;
        setup.durable().await;
        setup.floor("steps", 1).await;
        setup.floor("working_steps", 1).await;
        setup
    }

    /// One run in-process (a new session, with [`STORE`]).
    async fn local(&mut self) -> Duration {
        let start = Instant::now();
        let out = match &self.recording {
            None => self.agent.run(vec![Message::user("go")], vec![]).await,
            Some(recording) => {
                self.runs += 1;
                let session = format!("local-{}", self.runs);
                let agent = recording.agent(&session);
                agent.run(vec![Message::user("go")], vec![]).await
            }
        }
        .unwrap();
        assert_eq!(out.final_text(), "done");
        start.elapsed()
    }

    /// One run on Restate (a new session).
    async fn durable(&mut self) -> Duration {
        self.runs += 1;
        let path = format!("AgentSession/{}-{}/run", self.kind.tag(), self.runs);
        let start = Instant::now();
        let out = self
            .restate
            .call(&path, json!({"prompt": "go"}))
            .await
            .unwrap();
        assert_eq!(out["final_text"], "done");
        start.elapsed()
    }

    /// One invocation of the floor's `handler` with argument `n`, on a new key, right after an
    /// untimed in-process run: the same conditions as a timed durable run, which follows a
    /// timed in-process run (the server and the process serving the handler have been idle
    /// for as long).
    async fn floor(&mut self, handler: &str, n: u32) -> Duration {
        self.local().await;
        self.runs += 1;
        let path = format!("Floor/{}-floor-{}/{handler}", self.kind.tag(), self.runs);
        let start = Instant::now();
        self.restate.call(&path, json!(n)).await.unwrap();
        start.elapsed()
    }
}

/// An in-process run's recording agent, built per run as the worker builds its own (see
/// [`STORE`]).
struct Recording {
    model: Arc<OpenAiChat>,
    deps: Arc<WorkspaceDeps>,
    tools: Vec<ToolSpec<WorkspaceDeps>>,
    store: Arc<SqliteStore>,
}

impl Recording {
    /// A new session `id` and an agent recording into it.
    fn agent(&self, id: &str) -> AgentLoop<WorkspaceDeps> {
        self.store.create(NewSession::new().id(id)).unwrap();
        let recorder = SessionRecorder::new(self.store.clone() as Arc<dyn SessionStore>, id);
        AgentLoop::with_deps(
            AgentLoopConfig::default(),
            self.model.clone(),
            self.deps.clone(),
        )
        .with_tools(self.tools.clone())
        .unwrap()
        .with_emit(move |event: &AgentEvent| recorder.on_event(event))
    }
}

impl Turn {
    fn tag(self) -> &'static str {
        match self {
            Turn::Read => "read",
            Turn::Write => "write",
        }
    }
}

/// What one round measured for one kind of run, per run of `TURNS` tool turns + 1.
struct Round {
    local: Duration,
    durable: Duration,
    /// The engine's floor for the same journal, from no-op steps.
    floor: Duration,
    /// The same, with model steps that work like a model call.
    floor_working: Duration,
}

/// Times one round for `setup`: in-process and durable runs, then the floor handlers
/// journaling what such a run journals, all back to back so they share the machine's load.
async fn round(setup: &mut Setup) -> Round {
    let n = *TURNS as u32;
    let mut local = Duration::ZERO;
    let mut durable = Duration::ZERO;
    for _ in 0..RUNS_PER_ROUND {
        local += setup.local().await;
        durable += setup.durable().await;
    }
    let runs = RUNS_PER_ROUND as u32;
    let (local, durable) = (local / runs, durable / runs);
    // A run journals n + 1 model steps (a read turn's call is inside its step) and, per write
    // turn, a step for the call.
    let model_steps = n + 1;
    let working = |total: Duration| total.saturating_sub(WORK * model_steps);
    let (floor, floor_working) = match setup.kind {
        Turn::Read => (
            setup.floor("steps", model_steps).await,
            working(setup.floor("working_steps", model_steps).await),
        ),
        Turn::Write => {
            let noop = setup.floor("steps", model_steps + n).await;
            // The working floor: the model steps work, the call steps do not. Two invocations
            // pay for starting and ending an invocation twice, a run once: subtract one empty
            // invocation's cost.
            let model = working(setup.floor("working_steps", model_steps).await);
            let calls = setup.floor("steps", n).await;
            let empty = setup.floor("steps", 0).await;
            (noop, (model + calls).saturating_sub(empty))
        }
    };
    Round {
        local,
        durable,
        floor,
        floor_working,
    }
}

fn median(values: Vec<f64>) -> f64 {
    quantile(values, 0.5)
}

/// The `q`-quantile of `values` (nearest rank).
fn quantile(mut values: Vec<f64>, q: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let rank = (q * (values.len() - 1) as f64).round() as usize;
    values[rank.min(values.len() - 1)]
}

fn main() {
    if let Some(port) = std::env::var(SERVE_FLOOR).ok().and_then(|p| p.parse().ok()) {
        serve_floor(port);
        return;
    }
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

        // The floor handlers, served by a process of their own like the worker's endpoint (this
        // bench again, with SERVE_FLOOR set), so the floor is the engine's alone, measured
        // under the same conditions.
        let floor_port = free_port();
        let _floor_server = support::Proc {
            child: std::process::Command::new(std::env::current_exe().unwrap())
                .env(SERVE_FLOOR, floor_port.to_string())
                .spawn()
                .unwrap(),
            name: "floor".to_owned(),
        };
        support::wait_until("the floor handlers", Duration::from_secs(30), async || {
            tokio::net::TcpStream::connect(("127.0.0.1", floor_port))
                .await
                .is_ok()
        })
        .await;
        let floor = format!("http://127.0.0.1:{floor_port}");

        let n = *TURNS as u32;
        println!(
            "turns per run: {n} tool turns + 1 final turn; {} rounds of {RUNS_PER_ROUND} runs, medians; model replies after {} ms; workers {}; {}",
            *ROUNDS,
            *MODEL_MS,
            if worker_flags().is_empty() { "pipelined" } else { "with --no-pipeline" },
            if *STORE {
                "every run recorded into SQLite (workers --store, in-process SessionRecorder)"
            } else {
                "no session store on either side"
            }
        );
        let mut report = Vec::new();
        for kind in [Turn::Read, Turn::Write] {
            let mut setup = Setup::start(&server, kind, dir.path(), &floor).await;
            let mut rounds = Vec::new();
            for _ in 0..*ROUNDS {
                rounds.push(round(&mut setup).await);
            }
            if matches!(kind, Turn::Read) {
                // What the no-op floor leaves out: a step that waits (as every model step does)
                // costs the engine more than one that follows the last at once.
                let mut gaps = Vec::new();
                for wait in GAPS_MS {
                    let engine = engine_per_step(&mut setup, wait, *ROUNDS).await;
                    gaps.push(format!("{engine:.2} ms after {wait} ms"));
                }
                report.push(format!(
                    "engine's part of a journaled step, by the wait inside the step: {}",
                    gaps.join(", ")
                ));
            }
            let ms = |d: Duration| d.as_secs_f64() * 1e3;
            let per_turn = |d: Duration| ms(d) / f64::from(n + 1);
            let local = median(rounds.iter().map(|r| per_turn(r.local)).collect());
            let durable = median(rounds.iter().map(|r| per_turn(r.durable)).collect());
            let overhead = |r: &Round| ms(r.durable.saturating_sub(r.local));
            let ratio = median(rounds.iter().map(|r| overhead(r) / ms(r.floor)).collect());
            let ratio_working =
                median(rounds.iter().map(|r| overhead(r) / ms(r.floor_working)).collect());
            let floor = median(rounds.iter().map(|r| per_turn(r.floor)).collect());
            let journal = match kind {
                Turn::Read => "1 step",
                Turn::Write => "2 steps",
            };
            report.push(format!(
                "{} turns: per turn in-process {local:.2} ms, on Restate {durable:.2} ms; engine \
                 floor for the same journal ({journal} per tool turn) {floor:.2} ms per turn; \
                 durable overhead / floor = {ratio:.2} (no-op steps), {ratio_working:.2} (model \
                 steps that work {WORK:?})",
                kind.tag()
            ));
            let ratios: Vec<f64> = rounds.iter().map(|r| overhead(r) / ms(r.floor)).collect();
            report.push(format!(
                "  rounds (overhead / no-op floor): {} (quartiles {:.2}-{:.2})",
                ratios
                    .iter()
                    .map(|r| format!("{r:.2}"))
                    .collect::<Vec<_>>()
                    .join(" "),
                quantile(ratios.clone(), 0.25),
                quantile(ratios.clone(), 0.75),
            ));
            if let Ok(keep) = std::env::var("AGENTLOOP_BENCH_KEEP_LOG") {
                let tag = kind.tag();
                std::fs::copy(
                    dir.path().join(format!("worker-{tag}.log")),
                    format!("{keep}.{tag}"),
                )
                .unwrap();
            }
        }
        for line in &report {
            println!("{line}");
        }

        let mock = MockServer::start(script(Turn::Read));
        let spec = WorkerSpec {
            model_base: mock.openai_base_url(),
            workspace: ws.clone(),
            store: STORE.then(|| dir.path().join("sessions.db")),
            approve: "allow",
            log_dir: dir.path().to_path_buf(),
        };

        // Throughput: CONCURRENT sessions at once, on one worker, then on two.
        let mut throughput = Vec::new();
        for workers in [1usize, 2] {
            let restate = Restate::start(&server).await;
            let mut procs = Vec::new();
            for w in 0..workers {
                procs.push(
                    spec.start_with(free_port(), &format!("tp{workers}-{w}"), &worker_flags())
                        .await,
                );
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
                .map(|i| restate.spawn_run(&format!("tp-{i}"), "go"))
                .collect();
            for run in runs {
                assert_eq!(run.await.unwrap()["final_text"], "done");
            }
            let elapsed = start.elapsed();
            throughput.push((workers, elapsed));
            drop(procs);
        }

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
