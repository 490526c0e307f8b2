//! MCP through the `agentloop` binary: a run whose config file names an MCP server (the binary
//! itself, as `agentloop mcp-server`) calls its tools by their prefixed names next to the
//! built-in ones; the workspace config wins over the user config; `agentloop mcp list`; `--mcp`;
//! unknown config keys are a usage error listing the valid ones.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::{Command, Output};

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::{BIN, Scratch, assert_stdout_has, output_text};

/// The scratch directory with an MCP-ready layout: `ws/local.txt`, a user config directory and
/// `served/remote.txt` for the MCP server to serve.
fn scratch() -> Scratch {
    let scratch = Scratch::new();
    for dir in ["ws/.agentloop", "config/agentloop", "served"] {
        std::fs::create_dir_all(scratch.path(dir)).unwrap();
    }
    std::fs::write(scratch.path("ws/local.txt"), "local file\n").unwrap();
    std::fs::write(scratch.path("served/remote.txt"), "served file\n").unwrap();
    scratch
}

impl Scratch {
    /// `cmd()` in a trusted workspace: the workspace files below name servers, and they apply
    /// in a trusted directory only.
    fn trusted(&self) -> Command {
        let mut cmd = self.cmd();
        cmd.arg("--trust-project");
        cmd
    }
    /// `agentloop mcp list` of the trusted workspace, run to its end.
    fn mcp_list(&self) -> Output {
        self.trusted()
            .args(["mcp", "list", "--workspace"])
            .arg(self.ws())
            .output()
            .unwrap()
    }
    /// The TOML block of a server that is this binary serving `served/`.
    fn self_server(&self, name: &str) -> String {
        format!(
            "[mcp_servers.{name}]\ncommand = {:?}\nargs = [\"mcp-server\", \"--workspace\", {:?}, \"--approve\", \"always\"]\ntool_timeout_sec = 30\n",
            BIN,
            self.path("served").to_str().unwrap()
        )
    }
}

#[test]
fn a_run_calls_a_configured_mcp_server_next_to_the_builtin_tools() {
    let s = scratch();
    // The user file names a broken server; the workspace file redefines it (workspace wins).
    s.user_config("[mcp_servers.srv]\ncommand = \"/nonexistent/server\"\n");
    s.workspace_config(&s.self_server("srv"));
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [
                {"id": "c1", "name": "mcp__srv__read_file", "arguments": {"path": "remote.txt"}},
                {"id": "c2", "name": "read_file", "arguments": {"path": "local.txt"}},
                {"id": "c3", "name": "mcp__srv__list_dir", "arguments": {"path": "."}}
            ]},
            {"text": "read both"}
        ]}))
        .unwrap(),
    );
    let out = s
        .trusted()
        .args(["run", "--json", "--model", "openai:mock", "--base-url"])
        .arg(server.openai_base_url())
        .arg("--workspace")
        .arg(s.path("ws"))
        .arg("read the files")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Every call answered exactly once, with the right content and no error.
    let result = |id: &str| {
        let ends: Vec<&Value> = events
            .iter()
            .filter(|e| e["type"] == "tool_execution_end" && e["call"]["id"] == id)
            .collect();
        assert_eq!(ends.len(), 1, "{id}: {}", output_text(&out));
        assert_eq!(ends[0]["result"]["is_error"], false, "{id}: {}", ends[0]);
        ends[0]["result"]["content"].as_str().unwrap().to_owned()
    };
    assert!(result("c1").contains("served file"));
    assert!(result("c2").contains("local file"));
    assert!(result("c3").contains("remote.txt"));
}

#[test]
fn mcp_list_shows_servers_their_state_and_tools() {
    let s = scratch();
    s.workspace_config(&format!(
        "{}\n[mcp_servers.broken]\ncommand = \"/nonexistent/server\"\n\n[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n",
        s.self_server("tools")
    ));
    let out = s.mcp_list();
    assert!(out.status.success(), "{}", output_text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_stdout_has(&out, "tools: running, 9 tool(s)");
    assert_stdout_has(&out, "mcp__tools__read_file [read-only]");
    assert_stdout_has(&out, "mcp__tools__shell [needs approval]");
    assert_stdout_has(&out, "broken: failed to start");
    assert!(
        !stdout.lines().any(|l| l.starts_with("off")),
        "{}",
        output_text(&out)
    );

    // --mcp adds a server from the command line.
    let out = s
        .trusted()
        .args(["mcp", "list", "--workspace"])
        .arg(s.path("served"))
        .arg("--mcp")
        .arg(format!(
            "cli={BIN} mcp-server --workspace {}",
            s.path("served").display()
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert_stdout_has(&out, "mcp__cli__grep");
}

#[test]
fn unknown_config_keys_are_a_usage_error_listing_the_valid_ones() {
    let s = scratch();
    s.workspace_config("[mcp_servers.x]\ncomand = \"a\"\n");
    let out = s.mcp_list();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("comand") && stderr.contains("startup_timeout_sec"),
        "{stderr}"
    );
}
