//! Which turn answers a request: by conversation position (independent concurrent
//! conversations), sequential queue, repeat, and an exhausted script.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use agentloop_testkit::{Fault, MockServer, Script, ToolCall, Turn, WireFormat};
use common::{FORMATS, assemble, continue_request, first_request, path, post, post_first};
use serde_json::json;

fn three_turns() -> Script {
    Script::new(vec![
        Turn::text("first").with_tool_call(ToolCall::new("c1", "step", json!({"n": 1}))),
        Turn::text("second").with_tool_call(ToolCall::new("c2", "step", json!({"n": 2}))),
        Turn::text("third"),
    ])
}

#[tokio::test]
async fn interleaved_conversations_play_the_script_independently() {
    let server = MockServer::start(three_turns());
    for format in FORMATS {
        let mut a = first_request(format, "conversation A");
        let mut b = first_request(format, "conversation B");
        let mut texts = Vec::new();
        // A0, B0, A1, B1, A2, B2: each conversation sees first/second/third in order.
        for _ in 0..3 {
            for req in [&mut a, &mut b] {
                let reply = post(&server.base_url(), path(format), req).await;
                assert_eq!(reply.status, 200, "{format:?}: {}", reply.body);
                let m = assemble(format, &reply.body);
                texts.push(m.text.clone());
                continue_request(format, req, &m);
            }
        }
        assert_eq!(
            texts,
            ["first", "first", "second", "second", "third", "third"],
            "{format:?}"
        );
        // A fourth request in conversation A: script exhausted (repeat is off).
        let reply = post(&server.base_url(), path(format), &a).await;
        assert_eq!(reply.status, 500);
        assert!(reply.body.contains("script_exhausted"), "{}", reply.body);
    }
    assert!(server.violations().is_empty());
}

#[tokio::test]
async fn attempts_are_counted_per_conversation_and_turn() {
    let script = Script::new(vec![
        Turn::text("t0"),
        Turn::text("t1").with_fault(Fault::status(529)),
    ]);
    let server = MockServer::start(script);
    let f = WireFormat::Anthropic;
    let mut a = first_request(f, "alpha");
    let mut b = first_request(f, "beta");
    for req in [&mut a, &mut b] {
        let m = assemble(f, &post(&server.base_url(), path(f), req).await.body);
        continue_request(f, req, &m);
    }
    // Turn 1 of each conversation fails once, independently.
    assert_eq!(post(&server.base_url(), path(f), &a).await.status, 529);
    assert_eq!(post(&server.base_url(), path(f), &b).await.status, 529);
    let ra = post(&server.base_url(), path(f), &a).await;
    assert_eq!(assemble(f, &ra.body).text, "t1");
    let rb = post(&server.base_url(), path(f), &b).await;
    assert_eq!(assemble(f, &rb.body).text, "t1");
    let attempts: Vec<_> = server
        .requests()
        .iter()
        .filter(|r| r.turn == Some(1))
        .map(|r| r.attempt.unwrap())
        .collect();
    assert_eq!(attempts, [1, 1, 2, 2]);
}

#[tokio::test]
async fn sequential_mode_ignores_history() {
    let server = MockServer::start(Script::sequential(vec![
        Turn::text("one"),
        Turn::text("two"),
        Turn::text("three"),
    ]));
    let mut got = Vec::new();
    for (i, format) in FORMATS.iter().enumerate() {
        // Every request is a fresh conversation; sequential mode still advances.
        let reply = post(
            &server.base_url(),
            path(*format),
            &first_request(*format, &format!("q{i}")),
        )
        .await;
        got.push(assemble(*format, &reply.body).text);
    }
    assert_eq!(got, ["one", "two", "three"]);
    let f = WireFormat::OpenAiChat;
    let reply = post_first(&server, f, "more").await;
    assert_eq!(reply.status, 500);
}

#[tokio::test]
async fn repeat_wraps_around_in_both_modes() {
    let f = WireFormat::OpenAiResponses;
    let seq = MockServer::start(
        Script::sequential(vec![Turn::text("a"), Turn::text("b")]).with_repeat(true),
    );
    let mut got = Vec::new();
    for _ in 0..5 {
        let r = post_first(&seq, f, "x").await;
        got.push(assemble(f, &r.body).text);
    }
    assert_eq!(got, ["a", "b", "a", "b", "a"]);

    let pos = MockServer::start(
        Script::new(vec![Turn::text("a").with_tool_call(ToolCall::new(
            "k",
            "f",
            json!({}),
        ))])
        .with_repeat(true),
    );
    let mut req = first_request(f, "x");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let r = post(&pos.base_url(), path(f), &req).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let mut m = assemble(f, &r.body);
        // Same scripted id every lap: make it unique so the history stays valid.
        let lap = ids.len();
        m.tool_calls[0].0 = format!("k{lap}");
        ids.push(m.text.clone());
        continue_request(f, &mut req, &m);
    }
    assert_eq!(ids, ["a", "a", "a"]);
    let turns: Vec<_> = pos.requests().iter().map(|r| r.turn).collect();
    assert_eq!(turns, [Some(0), Some(0), Some(0)]);
}

#[tokio::test]
async fn many_concurrent_conversations_share_one_script() {
    let server = MockServer::start(three_turns());
    let base = server.base_url();
    let mut tasks = Vec::new();
    for i in 0..30 {
        let base = base.clone();
        let format = FORMATS[i % 3];
        tasks.push(tokio::spawn(async move {
            let mut req = first_request(format, &format!("conversation {i}"));
            let mut texts = Vec::new();
            for _ in 0..3 {
                let r = post(&base, path(format), &req).await;
                assert_eq!(r.status, 200, "{}", r.body);
                let m = assemble(format, &r.body);
                texts.push(m.text.clone());
                continue_request(format, &mut req, &m);
            }
            texts
        }));
    }
    for t in tasks {
        assert_eq!(t.await.unwrap(), ["first", "second", "third"]);
    }
    assert_eq!(server.request_count(), 90);
    assert!(server.violations().is_empty());
}
