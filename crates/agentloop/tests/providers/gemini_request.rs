//! The Gemini request body: snapshots of what the adapter sends (system instruction, tools,
//! generation config, images, function responses grouped per turn, thought signatures replayed
//! on their parts, the sentinel for unsigned calls, transcripts from another provider), with the
//! rules asserted explicitly as well so a wrong snapshot cannot be accepted by accident.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop::model::{ModelRequest, ReasoningLevel};
use agentloop::providers::gemini::SKIP_SIGNATURE;
use agentloop::providers::{Gemini, ProviderConfig};
use agentloop::tooling::ToolSchema;
use agentloop::transcript::{
    ImagePart, Message, Part, ProviderData, StopReason, ThinkingPart, ToolArguments, ToolCallPart,
    ToolResultPart,
};
use insta::assert_json_snapshot;
use serde_json::{Value, json};

const MODEL: &str = "gemini-3-pro-preview";

fn body(request: &ModelRequest<'_>) -> Value {
    let adapter = Gemini::new(
        ProviderConfig::new("https://generativelanguage.invalid")
            .api_key("AIza-never-in-bodies")
            .model(MODEL),
    );
    let body = adapter.request_body(request);
    assert!(
        !body.to_string().contains("AIza"),
        "no credentials in bodies"
    );
    body
}

fn assistant(parts: Vec<Part>, provider: &str, model: &str) -> Message {
    let mut m = Message::assistant(parts, StopReason::ToolUse);
    m.provider = Some(provider.into());
    m.model = Some(model.into());
    m
}

fn signed(signature: &str) -> Option<ProviderData> {
    Some(ProviderData::new(
        "gemini",
        json!({ "thoughtSignature": signature }),
    ))
}

fn signed_call(id: &str, name: &str, args: Value, signature: &str) -> Part {
    let mut call = ToolCallPart::new(id, name, args);
    call.provider_data = signed(signature);
    Part::ToolCall(call)
}

fn tools() -> Vec<ToolSchema> {
    vec![ToolSchema {
        name: "read_file".into(),
        description: "Read a file from the workspace.".into(),
        parameters: json!({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Relative path."}},
            "required": ["path"],
            "additionalProperties": false
        }),
    }]
}

/// A Gemini conversation: thinking, signed text, parallel calls (only the first signed, as
/// Gemini signs them), results with an error and an image, then a signed answer.
fn own_transcript() -> Vec<Message> {
    vec![
        Message::user_parts(vec![
            Part::text("What is in a.txt and b.png?"),
            Part::Image(ImagePart {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }),
        ]),
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Read both files.".into(),
                    signature: None,
                    redacted: false,
                }),
                Part::Text {
                    text: "Reading them.".into(),
                    provider_data: None,
                },
                signed_call("c1", "read_file", json!({"path": "a.txt"}), "sig-call-1"),
                Part::ToolCall(ToolCallPart::new(
                    "c2",
                    "read_file",
                    json!({"path": "b.png"}),
                )),
            ],
            "gemini",
            MODEL,
        ),
        Message::tool_result(ToolResultPart::success("c1", "read_file", "hello")),
        Message::tool_result(ToolResultPart {
            images: vec![ImagePart {
                media_type: "image/png".into(),
                data: "iVBORw0KGgo=".into(),
            }],
            ..ToolResultPart::success("c2", "read_file", "an image")
        }),
        assistant(
            vec![Part::Text {
                text: "a.txt says hello; b.png is an image.".into(),
                provider_data: signed("sig-text-2"),
            }],
            "gemini",
            MODEL,
        ),
        Message::user("Thanks. And c.txt?"),
    ]
}

#[test]
fn own_transcript_with_signatures_tools_and_config() {
    let messages = own_transcript();
    let tools = tools();
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("You are terse.".into());
    request.tools = tools.into();
    request.temperature = Some(0.2);
    request.max_output_tokens = Some(2048);
    request.reasoning = Some(ReasoningLevel::Medium);
    let body = body(&request);

    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<&str> = contents
        .iter()
        .map(|c| c["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "model", "user", "model", "user"]);
    let calls = contents[1]["parts"].as_array().unwrap();
    assert_eq!(calls[2]["thoughtSignature"], "sig-call-1");
    assert!(
        calls[3].get("thoughtSignature").is_none(),
        "only the first call of a step is signed; the others go back as they came"
    );
    let results = contents[2]["parts"].as_array().unwrap();
    assert_eq!(
        results.len(),
        3,
        "both responses in one content, then the image"
    );
    assert_eq!(
        contents[3]["parts"][0]["thoughtSignature"], "sig-text-2",
        "the answer's signature goes back on its text"
    );
    assert_eq!(
        body["generationConfig"]["thinkingConfig"],
        json!({"includeThoughts": true, "thinkingLevel": "high"})
    );
    assert_json_snapshot!("own_transcript_with_signatures_tools_and_config", body);
}

#[test]
fn a_transcript_from_another_provider_gets_the_sentinel_and_loses_foreign_data() {
    let mut foreign_call = ToolCallPart::new("call|1", "read_file", json!({"path": "a.txt"}));
    foreign_call.provider_data = Some(ProviderData::new(
        "openai_responses",
        json!({"id": "fc_1", "type": "function_call"}),
    ));
    let mut broken = ToolCallPart::new("call_2", "read_file", json!({}));
    broken.arguments = ToolArguments::Unparsed("{\"path\": \"b".into());
    let messages = vec![
        Message::user("Read a.txt and b.txt"),
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Both files.".into(),
                    signature: Some("{\"id\":\"rs_1\",\"encrypted_content\":\"x\"}".into()),
                    redacted: false,
                }),
                Part::Text {
                    text: "Reading.".into(),
                    provider_data: Some(ProviderData::new(
                        "openai_responses",
                        json!({"id": "msg_1", "type": "message"}),
                    )),
                },
                Part::ToolCall(foreign_call),
                Part::ToolCall(broken),
            ],
            "openai_responses",
            "gpt-5",
        ),
        Message::tool_result(ToolResultPart::success("call|1", "read_file", "hello")),
        // The second call never got a result: a synthetic one is added.
        Message::user("Go on."),
    ];
    let body = body(&ModelRequest::new(messages));
    let text = body.to_string();
    for gone in ["fc_1", "msg_1", "rs_1", "encrypted_content"] {
        assert!(!text.contains(gone), "{gone}: {text}");
    }
    let model_turn = &body["contents"][1]["parts"];
    assert_eq!(model_turn[0], json!({"text": "Both files."}));
    assert_eq!(model_turn[2]["thoughtSignature"], SKIP_SIGNATURE);
    assert_eq!(
        model_turn[3]["thoughtSignature"], SKIP_SIGNATURE,
        "every unsigned call of a foreign step"
    );
    assert_eq!(model_turn[3]["functionCall"]["args"], json!({}));
    let responses = body["contents"][2]["parts"].as_array().unwrap();
    assert_eq!(responses.len(), 2, "one response per call");
    assert_eq!(
        responses[1]["functionResponse"]["response"],
        json!({"error": "No result provided"})
    );
    assert_json_snapshot!("foreign_transcript", body);
}
