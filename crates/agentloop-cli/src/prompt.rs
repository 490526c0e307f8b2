//! The interactive approval prompt for mutating tool calls (`--approve mutating`, the default).
//!
//! It asks on the controlling terminal (`/dev/tty`), or on stdin/stderr when stdin is a
//! terminal and there is no `/dev/tty`. "On a terminal" means stdin or stderr is one: a run
//! with both redirected (CI, pipes, tests) gets no prompt, and the library then denies mutating
//! calls with a reason the model sees. The prompt runs on Tokio's blocking pool
//! (`WorkspaceDeps::with_asker`), one question at a time.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agentloop::tooling::Approval;
use agentloop::transcript::ToolCallPart;

use crate::render::{Spinner, Style, abbreviate_args};

/// Where the question is asked.
#[derive(Clone, Copy, Debug)]
enum Channel {
    /// Read and write `/dev/tty`.
    #[cfg(unix)]
    DevTty,
    /// Write stderr, read stdin.
    Stdio,
}

/// Reason given to the model when the person says no.
const DECLINED: &str = "the user declined this tool call; do not retry it, ask or try another way";

/// A blocking asker for [`WorkspaceDeps::with_asker`](agentloop::builtin::WorkspaceDeps), or
/// `None` when there is no terminal to ask on.
pub fn terminal_asker(
    spinner: Arc<Spinner>,
) -> Option<impl Fn(&ToolCallPart) -> Approval + Send + Sync + 'static> {
    let stdin_tty = std::io::stdin().is_terminal();
    if !stdin_tty && !std::io::stderr().is_terminal() {
        return None;
    }
    #[cfg(unix)]
    let channel = if open_tty().is_ok() {
        Some(Channel::DevTty)
    } else {
        stdin_tty.then_some(Channel::Stdio)
    };
    #[cfg(not(unix))]
    let channel = stdin_tty.then_some(Channel::Stdio);
    let channel = channel?;
    let style =
        Style::new(std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none());
    let one_at_a_time = Mutex::new(());
    let allow_all = AtomicBool::new(false);
    Some(move |call: &ToolCallPart| {
        let _turn = one_at_a_time.lock().unwrap_or_else(PoisonError::into_inner);
        if allow_all.load(Ordering::SeqCst) {
            return Approval::Allow;
        }
        spinner.hide();
        let question = format!(
            "{} {} {}? [y]es / [n]o / [a]lways: ",
            style.yellow("allow"),
            style.bold(&call.tool_name),
            abbreviate_args(&call.arguments, 200)
        );
        spinner.set_question_open(true);
        let answer = ask(channel, &question);
        spinner.set_question_open(false);
        let answer = match answer {
            Ok(Some(answer)) => answer,
            Ok(None) | Err(_) => {
                return Approval::deny("no answer from the terminal; the call was not run");
            }
        };
        match answer.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => Approval::Allow,
            "a" | "always" => {
                allow_all.store(true, Ordering::SeqCst);
                Approval::Allow
            }
            _ => Approval::deny(DECLINED),
        }
    })
}

#[cfg(unix)]
fn open_tty() -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
}

/// Asks `question`; `Ok(None)` at end of input.
fn ask(channel: Channel, question: &str) -> std::io::Result<Option<String>> {
    let mut line = String::new();
    let read = match channel {
        #[cfg(unix)]
        Channel::DevTty => {
            let mut tty = open_tty()?;
            tty.write_all(question.as_bytes())?;
            tty.flush()?;
            BufReader::new(tty).read_line(&mut line)?
        }
        Channel::Stdio => {
            let mut err = std::io::stderr().lock();
            err.write_all(question.as_bytes())?;
            err.flush()?;
            drop(err);
            std::io::stdin().lock().read_line(&mut line)?
        }
    };
    Ok((read > 0).then_some(line))
}
