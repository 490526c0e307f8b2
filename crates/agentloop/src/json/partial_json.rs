//! Incremental partial JSON for streamed tool arguments, in linear total time.
//!
//! Providers stream a tool call's arguments as text fragments. UIs want to show the arguments
//! while they arrive (a file being written, a command being typed), so the loop exposes a
//! best-effort parsed value in `MessageUpdate` events. Re-parsing the whole buffer on every delta
//! is quadratic (pi-ai: 16k deltas took 1.5 s, a 128 KB write ≈ 4.8 s); here each byte is scanned
//! once by a small state machine that remembers the last point where the text can be cut and
//! closed into valid JSON, and snapshots are throttled geometrically once the buffer is large, so
//! the total cost of feeding *n* bytes and taking every offered snapshot is O(n).
//!
//! The final arguments are never taken from here: the complete text is parsed once at the end
//! (and kept verbatim if it is not valid JSON).

use serde_json::Value;

/// Below this size every delta may produce a snapshot; above it, a snapshot is offered only when
/// the buffer has doubled since the last one (geometric, so all snapshots together cost < 2n).
const SMALL: usize = 8 * 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// Top level, or inside an array: a value (or `]`).
    Value,
    /// Inside an object: a key (or `}`).
    Key,
    /// After a key: `:`.
    Colon,
    /// After a value inside a container: `,` or the closing bracket.
    CommaOrEnd,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lex {
    /// Between tokens.
    Idle,
    /// Inside a string (`key`: an object key).
    Str { key: bool },
    /// Right after a backslash inside a string.
    Escape { key: bool },
    /// Inside `\uXXXX`, with this many hex digits seen.
    Unicode { key: bool, seen: u8 },
    /// Inside a number or a literal (`true`, `false`, `null`), which started at `start`.
    Bare { start: usize },
    /// The text is not JSON; nothing more is parsed.
    Broken,
}

/// Streams argument text in and offers partial values out. See the module docs.
#[derive(Clone, Debug)]
pub struct PartialJson {
    buf: String,
    /// Open containers (`b'{'` / `b'['`).
    stack: Vec<u8>,
    expect: Expect,
    lex: Lex,
    /// Byte offset where the text can be cut and closed with `stack` into valid JSON.
    safe: usize,
    /// Offset of the current string's opening quote (for value strings, to include them).
    string_start: usize,
    /// Offset just before the last complete backslash escape ends (cut point inside strings).
    string_safe: usize,
    last_snapshot_len: usize,
}

impl Default for PartialJson {
    fn default() -> Self {
        PartialJson::new()
    }
}

impl PartialJson {
    /// An empty parser.
    pub fn new() -> Self {
        PartialJson {
            buf: String::new(),
            stack: Vec::new(),
            expect: Expect::Value,
            lex: Lex::Idle,
            safe: 0,
            string_start: 0,
            string_safe: 0,
            last_snapshot_len: 0,
        }
    }

    /// Everything received so far.
    pub fn text(&self) -> &str {
        &self.buf
    }

    /// Consumes the parser, returning the text.
    pub fn into_text(self) -> String {
        self.buf
    }

    /// Whether the text so far can no longer become JSON.
    pub fn is_broken(&self) -> bool {
        self.lex == Lex::Broken
    }

    /// Appends a fragment (amortised O(fragment)).
    pub fn push(&mut self, fragment: &str) {
        let start = self.buf.len();
        self.buf.push_str(fragment);
        let mut i = start;
        let end = self.buf.len();
        while i < end {
            // Fast path: inside a string, jump straight to the next quote or backslash (most of
            // a large argument is string content).
            if let Lex::Str { .. } = self.lex {
                let rest = &self.buf.as_bytes()[i..end];
                match memchr::memchr2(b'"', b'\\', rest) {
                    Some(0) => {}
                    Some(skip) => {
                        i += skip;
                        self.string_safe = i;
                    }
                    None => {
                        self.string_safe = end;
                        break;
                    }
                }
            }
            let b = self.buf.as_bytes()[i];
            self.step(i, b);
            if self.lex == Lex::Broken {
                break;
            }
            i += 1;
        }
    }

    /// Appends a fragment and returns a snapshot when one is due (always for small buffers,
    /// geometrically for large ones).
    pub fn push_and_snapshot(&mut self, fragment: &str) -> Option<Value> {
        self.push(fragment);
        let len = self.buf.len();
        let due = len <= SMALL || len >= self.last_snapshot_len * 2;
        if !due {
            return None;
        }
        self.last_snapshot_len = len;
        self.snapshot()
    }

    /// The value of the text so far with every open string, array and object closed, dropping
    /// an incomplete key, literal or number. `None` before any value has started or when the
    /// text is not JSON. O(buffer length).
    pub fn snapshot(&self) -> Option<Value> {
        if self.lex == Lex::Broken {
            return None;
        }
        let mut text = String::with_capacity(self.buf.len() + self.stack.len() + 2);
        match self.lex {
            Lex::Str { key: false }
            | Lex::Escape { key: false }
            | Lex::Unicode { key: false, .. } => {
                // A value string: keep what has arrived, minus an unfinished escape.
                text.push_str(&self.buf[..self.string_safe]);
                text.push('"');
            }
            Lex::Bare { start } => {
                let token = &self.buf[start..];
                if is_complete_number(token) {
                    text.push_str(&self.buf);
                } else {
                    text.push_str(&self.buf[..self.safe]);
                }
            }
            _ => text.push_str(&self.buf[..self.safe]),
        }
        if text.trim().is_empty() {
            return None;
        }
        for &open in self.stack.iter().rev() {
            text.push(if open == b'{' { '}' } else { ']' });
        }
        serde_json::from_str(&text).ok()
    }

    fn value_done(&mut self, end: usize) {
        self.expect = Expect::CommaOrEnd;
        self.safe = end;
    }

    fn step(&mut self, i: usize, b: u8) {
        match self.lex {
            Lex::Broken => {}
            Lex::Str { key } => match b {
                b'"' => {
                    self.lex = Lex::Idle;
                    if key {
                        self.expect = Expect::Colon;
                    } else {
                        self.value_done(i + 1);
                    }
                }
                b'\\' => {
                    self.string_safe = i;
                    self.lex = Lex::Escape { key };
                }
                _ => self.string_safe = i + 1,
            },
            Lex::Escape { key } => {
                if b == b'u' {
                    self.lex = Lex::Unicode { key, seen: 0 };
                } else {
                    self.lex = Lex::Str { key };
                    self.string_safe = i + 1;
                }
            }
            Lex::Unicode { key, seen } => {
                if !b.is_ascii_hexdigit() {
                    self.lex = Lex::Broken;
                } else if seen == 3 {
                    self.lex = Lex::Str { key };
                    // A lone high surrogate would make the cut invalid; only cut after a full
                    // escape that is not one.
                    let hex = &self.buf[i - 3..=i];
                    let high = u16::from_str_radix(hex, 16)
                        .map(|u| (0xD800..0xDC00).contains(&u))
                        .unwrap_or(false);
                    if !high {
                        self.string_safe = i + 1;
                    }
                } else {
                    self.lex = Lex::Unicode {
                        key,
                        seen: seen + 1,
                    };
                }
            }
            Lex::Bare { start } => {
                if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'+') {
                    return;
                }
                let token = &self.buf[start..i];
                if !(is_complete_number(token) || matches!(token, "true" | "false" | "null")) {
                    self.lex = Lex::Broken;
                    return;
                }
                self.lex = Lex::Idle;
                self.value_done(i);
                self.step(i, b);
            }
            Lex::Idle => self.idle(i, b),
        }
    }

    fn idle(&mut self, i: usize, b: u8) {
        if b.is_ascii_whitespace() {
            return;
        }
        match (self.expect, b) {
            (Expect::Value, b'{') => {
                self.stack.push(b'{');
                self.expect = Expect::Key;
                self.safe = i + 1;
            }
            (Expect::Value, b'[') => {
                self.stack.push(b'[');
                self.expect = Expect::Value;
                self.safe = i + 1;
            }
            (Expect::Value, b'"') => {
                self.lex = Lex::Str { key: false };
                self.string_start = i;
                self.string_safe = i + 1;
            }
            (Expect::Value, b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
                self.lex = Lex::Bare { start: i };
            }
            (Expect::Key, b'"') => {
                self.lex = Lex::Str { key: true };
                self.string_start = i;
            }
            (Expect::Colon, b':') => self.expect = Expect::Value,
            (Expect::CommaOrEnd, b',') if !self.stack.is_empty() => {
                self.expect = if self.stack.last() == Some(&b'{') {
                    Expect::Key
                } else {
                    Expect::Value
                };
            }
            (Expect::CommaOrEnd | Expect::Key, b'}') if self.stack.last() == Some(&b'{') => {
                self.stack.pop();
                self.value_done(i + 1);
            }
            (Expect::CommaOrEnd | Expect::Value, b']') if self.stack.last() == Some(&b'[') => {
                self.stack.pop();
                self.value_done(i + 1);
            }
            _ => self.lex = Lex::Broken,
        }
    }
}

/// Whether a bare token is a number that is complete as it stands (`12`, `-3.5e2`; not `-`,
/// `1.`, `1e`).
fn is_complete_number(token: &str) -> bool {
    let last_ok = token.bytes().last().is_some_and(|b| b.is_ascii_digit());
    last_ok && token.parse::<f64>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn feed_chars(text: &str) -> Vec<Option<Value>> {
        let mut p = PartialJson::new();
        text.chars()
            .map(|c| {
                p.push(c.encode_utf8(&mut [0; 4]));
                p.snapshot()
            })
            .collect()
    }

    #[test]
    fn every_prefix_of_a_document_yields_a_valid_partial_and_the_end_is_exact() {
        let doc = json!({
            "path": "src/ma\"in.rs",
            "content": "line1\nline2 \u{e9} \u{1F600}",
            "n": -12.5e2,
            "flags": [true, false, null, {"deep": [1, 2, {"x": "y"}]}],
            "empty": {}, "list": []
        });
        let text = serde_json::to_string(&doc).unwrap_or_default();
        let snaps = feed_chars(&text);
        assert_eq!(snaps.last().cloned().flatten(), Some(doc));
        // Partial values only ever grow towards the final value: every snapshot parses.
        assert!(snaps.iter().skip(1).all(Option::is_some));
    }

    /// Pushes each delta in turn; the snapshot after it must be the value beside it.
    fn assert_snapshots(steps: &[(&str, Value)]) {
        let mut p = PartialJson::new();
        for (delta, want) in steps {
            p.push(delta);
            assert_eq!(p.snapshot().as_ref(), Some(want), "after {delta:?}");
        }
    }

    #[test]
    fn partial_strings_are_shown_incomplete_keys_and_literals_are_not() {
        assert_snapshots(&[
            ("{\"content\": \"hel", json!({"content": "hel"})),
            ("lo\", \"mo", json!({"content": "hello"})),
            ("de\": tr", json!({"content": "hello"})),
            (
                "ue, \"n\": 1",
                json!({"content": "hello", "mode": true, "n": 1}),
            ),
            (".", json!({"content": "hello", "mode": true})),
        ]);
    }

    #[test]
    fn escapes_split_across_deltas_are_not_cut_in_half() {
        assert_snapshots(&[
            ("{\"q\": \"say \\", json!({"q": "say "})),
            ("\"hi\\u00", json!({"q": "say \"hi"})),
            ("e9\\ud83d", json!({"q": "say \"hi\u{e9}"})),
            ("\\ude00\"}", json!({"q": "say \"hi\u{e9}\u{1F600}"})),
        ]);
    }

    #[test]
    fn garbage_is_reported_broken() {
        let mut p = PartialJson::new();
        p.push("{\"a\": oops}");
        assert!(p.is_broken());
        assert_eq!(p.snapshot(), None);
        let mut q = PartialJson::new();
        q.push("{\"a\" 1}");
        assert!(q.is_broken());
    }

    #[test]
    fn snapshots_are_throttled_geometrically_for_large_buffers() {
        let mut p = PartialJson::new();
        p.push("{\"content\": \"");
        let mut offered = 0;
        for _ in 0..16_384 {
            if p.push_and_snapshot(&"x".repeat(64)).is_some() {
                offered += 1;
            }
        }
        // ~8 KiB / 64 B every-delta snapshots, then one per doubling: far fewer than 16k.
        assert!(offered < 160, "{offered} snapshots");
        assert!(offered > 120);
    }
}
