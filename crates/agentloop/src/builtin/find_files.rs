//! `find_files{pattern, path?}`: files in the workspace whose path matches a glob.
//!
//! Also owns the walking and glob-matching rules `grep` shares: `.gitignore`/`.ignore` rules are
//! respected, hidden entries (and so `.git`) are skipped, symbolic links are not followed (a link
//! cannot lead the walk out of the workspace). Reads no file contents.

use std::path::Path;

use globset::GlobMatcher;
use serde::Deserialize;
use serde_json::{Value, json};

use super::listing::Listing;
use super::retention::Spill;
use super::schema;
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// The most paths one search returns.
pub const MAX_RESULTS: usize = 500;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    pattern: String,
    path: Option<String>,
}

pub(super) const DESCRIPTION: &str = "Find files in the workspace by glob pattern. A pattern \
without `/` matches file names at any depth (`*.rs`, `Cargo.toml`); a pattern with `/` matches \
the path relative to `path` (`src/**/*.rs`). `*` does not cross `/`, `**` does, `{a,b}` \
alternates. Files ignored by .gitignore and hidden files are skipped. Results are sorted paths \
relative to the workspace root.";

pub(super) fn schema() -> Value {
    schema::object(
        json!({
            "pattern": schema::non_empty_string(
                "Glob pattern, e.g. \"*.rs\" or \"src/**/*.toml\"."
            ),
            "path": schema::string(
                "Directory to search, relative to the workspace root (default \".\", the root)."
            )
        }),
        &["pattern"],
    )
}

/// A compiled glob with find_files' matching rule (name-only unless the pattern has a `/`).
pub(super) struct PathGlob {
    matcher: GlobMatcher,
    whole_path: bool,
}

impl PathGlob {
    pub(super) fn new(pattern: &str) -> Result<Self, ToolError> {
        Ok(PathGlob {
            matcher: super::patterns::compile_glob(pattern)?,
            whole_path: pattern.contains('/'),
        })
    }

    /// Whether `relative` (a path relative to the search directory) matches.
    pub(super) fn is_match(&self, relative: &Path) -> bool {
        if self.whole_path {
            self.matcher.is_match(relative)
        } else {
            relative
                .file_name()
                .is_some_and(|name| self.matcher.is_match(name))
        }
    }
}

/// Visits every regular file under `dir` (or `dir` itself if it is a file), honouring ignore
/// files, skipping hidden entries and not following symbolic links, in file-name order. Stops early when
/// `cancelled()` turns true or `visit` returns `false`.
pub(super) fn walk_files(
    dir: &Path,
    cancelled: &dyn Fn() -> bool,
    visit: &mut dyn FnMut(&Path) -> bool,
) {
    let walker = ignore::WalkBuilder::new(dir)
        .require_git(false)
        .follow_links(false)
        // Deterministic order, so grep's output (and its cap) does not depend on the disk.
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        if cancelled() {
            return;
        }
        let Ok(entry) = entry else { continue };
        if entry.file_type().is_some_and(|t| t.is_file()) && !visit(entry.path()) {
            return;
        }
    }
}

/// The search; every matching path goes to `spill` when given (the model gets the first
/// [`MAX_RESULTS`]).
pub(super) fn run(
    workspace: &Workspace,
    args: Args,
    cancelled: &dyn Fn() -> bool,
    spill: Option<Spill>,
) -> Result<String, ToolError> {
    let glob = PathGlob::new(&args.pattern)?;
    let dir = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown = workspace.display(&dir);
    if !workspace.metadata(&dir).is_ok_and(|m| m.is_dir()) {
        return Err(ToolError::new(format!(
            "`{shown}` is not a directory; give a directory to search in (default: the workspace root)"
        )));
    }
    let mut found = Vec::new();
    walk_files(&dir, cancelled, &mut |file| {
        if let Ok(relative) = file.strip_prefix(&dir) {
            if glob.is_match(relative) {
                found.push(workspace.display(file));
            }
        }
        true
    });
    if found.is_empty() {
        return Ok(format!("No files match `{}` in `{shown}`.", args.pattern));
    }
    Ok(Listing::sorted(found, MAX_RESULTS, spill, |left, total| {
        format!(
            "[... {left} more files not shown ({total} matched); use a narrower pattern or path]"
        )
    }))
}
