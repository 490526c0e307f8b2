//! `grep{pattern, path?, glob?}`: search file contents in the workspace with a regular
//! expression.
//!
//! Walks like `find_files` (ignore files respected, hidden entries skipped, links not followed),
//! skips binary files, and reports `path:line: text` for each matching line, capped with a note
//! saying how many matches were cut. Never modifies files.

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use regex::{Regex, RegexBuilder};
use serde::Deserialize;
use serde_json::{Value, json};

use super::find_files::{PathGlob, walk_files};
use super::looks_binary;
use super::output::{OUTPUT_LIMIT, clip, thousands, truncate_output};
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// The most matching lines one search shows.
pub const MAX_MATCHES: usize = 200;
/// Longest matching line shown in full.
const MAX_LINE_BYTES: usize = 300;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

pub(super) const DESCRIPTION: &str = "Search file contents in the workspace with a regular \
expression (Rust regex syntax; `(?i)` for case-insensitive). Prints `path:line: text` for each \
matching line, at most 200 matches. Binary files, hidden files and files ignored by .gitignore \
are skipped. Narrow the search with path (a directory or a file) and glob (e.g. \"*.rs\").";

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Regular expression to search for, e.g. \"fn main\" or \"(?i)todo\"."
            },
            "path": {
                "type": "string",
                "description": "Directory or file to search, relative to the workspace root (default \".\", the root)."
            },
            "glob": {
                "type": "string",
                "description": "Only search files matching this glob (same rules as find_files), e.g. \"*.rs\"."
            }
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

pub(super) fn run(
    workspace: &Workspace,
    args: Args,
    cancelled: &dyn Fn() -> bool,
) -> Result<String, ToolError> {
    let regex = RegexBuilder::new(&args.pattern)
        .size_limit(10 * (1 << 20))
        .build()
        .map_err(|e| {
            ToolError::new(format!(
                "invalid regular expression `{}`: {e}",
                args.pattern
            ))
        })?;
    let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
    let target = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown = workspace.display(&target);
    if !target.exists() {
        return Err(ToolError::new(format!(
            "`{shown}` does not exist; use list_dir or find_files to see what is there"
        )));
    }

    let mut lines = Vec::new();
    let mut total = 0usize;
    let base = if target.is_dir() {
        target.as_path()
    } else {
        target.parent().unwrap_or(&target)
    };
    walk_files(&target, cancelled, &mut |file| {
        if let Some(glob) = &glob {
            let relative = file.strip_prefix(base).unwrap_or(file);
            if !glob.is_match(relative) {
                return true;
            }
        }
        search_file(workspace, file, &regex, &mut lines, &mut total);
        true
    });

    if total == 0 {
        return Ok(format!("No matches for `{}` in `{shown}`.", args.pattern));
    }
    let mut out = lines.join("\n");
    out.push('\n');
    if total > MAX_MATCHES {
        out.push_str(&format!(
            "[... {} more matches not shown ({} in total); narrow the pattern, path or glob]\n",
            thousands(total - MAX_MATCHES),
            thousands(total)
        ));
    }
    Ok(truncate_output(&out, OUTPUT_LIMIT))
}

/// Appends the file's matching lines (while under the cap) and counts all of them.
fn search_file(
    workspace: &Workspace,
    file: &Path,
    regex: &Regex,
    lines: &mut Vec<String>,
    total: &mut usize,
) {
    let Ok(handle) = File::open(file) else { return };
    let mut reader = BufReader::new(handle);
    let mut sniff = Vec::with_capacity(8192);
    if (&mut reader).take(8192).read_to_end(&mut sniff).is_err() || looks_binary(&sniff) {
        return;
    }
    let mut reader = BufReader::new(sniff.as_slice().chain(reader));
    let shown = workspace.display(file);
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        number += 1;
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        if !regex.is_match(text) {
            continue;
        }
        *total += 1;
        if lines.len() < MAX_MATCHES {
            let clipped = clip(text, MAX_LINE_BYTES);
            let more = if clipped.len() < text.len() {
                " [...]"
            } else {
                ""
            };
            lines.push(format!("{shown}:{number}: {clipped}{more}"));
        }
    }
}
