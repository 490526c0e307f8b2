//! [`Failure`]: why a command failed, as one line for stderr and an exit code.
//!
//! Exit codes: 0 success; 1 the command or the agent run failed (the run did not stop normally:
//! max turns, repeated tool failures, a model error, a hook stop); 2 bad usage (also clap's);
//! 3 the run stopped with tool calls awaiting approval (`--approve defer`); 4 the run finished
//! but mutating tool calls were denied because there was no terminal to ask on (`--approve ask`
//! without a terminal); 130 interrupted by Ctrl-C.

use std::fmt;

/// Exit code of a run that stopped with tool calls awaiting approval (`--approve defer`): not
/// an error — decide with `agentloop approve` / `deny`, then `agentloop resume`.
pub const EXIT_AWAITING_APPROVAL: u8 = 3;

/// Exit code of a run interrupted by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: u8 = 130;

/// Exit code of a run in which mutating calls were denied for lack of a terminal to ask on.
pub const EXIT_DENIED_NO_TERMINAL: u8 = 4;

/// A failed command: the one-line reason and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// The process exit code.
    pub code: u8,
    /// One line for stderr (printed after `agentloop: `).
    pub message: String,
}

impl Failure {
    /// A runtime failure (exit code 1).
    pub fn new(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }

    /// Bad usage (exit code 2).
    pub fn usage(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }

    /// With another exit code.
    pub fn with_code(mut self, code: u8) -> Self {
        self.code = code;
        self
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // One line, whatever the source error looked like, and no raw terminal controls (the
        // message may quote a model's or a file's text).
        let line: Vec<&str> = self.message.split_whitespace().collect();
        f.write_str(&crate::ui::safe_text::visible_line(&line.join(" ")))
    }
}

impl From<agentloop::session::SessionError> for Failure {
    fn from(e: agentloop::session::SessionError) -> Self {
        Failure::new(format!("session store: {e}"))
    }
}

impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        Failure::new(e.to_string())
    }
}
