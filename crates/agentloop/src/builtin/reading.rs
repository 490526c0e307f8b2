//! Reading model-named files in bounded memory and without blocking: only regular files are
//! opened for reading (a FIFO, device or socket is an error at once), and lines are read with a
//! cap on how much of one line is held, so a file that is one 1 GB line costs the cap, not 1 GB.
//!
//! `read_file` and `grep` read through here; this module never decides *which* path may be read
//! (that is [`Workspace`](super::Workspace)'s job).

use std::fs::File;
use std::io::{self, BufRead};

use crate::tooling::ToolError;

/// Checks that an opened file is a regular file. Opening happens with `O_NONBLOCK` (see
/// [`Workspace::open_read`](super::Workspace)), so a FIFO with no writer does not block the
/// open, and this check then refuses it before anything is read.
pub(super) fn ensure_regular(file: &File, shown: &str) -> Result<(), ToolError> {
    let meta = file
        .metadata()
        .map_err(|e| ToolError::new(format!("could not inspect `{shown}`: {e}")))?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let what = if kind.is_dir() {
        return Err(ToolError::new(format!(
            "`{shown}` is a directory; use list_dir to see its entries"
        )));
    } else {
        special_kind(&kind)
    };
    Err(ToolError::new(format!(
        "`{shown}` is {what}, not a regular file; only regular files can be read"
    )))
}

#[cfg(unix)]
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_fifo() {
        "a named pipe (FIFO)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() {
        "a character device"
    } else if kind.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

#[cfg(not(unix))]
fn special_kind(_kind: &std::fs::FileType) -> &'static str {
    "a special file"
}

/// Reads one line into `buf` (without its `\n`), keeping at most `cap` bytes of it and skipping
/// the rest. Returns the line's full length in bytes (without the `\n`), `None` at end of file.
pub(super) fn read_line_capped(
    reader: &mut impl BufRead,
    buf: &mut Vec<u8>,
    cap: usize,
) -> io::Result<Option<usize>> {
    buf.clear();
    let mut total = 0usize;
    let mut any = false;
    loop {
        let available = match reader.fill_buf() {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(any.then_some(total));
        }
        any = true;
        let (chunk, used, done) = match memchr::memchr(b'\n', available) {
            Some(i) => (&available[..i], i + 1, true),
            None => (available, available.len(), false),
        };
        let room = cap.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..chunk.len().min(room)]);
        total = total.saturating_add(chunk.len());
        reader.consume(used);
        if done {
            return Ok(Some(total));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn long_lines_are_held_up_to_the_cap_and_measured_in_full() {
        let text = format!("short\n{}\nend", "x".repeat(10_000));
        let mut reader = io::BufReader::with_capacity(64, text.as_bytes());
        let mut buf = Vec::new();
        assert_eq!(
            read_line_capped(&mut reader, &mut buf, 100).unwrap(),
            Some(5)
        );
        assert_eq!(buf, b"short");
        assert_eq!(
            read_line_capped(&mut reader, &mut buf, 100).unwrap(),
            Some(10_000)
        );
        assert_eq!(buf.len(), 100);
        assert_eq!(
            read_line_capped(&mut reader, &mut buf, 100).unwrap(),
            Some(3)
        );
        assert_eq!(buf, b"end");
        assert_eq!(read_line_capped(&mut reader, &mut buf, 100).unwrap(), None);
        let mut empty_lines = io::BufReader::new(&b"\n\n"[..]);
        assert_eq!(
            read_line_capped(&mut empty_lines, &mut buf, 9).unwrap(),
            Some(0)
        );
        assert_eq!(
            read_line_capped(&mut empty_lines, &mut buf, 9).unwrap(),
            Some(0)
        );
        assert_eq!(
            read_line_capped(&mut empty_lines, &mut buf, 9).unwrap(),
            None
        );
    }
}
