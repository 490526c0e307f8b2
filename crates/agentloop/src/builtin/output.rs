//! Output truncation shared by every built-in tool: one place decides how much text a tool may
//! hand back to the model and how the cut is announced.
//!
//! Long output keeps its beginning and its end (the end of a build log or a test run is usually
//! what matters) with a note in between saying how much was cut, in lines and bytes, e.g.
//! `[output truncated: 1,200 lines (30,000 bytes) omitted; 30,000 of 60,000 bytes shown]`.
//! Cuts fall on line boundaries where the kept parts hold a line break (so no line is shown
//! half), and always on UTF-8 character boundaries. This module only shapes text; it never
//! reads files or runs commands.

use std::collections::VecDeque;

/// The most bytes of output a built-in tool returns to the model (before the truncation note).
pub const OUTPUT_LIMIT: usize = 30_000;

/// Truncates `text` to at most `limit` bytes (plus a note) by keeping its head and its tail.
///
/// Text within the limit is returned unchanged.
///
/// ```
/// use agentloop::builtin::truncate_output;
///
/// assert_eq!(truncate_output("short", 100), "short");
/// let long = "x".repeat(1_000);
/// let cut = truncate_output(&long, 100);
/// assert!(cut.contains("[output truncated: 0 lines (900 bytes) omitted; 100 of 1,000 bytes shown]"));
/// ```
pub fn truncate_output(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut buffer = OutputBuffer::new(limit);
    buffer.push(text.as_bytes());
    buffer.render()
}

/// Collects a stream of bytes (a command's output) in bounded memory: the first part and the
/// last part are kept, everything in between is only counted. [`render`](Self::render) produces
/// the same text [`truncate_output`] would for the whole stream.
#[derive(Debug)]
pub(crate) struct OutputBuffer {
    head_cap: usize,
    tail_cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// The byte just before the tail (whether the tail starts a line), once bytes were dropped.
    before_tail: Option<u8>,
    total: usize,
    /// Line breaks in everything pushed.
    newlines: usize,
}

impl OutputBuffer {
    /// A buffer that keeps at most `limit` bytes: 40% from the start, 60% from the end.
    pub(crate) fn new(limit: usize) -> Self {
        let head_cap = limit * 2 / 5;
        OutputBuffer {
            head_cap,
            tail_cap: limit - head_cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            before_tail: None,
            total: 0,
            newlines: 0,
        }
    }

    /// Appends bytes.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        self.newlines += count_newlines(bytes);
        if self.head.len() < self.head_cap {
            let take = bytes.len().min(self.head_cap - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        if bytes.len() > self.tail_cap {
            let start = bytes.len() - self.tail_cap;
            self.before_tail = Some(bytes[start - 1]);
            self.tail.clear();
            self.tail.extend(bytes[start..].iter().copied());
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        if overflow > 0 {
            self.before_tail = self.tail.get(overflow - 1).copied();
            self.tail.drain(..overflow);
        }
        self.tail.extend(bytes.iter().copied());
    }

    /// Whether bytes were dropped (the rendering has a truncation note).
    pub(crate) fn is_truncated(&self) -> bool {
        self.head.len() + self.tail.len() < self.total
    }

    /// Whether nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// The collected text (invalid UTF-8 replaced), with a truncation note if bytes were dropped.
    pub(crate) fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if !self.is_truncated() {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = line_aligned_head(&self.head[..complete_prefix_len(&self.head)]);
        let tail = line_aligned_tail(&tail[ceil_char_boundary(&tail, 0)..], self.before_tail);
        let shown = head.len() + tail.len();
        let omitted_lines = self
            .newlines
            .saturating_sub(count_newlines(head) + count_newlines(tail));
        let mut out = String::from_utf8_lossy(head).into_owned();
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "[output truncated: {} lines ({} bytes) omitted; {} of {} bytes shown]\n",
            thousands(omitted_lines),
            thousands(self.total - shown),
            thousands(shown),
            thousands(self.total)
        ));
        out.push_str(&String::from_utf8_lossy(tail));
        out
    }
}

fn count_newlines(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b == b'\n').count()
}

/// The head up to its last line break (the partial line after it is omitted), or whole when
/// it has none (one long line).
fn line_aligned_head(head: &[u8]) -> &[u8] {
    match head.iter().rposition(|&b| b == b'\n') {
        Some(end) => &head[..=end],
        None => head,
    }
}

/// The tail from the start of its first whole line (`before` is the byte preceding it), or
/// whole when it has no line break before its end.
fn line_aligned_tail(tail: &[u8], before: Option<u8>) -> &[u8] {
    if before == Some(b'\n') {
        return tail;
    }
    match tail.iter().position(|&b| b == b'\n') {
        Some(end) if end + 1 < tail.len() => &tail[end + 1..],
        _ => tail,
    }
}

/// The largest index `<= index` that does not split a UTF-8 sequence in `bytes`.
pub(crate) fn floor_char_boundary(bytes: &[u8], index: usize) -> usize {
    let mut i = index.min(bytes.len());
    // At most three continuation bytes precede a character's last byte.
    let mut steps = 0;
    while i > 0 && i < bytes.len() && is_continuation(bytes[i]) && steps < 3 {
        i -= 1;
        steps += 1;
    }
    i
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence
/// (`bytes` may itself have been cut from a longer stream).
fn complete_prefix_len(bytes: &[u8]) -> usize {
    // Find the start of the last character (at most three continuation bytes back).
    let mut start = bytes.len();
    while start > 0 && bytes.len() - start < 4 {
        start -= 1;
        if !is_continuation(bytes[start]) {
            let lead = bytes[start];
            let width = match lead {
                0x00..=0x7F => 1,
                0xC0..=0xDF => 2,
                0xE0..=0xEF => 3,
                _ => 4,
            };
            return if start + width <= bytes.len() {
                bytes.len()
            } else {
                start
            };
        }
    }
    bytes.len()
}

/// The smallest index `>= index` that does not split a UTF-8 sequence in `bytes`.
fn ceil_char_boundary(bytes: &[u8], index: usize) -> usize {
    let mut i = index;
    let mut steps = 0;
    while i < bytes.len() && is_continuation(bytes[i]) && steps < 3 {
        i += 1;
        steps += 1;
    }
    i
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

/// Cuts `text` to at most `max` bytes on a character boundary.
pub(crate) fn clip(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let end = floor_char_boundary(text.as_bytes(), max);
    text.get(..end).unwrap_or_default()
}

/// `12345` → `"12,345"`.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn numbers_get_thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(truncate_output("abc\n", 4), "abc\n");
    }

    #[test]
    fn long_text_keeps_whole_lines_at_head_and_tail_with_a_note() {
        let text: String = (0..1000).map(|i| format!("line {i}\n")).collect();
        let out = truncate_output(&text, 200);
        assert!(out.starts_with("line 0\n"), "{out}");
        assert!(out.ends_with("line 999\n"), "{out}");
        let lines: Vec<&str> = out.lines().collect();
        let note = lines.iter().position(|l| l.starts_with("[output")).unwrap();
        let head_last: usize = lines[note - 1][5..].parse().unwrap();
        let tail_first: usize = lines[note + 1][5..].parse().unwrap();
        let shown = out.len() - lines[note].len() - 1;
        assert_eq!(
            lines[note],
            format!(
                "[output truncated: {} lines ({} bytes) omitted; {} of {} bytes shown]",
                thousands(tail_first - head_last - 1),
                thousands(text.len() - shown),
                thousands(shown),
                thousands(text.len())
            )
        );
        assert!(shown <= 200);
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        let text = "é".repeat(500); // 2 bytes each
        for limit in [7, 8, 99, 100, 101] {
            let out = truncate_output(&text, limit);
            assert!(!out.contains('\u{FFFD}'), "limit {limit}: {out}");
            assert!(out.contains("of 1,000 bytes shown]"), "{out}");
        }
        assert_eq!(clip("aé", 2), "a");
        assert_eq!(clip("aé", 3), "aé");
    }

    #[test]
    fn streaming_matches_one_shot() {
        let text: String = (0..500).map(|i| format!("{i}ü\n")).collect();
        let mut buffer = OutputBuffer::new(300);
        for chunk in text.as_bytes().chunks(7) {
            buffer.push(chunk);
        }
        assert_eq!(buffer.render(), truncate_output(&text, 300));
        assert!(!buffer.is_empty());
    }
}
