//! A server-sent-events decoder (WHATWG `text/event-stream`), fed arbitrary byte chunks.
//!
//! Written in-house rather than taken from `eventsource-stream` so that it works on borrowed
//! chunks without per-event allocations beyond the event itself, handles every line ending
//! (`\n`, `\r\n`, lone `\r`, including a `\r\n` split across chunks), never splits a multi-byte
//! character (lines are decoded only once complete), and can say whether the stream ended with
//! an unterminated event. It knows nothing about any provider's payloads.

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
#[derive(Debug, Default)]
pub struct SseDecoder {
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed (compacted lazily).
    start: usize,
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

impl SseDecoder {
    /// A decoder at the start of a stream.
    pub fn new() -> Self {
        SseDecoder::default()
    }

    /// Feeds a chunk and appends every event it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) {
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
        let mut scan = self.start;
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
        }
        if self.start > 0 && self.start * 2 >= self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    /// Ends the stream. Returns true when an event was still unterminated (it is discarded, as
    /// the spec requires) — a sign that the stream was cut.
    pub fn finish(&mut self) -> bool {
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
    use super::*;

    fn decode_in_pieces(bytes: &[u8], piece: usize) -> Vec<SseEvent> {
        let mut d = SseDecoder::new();
        let mut out = Vec::new();
        for chunk in bytes.chunks(piece.max(1)) {
            d.push(chunk, &mut out);
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
        d.push(b"data: complete\n\ndata: cut", &mut out);
        assert_eq!(out.len(), 1);
        assert!(d.finish());
        let mut clean = SseDecoder::new();
        clean.push(b"data: complete\n\n", &mut out);
        assert!(!clean.finish());
    }

    #[test]
    fn bom_and_empty_data_events() {
        let events = decode_in_pieces("\u{feff}data:\n\nevent: only\n\n".as_bytes(), 2);
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "");
    }
}
