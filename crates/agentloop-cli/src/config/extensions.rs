//! The extension points a run loads from files, as plain values: permission rules (`crate::config::permissions`)
//! command hooks (`crate::config::hooks`) and skills
//! (`crate::config::skills`). Loaded once per run from the user's files and, when the workspace
//! is trusted, the workspace's; `crate::commands::run::execute` hands them to the library (the loop only
//! ever sees the library's policies, tools and hooks). See `docs/EXTENDING.md`.

use std::path::Path;

use agentloop::agent::command_hooks::CommandHook;
use agentloop::builtin::{PermissionRules, Skills};

use crate::error::Failure;

/// Everything loaded for one run.
#[derive(Clone, Debug, Default)]
pub struct Extensions {
    /// `[permissions]` of the config files.
    pub permissions: PermissionRules,
    /// `[[hooks.EVENT]]` of the config files.
    pub hooks: Vec<CommandHook>,
    /// The skills (`crate::config::skills`).
    pub skills: Skills,
    /// The sub-agents the `task` tool delegates to (`crate::config::agents`).
    pub agents: Vec<crate::config::agents::AgentDef>,
}

impl Extensions {
    /// Loads the extension points for `workspace`; `trusted` says whether the workspace's own
    /// files may widen what runs (decided by the caller).
    pub fn load(workspace: &Path, trusted: bool) -> Result<Extensions, Failure> {
        Ok(Extensions {
            permissions: crate::config::permissions::load(workspace, trusted)?,
            hooks: crate::config::hooks::load(workspace, trusted)?,
            skills: skipping("skill", crate::config::skills::load(workspace, trusted)),
            agents: skipping("agent", crate::config::agents::load(workspace, trusted)),
        })
    }

    /// Adds a custom command's `allowed_tools` as allow rules for this prompt.
    pub fn allow_for_prompt(&mut self, rules: &[String]) -> Result<(), Failure> {
        let extra = PermissionRules::new(rules, [""; 0])
            .map_err(|e| Failure::usage(format!("the command's allowed_tools: {e}")))?;
        self.permissions.extend(extra);
        Ok(())
    }
}

/// What loaded, after one stderr line for each file `what` that was skipped and why.
fn skipping<T>(what: &str, (loaded, problems): (T, Vec<String>)) -> T {
    for problem in problems {
        eprintln!(
            "agentloop: skipped {what}: {}",
            crate::ui::safe_text::visible_line(&problem)
        );
    }
    loaded
}
