//! MCP prompts as slash commands through the `agentloop` binary: `agentloop run
//! "/mcp__everything__args-prompt …"` sends the prompt's text from the reference server
//! (`@modelcontextprotocol/server-everything`, installed by `.ci/setup-mcp-servers`) to the
//! model, a bad command is a usage error naming what is expected, and `agentloop mcp list`
//! shows the commands; a bad `AGENTLOOP_MCP_LOG_LEVEL` is a usage error. Without node and the
//! pinned server the suite says so and skips.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::json;
use support::{Scratch, output_text};

const EVERYTHING: &str = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";

/// A scratch home whose user config names server-everything as `everything`.
fn scratch() -> Option<Scratch> {
    let dir = agentloop_testkit::external::node_package_dir_or_skip(
        EVERYTHING,
        "MCP prompts through the CLI",
    )?;
    let scratch = Scratch::new();
    scratch.user_config(&format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n",
        dir.join(EVERYTHING).to_str().unwrap()
    ));
    Some(scratch)
}

fn run(scratch: &Scratch, server: &MockServer, prompt: &str) -> Output {
    scratch.run_cmd(server).arg(prompt).output().unwrap()
}

#[test]
fn a_prompt_command_sends_the_servers_prompt_to_the_model() {
    let Some(scratch) = scratch() else { return };
    let server =
        MockServer::start(Script::from_value(json!({"turns": [{"text": "sunny"}]})).unwrap());
    let out = run(
        &scratch,
        &server,
        "/mcp__everything__args-prompt \"San Antonio\" state=Texas",
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{}", output_text(&out));
    let body = requests[0].body.to_string();
    assert!(
        body.contains("What's weather in San Antonio, Texas?"),
        "{body}"
    );
    assert!(!body.contains("/mcp__everything"), "{body}");
}

#[test]
fn a_bad_prompt_command_is_a_usage_error_and_nothing_is_sent() {
    let Some(scratch) = scratch() else { return };
    let server =
        MockServer::start(Script::from_value(json!({"turns": [{"text": "unused"}]})).unwrap());
    let out = run(&scratch, &server, "/mcp__everything__args-prompt");
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "missing required argument(s) city; usage: /mcp__everything__args-prompt <city> [state]"
        ),
        "{}",
        output_text(&out)
    );
    let out = run(&scratch, &server, "/mcp__everything__nope now");
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/mcp__everything__simple-prompt"),
        "{}",
        output_text(&out)
    );
    assert!(server.requests().is_empty());
}

#[test]
fn mcp_list_shows_the_prompt_commands() {
    let Some(scratch) = scratch() else { return };
    let out = scratch.in_workspace(&["mcp", "list"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("prompt /mcp__everything__args-prompt <city> [state]"),
        "{stdout}"
    );
    assert!(stdout.contains("protocol 2025-"), "{stdout}");
}

#[test]
fn a_bad_mcp_log_level_is_a_usage_error() {
    let Some(scratch) = scratch() else { return };
    let server =
        MockServer::start(Script::from_value(json!({"turns": [{"text": "unused"}]})).unwrap());
    let out = scratch
        .run_cmd(&server)
        .env("AGENTLOOP_MCP_LOG_LEVEL", "loud")
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("AGENTLOOP_MCP_LOG_LEVEL: unknown MCP log level `loud`"),
        "{}",
        output_text(&out)
    );
    assert!(server.requests().is_empty());
}

#[test]
fn elicitation_defaults_answer_a_servers_form_without_waiting() {
    let Some(scratch) = scratch() else { return };
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c1", "name": "mcp__everything__trigger-elicitation-request",
                             "arguments": {}}]},
            {"text": "done"}
        ]}))
        .unwrap(),
    );
    let out = scratch
        .run_cmd(&server)
        .args(["--elicitation-defaults", "--approve", "allow", "ask me"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{}", output_text(&out));
    // The form's required name has no default: declined at once, the run goes on.
    let result = requests[1].body.to_string();
    assert!(result.contains("User declined"), "{result}");
}
