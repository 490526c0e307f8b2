//! Null baseline: the same HTTP requests and SSE parsing as an agent on the Chat Completions
//! wire (model turn with tool calls, tool results, final text), with no agent logic: no events,
//! no registry, no validation, no hooks. Prints one JSON line in the drivers' format.

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::Ordering::Relaxed;

use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    url: String,
    tools: Value,
}

struct Reply {
    text: String,
    calls: Vec<(String, String, String)>, // id, name, arguments
}

impl Client {
    fn new(a: &Args) -> Self {
        let base = a.base_url.as_str();
        let fun = |name: &str, desc: &str, params: Value| {
            json!({"type": "function", "function": {"name": name, "description": desc, "parameters": params}})
        };
        let tools = json!([
            fun("add", "Add two integers.", add_params()),
            fun("upper", "Upper-case a text.", upper_params()),
        ]);
        let http = if a.http2 {
            reqwest::Client::builder().http2_prior_knowledge().build().expect("client")
        } else {
            reqwest::Client::new()
        };
        Client { http, url: format!("{base}/chat/completions"), tools }
    }

    async fn turn(&self, messages: &[Value]) -> Reply {
        let body = json!({"model": "mock-model", "messages": messages, "tools": self.tools,
                          "stream": true, "stream_options": {"include_usage": true}});
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth("dummy")
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .expect("request");
        assert!(resp.status().is_success(), "HTTP {}", resp.status());
        let mut stream = resp.bytes_stream();
        let mut buf: Vec<u8> = Vec::new();
        let mut reply = Reply { text: String::new(), calls: Vec::new() };
        let mut done = false;
        while let Some(chunk) = stream.next().await {
            buf.extend_from_slice(&chunk.expect("body"));
            while let Some(pos) = buf.windows(2).position(|w| w == b"\n\n") {
                let event: Vec<u8> = buf.drain(..pos + 2).collect();
                for line in event.split(|b| *b == b'\n') {
                    let Some(data) = line.strip_prefix(b"data:") else { continue };
                    let data = data.strip_prefix(b" ").unwrap_or(data);
                    if data == b"[DONE]" {
                        done = true;
                        continue;
                    }
                    let v: Value = serde_json::from_slice(data).expect("chunk json");
                    let Some(delta) = v["choices"].get(0).map(|c| &c["delta"]) else { continue };
                    if let Some(t) = delta["content"].as_str() {
                        reply.text.push_str(t);
                    }
                    if let Some(calls) = delta["tool_calls"].as_array() {
                        for c in calls {
                            let idx = c["index"].as_u64().unwrap_or(0) as usize;
                            if idx >= reply.calls.len() {
                                reply.calls.resize(idx + 1, Default::default());
                            }
                            let slot = &mut reply.calls[idx];
                            if let Some(id) = c["id"].as_str() {
                                slot.0 = id.to_owned();
                            }
                            if let Some(n) = c["function"]["name"].as_str() {
                                slot.1 = n.to_owned();
                            }
                            if let Some(a) = c["function"]["arguments"].as_str() {
                                slot.2.push_str(a);
                            }
                        }
                    }
                }
            }
        }
        assert!(done, "stream ended without [DONE]");
        reply
    }

    /// One agent run: model turns until a reply without tool calls. Returns the final text.
    async fn run(&self, messages: &mut Vec<Value>, prompt: String) -> String {
        messages.push(json!({"role": "user", "content": prompt}));
        loop {
            let reply = self.turn(messages).await;
            let calls: Vec<Value> = reply.calls.iter().map(|(id, name, args)| {
                json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
            }).collect();
            messages.push(json!({"role": "assistant",
                "content": if reply.text.is_empty() { Value::Null } else { json!(reply.text) },
                "tool_calls": if calls.is_empty() { Value::Null } else { json!(calls) }}));
            if reply.calls.is_empty() {
                return reply.text;
            }
            for (id, name, args) in &reply.calls {
                let a: Value = serde_json::from_str(args).expect("args json");
                TOOL_CALLS.fetch_add(1, Relaxed);
                let out = match name.as_str() {
                    "add" => (a["a"].as_i64().unwrap_or(0) + a["b"].as_i64().unwrap_or(0)).to_string(),
                    "upper" => a["text"].as_str().unwrap_or_default().to_uppercase(),
                    other => panic!("unknown tool {other}"),
                };
                messages.push(json!({"role": "tool", "tool_call_id": id, "content": out}));
            }
        }
    }
}

impl Subject for Client {
    const FRAMEWORK: &'static str = "null-baseline";
    type History = Vec<Value>;

    fn new(a: &Args) -> Self {
        Client::new(a)
    }

    async fn answer(&self, history: &mut Vec<Value>, prompt: String) -> String {
        self.run(history, prompt).await
    }
}

fn main() {
    common::main::<Client>();
}
