//! What the OpenAI Responses adapter sends: request-body snapshots (tools, tool results, images,
//! instructions, reasoning options, encrypted reasoning carried across turns, transcripts from
//! other providers) and the client-executed tool-search round trip, from a streamed
//! `tool_search_call` through the registry's search tool back to `tool_search_call` +
//! `tool_search_output` input items.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;

use agentloop::model::{Model, ModelEvent, ModelRequest, ReasoningLevel};
use agentloop::providers::{OpenAiChat, OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::tooling::{
    Deps, LoadedTools, Registry, ToolContext, ToolSpec, bm25_tool_search, run_tools,
    search_result_names,
};
use agentloop::transcript::{
    Message, Part, StopReason, ThinkingPart, ToolCallPart, ToolResultPart,
};
use futures::StreamExt;
use serde_json::{Value, json};
use support::*;

const MODEL: &str = "gpt-test";

fn adapter(base_url: &str) -> OpenAiResponses {
    OpenAiResponses::new(
        ProviderConfig::new(format!("{base_url}/v1"))
            .api_key("sk-test")
            .model(MODEL)
            .retry(RetryPolicy::none()),
    )
}

fn offline() -> OpenAiResponses {
    adapter("http://127.0.0.1:9")
}

fn assistant(parts: Vec<Part>, provider: &str, model: &str, stop: StopReason) -> Message {
    let mut m = Message::assistant(parts, stop);
    m.provider = Some(provider.into());
    m.model = Some(model.into());
    m
}

async fn stream_message(model: &OpenAiResponses, request: ModelRequest<'_>) -> Message {
    let mut stream = model.stream(request);
    while let Some(event) = stream.next().await {
        match event {
            ModelEvent::Done(m) => return m,
            ModelEvent::Error { message, error } => panic!("{error}: {message:?}"),
            _ => {}
        }
    }
    panic!("no terminal event")
}

#[test]
fn tools_tool_results_images_and_instructions() {
    let messages = vec![
        Message::user_parts(vec![
            Part::text("What is in this picture? Then read notes.txt."),
            Part::Image(png_image()),
        ]),
        assistant(
            vec![
                Part::text("A cat. Reading the file and taking a screenshot."),
                Part::ToolCall(ToolCallPart::new(
                    "call_1",
                    "read_file",
                    json!({"path": "notes.txt"}),
                )),
                Part::ToolCall(ToolCallPart::new("call_2", "screenshot", json!({}))),
            ],
            "openai_responses",
            MODEL,
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::error(
            "call_1",
            "read_file",
            "notes.txt: no such file",
        )),
        Message::tool_result(screenshot_result()),
        Message::user("Thanks."),
    ];
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("You are terse.".into());
    request.tools = read_file_and_screenshot_tools().into();
    let body = offline().request_body(&request);
    assert_eq!(body["instructions"], "You are terse.");
    assert_eq!(body["store"], false);
    assert!(body.get("reasoning").is_none() && body.get("include").is_none());
    insta::assert_json_snapshot!("tools_results_images", body);
}

#[test]
fn reasoning_options() {
    let mut table = BTreeMap::new();
    for (name, level) in REASONING_LEVELS {
        let mut request = ModelRequest::new(vec![Message::user("hi")]);
        request.reasoning = level;
        let body = offline().request_body(&request);
        table.insert(
            name,
            json!({"reasoning": body.get("reasoning"), "include": body.get("include")}),
        );
    }
    assert_eq!(table["xhigh"]["reasoning"]["effort"], "high");
    assert_eq!(table["off"]["reasoning"], Value::Null);
    insta::assert_json_snapshot!("reasoning_levels", table);

    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.model = Some("gpt-other".into());
    request.temperature = Some(0.25);
    request.max_output_tokens = Some(512);
    request.reasoning = Some(ReasoningLevel::Low);
    insta::assert_json_snapshot!("sampling_options", offline().request_body(&request));
}

#[test]
fn a_temperature_goes_out_in_its_shortest_decimal_form() {
    for t in [0.2_f32, 0.1, 0.7, 1.3] {
        let mut request = ModelRequest::new(vec![Message::user("hi")]);
        request.temperature = Some(t);
        let body = offline().request_body(&request);
        // The decimal the user wrote, not the f32's widening to f64 (0.20000000298023224).
        let expected: f64 = t.to_string().parse().unwrap();
        assert_eq!(body["temperature"].as_f64(), Some(expected), "{t}");
        let text = serde_json::to_string(&body["temperature"]).unwrap();
        assert_eq!(text, t.to_string());
    }
}

/// The assistant message the adapter assembles from the recorded reasoning stream.
async fn reasoning_turn() -> Message {
    let case = corpus_case("openai-responses", "reasoning_summary_then_text");
    let server = FixtureServer::start(case.body, 0).await;
    let mut request = ModelRequest::new(vec![Message::user("How many?")]);
    request.reasoning = Some(ReasoningLevel::High);
    let message = stream_message(&adapter(&server.base_url), request).await;
    assert!(matches!(&message.content[0], Part::Thinking(t) if t.signature.is_some()));
    message
}

#[tokio::test]
async fn encrypted_reasoning_is_replayed_to_the_same_model_only() {
    let transcript = vec![
        Message::user("How many?"),
        reasoning_turn().await,
        Message::user("Why?"),
    ];
    let mut request = ModelRequest::new(transcript.clone());
    request.reasoning = Some(ReasoningLevel::High);

    // Same provider and model: the reasoning item goes back with its encrypted payload.
    let same = offline().request_body(&request);
    let reasoning = &same["input"][1];
    assert_eq!(reasoning["type"], "reasoning");
    assert_eq!(reasoning["id"], "rs_REDACTED_1");
    assert!(reasoning["encrypted_content"].is_string());
    // The message that followed the reasoning goes back with its item id: the server pairs them.
    assert_eq!(same["input"][2]["type"], "message");
    assert_eq!(same["input"][2]["id"], "msg_REDACTED_1");
    assert_eq!(same["input"][2]["status"], "completed");
    insta::assert_json_snapshot!("reasoning_same_model", same["input"]);

    // Another model of the same provider: the summary becomes text, the payload is dropped.
    request.model = Some("gpt-other".into());
    let other = offline().request_body(&request);
    assert!(!other.to_string().contains("encrypted_content_REDACTED"));
    insta::assert_json_snapshot!("reasoning_other_model", other["input"]);

    // Another provider (Chat Completions): the summary becomes text there too.
    let chat = OpenAiChat::new(ProviderConfig::new("http://127.0.0.1:9/v1").model(MODEL));
    let chat_body = chat.request_body(&ModelRequest::new(transcript));
    assert!(!chat_body.to_string().contains("encrypted_content_REDACTED"));
    insta::assert_json_snapshot!("reasoning_to_openai_chat", chat_body["messages"]);
}

#[test]
fn transcripts_from_other_providers_are_replayed() {
    let messages = vec![
        Message::user("Look up the weather in Paris and Tokyo."),
        // Anthropic: signed thinking, redacted thinking, text, tool use.
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Two cities, two calls.".into(),
                    signature: Some("EqQBCkYIBxgCKkA...".into()),
                    redacted: false,
                }),
                Part::Thinking(ThinkingPart {
                    thinking: String::new(),
                    signature: Some("EmwKAhgBEgy3va3pzix".into()),
                    redacted: true,
                }),
                Part::text("Checking Paris."),
                Part::ToolCall(ToolCallPart::new(
                    "toolu_01A09q90qw90lq917835lq9",
                    "weather",
                    json!({"city": "Paris"}),
                )),
            ],
            "anthropic",
            "claude-sonnet-4-5",
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success(
            "toolu_01A09q90qw90lq917835lq9",
            "weather",
            "18°C, cloudy",
        )),
        // OpenAI Chat through a gateway: reasoning text, an id the Responses API would reject.
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Now Tokyo.".into(),
                    ..ThinkingPart::default()
                }),
                Part::ToolCall(ToolCallPart::new(
                    "weather:1|tokyo",
                    "weather",
                    json!({"city": "東京"}),
                )),
            ],
            "openai_chat",
            "llama3.2",
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success(
            "weather:1|tokyo",
            "weather",
            "24°C, sunny",
        )),
        // An errored turn is not replayed, nor the result answering its call.
        assistant(
            vec![Part::ToolCall(ToolCallPart::new(
                "call_x",
                "weather",
                json!({}),
            ))],
            "openai_chat",
            "llama3.2",
            StopReason::Error,
        ),
        Message::tool_result(ToolResultPart::error("call_x", "weather", "aborted")),
        Message::user("Summarize."),
    ];
    let body = offline().request_body(&ModelRequest::new(messages));
    let text = body.to_string();
    assert!(!text.contains("EqQBCkYIBxgCKkA") && !text.contains("EmwKAhgBEgy3va3pzix"));
    assert!(!text.contains("call_x"));
    assert!(!text.contains("\"type\":\"reasoning\""));
    insta::assert_json_snapshot!("foreign_transcript", body["input"]);
}

// ---------------------------------------------------------------------------------------------
// Client-executed tool search

fn tool(name: &str, description: &str, deferred: bool) -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder(name, description)
        .parameters(json!({
            "type": "object",
            "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
            "required": ["to"]
        }))
        .deferred(deferred)
        .blocking_handler(|_ctx: ToolContext<Deps>, _args: Value| "ok")
        .build()
        .unwrap()
}

fn search_registry() -> Registry<Deps> {
    let mut registry = Registry::new([
        tool("read_file", "Read a text file.", false),
        tool("send_email", "Send an email message to a recipient.", true),
        tool("create_invoice", "Create an invoice for a customer.", true),
    ])
    .unwrap();
    registry.add(bm25_tool_search(&registry, 3)).unwrap();
    registry
}

/// What the agent loop puts in a request for this registry and these loaded tools.
fn search_request<'a>(
    registry: &'a Registry<Deps>,
    loaded: &LoadedTools,
    messages: Vec<Message>,
) -> ModelRequest<'a> {
    let mut request = ModelRequest::new(messages);
    request.tools = registry
        .visible_schemas(loaded)
        .into_iter()
        .cloned()
        .collect::<Vec<_>>()
        .into();
    request.deferred_tools = registry
        .deferred_schemas()
        .into_iter()
        .cloned()
        .collect::<Vec<_>>()
        .into();
    let search = registry.tool_search().unwrap();
    request.tool_search = registry
        .schemas()
        .iter()
        .find(|s| s.name == search.name())
        .cloned();
    request
}

fn event(kind: &str, mut body: Value, seq: &mut u64) -> String {
    body["type"] = json!(kind);
    body["sequence_number"] = json!(*seq);
    *seq += 1;
    format!("event: {kind}\ndata: {body}\n\n")
}

/// A Responses stream with one client `tool_search_call`, shaped like the testkit mock's.
fn tool_search_stream(call_id: &str, arguments: Value) -> Vec<u8> {
    let mut seq = 0;
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": "resp_mock_0", "object": "response", "status": status, "model": MODEL,
               "output": output, "usage": usage, "error": null, "incomplete_details": null})
    };
    let added = json!({"id": "ts_mock_0_0", "type": "tool_search_call", "call_id": call_id,
                       "execution": "client", "arguments": {}, "status": "in_progress"});
    let done = json!({"id": "ts_mock_0_0", "type": "tool_search_call", "call_id": call_id,
                      "execution": "client", "arguments": arguments, "status": "completed"});
    let usage = json!({"input_tokens": 120, "input_tokens_details": {"cached_tokens": 0},
                       "output_tokens": 9, "total_tokens": 129});
    let mut body = String::new();
    body += &event(
        "response.created",
        json!({"response": response("in_progress", json!([]), Value::Null)}),
        &mut seq,
    );
    body += &event(
        "response.in_progress",
        json!({"response": response("in_progress", json!([]), Value::Null)}),
        &mut seq,
    );
    body += &event(
        "response.output_item.added",
        json!({"output_index": 0, "item": added}),
        &mut seq,
    );
    body += &event(
        "response.output_item.done",
        json!({"output_index": 0, "item": done}),
        &mut seq,
    );
    body += &event(
        "response.completed",
        json!({"response": response("completed", json!([done]), usage)}),
        &mut seq,
    );
    body.into_bytes()
}

#[tokio::test]
async fn tool_search_round_trip() {
    let registry = search_registry();
    let mut loaded = LoadedTools::new();
    let first = vec![Message::user("Email the invoice to ana@example.com.")];

    // 1. Deferred tools are declared as deferred, the search tool as client tool_search.
    let body = offline().request_body(&search_request(&registry, &loaded, first.clone()));
    let tools = body["tools"].as_array().unwrap();
    let kinds: Vec<(&str, Option<&str>, bool)> = tools
        .iter()
        .map(|t| {
            (
                t["type"].as_str().unwrap(),
                t["name"].as_str(),
                t["defer_loading"] == true,
            )
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("function", Some("read_file"), false),
            ("function", Some("send_email"), true),
            ("function", Some("create_invoice"), true),
            ("tool_search", None, false),
        ]
    );
    assert_eq!(tools[3]["execution"], "client");
    assert_eq!(
        tools[3]["parameters"],
        *registry.get("tool_search").unwrap().parameters()
    );
    insta::assert_json_snapshot!("tool_search_declared", body["tools"]);

    // 2. The model searches: the stream's tool_search_call becomes a call of the search tool.
    let server = FixtureServer::start(
        tool_search_stream("search_0_0", json!({"query": "send an email"})),
        1,
    )
    .await;
    let reply = stream_message(
        &adapter(&server.base_url),
        search_request(&registry, &loaded, first.clone()),
    )
    .await;
    assert_eq!(reply.stop_reason, Some(StopReason::ToolUse));
    let calls: Vec<ToolCallPart> = reply.tool_calls().cloned().collect();
    let mut want = ToolCallPart::new(
        "search_0_0",
        "tool_search",
        json!({"query": "send an email"}),
    );
    // The output item's id is kept for replay (see step 4).
    want.provider_data = Some(agentloop::transcript::ProviderData::new(
        "openai_responses",
        json!({"id": "ts_mock_0_0", "type": "tool_search_call"}),
    ));
    assert_eq!(calls, [want]);
    assert_eq!(server.requests.lock().unwrap()[0]["tools"], body["tools"]);

    // 3. The executor runs the search tool; its result loads the tool it names.
    let results = run_tools(&calls, &registry, &Arc::new(Deps::new()), None).await;
    assert_eq!(results.len(), 1);
    assert!(!results[0].is_error, "{:?}", results[0]);
    let names = search_result_names(&results[0].content).unwrap();
    assert_eq!(names, ["send_email"]);
    let load = registry.load_from_search_result(&mut loaded, &names);
    assert_eq!(load.loaded, ["send_email"]);

    // 4. Replayed: tool_search_call + tool_search_output carrying the loaded tools' schemas.
    let mut transcript = first;
    transcript.push(reply);
    transcript.push(Message::tool_result(results[0].clone()));
    let body = offline().request_body(&search_request(&registry, &loaded, transcript));
    let input = body["input"].as_array().unwrap();
    assert_eq!(input.len(), 3);
    assert_eq!(
        input[1],
        json!({"type": "tool_search_call", "call_id": "search_0_0", "execution": "client",
               "status": "completed", "arguments": {"query": "send an email"},
               "id": "ts_mock_0_0"})
    );
    assert_eq!(input[2]["type"], "tool_search_output");
    assert_eq!(input[2]["call_id"], "search_0_0");
    let loaded_tools = input[2]["tools"].as_array().unwrap();
    let send_email = registry.get("send_email").unwrap();
    assert_eq!(
        loaded_tools[0],
        json!({"type": "function", "name": "send_email", "description": send_email.description(),
               "parameters": send_email.parameters(), "defer_loading": true})
    );
    assert_eq!(loaded_tools.len(), 1);
    // A loaded tool stays declared as deferred (the declared tools never change).
    assert_eq!(
        body["tools"],
        offline().request_body(&search_request(&registry, &LoadedTools::new(), vec![]))["tools"]
    );
    insta::assert_json_snapshot!("tool_search_replayed", body["input"]);
}

#[test]
fn tool_search_results_that_load_nothing() {
    let registry = search_registry();
    let call = ToolCallPart::new("s1", "tool_search", json!({"query": "x"}));
    let replay = |result: ToolResultPart| {
        let transcript = vec![
            Message::user("hi"),
            assistant(
                vec![Part::ToolCall(call.clone())],
                "openai_responses",
                MODEL,
                StopReason::ToolUse,
            ),
            Message::tool_result(result),
        ];
        let request = search_request(&registry, &LoadedTools::new(), transcript);
        offline().request_body(&request)["input"][2].clone()
    };
    // An error, unreadable output, and names that are not deferred tools load nothing.
    for result in [
        ToolResultPart::error("s1", "tool_search", "Validation failed"),
        ToolResultPart::success("s1", "tool_search", "no idea"),
        ToolResultPart::success(
            "s1",
            "tool_search",
            r#"["read_file", "nope", "tool_search"]"#,
        ),
    ] {
        let item = replay(result.clone());
        assert_eq!(item["type"], "tool_search_output", "{result:?}");
        assert_eq!(item["tools"], json!([]), "{result:?}");
    }
    // Repeated names load once, in result order; the object shape is read too.
    let item = replay(ToolResultPart::success(
        "s1",
        "tool_search",
        r#"{"tools": [{"name": "create_invoice"}, "send_email", "create_invoice"]}"#,
    ));
    let names: Vec<&str> = item["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["create_invoice", "send_email"]);

    // Without deferred tools there is no tool search: the call is an ordinary function call.
    let mut request = ModelRequest::new(vec![
        Message::user("hi"),
        assistant(
            vec![Part::ToolCall(call.clone())],
            "openai_responses",
            MODEL,
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success("s1", "tool_search", "[]")),
    ]);
    request.tool_search = search_request(&registry, &LoadedTools::new(), vec![]).tool_search;
    let body = offline().request_body(&request);
    assert_eq!(body["input"][1]["type"], "function_call");
    assert_eq!(body["input"][2]["type"], "function_call_output");
    assert!(body.get("tools").is_none());
}

#[test]
fn the_prompt_cache_key_goes_out_unless_caching_is_off() {
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.prompt_cache_key = Some("session-42".into());
    let on = adapter("http://127.0.0.1:9/v1").request_body(&request);
    assert_eq!(on["prompt_cache_key"], "session-42");
    let off =
        OpenAiResponses::new(ProviderConfig::new("http://127.0.0.1:9/v1").prompt_cache(false))
            .request_body(&request);
    assert!(off.get("prompt_cache_key").is_none());
}
