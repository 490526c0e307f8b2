//! `grep{pattern, path?, glob?}`: search file contents in the workspace with a regular
//! expression.
//!
//! Walks like `find_files` (ignore files respected, hidden entries skipped, links not followed),
//! skips binary files, and reports `path:line: text` for each matching line, capped with a note
//! saying how many matches were cut. Never modifies files.

use std::io::{BufReader, Read};
use std::path::Path;

use regex::Regex;
use serde::Deserialize;
use serde_json::{Value, json};

use super::find_files::{PathGlob, walk_files};
use super::listing::Listing;
use super::looks_binary;
use super::output::{clip, thousands};
use super::reading::read_line_capped;
use super::retention::Spill;
use super::schema;
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// The most matching lines one search shows.
pub const MAX_MATCHES: usize = 200;
/// Longest matching line shown in full.
const MAX_LINE_BYTES: usize = 300;
/// How much of one line is held and searched: memory stays bounded on a file that is one huge
/// line; a match beyond this point of such a line is not found.
pub const MAX_SEARCHED_LINE_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    pattern: String,
    path: Option<String>,
    glob: Option<String>,
}

pub(super) const DESCRIPTION: &str = "Search file contents in the workspace with a regular \
expression (Rust regex syntax; `(?i)` for case-insensitive). Prints `path:line: text` for each \
matching line, at most 200 matches (lines longer than 64 KB are searched in their first 64 KB). \
Binary files, hidden files and files ignored by .gitignore \
are skipped. Narrow the search with path (a directory or a file) and glob (e.g. \"*.rs\").";

pub(super) fn schema() -> Value {
    schema::object(
        json!({
            "pattern": schema::non_empty_string(
                "Regular expression to search for, e.g. \"fn main\" or \"(?i)todo\"."
            ),
            "path": schema::string(
                "Directory or file to search, relative to the workspace root (default \".\", the root)."
            ),
            "glob": schema::string(
                "Only search files matching this glob (same rules as find_files), e.g. \"*.rs\"."
            )
        }),
        &["pattern"],
    )
}

/// The search; every matching line goes to `spill` in full when given (the model gets the
/// first [`MAX_MATCHES`], each cut to a few hundred bytes).
pub(super) fn run(
    workspace: &Workspace,
    args: Args,
    cancelled: &dyn Fn() -> bool,
    spill: Option<Spill>,
) -> Result<String, ToolError> {
    let regex = super::patterns::compile_regex(&args.pattern)?;
    let glob = args.glob.as_deref().map(PathGlob::new).transpose()?;
    let target = workspace.resolve(args.path.as_deref().unwrap_or("."))?;
    let shown = workspace.display(&target);
    let target_meta = workspace
        .metadata(&target)
        .map_err(|e| super::io_error("search", &shown, &e))?;

    let mut listing = Listing::new(MAX_MATCHES, spill);
    let mut binary = 0usize;
    let base = if target_meta.is_dir() {
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
        if search_file(workspace, file, &regex, &mut listing) == Searched::Binary {
            binary += 1;
        }
        true
    });
    if listing.total() == 0 && binary > 0 && !target_meta.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown}` looks like a binary file (it contains NUL bytes); grep searches text \
             files only"
        )));
    }

    if listing.total() == 0 {
        let skipped = match binary {
            0 => String::new(),
            1 => " (1 binary file was skipped)".to_owned(),
            n => format!(" ({} binary files were skipped)", thousands(n)),
        };
        return Ok(format!(
            "No matches for `{}` in `{shown}`{skipped}.",
            args.pattern
        ));
    }
    Ok(listing.finish(|left, total| {
        format!(
            "[... {left} more matches not shown ({total} in total); narrow the pattern, path or glob]"
        )
    }))
}

/// What searching one file found out about it.
#[derive(PartialEq, Eq)]
enum Searched {
    Text,
    Binary,
    Unreadable,
}

/// Adds the file's matching lines to the listing (or counts those it does not want).
fn search_file(
    workspace: &Workspace,
    file: &Path,
    regex: &Regex,
    listing: &mut Listing,
) -> Searched {
    // Opened beneath the workspace handle: a directory swapped for a link during the walk makes
    // the open fail instead of reading outside. Anything but a regular file is skipped.
    let Ok(handle) = workspace.open_read(file) else {
        return Searched::Unreadable;
    };
    if !handle.metadata().is_ok_and(|m| m.is_file()) {
        return Searched::Unreadable;
    }
    let mut reader = BufReader::new(handle);
    let mut sniff = Vec::with_capacity(8192);
    if (&mut reader).take(8192).read_to_end(&mut sniff).is_err() {
        return Searched::Unreadable;
    }
    if looks_binary(&sniff) {
        return Searched::Binary;
    }
    let mut reader = BufReader::new(sniff.as_slice().chain(reader));
    let shown = workspace.display(file);
    let mut buf = Vec::new();
    let mut number = 0usize;
    loop {
        let full = match read_line_capped(&mut reader, &mut buf, MAX_SEARCHED_LINE_BYTES) {
            Ok(Some(full)) => full,
            Ok(None) | Err(_) => return Searched::Text,
        };
        number += 1;
        let text = String::from_utf8_lossy(&buf);
        let text = text.trim_end_matches(['\n', '\r']);
        if !regex.is_match(text) {
            continue;
        }
        if !listing.wants_line() {
            listing.count();
            continue;
        }
        let (line, shown) = match_line(&shown, number, text, buf.len() < full, full);
        listing.add(&line, shown);
    }
}

/// A matching line as `path:number: text`, and the shorter form the model gets when the text
/// is over [`MAX_LINE_BYTES`] (`searched_part`: the line is longer than what was read of it,
/// `full` bytes).
fn match_line(
    path: &str,
    number: usize,
    text: &str,
    searched_part: bool,
    full: usize,
) -> (String, Option<String>) {
    let only_searched = |shown: usize| {
        format!(
            " [... line cut: {} of {} bytes shown; only its first {} bytes are searched]",
            thousands(shown),
            thousands(full),
            thousands(MAX_SEARCHED_LINE_BYTES)
        )
    };
    let mut line = format!("{path}:{number}: {text}");
    if searched_part {
        line.push_str(&only_searched(text.len()));
    }
    let clipped = clip(text, MAX_LINE_BYTES);
    if clipped.len() == text.len() {
        return (line, None);
    }
    let more = if searched_part {
        only_searched(clipped.len())
    } else {
        " [...]".to_owned()
    };
    (line, Some(format!("{path}:{number}: {clipped}{more}")))
}
