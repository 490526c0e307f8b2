//! `ProviderConfig::http_version`: what the adapters actually put on the wire. A raw TCP
//! listener reads the first bytes the client sends: the HTTP/2 connection preface for
//! `Http2PriorKnowledge`, an HTTP/1.1 request line otherwise. The connection is then cut, and
//! the stream must still end with exactly one error terminal.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use agentloop::model::{Model, ModelEvent, ModelRequest};
use agentloop::providers::{Anthropic, HttpVersion, OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::transcript::Message;
use futures::StreamExt;
use tokio::io::AsyncReadExt;
use tokio::net::TcpListener;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

async fn first_bytes(
    make: impl FnOnce(ProviderConfig) -> Box<dyn Model>,
    version: HttpVersion,
) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let model = make(
        ProviderConfig::new(format!("http://{addr}/v1"))
            .api_key("sk-test")
            .model("m")
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(5))
            .http_version(version),
    );
    let client = tokio::spawn(async move {
        model
            .stream(ModelRequest::new(vec![Message::user("hi")]))
            .collect::<Vec<_>>()
            .await
    });
    let (mut socket, _) = tokio::time::timeout(Duration::from_secs(10), listener.accept())
        .await
        .expect("the client never connected")
        .unwrap();
    // 24 bytes: the HTTP/2 preface; 34: the HTTP/1.1 request line checked below.
    let mut buf = vec![
        0u8;
        if version == HttpVersion::Http2PriorKnowledge {
            24
        } else {
            34
        }
    ];
    tokio::time::timeout(Duration::from_secs(10), socket.read_exact(&mut buf))
        .await
        .expect("the client sent nothing")
        .unwrap();
    drop(socket);
    let events = tokio::time::timeout(Duration::from_secs(10), client)
        .await
        .expect("the stream did not end after the connection was cut")
        .unwrap();
    let terminals = events
        .iter()
        .filter(|e| matches!(e, ModelEvent::Done(_) | ModelEvent::Error { .. }))
        .count();
    assert_eq!(terminals, 1, "{events:?}");
    assert!(
        matches!(events.last(), Some(ModelEvent::Error { .. })),
        "{events:?}"
    );
    buf
}

fn chat(config: ProviderConfig) -> Box<dyn Model> {
    Box::new(OpenAiChat::new(config))
}

fn anthropic(config: ProviderConfig) -> Box<dyn Model> {
    Box::new(Anthropic::new(config))
}

#[tokio::test]
async fn prior_knowledge_speaks_http2_over_plain_http() {
    assert_eq!(
        first_bytes(chat, HttpVersion::Http2PriorKnowledge).await,
        H2_PREFACE
    );
    assert_eq!(
        first_bytes(anthropic, HttpVersion::Http2PriorKnowledge).await,
        H2_PREFACE
    );
}

#[tokio::test]
async fn auto_and_http1_only_speak_http1_over_plain_http() {
    for version in [HttpVersion::Auto, HttpVersion::Http1Only] {
        let head = first_bytes(chat, version).await;
        assert!(
            head.starts_with(b"POST /v1/chat/completions HTTP/1.1"),
            "{version:?}: {}",
            String::from_utf8_lossy(&head)
        );
    }
    assert_eq!(
        ProviderConfig::new("http://x").http_version,
        HttpVersion::Auto
    );
}

#[tokio::test]
async fn a_refused_connection_names_its_cause() {
    // A port nobody listens on: bind, read the port, close.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let model = OpenAiChat::new(
        ProviderConfig::new(format!("http://127.0.0.1:{port}/v1")).retry(RetryPolicy::none()),
    );
    let events: Vec<ModelEvent> = model
        .stream(ModelRequest::new(vec![Message::user("hi")]))
        .collect()
        .await;
    let Some(ModelEvent::Error { error, .. }) = events.last() else {
        panic!("{events:?}")
    };
    let text = error.to_string().to_lowercase();
    assert!(text.contains("refused"), "the cause is missing: {text}");
    assert!(
        !text.contains("127.0.0.1"),
        "the URL leaked into the message: {text}"
    );
}
