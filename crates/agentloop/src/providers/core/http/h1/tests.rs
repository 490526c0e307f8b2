//! The HTTP/1.1 codec: request heads, response heads, body framing (every split of the bytes
//! across reads), and whole exchanges with hostile servers over real sockets.
#![allow(clippy::unwrap_used)]

use super::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

fn head_of(text: &str) -> Result<Option<(usize, Head)>, HttpError> {
    parse_head(text.as_bytes(), &Method::POST)
}

fn body_of(head: &str) -> Body {
    head_of(head).unwrap().unwrap().1.body
}

/// The ways `wire` can arrive: in one read, split in two at every position, and one byte per
/// read.
fn ways_to_read(wire: &[u8]) -> Vec<Vec<&[u8]>> {
    let mut ways = vec![vec![wire]];
    ways.extend((0..=wire.len()).map(|at| vec![&wire[..at], &wire[at..]]));
    ways.push(wire.chunks(1).collect());
    ways
}

/// Feeds `pieces` to a body one read at a time: the bytes it yielded, whether it ended before
/// the end of the stream, and what was left in the buffer; or its error (an end of the stream
/// before the body's end included).
fn feed(mut body: Body, pieces: &[&[u8]]) -> Result<(Vec<u8>, BytesMut), HttpError> {
    let mut buf = BytesMut::new();
    let mut out = Vec::new();
    let mut pieces = pieces.iter();
    loop {
        match body.decode(&mut buf)? {
            Decoded::Data(data) => out.extend_from_slice(&data),
            Decoded::End => return Ok((out, buf)),
            Decoded::More => match pieces.next() {
                Some(piece) => buf.extend_from_slice(piece),
                None => {
                    body.at_eof()?;
                    return Ok((out, buf));
                }
            },
        }
    }
}

const CHUNKED: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

/// Valid bodies: response head, wire bytes, the body they carry.
const VALID: &[(&str, &str, &str)] = &[
    (CHUNKED, "5\r\nhello\r\n0\r\n\r\n", "hello"),
    (
        CHUNKED,
        "5;name=value\r\nhello\r\n6 ; ext=\"q;x\"\r\n world\r\n0\r\nX-Trailer: a\r\nOther: b\r\n\r\n",
        "hello world",
    ),
    (
        CHUNKED,
        "A\r\n0123456789\r\na\r\nabcdefghij\r\n0\r\n\r\n",
        "0123456789abcdefghij",
    ),
    (CHUNKED, "5\nhello\n0\n\n", "hello"),
    (CHUNKED, "0000\r\n\r\n", ""),
    (
        "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n",
        "hello world",
        "hello world",
    ),
    (
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        "3\r\nabc\r\n0\r\n\r\n",
        "abc",
    ),
];

#[test]
fn valid_bodies_decode_whatever_the_reads_and_end_where_the_framing_says() {
    for (head, wire, expected) in VALID {
        for reads in ways_to_read(wire.as_bytes()) {
            let (data, rest) = feed(body_of(head), &reads).unwrap();
            assert_eq!(data, expected.as_bytes(), "{reads:?}");
            assert!(rest.is_empty(), "{reads:?}");
        }
    }
}

#[test]
fn bytes_past_the_end_of_a_body_stay_unread() {
    let head = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n";
    let (data, rest) = feed(body_of(head), &[b"helloEXTRA"]).unwrap();
    assert_eq!(data, b"hello");
    assert_eq!(&rest[..], b"EXTRA");
    let (data, rest) = feed(body_of(CHUNKED), &[b"1\r\nx\r\n0\r\n\r\nHTTP/1.1"]).unwrap();
    assert_eq!(data, b"x");
    assert_eq!(&rest[..], b"HTTP/1.1");
}

#[test]
fn a_body_delimited_by_the_close_ends_with_the_stream() {
    let body = body_of("HTTP/1.1 200 OK\r\n\r\n");
    assert!(!body.keep_alive);
    let (data, _) = feed(body, &[b"all ", b"of it"]).unwrap();
    assert_eq!(data, b"all of it");
}

/// Malformed bodies: response head, wire bytes, a piece of the error.
const MALFORMED: &[(&str, &str, &str)] = &[
    (
        CHUNKED,
        "zz\r\nhello\r\n0\r\n\r\n",
        "not a hexadecimal number",
    ),
    (CHUNKED, "-5\r\nhello\r\n", "not a hexadecimal number"),
    (CHUNKED, "5 x\r\nhello\r\n", "not a hexadecimal number"),
    (CHUNKED, "\r\nhello\r\n", "not a hexadecimal number"),
    (CHUNKED, "5\r\nhelloXX0\r\n\r\n", "did not end with CRLF"),
    (CHUNKED, "5\r\nhello\rX", "did not end with CRLF"),
    (CHUNKED, "1000000000000000\r\n", "too large"),
    (CHUNKED, "5\r\nhel", "chunked body had not ended"),
    (
        CHUNKED,
        "5\r\nhello\r\n0\r\nX-Trailer: a\r\n",
        "chunked body had not ended",
    ),
    (CHUNKED, "", "chunked body had not ended"),
    (
        "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n",
        "hello",
        "5 bytes of its Content-Length missing",
    ),
];

#[test]
fn malformed_or_cut_bodies_are_clear_errors_whatever_the_reads() {
    for (head, wire, expected) in MALFORMED {
        for reads in ways_to_read(wire.as_bytes()) {
            let error = feed(body_of(head), &reads).unwrap_err();
            assert!(error.to_string().contains(expected), "{reads:?}: {error}");
        }
    }
}

#[test]
fn endless_chunk_lines_and_trailers_are_bounded() {
    let mut line = b"5;".to_vec();
    line.resize(MAX_CHUNK_LINE + 10, b'x');
    let error = feed(body_of(CHUNKED), &[&line]).unwrap_err();
    assert!(error.to_string().contains("too long"), "{error}");
    line.extend_from_slice(b"\r\nhello\r\n0\r\n\r\n");
    let error = feed(body_of(CHUNKED), &[&line]).unwrap_err();
    assert!(error.to_string().contains("too long"), "{error}");
    let mut trailers = b"0\r\n".to_vec();
    while trailers.len() <= MAX_TRAILERS {
        trailers
            .extend_from_slice(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n");
    }
    let pieces: Vec<&[u8]> = trailers.chunks(100).collect();
    let error = feed(body_of(CHUNKED), &pieces).unwrap_err();
    assert!(error.to_string().contains("trailer section"), "{error}");
}

#[test]
fn response_heads_give_the_status_headers_framing_and_keep_alive() {
    let text = "HTTP/1.1 429 Too Many\r\nRetry-After: 3\r\nContent-Length: 2\r\n\r\nok";
    let (len, head) = head_of(text).unwrap().unwrap();
    assert_eq!(len, text.len() - 2);
    assert_eq!(head.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(head.headers["retry-after"], "3");
    assert!(matches!(head.body.framing, Framing::Length(2)));
    assert!(head.body.keep_alive);
    // (head, keep-alive, framing is chunked, body is empty)
    let cases: &[(&str, bool, bool, bool)] = &[
        (
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n",
            false,
            false,
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 1\r\n\r\n",
            false,
            false,
            false,
        ),
        (
            "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n",
            false,
            false,
            false,
        ),
        (
            "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\n",
            true,
            false,
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 9\r\n\r\n",
            false,
            true,
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n",
            true,
            true,
            false,
        ),
        (
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            false,
            false,
            false,
        ),
        (
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            true,
            false,
            true,
        ),
        ("HTTP/1.1 304 Not Modified\r\n\r\n", true, false, true),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            true,
            false,
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n",
            true,
            false,
            false,
        ),
    ];
    for (text, keep_alive, chunked, empty) in cases {
        let body = body_of(text);
        assert_eq!(body.keep_alive, *keep_alive, "{text}");
        assert_eq!(
            matches!(body.framing, Framing::Chunked(_)),
            *chunked,
            "{text}"
        );
        assert_eq!(body.is_done(), *empty, "{text}");
    }
}

#[test]
fn incomplete_heads_wait_and_malformed_ones_are_clear_errors() {
    let full = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
    for at in 0..full.len() {
        assert!(head_of(&full[..at]).unwrap().is_none(), "{at}");
    }
    let mut many = "HTTP/1.1 200 OK\r\n".to_owned();
    for i in 0..=MAX_HEADERS {
        many.push_str(&format!("X-{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let cases: &[(&str, &str)] = &[
        ("HTTP/1.1 abc OK\r\n\r\n", "malformed response head"),
        (
            "HTTP/1.1 200 OK\r\nBad Header\r\n\r\n",
            "malformed response head",
        ),
        ("SSH-2.0-OpenSSH_9.6\r\n\r\n", "malformed response head"),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\n",
            "conflicting Content-Lengths",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
            "conflicting",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
            "invalid Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: +5\r\n\r\n",
            "invalid Content-Length",
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "invalid",
        ),
        (
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n",
            "switched protocols",
        ),
        (&many, "more than 100 header fields"),
    ];
    for (text, expected) in cases {
        let error = head_of(text)
            .err()
            .unwrap_or_else(|| panic!("{text}: no error"));
        assert!(error.to_string().contains(expected), "{text}: {error}");
        assert!(!error.is_config() && !error.is_redirect_loop());
    }
}

#[test]
fn request_heads_carry_the_host_the_length_and_the_proxy_credentials() {
    let host = HeaderValue::from_static("api.example:8080");
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer k"));
    let head = encode_head(&Method::POST, "/v1/chat?x=1", &host, &headers, None, 17);
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "POST /v1/chat?x=1 HTTP/1.1\r\nhost: api.example:8080\r\ncontent-type: \
         application/json\r\nauthorization: Bearer k\r\ncontent-length: 17\r\n\r\n"
    );
    let name = header::PROXY_AUTHORIZATION;
    let auth = HeaderValue::from_static("Basic eA==");
    headers.insert(header::HOST, HeaderValue::from_static("given"));
    headers.insert(
        header::PROXY_AUTHORIZATION,
        HeaderValue::from_static("stale"),
    );
    let head = encode_head(
        &Method::GET,
        "http://a/b",
        &host,
        &headers,
        Some((&name, &auth)),
        0,
    );
    let head = String::from_utf8(head).unwrap();
    assert!(head.starts_with("GET http://a/b HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains("\r\nhost: given\r\n") && !head.contains("api.example"),
        "{head}"
    );
    assert!(
        head.ends_with("proxy-authorization: Basic eA==\r\n\r\n"),
        "{head}"
    );
    assert!(
        !head.contains("stale") && !head.contains("content-length"),
        "{head}"
    );
    let head = encode_head(&Method::POST, "/", &host, &HeaderMap::new(), None, 0);
    assert!(
        String::from_utf8(head)
            .unwrap()
            .contains("content-length: 0\r\n")
    );
    for n in [0, 7, 10, 1234567890, usize::MAX] {
        let mut digits = [0u8; 20];
        assert_eq!(decimal(n, &mut digits), n.to_string().as_bytes());
    }
}

/// A connection to a server socket of the test's own.
async fn pair() -> (Connection, TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (client, server) = tokio::join!(TcpStream::connect(addr), listener.accept());
    (
        Connection::new(Io::Plain(client.unwrap())),
        server.unwrap().0,
    )
}

/// Reads one request (head and Content-Length body) off `server`.
async fn read_request(server: &mut TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .map_or(0, |v| v.trim().parse().unwrap());
            if seen.len() >= end + 4 + length {
                return text;
            }
        }
        let n = server.read(&mut buf).await.unwrap();
        assert!(n > 0, "the client closed mid-request");
        seen.extend_from_slice(&buf[..n]);
    }
}

async fn post(connection: &mut Connection) -> Result<Head, SendError> {
    let host = HeaderValue::from_static("test");
    let head = encode_head(&Method::POST, "/v1", &host, &HeaderMap::new(), None, 4);
    connection.send(&Method::POST, &head, b"body").await
}

async fn body_text(connection: &mut Connection, head: &mut Head) -> Result<String, HttpError> {
    let mut text = Vec::new();
    while let Some(data) = connection.chunk(&mut head.body).await? {
        text.extend_from_slice(&data);
    }
    Ok(String::from_utf8(text).unwrap())
}

#[tokio::test]
async fn a_kept_alive_connection_carries_requests_in_turn_and_releases_its_buffer() {
    let (mut connection, mut server) = pair().await;
    let server = tokio::spawn(async move {
        for _ in 0..2 {
            let request = read_request(&mut server).await;
            assert!(
                request.starts_with("POST /v1 HTTP/1.1\r\nhost: test\r\n"),
                "{request}"
            );
            assert!(request.ends_with("\r\n\r\nbody"), "{request}");
            for piece in [
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-",
                "Encoding: chunked\r\n\r\n6\r\nhello \r",
                "\n5\r\nworld\r\n0\r\n",
                "\r\n",
            ] {
                server.write_all(piece.as_bytes()).await.unwrap();
                server.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
        }
        server
    });
    for _ in 0..2 {
        let mut head = post(&mut connection).await.ok().unwrap();
        assert_eq!(head.status, StatusCode::OK);
        assert!(!connection.is_reusable());
        assert_eq!(
            body_text(&mut connection, &mut head).await.unwrap(),
            "hello world"
        );
        assert!(connection.is_reusable());
        assert_eq!(
            connection.buf.capacity(),
            0,
            "the idle connection holds no buffer"
        );
        // Read to its end: further reads say so.
        assert!(connection.chunk(&mut head.body).await.unwrap().is_none());
    }
    let server = server.await.unwrap();
    assert!(connection.is_open());
    drop(server);
    connection.io.readable().await.unwrap();
    assert!(!connection.is_open(), "the server's close is seen");
}

#[tokio::test]
async fn a_response_not_read_to_its_end_or_closing_leaves_the_connection_unusable() {
    let cases: &[(&str, bool)] = &[
        ("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello", false),
        (
            "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\nhello",
            true,
        ),
        (
            "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA",
            true,
        ),
    ];
    for (response, read_all) in cases {
        let (mut connection, mut server) = pair().await;
        let shown = response.to_string();
        let response = shown.clone();
        let server = tokio::spawn(async move {
            read_request(&mut server).await;
            server.write_all(response.as_bytes()).await.unwrap();
            server
        });
        let mut head = post(&mut connection).await.ok().unwrap();
        let first = connection.chunk(&mut head.body).await.unwrap().unwrap();
        assert_eq!(&first[..], b"hello");
        if *read_all {
            assert!(connection.chunk(&mut head.body).await.unwrap().is_none());
        }
        assert!(!connection.is_reusable(), "{shown:?}");
        drop(server.await.unwrap());
    }
}

#[tokio::test]
async fn hostile_servers_get_clear_errors_not_hangs() {
    // A server closing mid-body.
    let (mut connection, mut server) = pair().await;
    tokio::spawn(async move {
        read_request(&mut server).await;
        let text = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nhalf";
        server.write_all(text.as_bytes()).await.unwrap();
    });
    let mut head = post(&mut connection).await.ok().unwrap();
    let error = body_text(&mut connection, &mut head).await.unwrap_err();
    assert!(
        error
            .to_string()
            .contains("before the end of the response body"),
        "{error}"
    );
    assert!(!connection.is_reusable());

    // An endless head.
    let (mut connection, mut server) = pair().await;
    let writer = tokio::spawn(async move {
        read_request(&mut server).await;
        server
            .write_all(b"HTTP/1.1 200 OK\r\nX-Filler: ")
            .await
            .unwrap();
        // One header value that never ends.
        let line = "a".repeat(1000);
        // Until the client gives up and closes.
        while server.write_all(line.as_bytes()).await.is_ok() {}
    });
    let failure = post(&mut connection).await.err().unwrap();
    assert!(
        failure.error.to_string().contains("larger than 408 KiB"),
        "{}",
        failure.error
    );
    assert!(!failure.unanswered);
    drop(connection);
    writer.await.unwrap();

    // A head of 40 KiB is read whole (the buffer grows to fit it).
    let (mut connection, mut server) = pair().await;
    tokio::spawn(async move {
        read_request(&mut server).await;
        let mut text = "HTTP/1.1 200 OK\r\n".to_owned();
        for i in 0..40 {
            text.push_str(&format!("X-{i}: {}\r\n", "b".repeat(1000)));
        }
        text.push_str("Content-Length: 2\r\n\r\nok");
        server.write_all(text.as_bytes()).await.unwrap();
        server
    });
    let mut head = post(&mut connection).await.ok().unwrap();
    assert_eq!(head.headers.len(), 41);
    assert_eq!(body_text(&mut connection, &mut head).await.unwrap(), "ok");
}

#[tokio::test]
async fn a_request_the_server_never_answered_can_go_on_another_connection() {
    // Closed without a byte: unanswered.
    let (mut connection, mut server) = pair().await;
    tokio::spawn(async move {
        read_request(&mut server).await;
    });
    let failure = post(&mut connection).await.err().unwrap();
    assert!(failure.unanswered, "{}", failure.error);
    // Closed after part of a head: answered, not to be sent again.
    let (mut connection, mut server) = pair().await;
    tokio::spawn(async move {
        read_request(&mut server).await;
        server.write_all(b"HTTP/1.1 200").await.unwrap();
    });
    let failure = post(&mut connection).await.err().unwrap();
    assert!(!failure.unanswered);
    assert!(
        failure
            .error
            .to_string()
            .contains("before the end of the response head")
    );
}
