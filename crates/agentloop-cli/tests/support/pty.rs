//! The binary on a real pseudo-terminal (`expectrl`), as a person at it sees it: a test spawns
//! a command, waits for text to appear (bounded only by a guard against a hang), presses keys
//! and types lines, and reads what the terminal showed on the way and at the end.

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentloop_testkit::MockServer;
use expectrl::{Eof, Session};

use super::Scratch;

/// Only a guard against a hang: every wait ends as soon as the awaited text appears.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// A program on a pseudo-terminal and everything it showed so far.
pub struct Pty {
    pub session: Session,
    /// Everything read from the terminal so far.
    seen: Vec<u8>,
}

impl Pty {
    /// Spawns `cmd` on a new pseudo-terminal.
    pub fn spawn(cmd: Command) -> Pty {
        let mut session = Session::spawn(cmd).unwrap();
        session.set_expect_timeout(Some(HANG_GUARD));
        Pty {
            session,
            seen: Vec::new(),
        }
    }

    /// Waits for `needle`; returns the text shown since the last wait, up to and including it.
    pub fn expect(&mut self, needle: &str) -> String {
        let found = match self.session.expect(needle) {
            Ok(found) => found,
            Err(e) => {
                let mut rest = vec![0u8; 1 << 16];
                let n = std::io::Read::read(&mut self.session, &mut rest).unwrap_or(0);
                panic!(
                    "{needle:?} did not appear ({e}); the terminal showed:\n{}\nthen:\n{:?}",
                    self.seen(),
                    String::from_utf8_lossy(&rest[..n])
                )
            }
        };
        // `as_bytes` is everything read up to the end of the match.
        self.seen.extend_from_slice(found.as_bytes());
        String::from_utf8_lossy(found.as_bytes()).into_owned()
    }

    /// Types `line` and Enter.
    pub fn line(&mut self, line: &str) {
        self.session.send_line(line).unwrap();
    }

    /// Types `line`, waits for `reply` and then for the chat's next prompt; returns what was
    /// shown up to `reply`.
    pub fn exchange(&mut self, line: &str, reply: &str) -> String {
        self.line(line);
        let shown = self.expect(reply);
        self.expect("› ");
        shown
    }

    /// Presses keys, without Enter.
    pub fn keys(&mut self, keys: &str) {
        self.session.send(keys).unwrap();
    }

    /// Waits for `question`, then answers it with `answer` and a carriage return; returns what
    /// was shown up to the question.
    pub fn answer(&mut self, question: &str, answer: &str) -> String {
        let shown = self.expect(question);
        self.keys(&format!("{answer}\r"));
        shown
    }

    /// Waits for `question`, then presses `key`; returns what was shown up to the question.
    pub fn key(&mut self, question: &str, key: &str) -> String {
        let shown = self.expect(question);
        self.keys(key);
        shown
    }

    /// Waits for the chat's prompt, leaves with `/exit` and reads to the end; returns what was
    /// shown after the prompt.
    pub fn exit_chat(mut self) -> String {
        self.expect("› ");
        self.line("/exit");
        self.finish()
    }

    /// Everything the terminal showed so far.
    pub fn seen(&self) -> String {
        String::from_utf8_lossy(&self.seen).into_owned()
    }

    /// Reads to the end of the program; returns what it showed since the last wait. Panics when
    /// it does not end.
    pub fn finish(mut self) -> String {
        match self.session.expect(Eof) {
            Ok(found) => String::from_utf8_lossy(found.as_bytes()).into_owned(),
            Err(e) => panic!("the program did not end ({e}); it showed:\n{}", self.seen()),
        }
    }

    /// Presses Ctrl-D (the end of input, which leaves a chat), then [`Pty::transcript`].
    pub fn end_input(mut self) -> String {
        self.session
            .send(expectrl::ControlCode::EndOfTransmission)
            .unwrap();
        self.transcript()
    }

    /// Reads to the end of the program, or gives up at the hang guard; returns everything the
    /// terminal showed in the whole run.
    pub fn transcript(mut self) -> String {
        if let Ok(found) = self.session.expect(Eof) {
            self.seen.extend_from_slice(found.as_bytes());
        }
        self.seen()
    }
}

impl Scratch {
    /// [`Scratch::tty_cmd`] on a terminal `columns` wide with
    /// `ARGS… -m openai:mock --base-url SERVER -w ws`.
    pub fn pty_cmd(&self, server: &MockServer, columns: u16, args: &[&str]) -> Command {
        let mut cmd = self.tty_cmd();
        cmd.env("COLUMNS", columns.to_string())
            .args(args)
            .args(["-m", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .arg("-w")
            .arg(self.ws());
        cmd
    }
}

/// One pseudo-terminal session at a time: children forked from this multi-threaded test process
/// at the same moment stall each other's terminals (seen under `cargo test`, which runs the
/// tests of a binary on parallel threads; nextest runs each in its own process).
pub fn one_at_a_time() -> MutexGuard<'static, ()> {
    static PTY: Mutex<()> = Mutex::new(());
    PTY.lock().unwrap_or_else(PoisonError::into_inner)
}
