//! The MCP fixture server over stdio, for agentloop's own tests (not a user-facing program).
//!
//! Usage: `agentloop-mcp-test-server [--garbage | --no-init | --spawn-grandchild] [--cancel-log PATH]`.
//! `--garbage` prints non-JSON lines on stdout; `--no-init` never answers `initialize`;
//! `--spawn-grandchild` starts a long `sleep` child first (to check process-group cleanup,
//! its pid is written to `$FIXTURE_GRANDCHILD_PID_FILE`).

#[path = "../../tests/support/fixture.rs"]
mod fixture;

use std::sync::Arc;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let has = |f: &str| args.iter().any(|a| a == f);
    let cancel_log = args
        .iter()
        .position(|a| a == "--cancel-log")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    if has("--spawn-grandchild")
        && let Ok(child) = std::process::Command::new("sleep").arg("300").spawn()
        && let Ok(path) = std::env::var("FIXTURE_GRANDCHILD_PID_FILE")
    {
        let _ = std::fs::write(path, child.id().to_string());
    }
    if has("--garbage") {
        println!("hello, this is not JSON-RPC");
        println!("{{\"neither\": \"is this\"}}");
        tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        return;
    }
    if has("--no-init") {
        // Read (and ignore) everything; never answer.
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await;
        tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        return;
    }
    let fixture = fixture::Fixture {
        state: Arc::new(fixture::FixtureState {
            cancel_log,
            ..Default::default()
        }),
    };
    match fixture.serve(rmcp::transport::stdio()).await {
        Ok(service) => {
            let _ = service.waiting().await;
        }
        Err(e) => eprintln!("fixture server failed: {e}"),
    }
}
