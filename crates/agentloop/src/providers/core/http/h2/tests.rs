//! The HTTP/2 client over real sockets: requests and bodies (the window given back as the body
//! is read), and hostile servers (reset streams, GOAWAY, oversized header lists, flow-control
//! and frame-size violations), each of which must end in an error, not a hang or a panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use super::super::ErrorKind;
use super::*;
use hyper::http::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Far longer than any exchange here takes: a test that reaches it found a hang.
const HANG: Duration = Duration::from_secs(30);

/// A client connection to a local listener, and the server's end of it (not yet handshaken).
async fn pair() -> (Connection, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(
        async {
            let tcp = TcpStream::connect(addr).await.unwrap();
            handshake(Io::Plain(tcp)).await
        },
        async { listener.accept().await.unwrap().0 }
    );
    // The client's handshake completes without the server's preface (h2 sends its own and
    // goes on); the server answers once it is handshaken below.
    (client.unwrap(), server)
}

/// A client connection and an h2 server on the other end, driven by `serve` (which gets the
/// server connection once it has accepted the client's first stream).
async fn with_server<F, Fut>(serve: F) -> Connection
where
    F: FnOnce(
            ::h2::server::Connection<TcpStream, Bytes>,
            Request<::h2::RecvStream>,
            ::h2::server::SendResponse<Bytes>,
        ) -> Fut
        + Send
        + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (client, server) = pair().await;
    tokio::spawn(async move {
        let mut connection = ::h2::server::handshake(server).await.unwrap();
        let Some(Ok((request, respond))) = connection.accept().await else {
            return;
        };
        serve(connection, request, respond).await;
    });
    client
}

/// Polls the server connection (frames only move while it is polled) until it ends.
async fn drive(mut connection: ::h2::server::Connection<TcpStream, Bytes>) {
    while let Some(Ok(_)) = connection.accept().await {}
}

fn uri() -> Uri {
    "http://127.0.0.1/v1/chat".parse().unwrap()
}

async fn post(connection: &mut Connection, body: &str) -> Result<Head, SendError> {
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::CONNECTION, HeaderValue::from_static("keep-alive"));
    headers.insert("keep-alive", HeaderValue::from_static("timeout=5"));
    let body = Bytes::copy_from_slice(body.as_bytes());
    tokio::time::timeout(
        HANG,
        connection.send(&Method::POST, &uri(), &headers, &body),
    )
    .await
    .expect("the request hung")
}

/// The whole body, or the error that ended it (with the bytes read before it).
async fn read_body(body: &mut Body) -> (Vec<u8>, Option<HttpError>) {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(HANG, body.chunk())
            .await
            .expect("the body hung")
        {
            Ok(Some(data)) => out.extend_from_slice(&data),
            Ok(None) => return (out, None),
            Err(e) => return (out, Some(e)),
        }
    }
}

#[tokio::test]
async fn a_request_carries_its_body_and_a_body_larger_than_the_window_is_read_whole() {
    // Three times the stream window: without the window given back as the body is read, the
    // server could send no more than the first 2 MiB and the read would hang.
    const LEN: usize = 3 * STREAM_WINDOW as usize;
    let mut client = with_server(|connection, request, mut respond| async move {
        let driver = tokio::spawn(drive(connection));
        let (parts, mut body) = request.into_parts();
        assert_eq!(parts.method, Method::POST);
        assert_eq!(parts.uri.path(), "/v1/chat");
        // Connection-specific headers are not HTTP/2's: dropped, not refused.
        assert!(parts.headers.get(header::CONNECTION).is_none());
        assert!(parts.headers.get("keep-alive").is_none());
        assert_eq!(parts.headers[header::CONTENT_LENGTH], "7");
        let mut received = Vec::new();
        while let Some(data) = body.data().await {
            let data = data.unwrap();
            let _ = body.flow_control().release_capacity(data.len());
            received.extend_from_slice(&data);
        }
        assert_eq!(received, b"{\"a\":1}");
        let mut send = respond
            .send_response(hyper::http::Response::new(()), false)
            .unwrap();
        let mut left = LEN;
        while left > 0 {
            let n = left.min(64 * 1024);
            send.reserve_capacity(n);
            let granted = std::future::poll_fn(|cx| send.poll_capacity(cx))
                .await
                .unwrap()
                .unwrap();
            send.send_data(Bytes::from(vec![b'x'; granted]), granted == left)
                .unwrap();
            left -= granted;
        }
        driver.await.unwrap();
    })
    .await;
    let mut head = post(&mut client, "{\"a\":1}").await.ok().unwrap();
    assert_eq!(head.status, StatusCode::OK);
    let (data, error) = read_body(&mut head.body).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(data.len(), LEN);
    assert!(!client.is_closed());
}

#[tokio::test]
async fn a_stream_reset_mid_body_is_an_error_of_the_body() {
    // The server resets the stream once the client read the first piece of the body.
    let (read, reset) = tokio::sync::oneshot::channel::<()>();
    let mut client = with_server(|connection, _request, mut respond| async move {
        let driver = tokio::spawn(drive(connection));
        let mut send = respond
            .send_response(hyper::http::Response::new(()), false)
            .unwrap();
        send.send_data(Bytes::from_static(b"data: {}\n\n"), false)
            .unwrap();
        let _ = reset.await;
        send.send_reset(::h2::Reason::INTERNAL_ERROR);
        driver.await.unwrap();
    })
    .await;
    let mut head = post(&mut client, "{}").await.ok().unwrap();
    let first = head.body.chunk().await.unwrap().unwrap();
    assert_eq!(first, "data: {}\n\n");
    read.send(()).unwrap();
    let (_, error) = read_body(&mut head.body).await;
    let error = error.expect("a reset stream ended the body");
    assert_eq!(error.kind, ErrorKind::Request);
    assert_eq!(error.to_string(), "error reading the response body");
}

/// The failure of a request whose stream the server resets with `reason` before the head.
async fn reset_before_the_head(reason: ::h2::Reason) -> SendError {
    let mut client = with_server(move |connection, _request, mut respond| async move {
        let driver = tokio::spawn(drive(connection));
        respond.send_reset(reason);
        driver.await.unwrap();
    })
    .await;
    post(&mut client, "{}").await.err().expect("no head")
}

#[tokio::test]
async fn a_stream_reset_before_the_head_is_an_error_of_the_request() {
    let failure = reset_before_the_head(::h2::Reason::INTERNAL_ERROR).await;
    assert_eq!(failure.error.kind, ErrorKind::Request);
    assert!(!failure.unanswered && !failure.refused);
}

#[tokio::test]
async fn a_refused_stream_is_unanswered_and_may_be_sent_again() {
    let failure = reset_before_the_head(::h2::Reason::REFUSED_STREAM).await;
    assert_eq!(failure.error.kind, ErrorKind::Request);
    assert!(failure.unanswered && failure.refused);
}

#[test]
fn refused_requests_are_sent_again_a_bounded_number_of_times() {
    let refused = SendError {
        error: HttpError::connect("refused"),
        unanswered: true,
        refused: true,
    };
    let mut refusals = 0;
    for _ in 0..super::super::MAX_REFUSALS {
        assert!(super::super::send_again(&refused, true, &mut refusals));
    }
    assert!(!super::super::send_again(&refused, true, &mut refusals));
    // A closed reused connection is replaced; on a new one it is the server's failure.
    let closed = SendError {
        error: HttpError::connect("closed"),
        unanswered: true,
        refused: false,
    };
    assert!(super::super::send_again(&closed, true, &mut 0));
    assert!(!super::super::send_again(&closed, false, &mut 0));
}

#[tokio::test]
async fn goaway_ends_the_body_in_flight_and_closes_the_connection_to_new_requests() {
    // The server goes away once the client read the first piece of the body.
    let (read, away) = tokio::sync::oneshot::channel::<()>();
    let mut client = with_server(|mut connection, _request, mut respond| async move {
        let mut send = respond
            .send_response(hyper::http::Response::new(()), false)
            .unwrap();
        send.send_data(Bytes::from_static(b"data: {}\n\n"), false)
            .unwrap();
        // Polled meanwhile, for the head and the data to go out.
        tokio::select! {
            _ = away => {}
            _ = connection.accept() => {}
        }
        connection.abrupt_shutdown(::h2::Reason::INTERNAL_ERROR);
        drive(connection).await;
    })
    .await;
    let mut head = post(&mut client, "{}").await.ok().unwrap();
    head.body.chunk().await.unwrap().unwrap();
    read.send(()).unwrap();
    let (_, error) = read_body(&mut head.body).await;
    assert!(error.is_some(), "GOAWAY ended the body");
    // A request after the GOAWAY finds the connection gone: not sent, and the connection is
    // marked closed for the pool.
    let failure = post(&mut client, "{}").await.err().expect("no stream");
    assert!(failure.unanswered);
    assert!(client.is_closed());
}

#[tokio::test]
async fn an_oversized_header_list_is_an_error_of_the_request() {
    let mut client = with_server(|connection, _request, mut respond| async move {
        let driver = tokio::spawn(drive(connection));
        let mut response = hyper::http::Response::new(());
        let big = "v".repeat(MAX_HEADER_LIST as usize + 1);
        response
            .headers_mut()
            .insert("x-big", HeaderValue::from_str(&big).unwrap());
        let _ = respond.send_response(response, true);
        driver.await.unwrap();
    })
    .await;
    let failure = post(&mut client, "{}").await.err().expect("no head");
    assert_eq!(failure.error.kind, ErrorKind::Request);
}

/// A server speaking raw frames: the handshake (SETTINGS both ways), then the response head of
/// stream 1 once the request arrived, then `frames` as they are; the receiver says when the
/// client answered them with RST_STREAM or GOAWAY (it found them in violation). A client that
/// never does leaves the receiver pending.
async fn raw_server(frames: Vec<u8>) -> (Connection, tokio::sync::oneshot::Receiver<()>) {
    let (client, mut server) = pair().await;
    let (written, all_written) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let mut preface = [0u8; 24];
        server.read_exact(&mut preface).await.unwrap();
        // Empty SETTINGS, then the acknowledgement of the client's.
        server.write_all(&frame(4, 0, 0, &[])).await.unwrap();
        server.write_all(&frame(4, 1, 0, &[])).await.unwrap();
        // Frames until the request's end (HEADERS or DATA with END_STREAM on stream 1).
        loop {
            let (kind, flags) = read_frame(&mut server).await;
            if matches!(kind, 0 | 1) && flags & 1 == 1 {
                break;
            }
        }
        // HEADERS, END_HEADERS: `:status 200` (static table entry 8).
        server.write_all(&frame(1, 4, 1, &[0x88])).await.unwrap();
        server.write_all(&frames).await.unwrap();
        // Until the client objects: RST_STREAM or GOAWAY.
        while !matches!(read_frame(&mut server).await.0, 3 | 7) {}
        let _ = written.send(());
        // Kept open until the client is done with it.
        let mut rest = Vec::new();
        let _ = server.read_to_end(&mut rest).await;
    });
    (client, all_written)
}

/// Posts to a [`raw_server`] sending `frames` (which break the protocol: `violation`) and
/// reads the body: the client must object to them and end the body with an error rather than
/// hang. The data read before the error.
async fn read_refused(frames: Vec<u8>, violation: &str) -> Vec<u8> {
    let (mut client, objected) = raw_server(frames).await;
    let mut head = post(&mut client, "{}").await.ok().unwrap();
    assert_eq!(head.status, StatusCode::OK);
    tokio::time::timeout(HANG, objected)
        .await
        .unwrap_or_else(|_| panic!("the client accepted {violation}"))
        .unwrap();
    let (data, error) = read_body(&mut head.body).await;
    assert!(error.is_some(), "{violation} did not end the body");
    data
}

/// Reads one frame: its type and flags.
async fn read_frame(server: &mut TcpStream) -> (u8, u8) {
    let mut head = [0u8; 9];
    server.read_exact(&mut head).await.unwrap();
    let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
    let mut payload = vec![0u8; len];
    server.read_exact(&mut payload).await.unwrap();
    (head[3], head[4])
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = u32::try_from(payload.len()).unwrap().to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

#[tokio::test]
async fn data_past_the_stream_window_is_an_error_not_a_hang() {
    // The window is only given back as the body is read; the body is not read until the
    // server sent a frame more than the window allowed.
    let chunk = vec![b'x'; MAX_FRAME as usize];
    let mut frames = Vec::new();
    for _ in 0..=STREAM_WINDOW / MAX_FRAME {
        frames.extend_from_slice(&frame(0, 0, 1, &chunk));
    }
    let data = read_refused(frames, "data past its window").await;
    assert!(data.len() <= STREAM_WINDOW as usize);
}

#[tokio::test]
async fn a_frame_larger_than_allowed_is_an_error_not_a_hang() {
    let frames = frame(0, 0, 1, &vec![b'x'; MAX_FRAME as usize + 1]);
    assert!(read_refused(frames, "an oversized frame").await.is_empty());
}

#[tokio::test]
async fn the_connection_task_ends_when_the_last_handle_and_stream_are_gone() {
    let (client, mut server) = pair().await;
    let serving = tokio::spawn(async move {
        let mut connection = ::h2::server::handshake(&mut server).await.unwrap();
        // The client going away ends the connection (GOAWAY, then the socket closed).
        while let Some(Ok(_)) = connection.accept().await {}
    });
    let closed = Arc::clone(&client.closed);
    drop(client);
    tokio::time::timeout(HANG, serving)
        .await
        .expect("the connection stayed open")
        .unwrap();
    // The task saw its end too (it may finish a turn after the server did).
    tokio::time::timeout(HANG, async {
        while !closed.load(Ordering::Acquire) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the connection task never ended");
}

/// An HTTP/2 server on a local port that refuses its first `refuse` streams (RST_STREAM with
/// REFUSED_STREAM, nothing processed) and answers the others `200 ok`, counting the streams;
/// and a client for it.
async fn refusing_server(refuse: usize) -> (super::super::Client, Uri, Arc<AtomicUsize>) {
    use crate::providers::{HttpVersion, ProviderConfig};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let streams = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&streams);
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let seen = Arc::clone(&seen);
            tokio::spawn(async move {
                let mut connection = ::h2::server::handshake(tcp).await.unwrap();
                while let Some(Ok((_request, mut respond))) = connection.accept().await {
                    if seen.fetch_add(1, Ordering::SeqCst) < refuse {
                        respond.send_reset(::h2::Reason::REFUSED_STREAM);
                        continue;
                    }
                    let head = hyper::http::Response::new(());
                    let mut body = respond.send_response(head, false).unwrap();
                    body.send_data(Bytes::from_static(b"ok"), true).unwrap();
                }
            });
        }
    });
    let base = format!("http://{addr}/v1");
    let config = ProviderConfig::new(&base).http_version(HttpVersion::Http2PriorKnowledge);
    let uri: Uri = format!("{base}/chat").parse().unwrap();
    let client = super::super::Client::new(&uri, &config).unwrap();
    (client, uri, streams)
}

#[tokio::test]
async fn the_client_sends_a_refused_request_again_until_it_is_answered() {
    let (client, uri, streams) = refusing_server(2).await;
    let response = tokio::time::timeout(HANG, client.post(&uri, &HeaderMap::new(), &Bytes::new()))
        .await
        .expect("no hang")
        .expect("answered on the third stream");
    assert_eq!(response.status, StatusCode::OK);
    assert_eq!(response.text().await.unwrap(), "ok");
    assert_eq!(streams.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_server_that_refuses_every_stream_gets_a_bounded_number_of_tries() {
    let (client, uri, streams) = refusing_server(usize::MAX).await;
    let failure = tokio::time::timeout(HANG, client.post(&uri, &HeaderMap::new(), &Bytes::new()))
        .await
        .expect("no hang")
        .err()
        .expect("refused every time");
    assert_eq!(failure.kind, ErrorKind::Request);
    let tries = 1 + super::super::MAX_REFUSALS as usize;
    assert_eq!(streams.load(Ordering::SeqCst), tries);
}
