//! The full outputs of a session's recent tool calls, for the person reading after the model:
//! where they are kept (`outputs/<session>/` in the data directory, next to the session
//! database and the checkpoints, never in the workspace), how a run keeps them (every built-in
//! tool that cuts its result streams the whole of it there, and every other tool's over-long
//! result is cut and kept whole by an extension), and how they are read back: `agentloop
//! sessions show --full` and the chat's `/output [CALL_ID]`, which opens one in `$PAGER`. Each
//! kept output has its own number, which the note in the cut result names, so a call id the
//! model uses again finds each output apart.
//!
//! Bounds: the last 50 kept outputs or 64 MiB per session, whichever is reached first
//! ([`agentloop::builtin::MAX_RETAINED_CALLS`], `MAX_RETAINED_BYTES`); the oldest go first. A
//! session's outputs go when the session is deleted.

use std::io::Write;
use std::path::PathBuf;

use agentloop::agent::Extension;
use agentloop::builtin::{
    OutputStore, ShellOptions, retained_call, retained_number, safe_file_name,
};
use agentloop::session::SessionStore;
use agentloop::transcript::{Message, Role, ToolResultPart};

use crate::error::Failure;
use crate::ui::render::Style;
use crate::ui::safe_text::visible_line;

/// `outputs/` in the data directory.
fn root() -> Result<PathBuf, Failure> {
    let db = crate::commands::sessions::default_db_path()?;
    db.parent()
        .map(|p| p.join("outputs"))
        .ok_or_else(|| Failure::new("cannot find a data directory for tool outputs"))
}

/// The store of `session`'s outputs (created when missing).
pub fn store(session: &str) -> Result<OutputStore, Failure> {
    let dir = root()?.join(safe_file_name(session));
    OutputStore::open(&dir).map_err(|e| Failure::new(format!("cannot use {}: {e}", dir.display())))
}

/// For a run of `session` (`run`, `chat`, an editor's session over ACP): the shell options that
/// make the built-in tools keep the full output of each call they cut, and the extension that
/// keeps other tools' over-long results. Without a data directory the run goes on with
/// truncated outputs only (said once on stderr).
pub fn attach(shell: &ShellOptions, session: &str) -> (ShellOptions, Option<Extension>) {
    match store(session) {
        Ok(store) => (
            shell.clone().retain_outputs(store.clone()),
            Some(store.extension()),
        ),
        Err(e) => {
            eprintln!("agentloop: warning: full tool outputs are not kept: {e}");
            (shell.clone(), None)
        }
    }
}

/// Deletes `session`'s outputs (with the session).
pub fn remove(session: &str) -> Result<(), Failure> {
    let dir = root()?.join(safe_file_name(session));
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Failure::new(format!(
            "cannot delete {}: {e}",
            dir.display()
        ))),
        _ => Ok(()),
    }
}

/// What a tool result's full output is: kept (the text, and its number in the store), pruned
/// since, or the result itself (it was never truncated).
enum Full {
    Kept(String, Option<u64>),
    Pruned,
    Whole,
}

/// The output a result's note names: by its number, which is the one output of that result
/// even when the model used the call id again (a note without a number names the call's
/// latest output).
fn full_of(store: Option<&OutputStore>, result: &ToolResultPart) -> Full {
    let Some(call) = retained_call(&result.content) else {
        return Full::Whole;
    };
    let number = retained_number(&result.content);
    let kept = store.and_then(|s| match number {
        Some(n) => s.read_output(n, &result.call_id).ok().flatten(),
        None => s.read(call).ok().flatten(),
    });
    match kept {
        Some(bytes) => Full::Kept(String::from_utf8_lossy(&bytes).into_owned(), number),
        None => Full::Pruned,
    }
}

/// `sessions show --full`: the transcript with every tool result whole — the kept full output
/// where the model got a truncated one, and a note where that output was pruned since.
pub fn full_transcript(style: Style, session: &str, messages: &[Message]) -> String {
    let store = store(session).ok();
    let mut text = String::new();
    for message in messages {
        match message.role {
            Role::User | Role::Custom => {
                for line in message.text().lines() {
                    text.push_str(&style.bold(&format!("> {}", visible_line(line))));
                    text.push('\n');
                }
            }
            Role::Assistant => {
                for line in message.text().trim_end().lines() {
                    text.push_str(&visible_line(line));
                    text.push('\n');
                }
                for call in message.tool_calls() {
                    text.push_str(&format!(
                        "{} {} {}\n",
                        style.cyan("→"),
                        style.bold(&visible_line(&call.tool_name)),
                        style.dim(&format!("(call {})", visible_line(&call.id)))
                    ));
                }
            }
            Role::ToolResult => {
                if let Some(result) = message.tool_result_part() {
                    text.push_str(&result_block(style, store.as_ref(), result));
                }
            }
            _ => {}
        }
    }
    text
}

fn result_block(style: Style, store: Option<&OutputStore>, result: &ToolResultPart) -> String {
    let call = visible_line(&result.call_id);
    let (heading, body) = match full_of(store, result) {
        Full::Kept(full, number) => (format!("full output of call {call}{}", of(number)), full),
        Full::Pruned => (
            format!(
                "call {call}: full output pruned (only the most recent calls' are kept); \
                 the truncated result follows"
            ),
            result.content.clone(),
        ),
        Full::Whole => (format!("result of call {call}"), result.content.clone()),
    };
    let mut text = format!("{}\n", style.dim(&format!("┌ {heading}")));
    for line in body.lines() {
        text.push_str(&visible_line(line));
        text.push('\n');
    }
    text.push_str(&format!("{}\n", style.dim("└")));
    text
}

/// ` (output #N)` for a kept output's number.
fn of(number: Option<u64>) -> String {
    number
        .map(|n| format!(" (output #{n})"))
        .unwrap_or_default()
}

/// The chat's `/output [CALL_ID]`: the full output of that call (default: the last one whose
/// result was truncated; the latest of a call id the model used more than once; `#N` for the
/// output a note numbers N) in `$PAGER`, or printed when there is no terminal or no pager;
/// what went wrong is one line.
pub fn open(sessions: &dyn SessionStore, session: &str, call: &str, style: Style) {
    let shown = sessions
        .load_raw(session)
        .map_err(|e| Failure::new(e.to_string()))
        .and_then(|messages| show(session, &messages, call));
    if let Err(e) = shown {
        println!("{}", style.red(&e.to_string()));
    }
}

fn show(session: &str, messages: &[Message], call: &str) -> Result<(), Failure> {
    let mut results = messages.iter().filter_map(Message::tool_result_part);
    let wanted = if call.is_empty() {
        results
            .rfind(|r| retained_call(&r.content).is_some())
            .ok_or_else(|| Failure::new("no tool output of this session was truncated"))?
    } else {
        let numbered = call.strip_prefix('#').and_then(|n| n.parse::<u64>().ok());
        results
            .clone()
            .rfind(|r| r.call_id == call)
            .or_else(|| {
                results.rfind(|r| numbered.is_some() && retained_number(&r.content) == numbered)
            })
            .ok_or_else(|| {
                Failure::new(format!("this session has no call {}", visible_line(call)))
            })?
    };
    let text = match full_of(store(session).ok().as_ref(), wanted) {
        Full::Kept(full, _) => full,
        Full::Pruned => {
            return Err(Failure::new(format!(
                "the full output of call {} was pruned (only the most recent calls' are kept)",
                visible_line(&wanted.call_id)
            )));
        }
        Full::Whole => wanted.content.clone(),
    };
    page(&text);
    Ok(())
}

/// Shows `text` in `$PAGER` (default `less -R`) when stdout is a terminal; prints it otherwise
/// or when the pager cannot run.
fn page(text: &str) {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        let pager = std::env::var("PAGER")
            .ok()
            .filter(|p| !p.trim().is_empty())
            .unwrap_or_else(|| "less -R".to_owned());
        // `$PAGER` may carry arguments (`less -R`): run by the shell, as other tools do.
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg(&pager)
            .stdin(std::process::Stdio::piped())
            .spawn();
        if let Ok(mut child) = child {
            if let Some(mut stdin) = child.stdin.take() {
                // A pager quit before the end closes the pipe: not an error.
                let _ = stdin.write_all(text.as_bytes());
            }
            if child.wait().is_ok_and(|s| s.success()) {
                return;
            }
        }
    }
    crate::ui::render::out(text);
    if !text.ends_with('\n') {
        crate::ui::render::out("\n");
    }
}
