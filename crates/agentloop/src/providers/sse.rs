//! A server-sent-events decoder (WHATWG `text/event-stream`), fed arbitrary byte chunks.
//!
//! Written in-house rather than taken from `eventsource-stream` so that it works on borrowed
//! chunks without per-event allocations beyond the event itself, handles every line ending
//! (`\n`, `\r\n`, lone `\r`, including a `\r\n` split across chunks), never splits a multi-byte
//! character (lines are decoded only once complete), and can say whether the stream ended with
//! an unterminated event. It knows nothing about any provider's payloads.
//!
//! Hostile or broken servers are bounded: the decoder scans each byte once however long a line
//! is (a line split over many chunks is not re-scanned from its start), and an event — its
//! `data:` lines plus a line still in progress — larger than [`SseDecoder::max_event_bytes`]
//! ([`DEFAULT_MAX_EVENT_BYTES`] unless configured) fails the decode with [`EventTooLarge`]
//! instead of growing memory without bound. The decoder also tells its caller whether field
//! lines arrived ([`SseDecoder::take_progress`]), so an idle timeout can ignore keep-alive
//! comments.

/// The default cap on one event's size: 16 MiB, far above any real model event (a large
/// tool-call argument arrives as many small deltas) and far below what could hurt a process.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// An event (or a single line) exceeded the decoder's size cap.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a server-sent event exceeded {limit} bytes, the configured maximum event size (max_event_bytes)"
)]
pub struct EventTooLarge {
    /// The cap that was exceeded, in bytes.
    pub limit: usize,
}

/// One dispatched event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field (empty when absent, which the spec calls `message`).
    pub event: String,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` field, if any.
    pub id: Option<String>,
}

/// Incremental decoder: push bytes, take events.
#[derive(Debug)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed (compacted lazily).
    start: usize,
    /// Bytes of `buf` already searched for a line terminator: the next push scans from here,
    /// which keeps a line that arrives in many chunks linear instead of quadratic.
    scanned: usize,
    /// The size cap on one event (see [`EventTooLarge`]).
    max_event_bytes: usize,
    /// The cap was exceeded: every later push fails too.
    failed: bool,
    /// Field lines (not comments, not blank lines) arrived since the last `take_progress`.
    progress: bool,
    /// The previous chunk ended with `\r`: a leading `\n` in the next one belongs to it.
    skip_lf: bool,
    /// The first line of the stream may start with a BOM.
    seen_first_line: bool,
    event: String,
    data: String,
    has_data: bool,
    id: Option<String>,
    /// Fields were seen since the last dispatch.
    pending: bool,
}

impl Default for SseDecoder {
    fn default() -> Self {
        SseDecoder::with_max_event_bytes(DEFAULT_MAX_EVENT_BYTES)
    }
}

impl SseDecoder {
    /// A decoder at the start of a stream, with the default event size cap.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// A decoder whose events may not exceed `limit` bytes (`data:` lines joined, or one line
    /// still in progress). A `limit` of 0 is taken as 1.
    pub fn with_max_event_bytes(limit: usize) -> Self {
        SseDecoder {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            max_event_bytes: limit.max(1),
            failed: false,
            progress: false,
            skip_lf: false,
            seen_first_line: false,
            event: String::new(),
            data: String::new(),
            has_data: false,
            id: None,
            pending: false,
        }
    }

    /// The size cap on one event, in bytes.
    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// Whether field lines (`data:`, `event:`, … — not comments, not blank lines) arrived since
    /// the last call, including the start of a field line still in progress. Resets the flag.
    pub fn take_progress(&mut self) -> bool {
        std::mem::take(&mut self.progress)
    }

    /// Feeds a chunk and appends every event it completes to `out`.
    ///
    /// Fails (and keeps failing) once an event exceeds the size cap; the events completed
    /// before that point are in `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), EventTooLarge> {
        if self.failed {
            return Err(self.too_large());
        }
        let mut chunk = chunk;
        if self.skip_lf {
            if let Some((&b'\n', rest)) = chunk.split_first() {
                chunk = rest;
            }
            if !chunk.is_empty() {
                self.skip_lf = false;
            }
        }
        self.buf.extend_from_slice(chunk);
        let mut scan = self.scanned.max(self.start);
        // memchr: a byte-at-a-time scan was the decoder's main cost in profiles.
        while let Some(offset) = memchr::memchr2(b'\n', b'\r', &self.buf[scan..]) {
            let end = scan + offset;
            let terminator = self.buf[end];
            let line_start = self.start;
            // Move the line out before handling it (handle_line needs &mut self).
            let line = std::mem::take(&mut self.buf);
            self.handle_line(&line[line_start..end], out);
            self.buf = line;
            let mut next = end + 1;
            if terminator == b'\r' {
                match self.buf.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.skip_lf = true,
                }
            }
            self.start = next;
            scan = next;
            if self.data.len() > self.max_event_bytes {
                return Err(self.fail());
            }
        }
        self.scanned = self.buf.len();
        // A line still in progress counts towards its event (a single `data:` line of 100 MB
        // is one event), and its start counts as progress unless it is a comment.
        let tail = &self.buf[self.start..];
        if !tail.is_empty() {
            if tail.len() + self.data.len() > self.max_event_bytes {
                return Err(self.fail());
            }
            if tail[0] != b':' && !chunk.is_empty() {
                self.progress = true;
            }
        }
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        Ok(())
    }

    fn too_large(&self) -> EventTooLarge {
        EventTooLarge {
            limit: self.max_event_bytes,
        }
    }

    /// Marks the decoder failed and frees what it held.
    fn fail(&mut self) -> EventTooLarge {
        self.failed = true;
        self.buf = Vec::new();
        self.start = 0;
        self.scanned = 0;
        self.data = String::new();
        self.event = String::new();
        self.has_data = false;
        self.pending = false;
        self.too_large()
    }

    /// Ends the stream. Returns true when an event was still unterminated (it is discarded, as
    /// the spec requires) — a sign that the stream was cut.
    pub fn finish(&mut self) -> bool {
        if self.failed {
            return true;
        }
        let partial_line = self.start < self.buf.len();
        partial_line || self.pending
    }

    fn handle_line(&mut self, mut line: &[u8], out: &mut Vec<SseEvent>) {
        if !self.seen_first_line {
            self.seen_first_line = true;
            if let Some(rest) = line.strip_prefix(&[0xEF, 0xBB, 0xBF]) {
                line = rest;
            }
        }
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: std::mem::take(&mut self.event),
                    data: std::mem::take(&mut self.data),
                    id: self.id.clone(),
                });
            } else {
                self.event.clear();
            }
            self.has_data = false;
            self.pending = false;
            return;
        }
        if line[0] == b':' {
            return;
        }
        let (name, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        // Valid UTF-8 is the norm: check it the fast way, and only then replace bad bytes.
        let value = match std::str::from_utf8(value) {
            Ok(text) => std::borrow::Cow::Borrowed(text),
            Err(_) => String::from_utf8_lossy(value),
        };
        self.pending = true;
        self.progress = true;
        match name {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(&value);
                self.has_data = true;
            }
            b"id" if !value.contains('\0') => self.id = Some(value.into_owned()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            d.push(chunk, &mut out).unwrap();
        }
        out
    }

    #[test]
    fn fields_comments_and_multiline_data() {
        let text = b": comment\nevent: delta\ndata: a\ndata:b\nid: 7\n\ndata: plain\n\n";
        let events = decode_in_pieces(text, 1000);
        assert_eq!(
            events,
            [
                SseEvent {
                    event: "delta".into(),
                    data: "a\nb".into(),
                    id: Some("7".into())
                },
                SseEvent {
                    event: String::new(),
                    data: "plain".into(),
                    id: Some("7".into())
                }
            ]
        );
    }

    #[test]
    fn every_line_ending_and_every_split_gives_the_same_events() {
        let lf = "event: x\ndata: héllo 東京\n\ndata: two\n\n";
        let crlf = lf.replace('\n', "\r\n");
        let cr = lf.replace('\n', "\r");
        let expected = decode_in_pieces(lf.as_bytes(), 4096);
        assert_eq!(expected.len(), 2);
        for text in [lf.to_owned(), crlf, cr] {
            for piece in [1, 2, 3, 5, 7, 64] {
                assert_eq!(
                    decode_in_pieces(text.as_bytes(), piece),
                    expected,
                    "{piece}"
                );
            }
        }
    }

    #[test]
    fn unterminated_final_event_is_discarded_and_reported() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push(b"data: complete\n\ndata: cut", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert!(d.finish());
        let mut clean = SseDecoder::new();
        clean.push(b"data: complete\n\n", &mut out).unwrap();
        assert!(!clean.finish());
    }

    #[test]
    fn bom_and_empty_data_events() {
        let events = decode_in_pieces("\u{feff}data:\n\nevent: only\n\n".as_bytes(), 2);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "");
    }

    #[test]
    fn a_line_in_many_chunks_is_scanned_once_and_capped() {
        // 4 MiB in 1-KiB chunks: quadratic re-scanning would touch ~8 GiB.
        let mut d = SseDecoder::with_max_event_bytes(8 * 1024 * 1024);
        let mut out = Vec::new();
        d.push(b"data: ", &mut out).unwrap();
        let piece = vec![b'a'; 1024];
        for _ in 0..4096 {
            d.push(&piece, &mut out).unwrap();
        }
        d.push(b"\n\n", &mut out).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].data.len(), 4 * 1024 * 1024);

        let mut small = SseDecoder::with_max_event_bytes(1000);
        let mut out = Vec::new();
        small.push(b"data: ok\n\ndata: ", &mut out).unwrap();
        let err = (0..10)
            .find_map(|_| small.push(&piece, &mut out).err())
            .unwrap();
        assert_eq!(err.limit, 1000);
        assert_eq!(out.len(), 1, "events before the oversized one are kept");
        assert!(
            small.push(b"\n\n", &mut out).is_err(),
            "a failed decoder stays failed"
        );
        assert!(err.to_string().contains("1000 bytes"));
    }

    #[test]
    fn many_data_lines_count_towards_the_cap() {
        let mut d = SseDecoder::with_max_event_bytes(100);
        let mut out = Vec::new();
        let line = format!("data: {}\n", "x".repeat(30));
        let result = (0..5).try_for_each(|_| d.push(line.as_bytes(), &mut out));
        assert!(result.is_err());
        assert!(out.is_empty());
    }

    #[test]
    fn comments_and_blank_lines_are_not_progress() {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        d.push(b": keep-alive\n\n: ping\n", &mut out).unwrap();
        assert!(!d.take_progress());
        d.push(b": partial comm", &mut out).unwrap();
        assert!(!d.take_progress());
        d.push(b"ent\ndata: {\"a\"", &mut out).unwrap();
        assert!(d.take_progress());
        assert!(!d.take_progress(), "the flag resets");
        d.push(b":1}\n\n", &mut out).unwrap();
        assert!(d.take_progress());
        assert_eq!(out.len(), 1);
    }
}
