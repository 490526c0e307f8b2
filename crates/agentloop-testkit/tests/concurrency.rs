//! Many delayed streams are served at the same time, not one after another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use agentloop_testkit::{MockServer, Script, Turn};
use common::{FORMATS, assemble, first_request, path, post};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delayed_streams_overlap() {
    const STREAMS: usize = 200;
    // 300 ms to the first byte, then 10 events 20 ms apart: ~0.5 s per stream, 100 s if serial.
    let server = MockServer::start(Script::new(vec![
        Turn::text("0123456789")
            .with_chunk_size(1)
            .with_delays(300, 20),
    ]));
    let base = server.base_url();
    let client = common::client();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..STREAMS {
        let base = base.clone();
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let format = FORMATS[i % 3];
            let t = Instant::now();
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
            t.elapsed()
        }));
    }
    for t in tasks {
        let one = t.await.unwrap();
        assert!(
            one >= Duration::from_millis(300),
            "the first-byte delay is honoured"
        );
    }
    let total = started.elapsed();
    assert!(
        total < Duration::from_secs(20),
        "{STREAMS} streams took {total:?}: they did not overlap"
    );
    assert_eq!(server.request_count(), STREAMS as u64);
    // Sanity: a single stream still works after the burst.
    let f = FORMATS[0];
    let r = post(&base, path(f), &first_request(f, "after")).await;
    assert_eq!(assemble(f, &r.body).text, "0123456789");
}
