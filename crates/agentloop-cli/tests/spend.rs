//! Tokens, cost and usage limits through the `agentloop` binary against the testkit mock: the
//! final line and `--json`'s `agent_end` carry the run's totals, `sessions list` the session's,
//! and the `--max-*` flags stop a run before the model call that would exceed them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::process::Output;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use support::{Scratch, text};

impl Scratch {
    fn run_model(&self, server: &MockServer, model: &str, args: &[&str]) -> Output {
        self.run_model_cmd(server, model)
            .args(args)
            .arg("What do my notes say?")
            .output()
            .unwrap()
    }
}

/// A tool turn and an answer; gpt-4o prices: 3 × ($2.50 × 1,000 + $1.25 × 2,000 + $10 × 500) / M.
fn server() -> MockServer {
    let usage = json!({"input_tokens": 3000, "cache_read_tokens": 2000, "output_tokens": 500});
    MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c1", "name": "read_file", "arguments": {"path": "notes.txt"}}],
             "usage": usage},
            {"tool_calls": [{"id": "c2", "name": "read_file", "arguments": {"path": "notes.txt"}}],
             "usage": usage},
            {"text": "Milk.", "usage": usage}
        ]}))
        .unwrap(),
    )
}

const TURN_COST: f64 = 1000.0 * 2.5e-6 + 2000.0 * 1.25e-6 + 500.0 * 10e-6;

#[test]
fn the_final_line_json_end_and_session_list_carry_tokens_and_cost() {
    let scratch = Scratch::with_notes();
    let out = scratch.run_model(&server(), "openai:gpt-4o", &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let last = text(&out.stdout).lines().last().unwrap().to_owned();
    assert!(last.contains("9,000 in / 1,500 out tokens"), "{last}");
    assert!(last.contains("$0.0300"), "{last}");

    let out = scratch.run_model(&server(), "openai:gpt-4o", &["--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The closing `result` line carries the same totals as `agent_end` before it.
    let result = &lines[lines.len() - 1];
    assert_eq!(result["type"], "result");
    assert_eq!(result["usage"]["input_tokens"], 3000);
    assert!((result["cost_usd"].as_f64().unwrap() - 3.0 * TURN_COST).abs() < 1e-9);
    let end = &lines[lines.len() - 2];
    assert_eq!(end["type"], "agent_end");
    assert_eq!(end["turns"], 3);
    assert_eq!(end["tool_calls"], 2);
    assert_eq!(end["usage"]["input_tokens"], 3000);
    assert_eq!(end["usage"]["cache_read_tokens"], 6000);
    assert_eq!(end["usage"]["output_tokens"], 1500);
    let cost = end["usage"]["cost_usd"].as_f64().unwrap();
    assert!((cost - 3.0 * TURN_COST).abs() < 1e-9, "{cost}");

    let list = scratch
        .cmd()
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert!(list.status.success());
    let sessions: Vec<Value> = text(&list.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(sessions.len(), 2);
    for session in &sessions {
        let cost = session["usage"]["cost_usd"].as_f64().unwrap();
        assert!((cost - 3.0 * TURN_COST).abs() < 1e-9, "{session}");
        assert_eq!(session["usage"]["output_tokens"], 1500);
    }
    let list = scratch.cmd().args(["sessions", "list"]).output().unwrap();
    let lines = text(&list.stdout);
    // A header line, then one line per session.
    assert_eq!(lines.lines().count(), 3, "{lines}");
    assert!(
        lines
            .lines()
            .skip(1)
            .all(|l| l.contains("10,500") && l.contains("$0.0300")),
        "{lines}"
    );
}

#[test]
fn limit_flags_stop_before_the_call_that_would_exceed_them() {
    for (flag, value, which) in [
        ("--max-requests", "2", "requests"),
        ("--max-input-tokens", "6000", "input_tokens"),
        ("--max-output-tokens", "600", "output_tokens"),
        ("--max-total-tokens", "7000", "total_tokens"),
        ("--max-cost", "0.015", "cost_usd"),
    ] {
        let scratch = Scratch::with_notes();
        let server = server();
        let out = scratch.run_model(&server, "openai:gpt-4o", &["--json", flag, value]);
        assert_eq!(out.status.code(), Some(1), "{flag}: {}", text(&out.stderr));
        let end: Value = serde_json::from_str(text(&out.stdout).lines().last().unwrap()).unwrap();
        assert_eq!(end["stop"]["reason"], "usage_limit", "{flag}");
        assert_eq!(end["stop"]["which"], which, "{flag}");
        // The third request was never made; both tool results were kept.
        assert_eq!(server.request_count(), 2, "{flag}");
        assert_eq!(end["tool_calls"], 2, "{flag}");
        assert!(
            text(&out.stderr).contains("limit reached"),
            "{flag}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn invalid_limits_are_usage_errors() {
    let scratch = Scratch::with_notes();
    for args in [
        ["--max-cost", "0"],
        ["--max-cost", "abc"],
        ["--max-requests", "0"],
    ] {
        let out = scratch.run_model(&server(), "openai:gpt-4o", &args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}
