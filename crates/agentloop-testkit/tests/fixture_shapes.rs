//! The mock's streams have the shape of the recorded provider streams in
//! `crates/agentloop/tests/fixtures/providers/`: the same event sequence for the same kind of
//! message, and no JSON key the real APIs never send (keys are compared as paths, e.g.
//! `response.output[].call_id`).
//!
//! The corpus is part of the repository (its README gives its provenance and licences);
//! `AGENTLOOP_FIXTURES` points the tests at another copy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use agentloop_testkit::{MockServer, Script, StopReason, ToolCall, Turn, WireFormat};
use common::{parse_sse, post_first};
use serde_json::{Value, json};

fn fixtures_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("AGENTLOOP_FIXTURES") {
        return Some(PathBuf::from(dir));
    }
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let dir = manifest.join("../agentloop/tests/fixtures/providers");
    assert!(
        dir.join("README.md").exists(),
        "the recorded corpus is missing from {}",
        dir.display()
    );
    Some(dir)
}

fn fixture(dir: &Path, folder: &str, case: &str) -> String {
    std::fs::read_to_string(dir.join(folder).join(format!("{case}.sse"))).unwrap()
}

/// Event names with runs of the same name collapsed (delta counts differ by design).
fn grammar(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in parse_sse(body) {
        let name = e.event.unwrap_or_else(|| "data".to_string());
        if out.last() != Some(&name) {
            out.push(name);
        }
    }
    out
}

fn key_paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                key_paths(child, &p, out);
            }
        }
        Value::Array(items) => {
            for item in items {
                key_paths(item, &format!("{prefix}[]"), out);
            }
        }
        _ => {}
    }
}

/// event name -> every key path seen in its data.
fn keys_by_event(bodies: &[String]) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for body in bodies {
        for e in parse_sse(body) {
            let Ok(v) = serde_json::from_str::<Value>(&e.data) else {
                continue;
            };
            let name = e.event.unwrap_or_else(|| "data".to_string());
            key_paths(&v, "", out.entry(name).or_default());
        }
    }
    out
}

fn assert_keys_subset(
    format: WireFormat,
    mock: &[String],
    recorded: &[String],
    allowed_extra: &[&str],
) {
    let real = keys_by_event(recorded);
    for (event, keys) in keys_by_event(mock) {
        let Some(real_keys) = real.get(&event) else {
            panic!("{format:?}: event `{event}` does not occur in the recordings");
        };
        for k in keys {
            assert!(
                real_keys.contains(&k) || allowed_extra.contains(&k.as_str()),
                "{format:?}: `{event}` has key `{k}`, which the recordings never send"
            );
        }
    }
}

async fn mock_body(format: WireFormat, turn: Turn) -> String {
    let server = MockServer::start(Script::new(vec![turn]));
    let reply = post_first(&server, format, "x").await;
    assert_eq!(reply.status, 200);
    reply.body
}

fn all_cases(dir: &Path, folder: &str) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir.join(folder)).unwrap() {
        let p = entry.unwrap().path();
        if p.extension().and_then(|e| e.to_str()) == Some("sse") {
            out.push(std::fs::read_to_string(p).unwrap());
        }
    }
    out
}

fn text_turn() -> Turn {
    Turn::text("Hello there, 東京 ° friend.").with_chunk_size(6)
}

fn tools_turn() -> Turn {
    Turn::tool_calls(vec![
        ToolCall::new("call_1", "lookup_a", json!({})),
        ToolCall::new("call_2", "lookup_b", json!({"q": "x"})).with_arg_chunks(3),
    ])
}

#[tokio::test]
async fn anthropic_streams_match_the_recordings() {
    let Some(dir) = fixtures_dir() else { return };
    let f = WireFormat::Anthropic;
    let text = mock_body(f, text_turn()).await;
    assert_eq!(
        grammar(&text),
        grammar(&fixture(&dir, "anthropic", "text_basic"))
    );
    let thinking = mock_body(f, text_turn().with_thinking("Let me think.")).await;
    assert_eq!(
        grammar(&thinking),
        grammar(&fixture(&dir, "anthropic", "thinking_then_text"))
    );
    let tool = mock_body(
        f,
        Turn::text("I'll check.").with_tool_call(
            ToolCall::new("toolu_1", "get_weather", json!({"location": "Paris"}))
                .with_arg_chunks(4),
        ),
    )
    .await;
    assert_eq!(
        grammar(&tool),
        grammar(&fixture(&dir, "anthropic", "text_then_tool_use"))
    );
    let length = mock_body(
        f,
        text_turn()
            .with_thinking("hmm")
            .with_stop_reason(StopReason::Length),
    )
    .await;
    assert_eq!(
        grammar(&length),
        grammar(&fixture(&dir, "anthropic", "max_tokens_after_thinking"))
    );
    assert_keys_subset(
        f,
        &[text, thinking, tool, length],
        &all_cases(&dir, "anthropic"),
        &[],
    );
}

#[tokio::test]
async fn responses_streams_match_the_recordings() {
    let Some(dir) = fixtures_dir() else { return };
    let f = WireFormat::OpenAiResponses;
    let folder = "openai-responses";
    let text = mock_body(f, text_turn()).await;
    assert_eq!(
        grammar(&text),
        grammar(&fixture(&dir, folder, "text_plain"))
    );
    let reasoning = mock_body(
        f,
        Turn::text("114")
            .with_thinking("Counting multiples.")
            .with_chunk_size(3),
    )
    .await;
    assert_eq!(
        grammar(&reasoning),
        grammar(&fixture(&dir, folder, "reasoning_summary_then_text"))
    );
    let tools = mock_body(f, tools_turn()).await;
    assert_eq!(
        grammar(&tools),
        grammar(&fixture(&dir, folder, "function_calls_parallel"))
    );
    let incomplete = mock_body(
        f,
        Turn::tool_calls(vec![
            ToolCall::raw("call_1", "add", "{\"x\":48151").with_arg_chunks(4),
        ])
        .with_stop_reason(StopReason::Length),
    )
    .await;
    assert_eq!(
        grammar(&incomplete),
        grammar(&fixture(&dir, folder, "incomplete_mid_function_call"))
    );
    assert_keys_subset(
        f,
        &[text, reasoning, tools, incomplete],
        &all_cases(&dir, folder),
        &[],
    );
}

#[tokio::test]
async fn chat_streams_match_the_recordings() {
    let Some(dir) = fixtures_dir() else { return };
    let f = WireFormat::OpenAiChat;
    let folder = "openai-chat";
    let text = mock_body(f, text_turn()).await;
    let tools = mock_body(f, tools_turn()).await;
    let mixed = mock_body(
        f,
        Turn::text("I will now look").with_tool_call(ToolCall::new("call_9", "f", json!({}))),
    )
    .await;
    let reasoning = mock_body(f, text_turn().with_thinking("think")).await;
    assert_keys_subset(
        f,
        &[text.clone(), tools.clone(), mixed, reasoning],
        &all_cases(&dir, folder),
        // Reasoning deltas (DeepSeek, vLLM, llama.cpp, OpenRouter) are not in the recordings.
        &["choices[].delta.reasoning_content"],
    );
    // Same chunk kinds in the same order as the recordings: role chunk, deltas, finish chunk,
    // usage chunk, [DONE].
    let kinds = |body: &str| -> Vec<&'static str> {
        let mut out: Vec<&'static str> = Vec::new();
        for e in parse_sse(body) {
            let k = if e.data == "[DONE]" {
                "done"
            } else {
                let v: Value = serde_json::from_str(&e.data).unwrap();
                let c = &v["choices"][0];
                if v["choices"] == json!([]) {
                    "usage"
                } else if !c["finish_reason"].is_null() {
                    "finish"
                } else if c["delta"].get("role").is_some() {
                    "role"
                } else if c["delta"].get("tool_calls").is_some() {
                    "tool"
                } else {
                    "content"
                }
            };
            if out.last() != Some(&k) {
                out.push(k);
            }
        }
        out
    };
    assert_eq!(kinds(&text), kinds(&fixture(&dir, folder, "text_plain")));
    assert_eq!(
        kinds(&tools),
        kinds(&fixture(&dir, folder, "tool_calls_parallel"))
    );
}

/// A Gemini chunk's shape: its parts (`thought`, `text`, `empty` for an empty text part, `call`;
/// `:sig` when signed) and its `finishReason`.
fn gemini_shape(body: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in parse_sse(body) {
        let v: Value = serde_json::from_str(&e.data).unwrap();
        let candidate = &v["candidates"][0];
        let mut label: Vec<String> = Vec::new();
        for part in candidate["content"]["parts"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let kind = if part.get("functionCall").is_some() {
                "call"
            } else if part["thought"] == true {
                "thought"
            } else if part["text"] == "" {
                "empty"
            } else {
                "text"
            };
            let sig = if part.get("thoughtSignature").is_some() {
                ":sig"
            } else {
                ""
            };
            label.push(format!("{kind}{sig}"));
        }
        let mut label = label.join(",");
        if let Some(reason) = candidate["finishReason"].as_str() {
            label.push('|');
            label.push_str(reason);
        }
        if out.last() != Some(&label) {
            out.push(label);
        }
    }
    out
}

#[tokio::test]
async fn gemini_streams_match_the_recordings() {
    let Some(dir) = fixtures_dir() else { return };
    let f = WireFormat::Gemini;
    let folder = "gemini";
    let thinking_text = mock_body(f, text_turn().with_thinking("Defining the basics.")).await;
    assert_eq!(
        gemini_shape(&thinking_text),
        gemini_shape(&fixture(
            &dir,
            folder,
            "thought_then_text_trailing_signature"
        ))
    );
    let thinking_call = mock_body(
        f,
        Turn::tool_calls(vec![ToolCall::new(
            "call_966934",
            "lookup_harbor_label",
            json!({}),
        )])
        .with_thinking("Calculating."),
    )
    .await;
    assert_eq!(
        gemini_shape(&thinking_call),
        gemini_shape(&fixture(&dir, folder, "thought_then_call_with_id"))
    );
    let tools = mock_body(f, tools_turn()).await;
    let length = mock_body(f, text_turn().with_stop_reason(StopReason::Length)).await;
    assert_keys_subset(
        f,
        &[thinking_text, thinking_call, tools, length],
        &all_cases(&dir, folder),
        // The script's own argument names.
        &["candidates[].content.parts[].functionCall.args.q"],
    );
}
