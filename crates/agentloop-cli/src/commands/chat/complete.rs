//! The line editor's helper for chat ([`Lines`]): a line ending in `\` continues on the next,
//! and Tab completes a slash command (the built-in ones `/help` lists, then the custom ones) or
//! an `@path` mention (a path inside the workspace; directories end in `/`).

use std::path::{Component, Path, PathBuf};

use rustyline::Helper;
use rustyline::completion::{Completer, Pair};
use rustyline::validate::{ValidationContext, ValidationResult, Validator};

/// Most candidates offered for one Tab.
const MAX_CANDIDATES: usize = 200;

/// The chat's line-editor helper.
pub struct Lines {
    /// The workspace root: `@path` completes inside it.
    pub root: PathBuf,
    /// Whether the workspace is trusted (its own custom commands are offered).
    pub trusted: bool,
    /// The built-in commands, `/NAME` each.
    pub builtin: Vec<String>,
}

impl Validator for Lines {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if ctx.input().ends_with('\\') {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Completer for Lines {
    type Candidate = Pair;

    fn complete(
        &self,
        line: &str,
        pos: usize,
        _ctx: &rustyline::Context<'_>,
    ) -> rustyline::Result<(usize, Vec<Pair>)> {
        let before = &line[..pos];
        let start = before.rfind(char::is_whitespace).map_or(0, |i| {
            i + before[i..].chars().next().map_or(1, char::len_utf8)
        });
        let word = &before[start..];
        if start == 0 && word.starts_with('/') {
            return Ok((0, self.commands(word)));
        }
        match word.strip_prefix('@') {
            Some(partial) => Ok((start, paths(&self.root, partial))),
            None => Ok((pos, Vec::new())),
        }
    }
}

impl rustyline::hint::Hinter for Lines {
    type Hint = String;
}
impl rustyline::highlight::Highlighter for Lines {}
impl Helper for Lines {}

impl Lines {
    /// The commands starting with `typed` (`/he` → `/help`), built-in first.
    fn commands(&self, typed: &str) -> Vec<Pair> {
        let (custom, _) = crate::config::custom_commands::load(&self.root, self.trusted);
        let mut names: Vec<String> = self.builtin.clone();
        names.extend(custom.into_iter().map(|c| format!("/{}", c.name)));
        let mut seen = std::collections::HashSet::new();
        names
            .into_iter()
            .filter(|name| name.starts_with(typed) && seen.insert(name.clone()))
            .map(|name| Pair {
                display: name.clone(),
                replacement: format!("{name} "),
            })
            .collect()
    }
}

/// The built-in command names in a help text: the first word of every line starting with `/`
/// (placeholders such as `/mcp__SERVER__PROMPT` left out).
pub fn command_names(help: &str) -> Vec<String> {
    help.lines()
        .filter(|line| line.starts_with('/'))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| !name.chars().skip(1).any(|c| c.is_ascii_uppercase()))
        .map(str::to_owned)
        .collect()
}

/// `@partial` completed to the entries of the workspace directory it names: `@sr` → `@src/`.
/// Nothing for a path that leaves the workspace.
fn paths(root: &Path, partial: &str) -> Vec<Pair> {
    let (dir, prefix) = match partial.rfind('/') {
        Some(i) => (&partial[..=i], &partial[i + 1..]),
        None => ("", partial),
    };
    let relative = Path::new(dir);
    if relative.is_absolute()
        || relative
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Vec::new();
    }
    let Ok(real) = std::fs::canonicalize(root.join(relative)) else {
        return Vec::new();
    };
    if !real.starts_with(root) {
        return Vec::new();
    }
    let Ok(entries) = std::fs::read_dir(&real) else {
        return Vec::new();
    };
    let mut found: Vec<Pair> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let hidden = name.starts_with('.') && !prefix.starts_with('.');
            if hidden || !name.starts_with(prefix) {
                return None;
            }
            // A link to a directory completes as one (followed, like the mention itself).
            let is_dir = std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir());
            let slash = if is_dir { "/" } else { "" };
            Some(Pair {
                display: format!("{name}{slash}"),
                replacement: format!("@{dir}{name}{slash}"),
            })
        })
        .take(MAX_CANDIDATES)
        .collect();
    found.sort_by(|a, b| a.display.cmp(&b.display));
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn builtin_names_come_from_the_help_text() {
        let help = "/model ID   switch\n/mcp__SERVER__PROMPT  x\n             more\n/help  this";
        assert_eq!(command_names(help), ["/model", "/help"]);
    }

    #[test]
    fn paths_complete_inside_the_workspace_only() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "").unwrap();
        std::fs::write(root.join("setup.py"), "").unwrap();
        let replaced = |partial: &str| -> Vec<String> {
            paths(&root, partial)
                .into_iter()
                .map(|p| p.replacement)
                .collect()
        };
        assert_eq!(replaced("sr"), ["@src/"]);
        assert_eq!(replaced("s"), ["@setup.py", "@src/"]);
        assert_eq!(replaced("src/m"), ["@src/main.rs"]);
        assert!(replaced("../").is_empty());
        assert!(replaced("/etc/").is_empty());
    }
}
