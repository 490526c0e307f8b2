//! The `agentloop` binary in daily use, run for real against a testkit mock server (and, for
//! telemetry, a collector that never answers): errors that say what to do on one line, export
//! that never slows a run, no empty sessions left behind, `-q` printing the answer once, and
//! the invocations other tools' users type.
//!
//! Children run with stdin from /dev/null (or a pipe) and stdout/stderr piped — no terminal —
//! except the tests that use a pseudo-terminal (`expectrl`) to see what a person sees.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::Duration;

use agentloop_testkit::MockServer;
use serde_json::{Value, json};

mod support;

#[cfg(unix)]
use support::pty::Pty;
use support::schema::events;
use support::{Scratch, last_messages, output_with_stdin, server, text};

impl Scratch {
    /// `agentloop run --model openai:mock --base-url URL --workspace ws ARGS… PROMPT`.
    fn run_at(&self, base_url: &str, args: &[&str], prompt: &str) -> Output {
        self.cmd()
            .args(["run", "--model", "openai:mock", "--base-url", base_url])
            .arg("--workspace")
            .arg(self.ws())
            .args(args)
            .arg(prompt)
            .output()
            .unwrap()
    }
}

/// A local port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// What Rust's `{:?}` of an error or enum looks like, which a person must never be shown.
fn assert_no_debug_text(line: &str) {
    for marker in [" { ", "Some(", "Err(", "Ok(", "[Err", "Error {", "kind:"] {
        assert!(!line.contains(marker), "debug text {marker:?} in {line:?}");
    }
}

/// The one error line of a failed command (stderr must hold exactly one line).
fn one_error_line(out: &Output) -> String {
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.trim().lines().collect();
    assert_eq!(lines.len(), 1, "one line on stderr: {stderr:?}");
    assert!(lines[0].starts_with("agentloop: "), "{stderr:?}");
    assert_no_debug_text(lines[0]);
    lines[0].to_owned()
}

// ---------------------------------------------------------------------------------------------
// Errors say what to do.

#[test]
fn a_refused_connection_names_the_url_and_suggests_base_url() {
    let scratch = Scratch::new();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = scratch.run_at(&url, &["--json"], "hello");
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains(&url), "{line}");
    assert!(line.contains("--base-url"), "{line}");
}

#[test]
fn a_refused_key_is_printed_once_and_names_its_variable() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "x", "faults": [{"status": 401}]}]}));
    let out = scratch.run(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("OPENAI_API_KEY"), "{line}");
    assert!(line.contains("401"), "{line}");
    let everything = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        everything.matches("injected HTTP 401").count(),
        1,
        "the error once, stdout and stderr together: {everything}"
    );
}

#[test]
fn a_404_on_a_doubled_version_segment_says_which_suffix_to_drop() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "x"}]}));
    // Anthropic's base URL has no /v1 (the adapter adds /v1/messages).
    let doubled = format!("{}/v1", server.base_url());
    let out = scratch
        .cmd()
        .env("ANTHROPIC_API_KEY", "dummy")
        .args(["run", "--model", "anthropic:mock", "--base-url", &doubled])
        .arg("--workspace")
        .arg(scratch.ws())
        .arg("hello")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let line = one_error_line(&out);
    assert!(line.contains("404"), "{line}");
    assert!(
        line.contains(&format!("--base-url {}", server.base_url())),
        "suggests the URL without the suffix: {line}"
    );
}

#[test]
fn an_output_that_never_validates_is_one_plain_line() {
    let scratch = Scratch::new();
    let schema = scratch.dir.path().join("schema.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}"#,
    )
    .unwrap();
    let server = server(json!({"turns": [{"text": "not json at all"}], "repeat": true}));
    let out = scratch.run(
        &server,
        &[
            "--output-schema",
            schema.to_str().unwrap(),
            "--output-strategy",
            "prompted",
            "--output-retries",
            "1",
        ],
        "count",
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    let last = stderr.trim().lines().last().unwrap();
    assert!(last.contains("no valid output"), "{stderr}");
    assert_no_debug_text(last);
}

// ---------------------------------------------------------------------------------------------
// Telemetry never slows a run.

/// A "collector" that accepts connections and never answers (nor closes them).
fn silent_collector() -> (u16, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let thread = std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream); // kept open, never read from or written to
        }
    });
    (port, thread)
}

/// Runs `cmd` to its end; `None` when it is still running after a minute. A hang detector, not a
/// speed claim: the scenarios below never answer, so only a bounded wait lets the run end at all.
fn ends(mut cmd: Command) -> Option<Output> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || sender.send(cmd.output().unwrap()));
    receiver.recv_timeout(Duration::from_secs(60)).ok()
}

#[cfg(feature = "otel")]
#[test]
fn a_silent_or_absent_collector_adds_at_most_a_bounded_delay_and_one_warning() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "hi there"}], "repeat": true}));
    let (port, _collector) = silent_collector();
    for endpoint in [
        format!("http://127.0.0.1:{port}"),
        format!("http://127.0.0.1:{}", closed_port()),
    ] {
        let mut cmd = scratch.cmd();
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .args(["run", "--model", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("--workspace")
            .arg(scratch.ws())
            .arg("hello");
        // The silent collector accepts and never answers: the export's shutdown must give up
        // on it (after at most a second) for the run to end.
        let out = ends(cmd).unwrap_or_else(|| panic!("{endpoint}: the run never ended"));
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert!(text(&out.stdout).contains("hi there"));
        let stderr = text(&out.stderr);
        let warnings: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("OpenTelemetry") || l.contains("collector"))
            .collect();
        assert!(warnings.len() <= 1, "at most one warning: {stderr}");
        for line in stderr.lines() {
            assert_no_debug_text(line);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// No empty sessions.

#[test]
fn runs_that_failed_before_any_reply_leave_no_session() {
    let scratch = Scratch::new();
    let refusing = server(json!({"turns": [{"text": "x", "faults": [{"status": 401}]}]}));
    let out = scratch.run(&refusing, &["--json"], "refused");
    assert_eq!(out.status.code(), Some(1));
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let out = scratch.run_at(&url, &["--json"], "nobody home");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        scratch.session_list().is_empty(),
        "{:?}",
        scratch.session_list()
    );
    // A run with a reply is kept.
    let good = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run(&good, &[], "answered");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1);
    assert_eq!(sessions[0]["title"], "answered");
}

// ---------------------------------------------------------------------------------------------
// `-q` prints the answer once; Markdown on a terminal, plain text in a pipe.

const MARKDOWN_ANSWER: &str = "# Result\n\n- first point\n- second point\n";

#[test]
fn quiet_prints_the_answer_once_and_plain_in_a_pipe() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": MARKDOWN_ANSWER, "chunk_size": 5}]}));
    let out = scratch.run(&server, &["-q"], "summarise");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        MARKDOWN_ANSWER,
        "exactly the answer, as written"
    );
    let everything = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(
        everything.matches("second point").count(),
        1,
        "{everything}"
    );
}

#[cfg(unix)]
mod terminal {
    use super::*;

    /// `agentloop run ARGS… summarise` with the mock model on an 80-column pseudo-terminal, to
    /// its end; everything the terminal showed.
    fn run_on_terminal(scratch: &Scratch, server: &MockServer, args: &[&str]) -> String {
        let mut cmd = scratch.pty_cmd(server, 80, &["run"]);
        cmd.args(args).arg("summarise");
        Pty::spawn(cmd).finish()
    }

    #[test]
    fn run_on_a_terminal_renders_markdown_and_quiet_shows_it_once() {
        let scratch = Scratch::new();
        let server =
            server(json!({"turns": [{"text": MARKDOWN_ANSWER, "chunk_size": 5}], "repeat": true}));
        for args in [&[][..], &["-q"]] {
            let shown = run_on_terminal(&scratch, &server, args);
            assert_eq!(
                shown.matches("second point").count(),
                1,
                "{args:?}: {shown}"
            );
            assert!(shown.contains("• first point"), "{args:?}: {shown}");
            assert!(!shown.contains("# Result"), "{args:?}: {shown}");
            assert!(shown.contains("Result"), "{args:?}: {shown}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The invocations other tools' users type.

#[test]
fn a_prompt_as_the_first_argument_runs_it_without_a_terminal() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "fixed them"}], "repeat": true}));
    let url = server.openai_base_url();
    let ws = scratch.ws();
    let ws = ws.to_str().unwrap();
    let flags = ["-m", "openai:mock", "--base-url", &url, "-w", ws];
    let cases = [
        // The prompt first, flags after it.
        [&["fix the tests"][..], &flags].concat(),
        // Flags first, then the prompt.
        [&flags[..], &["fix the tests"]].concat(),
        // Flags of `run` before the subcommand.
        [&flags[..], &["run", "fix the tests"]].concat(),
    ];
    for args in cases {
        let out = scratch.cmd().args(&args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("fixed them"), "{args:?}");
        assert!(last_messages(&server).contains("fix the tests"), "{args:?}");
    }
}

#[test]
fn piped_stdin_is_the_prompt_of_run_without_a_dash() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "done"}], "repeat": true}));
    let out = output_with_stdin(
        scratch
            .cmd()
            .args(["run", "-m", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("-w")
            .arg(scratch.ws()),
        b"the piped prompt\n",
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(last_messages(&server).contains("the piped prompt"));
    // Nothing piped (stdin empty): still a clear usage error, no run.
    let out = scratch
        .cmd()
        .args(["run", "-m", "openai:mock", "--base-url"])
        .arg(server.openai_base_url())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(one_error_line(&out).contains("needs a prompt"));
}

#[cfg(unix)]
#[test]
fn a_prompt_first_on_a_terminal_opens_a_chat_that_answers_it() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "chat answer"}], "repeat": true}));
    let mut pty = Pty::spawn(scratch.pty_cmd(&server, 80, &["hello from the shell"]));
    pty.expect("agentloop chat");
    pty.expect("chat answer");
    pty.exit_chat();
    assert!(last_messages(&server).contains("hello from the shell"));
}

/// A custom command in chat: its `model` and `allowed_tools` apply to its own prompt (the
/// shell call it allows runs without a question), and the next typed prompt is back on the
/// chat's model.
#[cfg(unix)]
#[test]
fn a_custom_command_in_chat_uses_its_model_and_allowed_tools_for_its_prompt_only() {
    let scratch = Scratch::new();
    let config = scratch.dir.path().join("config").join("agentloop");
    std::fs::create_dir_all(config.join("commands")).unwrap();
    std::fs::write(config.join("config.toml"), "model = \"openai:mock\"\n").unwrap();
    std::fs::write(
        config.join("commands").join("ship.md"),
        "---\ndescription: Ship it\nmodel: openai:ship-model\nallowed_tools: shell(echo shipped)\n---\nShip $ARGUMENTS now.\n",
    )
    .unwrap();
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "s1", "name": "shell", "arguments": {"command": "echo shipped"}}]},
        {"text": "shipped it"},
        {"text": "plain answer"}
    ]}));
    let mut cmd = scratch.tty_cmd();
    cmd.env("COLUMNS", "80")
        .args(["chat", "--base-url"])
        .arg(server.openai_base_url())
        .arg("-w")
        .arg(scratch.ws());
    let mut pty = Pty::spawn(cmd);
    pty.expect("› ");
    pty.session
        .set_expect_timeout(Some(Duration::from_secs(15)));
    pty.line("/ship the release");
    let shown = pty.expect("shipped it");
    assert!(
        shown.contains("model for this command: openai:ship-model"),
        "{shown}"
    );
    assert!(
        !shown.contains("allow?"),
        "the allowed call was asked about: {shown}"
    );
    pty.expect("› ");
    pty.line("and now?");
    pty.expect("plain answer");
    pty.exit_chat();
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["model"], "ship-model");
    assert!(
        requests[0].body["messages"]
            .to_string()
            .contains("Ship the release now.")
    );
    assert!(
        requests[1].body["messages"]
            .to_string()
            .contains("shipped\\n"),
        "{}",
        requests[1].body["messages"]
    );
    assert_eq!(requests[2].body["model"], "mock");
}

#[cfg(unix)]
#[test]
fn a_chat_left_without_a_reply_or_cleared_leaves_no_session() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "an answer"}], "repeat": true}));
    let chat = |lines: &[&str]| {
        let mut pty = Pty::spawn(scratch.pty_cmd(&server, 80, &["chat"]));
        pty.expect("› ");
        for line in lines {
            pty.line(line);
            pty.expect("› ");
        }
        pty.line("/exit");
        pty.finish();
    };
    chat(&[]);
    chat(&["/clear", "/clear"]);
    assert!(
        scratch.session_list().is_empty(),
        "{:?}",
        scratch.session_list()
    );
    // A conversation with an answer is kept; the empty one /clear opened after it is not.
    chat(&["a question", "/clear"]);
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["stats"]["turns"], 1);
}

/// A chat on a pseudo-terminal (`chat ARGS… -w ws`), at its first prompt.
#[cfg(unix)]
fn chat_at_prompt(scratch: &Scratch, args: &[&str]) -> expectrl::Session {
    let mut cmd = scratch.tty_cmd();
    cmd.env("COLUMNS", "200")
        .arg("chat")
        .args(args)
        .arg("-w")
        .arg(scratch.ws());
    let mut session = expectrl::Session::spawn(cmd).unwrap();
    session.set_expect_timeout(Some(Duration::from_secs(60)));
    session.expect("› ").unwrap();
    session
}

/// The session id the chat's banner names.
#[cfg(unix)]
fn banner_session(shown_before: &[u8]) -> String {
    let shown = String::from_utf8_lossy(shown_before);
    let after = shown
        .split("session ")
        .nth(1)
        .unwrap_or_else(|| panic!("no session in the banner: {shown}"));
    after.split_whitespace().next().unwrap().to_owned()
}

#[cfg(unix)]
#[test]
fn a_new_chat_records_its_session_with_the_first_prompt_under_the_banner_s_id() {
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "an answer"}], "repeat": true}));
    let base_url = server.openai_base_url();
    let mut chat = chat_at_prompt(&scratch, &["-m", "openai:mock", "--base-url", &base_url]);
    // Nothing is written before the first prompt: another process sees no session.
    let listed = scratch.session_list();
    assert!(listed.is_empty(), "before any prompt: {listed:?}");
    // What needs the session before it exists works and records nothing.
    for line in ["/cost", "/compact", "/rewind 1", "/diff"] {
        chat.send_line(line).unwrap();
        chat.expect("› ").unwrap();
    }
    chat.send_line("/model openai:switched").unwrap();
    let shown = chat.expect("› ").unwrap();
    assert!(
        String::from_utf8_lossy(shown.before()).contains("model: openai:switched"),
        "{}",
        String::from_utf8_lossy(shown.before())
    );
    assert!(scratch.session_list().is_empty());
    chat.send_line("a question").unwrap();
    chat.expect("an answer").unwrap();
    chat.expect("› ").unwrap();
    chat.send_line("/exit").unwrap();
    let farewell = chat.expect(expectrl::Eof).unwrap();
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let session = &sessions[0];
    let id = session["id"].as_str().unwrap();
    assert!(
        String::from_utf8_lossy(farewell.as_bytes()).contains(&format!("--session {id}")),
        "the farewell names the recorded session: {}",
        String::from_utf8_lossy(farewell.as_bytes())
    );
    assert_eq!(session["stats"]["turns"], 1, "{session}");
    assert_eq!(session["title"], "a question", "{session}");
    assert_eq!(session["settings"]["provider"], "openai", "{session}");
    assert_eq!(session["settings"]["model"], "switched", "{session}");
    assert_eq!(
        session["settings"]["base_url"],
        base_url.as_str(),
        "{session}"
    );
    let ws = std::fs::canonicalize(scratch.ws()).unwrap();
    assert_eq!(
        session["settings"]["workspace"],
        ws.to_str().unwrap(),
        "{session}"
    );
    // `--continue` goes on in it, under the same id, with its model.
    let mut cmd = scratch.tty_cmd();
    cmd.env("COLUMNS", "200")
        .args(["chat", "--continue", "--base-url", &base_url, "-w"])
        .arg(scratch.ws());
    let mut again = expectrl::Session::spawn(cmd).unwrap();
    again.set_expect_timeout(Some(Duration::from_secs(60)));
    let banner = again.expect("/help for commands").unwrap();
    assert_eq!(banner_session(banner.before()), id);
    again.expect("a question").unwrap();
    again.expect("› ").unwrap();
    again.send_line("another question").unwrap();
    again.expect("an answer").unwrap();
    again.expect("› ").unwrap();
    again.send_line("/exit").unwrap();
    again.expect(expectrl::Eof).unwrap();
    let sessions = scratch.session_list();
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert_eq!(sessions[0]["id"], id);
    assert_eq!(sessions[0]["stats"]["turns"], 2, "{}", sessions[0]);
    let requests = server.requests();
    assert_eq!(requests.last().unwrap().body["model"], "switched");
}

#[cfg(unix)]
#[test]
fn a_chat_whose_first_prompt_fails_before_any_reply_leaves_no_session() {
    let scratch = Scratch::new();
    let url = format!("http://127.0.0.1:{}/v1", closed_port());
    let mut chat = chat_at_prompt(&scratch, &["-m", "openai:mock", "--base-url", &url]);
    chat.send_line("nobody home").unwrap();
    chat.expect("--base-url").unwrap();
    chat.expect("› ").unwrap();
    chat.send_line("/exit").unwrap();
    chat.expect(expectrl::Eof).unwrap();
    let sessions = scratch.session_list();
    assert!(sessions.is_empty(), "{sessions:?}");
}

/// A new chat opens its database while its prompt is drawn: one that cannot be opened still
/// ends the chat with the store's error and exit code 1 when the first line is entered, and
/// a database the chat creates is complete even when the chat is left at once.
#[cfg(unix)]
#[test]
fn a_new_chat_opens_its_database_behind_the_prompt_and_still_reports_a_bad_one() {
    let scratch = Scratch::new();
    let not_a_dir = scratch.ws().join("not-a-directory");
    std::fs::write(&not_a_dir, "x").unwrap();
    let chat_on = |db: &std::path::Path| {
        let mut cmd = scratch.env_cmd();
        cmd.env("COLUMNS", "200")
            .arg("--db")
            .arg(db)
            .args(["chat", "-m", "openai:mock", "-w"])
            .arg(scratch.ws());
        let mut chat = Pty::spawn(cmd);
        chat.expect("› ");
        chat
    };
    let mut bad = chat_on(&not_a_dir.join("sessions.db"));
    bad.line("hello");
    bad.expect("cannot open the session database");
    bad.finish();

    let fresh = scratch.path("fresh").join("sessions.db");
    std::fs::create_dir_all(fresh.parent().unwrap()).unwrap();
    let mut left = chat_on(&fresh);
    left.line("/exit");
    left.finish();
    let listed = scratch
        .env_cmd()
        .arg("--db")
        .arg(&fresh)
        .args(["sessions", "list"])
        .output()
        .unwrap();
    assert!(listed.status.success(), "{listed:?}");
}

// ---------------------------------------------------------------------------------------------
// `--json` lines match the documented schema, in full and compact form.

fn kinds(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .map(|l| l["type"].as_str().unwrap().to_owned())
        .collect()
}

/// A read_file call on notes.txt (after a failed attempt that is retried), then an answer.
fn tool_script() -> Value {
    json!({"turns": [
        {"text": "Reading.", "chunk_size": 4, "faults": [{"status": 503}],
         "tool_calls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}],
         "usage": {"input_tokens": 100, "output_tokens": 10}},
        {"text": "The notes say hello.", "chunk_size": 4,
         "usage": {"input_tokens": 150, "output_tokens": 6}}
    ]})
}

#[test]
fn every_json_line_matches_the_documented_schema_in_both_forms() {
    let scratch = Scratch::new();
    std::fs::write(scratch.ws().join("notes.txt"), "hello\n").unwrap();
    let mut seen = std::collections::BTreeSet::new();

    let full = events(&scratch.run(&server(tool_script()), &["--json"], "read"));
    let compact = events(&scratch.run(&server(tool_script()), &["--json=compact"], "read"));
    // The same events in the same order; compact carries no transcript twice.
    assert_eq!(kinds(&full), kinds(&compact));
    assert!(
        kinds(&full).contains(&"model_retry".to_owned()),
        "{:?}",
        kinds(&full)
    );
    for line in &compact {
        match line["type"].as_str().unwrap() {
            "message_start" => {
                assert!(
                    line.get("message").is_none() && line.get("role").is_some(),
                    "{line}"
                )
            }
            "turn_end" => assert!(line.get("message").is_none(), "{line}"),
            "agent_end" => assert!(line.get("messages").is_none(), "{line}"),
            _ => {}
        }
    }
    let full_size: usize = full.iter().map(|l| l.to_string().len()).sum();
    let compact_size: usize = compact.iter().map(|l| l.to_string().len()).sum();
    assert!(compact_size < full_size, "{compact_size} < {full_size}");
    seen.extend(kinds(&full));

    // Parked for approval, then resumed.
    let write = json!({"turns": [
        {"tool_calls": [{"id": "call_w", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "Written."}
    ]});
    let server_w = server(write);
    let parked = events(&scratch.run(&server_w, &["--json", "--approve", "defer"], "w"));
    seen.extend(kinds(&parked));
    let session = parked[0]["session_id"].as_str().unwrap().to_owned();
    let out = scratch
        .cmd()
        .args(["approve", &session, "--all"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let resumed = scratch
        .cmd()
        .args([
            "resume",
            &session,
            "--json",
            "--model",
            "openai:mock",
            "--base-url",
        ])
        .arg(server_w.openai_base_url())
        .arg("--workspace")
        .arg(scratch.ws())
        .output()
        .unwrap();
    seen.extend(kinds(&events(&resumed)));

    // A typed output, a refused key, the demo.
    let schema = scratch.dir.path().join("s.json");
    std::fs::write(
        &schema,
        r#"{"type": "object", "properties": {"n": {"type": "integer"}}}"#,
    )
    .unwrap();
    let typed = server(json!({"turns": [{"text": "{\"n\": 3}"}]}));
    let args = ["--json", "--output-schema", schema.to_str().unwrap()];
    seen.extend(kinds(&events(&scratch.run(&typed, &args, "n"))));
    let refusing = server(json!({"turns": [{"text": "x", "faults": [{"status": 401}]}]}));
    seen.extend(kinds(&events(&scratch.run(&refusing, &["--json"], "x"))));
    let demo = scratch.cmd().args(["demo", "--json"]).output().unwrap();
    assert!(demo.status.success(), "{}", text(&demo.stderr));
    let demo = events(&demo);
    assert_eq!(
        demo.last().unwrap()["type"],
        "result",
        "demo --json ends with its result"
    );
    seen.extend(kinds(&demo));

    for kind in [
        "agent_start",
        "turn_start",
        "message_start",
        "message_update",
        "message_end",
        "model_retry",
        "tool_execution_start",
        "tool_execution_end",
        "turn_end",
        "run_parked",
        "approval_requested",
        "approval_resolved",
        "agent_end",
        "output",
        "result",
    ] {
        assert!(seen.contains(kind), "no {kind} line was checked: {seen:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Fitting the shell.

#[test]
fn completions_and_the_man_page_come_from_the_command_line_definition() {
    let scratch = Scratch::new();
    for shell in ["bash", "zsh", "fish"] {
        let out = scratch.cmd().args(["completions", shell]).output().unwrap();
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for word in ["agentloop", "max-turns", "sessions", "completions"] {
            assert!(script.contains(word), "{shell} script lacks {word}");
        }
    }
    let out = scratch
        .cmd()
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = scratch.cmd().arg("man").output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH agentloop"),
        "{page}"
    );
    assert!(
        page.contains("completions") && page.contains("sessions"),
        "{page}"
    );
}

#[test]
fn short_help_is_short_and_the_store_option_is_described_once() {
    let scratch = Scratch::new();
    let help = |args: &[&str]| {
        let out = scratch.cmd().args(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let (short, long) = (help(&["run", "-h"]), help(&["run", "--help"]));
    assert!(
        short.len() * 3 < long.len() * 2,
        "-h {} vs --help {}",
        short.len(),
        long.len()
    );
    assert!(short.contains("--max-turns") && long.contains("--max-turns"));
    // One line per flag in -h (its first sentence), the whole text in --help.
    let model = short.lines().find(|l| l.contains("--model")).unwrap();
    assert!(long.contains("compatible"), "{long}");
    assert!(!model.contains("compatible"), "{model}");
    for args in [
        &["run", "--help"][..],
        &["sessions", "list", "--help"],
        &["run", "-h"],
    ] {
        assert!(!help(args).contains("--store"), "{args:?} repeats --store");
    }
    let top = help(&["--help"]);
    assert_eq!(top.matches("--store <PATH|URL>").count(), 1, "{top}");
    assert!(top.contains("AGENTLOOP_STORE"), "{top}");
}
