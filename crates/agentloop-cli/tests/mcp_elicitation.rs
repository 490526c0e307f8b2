//! An MCP server's request for input (`elicitation/create`) in the interactive chat, on a real
//! pseudo-terminal (`expectrl`), against the reference server `@modelcontextprotocol/server-
//! everything` (pinned in `.ci/setup-mcp-servers`) over stdio: its `trigger-elicitation-request`
//! tool asks for a form of every kind of field. The person fills it in (defaults kept with
//! Enter, invalid answers asked again with the reason) and accepts; the server's result, which
//! echoes the answers, reaches the model. A second request is declined at the first question.
//! A URL request (`trigger-url-elicitation`) shows the URL and the domain it leads to, and is
//! declined.
//! Without a terminal (`agentloop run --elicitation-defaults`), the same request is answered
//! from the form's defaults at once (declined: a required field has none).
//!
//! The server (or node) absent → one `SKIPPED suite` line.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop_testkit::MockServer;
use expectrl::Eof;
use serde_json::{Value, json};

mod support;

use support::pty::Pty;
use support::{Scratch, assert_ok, server};

const SUITE: &str = "MCP elicitation in the chat (server-everything)";
const TOOL: &str = "mcp__everything__trigger-elicitation-request";
const URL_TOOL: &str = "mcp__everything__trigger-url-elicitation";

/// Where server-everything's entry point is, when it and node are installed (else the suite is
/// reported skipped).
fn everything() -> Option<String> {
    let path = "node_modules/@modelcontextprotocol/server-everything/dist/index.js";
    let dir = agentloop_testkit::external::node_package_dir_or_skip(path, SUITE)?;
    Some(dir.join(path).to_string_lossy().into_owned())
}

/// A scratch whose user config runs server-everything over stdio without approval questions.
fn scratch(entry: &str) -> Scratch {
    let s = Scratch::new();
    let config = format!(
        "[mcp_servers.everything]\ncommand = \"node\"\nargs = [{}, \"stdio\"]\napproval = \"never-ask\"\n",
        json!(entry)
    );
    s.user_config(&config);
    s
}

/// The text of every tool result in the conversation of the model server's last request.
fn tool_results(server: &MockServer) -> Vec<String> {
    let requests = server.requests();
    let Some(last) = requests.last() else {
        return Vec::new();
    };
    last.body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .collect()
}

#[test]
fn a_servers_form_is_filled_in_on_the_terminal_and_declined_without_one() {
    let Some(entry) = everything() else {
        return;
    };
    let s = scratch(&entry);
    let call = |id: &str| json!({"tool_calls": [{"id": id, "name": TOOL, "arguments": {}}]});
    let open_page = json!({"tool_calls": [{"id": "c3", "name": URL_TOOL, "arguments": {
        "url": "https://bank.example@evil.example/pay", "message": "Pay the invoice"}}]});
    let model = server(json!({"turns": [
        call("c1"), {"text": "thanks for the form"},
        call("c2"), {"text": "declined, fine"},
        open_page, {"text": "not opened"}
    ]}));
    let mut pty = Pty::spawn(s.pty_cmd(&model, 100, &[]));
    pty.answer("› ", "please fill in the form");
    let intro = pty.key("[f]ill in / [d]ecline / [c]ancel: ", "f");
    assert!(
        intro.contains("MCP server `everything` asks for input")
            && intro.contains("Please provide inputs for the following fields")
            && intro.contains("Integer [integer 1–100]")
            && intro.contains("String [text, required]"),
        "{intro}"
    );
    // Required: an empty answer is asked again.
    pty.answer("String: ", "");
    pty.expect("this field is required");
    pty.answer("String: ", "Ada Lovelace");
    pty.answer("Boolean: ", "y");
    pty.answer(
        "String with default [It was a dark and stormy night.]: ",
        "",
    );
    pty.answer("String with email format: ", "ada-at-example");
    pty.expect("not a valid email");
    pty.answer("String with email format: ", "ada@example.com");
    pty.answer("String with uri format: ", "");
    pty.answer("String with date format: ", "1815-12-10");
    pty.answer("Integer [42]: ", "101");
    pty.expect("too large: at most 100");
    pty.answer("Integer [42]: ", "7");
    pty.answer("Number in range 1-1000 [3.14]: ", "");
    pty.answer("Untitled Single Select Enum [Monica]: ", "3");
    pty.answer("Untitled Multiple Select Enum [Guitar]: ", "piano, 1");
    pty.answer("Titled Single Select Enum [hero-1]: ", "wonder woman");
    pty.answer("Titled Multiple Select Enum [fish-1]: ", "");
    pty.answer("Legacy Titled Single Select Enum [pet-1]: ", "Dogs");
    let summary = pty.key("[a]ccept / [e]dit / [d]ecline / [c]ancel: ", "a");
    assert!(summary.contains("integer: 7"), "{summary}");
    pty.expect("thanks for the form");

    // The next request is declined at the first question.
    pty.answer("› ", "once more");
    pty.key("[f]ill in / [d]ecline / [c]ancel: ", "d");
    pty.expect("declined, fine");

    // A URL: shown with the domain the browser would go to, opened only with consent.
    pty.answer("› ", "pay");
    let asked = pty.key("open it? [o]pen / [d]ecline / [c]ancel: ", "d");
    assert!(
        asked.contains("asks you to open a web page")
            && asked.contains("Pay the invoice")
            && asked.contains("URL:    https://bank.example@evil.example/pay")
            && asked.contains("domain: evil.example"),
        "{asked}"
    );
    pty.expect("not opened");
    pty.answer("› ", "/exit");
    let _ = pty.session.expect(Eof);

    let results = tool_results(&model);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(results[2].contains("decline"), "{}", results[2]);
    let accepted: Value = serde_json::from_str(&results[0]).unwrap_or_default();
    let accepted = accepted
        .as_str()
        .map(str::to_owned)
        .unwrap_or(results[0].clone());
    for expected in [
        "User provided the requested information",
        "Name: Ada Lovelace",
        "Agreed to terms: true",
        "Email: ada@example.com",
        "Birthdate: 1815-12-10",
        "Favorite Integer: 7",
        "Favorite Number: 3.14",
        "\"untitledSingleSelectEnum\": \"Joey\"",
        "\"titledSingleSelectEnum\": \"hero-3\"",
        "\"legacyTitledEnum\": \"pet-2\"",
        "\"firstLine\": \"It was a dark and stormy night.\"",
    ] {
        assert!(
            accepted.contains(expected),
            "{expected} not in:\n{accepted}"
        );
    }
    assert!(
        !accepted.contains("homepage"),
        "an empty optional field is left out"
    );
    assert!(
        accepted.contains("\"Piano\",") && accepted.contains("\"Guitar\""),
        "{accepted}"
    );
    assert!(results[1].contains("declined"), "{}", results[1]);

    // Without a terminal, under --elicitation-defaults, the form is answered from its
    // defaults at once — here declined, as the required name has none; the run does not wait.
    let model = server(json!({"turns": [call("c3"), {"text": "ok"}]}));
    let out = s
        .run_cmd(&model)
        .args(["--elicitation-defaults", "fill it"])
        .output()
        .unwrap();
    assert_ok(&out);
    let results = tool_results(&model);
    assert!(
        results.len() == 1 && results[0].contains("declined"),
        "{results:?}"
    );
}
