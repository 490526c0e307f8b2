//! Test support: the fixture server shared with the stdio test binary, the model an agent
//! run in the tests talks to (chat completions on the testkit mock server), a loopback HTTP
//! server for the streamable-HTTP servers the tests mount, and the first check of a connected
//! toolset.
// Each test binary uses its own part of this module.
#![allow(dead_code)]

pub mod fixture;

use std::time::Duration;

use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::tooling::{Deps, ToolSpec};
use agentloop_mcp::{McpToolset, ServerState};
use agentloop_testkit::MockServer;

/// A chat-completions model on the mock `server`: no retries, a 10 s idle timeout.
pub fn mock_model(server: &MockServer) -> OpenAiChat {
    OpenAiChat::new(
        ProviderConfig::new(server.openai_base_url())
            .api_key("test")
            .model("mock")
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10)),
    )
}

/// Serves `router` on a free loopback port, in the background for the rest of the test; the
/// URL of its `/mcp` route, where the tests mount their streamable-HTTP MCP servers.
pub async fn serve_mcp_router(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{addr}/mcp")
}

/// Asserts that the toolset's first server is running; the toolset's tools.
pub async fn running_tools(toolset: &McpToolset) -> Vec<ToolSpec<Deps>> {
    assert!(
        matches!(toolset.servers()[0].1, ServerState::Running { .. }),
        "{:?}",
        toolset.servers()
    );
    toolset.tools::<Deps>().await.unwrap()
}
