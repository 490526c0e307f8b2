//! The server speaks HTTP/1.1 and HTTP/2 cleartext with prior knowledge (h2c) on one port, and one
//! h2c connection carries hundreds of concurrent streams. The accept loop survives running out of
//! file descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use agentloop_testkit::{Fault, MockServer, Script, Turn, WireFormat};
use common::{FORMATS, assemble, first_request, path};
use futures::StreamExt;
use reqwest::Version;
use serde_json::json;
use tokio::time::timeout;

/// No single step of these tests may take longer than this.
const STEP: Duration = Duration::from_secs(20);

const CHAT_BODY: &str =
    r#"{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}"#;

fn h2_client() -> reqwest::Client {
    reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap()
}

fn h1_client() -> reqwest::Client {
    reqwest::Client::builder().http1_only().build().unwrap()
}

/// POSTs `body` as JSON; the response, once its headers arrived (within [`STEP`]).
async fn send_json(
    client: &reqwest::Client,
    url: &str,
    body: impl Into<reqwest::Body>,
) -> reqwest::Response {
    timeout(
        STEP,
        client
            .post(url)
            .header("content-type", "application/json")
            .body(body)
            .send(),
    )
    .await
    .expect("response headers in time")
    .unwrap()
}

/// POSTs `body` and reads the whole response: (HTTP version, status, content type, body).
async fn post_with(
    client: &reqwest::Client,
    url: &str,
    body: String,
) -> (Version, u16, String, String) {
    let resp = send_json(client, url, body).await;
    let version = resp.version();
    let status = resp.status().as_u16();
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_string();
    let text = timeout(STEP, resp.text())
        .await
        .expect("response body in time")
        .unwrap();
    (version, status, content_type, text)
}

#[tokio::test]
async fn h2c_prior_knowledge_streams_chat_completions() {
    let server = MockServer::start(Script::new(vec![
        Turn::text("Hello over h2c.").with_chunk_size(4),
    ]));
    let url = format!("{}/v1/chat/completions", server.base_url());
    let (version, status, content_type, body) =
        post_with(&h2_client(), &url, CHAT_BODY.to_string()).await;
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(status, 200, "{body}");
    assert_eq!(content_type, "text/event-stream");
    let a = assemble(WireFormat::OpenAiChat, &body);
    assert_eq!(a.text, "Hello over h2c.");
    assert_eq!(a.text_deltas, 4);
    assert!(a.terminal);
    assert!(body.ends_with("data: [DONE]\n\n"), "{body}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].turn, Some(0));
    assert!(server.violations().is_empty());
}

#[tokio::test]
async fn every_format_over_h2c_and_http1_on_the_same_port() {
    let server = MockServer::start(
        Script::new(vec![Turn::text("same port").with_chunk_size(3)]).with_repeat(true),
    );
    let base = server.base_url();
    for (client, want) in [
        (h2_client(), Version::HTTP_2),
        (h1_client(), Version::HTTP_11),
    ] {
        for format in FORMATS {
            let url = format!("{base}{}", path(format));
            let body = first_request(format, &format!("{want:?} {format:?}")).to_string();
            let (version, status, _, text) = post_with(&client, &url, body).await;
            assert_eq!(version, want, "{format:?}");
            assert_eq!(status, 200, "{format:?}: {text}");
            let a = assemble(format, &text);
            assert_eq!(a.text, "same port", "{want:?} {format:?}");
            assert!(a.terminal, "{want:?} {format:?}");
        }
    }
    // The plain HTTP/1.1 chat request of the task, too.
    let (version, status, _, text) = post_with(
        &h1_client(),
        &format!("{base}/v1/chat/completions"),
        CHAT_BODY.to_string(),
    )
    .await;
    assert_eq!((version, status), (Version::HTTP_11, 200));
    assert!(text.contains("data: [DONE]"));
    assert_eq!(server.request_count(), 7);
}

/// 300 streams on one h2c connection, each stalled after its first body bytes, are all open at
/// once: every one gets its bytes while none has ended. With a stream limit below 300 (hyper's
/// default is 200) the streams past the limit would wait for the first ones to end, forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_hundred_concurrent_streams_on_one_h2c_connection() {
    const STREAMS: usize = 300;
    // Turn 0 (a first request) stalls; turn 1 (after one assistant message) is the warm-up.
    let server = MockServer::builder(Script::new(vec![
        Turn::text("held").with_fault(Fault::StallAfterBytes(10)),
        Turn::text("warm"),
    ]))
    .record_requests(false)
    .start()
    .unwrap();
    let url = format!("{}/v1/chat/completions", server.base_url());
    let client = h2_client();
    // The warm-up opens the client's one connection and receives the server's SETTINGS, so the
    // burst below is multiplexed onto that connection within the announced stream limit.
    let warm = json!({"model": "m", "stream": true, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "again"},
    ]});
    let (version, _, _, text) = post_with(&client, &url, warm.to_string()).await;
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(assemble(WireFormat::OpenAiChat, &text).text, "warm");

    // Every burst reply stalls after its first bytes and never ends: each stream gets its bytes
    // while all the earlier ones are still open, so all of them are open at once.
    let mut tasks = Vec::with_capacity(STREAMS);
    for i in 0..STREAMS {
        let (client, url) = (client.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let body = json!({"model": "m", "stream": true,
                              "messages": [{"role": "user", "content": format!("c{i}")}]});
            let resp = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            assert_eq!(resp.version(), Version::HTTP_2);
            assert_eq!(resp.status().as_u16(), 200);
            let mut stream = resp.bytes_stream();
            let first = stream.next().await.unwrap().unwrap();
            assert!(!first.is_empty());
            stream
        }));
    }
    let held = timeout(STEP, futures::future::try_join_all(tasks))
        .await
        .expect("300 streams must be open at once")
        .unwrap();
    assert_eq!(held.len(), STREAMS);
    assert_eq!(server.request_count(), STREAMS as u64 + 1);
}

/// A reset fault resets only its h2 stream; the connection goes on serving. Held-open h2 streams
/// do not delay the server's shutdown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2_faults_reset_one_stream_and_shutdown_cuts_held_streams() {
    let text = "The quick brown fox jumps over the lazy dog.";
    // Sequential: a reset, a normal answer, then stalls for the rest.
    let server = MockServer::start(
        Script::sequential(vec![
            Turn::text(text)
                .with_chunk_size(4)
                .with_fault(Fault::ResetAfterBytes(60)),
            Turn::text(text)
                .with_chunk_size(4)
                .with_fault(Fault::StallAfterBytes(10)),
        ])
        .with_repeat(true),
    );
    let url = format!("{}/v1/chat/completions", server.base_url());
    let client = h2_client();

    // Queue entry 0: the reset.
    let resp = send_json(&client, &url, CHAT_BODY).await;
    assert_eq!(resp.version(), Version::HTTP_2);
    let mut stream = resp.bytes_stream();
    let mut got = 0usize;
    let errored = loop {
        match timeout(STEP, stream.next()).await.unwrap() {
            Some(Ok(chunk)) => got += chunk.len(),
            Some(Err(_)) => break true,
            None => break false,
        }
    };
    assert!(errored, "the reset stream must end in an error");
    assert!(got <= 60, "{got} bytes");

    // Entry 1: the normal answer, on the same client (and connection).
    let (version, status, _, body) = post_with(&client, &url, CHAT_BODY.to_string()).await;
    assert_eq!((version, status), (Version::HTTP_2, 200));
    assert_eq!(assemble(WireFormat::OpenAiChat, &body).text, text);

    // Entries 2 and 3 stall, and so does every later entry: hold 50 streams open.
    let mut held = Vec::new();
    for _ in 0..50 {
        let resp = send_json(&client, &url, CHAT_BODY).await;
        let mut stream = resp.bytes_stream();
        let first = timeout(STEP, stream.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert!(!first.is_empty());
        held.push(stream);
    }
    // A hang guard only: shutdown does not wait for the held streams.
    timeout(STEP, tokio::task::spawn_blocking(move || server.shutdown()))
        .await
        .expect("shutdown hung on the held streams")
        .unwrap();
    // The held streams end (with an error or EOF) rather than hanging.
    for mut s in held {
        while let Some(Ok(_)) = timeout(STEP, s.next()).await.unwrap() {}
    }
}

/// Reads the `listening on` line of a freshly spawned `agentloop-mock` and returns its base URL.
fn base_url_of(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.trim_end()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
        .to_string()
}

/// Kills the child when dropped, so a failed assertion does not leave a server running.
struct Kill(std::process::Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `SETTINGS_MAX_CONCURRENT_STREAMS` value a server at `addr` (host:port) announces in its
/// first SETTINGS frame on an h2c connection, read off the wire; `None` when it sends none.
async fn announced_max_streams(addr: &str) -> Option<u32> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    const SETTINGS: u8 = 0x4;
    const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The client preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0).
    tcp.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .await
        .unwrap();
    tcp.write_all(&[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0])
        .await
        .unwrap();
    loop {
        let mut header = [0u8; 9];
        tcp.read_exact(&mut header).await.unwrap();
        let len = u32::from_be_bytes([0, header[0], header[1], header[2]]) as usize;
        let mut payload = vec![0u8; len];
        tcp.read_exact(&mut payload).await.unwrap();
        let is_ack = header[4] & 0x1 != 0;
        if header[3] != SETTINGS || is_ack {
            continue;
        }
        return payload.chunks_exact(6).find_map(|entry| {
            let id = u16::from_be_bytes([entry[0], entry[1]]);
            (id == MAX_CONCURRENT_STREAMS)
                .then(|| u32::from_be_bytes([entry[2], entry[3], entry[4], entry[5]]))
        });
    }
}

/// `--h2-max-streams 1` reaches the server: it announces one concurrent stream per connection
/// (so a client opens a second stream only when the first has ended), and streams one after
/// another are served on that connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_h2_max_streams_flag_limits_concurrent_streams() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"{"mode": "sequential", "turns": [{"text": "a"}, {"text": "b"}]}"#,
    )
    .unwrap();
    let spawn = |limit: Option<&str>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_agentloop-mock"));
        cmd.arg("--script").arg(&script);
        if let Some(limit) = limit {
            cmd.args(["--h2-max-streams", limit]);
        }
        let mut child = Kill(cmd.stdout(std::process::Stdio::piped()).spawn().unwrap());
        let url = base_url_of(&mut child.0);
        (child, url)
    };
    let (_limited, url) = spawn(Some("1"));
    let addr = url.trim_start_matches("http://").to_string();
    let announced = timeout(STEP, announced_max_streams(&addr)).await.unwrap();
    assert_eq!(announced, Some(1));
    // Without the flag the limit is far above one (hundreds of streams, see above).
    let (_default, default_url) = spawn(None);
    let default_addr = default_url.trim_start_matches("http://").to_string();
    let announced = timeout(STEP, announced_max_streams(&default_addr))
        .await
        .unwrap();
    assert!(announced.is_none_or(|n| n >= 300), "{announced:?}");

    let url = format!("{url}/v1/chat/completions");
    let client = h2_client();
    for expected in ["a", "b"] {
        let (version, status, _, text) = post_with(&client, &url, CHAT_BODY.to_string()).await;
        assert_eq!((version, status), (Version::HTTP_2, 200));
        let reply = assemble(WireFormat::OpenAiChat, &text);
        assert_eq!(reply.text, expected);
        assert!(reply.terminal);
    }
}

/// With its descriptor limit exhausted by idle connections the server keeps accepting once
/// they close (accept errors such as `EMFILE` are retried, not fatal).
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_errors_do_not_stop_the_server() {
    const LIMIT: usize = 48;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"{"repeat": true, "turns": [{"text": "still here"}]}"#,
    )
    .unwrap();
    // The shell lowers its descriptor limit, then becomes the server (same pid).
    let mut child = Kill(
        std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("ulimit -n {LIMIT} && exec \"$0\" --script \"$1\""))
            .arg(env!("CARGO_BIN_EXE_agentloop-mock"))
            .arg(&script)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let base = base_url_of(&mut child.0);
    let addr = base.trim_start_matches("http://").to_string();
    let pid = child.0.id();
    // Descriptors below the limit in use; at LIMIT every accept fails with EMFILE. (Inherited
    // descriptors above the limit do not count.)
    let open_fds = || {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<usize>().ok())
                    .filter(|&fd| fd < LIMIT)
                    .count()
            })
            .unwrap_or(0)
    };

    // Twice as many idle connections as the server has descriptors.
    let mut idle = Vec::new();
    for _ in 0..2 * LIMIT {
        match tokio::net::TcpStream::connect(&addr).await {
            Ok(tcp) => idle.push(tcp),
            Err(e) => panic!(
                "connect failed after {} connections: {e}; server: {:?}",
                idle.len(),
                child.0.try_wait()
            ),
        }
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while open_fds() < LIMIT && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        open_fds(),
        LIMIT,
        "the server did not run out of descriptors"
    );
    // Let it hit EMFILE a few times.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(child.0.try_wait().unwrap().is_none(), "the server died");

    drop(idle);
    for (client, want) in [
        (h1_client(), Version::HTTP_11),
        (h2_client(), Version::HTTP_2),
    ] {
        let (version, status, _, text) = post_with(
            &client,
            &format!("{base}/v1/chat/completions"),
            CHAT_BODY.to_string(),
        )
        .await;
        assert_eq!((version, status), (want, 200));
        assert!(text.contains("still here"), "{text}");
    }
    assert!(child.0.try_wait().unwrap().is_none(), "the server died");
}
