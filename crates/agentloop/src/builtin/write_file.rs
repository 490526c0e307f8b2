//! `write_file{path, content}`: create or overwrite a file inside the workspace.
//!
//! Creates missing parent directories. Refuses to replace a directory. Never touches anything
//! outside the workspace (the path is confined by [`Workspace::resolve`]). Writes through the
//! workspace's [`TextFiles`](super::TextFiles) (an editor's buffer) when it has one.

use serde::Deserialize;
use serde_json::{Value, json};

use super::io_error;
use super::output::thousands;
use super::schema;
use super::workspace::Workspace;
use crate::tooling::ToolError;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    path: String,
    content: String,
}

pub(super) const DESCRIPTION: &str = "Create a file in the workspace, or replace its whole \
content. Missing parent directories are created. To change part of an existing file, prefer \
edit_file.";

pub(super) fn schema() -> Value {
    schema::object(
        json!({
            "path": schema::file_path("File to write"),
            "content": schema::string("The complete new content of the file.")
        }),
        &["path", "content"],
    )
}

pub(super) fn run(workspace: &Workspace, args: Args) -> Result<String, ToolError> {
    let (path, shown, existing) = workspace.file_to_write(&args.path)?;
    let existed = existing.is_some();
    super::text_files::write(workspace, &path, existing.as_ref(), &args.content)
        .map_err(|e| io_error("write", &shown, &e))?;
    let verb = if existed { "overwrote" } else { "created" };
    Ok(format!(
        "Wrote {} bytes to `{shown}` ({verb}).",
        thousands(args.content.len())
    ))
}
