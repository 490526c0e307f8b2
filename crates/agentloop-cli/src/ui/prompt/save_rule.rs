//! After "always" at the approval prompt: the offer to keep it beyond this session as a
//! permission rule in a config file.
//!
//! The offer names the exact rules it would write (one `shell(…)` per command of the line, or
//! the file tool's name — see [`PermissionRules::exact_allow_rules`]), and is only made when
//! such rules exist. The default key saves nothing. The project file is offered only while the
//! workspace is trusted (its allow rules apply nowhere else); saving there changes a file the
//! trust record hashes, so the record is renewed — but only when nothing else changed since it
//! was made, so a save never blesses an edit someone (or the agent) made behind the person's
//! back.

use std::path::{Path, PathBuf};

use agentloop::builtin::PermissionRules;
use agentloop::transcript::{ToolArguments, ToolCallPart};

use super::tty::{Key, Term};
use crate::config::trust::Trust;
use crate::ui::render::Style;

/// Where "always" may save a rule.
#[derive(Clone, Debug, Default)]
pub struct RuleTargets {
    /// The user's config file (`~/.config/agentloop/config.toml`).
    pub user: Option<PathBuf>,
    /// The workspace, when its project file may be offered (it is trusted).
    pub project: Option<PathBuf>,
}

impl RuleTargets {
    /// The user's file, and `workspace`'s when it is trusted now.
    pub fn for_workspace(workspace: &Path) -> RuleTargets {
        let trusted = Trust::evaluate(workspace, false).is_ok_and(|t| t.applies_to(workspace));
        RuleTargets {
            user: crate::config::files::user_config_path(),
            project: trusted.then(|| workspace.to_path_buf()),
        }
    }
}

/// Offers to save `call`'s exact rules; prints what happened. Errors are shown, not returned:
/// the call was already allowed for the session either way.
pub fn offer(term: &Term, call: &ToolCallPart, targets: &RuleTargets, root: &Path, style: Style) {
    let ToolArguments::Json(arguments) = &call.arguments else {
        return;
    };
    let Some(rules) = PermissionRules::exact_allow_rules(&call.tool_name, arguments, root) else {
        return;
    };
    if targets.user.is_none() && targets.project.is_none() {
        return;
    }
    let shown: Vec<String> = rules
        .iter()
        .map(|r| format!("`{}`", crate::ui::safe_text::visible_line(r)))
        .collect();
    let mut choices = String::from("[N]o, this session only");
    if targets.user.is_some() {
        choices.push_str(" / [u]ser config");
    }
    if targets.project.is_some() {
        choices.push_str(" / [p]roject config");
    }
    let question = format!(
        "  {} {} as a permission rule? {choices}: ",
        style.yellow("save"),
        shown.join(", ")
    );
    let Ok(key) = term.ask_key(&question) else {
        return;
    };
    let _ = term.write(&match key {
        Key::Char(c) => format!("{c}\n"),
        _ => "\n".to_owned(),
    });
    let saved = match (key, &targets.user, &targets.project) {
        (Key::Char('u'), Some(user), _) => save(user, &rules, None),
        (Key::Char('p'), _, Some(workspace)) => save(
            &crate::config::files::project_config_path(workspace),
            &rules,
            Some(workspace),
        ),
        _ => return,
    };
    let _ = term.write(&match saved {
        Ok(line) => format!("  {line}\n"),
        Err(e) => format!("  {}\n", style.red(&e.message)),
    });
}

/// Writes the rules; for the project file, renews the trust record when it was current.
fn save(
    file: &Path,
    rules: &[String],
    workspace: Option<&Path>,
) -> Result<String, crate::error::Failure> {
    let was_current =
        workspace.is_some_and(|w| Trust::evaluate(w, false).is_ok_and(|t| t.applies_to(w)));
    crate::config::permissions::save_allow_rules(file, rules)?;
    let mut line = format!("saved to {}", file.display());
    if let Some(workspace) = workspace {
        if was_current {
            Trust::evaluate(workspace, false)?.record()?;
        } else {
            line.push_str(&format!(
                " (the workspace's trust record was not current, so it now needs {})",
                crate::config::trust::HOW_TO_TRUST
            ));
        }
    }
    Ok(line)
}
