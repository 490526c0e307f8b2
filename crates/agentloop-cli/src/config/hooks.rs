//! The `[[hooks.EVENT]]` tables of the config files, turned into the library's
//! [`CommandHook`]s, and the run's points where the CLI calls the hooks the loop does not
//! (`session_start`, `user_prompt_submit`, `session_end`). See `docs/EXTENDING.md`.
//!
//! Hooks start programs, so a workspace file's hooks apply only in a trusted workspace; the
//! user file's always do.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use agentloop::agent::RunStop;
use agentloop::agent::command_hooks::{CommandHook, CommandHooks, HookEvent, HookReport, OnError};
use regex::Regex;
use serde::Deserialize;
use serde_json::{Map, json};

use crate::config::files::{ConfigFile, user_config_path};
use crate::error::Failure;

/// One `[[hooks.EVENT]]` entry.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct HookEntry {
    /// A regex the tool name must match (tool events); absent: every tool.
    pub matcher: Option<String>,
    /// The command line, run by `sh -c` in the workspace.
    pub command: String,
    /// Seconds (default 60).
    pub timeout: Option<f64>,
    /// `"block"` (default for `pre_tool_use`) or `"allow"`: what a failing hook means.
    pub on_error: Option<String>,
}

/// One file's hooks, checked.
#[derive(Clone, Debug, Default)]
pub struct HooksTable {
    hooks: Vec<CommandHook>,
}

impl HooksTable {
    /// Parses the `[hooks]` value; `origin` names the file in errors.
    pub fn from_toml(value: toml::Value, origin: &str) -> Result<Self, Failure> {
        let invalid = |m: String| Failure::usage(format!("invalid config file {origin}: {m}"));
        let events: BTreeMap<String, Vec<HookEntry>> =
            value.try_into().map_err(|e: toml::de::Error| {
                invalid(format!(
                    "[hooks]: {} (expected [[hooks.EVENT]] tables with `command`, and optionally \
                     `matcher`, `timeout`, `on_error`)",
                    e.message()
                ))
            })?;
        let mut hooks = Vec::new();
        for (name, entries) in events {
            let event = HookEvent::from_name(&name).ok_or_else(|| {
                let known: Vec<&str> = HookEvent::ALL.iter().map(HookEvent::as_str).collect();
                invalid(format!(
                    "unknown hook event `{name}`; expected one of {}",
                    known.join(", ")
                ))
            })?;
            for entry in entries {
                hooks.push(
                    entry
                        .into_hook(event)
                        .map_err(|m| invalid(format!("hooks.{name}: {m}")))?,
                );
            }
        }
        Ok(HooksTable { hooks })
    }

    /// Both files' hooks, `other`'s after this one's.
    pub fn concat(mut self, other: HooksTable) -> HooksTable {
        self.hooks.extend(other.hooks);
        self
    }
}

impl HookEntry {
    fn into_hook(self, event: HookEvent) -> Result<CommandHook, String> {
        if self.command.trim().is_empty() {
            return Err("`command` is empty".into());
        }
        let mut hook = CommandHook::new(event, self.command);
        if let Some(matcher) = self.matcher.filter(|m| !m.is_empty() && m != "*") {
            hook.matcher = Some(
                Regex::new(&matcher).map_err(|e| format!("`matcher` is not a valid regex: {e}"))?,
            );
        }
        if let Some(secs) = self.timeout {
            if !(secs.is_finite() && secs > 0.0 && secs <= 86_400.0) {
                return Err(format!(
                    "`timeout` must be a positive number of seconds, got {secs}"
                ));
            }
            hook.timeout = Duration::from_secs_f64(secs);
        }
        hook.on_error = match self.on_error.as_deref() {
            None | Some("block") => OnError::Default,
            Some("allow") => OnError::Allow,
            Some(other) => {
                return Err(format!(
                    "`on_error` must be \"block\" or \"allow\", got {other:?}"
                ));
            }
        };
        Ok(hook)
    }
}

/// What an untrusted workspace file's hooks ask for and do not get: every hook.
pub fn untrusted_widening(table: &HooksTable) -> Vec<crate::config::trust::Ignored> {
    table
        .hooks
        .iter()
        .map(|hook| crate::config::trust::Ignored {
            key: format!("hooks.{}", hook.event.as_str()),
            value: hook.command.clone(),
        })
        .collect()
}

/// The hooks in force for `workspace`: the user file's, then the workspace file's when
/// `trusted`.
pub fn load(workspace: &Path, trusted: bool) -> Result<Vec<CommandHook>, Failure> {
    let mut hooks = Vec::new();
    if let Some(path) = user_config_path() {
        hooks.extend(ConfigFile::read(&path)?.hooks.hooks);
    }
    if trusted {
        let local = ConfigFile::read(&workspace.join(".agentloop").join("config.toml"))?;
        hooks.extend(local.hooks.hooks);
    }
    Ok(hooks)
}

/// Shows one hook run: a `hook_result` JSON line with `--json`, else a stderr line for a block
/// or a failure.
pub fn show(report: &HookReport, json: bool) {
    if json {
        let line = json!({
            "type": "hook_result",
            "hook_event_name": report.event.as_str(),
            "command": report.command,
            "tool_name": report.tool_name,
            "exit_code": report.exit_code,
            "outcome": report.outcome,
            "message": report.message,
        });
        crate::ui::render::out(&format!("{line}\n"));
    } else if let Some(message) = &report.message {
        let what = if report.outcome == "block" {
            "blocked"
        } else {
            "warning"
        };
        eprintln!(
            "agentloop: {} hook {what}: {}",
            report.event.as_str(),
            crate::ui::safe_text::visible_line(message)
        );
    }
}

/// The hooks of one run, with their output shown as [`show`] does.
pub fn for_run(
    hooks: &[CommandHook],
    session_id: &str,
    workspace: &Path,
    json: bool,
) -> CommandHooks {
    CommandHooks::new(hooks.to_vec(), session_id, workspace.to_path_buf())
        .with_observer(move |report| show(report, json))
}

/// Before a run: `session_start` (its context is added to the system prompt) and, for a new
/// prompt, `user_prompt_submit` (a block refuses the prompt; its context is added to it).
pub fn before_run(
    hooks: &CommandHooks,
    resumed: bool,
    system_prompt: &mut String,
    prompt: &mut String,
) -> Result<(), Failure> {
    if hooks.has(HookEvent::SessionStart) {
        let mut fields = Map::new();
        fields.insert(
            "source".into(),
            json!(if resumed { "resume" } else { "startup" }),
        );
        let outcome = hooks.run(HookEvent::SessionStart, None, fields);
        for context in outcome.additional_context {
            system_prompt.push_str("\n\n");
            system_prompt.push_str(&context);
        }
    }
    if hooks.has(HookEvent::UserPromptSubmit) && !prompt.is_empty() {
        let mut fields = Map::new();
        fields.insert("prompt".into(), json!(prompt));
        let outcome = hooks.run(HookEvent::UserPromptSubmit, None, fields);
        if let Some(reason) = outcome.block {
            return Err(Failure::new(format!(
                "the prompt was refused by a user_prompt_submit hook: {}",
                crate::ui::safe_text::visible_line(&reason)
            )));
        }
        for context in outcome.additional_context {
            prompt.push_str("\n\n");
            prompt.push_str(&context);
        }
    }
    Ok(())
}

/// After a run: a `turn_finished` notification, then `session_end`, both told why the run
/// stopped.
pub fn after_run(hooks: &CommandHooks, stop: &RunStop) {
    if hooks.has(HookEvent::Notification) {
        let mut extra = Map::new();
        extra.insert(
            "reason".into(),
            serde_json::to_value(stop).unwrap_or_default(),
        );
        let message = match stop {
            RunStop::Done => "agentloop finished its turn".to_owned(),
            other => format!(
                "agentloop stopped: {}",
                serde_json::to_value(other)
                    .ok()
                    .and_then(|v| v.get("reason").and_then(|r| r.as_str()).map(str::to_owned))
                    .unwrap_or_else(|| "see the run's output".to_owned())
            ),
        };
        hooks.notify("turn_finished", &message, extra);
    }
    if hooks.has(HookEvent::SessionEnd) {
        let mut fields = Map::new();
        fields.insert(
            "reason".into(),
            serde_json::to_value(stop).unwrap_or_default(),
        );
        hooks.run(HookEvent::SessionEnd, None, fields);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bad_hook_tables_are_one_line_errors_naming_the_problem() {
        for (text, needle) in [
            ("[[hooks.pre_tool]]\ncommand = \"x\"\n", "pre_tool"),
            ("[[hooks.stop]]\ncomand = \"x\"\n", "comand"),
            ("[[hooks.stop]]\ncommand = \"\"\n", "empty"),
            (
                "[[hooks.pre_tool_use]]\ncommand = \"x\"\nmatcher = \"(\"\n",
                "matcher",
            ),
            ("[[hooks.stop]]\ncommand = \"x\"\ntimeout = 0\n", "timeout"),
            (
                "[[hooks.stop]]\ncommand = \"x\"\non_error = \"maybe\"\n",
                "on_error",
            ),
        ] {
            let err = ConfigFile::parse(text, "f.toml").unwrap_err();
            assert!(
                err.message.contains("f.toml") && err.message.contains(needle),
                "{text}: {}",
                err.message
            );
        }
        let ok = ConfigFile::parse(
            "[[hooks.pre_tool_use]]\nmatcher = \"shell|write_file\"\ncommand = \"true\"\ntimeout = 10\n",
            "f",
        )
        .unwrap();
        assert_eq!(ok.hooks.hooks.len(), 1);
        assert_eq!(ok.hooks.hooks[0].timeout, Duration::from_secs(10));
    }
}
