//! Test helpers: a tiny HTTP client over reqwest, an SSE parser and per-format assemblers that
//! rebuild the assistant message from the stream the way a real adapter would.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::collections::BTreeMap;
use std::time::Duration;

use agentloop_testkit::{MockServer, WireFormat};
use futures::StreamExt;
use serde_json::{Value, json};

pub const FORMATS: [WireFormat; 3] = [
    WireFormat::OpenAiChat,
    WireFormat::OpenAiResponses,
    WireFormat::Anthropic,
];

pub fn path(format: WireFormat) -> &'static str {
    match format {
        WireFormat::OpenAiChat => "/v1/chat/completions",
        WireFormat::OpenAiResponses => "/v1/responses",
        WireFormat::Anthropic => "/v1/messages",
        WireFormat::Gemini => "/v1beta/models/gemini-test:streamGenerateContent?alt=sse",
        _ => unreachable!(),
    }
}

pub struct Reply {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

/// POSTs JSON and reads the whole body.
pub async fn post(base: &str, path: &str, body: &Value) -> Reply {
    let resp = client()
        .post(format!("{base}{path}"))
        .header("authorization", "Bearer sk-secret")
        .json_body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    let body = resp.text().await.unwrap();
    Reply {
        status,
        headers,
        body,
    }
}

/// [`post`]s the opening request of a conversation in `format` ([`first_request`] with the
/// user message `user`) to that format's endpoint on `server`.
pub async fn post_first(server: &MockServer, format: WireFormat, user: &str) -> Reply {
    post(
        &server.base_url(),
        path(format),
        &first_request(format, user),
    )
    .await
}

trait JsonBody {
    fn json_body(self, v: &Value) -> Self;
}

impl JsonBody for reqwest::RequestBuilder {
    fn json_body(self, v: &Value) -> Self {
        self.header("content-type", "application/json")
            .body(v.to_string())
    }
}

/// What reading a body chunk by chunk gave: the bytes, and whether it ended in an error or a
/// timeout (`None` = clean end).
pub struct Partial {
    pub bytes: Vec<u8>,
    pub outcome: Outcome,
}

#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    Clean,
    Error,
    TimedOut,
}

/// POSTs and reads the body chunk by chunk, giving up when no chunk arrives within `idle`.
pub async fn post_partial(base: &str, path: &str, body: &Value, idle: Duration) -> Partial {
    let resp = client()
        .post(format!("{base}{path}"))
        .json_body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut stream = resp.bytes_stream();
    let mut bytes = Vec::new();
    loop {
        match tokio::time::timeout(idle, stream.next()).await {
            Err(_) => {
                return Partial {
                    bytes,
                    outcome: Outcome::TimedOut,
                };
            }
            Ok(None) => {
                return Partial {
                    bytes,
                    outcome: Outcome::Clean,
                };
            }
            Ok(Some(Err(_))) => {
                return Partial {
                    bytes,
                    outcome: Outcome::Error,
                };
            }
            Ok(Some(Ok(chunk))) => bytes.extend_from_slice(&chunk),
        }
    }
}

/// [`post_partial`] of the opening request of a conversation in `format`, as [`post_first`]
/// sends it.
pub async fn post_first_partial(
    server: &MockServer,
    format: WireFormat,
    user: &str,
    idle: Duration,
) -> Partial {
    post_partial(
        &server.base_url(),
        path(format),
        &first_request(format, user),
        idle,
    )
    .await
}

/// One SSE event: its `event:` name (if any) and `data:` text.
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    pub event: Option<String>,
    pub data: String,
}

/// Parses a complete SSE body (LF or CRLF line endings). An unterminated trailing event is
/// dropped, as the SSE specification requires.
pub fn parse_sse(text: &str) -> Vec<Sse> {
    let mut out = Vec::new();
    let mut event = None;
    let mut data: Vec<String> = Vec::new();
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        let is_last = lines.peek().is_none();
        if is_last {
            // Text after the final '\n' is an incomplete line.
            break;
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !data.is_empty() || event.is_some() {
                out.push(Sse {
                    event: event.take(),
                    data: data.join("\n"),
                });
                data.clear();
            }
        } else if let Some(v) = line.strip_prefix("event:") {
            event = Some(v.trim_start().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
        }
    }
    out
}

/// The neutral assembled message (like the fixtures' `expect`), plus what the stream said about
/// itself.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Assembled {
    pub text: String,
    pub thinking: String,
    /// (id, name, arguments text)
    pub tool_calls: Vec<(String, String, String)>,
    /// Responses `tool_search_call` items: (call_id, arguments)
    pub tool_searches: Vec<(String, Value)>,
    pub stop_reason: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub terminal: bool,
    /// Number of argument delta events per tool call (by position).
    pub arg_deltas: Vec<usize>,
    pub text_deltas: usize,
    pub signature: Option<String>,
    pub events: Vec<String>,
}

pub fn assemble(format: WireFormat, body: &str) -> Assembled {
    let events = parse_sse(body);
    match format {
        WireFormat::OpenAiChat => assemble_chat(&events),
        WireFormat::OpenAiResponses => assemble_responses(&events),
        WireFormat::Anthropic => assemble_anthropic(&events),
        _ => unreachable!(),
    }
}

fn assemble_chat(events: &[Sse]) -> Assembled {
    let mut a = Assembled::default();
    let mut calls: BTreeMap<u64, (String, String, String, usize)> = BTreeMap::new();
    for e in events {
        assert!(e.event.is_none(), "chat events carry no event name");
        if e.data == "[DONE]" {
            a.terminal = true;
            a.events.push("[DONE]".into());
            continue;
        }
        let v: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["object"], "chat.completion.chunk");
        if let Some(u) = v.get("usage").filter(|u| !u.is_null()) {
            assert_eq!(v["choices"], json!([]));
            a.input_tokens = u["prompt_tokens"].as_u64();
            a.output_tokens = u["completion_tokens"].as_u64();
            a.cache_read_tokens = u["prompt_tokens_details"]["cached_tokens"].as_u64();
            a.events.push("usage".into());
            continue;
        }
        let choice = &v["choices"][0];
        let delta = &choice["delta"];
        if let Some(t) = delta["reasoning_content"].as_str() {
            a.thinking.push_str(t);
        }
        if let Some(t) = delta["content"].as_str() {
            if !t.is_empty() {
                a.text_deltas += 1;
            }
            a.text.push_str(t);
        }
        for tc in delta["tool_calls"].as_array().into_iter().flatten() {
            let idx = tc["index"].as_u64().unwrap();
            let entry = calls.entry(idx).or_default();
            if let Some(id) = tc["id"].as_str() {
                assert!(entry.0.is_empty(), "id only on the first delta");
                entry.0 = id.to_string();
                entry.1 = tc["function"]["name"].as_str().unwrap().to_string();
                assert_eq!(tc["type"], "function");
            } else {
                assert!(
                    tc["function"].get("name").is_none(),
                    "name only on the first delta"
                );
                entry.3 += 1;
            }
            entry
                .2
                .push_str(tc["function"]["arguments"].as_str().unwrap());
        }
        if let Some(f) = choice["finish_reason"].as_str() {
            a.stop_reason = Some(
                match f {
                    "tool_calls" => "tool_use",
                    other => other,
                }
                .to_string(),
            );
        }
        a.events.push("chunk".into());
    }
    for (_, (id, name, args, n)) in calls {
        a.tool_calls.push((id, name, args));
        a.arg_deltas.push(n);
    }
    a
}

fn assemble_responses(events: &[Sse]) -> Assembled {
    let mut a = Assembled::default();
    let mut args: BTreeMap<String, (String, usize)> = BTreeMap::new();
    for (seq, e) in events.iter().enumerate() {
        let name = e.event.clone().expect("responses events are named");
        let v: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["type"], name.as_str());
        assert_eq!(v["sequence_number"], seq, "sequence numbers count from 0");
        a.events.push(name.clone());
        match name.as_str() {
            "response.output_text.delta" => {
                a.text_deltas += 1;
                a.text.push_str(v["delta"].as_str().unwrap());
            }
            "response.reasoning_summary_text.delta" => {
                a.thinking.push_str(v["delta"].as_str().unwrap())
            }
            "response.function_call_arguments.delta" => {
                let e = args
                    .entry(v["item_id"].as_str().unwrap().to_string())
                    .or_default();
                e.0.push_str(v["delta"].as_str().unwrap());
                e.1 += 1;
            }
            "response.output_item.done" => {
                let item = &v["item"];
                match item["type"].as_str().unwrap() {
                    "function_call" => {
                        let (streamed, n) = args
                            .remove(item["id"].as_str().unwrap())
                            .unwrap_or_default();
                        assert_eq!(streamed, item["arguments"].as_str().unwrap());
                        a.tool_calls.push((
                            item["call_id"].as_str().unwrap().to_string(),
                            item["name"].as_str().unwrap().to_string(),
                            streamed,
                        ));
                        a.arg_deltas.push(n);
                    }
                    "tool_search_call" => {
                        assert_eq!(item["execution"], "client");
                        a.tool_searches.push((
                            item["call_id"].as_str().unwrap().to_string(),
                            item["arguments"].clone(),
                        ));
                    }
                    _ => {}
                }
            }
            "response.completed" | "response.incomplete" => {
                a.terminal = true;
                let r = &v["response"];
                let has_call = r["output"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|i| i["type"] == "function_call" || i["type"] == "tool_search_call");
                a.stop_reason = Some(if name == "response.incomplete" {
                    assert_eq!(r["incomplete_details"]["reason"], "max_output_tokens");
                    "length".to_string()
                } else if has_call {
                    "tool_use".to_string()
                } else {
                    "stop".to_string()
                });
                a.input_tokens = r["usage"]["input_tokens"].as_u64();
                a.output_tokens = r["usage"]["output_tokens"].as_u64();
                a.cache_read_tokens = r["usage"]["input_tokens_details"]["cached_tokens"].as_u64();
            }
            _ => {}
        }
    }
    a
}

fn assemble_anthropic(events: &[Sse]) -> Assembled {
    let mut a = Assembled::default();
    let mut blocks: BTreeMap<u64, (String, String, String, String, usize)> = BTreeMap::new();
    for e in events {
        let name = e.event.clone().expect("anthropic events are named");
        let v: Value = serde_json::from_str(&e.data).unwrap();
        assert_eq!(v["type"], name.as_str());
        a.events.push(name.clone());
        match name.as_str() {
            "message_start" => {
                a.input_tokens = v["message"]["usage"]["input_tokens"].as_u64();
                a.cache_read_tokens = v["message"]["usage"]["cache_read_input_tokens"].as_u64();
            }
            "content_block_start" => {
                let cb = &v["content_block"];
                let kind = cb["type"].as_str().unwrap().to_string();
                let id = cb["id"].as_str().unwrap_or("").to_string();
                let bname = cb["name"].as_str().unwrap_or("").to_string();
                blocks.insert(
                    v["index"].as_u64().unwrap(),
                    (kind, id, bname, String::new(), 0),
                );
            }
            "content_block_delta" => {
                let b = blocks.get_mut(&v["index"].as_u64().unwrap()).unwrap();
                let d = &v["delta"];
                match d["type"].as_str().unwrap() {
                    "text_delta" => {
                        a.text_deltas += 1;
                        a.text.push_str(d["text"].as_str().unwrap())
                    }
                    "thinking_delta" => a.thinking.push_str(d["thinking"].as_str().unwrap()),
                    "signature_delta" => {
                        a.signature = Some(d["signature"].as_str().unwrap().into())
                    }
                    "input_json_delta" => {
                        b.3.push_str(d["partial_json"].as_str().unwrap());
                        b.4 += 1;
                    }
                    other => panic!("unexpected delta {other}"),
                }
            }
            "message_delta" => {
                a.stop_reason = Some(
                    match v["delta"]["stop_reason"].as_str().unwrap() {
                        "end_turn" => "stop",
                        "tool_use" => "tool_use",
                        "max_tokens" => "length",
                        other => other,
                    }
                    .to_string(),
                );
                a.output_tokens = v["usage"]["output_tokens"].as_u64();
            }
            "message_stop" => a.terminal = true,
            _ => {}
        }
    }
    for (_, (kind, id, name, args, n)) in blocks {
        if kind == "tool_use" {
            a.tool_calls.push((id, name, args));
            a.arg_deltas.push(n);
        }
    }
    a
}

/// A minimal first request for each format.
pub fn first_request(format: WireFormat, user: &str) -> Value {
    match format {
        WireFormat::OpenAiChat => json!({
            "model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": user}],
        }),
        WireFormat::OpenAiResponses => json!({
            "model": "gpt-test", "stream": true,
            "input": [{"role": "user", "content": user}],
        }),
        WireFormat::Anthropic => json!({
            "model": "claude-test", "stream": true, "max_tokens": 100,
            "messages": [{"role": "user", "content": user}],
        }),
        WireFormat::Gemini => json!({
            "contents": [{"role": "user", "parts": [{"text": user}]}],
        }),
        _ => unreachable!(),
    }
}

/// A call's arguments as a correct client replays them: the object's text, `{}` for anything
/// that is not a JSON object (the mock, like real servers, rejects it).
fn replay_args(args: &str) -> String {
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => v.to_string(),
        _ => "{}".to_string(),
    }
}

/// Appends the assistant turn `a` and one result per tool call (and tool search) to `req`.
pub fn continue_request(format: WireFormat, req: &mut Value, a: &Assembled) {
    match format {
        WireFormat::OpenAiChat => {
            let msgs = req["messages"].as_array_mut().unwrap();
            let calls: Vec<Value> = a
                .tool_calls
                .iter()
                .map(|(id, name, args)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": replay_args(args)}})
                })
                .collect();
            let mut m = json!({"role": "assistant", "content": a.text});
            if !calls.is_empty() {
                m["tool_calls"] = Value::Array(calls);
            }
            msgs.push(m);
            for (id, _, _) in &a.tool_calls {
                msgs.push(json!({"role": "tool", "tool_call_id": id, "content": "ok"}));
            }
        }
        WireFormat::OpenAiResponses => {
            let items = req["input"].as_array_mut().unwrap();
            if !a.text.is_empty() {
                items.push(json!({"type": "message", "role": "assistant",
                                  "content": [{"type": "output_text", "text": a.text}]}));
            }
            for (id, args) in &a.tool_searches {
                items.push(json!({"type": "tool_search_call", "call_id": id,
                                  "execution": "client", "arguments": args}));
            }
            for (id, name, args) in &a.tool_calls {
                items.push(json!({"type": "function_call", "call_id": id, "name": name,
                                  "arguments": replay_args(args)}));
            }
            for (id, _) in &a.tool_searches {
                items.push(json!({"type": "tool_search_output", "call_id": id,
                                  "execution": "client", "tools": []}));
            }
            for (id, _, _) in &a.tool_calls {
                items.push(json!({"type": "function_call_output", "call_id": id, "output": "ok"}));
            }
        }
        WireFormat::Anthropic => {
            let msgs = req["messages"].as_array_mut().unwrap();
            let mut content = Vec::new();
            if !a.text.is_empty() {
                content.push(json!({"type": "text", "text": a.text}));
            }
            for (id, name, args) in &a.tool_calls {
                let input: Value = serde_json::from_str(args).unwrap_or(json!({}));
                content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
            }
            msgs.push(json!({"role": "assistant", "content": content}));
            if !a.tool_calls.is_empty() {
                let results: Vec<Value> = a
                    .tool_calls
                    .iter()
                    .map(|(id, _, _)| json!({"type": "tool_result", "tool_use_id": id, "content": "ok"}))
                    .collect();
                msgs.push(json!({"role": "user", "content": results}));
            }
        }
        _ => unreachable!(),
    }
}
