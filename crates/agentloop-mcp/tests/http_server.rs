//! The built-in tools over streamable HTTP (`serve_builtin_tools_http`, behind `agentloop
//! mcp-server --listen`): agentloop's own client uses them with the bearer token, a request
//! without it gets 401, and a foreign `Host` or `Origin` (DNS rebinding, a hostile page) gets
//! 403 while loopback ones pass.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, Workspace};
use agentloop::tooling::Deps;
use agentloop_mcp::{HttpServeOptions, McpServerConfig, McpToolset, ServerState};
use serde_json::json;
use support::running_tools;

async fn start(options: HttpServeOptions) -> (tempfile::TempDir, std::net::SocketAddr) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("note.txt"), "served over http\n").unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(agentloop_mcp::serve_builtin_tools_http(
        workspace,
        ApprovalPolicy::Never,
        listener,
        options,
    ));
    (dir, addr)
}

const INIT: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// POSTs `initialize` with the given extra headers; returns the status.
async fn post(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> u16 {
    let mut request = reqwest::Client::new()
        .post(format!("http://{addr}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(INIT);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    request.send().await.unwrap().status().as_u16()
}

#[tokio::test]
async fn a_client_with_the_token_uses_the_tools_and_one_without_is_refused() {
    let (_dir, addr) = start(HttpServeOptions::default().with_bearer_token("s3cret")).await;
    let url = format!("http://{addr}/mcp");
    let toolset = McpToolset::connect([
        McpServerConfig::http("ok", &url).with_header("Authorization", "Bearer s3cret")
    ])
    .await
    .unwrap();
    let tools = running_tools(&toolset).await;
    let read = tools
        .iter()
        .find(|t| t.name() == "mcp__ok__read_file")
        .unwrap();
    let out = read
        .call(Arc::new(Deps::new()), json!({"path": "note.txt"}))
        .await
        .unwrap();
    assert!(out.content.contains("served over http"), "{}", out.content);

    for header in [None, Some("Bearer wrong"), Some("Basic s3cret")] {
        let mut config = McpServerConfig::http("no", &url);
        if let Some(h) = header {
            config = config.with_header("Authorization", h);
        }
        let refused = McpToolset::connect([config]).await.unwrap();
        // A 401 is a server asking for authorization: it needs login, it is not broken.
        assert!(
            matches!(refused.servers()[0].1, ServerState::NeedsLogin(_)),
            "{header:?}: {:?}",
            refused.servers()
        );
    }
    assert_eq!(post(addr, &[]).await, 401);
    assert_eq!(post(addr, &[("authorization", "Bearer s3cret")]).await, 200);
}

#[tokio::test]
async fn foreign_hosts_and_origins_are_refused_loopback_ones_pass() {
    let (_dir, addr) =
        start(HttpServeOptions::default().with_allowed_origins(["https://app.example.com".into()]))
            .await;
    let port = addr.port();
    let local_host = format!("localhost:{port}");
    let local_origin = format!("http://localhost:{port}");
    let loopback_origin = format!("http://127.0.0.1:{port}");
    // DNS rebinding: a foreign name resolving here.
    assert_eq!(post(addr, &[("host", "evil.example.com")]).await, 403);
    assert_eq!(
        post(
            addr,
            &[
                ("host", "evil.example.com"),
                ("origin", "http://evil.example.com")
            ]
        )
        .await,
        403
    );
    // A hostile page posting cross-origin.
    assert_eq!(
        post(addr, &[("origin", "http://evil.example.com")]).await,
        403
    );
    assert_eq!(post(addr, &[("origin", "null")]).await, 403);
    // This machine, by name or address, with or without a page origin; an allowed origin.
    assert_eq!(post(addr, &[]).await, 200);
    assert_eq!(post(addr, &[("host", &local_host)]).await, 200);
    assert_eq!(post(addr, &[("origin", &local_origin)]).await, 200);
    assert_eq!(post(addr, &[("origin", &loopback_origin)]).await, 200);
    assert_eq!(
        post(addr, &[("origin", "https://app.example.com")]).await,
        200
    );
}
