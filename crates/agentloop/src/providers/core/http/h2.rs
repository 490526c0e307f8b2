//! HTTP/2 on the `h2` crate directly: one task per connection drives it (h2's `Connection` must
//! be polled for frames to move), and a request is nothing but its stream: the head and the
//! body (the shared JSON bytes, uncopied, with the end of the stream) are queued by the caller,
//! the response head is awaited in the caller's future, and the response body's data is handed
//! to the SSE decoder as it arrives, its flow-control window given back as it is taken.
//!
//! Why not hyper's HTTP/2 client connection: besides h2's own per-stream state it keeps, per
//! request, a dispatch channel entry and its callback, a task that waits for the response head,
//! and a body wrapper with a ping recorder; with thousands of concurrent conversations that was
//! several KiB per session (the breakdown is in `docs/BENCHMARKS.md`).
//!
//! The protocol settings are hyper's defaults, which this client had before: 2 MiB stream and
//! 5 MiB connection windows (they cost memory only when a reader falls behind), 16 KiB frames,
//! a 16 KiB limit on a response's header list, no server push.
//!
//! Hostile servers get the transport's errors, never a hang: a reset stream, a GOAWAY, a
//! header list over the limit or a flow-control violation end the request (or its body) with an
//! error of the request; a server that never answers is bounded by the transport's timeouts.

use std::future::poll_fn;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use hyper::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, Uri, header};

use super::HttpError;
use super::connect::Io;

/// The receive window of one stream (hyper's default).
const STREAM_WINDOW: u32 = 2 * 1024 * 1024;

/// The receive window of the connection (hyper's default).
const CONNECTION_WINDOW: u32 = 5 * 1024 * 1024;

/// The largest frame the server may send (the protocol's default).
const MAX_FRAME: u32 = 16 * 1024;

/// The most request body bytes buffered per stream ahead of the server's window.
const MAX_SEND_BUFFER: usize = 1024 * 1024;
/// Streams opened before the server's SETTINGS say how many it allows: the 100 that RFC 9113
/// (§6.5.2) recommends as a server's minimum. h2 would otherwise assume no limit, and a burst
/// of requests on a new connection could outrun the server's first frame and have the streams
/// beyond its limit refused.
const INITIAL_MAX_SEND_STREAMS: usize = 100;

/// The longest header list a response may have (hyper's default).
pub(super) const MAX_HEADER_LIST: u32 = 16 * 1024;

/// The request headers HTTP/2 forbids (connection-specific ones); h2 refuses a request that
/// carries them, so they are dropped, as hyper did.
const CONNECTION_HEADERS: [HeaderName; 6] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
    header::TE,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
];

/// A handle on one HTTP/2 connection (cloned per request).
#[derive(Clone)]
pub(crate) struct Connection {
    send: h2::client::SendRequest<Bytes>,
    /// Set when the connection can open no more streams: its task ended, or it refused one.
    closed: Arc<AtomicBool>,
}

/// A response head and its body read from this connection.
pub(crate) type Head = super::Head<Body>;

pub(crate) use super::SendError;

/// A response body: the stream's data as it arrives.
pub(crate) struct Body {
    recv: h2::RecvStream,
}

/// The HTTP/2 handshake over an open stream; the connection's task is spawned here and ends
/// when the connection does (the last handle and the last stream gone, or an error).
pub(super) async fn handshake(io: Io) -> Result<Connection, HttpError> {
    let (send, connection) = h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME)
        .max_header_list_size(MAX_HEADER_LIST)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .initial_max_send_streams(INITIAL_MAX_SEND_STREAMS)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| HttpError::connect_h2("the HTTP/2 handshake failed", e))?;
    let closed = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&closed);
    tokio::spawn(async move {
        let _ = connection.await;
        flag.store(true, Ordering::Release);
    });
    Ok(Connection { send, closed })
}

impl Connection {
    /// Whether the connection can open no more streams.
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Sends a request (`uri` absolute: its scheme and authority become pseudo-headers) with
    /// `body`, and waits for the response head (interim 1xx responses are skipped by h2).
    pub(crate) async fn send(
        &mut self,
        method: &Method,
        uri: &Uri,
        headers: &HeaderMap,
        body: &Bytes,
    ) -> Result<Head, SendError> {
        // The request head is built once the connection is ready, so that it is not part of
        // what this future holds while it waits.
        let opened = match poll_fn(|cx| self.send.poll_ready(cx)).await {
            Ok(()) => {
                let request = request(method, uri, headers, body.len());
                self.send.send_request(request, body.is_empty())
            }
            Err(e) => Err(e),
        };
        let (response, mut stream) = opened.map_err(|e| {
            // The connection's failure (not the request's): it can open no stream for any
            // other request either.
            let connection = e.is_io() || e.is_go_away() || e.reason().is_some();
            if connection {
                self.closed.store(true, Ordering::Release);
            }
            SendError::new(
                HttpError::request_h2("error sending the request", e),
                connection,
            )
        })?;
        if !body.is_empty() {
            // Queued as is (h2 sends it as the server's window allows). An error here is the
            // stream's: the response future reports it (or the server's early answer).
            let _ = stream.send_data(body.clone(), true);
        }
        let response = response.await.map_err(|e| {
            // REFUSED_STREAM: the server processed nothing of the request (RFC 9113 §8.7),
            // e.g. a stream beyond its limit: it may be sent again, on this connection or
            // another.
            let refused = e.reason() == Some(h2::Reason::REFUSED_STREAM);
            SendError {
                error: HttpError::request_h2("error sending the request", e),
                unanswered: refused,
                refused,
            }
        })?;
        let (parts, recv) = response.into_parts();
        Ok(Head {
            status: parts.status,
            headers: parts.headers,
            body: Body { recv },
        })
    }
}

/// The request head: the whole URL, the headers without connection-specific ones, and the
/// body's length when there is one or the method defines one (as hyper did).
fn request(method: &Method, uri: &Uri, headers: &HeaderMap, body_len: usize) -> Request<()> {
    let mut request = Request::new(());
    *request.method_mut() = method.clone();
    *request.uri_mut() = uri.clone();
    let mut headers = headers.clone();
    for name in &CONNECTION_HEADERS {
        // `TE: trailers` is the one connection header HTTP/2 allows; none is needed here.
        headers.remove(name);
    }
    if (body_len != 0 || matches!(*method, Method::POST | Method::PUT | Method::PATCH))
        && !headers.contains_key(header::CONTENT_LENGTH)
    {
        headers.insert(header::CONTENT_LENGTH, HeaderValue::from(body_len));
    }
    *request.headers_mut() = headers;
    request
}

impl Body {
    /// The next piece of the body; `None` at its end (trailers are skipped). The window the
    /// piece took is given back at once: the caller consumes it before asking for the next.
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, HttpError> {
        loop {
            match self.recv.data().await {
                None => return Ok(None),
                Some(Err(e)) => {
                    return Err(HttpError::request_h2("error reading the response body", e));
                }
                Some(Ok(data)) => {
                    let _ = self.recv.flow_control().release_capacity(data.len());
                    if !data.is_empty() {
                        return Ok(Some(data));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
