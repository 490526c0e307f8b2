//! `read_file{path, offset?, limit?}`: a numbered range of a text file's lines, or an image.
//!
//! Reads one file inside the workspace, streaming it line by line so huge files cost only the
//! lines shown. A PNG, JPEG, GIF or WebP file (recognised by its first bytes, not its name) is
//! returned as an image part the providers send to vision models, up to [`MAX_IMAGE_BYTES`].
//! Refuses directories and other binary files. Never writes anything.

use std::io::{BufReader, Read};

use serde::Deserialize;
use serde_json::{Value, json};

use super::output::{clip, thousands};
use super::reading::{ensure_regular, read_line_capped};
use super::workspace::Workspace;
use super::{io_error, looks_binary};
use crate::tooling::{ToolError, ToolOutput};
use crate::transcript::ImagePart;

/// Lines shown when the call gives no `limit`.
pub const DEFAULT_LINE_LIMIT: usize = 2000;
/// The most bytes of numbered lines one call returns; a range that would exceed it stops early,
/// with the same "use offset=… to continue" note as the line limit.
pub const MAX_BYTES: usize = 100_000;
/// The largest image returned (5 MB: the smallest per-image limit of the supported providers,
/// Anthropic's). A larger one is an error result saying so.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Longest line shown in full; longer lines are cut with a note.
const MAX_LINE_BYTES: usize = 2000;
/// How much of one line is held in memory (what is shown, plus room to find a character
/// boundary and the line ending).
const HELD_LINE_BYTES: usize = MAX_LINE_BYTES + 8;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Args {
    path: String,
    offset: Option<u64>,
    limit: Option<u64>,
}

pub(super) const DESCRIPTION: &str = "Read a text file in the workspace. Lines are numbered \
(`   12\\tcontent`). Use offset (1-based first line) and limit (number of lines) to read part \
of a large file; by default up to 2000 lines (at most 100 KB) from the start are shown, with a \
note saying how to continue. PNG, JPEG, GIF and WebP images (up to 5 MB) are returned as images \
you can see. Other binary files are refused.";

pub(super) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "File to read, relative to the workspace root (absolute paths must be inside the workspace)."
            },
            "offset": {
                "type": "integer",
                "minimum": 1,
                "description": "1-based number of the first line to show (default 1)."
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "description": "How many lines to show (default 2000)."
            }
        },
        "required": ["path"],
        "additionalProperties": false
    })
}

/// Reads the rest of an image whose first bytes are `head`, bounded by [`MAX_IMAGE_BYTES`].
fn read_image(
    mut reader: impl Read,
    head: &[u8],
    media_type: &str,
    shown: &str,
) -> Result<ToolOutput, ToolError> {
    let mut bytes = head.to_vec();
    (&mut reader)
        .take(MAX_IMAGE_BYTES + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error("read", shown, &e))?;
    if bytes.len() as u64 > MAX_IMAGE_BYTES {
        return Err(ToolError::new(format!(
            "`{shown}` is an image ({media_type}) larger than {} bytes, the most read_file \
             returns; use shell tools to make a smaller copy (e.g. `convert` with `-resize`) and \
             read that",
            thousands(MAX_IMAGE_BYTES as usize)
        )));
    }
    let image = ImagePart::from_bytes(&bytes)
        .ok_or_else(|| ToolError::new(format!("`{shown}` is not a readable {media_type} image")))?;
    Ok(ToolOutput::text(format!(
        "`{shown}` is an image ({media_type}, {} bytes); it is attached.",
        thousands(bytes.len())
    ))
    .with_image(image))
}

pub(super) fn run(workspace: &Workspace, args: Args) -> Result<ToolOutput, ToolError> {
    let path = workspace.resolve(&args.path)?;
    let shown = workspace.display(&path);
    let file = workspace
        .open_read(&path)
        .map_err(|e| io_error("read", &shown, &e))?;
    ensure_regular(&file, &shown)?;
    let mut reader = BufReader::new(file);

    let mut sniff = Vec::with_capacity(8192);
    (&mut reader)
        .take(8192)
        .read_to_end(&mut sniff)
        .map_err(|e| io_error("read", &shown, &e))?;
    if let Some(media_type) = ImagePart::sniff_media_type(&sniff) {
        return read_image(reader, &sniff, media_type, &shown);
    }
    if looks_binary(&sniff) {
        return Err(ToolError::new(format!(
            "`{shown}` looks like a binary file (it contains NUL bytes); read_file only shows \
             text. Use shell tools such as `file` or `xxd` if you need to inspect it"
        )));
    }
    let mut reader = BufReader::new(sniff.as_slice().chain(reader));

    let offset = usize::try_from(args.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LINE_LIMIT as u64).max(1))
        .unwrap_or(usize::MAX);

    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0usize;
    let mut shown_lines = 0usize;
    let mut next_unshown: Option<usize> = None;
    // Hold at most a little more than what is shown of one line, however long it is.
    while let Some(full) = read_line_capped(&mut reader, &mut line, HELD_LINE_BYTES)
        .map_err(|e| io_error("read", &shown, &e))?
    {
        number += 1;
        if number < offset {
            continue;
        }
        if next_unshown.is_some() {
            continue; // only counting the remaining lines
        }
        if shown_lines >= limit {
            next_unshown = Some(number);
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches(['\n', '\r']);
        let clipped = clip(text, MAX_LINE_BYTES);
        let mut entry = format!("{number:>6}\t{clipped}");
        let full = if line.len() < full {
            full // cut while reading
        } else {
            text.len()
        };
        if clipped.len() < full {
            entry.push_str(&format!(
                " [... line cut: {} of {} bytes shown]",
                thousands(clipped.len()),
                thousands(full)
            ));
        }
        entry.push('\n');
        if out.len() + entry.len() > MAX_BYTES {
            next_unshown = Some(number);
            continue;
        }
        out.push_str(&entry);
        shown_lines += 1;
    }

    if number == 0 {
        return Ok(ToolOutput::text(format!("(`{shown}` is empty)")));
    }
    if offset > number {
        return Err(ToolError::new(format!(
            "offset {offset} is past the end of `{shown}`, which has {number} lines"
        )));
    }
    if let Some(next) = next_unshown {
        let remaining = number - next + 1;
        out.push_str(&format!(
            "[... {} more lines; use offset={next} to continue]\n",
            thousands(remaining)
        ));
    }
    Ok(ToolOutput::text(out))
}
