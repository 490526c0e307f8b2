//! `agentloop mcp-server --listen 127.0.0.1:0` as a real process: it prints its URL, agentloop's
//! own MCP client uses the built-in tools over streamable HTTP with the bearer token from
//! `AGENTLOOP_MCP_SERVER_TOKEN`, and a client without it, or a request from a foreign origin,
//! is refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;

use agentloop::tooling::Deps;
use agentloop_mcp::{McpServerConfig, McpToolset, ServerState};
use serde_json::json;

mod support;

use support::Scratch;

/// Kills the server when the test ends, however it ends.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the server on a free port; returns it and its URL (read from its stderr).
fn start(scratch: &Scratch, token: &str) -> (Server, String) {
    let mut child = scratch
        .env_cmd()
        .args([
            "mcp-server",
            "--approve",
            "allow",
            "--listen",
            "127.0.0.1:0",
            "--workspace",
        ])
        .arg(scratch.ws())
        .env("AGENTLOOP_MCP_SERVER_TOKEN", token)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Server(child);
    let mut line = String::new();
    BufReader::new(stderr).read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("agentloop: MCP server listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_owned();
    (server, url)
}

#[tokio::test]
async fn the_builtin_tools_over_http_with_a_bearer_token_and_origin_checks() {
    let dir = Scratch::new();
    std::fs::write(dir.ws().join("hello.txt"), "hello over http\n").unwrap();
    let (_server, url) = start(&dir, "tok-123");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"),
        "{url}"
    );

    let toolset = McpToolset::connect([
        McpServerConfig::http("al", &url).with_header("Authorization", "Bearer tok-123")
    ])
    .await
    .unwrap();
    assert!(
        matches!(toolset.servers()[0].1, ServerState::Running { .. }),
        "{:?}",
        toolset.servers()
    );
    let tools = toolset.tools::<Deps>().await.unwrap();
    let call = |name: &'static str, args: serde_json::Value| {
        let spec = tools.iter().find(|t| t.name() == name).unwrap().clone();
        async move { spec.call(Arc::new(Deps::new()), args).await }
    };
    let out = call("mcp__al__read_file", json!({"path": "hello.txt"}))
        .await
        .unwrap();
    assert!(out.content.contains("hello over http"), "{}", out.content);
    call(
        "mcp__al__write_file",
        json!({"path": "made.txt", "content": "written over http\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.ws().join("made.txt")).unwrap(),
        "written over http\n"
    );
    toolset.shutdown().await;

    // No token: the server's 401 leaves it needing login for this client, its tools absent.
    let refused = McpToolset::connect([McpServerConfig::http("al", &url)])
        .await
        .unwrap();
    assert!(matches!(refused.servers()[0].1, ServerState::NeedsLogin(_)));

    // A hostile page: refused even with the token.
    let status = reqwest::Client::new()
        .post(&url)
        .header("authorization", "Bearer tok-123")
        .header("origin", "http://evil.example.com")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 403);
}

#[test]
fn listen_on_an_unusable_address_is_a_usage_error() {
    let dir = Scratch::new();
    let out = dir
        .env_cmd()
        .args(["mcp-server", "--listen", "not-an-address", "--workspace"])
        .arg(dir.ws())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("--listen not-an-address: cannot listen there"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
