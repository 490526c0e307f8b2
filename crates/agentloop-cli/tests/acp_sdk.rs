//! `agentloop acp` driven by the official ACP TypeScript SDK's client (`@agentclientprotocol/sdk`,
//! installed by `.ci/setup-acp`): the SDK parses everything the agent sends against its own
//! protocol types, so a message it rejects fails this test. The client offers its files and
//! terminals, so the edit goes through `fs/*` and the command through `terminal/*`. Skipped
//! with one line when Node or the package is absent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::{ACP_TERMINAL_REQUESTS, BIN, Scratch};

const ENTRY: &str = "node_modules/@agentclientprotocol/sdk/dist/v1/stable/acp.js";

/// The SDK's entry module, when Node runs and the package is installed.
fn sdk_entry() -> Option<PathBuf> {
    let entry = agentloop_testkit::external::suite_dir("AGENTLOOP_ACP_SDK_DIR", "acp")?.join(ENTRY);
    (agentloop_testkit::external::node_runs() && entry.exists()).then_some(entry)
}

#[test]
fn the_typescript_sdk_client_runs_a_turn_with_an_approved_edit() {
    let Some(entry) = sdk_entry() else {
        agentloop_testkit::external::skip_suite(
            "ACP TypeScript SDK client",
            "node or @agentclientprotocol/sdk is not installed",
            "run .ci/setup-acp (or set AGENTLOOP_ACP_SDK_DIR)",
        );
        return;
    };
    let scratch = Scratch::with_notes();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c_edit", "name": "edit_file", "arguments":
                {"path": "notes.txt", "old_text": "milk", "new_text": "bread"}}],
             "usage": {"input_tokens": 50, "output_tokens": 5}},
            {"tool_calls": [{"id": "c_sh", "name": "shell", "arguments":
                {"command": "echo sdk-terminal"}}]},
            {"text": "Edited."}
        ], "mode": "sequential"}))
        .unwrap(),
    );
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/support/acp_sdk_client.mjs");
    // node passes the scratch environment on to the agent it starts.
    let out = scratch
        .env_cmd_of("node")
        .arg(script)
        .arg(entry)
        .arg(scratch.ws())
        .arg(BIN)
        .arg("--db")
        .arg(scratch.db())
        .args(["acp", "--model", "openai:mock", "--base-url"])
        .arg(server.openai_base_url())
        .args(["--context-window", "100000"])
        .current_dir(scratch.ws())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        report["init"]["agentCapabilities"]["loadSession"], true,
        "{report}"
    );
    assert_eq!(report["stopReason"], "end_turn", "{report}");
    assert_eq!(report["agentExit"], 0, "{report}");
    assert_eq!(
        report["permissions"].as_array().unwrap().len(),
        2,
        "{report}"
    );
    let kinds: Vec<&str> = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|u| u["update"]["sessionUpdate"].as_str())
        .collect();
    assert!(kinds.contains(&"tool_call_update"), "{kinds:?}");
    assert!(kinds.contains(&"agent_message_chunk"), "{kinds:?}");
    // The SDK accepts the usage updates (it validates every notification).
    let usage = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["update"]["sessionUpdate"] == "usage_update")
        .expect("a usage_update");
    assert_eq!(usage["update"]["used"], 55, "{usage}");
    assert_eq!(usage["update"]["size"], 100_000, "{usage}");
    // The permission question's diff and the edit read, and the edit wrote, through the
    // client's files (which saved it to the disk).
    let notes = std::fs::canonicalize(scratch.ws().join("notes.txt")).unwrap();
    let calls: Vec<(&str, &str)> = report["fsCalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["sessionId"], report["sessionId"], "{c}");
            (c["method"].as_str().unwrap(), c["path"].as_str().unwrap())
        })
        .collect();
    let notes = notes.to_str().unwrap();
    assert_eq!(
        calls,
        [
            ("fs/read_text_file", notes),
            ("fs/read_text_file", notes),
            ("fs/write_text_file", notes)
        ],
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap(),
        "remember the bread\n"
    );
    // The command ran in the client's terminal, started as agentloop's sandbox wrapper, and the
    // SDK accepted the terminal in the tool call.
    let terminal_calls = report["terminalCalls"].as_array().unwrap();
    let methods: Vec<&str> = terminal_calls
        .iter()
        .map(|c| c["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ACP_TERMINAL_REQUESTS, "{report}");
    assert_eq!(terminal_calls[0]["args"][0], "__sandbox-exec", "{report}");
    let shown = report["updates"].as_array().unwrap().iter().any(|u| {
        u["update"]["toolCallId"] == "c_sh" && u["update"]["content"][0]["type"] == "terminal"
    });
    assert!(shown, "{report}");
    let status = report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["update"]["toolCallId"] == "c_sh")
        .filter_map(|u| u["update"]["status"].as_str())
        .next_back();
    assert_eq!(status, Some("completed"), "{report}");
}
