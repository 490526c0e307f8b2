//! MCP measurements against `@modelcontextprotocol/server-everything` over stdio (installed by
//! `.ci/setup-mcp-servers`): the time to start the server and list its tools through
//! [`McpToolset`], and the cost of one `echo` call through an agentloop tool versus a direct
//! rmcp client call on the same kind of connection (median of many calls, interleaved).
//!
//! Run: `cargo bench -p agentloop-mcp --bench mcp_overhead` (prints one line per figure).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::tooling::Deps;
use agentloop_mcp::{McpServerConfig, McpToolset};
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;
use serde_json::json;

// A multiple of 3 × BLOCK, so each side leads, follows and closes the same number of rounds.
const CALLS: usize = 420;
const STARTS: usize = 5;
const BLOCK: usize = 20;

fn script() -> Option<String> {
    const SERVER: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let dir = agentloop_testkit::external::node_package_dir(SERVER)?;
    Some(dir.join(SERVER).to_string_lossy().into_owned())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

#[tokio::main]
async fn main() {
    let Some(script) = script() else {
        eprintln!("mcp_overhead: server-everything not installed; run .ci/setup-mcp-servers");
        return;
    };
    let config = || McpServerConfig::stdio("everything", "node", [script.clone(), "stdio".into()]);

    // Startup: spawn + initialize + tools/list.
    let mut starts = Vec::new();
    for _ in 0..STARTS {
        let t = Instant::now();
        let toolset = McpToolset::connect([config()]).await.unwrap();
        let tools = toolset.tools::<Deps>().await.unwrap();
        starts.push(t.elapsed());
        assert!(!tools.is_empty());
        toolset.shutdown().await;
    }
    println!(
        "startup to tool list (server-everything, stdio): median {:?} of {STARTS}",
        median(starts)
    );

    // Per-call: agentloop tool vs direct rmcp call, each on its own server process.
    let toolset = McpToolset::connect([config()]).await.unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let echo = tools
        .iter()
        .find(|t| t.name() == "mcp__everything__echo")
        .unwrap()
        .clone();
    let deps = Arc::new(Deps::new());
    // One server process per side, started alike (the toolset's is started above).
    let spawn = || async {
        let mut cmd = tokio::process::Command::new("node");
        cmd.args([script.as_str(), "stdio"]);
        ().serve(rmcp::transport::TokioChildProcess::new(cmd).unwrap())
            .await
            .unwrap()
    };
    let direct = spawn().await;
    let direct_opts = spawn().await;
    let args = json!({"message": "hello"});
    let params = || {
        let mut p = CallToolRequestParams::new("echo");
        p.arguments = args.as_object().cloned();
        p
    };
    // rmcp with the request options agentloop uses (a timeout reset by progress): what those
    // options cost by themselves.
    let call_with_options = |p: CallToolRequestParams| async {
        let options = rmcp::service::PeerRequestOptions::with_timeout(Duration::from_secs(60))
            .reset_timeout_on_progress();
        let request =
            rmcp::model::ClientRequest::CallToolRequest(rmcp::model::CallToolRequest::new(p));
        let handle = direct_opts
            .peer()
            .send_request_with_option(request, options)
            .await
            .unwrap();
        handle.await_response().await.unwrap();
    };
    // Warm up all three.
    for _ in 0..50 {
        echo.call(deps.clone(), args.clone()).await.unwrap();
        direct.call_tool(params()).await.unwrap();
        call_with_options(params()).await;
    }
    // Each side talks to its own server process, and a process that has just answered is
    // faster to answer again (warm caches, not descheduled). Interleaving call by call would
    // charge one side for waking the other's server, so the calls run in blocks of BLOCK per
    // side. Every side gets the same share of the calls and of each place in the rotation: an
    // earlier version ran the options side on the direct side's server, which then answered two
    // blocks in three and was faster for it (a plain rmcp client put in the agentloop side's
    // place measured the same "overhead", about +40 to +70 µs; see docs/BENCHMARKS.md).
    let mut times: [Vec<Duration>; 3] = Default::default();
    for block in 0..CALLS / BLOCK {
        for k in 0..3 {
            let side = (block + k) % 3;
            for _ in 0..BLOCK {
                let p = params();
                let t = Instant::now();
                match side {
                    0 => drop(echo.call(deps.clone(), args.clone()).await.unwrap()),
                    1 => drop(direct.call_tool(p).await.unwrap()),
                    _ => call_with_options(p).await,
                }
                times[side].push(t.elapsed());
            }
        }
    }
    let [ours, theirs, with_options] = times;
    println!(
        "direct rmcp with agentloop's request options (timeout reset on progress): median {:?}",
        median(with_options)
    );
    let (ours, theirs) = (median(ours), median(theirs));
    let diff = ours.as_secs_f64() - theirs.as_secs_f64();
    println!(
        "echo call, median of {CALLS}: agentloop tool {ours:?}, direct rmcp {theirs:?}, overhead {:+.1} µs ({:+.1}%)",
        diff * 1e6,
        diff / theirs.as_secs_f64() * 100.0
    );
    toolset.shutdown().await;
    let _ = direct.cancel().await;
    let _ = direct_opts.cancel().await;
}
