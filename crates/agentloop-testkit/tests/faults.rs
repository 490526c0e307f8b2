//! Every fault kind in every wire format, and faults applying to successive attempts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use agentloop_testkit::{Fault, MockServer, Script, Turn, WireFormat};
use common::{
    FORMATS, Outcome, assemble, first_request, parse_sse, path, post, post_first,
    post_first_partial,
};
use serde_json::{Value, json};

fn turn() -> Turn {
    Turn::text("The quick brown fox jumps over the lazy dog.")
        .with_chunk_size(4)
        .with_usage(5, 6)
}

fn one_fault(fault: Fault) -> Script {
    Script::new(vec![turn().with_fault(fault)])
}

/// The full normal body for a format, to compare partial bodies with.
async fn normal_body(format: WireFormat) -> String {
    let server = MockServer::start(Script::new(vec![turn()]));
    post_first(&server, format, "x").await.body
}

#[tokio::test]
async fn status_fault_with_retry_after_then_success() {
    let script = Script::from_value(json!({"turns": [{
        "text": "finally",
        "faults": [
            {"status": 429, "headers": {"retry-after": "1"}},
            {"status": 503, "body": "{\"custom\": true}"}
        ]
    }]}))
    .unwrap();
    let server = MockServer::start(script);
    for format in FORMATS {
        let req = first_request(format, &format!("status {format:?}"));
        let r1 = post(&server.base_url(), path(format), &req).await;
        assert_eq!(r1.status, 429, "{format:?}");
        assert_eq!(r1.headers["retry-after"], "1");
        assert_eq!(r1.headers["content-type"], "application/json");
        let err: Value = serde_json::from_str(&r1.body).unwrap();
        if format == WireFormat::Anthropic {
            assert_eq!(err["type"], "error");
            assert_eq!(err["error"]["type"], "rate_limit_error");
        } else {
            assert_eq!(err["error"]["code"], "rate_limit_exceeded");
        }
        let r2 = post(&server.base_url(), path(format), &req).await;
        assert_eq!(r2.status, 503);
        assert_eq!(r2.body, "{\"custom\": true}");
        // Third attempt: faults used up, normal answer.
        let r3 = post(&server.base_url(), path(format), &req).await;
        assert_eq!(r3.status, 200);
        assert_eq!(assemble(format, &r3.body).text, "finally");
    }
    let attempts: Vec<_> = server.requests().iter().map(|r| r.attempt).collect();
    assert_eq!(attempts, [1, 2, 3, 1, 2, 3, 1, 2, 3].map(Some));
    assert!(matches!(
        server.requests()[0].fault,
        Some(Fault::Status { status: 429, .. })
    ));
}

#[tokio::test]
async fn reset_after_bytes_cuts_the_connection() {
    for format in FORMATS {
        let full = normal_body(format).await;
        let k = full.len() / 2;
        let server = MockServer::start(one_fault(Fault::ResetAfterBytes(k)));
        let p = post_first_partial(&server, format, "x", Duration::from_secs(10)).await;
        assert_eq!(
            p.outcome,
            Outcome::Error,
            "{format:?}: the client must see an error"
        );
        assert_eq!(p.bytes.len(), k, "{format:?}: exactly K bytes arrive first");
        // The bytes are a prefix of the normal body with the creation timestamp aside.
        assert_eq!(
            strip_times(std::str::from_utf8(&p.bytes).unwrap()),
            strip_times(&full)[..strip_times(std::str::from_utf8(&p.bytes).unwrap()).len()]
        );
        assert!(!assemble_partial(format, &p.bytes).terminal);
        // The second attempt is served normally.
        let ok = post_first(&server, format, "x").await;
        assert!(assemble(format, &ok.body).terminal);
    }
}

#[tokio::test]
async fn stall_after_bytes_makes_the_client_time_out() {
    for format in FORMATS {
        let server = MockServer::start(one_fault(Fault::StallAfterBytes(100)));
        let p = post_first_partial(&server, format, "x", Duration::from_millis(300)).await;
        // Only the client's own timeout ends a stalled stream.
        assert_eq!(p.outcome, Outcome::TimedOut, "{format:?}");
        assert_eq!(p.bytes.len(), 100, "{format:?}");
        // Shutting down with a stalled stream open does not hang (a minute is a hang guard).
        let (done, finished) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            server.shutdown();
            let _ = done.send(());
        });
        finished
            .recv_timeout(Duration::from_secs(60))
            .expect("shutdown hung on a stalled stream");
    }
}

#[tokio::test]
async fn malformed_after_bytes_inserts_a_garbage_event_and_continues() {
    for format in FORMATS {
        let server = MockServer::start(one_fault(Fault::MalformedAfterBytes(200)));
        let reply = post_first(&server, format, "x").await;
        assert_eq!(reply.status, 200);
        let events = parse_sse(&reply.body);
        let bad: Vec<_> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.data != "[DONE]" && serde_json::from_str::<Value>(&e.data).is_err())
            .collect();
        assert_eq!(bad.len(), 1, "{format:?}: exactly one garbage event");
        let (i, garbage) = bad[0];
        assert!(i > 0, "K = 200 is past the first event");
        // It sits at an event boundary at or after byte 200.
        let offset = reply.body.find(&format!("data: {}", garbage.data)).unwrap();
        let event_start = reply.body[..offset].rfind("\n\n").unwrap() + 2;
        assert!(event_start >= 200, "{format:?}: inserted at {event_start}");
        match format {
            WireFormat::OpenAiChat => assert_eq!(garbage.event, None),
            WireFormat::OpenAiResponses => {
                assert_eq!(garbage.event.as_deref(), Some("response.output_text.delta"))
            }
            _ => assert_eq!(garbage.event.as_deref(), Some("content_block_delta")),
        }
        // The rest of the stream follows, terminal included.
        let frame = match &garbage.event {
            Some(name) => format!("event: {name}\ndata: {}\n\n", garbage.data),
            None => format!("data: {}\n\n", garbage.data),
        };
        assert!(reply.body.contains(&frame));
        let rest = reply.body.replacen(&frame, "", 1);
        let a = assemble(format, &rest);
        assert!(a.terminal, "{format:?}");
        assert_eq!(a.text, "The quick brown fox jumps over the lazy dog.");
    }
}

#[tokio::test]
async fn eof_without_terminal_ends_cleanly_without_the_terminal_event() {
    for format in FORMATS {
        let server = MockServer::start(one_fault(Fault::EofWithoutTerminal));
        let p = post_first_partial(&server, format, "x", Duration::from_secs(10)).await;
        assert_eq!(p.outcome, Outcome::Clean, "{format:?}");
        let body = String::from_utf8(p.bytes).unwrap();
        let a = assemble(format, &body);
        assert!(!a.terminal, "{format:?}");
        assert_eq!(a.text, "The quick brown fox jumps over the lazy dog.");
        match format {
            WireFormat::OpenAiChat => {
                assert!(!body.contains("[DONE]"));
                assert!(body.contains(r#""finish_reason":"stop""#));
            }
            WireFormat::OpenAiResponses => {
                assert!(!body.contains("response.completed"));
                assert!(body.contains("response.output_item.done"));
            }
            _ => {
                assert!(!body.contains("message_stop"));
                assert!(body.contains("message_delta"));
            }
        }
        assert!(body.ends_with("\n\n"), "a clean end after a whole event");
    }
}

#[tokio::test]
async fn sequential_mode_faults_take_queue_entries() {
    let script = Script::sequential(vec![
        Turn::text("one").with_fault(Fault::status(500)),
        Turn::text("two"),
    ]);
    let server = MockServer::start(script);
    let f = WireFormat::OpenAiChat;
    let statuses = [
        post_first(&server, f, "a").await,
        post_first(&server, f, "b").await,
        post_first(&server, f, "c").await,
        post_first(&server, f, "d").await,
    ];
    assert_eq!(
        statuses.iter().map(|r| r.status).collect::<Vec<_>>(),
        [500, 200, 200, 500]
    );
    assert_eq!(assemble(f, &statuses[1].body).text, "one");
    assert_eq!(assemble(f, &statuses[2].body).text, "two");
    let err: Value = serde_json::from_str(&statuses[3].body).unwrap();
    assert_eq!(err["error"]["code"], "script_exhausted");
}

fn assemble_partial(format: WireFormat, bytes: &[u8]) -> common::Assembled {
    // Keep only complete events.
    let text = String::from_utf8_lossy(bytes);
    let end = text.rfind("\n\n").map_or(0, |i| i + 2);
    let complete = &text[..end];
    // Partial events may be cut JSON; the assemblers only see complete ones.
    assemble(format, complete)
}

/// Replaces `"created":N` / `"created_at":N` values so two renderings compare equal.
fn strip_times(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("\"created") {
        let (head, tail) = rest.split_at(i);
        out.push_str(head);
        let colon = tail.find(':').unwrap_or(tail.len() - 1);
        out.push_str(&tail[..=colon]);
        let after = &tail[colon + 1..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        out.push('0');
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}
