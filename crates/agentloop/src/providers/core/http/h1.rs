//! HTTP/1.1 on a connection of our own: the request head written with the body in one vectored
//! write, the response head parsed with `httparse`, and the body framed (Content-Length,
//! chunked, or up to the connection's close) by the request that reads it.
//!
//! Why not hyper's HTTP/1.1 client connection (hyper still speaks HTTP/2 here): it allocates per
//! connection an 8 KiB read buffer and an 8 KiB buffer for the request head (neither can be made
//! smaller), a dispatch channel, and a task that drives the connection: about 20 KiB per
//! connection for as long as a request waits for its answer, which with thousands of concurrent
//! conversations was close to half of the memory per session. A [`Connection`] here is the
//! socket, a read buffer that is only allocated once the socket has something to read (1 KiB,
//! grown to fit a head up to [`MAX_HEAD`]) and released when the connection goes idle, and a
//! flag; the response body reads the socket itself and hands the bytes it read to the SSE
//! decoder as slices of that buffer (no copy, no task, no channel).
//!
//! A connection goes back to the pool only after its response body was read to its end, when
//! the server did not ask to close it (`Connection: close`, an HTTP/1.0 response without
//! keep-alive, a body delimited by the close) and sent nothing past the body. A response dropped
//! before its end, or a request cancelled half-way, closes it.
//!
//! Hostile servers get bounded work and a clear error: a malformed or oversized head, a bad
//! chunk size, a chunk without its CRLF, conflicting Content-Lengths, or a connection closed
//! before the body's end are errors of the request; bytes past the end of a body make the
//! connection unusable (it is closed) but do not change the response that was read.

use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use bytes::{Buf, Bytes, BytesMut};
use hyper::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};

use super::HttpError;
use super::connect::Io;

/// The size of the read buffer when a response starts arriving.
const INITIAL_BUFFER: usize = 1024;

/// Longest response head (status line and header fields) accepted: hyper's default limit, which
/// this client had before it had a codec of its own.
pub(crate) const MAX_HEAD: usize = 8192 + 4096 * 100;

/// Most header fields in a response head (hyper's default limit too).
const MAX_HEADERS: usize = 100;

/// Longest chunk-size line, extensions included (they are ignored).
const MAX_CHUNK_LINE: usize = 4096;

/// Longest trailer section of a chunked body (it is ignored).
const MAX_TRAILERS: usize = 16 * 1024;

/// One HTTP/1.1 connection (see the module docs).
pub(crate) struct Connection {
    io: Io,
    /// Bytes read and not yet consumed; no allocation while the connection is idle.
    buf: BytesMut,
    /// Whether the last response was read to its end and the server keeps the connection open.
    reusable: bool,
}

/// A response head and its body read from this connection.
pub(crate) type Head = super::Head<Body>;

pub(crate) use super::SendError;

impl Connection {
    /// A connection over an open (and, for `https://`, TLS-established) stream.
    pub(crate) fn new(io: Io) -> Self {
        Connection {
            io,
            buf: BytesMut::new(),
            reusable: false,
        }
    }

    /// Whether the connection may carry another request (its last response was read to the end
    /// and the server keeps it open).
    pub(crate) fn is_reusable(&self) -> bool {
        self.reusable
    }

    /// Whether an idle connection is still open: the server sent nothing on it since its last
    /// response (a server that closed it sent an end of stream; one that sent anything else is
    /// not speaking HTTP/1.1 any more). Polls once without waiting.
    pub(crate) fn is_open(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        let mut byte = [0u8; 1];
        let mut probe = ReadBuf::new(&mut byte);
        matches!(
            Pin::new(&mut self.io).poll_read(&mut cx, &mut probe),
            Poll::Pending
        )
    }

    /// Sends a request (`head` from [`encode_head`], then `body`) and reads the response head,
    /// skipping interim (1xx) responses.
    pub(crate) async fn send(
        &mut self,
        method: &Method,
        head: &[u8],
        body: &[u8],
    ) -> Result<Head, SendError> {
        self.reusable = false;
        if let Err(e) = self.write_all(head, body).await {
            let unanswered = is_closed(&e);
            let error = HttpError::request_io("error sending the request", e);
            return Err(SendError::new(error, unanswered));
        }
        let mut received = false;
        loop {
            if !self.buf.is_empty() {
                received = true;
                let parsed = parse_head(&self.buf, method).map_err(|e| SendError::new(e, false))?;
                if let Some((len, head)) = parsed {
                    self.buf.advance(len);
                    if head.status.is_informational() {
                        continue;
                    }
                    if head.body.is_done() {
                        self.finish(head.body.keep_alive);
                    }
                    return Ok(head);
                }
                if self.buf.len() >= MAX_HEAD {
                    let error = HttpError::protocol(format!(
                        "the response head is larger than {} KiB",
                        MAX_HEAD / 1024
                    ));
                    return Err(SendError::new(error, false));
                }
            }
            match self.fill().await {
                Ok(0) => {
                    let error = HttpError::protocol(
                        "the server closed the connection before the end of the response head"
                            .to_owned(),
                    );
                    return Err(SendError::new(error, !received));
                }
                Ok(_) => {}
                Err(e) => {
                    let unanswered = !received && is_closed(&e);
                    let error = HttpError::request_io("error reading the response head", e);
                    return Err(SendError::new(error, unanswered));
                }
            }
        }
    }

    /// The next piece of the body `body` frames; `None` at its end.
    pub(crate) async fn chunk(&mut self, body: &mut Body) -> Result<Option<Bytes>, HttpError> {
        loop {
            match body.decode(&mut self.buf)? {
                Decoded::Data(data) => return Ok(Some(data)),
                Decoded::End => {
                    self.finish(body.keep_alive);
                    return Ok(None);
                }
                Decoded::More => {}
            }
            let n = self
                .fill()
                .await
                .map_err(|e| HttpError::request_io("error reading the response body", e))?;
            if n == 0 {
                body.at_eof()?;
                // Delimited by the close: over, and the connection with it.
                return Ok(None);
            }
        }
    }

    /// The response was read to its end: the connection is reusable when the server keeps it
    /// open and sent nothing more; the read buffer is released either way.
    fn finish(&mut self, keep_alive: bool) {
        self.reusable = keep_alive && self.buf.is_empty();
        self.buf = BytesMut::new();
    }

    /// Writes the head and the body in one vectored write where the stream takes one (the body
    /// is not copied), then flushes (TLS).
    async fn write_all(&mut self, head: &[u8], body: &[u8]) -> io::Result<()> {
        let mut slices = [IoSlice::new(head), IoSlice::new(body)];
        let mut rest: &mut [IoSlice<'_>] = &mut slices;
        IoSlice::advance_slices(&mut rest, 0);
        while !rest.is_empty() {
            let n = self.io.write_vectored(rest).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut rest, n);
        }
        self.io.flush().await
    }

    /// Reads more bytes; `Ok(0)` at the end of the stream. The buffer is allocated only once
    /// the socket is readable (a request waiting for its answer holds none), and grows by
    /// doubling.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.buf.capacity() - self.buf.len() < INITIAL_BUFFER / 4 {
            if self.buf.is_empty() {
                self.io.readable().await?;
            }
            let more = self.buf.len().max(INITIAL_BUFFER);
            self.buf.reserve(more);
        }
        self.io.read_buf(&mut self.buf).await
    }
}

/// Whether `error` says the peer closed or reset the connection.
fn is_closed(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::UnexpectedEof
            | io::ErrorKind::NotConnected
    )
}

/// The head of a request: request line, `headers`, the `Host` header when `headers` has none,
/// and `Content-Length` for a body (or a POST). Header names are written in lower case, as
/// hyper wrote them.
pub(crate) fn encode_head(
    method: &Method,
    target: &str,
    host: &HeaderValue,
    headers: &HeaderMap,
    extra: Option<(&HeaderName, &HeaderValue)>,
    body_len: usize,
) -> Vec<u8> {
    // Sized once: request line, fields, `Host`, the proxy's credentials, `Content-Length`.
    let fields: usize = headers
        .iter()
        .map(|(name, value)| name.as_str().len() + value.len() + 4)
        .sum();
    let extra_len = extra.map_or(0, |(name, value)| name.as_str().len() + value.len() + 4);
    let size = method.as_str().len() + target.len() + host.len() + fields + extra_len + 64;
    let mut head = Vec::with_capacity(size);
    head.extend_from_slice(method.as_str().as_bytes());
    head.push(b' ');
    head.extend_from_slice(target.as_bytes());
    head.extend_from_slice(b" HTTP/1.1\r\n");
    let mut field = |name: &[u8], value: &[u8]| {
        head.extend_from_slice(name);
        head.extend_from_slice(b": ");
        head.extend_from_slice(value);
        head.extend_from_slice(b"\r\n");
    };
    if !headers.contains_key(header::HOST) {
        field(b"host", host.as_bytes());
    }
    for (name, value) in headers {
        if extra.is_some_and(|(n, _)| n == name) {
            continue;
        }
        field(name.as_str().as_bytes(), value.as_bytes());
    }
    if let Some((name, value)) = extra {
        field(name.as_str().as_bytes(), value.as_bytes());
    }
    let needs_length = body_len > 0 || !matches!(*method, Method::GET | Method::HEAD);
    if needs_length && !headers.contains_key(header::CONTENT_LENGTH) {
        let mut digits = [0u8; 20];
        field(b"content-length", decimal(body_len, &mut digits));
    }
    head.extend_from_slice(b"\r\n");
    head
}

/// `n` in decimal, written at the end of `digits` (no allocation).
fn decimal(mut n: usize, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &digits[at..];
        }
    }
}

/// Parses a response head at the start of `buf`: its length and the head, `None` while it is
/// incomplete.
fn parse_head(buf: &[u8], method: &Method) -> Result<Option<(usize, Head)>, HttpError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(HttpError::protocol(format!(
                "the response head has more than {MAX_HEADERS} header fields"
            )));
        }
        Err(e) => {
            return Err(HttpError::protocol(format!(
                "the server sent a malformed response head: {e}"
            )));
        }
    };
    let malformed = || HttpError::protocol("the server sent a malformed response head".to_owned());
    let status = response
        .code
        .and_then(|code| StatusCode::from_u16(code).ok())
        .ok_or_else(malformed)?;
    let mut headers = HeaderMap::with_capacity(response.headers.len());
    for field in response.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| malformed())?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| malformed())?;
        headers.append(name, value);
    }
    if status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(HttpError::protocol(
            "the server switched protocols, which no request asked for".to_owned(),
        ));
    }
    let http10 = response.version == Some(0);
    let body = Body::of(status, &headers, method, http10)?;
    Ok(Some((
        len,
        Head {
            status,
            headers,
            body,
        },
    )))
}

/// Whether the comma-separated header `name` holds `token` (case-insensitive).
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|value| {
        value
            .as_bytes()
            .split(|&b| b == b',')
            .any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
    })
}

/// The body of one response: how it is framed and how far it was read.
#[derive(Debug)]
pub(crate) struct Body {
    framing: Framing,
    /// Whether the server keeps the connection open after this response.
    keep_alive: bool,
}

#[derive(Debug)]
enum Framing {
    /// This many bytes are left (Content-Length).
    Length(u64),
    /// Chunked transfer coding.
    Chunked(Chunked),
    /// Everything up to the end of the stream.
    Close,
    /// Read to its end.
    Done,
}

/// Where a chunked body's decoding is.
#[derive(Debug)]
enum Chunked {
    /// At a chunk-size line.
    Size,
    /// In a chunk's data: this many bytes are left.
    Data(u64),
    /// After a chunk's data, at its CRLF.
    DataEnd,
    /// In the trailer section (after the last chunk): this many bytes of it were read.
    Trailers(usize),
}

/// What [`Body::decode`] found in the buffer.
#[derive(Debug)]
enum Decoded {
    /// Body bytes.
    Data(Bytes),
    /// The body ended.
    End,
    /// More bytes are needed.
    More,
}

impl Body {
    /// How the body of a response with `status` and `headers` to a `method` request is framed
    /// (RFC 9112, section 6.3).
    fn of(
        status: StatusCode,
        headers: &HeaderMap,
        method: &Method,
        http10: bool,
    ) -> Result<Self, HttpError> {
        let mut keep_alive = if http10 {
            has_token(headers, header::CONNECTION, "keep-alive")
        } else {
            !has_token(headers, header::CONNECTION, "close")
        };
        let framing = if *method == Method::HEAD
            || status.is_informational()
            || status == StatusCode::NO_CONTENT
            || status == StatusCode::NOT_MODIFIED
        {
            Framing::Done
        } else if headers.contains_key(header::TRANSFER_ENCODING) {
            // A length alongside is ignored, and the connection not trusted with another
            // request; a coding other than chunked last is delimited by the close.
            if headers.contains_key(header::CONTENT_LENGTH) {
                keep_alive = false;
            }
            let last = headers
                .get_all(header::TRANSFER_ENCODING)
                .iter()
                .next_back()
                .and_then(|v| v.as_bytes().rsplit(|&b| b == b',').next())
                .map(<[u8]>::trim_ascii);
            if last.is_some_and(|t| t.eq_ignore_ascii_case(b"chunked")) && !http10 {
                Framing::Chunked(Chunked::Size)
            } else {
                Framing::Close
            }
        } else if let Some(length) = content_length(headers)? {
            if length == 0 {
                Framing::Done
            } else {
                Framing::Length(length)
            }
        } else {
            Framing::Close
        };
        if matches!(framing, Framing::Close) {
            keep_alive = false;
        }
        Ok(Body {
            framing,
            keep_alive,
        })
    }

    /// Whether the body was read to its end.
    pub(crate) fn is_done(&self) -> bool {
        matches!(self.framing, Framing::Done)
    }

    /// Takes the next body bytes out of `buf`, or what is needed to go on.
    fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, HttpError> {
        loop {
            match &mut self.framing {
                Framing::Done => return Ok(Decoded::End),
                Framing::Length(left) => {
                    if buf.is_empty() {
                        return Ok(Decoded::More);
                    }
                    let n = take(buf.len(), *left);
                    *left -= n as u64;
                    if *left == 0 {
                        self.framing = Framing::Done;
                    }
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                Framing::Close => {
                    if buf.is_empty() {
                        return Ok(Decoded::More);
                    }
                    return Ok(Decoded::Data(buf.split().freeze()));
                }
                Framing::Chunked(state) => match decode_chunked(state, buf)? {
                    Some(Decoded::End) => self.framing = Framing::Done,
                    Some(decoded) => return Ok(decoded),
                    None => {}
                },
            }
        }
    }

    /// The stream ended: fine for a body delimited by the close, an error for any other that
    /// did not reach its end.
    fn at_eof(&mut self) -> Result<(), HttpError> {
        let missing = match &self.framing {
            Framing::Done => return Ok(()),
            Framing::Close => {
                self.framing = Framing::Done;
                return Ok(());
            }
            Framing::Length(left) => format!(" ({left} bytes of its Content-Length missing)"),
            Framing::Chunked(_) => " (the chunked body had not ended)".to_owned(),
        };
        self.keep_alive = false;
        Err(HttpError::protocol(format!(
            "the server closed the connection before the end of the response body{missing}"
        )))
    }
}

/// How many of `available` bytes to take when `left` are wanted.
fn take(available: usize, left: u64) -> usize {
    usize::try_from(left).map_or(available, |left| left.min(available))
}

/// One step of chunked decoding: `Some(Data | End | More)` for the caller, `None` when the
/// state moved on and decoding goes on.
fn decode_chunked(state: &mut Chunked, buf: &mut BytesMut) -> Result<Option<Decoded>, HttpError> {
    match state {
        Chunked::Size => {
            let Some(end) = memchr::memchr(b'\n', buf) else {
                if buf.len() > MAX_CHUNK_LINE {
                    return Err(bad_chunk("a chunk-size line is too long"));
                }
                return Ok(Some(Decoded::More));
            };
            if end > MAX_CHUNK_LINE {
                return Err(bad_chunk("a chunk-size line is too long"));
            }
            let size = chunk_size(&buf[..end])?;
            buf.advance(end + 1);
            *state = if size == 0 {
                Chunked::Trailers(0)
            } else {
                Chunked::Data(size)
            };
            Ok(None)
        }
        Chunked::Data(left) => {
            if buf.is_empty() {
                return Ok(Some(Decoded::More));
            }
            let n = take(buf.len(), *left);
            *left -= n as u64;
            if *left == 0 {
                *state = Chunked::DataEnd;
            }
            Ok(Some(Decoded::Data(buf.split_to(n).freeze())))
        }
        Chunked::DataEnd => match buf.first() {
            None => Ok(Some(Decoded::More)),
            Some(b'\n') => {
                buf.advance(1);
                *state = Chunked::Size;
                Ok(None)
            }
            Some(b'\r') => match buf.get(1) {
                None => Ok(Some(Decoded::More)),
                Some(b'\n') => {
                    buf.advance(2);
                    *state = Chunked::Size;
                    Ok(None)
                }
                Some(_) => Err(bad_chunk("a chunk's data did not end with CRLF")),
            },
            Some(_) => Err(bad_chunk("a chunk's data did not end with CRLF")),
        },
        Chunked::Trailers(read) => {
            let Some(end) = memchr::memchr(b'\n', buf) else {
                if *read + buf.len() > MAX_TRAILERS {
                    return Err(bad_chunk("the trailer section is too long"));
                }
                return Ok(Some(Decoded::More));
            };
            *read += end + 1;
            if *read > MAX_TRAILERS {
                return Err(bad_chunk("the trailer section is too long"));
            }
            let line = &buf[..end];
            let blank = line.is_empty() || line == b"\r";
            buf.advance(end + 1);
            Ok(blank.then_some(Decoded::End))
        }
    }
}

/// The size on a chunk-size line (without its LF): hex digits, then optionally whitespace and
/// `;` extensions, which are ignored.
fn chunk_size(line: &[u8]) -> Result<u64, HttpError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(bad_chunk("a chunk size is not a hexadecimal number"));
    }
    if digits > 15 {
        return Err(bad_chunk("a chunk size is too large"));
    }
    let rest = line[digits..].trim_ascii_start();
    if !(rest.is_empty() || rest.starts_with(b";")) || rest.contains(&b'\r') {
        return Err(bad_chunk("a chunk size is not a hexadecimal number"));
    }
    let mut size = 0u64;
    for &b in &line[..digits] {
        // At most 15 hex digits: no overflow.
        size = size * 16 + u64::from((b as char).to_digit(16).unwrap_or(0));
    }
    Ok(size)
}

fn bad_chunk(what: &str) -> HttpError {
    HttpError::protocol(format!("the server sent a malformed chunked body: {what}"))
}

/// The Content-Length of a response (its values must agree), if it has one.
fn content_length(headers: &HeaderMap) -> Result<Option<u64>, HttpError> {
    let mut length = None;
    for value in headers.get_all(header::CONTENT_LENGTH) {
        for part in value.as_bytes().split(|&b| b == b',') {
            let part = part.trim_ascii();
            let parsed = std::str::from_utf8(part)
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| {
                    HttpError::protocol("the server sent an invalid Content-Length".to_owned())
                })?;
            if length.is_some_and(|l| l != parsed) {
                return Err(HttpError::protocol(
                    "the server sent conflicting Content-Lengths".to_owned(),
                ));
            }
            length = Some(parsed);
        }
    }
    Ok(length)
}

#[cfg(test)]
mod tests;
