//! `agentloop mcp-server` driven by a real MCP client that is not ours: the official TypeScript
//! SDK's `Client` (`@modelcontextprotocol/sdk`, pinned and installed by
//! `.ci/setup-mcp-servers` into `${AGENTLOOP_CI_CACHE:-$HOME/.cache/agentloop-ci}/mcp`, or
//! `AGENTLOOP_MCP_SERVERS_DIR`) over stdio, scripted by `tests/support/mcp_real_client.mjs`.
//! It lists the tools (schemas and annotations), reads a file and lists the temp workspace;
//! under `--approve deny` a `write_file` is refused with an error result and writes nothing,
//! and a path outside the workspace is refused. Without node or the SDK the suite says so in
//! one line and skips (a failure in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use serde_json::Value;

mod support;

use support::{BIN, Scratch};

const SUITE: &str = "agentloop mcp-server with the official TypeScript MCP client";

/// The directory holding `node_modules/@modelcontextprotocol/sdk`, when node and the SDK are
/// installed (else the suite is reported skipped).
fn sdk_dir() -> Option<PathBuf> {
    agentloop_testkit::external::node_package_dir_or_skip(
        "node_modules/@modelcontextprotocol/sdk/package.json",
        SUITE,
    )
}

/// The text of a `callTool` result's content blocks.
fn text(result: &Value) -> String {
    result["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_official_typescript_client_uses_the_builtin_tools_under_the_deny_policy() {
    let Some(dir) = sdk_dir() else {
        return;
    };
    let scratch = Scratch::with_notes();
    let ws = scratch.ws();
    std::fs::create_dir(ws.join("src")).unwrap();
    std::fs::write(scratch.path("outside.txt"), "secret\n").unwrap();

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/support/mcp_real_client.mjs"
    );
    // node passes the scratch environment on to the server it starts.
    let out = scratch
        .env_cmd_of("node")
        .arg(script)
        .arg(&dir)
        .arg(BIN)
        .arg(&ws)
        .arg("deny")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));

    assert_eq!(report["server"]["name"], "agentloop");
    let tools = report["tools"].as_array().unwrap();
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("{name} not listed: {tools:?}"))
    };
    for name in ["read_file", "list_dir", "write_file", "edit_file"] {
        assert_eq!(tool(name)["inputType"], "object", "{name}");
    }
    assert_eq!(tool("read_file")["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("list_dir")["annotations"]["readOnlyHint"], true);
    assert_eq!(tool("write_file")["annotations"]["destructiveHint"], true);

    let read = &report["read_file"];
    assert_ne!(read["isError"], true, "{read}");
    assert!(text(read).contains("remember the milk"), "{read}");
    let listed = &report["list_dir"];
    assert_ne!(listed["isError"], true, "{listed}");
    assert!(text(listed).contains("notes.txt"), "{listed}");
    assert!(text(listed).contains("src"), "{listed}");

    // The deny policy refuses the mutating call with an error result; nothing is written.
    let write = &report["write_file"];
    assert_eq!(write["isError"], true, "{write}");
    assert!(
        text(write).contains("denied"),
        "the refusal says why: {write}"
    );
    assert!(!ws.join("new.txt").exists());
    // Confinement holds for this client too.
    let escape = &report["escape"];
    assert_eq!(escape["isError"], true, "{escape}");
    assert!(!text(escape).contains("secret"), "{escape}");
}
