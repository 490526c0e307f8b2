//! Skills on disk: `~/.config/agentloop/skills/*/SKILL.md` always and, in a trusted workspace,
//! `.agentloop/skills/*/` and `.claude/skills/*/` (a workspace skill wins over a user skill of
//! the same name). They become the library's [`Skills`]: names and descriptions in the system
//! prompt, bodies through the `skill` tool. `agentloop skills list` and `/skills` in chat show
//! them. See `docs/EXTENDING.md`.

use std::path::{Path, PathBuf};

use agentloop::builtin::{Skill, Skills};

use crate::config::files::extension_dirs;
use crate::ui::safe_text::visible_line;

/// The skill directories for `workspace`, most specific first.
pub fn roots(workspace: &Path, trusted: bool) -> Vec<PathBuf> {
    extension_dirs(workspace, trusted, "skills")
}

/// The skills for `workspace`, and one line per skill that could not be read.
pub fn load(workspace: &Path, trusted: bool) -> (Skills, Vec<String>) {
    let mut skills = Skills::default();
    let mut problems = Vec::new();
    for root in roots(workspace, trusted) {
        let (found, bad) = Skills::load_dir(&root);
        problems.extend(bad);
        for skill in found {
            skills.push(skill);
        }
    }
    (skills, problems)
}

/// The `skill` tool when there are skills (none otherwise).
pub fn tool(
    skills: &Skills,
) -> Result<
    Option<agentloop::tooling::ToolSpec<agentloop::builtin::WorkspaceDeps>>,
    crate::error::Failure,
> {
    if skills.is_empty() {
        return Ok(None);
    }
    agentloop::builtin::skill_tool(skills.clone())
        .map(Some)
        .map_err(|e| crate::error::Failure::new(format!("cannot build the skill tool: {e}")))
}

/// One line per skill: name, description, directory.
pub fn listing(skills: &Skills) -> String {
    if skills.is_empty() {
        return "no skills (add directories with a SKILL.md to ~/.config/agentloop/skills/)\n"
            .to_owned();
    }
    let mut out = String::new();
    for skill in skills.iter() {
        out.push_str(&format!(
            "{}  {}  {}\n",
            visible_line(&skill.name),
            crate::ui::render::one_line(&skill.description, 80),
            skill
                .dir
                .as_deref()
                .map(|d| visible_line(&d.display().to_string()))
                .unwrap_or_default()
        ));
    }
    out
}

/// `agentloop skills list`.
pub fn list(
    workspace: Option<PathBuf>,
    json: bool,
    trust_flag: bool,
) -> Result<(), crate::error::Failure> {
    let workspace = match workspace {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let trusted =
        crate::config::trust::Trust::evaluate(&workspace, trust_flag)?.applies_to(&workspace);
    let (skills, problems) = load(&workspace, trusted);
    for problem in &problems {
        eprintln!("agentloop: skipped skill: {}", visible_line(problem));
    }
    if json {
        for skill in skills.iter() {
            println!("{}", describe(skill));
        }
    } else {
        crate::ui::render::out(&listing(&skills));
    }
    Ok(())
}

fn describe(skill: &Skill) -> serde_json::Value {
    serde_json::json!({
        "name": skill.name,
        "description": skill.description,
        "allowed_tools": skill.allowed_tools,
        "dir": skill.dir,
    })
}
