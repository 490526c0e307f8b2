//! The interactive chat's daily-use conveniences on a real pseudo-terminal (`expectrl`), the
//! binary running against a testkit mock model server:
//!
//! - resuming: `agentloop --resume` and `agentloop resume` list this workspace's top-level
//!   sessions and open the chosen one, showing its earlier conversation; leaving a chat prints
//!   the command that comes back to it; without a terminal, a one-line usage error;
//! - input: Tab completes slash commands and `@path` mentions, an `@file` mention attaches the
//!   file (one outside the workspace is refused), `!command` runs a shell command whose output
//!   goes with the next prompt, `/image PATH` attaches an image;
//! - typing while the agent works: the typed text is on a line of its own under the spinner,
//!   and no spinner line is left on the screen (checked on the screen a terminal would show).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::Stdio;

use agentloop::session::{NewSession, ParentLink, SessionSettings, SessionStore, SqliteStore};
use agentloop::transcript::Message;
use agentloop_testkit::MockServer;
use serde_json::{Value, json};

mod support;

use support::pty::{Pty, one_at_a_time};
use support::{Scratch, assert_ok, last_messages, server};

impl Scratch {
    /// `agentloop run` (no terminal) with the mock model on the workspace, which must succeed.
    fn run_ok(&self, server: &MockServer, args: &[&str], prompt: &str) {
        let out = self.run(server, args, prompt);
        assert_ok(&out);
    }
    /// The sessions of every workspace, most recent first.
    fn all_sessions(&self) -> Vec<Value> {
        let out = self.sessions(&["list", "--json", "--all"]);
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

/// `agentloop ARGS… -m openai:mock --base-url URL -w ws` on an 80-column pseudo-terminal.
fn on_pty(scratch: &Scratch, server: &MockServer, args: &[&str]) -> Pty {
    Pty::spawn(scratch.pty_cmd(server, 80, args))
}

// ---------------------------------------------------------------------------------------------
// Resuming.

#[test]
fn the_picker_lists_top_level_sessions_and_opens_one_with_its_earlier_conversation() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "- the answer"}], "repeat": true}));
    // An older session of four exchanges, then a newer one of one.
    scratch.run_ok(&server, &["--session", "alpha-work"], "alpha question 1");
    for n in 2..=4 {
        scratch.run(
            &server,
            &["--session", "alpha-work"],
            &format!("alpha question {n}"),
        );
    }
    scratch.run_ok(&server, &[], "beta question");
    // A sub-agent's child session of it, the most recent of all: never listed.
    let store = SqliteStore::open(scratch.db()).unwrap();
    let beta = scratch.all_sessions()[0]["id"].as_str().unwrap().to_owned();
    let ws = std::fs::canonicalize(scratch.ws()).unwrap();
    let child = store
        .create(
            NewSession::new()
                .title("child task")
                .settings(SessionSettings::new().workspace(&ws))
                .parent(ParentLink::new(&beta, "c1", "helper")),
        )
        .unwrap();
    store
        .append(&child.id, &Message::user("child task"))
        .unwrap();
    drop(store);

    let mut pty = on_pty(&scratch, &server, &["--resume"]);
    let list = pty.expect("pick a number (Enter = 1, q = quit)");
    let beta_at = list.find("beta question").expect(&list);
    let alpha_at = list.find("alpha question 1").expect(&list);
    assert!(beta_at < alpha_at, "most recent first:\n{list}");
    assert!(
        !list.contains("child task"),
        "a child session listed:\n{list}"
    );
    assert!(list.contains("4 turns"), "{list}");
    assert!(
        list.contains("just now") || list.contains("m ago"),
        "{list}"
    );
    pty.line("2");
    // The earlier conversation: the last three exchanges, rendered, under the count of the rest.
    let shown = pty.expect("› ");
    let shown = format!("{shown}{}", pty.expect("alpha question 4"));
    assert!(shown.contains("… 2 earlier messages"), "{shown}");
    assert!(!shown.contains("alpha question 1"), "{shown}");
    assert!(shown.contains("alpha question 2"), "{shown}");
    pty.expect("• the answer");
    pty.expect("› ");
    pty.exchange("one more", "• the answer");
    assert!(last_messages(&server).contains("alpha question 4"));
    pty.line("/exit");
    let end = pty.finish();
    assert!(
        end.contains("agentloop chat --session alpha-work"),
        "no resume command at exit:\n{end}"
    );
}

#[test]
fn resume_without_an_id_lists_on_a_terminal_and_is_a_usage_error_without_one() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "an answer"}], "repeat": true}));
    scratch.run_ok(&server, &["--session", "only-one"], "the first prompt");

    let out = scratch
        .cmd()
        .arg("resume")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--session"), "{stderr}");

    // `agentloop resume` (no parked run) on a terminal: the list, Enter takes the first.
    let mut pty = on_pty(&scratch, &server, &["resume"]);
    pty.expect("pick a number");
    pty.line("");
    pty.expect("the first prompt");
    let end = pty.exit_chat();
    assert!(end.contains("agentloop resume only-one"), "{end}");
    // `agentloop resume ID` of a session with no parked run continues it in chat.
    let mut pty = on_pty(&scratch, &server, &["resume", "only-one"]);
    pty.expect("the first prompt");
    pty.exit_chat();
    // `q` leaves the list without opening anything.
    let mut pty = on_pty(&scratch, &server, &["--resume"]);
    pty.expect("pick a number");
    pty.line("q");
    let end = pty.finish();
    assert!(!end.contains("agentloop chat ·"), "{end}");
}

// ---------------------------------------------------------------------------------------------
// Input conveniences.

/// A chat on the scratch workspace, at its first prompt.
fn chat(scratch: &Scratch, server: &MockServer) -> Pty {
    let mut pty = on_pty(scratch, server, &["chat"]);
    pty.expect("› ");
    pty
}

#[test]
fn tab_completes_commands_and_workspace_paths_and_a_mention_attaches_the_file() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.ws().join("src")).unwrap();
    std::fs::write(scratch.ws().join("src/lib.rs"), "pub fn forty_two() {}\n").unwrap();
    let commands = scratch.dir.path().join("config/agentloop/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(commands.join("shipit.md"), "Ship $ARGUMENTS now.\n").unwrap();
    let server = server(json!({"turns": [{"text": "seen it"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    // A custom command completes like a built-in one (Ctrl-U then clears the line).
    pty.keys("/shi\t");
    pty.expect("/shipit");
    pty.keys("\x15");
    pty.keys("/he\t");
    pty.expect("/help");
    pty.keys("\r");
    pty.expect("/image PATH");
    pty.expect("› ");
    pty.keys("explain @sr\t");
    pty.expect("@src/");
    pty.keys("lib.rs please\r");
    let shown = pty.expect("seen it");
    assert!(shown.contains("attached @src/lib.rs"), "{shown}");
    let sent = last_messages(&server);
    assert!(sent.contains("explain @src/lib.rs please"), "{sent}");
    assert!(
        sent.contains("pub fn forty_two()"),
        "the file's contents: {sent}"
    );
    pty.exit_chat();
}

#[test]
fn a_mention_outside_the_workspace_is_refused() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    std::fs::write(scratch.dir.path().join("outside.txt"), "top secret\n").unwrap();
    std::os::unix::fs::symlink(
        scratch.dir.path().join("outside.txt"),
        scratch.ws().join("inside.txt"),
    )
    .unwrap();
    let server = server(json!({"turns": [{"text": "ok then"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.line("read @../outside.txt and @inside.txt");
    let shown = pty.expect("ok then");
    assert!(
        shown.contains("@../outside.txt is outside the workspace: not attached"),
        "{shown}"
    );
    assert!(
        shown.contains("@inside.txt is outside the workspace"),
        "a link out: {shown}"
    );
    assert!(!last_messages(&server).contains("top secret"));
    pty.exit_chat();
}

#[test]
fn a_bang_command_shows_its_output_and_the_next_prompt_carries_it() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"turns": [{"text": "noted"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.line("!echo hi from the shell");
    let shown = pty.expect("goes to the model with your next prompt");
    assert!(shown.contains("hi from the shell"), "{shown}");
    assert!(server.requests().is_empty(), "a model call for !command");
    pty.expect("› ");
    pty.line("what did it say?");
    pty.expect("noted");
    let sent = last_messages(&server);
    assert!(
        sent.contains("The user ran `echo hi from the shell`"),
        "{sent}"
    );
    assert!(sent.contains("what did it say?"), "{sent}");
    pty.expect("› ");
    // Only the next prompt carries it.
    pty.line("and now?");
    pty.expect("noted");
    let sent = server.requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(!sent.contains("The user ran"), "{sent}");
    pty.exit_chat();
}

#[test]
fn image_attaches_an_image_to_the_next_prompt() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let png = scratch.ws().join("shot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n0000IHDR").unwrap();
    std::fs::write(scratch.ws().join("notes.txt"), "not an image").unwrap();
    let server = server(json!({"turns": [{"text": "a picture"}], "repeat": true}));
    let mut pty = chat(&scratch, &server);
    pty.exchange(
        &format!("/image {}", scratch.ws().join("notes.txt").display()),
        "is not a PNG, JPEG, GIF or WebP image",
    );
    pty.exchange(
        &format!("/image {}", png.display()),
        "goes with your next prompt",
    );
    pty.line("what is in it?");
    pty.expect("a picture");
    let sent = last_messages(&server);
    assert!(sent.contains("data:image/png;base64,"), "{sent}");
    assert!(sent.contains("what is in it?"), "{sent}");
    pty.exit_chat();
}

// ---------------------------------------------------------------------------------------------
// Typing while the agent works.

/// The pseudo-terminal's width (the spinner pads its lines to it and lets them wrap).
const WIDTH: usize = 80;

/// The screen a terminal `WIDTH` columns wide would show after `output`: printable characters
/// at the cursor (wrapping after the last column), carriage return, newline, backspace, and the
/// CSI sequences that move the cursor or erase (others ignored). It never scrolls off.
fn screen(output: &str) -> Vec<String> {
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = output.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => row += 1,
            '\x08' => col = col.saturating_sub(1),
            '\x1b' => {
                if chars.peek() != Some(&'[') {
                    chars.next();
                    continue;
                }
                chars.next();
                let mut params = String::new();
                let mut last = ' ';
                for p in chars.by_ref() {
                    if ('\x40'..='\x7e').contains(&p) {
                        last = p;
                        break;
                    }
                    params.push(p);
                }
                let n: usize = params.parse().unwrap_or(0);
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let line = &mut rows[row];
                match last {
                    'A' => row = row.saturating_sub(n.max(1)),
                    'B' => row += n.max(1),
                    'C' => col += n.max(1),
                    'D' => col = col.saturating_sub(n.max(1)),
                    'G' => col = n.saturating_sub(1),
                    'K' if n == 0 => line.truncate(col),
                    'K' if n == 2 => line.clear(),
                    'J' if n == 0 => {
                        line.truncate(col);
                        rows.truncate(row + 1);
                    }
                    _ => {}
                }
            }
            c if c.is_control() => {}
            c => {
                if col >= WIDTH {
                    row += 1;
                    col = 0;
                }
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let line = &mut rows[row];
                while line.len() < col {
                    line.push(' ');
                }
                if col < line.len() {
                    line[col] = c;
                } else {
                    line.push(c);
                }
                col += 1;
            }
        }
    }
    rows.into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_owned())
        .collect()
}

#[test]
fn the_screen_emulation_moves_and_erases() {
    assert_eq!(
        screen("spin 1\r\x1b[2Kspin 2\n› typed\r\x1b[1A\x1b[2K\x1b[1B\x1b[2K\r\x1b[1Adone\n"),
        ["done", ""]
    );
    let padded = format!("{:WIDTH$}next", "spin");
    assert_eq!(screen(&padded), ["spin", "next"]);
}

#[test]
fn text_typed_during_a_turn_is_on_its_own_line_and_no_spinner_line_stays() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "w1", "name": "shell", "arguments": {
            "command": "while [ ! -e go ]; do sleep 0.05; done; echo released"}}]},
        {"text": "all done"}
    ]}));
    let mut pty = on_pty(&scratch, &server, &["chat", "--approve", "allow"]);
    pty.expect("› ");
    pty.line("start the work");
    pty.expect("running shell");
    pty.keys("steer this way");
    // Drawn by the spinner on its next line (the spinner's lines are padded to the width and
    // wrap), not echoed by the terminal onto the spinner's own line.
    pty.expect("› steer this way");
    pty.keys("\r");
    pty.expect("↳ queued for the agent: steer this way");
    std::fs::write(scratch.ws().join("go"), "").unwrap();
    pty.expect("all done");
    pty.expect("› ");
    let sent = last_messages(&server);
    assert!(sent.contains("steer this way"), "{sent}");
    pty.line("/exit");
    let seen = pty.seen();
    let end = pty.finish();
    let lines = screen(&format!("{seen}{end}"));
    let shown = lines.join("\n");
    let typed: Vec<&String> = lines
        .iter()
        .filter(|l| l.contains("steer this way"))
        .collect();
    assert_eq!(
        typed,
        ["↳ queued for the agent: steer this way"],
        "the screen:\n{shown}"
    );
    for stale in ["running shell", "waiting for the model"] {
        assert!(
            !shown.contains(stale),
            "a spinner line stayed: {stale:?}\n{shown}"
        );
    }
    assert!(shown.contains("→ shell"), "{shown}");
}

#[test]
fn a_line_left_unfinished_when_the_turn_ends_starts_the_next_prompt() {
    let _pty = one_at_a_time();
    let scratch = Scratch::new();
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "w1", "name": "shell", "arguments": {
            "command": "while [ ! -e go ]; do sleep 0.05; done"}}]},
        {"text": "first done"},
        {"text": "second done"}
    ]}));
    let mut pty = on_pty(&scratch, &server, &["chat", "--approve", "allow"]);
    pty.expect("› ");
    pty.line("start");
    pty.expect("running shell");
    pty.keys("half typed");
    pty.expect("› half typed");
    std::fs::write(scratch.ws().join("go"), "").unwrap();
    pty.expect("first done");
    pty.expect("› half typed");
    pty.keys(" and finished\r");
    pty.expect("second done");
    let sent = server.requests().last().unwrap().body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(sent.contains("half typed and finished"), "{sent}");
    pty.exit_chat();
}
