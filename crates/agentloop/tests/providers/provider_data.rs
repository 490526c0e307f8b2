//! Provider data that must round-trip: a conversation recorded on OpenAI
//! Responses and one recorded on Gemini are stored in the SQLite session store as they stream,
//! the store is closed and opened again, and the resumed conversation sends back what the
//! provider needs — Responses item ids next to the encrypted reasoning, Gemini thought
//! signatures on the parts they came with. The same stored transcripts continued on another
//! provider carry none of it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::{Model, ReasoningLevel};
use agentloop::providers::{Gemini, ProviderConfig, RetryPolicy};
use agentloop::session::{NewSession, SessionRecorder, SessionStore, SqliteStore};
use agentloop::tooling::Deps;
use agentloop::transcript::{Message, Part};
use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

use crate::support::{Wire, lookup};

fn model(wire: Wire, server: &MockServer) -> Arc<dyn Model> {
    wire.adapter(
        ProviderConfig::new(wire.base_url(server))
            .api_key("test")
            .model("model-1")
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10)),
    )
}

fn server() -> MockServer {
    MockServer::start(
        Script::from_value(json!({"turns": [
            {"thinking": "I should look it up.", "text": "Looking it up.",
             "tool_calls": [{"name": "lookup", "arguments": {"word": "agent"}}]},
            {"thinking": "Now I know.", "text": "An agent acts.", "chunk_size": 4},
            {"text": "A loop repeats."}
        ]}))
        .unwrap(),
    )
}

fn agent(wire: Wire, server: &MockServer) -> AgentLoop<Deps> {
    let config = AgentLoopConfig {
        reasoning: Some(ReasoningLevel::Low),
        ..AgentLoopConfig::default()
    };
    AgentLoop::new(config, model(wire, server))
        .with_tools([lookup()])
        .unwrap()
}

/// Records a two-turn conversation (a tool call, then an answer) into a session of the SQLite
/// store at `path`; returns the session id.
async fn record(wire: Wire, server: &MockServer, path: &std::path::Path) -> String {
    let store = Arc::new(SqliteStore::open(path).unwrap());
    let session = store.create(NewSession::new()).unwrap();
    let recorder = SessionRecorder::new(store.clone(), &session.id);
    let agent = agent(wire, server).with_emit(recorder.emit_fn());
    let out = agent
        .run(vec![Message::user("Define agent")], vec![])
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Done, "{wire:?}");
    assert!(recorder.take_error().is_none());
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    session.id
}

/// Every string at `key` anywhere in `v`.
fn strings_at(v: &Value, key: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                match child {
                    Value::String(s) if k == key => out.push(s.clone()),
                    _ => strings_at(child, key, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|i| strings_at(i, key, out)),
        _ => {}
    }
}

/// The provider data stored on the transcript's text and tool-call parts, as JSON.
fn stored_data(context: &[Message]) -> Vec<Value> {
    context
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::Text { provider_data, .. } => provider_data.clone(),
            Part::ToolCall(c) => c.provider_data.clone(),
            _ => None,
        })
        .map(|d| serde_json::to_value(d).unwrap())
        .collect()
}

async fn resume(wire: Wire, context: Vec<Message>) -> (MockServer, Value) {
    let server = server();
    let mut context = context;
    context.push(Message::user("And a loop?"));
    let out = agent(wire, &server).run_continue(context).await.unwrap();
    assert_eq!(out.final_text(), "A loop repeats.", "{wire:?}");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let body = server.requests()[0].body.clone();
    (server, body)
}

#[tokio::test]
async fn a_responses_transcript_resumed_from_the_store_replays_its_item_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let first = server();
    let id = record(Wire::Responses, &first, &path).await;

    // Another process, later: the store is opened again.
    let context = SqliteStore::open(&path).unwrap().load(&id).unwrap();
    let data = stored_data(&context);
    assert_eq!(data.len(), 3, "two messages and a call: {data:?}");
    assert!(data.iter().all(|d| d["provider"] == "openai_responses"));

    let (_, body) = resume(Wire::Responses, context.clone()).await;
    let input = body["input"].as_array().unwrap();
    let item = |id_prefix: &str| {
        input
            .iter()
            .find(|i| i["id"].as_str().is_some_and(|id| id.starts_with(id_prefix)))
            .cloned()
            .unwrap_or_else(|| panic!("no item with an id {id_prefix}…: {body}"))
    };
    // The first reply's reasoning, message and call, each with its id, in the order received.
    let reasoning = item("rs_mock_1_");
    assert!(
        reasoning["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("mock-encrypted-1-")
    );
    let message = item("msg_mock_1");
    assert_eq!(message["status"], "completed");
    assert_eq!(message["content"][0]["text"], "Looking it up.");
    let call = item("fc_mock_1_");
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "lookup");
    let position = |v: &Value| input.iter().position(|i| i == v).unwrap();
    assert!(position(&reasoning) < position(&message) && position(&message) < position(&call));
    // Exactly the ids the store kept.
    let mut sent = Vec::new();
    strings_at(&body, "id", &mut sent);
    for d in &data {
        let id = d["data"]["id"].as_str().unwrap();
        assert!(sent.iter().any(|s| s == id), "{id} not replayed: {body}");
    }

    // The same stored transcript continued on Gemini: no Responses id, no encrypted reasoning.
    let (_, body) = resume(Wire::Gemini, context).await;
    let text = body.to_string();
    for gone in ["rs_mock_", "msg_mock_", "fc_mock_", "mock-encrypted-"] {
        assert!(!text.contains(gone), "{gone} crossed providers: {text}");
    }
}

#[tokio::test]
async fn a_gemini_transcript_resumed_from_the_store_replays_its_thought_signatures() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let first = server();
    let id = record(Wire::Gemini, &first, &path).await;

    // Another process, later: the store is opened again. The mock signed the first reply's
    // function call and the second reply's (empty, last) text part.
    let context = SqliteStore::open(&path).unwrap().load(&id).unwrap();
    let data = stored_data(&context);
    assert_eq!(
        data.len(),
        2,
        "the call and the final text are signed: {data:?}"
    );
    let signatures: Vec<&str> = data
        .iter()
        .map(|d| {
            assert_eq!(d["provider"], "gemini");
            d["data"]["thoughtSignature"].as_str().unwrap()
        })
        .collect();
    assert!(
        signatures.iter().all(|s| s.starts_with("mock-sig-mock-")),
        "{signatures:?}"
    );
    assert_ne!(signatures[0], signatures[1]);

    let (_, body) = resume(Wire::Gemini, context.clone()).await;
    let contents = body["contents"].as_array().unwrap();
    let model_turns: Vec<&Value> = contents.iter().filter(|c| c["role"] == "model").collect();
    assert_eq!(model_turns.len(), 2);
    // The first model turn: thought, text, then the call with its signature.
    let parts = model_turns[0]["parts"].as_array().unwrap();
    assert_eq!(parts[0]["thought"], true);
    assert_eq!(parts[1]["text"], "Looking it up.");
    assert_eq!(parts[2]["functionCall"]["name"], "lookup");
    assert_eq!(parts[2]["thoughtSignature"], signatures[0]);
    // The second: the answer's text with the signature Gemini put on its last (empty) part.
    let answer = model_turns[1]["parts"].as_array().unwrap().last().unwrap();
    assert_eq!(answer["text"], "An agent acts.");
    assert_eq!(answer["thoughtSignature"], signatures[1]);
    // The function response follows its call, by name.
    let response = &contents[contents.iter().position(|c| *c == *model_turns[0]).unwrap() + 1];
    assert_eq!(response["parts"][0]["functionResponse"]["name"], "lookup");

    // The same stored transcript continued on Responses: no signature anywhere.
    let (_, body) = resume(Wire::Responses, context.clone()).await;
    assert!(!body.to_string().contains("mock-sig-"), "{body}");

    // And to another Gemini model: the call goes back with Google's sentinel, not the
    // signature another model made.
    let server = server();
    let mut continued = context;
    continued.push(Message::user("And a loop?"));
    let other = Gemini::new(
        ProviderConfig::new(server.base_url())
            .model("model-2")
            .retry(RetryPolicy::none()),
    );
    let out = AgentLoop::new(AgentLoopConfig::default(), other)
        .with_tools([lookup()])
        .unwrap()
        .run_continue(continued)
        .await
        .unwrap();
    assert_eq!(out.final_text(), "A loop repeats.");
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let body = server.requests()[0].body.to_string();
    assert!(!body.contains("mock-sig-"), "{body}");
    assert!(body.contains("skip_thought_signature_validator"), "{body}");
}

#[test]
fn stored_provider_data_loads_back_unchanged() {
    // A stored message with provider data loads into the same `Message`, on the shapes the two
    // adapters write.
    let store = SqliteStore::open_in_memory().unwrap();
    let session = store.create(NewSession::new()).unwrap();
    let message: Message = serde_json::from_value(json!({
        "role": "assistant", "timestamp_ms": 1, "provider": "gemini", "model": "m",
        "content": [
            {"type": "text", "text": "a",
             "provider_data": {"provider": "openai_responses", "data": {"id": "msg_1", "type": "message"}}},
            {"type": "tool_call", "id": "c", "tool_name": "t", "arguments": {},
             "provider_data": {"provider": "gemini", "data": {"thoughtSignature": "s"}}}
        ]
    }))
    .unwrap();
    store.append(&session.id, &message).unwrap();
    let loaded = store.load_raw(&session.id).unwrap();
    assert_eq!(loaded, vec![message]);
}
