//! Many delayed streams are served at the same time, not one after another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use agentloop_testkit::{MockServer, Script, Turn};
use common::{FORMATS, Outcome, assemble, first_request, path, post, post_partial};
use tokio::time::timeout;

/// A hang guard for each step: far longer than any step needs.
const STEP: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_streams_overlap() {
    const STREAMS: u64 = 200;
    // Each reply is held a minute before its first byte: all of them reach the server only if
    // it serves them at the same time (one after another, the second would wait for the first).
    let held = MockServer::start(Script::new(vec![
        Turn::text("0123456789").with_delays(60_000, 0),
    ]));
    let base = held.base_url();
    let client = common::client();
    let tasks: Vec<_> = (0..STREAMS)
        .map(|i| {
            let (base, client) = (base.clone(), client.clone());
            tokio::spawn(async move {
                let format = FORMATS[i as usize % 3];
                client
                    .post(format!("{base}{}", path(format)))
                    .header("content-type", "application/json")
                    .body(first_request(format, &format!("c{i}")).to_string())
                    .send()
                    .await
            })
        })
        .collect();
    timeout(STEP, async {
        while held.request_count() < STREAMS {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap_or_else(|_| {
        panic!(
            "only {} of {STREAMS} held streams reached the server",
            held.request_count()
        )
    });
    // The delay is honoured: a client that gives up after 300 ms without a byte times out.
    let f = FORMATS[0];
    let p = post_partial(
        &base,
        path(f),
        &first_request(f, "x"),
        Duration::from_millis(300),
    )
    .await;
    assert_eq!(p.outcome, Outcome::TimedOut);
    assert!(
        p.bytes.is_empty(),
        "{} bytes before the delay",
        p.bytes.len()
    );
    tasks.iter().for_each(tokio::task::JoinHandle::abort);

    // Delayed streams that do end (300 ms to the first byte, then 10 events 20 ms apart), all at
    // once: each is whole.
    let server = MockServer::start(Script::new(vec![
        Turn::text("0123456789")
            .with_chunk_size(1)
            .with_delays(300, 20),
    ]));
    let base = server.base_url();
    let tasks: Vec<_> = (0..STREAMS)
        .map(|i| {
            let (base, client) = (base.clone(), client.clone());
            tokio::spawn(async move {
                let format = FORMATS[i as usize % 3];
                let resp = client
                    .post(format!("{base}{}", path(format)))
                    .header("content-type", "application/json")
                    .body(first_request(format, &format!("c{i}")).to_string())
                    .send()
                    .await
                    .unwrap();
                let body = resp.text().await.unwrap();
                let a = assemble(format, &body);
                assert_eq!(a.text, "0123456789");
                assert!(a.terminal);
            })
        })
        .collect();
    timeout(STEP, futures::future::try_join_all(tasks))
        .await
        .expect("the delayed streams did not finish")
        .unwrap();
    assert_eq!(server.request_count(), STREAMS);
    // Sanity: a single stream still works after the burst.
    let r = post(&base, path(f), &first_request(f, "after")).await;
    assert_eq!(assemble(f, &r.body).text, "0123456789");
}

/// The issue's scale: 10,000 streams open at once against the `agentloop-mock` binary (a separate
/// process, so client and server each need ~10k descriptors). Ignored by default (it needs
/// `ulimit -n` above ~10,100 and takes a few seconds); run it with
/// `cargo test -p agentloop-testkit --release --test concurrency -- --ignored`.
/// `MOCK_STREAMS` overrides the count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a raised descriptor limit; run explicitly"]
async fn ten_thousand_concurrent_streams() {
    use std::io::BufRead;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let streams: usize = std::env::var("MOCK_STREAMS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10_000);
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"[{"text": "0123456789", "chunk_size": 2, "first_byte_delay_ms": 2000, "chunk_delay_ms": 100}]"#,
    )
    .unwrap();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agentloop-mock"))
        .arg("--script")
        .arg(&script)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .trim_start_matches("listening on http://")
        .to_string();
    let body = first_request(agentloop_testkit::WireFormat::OpenAiChat, "x").to_string();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let started = Instant::now();
    let open = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(streams);
    for _ in 0..streams {
        let (addr, request) = (addr.clone(), request.clone());
        let (open, peak) = (open.clone(), peak.clone());
        tasks.push(tokio::spawn(async move {
            let mut tcp = loop {
                match tokio::net::TcpStream::connect(&addr).await {
                    Ok(s) => break s,
                    Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            };
            tcp.write_all(request.as_bytes()).await.unwrap();
            let now = open.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
            peak.fetch_max(now, std::sync::atomic::Ordering::SeqCst);
            let mut out = Vec::new();
            tcp.read_to_end(&mut out).await.unwrap();
            open.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.1 200"), "{text}");
            assert!(text.contains("data: [DONE]"));
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let elapsed = started.elapsed();
    let peak = peak.load(std::sync::atomic::Ordering::SeqCst);
    eprintln!("{streams} streams in {elapsed:?}, peak {peak} open at once");
    let _ = child.kill();
    let _ = child.wait();
    // Each stream takes ~2.7 s; all of them at once must not take much longer than a few.
    assert!(
        peak >= streams * 9 / 10,
        "only {peak} streams were open at once"
    );
}
