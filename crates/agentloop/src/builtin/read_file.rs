//! `read_file{path, offset?, limit?}`: a numbered range of a text file's lines, or an image.
//!
//! Reads one file inside the workspace, streaming it line by line so huge files cost only the
//! lines shown. A PNG, JPEG, GIF or WebP file (recognised by its first bytes, not its name) is
//! returned as an image part the providers send to vision models, up to [`MAX_IMAGE_BYTES`].
//! Refuses directories and other binary files. Never writes anything. With a
//! [`TextFiles`](super::TextFiles) on the workspace, a text file's lines come from there (an
//! editor's buffer, unsaved changes included); images and binary files are still read from disk.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::output::{clip, thousands};
use super::reading::{ensure_regular, read_line_capped};
use super::schema;
use super::workspace::Workspace;
use super::{TextFiles, io_error, looks_binary};
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
    schema::object(
        json!({
            "path": schema::file_path("File to read"),
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
        }),
        &["path"],
    )
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

/// Runs `read_file`: the file's image, or its numbered lines in the asked range.
pub(super) fn run(workspace: &Workspace, args: Args) -> Result<ToolOutput, ToolError> {
    let path = workspace.resolve(&args.path)?;
    let shown = workspace.display(&path);
    if let Some(files) = workspace.text_files().filter(|f| f.reads()) {
        let opened = workspace.open_read(&path);
        if let Some(text) = text_through(files.as_ref(), &path, &shown, &opened)? {
            if looks_binary(text.as_bytes()) {
                return Err(binary_error(&shown));
            }
            let (offset, limit) = line_range(&args);
            return Listing::read(text.as_bytes(), offset, limit, &shown)?.finish(offset, &shown);
        }
    }
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
        return Err(binary_error(&shown));
    }
    let reader = BufReader::new(sniff.as_slice().chain(reader));
    let (offset, limit) = line_range(&args);
    Listing::read(reader, offset, limit, &shown)?.finish(offset, &shown)
}

fn binary_error(shown: &str) -> ToolError {
    ToolError::new(format!(
        "`{shown}` looks like a binary file (it contains NUL bytes); read_file only shows text. \
         Use shell tools such as `file` or `xxd` if you need to inspect it"
    ))
}

/// The file's text as `files` has it, or `None` when the disk must answer: it is an image or
/// binary (a text buffer cannot carry those), or opening it failed other than "not found" (the
/// disk path reports that error). A file missing on disk is asked for too (an editor may hold
/// an unsaved buffer of it); if `files` has none either, the answer is "does not exist".
fn text_through(
    files: &dyn TextFiles,
    path: &Path,
    shown: &str,
    opened: &std::io::Result<std::fs::File>,
) -> Result<Option<String>, ToolError> {
    match opened {
        Ok(file) => {
            ensure_regular(file, shown)?;
            let mut sniff = Vec::with_capacity(8192);
            file.take(8192)
                .read_to_end(&mut sniff)
                .map_err(|e| io_error("read", shown, &e))?;
            if ImagePart::sniff_media_type(&sniff).is_some() || looks_binary(&sniff) {
                return Ok(None);
            }
            files
                .read_text(path)
                .map(Some)
                .map_err(|e| io_error("read", shown, &e))
        }
        Err(missing) if missing.kind() == std::io::ErrorKind::NotFound => files
            .read_text(path)
            .map(Some)
            .map_err(|_| io_error("read", shown, missing)),
        Err(_) => Ok(None),
    }
}

/// The 1-based first line and the number of lines to show (both at least 1; huge values
/// saturate instead of failing on 32-bit targets).
fn line_range(args: &Args) -> (usize, usize) {
    let offset = usize::try_from(args.offset.unwrap_or(1).max(1)).unwrap_or(usize::MAX);
    let limit = usize::try_from(args.limit.unwrap_or(DEFAULT_LINE_LIMIT as u64).max(1))
        .unwrap_or(usize::MAX);
    (offset, limit)
}

/// One shown line: its number, its text (cut at [`MAX_LINE_BYTES`], with a note giving the
/// line's full length `full`) and a newline.
fn numbered_line(number: usize, text: &str, full: usize) -> String {
    let clipped = clip(text, MAX_LINE_BYTES);
    let mut entry = format!("{number:>6}\t{clipped}");
    if clipped.len() < full {
        entry.push_str(&format!(
            " [... line cut: {} of {} bytes shown]",
            thousands(clipped.len()),
            thousands(full)
        ));
    }
    entry.push('\n');
    entry
}

/// The numbered lines of a text file shown so far, and where the listing stopped.
struct Listing {
    out: String,
    /// Lines in the file (all are read, to say how many remain).
    number: usize,
    /// The first line in range not shown (line or byte budget spent).
    next_unshown: Option<usize>,
}

impl Listing {
    /// Reads every line, numbering those from `offset` until `limit` lines or [`MAX_BYTES`]
    /// are shown, and counting the rest.
    fn read(
        mut reader: impl BufRead,
        offset: usize,
        limit: usize,
        shown: &str,
    ) -> Result<Self, ToolError> {
        let mut listing = Listing {
            out: String::new(),
            number: 0,
            next_unshown: None,
        };
        let mut line = Vec::new();
        let mut shown_lines = 0usize;
        // Hold at most a little more than what is shown of one line, however long it is.
        while let Some(full) = read_line_capped(&mut reader, &mut line, HELD_LINE_BYTES)
            .map_err(|e| io_error("read", shown, &e))?
        {
            listing.number += 1;
            let number = listing.number;
            if number < offset {
                continue;
            }
            if listing.next_unshown.is_some() {
                continue; // only counting the remaining lines
            }
            if shown_lines >= limit {
                listing.next_unshown = Some(number);
                continue;
            }
            let text = String::from_utf8_lossy(&line);
            let text = text.trim_end_matches(['\n', '\r']);
            let full = if line.len() < full {
                full // cut while reading
            } else {
                text.len()
            };
            let entry = numbered_line(number, text, full);
            if listing.out.len() + entry.len() > MAX_BYTES {
                listing.next_unshown = Some(number);
                continue;
            }
            listing.out.push_str(&entry);
            shown_lines += 1;
        }
        Ok(listing)
    }

    /// The tool's answer: the lines with a note on how to continue, or why none are shown.
    fn finish(mut self, offset: usize, shown: &str) -> Result<ToolOutput, ToolError> {
        let number = self.number;
        if number == 0 {
            return Ok(ToolOutput::text(format!("(`{shown}` is empty)")));
        }
        if offset > number {
            return Err(ToolError::new(format!(
                "offset {offset} is past the end of `{shown}`, which has {number} lines"
            )));
        }
        if let Some(next) = self.next_unshown {
            let remaining = number - next + 1;
            self.out.push_str(&format!(
                "[... {} more lines; use offset={next} to continue]\n",
                thousands(remaining)
            ));
        }
        Ok(ToolOutput::text(self.out))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn args(offset: Option<u64>, limit: Option<u64>) -> Args {
        Args {
            path: "f".into(),
            offset,
            limit,
        }
    }

    #[test]
    fn the_range_defaults_and_never_starts_before_line_one() {
        assert_eq!(line_range(&args(None, None)), (1, DEFAULT_LINE_LIMIT));
        assert_eq!(line_range(&args(Some(0), Some(0))), (1, 1));
        assert_eq!(line_range(&args(Some(7), Some(3))), (7, 3));
    }

    #[test]
    fn a_long_line_is_cut_with_a_note_of_its_length() {
        assert_eq!(numbered_line(12, "short", 5), "    12\tshort\n");
        let long = "x".repeat(MAX_LINE_BYTES + 10);
        let entry = numbered_line(3, &long, 5000);
        assert!(entry.starts_with("     3\txxx"));
        assert!(
            entry.ends_with(" [... line cut: 2,000 of 5,000 bytes shown]\n"),
            "{entry}"
        );
    }

    #[test]
    fn a_listing_stops_at_its_limit_and_says_how_to_continue() {
        let text = "a\nb\nc\nd\n";
        let listing = Listing::read(text.as_bytes(), 2, 2, "f").unwrap();
        assert_eq!(listing.number, 4);
        assert_eq!(listing.next_unshown, Some(4));
        let out = listing.finish(2, "f").unwrap();
        assert_eq!(
            out.content,
            "     2\tb\n     3\tc\n[... 1 more lines; use offset=4 to continue]\n"
        );
        let past = Listing::read(text.as_bytes(), 9, 2, "f").unwrap();
        let error = past.finish(9, "f").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("offset 9 is past the end of `f`, which has 4 lines")
        );
    }
}
