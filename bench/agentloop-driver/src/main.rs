//! agentloop side of the overhead benchmark: the real `OpenAiChat` provider against the mock
//! server, real tools, the real loop. Prints one JSON line.

#[path = "../../common.rs"]
mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::providers::{HttpVersion, OpenAiChat, ProviderConfig};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use common::*;
use serde_json::{Value, json};

static TOOL_CALLS: AtomicU64 = AtomicU64::new(0);

fn tools() -> Vec<ToolSpec<Deps>> {
    let add = ToolSpec::<Deps>::builder("add", "Add two integers.")
        .parameters(json!({"type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"], "additionalProperties": false}))
        .handler(|_ctx: ToolContext<Deps>, args: Value| async move {
            TOOL_CALLS.fetch_add(1, Relaxed);
            (args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string()
        })
        .build()
        .expect("add tool");
    let upper = ToolSpec::<Deps>::builder("upper", "Upper-case a text.")
        .parameters(json!({"type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": false}))
        .handler(|_ctx: ToolContext<Deps>, args: Value| async move {
            TOOL_CALLS.fetch_add(1, Relaxed);
            args["text"].as_str().unwrap_or_default().to_uppercase()
        })
        .build()
        .expect("upper tool");
    vec![add, upper]
}

fn agent(a: &Args) -> AgentLoop {
    let version = if a.http2 { HttpVersion::Http2PriorKnowledge } else { HttpVersion::Auto };
    let provider = OpenAiChat::new(
        ProviderConfig::new(&a.base_url).api_key("dummy").model("mock-model").http_version(version),
    );
    let config = AgentLoopConfig { model: Some("mock-model".into()), ..AgentLoopConfig::default() };
    AgentLoop::new(config, provider).with_tools(tools()).expect("tools")
}

async fn run_once(agent: &AgentLoop, prompt: String, ctx: Vec<Message>, expect: &str) -> Vec<Message> {
    let out = agent.run(vec![Message::user(prompt)], ctx).await.expect("run failed");
    assert_eq!(out.stop, RunStop::Done, "run did not finish");
    assert_eq!(out.final_text(), expect, "final text mismatch");
    out.context
}

async fn w1(a: &Args) -> Value {
    let agent = agent(a);
    // warm-up run (connection pool, lazy statics), not measured
    run_once(&agent, "warm-up".into(), vec![], W1_FINAL).await;
    TOOL_CALLS.store(0, Relaxed);
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    let (c0, t0) = (cpu_us(), Instant::now());
    for i in 0..a.runs {
        let (c, t) = (cpu_us(), Instant::now());
        run_once(&agent, format!("Run {i}: add 2 and 3, upper-case hi."), vec![], W1_FINAL).await;
        cpu.push(cpu_us() - c);
        wall.push(us_since(t));
    }
    let (ctot, ttot) = (cpu_us() - c0, us_since(t0));
    let tools = TOOL_CALLS.load(Relaxed);
    assert_eq!(tools, 2 * a.runs as u64, "tool invocations");
    json!({"workload": "w1", "runs": a.runs, "tool_calls": tools, "cpu_us": cpu, "wall_us": wall,
           "cpu_total_us": ctot, "wall_total_us": ttot})
}

async fn w2(a: &Args) -> Value {
    let agent = agent(a);
    run_once(&agent, "warm-up".into(), vec![], &w2_final(0)).await;
    TOOL_CALLS.store(0, Relaxed);
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _s in 0..a.runs {
        let (mut sc, mut sw) = (Vec::new(), Vec::new());
        let mut ctx = Vec::new();
        for i in 0..25 {
            let (c, t) = (cpu_us(), Instant::now());
            ctx = run_once(&agent, format!("Turn {i}: add {i} and 1."), ctx, &w2_final(i)).await;
            sc.push(cpu_us() - c);
            sw.push(us_since(t));
        }
        assert_eq!(ctx.len(), 25 * 4, "history length");
        cpu.push(sc);
        wall.push(sw);
    }
    let tools = TOOL_CALLS.load(Relaxed);
    assert_eq!(tools, 25 * a.runs as u64, "tool invocations");
    json!({"workload": "w2", "runs": a.runs, "tool_calls": tools, "turn_cpu_us": cpu, "turn_wall_us": wall})
}

async fn w3(a: &Args) -> Value {
    let k = a.concurrency;
    let agent = Arc::new(agent(a));
    run_once(&agent, "warm-up".into(), vec![], W3_FINAL).await;
    w3_sessions(k, &TOOL_CALLS, |i| {
        let agent = agent.clone();
        async move {
            run_once(&agent, format!("Session {i}"), vec![], W3_FINAL).await;
        }
    })
    .await
}

fn main() {
    let a = args();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let mut v = rt.block_on(async {
        match a.workload.as_str() {
            "w1" => w1(&a).await,
            "w2" => w2(&a).await,
            "w3" => w3(&a).await,
            w => panic!("unknown workload {w}"),
        }
    });
    v["framework"] = json!(if a.http2 { "agentloop-h2" } else { "agentloop" });
    v["ok"] = json!(true);
    println!("{v}");
}
