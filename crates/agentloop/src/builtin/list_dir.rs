//! `list_dir{path?}`: the entries of one directory inside the workspace.
//!
//! Lists names only (sorted, directories marked with a trailing `/`, symbolic links with a
//! trailing `@`); it does not recurse and never follows links out of the workspace.

use serde::Deserialize;
use serde_json::{Value, json};

use super::io_error;
use super::listing::Listing;
use super::retention::Spill;
use super::schema;
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// The most entries one listing shows.
pub const MAX_ENTRIES: usize = 1000;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    path: Option<String>,
}

pub(super) const DESCRIPTION: &str = "List the entries of a directory in the workspace (default: \
the workspace root), sorted by name. Directories end with `/`, symbolic links with `@`. Does not \
recurse; use find_files to search a tree.";

pub(super) fn schema() -> Value {
    schema::object(
        json!({
            "path": schema::string(
                "Directory to list, relative to the workspace root (default \".\", the root)."
            )
        }),
        &[],
    )
}

/// The listing; every entry goes to `spill` when given (the model gets the first
/// [`MAX_ENTRIES`]).
pub(super) fn run(
    workspace: &Workspace,
    args: Args,
    spill: Option<Spill>,
) -> Result<String, ToolError> {
    let path = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown = workspace.display(&path);
    let meta = workspace.metadata(&path).ok();
    if !meta.as_ref().is_some_and(|m| m.is_dir()) {
        if meta.is_some() {
            return Err(ToolError::new(format!(
                "`{shown}` is a file, not a directory; use read_file to read it"
            )));
        }
        return Err(ToolError::new(format!(
            "`{shown}` does not exist; list_dir the parent directory to see what is there"
        )));
    }
    let reader = workspace
        .read_dir(&path)
        .map_err(|e| io_error("list", &shown, &e))?;
    let mut entries = Vec::new();
    for entry in reader {
        let entry = entry.map_err(|e| io_error("list", &shown, &e))?;
        let mut name = entry.file_name().to_string_lossy().into_owned();
        match entry.file_type() {
            Ok(t) if t.is_dir() => name.push('/'),
            Ok(t) if t.is_symlink() => name.push('@'),
            _ => {}
        }
        entries.push(name);
    }
    if entries.is_empty() {
        return Ok(format!("(`{shown}` is empty)"));
    }
    Ok(Listing::sorted(
        entries,
        MAX_ENTRIES,
        spill,
        |left, total| {
            format!(
                "[... {left} more entries not shown ({total} in total); use find_files with a pattern to narrow down]"
            )
        },
    ))
}
