//! `edit_file{path, old_text, new_text}`: replace one exact, unique piece of text in a file.
//!
//! The replacement happens only when `old_text` occurs exactly once, so the model cannot edit the
//! wrong place by accident; otherwise the error says how to fix the call. Refuses binary files.
//! Reads and writes through the workspace's [`TextFiles`](super::TextFiles) when it has one.

use serde::Deserialize;
use serde_json::{Value, json};

use super::schema;
use super::workspace::Workspace;
use super::{io_error, looks_binary};
use crate::tooling::ToolError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    path: String,
    old_text: String,
    new_text: String,
}

pub(super) const DESCRIPTION: &str = "Edit a file in the workspace by replacing one exact piece \
of text. old_text must match the file exactly (whitespace and indentation included) and occur \
exactly once; include enough surrounding lines to make it unique. Read the file first.";

pub(super) fn schema() -> Value {
    schema::object(
        json!({
            "path": schema::file_path("File to edit"),
            "old_text": schema::non_empty_string(
                "The exact text to replace; it must occur exactly once in the file."
            ),
            "new_text": schema::string(
                "The text to put in its place (may be empty to delete old_text)."
            )
        }),
        &["path", "old_text", "new_text"],
    )
}

pub(super) fn run(workspace: &Workspace, args: Args) -> Result<String, ToolError> {
    let (path, shown, existing) = workspace.file_to_write(&args.path)?;
    if args.old_text.is_empty() {
        return Err(ToolError::new(
            "old_text is empty; copy the exact text to replace from the file",
        ));
    }
    let bytes = super::text_files::read_for_edit(workspace, &path, &shown)?;
    if looks_binary(&bytes) {
        return Err(ToolError::new(format!(
            "`{shown}` looks like a binary file; edit_file only edits text"
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::new(format!(
            "`{shown}` is not valid UTF-8 text; edit_file cannot edit it safely"
        ))
    })?;

    let mut matches = text.match_indices(&args.old_text);
    let Some((at, _)) = matches.next() else {
        return Err(ToolError::new(format!(
            "old_text was not found in `{shown}`; read the file and copy the exact text"
        )));
    };
    let others = matches.count();
    if others > 0 {
        return Err(ToolError::new(format!(
            "old_text occurs {} times in `{shown}`; include more surrounding context so it is unique",
            others + 1
        )));
    }

    let mut edited = String::with_capacity(text.len() + args.new_text.len());
    edited.push_str(&text[..at]);
    edited.push_str(&args.new_text);
    edited.push_str(&text[at + args.old_text.len()..]);
    super::text_files::write(workspace, &path, existing.as_ref(), &edited)
        .map_err(|e| io_error("write", &shown, &e))?;

    let line = text[..at].matches('\n').count() + 1;
    let old_lines = args.old_text.lines().count().max(1);
    let new_lines = args.new_text.lines().count();
    Ok(format!(
        "Edited `{shown}` at line {line}: replaced {old_lines} line(s) with {new_lines} line(s)."
    ))
}
