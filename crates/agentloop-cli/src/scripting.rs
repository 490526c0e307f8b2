//! What `agentloop run` offers scripts: `-q/--quiet` (only the final answer on
//! stdout), the `--json` additions (the session id in `agent_start`, a closing `result` event),
//! `--output-last-message FILE`, and a prompt argument combined with piped standard input.
//!
//! Kept apart from the renderer: these are decisions about what a finished run reports, made
//! once per run, while the renderer only formats events as they come.

use std::io::{IsTerminal, Read};
use std::path::Path;

use agentloop::agent::{AgentEvent, RunStop};
use agentloop::transcript::{Message, Role};
use serde_json::{Value, json};

use crate::commands::run::RunReport;
use crate::error::Failure;

/// Largest piped standard input accepted as context (bytes); more is an error rather than a
/// silently truncated prompt.
const MAX_STDIN_BYTES: u64 = 8 * 1024 * 1024;

/// The `agent_start` JSON line with the session id the run is recorded into.
pub fn agent_start_line(session_id: &str) -> String {
    let mut value = serde_json::to_value(AgentEvent::AgentStart).unwrap_or_else(|_| json!({}));
    if let Value::Object(map) = &mut value {
        map.insert("type".into(), json!("agent_start"));
        map.insert("session_id".into(), json!(session_id));
    }
    value.to_string()
}

/// The text of the last assistant message of a run ("" when the model never answered).
pub fn final_text(report: &RunReport) -> String {
    let messages: &[Message] = match &report.outcome {
        Ok(outcome) => outcome.new_messages(),
        Err(_) => &[],
    };
    messages
        .iter()
        .rev()
        .find(|m| m.role == Role::Assistant && !m.text().trim().is_empty())
        .map(Message::text)
        .unwrap_or_default()
}

/// The closing `result` event of `--json`: final text, why the run stopped, turns, usage and
/// cost, and the session id.
pub fn result_line(report: &RunReport, session_id: &str) -> String {
    let stop = serde_json::to_value(&report.stop).unwrap_or(Value::Null);
    let usage = serde_json::to_value(report.totals.usage).unwrap_or(Value::Null);
    json!({
        "type": "result",
        "session_id": session_id,
        "text": final_text(report),
        "stop": stop,
        "success": matches!(report.stop, RunStop::Done),
        "turns": report.totals.turns,
        "tool_calls": report.totals.tool_calls,
        "usage": usage,
        "cost_usd": report.totals.usage.cost_usd,
    })
    .to_string()
}

/// Writes the final answer to `path` (`--output-last-message`), creating or replacing it.
pub fn write_last_message(path: &Path, report: &RunReport) -> Result<(), Failure> {
    std::fs::write(path, final_text(report)).map_err(|e| {
        Failure::new(format!(
            "cannot write the last message to {}: {e}",
            path.display()
        ))
    })
}

/// The prompt of a run: the argument (`-` reads the whole prompt from stdin), with piped
/// standard input appended as context when both are given (as codex does). A terminal on
/// stdin is never read.
pub fn combined_prompt(argument: &str) -> Result<String, Failure> {
    let stdin = std::io::stdin();
    if argument == "-" {
        return read_stdin(stdin);
    }
    if stdin.is_terminal() {
        return Ok(argument.to_owned());
    }
    let piped = read_stdin(stdin)?;
    Ok(combine(argument, &piped))
}

/// `prompt` with `context` appended in a delimited block (or `prompt` alone when the context
/// is blank).
pub fn combine(prompt: &str, context: &str) -> String {
    if context.trim().is_empty() {
        return prompt.to_owned();
    }
    let context = context.strip_suffix('\n').unwrap_or(context);
    format!("{prompt}\n\n<stdin>\n{context}\n</stdin>")
}

fn read_stdin(stdin: std::io::Stdin) -> Result<String, Failure> {
    let mut bytes = Vec::new();
    stdin
        .lock()
        .take(MAX_STDIN_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Failure::new(format!("cannot read standard input: {e}")))?;
    if bytes.len() as u64 > MAX_STDIN_BYTES {
        return Err(Failure::usage(format!(
            "standard input is larger than {} MiB",
            MAX_STDIN_BYTES / (1024 * 1024)
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| Failure::usage("standard input is not UTF-8 text".to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stdin_is_appended_as_a_delimited_block() {
        assert_eq!(combine("fix it", ""), "fix it");
        assert_eq!(combine("fix it", " \n"), "fix it");
        assert_eq!(
            combine("fix it", "error: x\n"),
            "fix it\n\n<stdin>\nerror: x\n</stdin>"
        );
    }

    #[test]
    fn agent_start_carries_the_session_id() {
        let line: Value = serde_json::from_str(&agent_start_line("abc")).unwrap_or_default();
        assert_eq!(line["type"], "agent_start");
        assert_eq!(line["session_id"], "abc");
    }
}
