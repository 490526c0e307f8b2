//! `!command` in chat: the person runs a shell command themselves, through the same tool the
//! agent's `shell` calls use (the same sandbox, environment filter and workspace directory), so
//! a command typed here can do no more than one the agent would run. The output is shown, and
//! kept for the model: the next prompt starts with "The user ran `command`: …", so what the
//! person looked at is part of what they ask about. Ctrl-C stops the command (dropping the
//! call kills it and everything it started).

use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, ShellOptions, Workspace, WorkspaceDeps, tools_with};
use serde_json::json;

/// Most characters of one command's output kept for the model (the tool bounds it as well).
const KEPT_CHARS: usize = 16 * 1024;

/// What one `!command` printed (its output, or why it failed), for the screen and the model.
pub struct Ran {
    /// The command as typed.
    pub command: String,
    /// What the shell tool returned: the output, or its error text.
    pub output: String,
    /// The command was stopped with Ctrl-C.
    pub interrupted: bool,
}

impl Ran {
    /// The context offered to the model with the next prompt.
    pub fn context(&self) -> String {
        let output: String = self.output.chars().take(KEPT_CHARS).collect();
        let cut = if output.len() < self.output.len() {
            "\n[output truncated]"
        } else {
            ""
        };
        let stopped = if self.interrupted {
            " (stopped with Ctrl-C)"
        } else {
            ""
        };
        format!(
            "The user ran `{}`{stopped}:\n```\n{}{cut}\n```",
            self.command,
            output.trim_end()
        )
    }
}

/// Runs `command` with the agent's shell tool on `workspace`, no approval asked (the person
/// typed it).
pub async fn run(workspace: &Workspace, options: &ShellOptions, command: &str) -> Ran {
    let spec = tools_with::<WorkspaceDeps>(workspace, options)
        .into_iter()
        .find(|tool| tool.name() == "shell");
    let Some(spec) = spec else {
        return Ran {
            command: command.to_owned(),
            output: "the shell tool is not available".to_owned(),
            interrupted: false,
        };
    };
    let deps = Arc::new(WorkspaceDeps::new(workspace.clone(), ApprovalPolicy::Never));
    let call = spec.call(deps, json!({ "command": command }));
    let (output, interrupted) = tokio::select! {
        result = call => match result {
            Ok(out) => (out.content, false),
            Err(e) => (e.message().to_owned(), false),
        },
        _ = tokio::signal::ctrl_c() => ("(stopped)".to_owned(), true),
    };
    Ran {
        command: command.to_owned(),
        output,
        interrupted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_context_names_the_command_and_holds_its_output() {
        let ran = Ran {
            command: "echo hi".into(),
            output: "hi\n".into(),
            interrupted: false,
        };
        assert_eq!(ran.context(), "The user ran `echo hi`:\n```\nhi\n```");
    }
}
