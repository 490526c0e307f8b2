#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};

use super::request::build_body;
use super::stream::GeminiParser;
use super::*;
use crate::model::{ModelDelta, ReasoningLevel};
use crate::providers::core::StreamParser;
use crate::providers::fixtures::{assert_reads, recorded, text_with_data, thinking};
use crate::providers::parser_tests::{deltas, parse_sse};
use crate::providers::sse::SseDecoder;
use crate::transcript::{Message, Part, ProviderData, StopReason, ToolCallPart, ToolResultPart};

/// Runs chunks through the parser as one SSE body (CRLF framing, as Gemini sends it): the
/// deltas, and the terminal result when the body is complete at its end.
fn run(chunks: &[Value]) -> (Vec<ModelDelta>, Option<Result<Message, ModelError>>) {
    let body: String = chunks
        .iter()
        .map(|c| format!("data: {c}\r\n\r\n"))
        .collect();
    let (events, end) = parse_sse(&mut GeminiParser::new("gemini-test".into()), &body);
    (deltas(events), end)
}

fn chunk(parts: Value, finish: Option<&str>) -> Value {
    let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
    if let Some(reason) = finish {
        candidate["finishReason"] = json!(reason);
    }
    json!({"candidates": [candidate], "responseId": "resp-1", "modelVersion": "gemini-wire",
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 4}})
}

fn done(chunks: &[Value]) -> Message {
    match run(chunks).1 {
        Some(Ok(message)) => message,
        other => panic!("{other:?}"),
    }
}

fn signature_of(part: &Part) -> Option<String> {
    match part {
        Part::Text { provider_data, .. } => provider_data
            .as_ref()
            .and_then(|d| d.get(PROVIDER, "thoughtSignature"))
            .map(str::to_owned),
        Part::ToolCall(c) => c
            .provider_data
            .as_ref()
            .and_then(|d| d.get(PROVIDER, "thoughtSignature"))
            .map(str::to_owned),
        Part::Thinking(t) => t.signature.clone(),
        _ => None,
    }
}

#[test]
fn thoughts_calls_and_signatures_are_assembled() {
    let (deltas, terminal) = run(&[
        chunk(json!([{"text": "Plan: ", "thought": true}]), None),
        chunk(json!([{"text": "call it.", "thought": true}]), None),
        chunk(
            json!([
                {"functionCall": {"name": "lookup", "args": {"q": "x"}, "id": "call_9"},
                 "thoughtSignature": "sig-a"},
                {"functionCall": {"name": "other"}}
            ]),
            None,
        ),
        chunk(json!([{"text": ""}]), Some("STOP")),
    ]);
    let message = terminal.unwrap().unwrap();
    assert_eq!(
        message.stop_reason,
        Some(StopReason::ToolUse),
        "STOP with calls"
    );
    assert_eq!(message.provider.as_deref(), Some(PROVIDER));
    assert_eq!(message.model.as_deref(), Some("gemini-test"));
    assert_eq!(message.response_id.as_deref(), Some("resp-1"));
    assert_eq!(message.content.len(), 3, "{:?}", message.content);
    assert!(matches!(&message.content[0], Part::Thinking(t) if t.thinking == "Plan: call it."));
    let calls: Vec<_> = message.tool_calls().collect();
    assert_eq!(calls[0].id, "call_9", "Gemini's own id is used");
    assert_eq!(
        calls[0].provider_data,
        Some(ProviderData::new(
            PROVIDER,
            json!({"thoughtSignature": "sig-a", "id": "call_9"})
        ))
    );
    assert_eq!(calls[1].id, "resp-1-1", "synthesized from the response id");
    assert_eq!(
        calls[1].arguments,
        json!({}).into(),
        "no args: an empty object"
    );
    assert_eq!(calls[1].provider_data, None);
    assert_eq!(
        deltas,
        vec![
            ModelDelta::Thinking {
                delta: "Plan: ".into()
            },
            ModelDelta::Thinking {
                delta: "call it.".into()
            },
            ModelDelta::ToolCallStart {
                index: 0,
                id: "call_9".into(),
                name: "lookup".into()
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "{\"q\":\"x\"}".into(),
                partial: Some(json!({"q": "x"}))
            },
            ModelDelta::ToolCallEnd { index: 0 },
            ModelDelta::ToolCallStart {
                index: 1,
                id: "resp-1-1".into(),
                name: "other".into()
            },
            ModelDelta::ToolCallArguments {
                index: 1,
                delta: "{}".into(),
                partial: Some(json!({}))
            },
            ModelDelta::ToolCallEnd { index: 1 },
        ]
    );
}

#[test]
fn a_signature_on_a_trailing_empty_text_part_joins_the_text() {
    let message = done(&[
        chunk(json!([{"text": "There are "}]), None),
        chunk(json!([{"text": "3."}]), None),
        chunk(
            json!([{"text": "", "thoughtSignature": "sig-t"}]),
            Some("STOP"),
        ),
    ]);
    assert_eq!(message.content.len(), 1);
    assert_eq!(message.text(), "There are 3.");
    assert_eq!(signature_of(&message.content[0]).as_deref(), Some("sig-t"));
    assert_eq!(message.stop_reason, Some(StopReason::Stop));
    // A signature on the first text chunk stays when more text follows.
    let message = done(&[
        chunk(json!([{"text": "A", "thoughtSignature": "sig-1"}]), None),
        chunk(json!([{"text": "B"}]), Some("STOP")),
    ]);
    assert_eq!(message.text(), "AB");
    assert_eq!(signature_of(&message.content[0]).as_deref(), Some("sig-1"));
    // A signed empty part after a call is kept on its own.
    let message = done(&[
        chunk(json!([{"functionCall": {"name": "f", "args": {}}}]), None),
        chunk(
            json!([{"text": "", "thoughtSignature": "sig-2"}]),
            Some("STOP"),
        ),
    ]);
    assert_eq!(message.content.len(), 2);
    assert_eq!(signature_of(&message.content[1]).as_deref(), Some("sig-2"));
}

#[test]
fn a_finish_reason_mid_stream_does_not_end_it_and_a_cut_stream_is_incomplete() {
    let (_, terminal) = run(&[
        chunk(
            json!([{"executableCode": {"code": "print(1)"}}]),
            Some("STOP"),
        ),
        chunk(json!([{"codeExecutionResult": {"output": "1"}}]), None),
        chunk(json!([{"text": "one"}]), Some("STOP")),
    ]);
    let message = terminal.unwrap().unwrap();
    assert_eq!(message.text(), "one", "text after the first finish is kept");
    let (_, terminal) = run(&[chunk(json!([{"text": "half"}]), None)]);
    assert!(terminal.is_none(), "no finishReason: not complete");
}

#[test]
fn usage_counts_thoughts_as_output_and_cached_tokens_as_cache_reads() {
    let mut last = chunk(json!([{"text": "ok"}]), Some("STOP"));
    last["usageMetadata"] = json!({"promptTokenCount": 100, "cachedContentTokenCount": 60,
        "toolUsePromptTokenCount": 5, "candidatesTokenCount": 7, "thoughtsTokenCount": 30});
    let partial_usage = json!({"candidates": [], "usageMetadata": {"trafficType": "ON_DEMAND"}});
    let message = done(&[chunk(json!([]), None), last, partial_usage]);
    let usage = message.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.output_tokens
        ),
        (45, 60, 37)
    );
}

#[test]
fn finish_reasons_map_to_stop_reasons() {
    let unknown = "SOMETHING_NEW";
    for (want, reasons) in [
        (StopReason::Stop, &["STOP", "OTHER", unknown][..]),
        (StopReason::Length, &["MAX_TOKENS"]),
        (
            StopReason::Refusal,
            &["SAFETY", "RECITATION", "PROHIBITED_CONTENT"],
        ),
    ] {
        for reason in reasons {
            let message = done(&[chunk(json!([{"text": "x"}]), Some(reason))]);
            assert_eq!(message.stop_reason, Some(want), "{reason}");
        }
    }
    let mut malformed = chunk(json!([]), Some("MALFORMED_FUNCTION_CALL"));
    malformed["candidates"][0]["finishMessage"] = json!("Malformed function call: print(");
    let (_, terminal) = run(&[chunk(json!([{"text": "a"}]), None), malformed]);
    assert_eq!(
        terminal.unwrap().err(),
        Some(ModelError::Provider {
            code: "MALFORMED_FUNCTION_CALL".into(),
            message: "Malformed function call: print(".into()
        })
    );
    let blocked = json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"},
        "usageMetadata": {"promptTokenCount": 9, "totalTokenCount": 9}});
    let message = done(&[blocked]);
    assert_eq!(message.stop_reason, Some(StopReason::Refusal));
    assert!(message.content.is_empty());
    assert_eq!(message.usage.map(|u| u.input_tokens), Some(9));
}

#[test]
fn an_error_chunk_is_a_provider_error_and_garbage_a_stream_error() {
    let (_, terminal) = run(&[
        chunk(json!([{"text": "a"}]), None),
        json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}),
    ]);
    assert_eq!(
        terminal.unwrap().err(),
        Some(ModelError::Provider {
            code: "UNAVAILABLE".into(),
            message: "The model is overloaded.".into()
        })
    );
    let mut parser = GeminiParser::new("m".into());
    let event = crate::providers::sse::SseEvent {
        data: "{not json".into(),
        ..Default::default()
    };
    let error = parser.on_event(event, &mut Vec::new()).unwrap_err();
    assert!(matches!(error, ModelError::Stream { message: m, .. } if m.contains("{not json")));
}

#[test]
fn the_wire_model_is_used_when_the_request_named_none() {
    let mut parser = GeminiParser::new(String::new());
    let body = format!(
        "data: {}\r\n\r\n",
        chunk(json!([{"text": "x"}]), Some("STOP"))
    );
    let mut events = Vec::new();
    SseDecoder::new()
        .push(body.as_bytes(), &mut events)
        .unwrap();
    for e in events {
        let terminal = parser.on_event(e, &mut Vec::new()).unwrap();
        assert!(!terminal, "Gemini has no terminal event: the body's end is");
    }
    assert!(parser.complete_at_eof());
    assert_eq!(
        parser.finish().unwrap().model.as_deref(),
        Some("gemini-wire")
    );
}

fn gemini_message(parts: Vec<Part>, model: &str) -> Message {
    recorded(PROVIDER, model, parts, StopReason::ToolUse)
}

fn signed_call(id: &str, name: &str, data: Value) -> Part {
    let mut call = ToolCallPart::new(id, name, json!({"k": id}));
    call.provider_data = Some(ProviderData::new(PROVIDER, data));
    Part::ToolCall(call)
}

fn body_for(messages: Vec<Message>, model: &str) -> Value {
    let config = ProviderConfig::new("http://x").model(model);
    build_body(&config, &ModelRequest::new(messages)).1
}

#[test]
fn signatures_go_back_on_their_parts_and_unsigned_calls_get_the_sentinel() {
    let history = vec![
        Message::user("q"),
        gemini_message(
            vec![
                thinking("plan", Some("sig-think")),
                text_with_data(
                    "Calling.",
                    ProviderData::new(PROVIDER, json!({"thoughtSignature": "sig-text"})),
                ),
                signed_call(
                    "c1",
                    "f",
                    json!({"thoughtSignature": "sig-call", "id": "c1"}),
                ),
                Part::ToolCall(ToolCallPart::new("c2", "g", json!({}))),
            ],
            "gemini-3-pro",
        ),
        Message::tool_result(ToolResultPart::success("c1", "f", "one")),
        Message::tool_result(ToolResultPart::error("c2", "g", "failed")),
        gemini_message(
            vec![Part::ToolCall(ToolCallPart::new("c3", "h", json!({})))],
            "gemini-3-pro",
        ),
        Message::tool_result(ToolResultPart::success("c3", "h", "three")),
    ];
    let body = body_for(history.clone(), "gemini-3-pro");
    assert_eq!(
        body["contents"],
        json!([
            {"role": "user", "parts": [{"text": "q"}]},
            {"role": "model", "parts": [
                {"text": "plan", "thought": true, "thoughtSignature": "sig-think"},
                {"text": "Calling.", "thoughtSignature": "sig-text"},
                {"functionCall": {"name": "f", "args": {"k": "c1"}, "id": "c1"},
                 "thoughtSignature": "sig-call"},
                {"functionCall": {"name": "g", "args": {}}},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "f", "response": {"output": "one"}, "id": "c1"}},
                {"functionResponse": {"name": "g", "response": {"error": "failed"}}},
            ]},
            {"role": "model", "parts": [
                {"functionCall": {"name": "h", "args": {}},
                 "thoughtSignature": SKIP_SIGNATURE},
            ]},
            {"role": "user", "parts": [
                {"functionResponse": {"name": "h", "response": {"output": "three"}}},
            ]},
        ])
    );
    // Another Gemini model: thinking becomes text, signatures and ids are dropped, and the
    // calls get the sentinel.
    let body = body_for(history, "gemini-2.5-flash");
    let model_turn = &body["contents"][1]["parts"];
    assert_eq!(model_turn[0], json!({"text": "plan"}));
    assert_eq!(model_turn[1], json!({"text": "Calling."}));
    assert_eq!(
        model_turn[2],
        json!({"functionCall": {"name": "f", "args": {"k": "c1"}}, "thoughtSignature": SKIP_SIGNATURE})
    );
    assert_eq!(
        model_turn[3],
        json!({"functionCall": {"name": "g", "args": {}}, "thoughtSignature": SKIP_SIGNATURE}),
        "no call of the step is signed any more: each gets the sentinel"
    );
    assert!(
        body["contents"][2]["parts"][0]["functionResponse"]
            .get("id")
            .is_none()
    );
}

#[test]
fn system_tools_images_and_generation_config() {
    let config = ProviderConfig::new("http://x").model("models/gemini-2.5-flash");
    let mut request = ModelRequest::new(vec![Message::user_parts(vec![
        Part::text("look"),
        Part::Image(crate::transcript::ImagePart {
            media_type: "image/png".into(),
            data: "AAAA".into(),
        }),
    ])]);
    request.system_prompt = Some("Be brief.".into());
    request.temperature = Some(0.2);
    request.max_output_tokens = Some(100);
    request.reasoning = Some(ReasoningLevel::Low);
    let tools = [crate::tooling::ToolSchema {
        name: "f".into(),
        description: "does f".into(),
        parameters: json!({"type": "object", "properties": {"a": {"type": "string"}}}),
    }];
    request.tools = std::borrow::Cow::Borrowed(&tools);
    let (model, body) = build_body(&config, &request);
    assert_eq!(model, "models/gemini-2.5-flash");
    assert_eq!(model_id(&model), "gemini-2.5-flash");
    assert_eq!(
        body,
        json!({
            "contents": [{"role": "user", "parts": [
                {"text": "look"},
                {"inlineData": {"mimeType": "image/png", "data": "AAAA"}},
            ]}],
            "systemInstruction": {"parts": [{"text": "Be brief."}]},
            "tools": [{"functionDeclarations": [{"name": "f", "description": "does f",
                "parametersJsonSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}]}],
            "generationConfig": {
                "temperature": 0.2,
                "maxOutputTokens": 100,
                "thinkingConfig": {"includeThoughts": true, "thinkingBudget": 2048},
            },
        })
    );
    let bare = build_body(&config, &ModelRequest::new(vec![Message::user("hi")])).1;
    assert!(bare.get("generationConfig").is_none());
    assert!(bare.get("tools").is_none());
}

#[test]
fn thinking_levels_follow_the_model_generation() {
    let level = |model: &str, l: ReasoningLevel| thinking_config(model, l);
    assert_eq!(
        level("gemini-3-pro-preview", ReasoningLevel::Off),
        json!({"thinkingLevel": "low"})
    );
    assert_eq!(
        level("gemini-3-flash-preview", ReasoningLevel::Medium),
        json!({"includeThoughts": true, "thinkingLevel": "medium"})
    );
    assert_eq!(
        level("models/gemini-3-flash-preview", ReasoningLevel::Minimal),
        json!({"includeThoughts": true, "thinkingLevel": "minimal"})
    );
    assert_eq!(
        level("gemini-2.5-pro", ReasoningLevel::Off),
        json!({"thinkingBudget": 128})
    );
    assert_eq!(
        level("gemini-2.5-flash", ReasoningLevel::Xhigh),
        json!({"includeThoughts": true, "thinkingBudget": 24576})
    );
}

#[test]
fn the_path_carries_the_version_once() {
    assert_eq!(
        models_path("https://generativelanguage.googleapis.com"),
        "v1beta/models?alt=sse"
    );
    assert_eq!(
        models_path("https://proxy.example/v1beta/"),
        "models?alt=sse"
    );
    assert_eq!(models_path("https://proxy.example/v1"), "models?alt=sse");
}

#[test]
fn telemetry_and_prices_know_the_provider() {
    assert_eq!(crate::telemetry::provider_name(PROVIDER), "gcp.gemini");
    assert_eq!(crate::cost::price_provider_id(PROVIDER), "google");
}

#[test]
fn from_env_reads_the_variables_of_googles_sdks() {
    // GOOGLE_API_KEY wins over GEMINI_API_KEY; GOOGLE_GEMINI_BASE_URL is the base's fallback.
    let fallback_base = [
        ("GOOGLE_GEMINI_BASE_URL", "https://gw.example"),
        ("GEMINI_API_KEY", "gemini-key"),
        ("GOOGLE_API_KEY", "google-key"),
    ];
    let empty_google_key = [
        ("GEMINI_BASE_URL", "https://first.example"),
        ("GOOGLE_GEMINI_BASE_URL", "https://second.example"),
        ("GOOGLE_API_KEY", ""),
        ("GEMINI_API_KEY", "gemini-key"),
    ];
    assert_reads(
        &ENV,
        &[
            (&fallback_base, "https://gw.example", Some("google-key")),
            (
                &empty_google_key,
                "https://first.example",
                Some("gemini-key"),
            ),
            (&[], DEFAULT_BASE_URL, None),
        ],
    );
}
