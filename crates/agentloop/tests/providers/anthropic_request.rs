//! The Anthropic Messages request body: snapshots of what the adapter sends (system prompt and
//! cache markers, tools, tool results merged into one user turn, images, thinking budgets, and
//! transcripts replayed from the same or another provider), with the rules asserted explicitly
//! as well so a wrong snapshot cannot be accepted by accident.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support::REASONING_LEVELS;
use agentloop::model::{ModelRequest, ReasoningLevel};
use agentloop::providers::{Anthropic, ProviderConfig};
use agentloop::tooling::ToolSchema;
use agentloop::transcript::{
    ImagePart, Message, Part, StopReason, ThinkingPart, ToolArguments, ToolCallPart, ToolResultPart,
};
use insta::assert_json_snapshot;
use serde_json::{Value, json};

const MODEL: &str = "claude-sonnet-4-5";

fn adapter() -> Anthropic {
    Anthropic::new(
        ProviderConfig::new("https://api.anthropic.invalid")
            .api_key("sk-ant-never-in-bodies")
            .model(MODEL),
    )
}

fn body(request: &ModelRequest<'_>) -> Value {
    let body = adapter().request_body(request);
    assert!(
        !body.to_string().contains("sk-ant"),
        "no credentials in bodies"
    );
    body
}

fn assistant(parts: Vec<Part>, stop: StopReason, provider: &str, model: &str) -> Message {
    let mut m = Message::assistant(parts, stop);
    m.provider = Some(provider.into());
    m.model = Some(model.into());
    m
}

fn ours(parts: Vec<Part>, stop: StopReason) -> Message {
    assistant(parts, stop, "anthropic", MODEL)
}

fn call(id: &str, name: &str, args: Value) -> Part {
    Part::ToolCall(ToolCallPart::new(id, name, args))
}

fn image(media_type: &str, data: &str) -> ImagePart {
    ImagePart {
        media_type: media_type.into(),
        data: data.into(),
    }
}

fn tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "read_file".into(),
            description: "Read a file from the workspace.".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string", "description": "Relative path."}},
                "required": ["path"]
            }),
        },
        ToolSchema {
            name: "now".into(),
            description: "The current time.".into(),
            parameters: json!({"type": "object", "properties": {}}),
        },
    ]
}

/// Every `cache_control` marker in the body, as JSON pointers.
fn cache_markers(value: &Value, path: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                if k == "cache_control" {
                    assert_eq!(*v, json!({"type": "ephemeral"}));
                    out.push(path.clone());
                } else {
                    cache_markers(v, format!("{path}/{k}"), out);
                }
            }
        }
        Value::Array(items) => {
            for (i, v) in items.iter().enumerate() {
                cache_markers(v, format!("{path}/{i}"), out);
            }
        }
        _ => {}
    }
}

fn markers(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    cache_markers(body, String::new(), &mut out);
    out
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn system_prompt_tools_and_temperature() {
    let messages = vec![Message::user("What time is it?")];
    let tools = tools();
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("You are terse.".into());
    request.tools = tools.into();
    request.temperature = Some(0.2);
    let body = body(&request);
    assert_eq!(body["temperature"], json!(0.2));
    assert_eq!(
        body["system"],
        json!([{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}])
    );
    assert_eq!(
        body["tools"][0]["input_schema"]["required"],
        json!(["path"])
    );
    assert_eq!(body["max_tokens"], 8192);
    assert!(body.get("thinking").is_none());
    assert_json_snapshot!("system_prompt_tools_and_temperature", body);
}

#[test]
fn consecutive_tool_results_form_one_user_turn() {
    let messages = vec![
        Message::user("Read a.txt and tell me the time."),
        ours(
            vec![
                Part::text("Reading both."),
                call("toolu_01", "read_file", json!({"path": "a.txt"})),
                call("toolu_02", "now", json!({})),
            ],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success("toolu_01", "read_file", "alpha")),
        Message::tool_result(ToolResultPart::error(
            "toolu_02",
            "now",
            "Tool 'now' timed out after 5s.",
        )),
        Message::user("Thanks."),
    ];
    let body = body(&ModelRequest::new(messages));
    assert_eq!(roles(&body), ["user", "assistant", "user", "user"]);
    let results = body["messages"][2]["content"].as_array().unwrap();
    assert_eq!(results.len(), 2, "both results in one turn");
    assert_eq!(results[0]["tool_use_id"], "toolu_01");
    assert_eq!(results[1]["tool_use_id"], "toolu_02");
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(markers(&body), ["/messages/3/content/0"]);
    assert_json_snapshot!("consecutive_tool_results_form_one_user_turn", body);
}

#[test]
fn images_in_user_messages_and_tool_results() {
    let messages = vec![
        Message::user_parts(vec![
            Part::text("What is in this picture?"),
            Part::Image(image("image/png", "iVBORw0KGgo=")),
        ]),
        ours(
            vec![call("toolu_a", "screenshot", json!({}))],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart {
            images: vec![image("image/jpeg", "/9j/4AAQ")],
            ..ToolResultPart::success("toolu_a", "screenshot", "A screenshot of the desktop.")
        }),
        ours(
            vec![call("toolu_b", "screenshot", json!({}))],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart {
            images: vec![image("image/webp", "UklGRg==")],
            ..ToolResultPart::success("toolu_b", "screenshot", "")
        }),
    ];
    let body = body(&ModelRequest::new(messages));
    assert_eq!(
        body["messages"][0]["content"][1],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}})
    );
    let first = &body["messages"][2]["content"][0];
    assert_eq!(first["content"][0]["type"], "text");
    assert_eq!(first["content"][1]["source"]["media_type"], "image/jpeg");
    let image_only = &body["messages"][4]["content"][0];
    assert_eq!(
        image_only["content"].as_array().unwrap().len(),
        1,
        "no empty text block"
    );
    assert_json_snapshot!("images_in_user_messages_and_tool_results", body);
}

#[test]
fn thinking_budget_follows_the_reasoning_level() {
    let mut table = serde_json::Map::new();
    for (name, level) in REASONING_LEVELS {
        let mut request = ModelRequest::new(vec![Message::user("hi")]);
        request.reasoning = level;
        request.temperature = Some(0.5);
        let body = body(&request);
        if let Some(budget) = body.get("thinking") {
            assert!(body.get("temperature").is_none(), "{name}: no temperature");
            assert!(
                budget["budget_tokens"].as_u64().unwrap() < body["max_tokens"].as_u64().unwrap(),
                "{name}: the budget fits under max_tokens"
            );
        }
        table.insert(
            name.into(),
            json!({
                "max_tokens": body["max_tokens"],
                "thinking": body.get("thinking"),
                "temperature": body.get("temperature"),
            }),
        );
    }
    // An explicit output limit wins; the budget shrinks to leave room for the answer.
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    request.reasoning = Some(ReasoningLevel::High);
    request.max_output_tokens = Some(4000);
    let body = body(&request);
    assert_eq!(body["max_tokens"], 4000);
    assert_eq!(body["thinking"]["budget_tokens"], 4000 - 1024);
    table.insert(
        "high, max_output_tokens 4000".into(),
        json!({"max_tokens": body["max_tokens"], "thinking": body["thinking"]}),
    );
    assert_eq!(table["off"]["thinking"], Value::Null);
    assert_eq!(table["off"]["temperature"], 0.5);
    assert_eq!(table["medium"]["thinking"]["budget_tokens"], 8192);
    assert_json_snapshot!("thinking_budget_follows_the_reasoning_level", table);
}

#[test]
fn only_the_last_user_turn_carries_a_cache_marker() {
    let messages = vec![
        Message::user("First question."),
        ours(vec![Part::text("First answer.")], StopReason::Stop),
        Message::user_parts(vec![
            Part::text("Second question, with a picture."),
            Part::Image(image("image/png", "AAAA")),
        ]),
        ours(vec![Part::text("Second answer.")], StopReason::Stop),
        Message::user("Third question."),
    ];
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("Be brief.".into());
    let plain = body(&request);
    assert_eq!(markers(&plain), ["/messages/4/content/0", "/system/0"]);

    // When the conversation ends with tool results, their turn's last block carries it.
    let messages = vec![
        Message::user("Time?"),
        ours(
            vec![
                call("toolu_1", "now", json!({})),
                call("toolu_2", "now", json!({})),
            ],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success("toolu_1", "now", "12:00")),
        Message::tool_result(ToolResultPart::success("toolu_2", "now", "12:00")),
    ];
    let with_results = body(&ModelRequest::new(messages));
    assert_eq!(markers(&with_results), ["/messages/2/content/1"]);
    assert_json_snapshot!(
        "only_the_last_user_turn_carries_a_cache_marker",
        json!({"plain": plain, "ending_with_tool_results": with_results})
    );
}

#[test]
fn same_provider_replay_keeps_signatures_and_redacted_thinking() {
    let thinking = |text: &str, signature: &str| {
        Part::Thinking(ThinkingPart {
            thinking: text.into(),
            signature: Some(signature.into()),
            redacted: false,
        })
    };
    let redacted = Part::Thinking(ThinkingPart {
        thinking: String::new(),
        signature: Some("EmwKAhgBEgy3va".into()),
        redacted: true,
    });
    let parts = |id: &str| {
        vec![
            thinking("The user wants the time.", "sig-abc"),
            redacted.clone(),
            Part::text("Checking."),
            call(id, "now", json!({})),
        ]
    };
    let messages = vec![
        Message::user("Time?"),
        // Same provider, another model: signatures are not valid there.
        assistant(
            parts("toolu_1"),
            StopReason::ToolUse,
            "anthropic",
            "claude-opus-4-1",
        ),
        Message::tool_result(ToolResultPart::success("toolu_1", "now", "12:00")),
        ours(parts("toolu_2"), StopReason::ToolUse),
        Message::tool_result(ToolResultPart::success("toolu_2", "now", "12:01")),
    ];
    let mut request = ModelRequest::new(messages);
    request.reasoning = Some(ReasoningLevel::Low);
    let body = body(&request);
    let other_model = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(
        other_model[0],
        json!({"type": "text", "text": "The user wants the time."})
    );
    assert_eq!(other_model.len(), 3, "redacted thinking dropped");
    let same = &body["messages"][3]["content"];
    assert_eq!(
        same[0],
        json!({"type": "thinking", "thinking": "The user wants the time.", "signature": "sig-abc"})
    );
    assert_eq!(
        same[1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va"})
    );
    assert_eq!(
        body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048}),
        "the tool loop kept its signed thinking"
    );
    assert_json_snapshot!(
        "same_provider_replay_keeps_signatures_and_redacted_thinking",
        body
    );
}

#[test]
fn a_transcript_from_openai_chat_is_replayed_by_the_rules() {
    let messages = vec![
        Message::user("List the files, then read the first one."),
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "I should list first.".into(),
                    signature: None,
                    redacted: false,
                }),
                Part::text("Listing."),
                call("call|abc/1", "list_dir", json!({"path": "."})),
                call("call_2", "read_file", json!({"path": "a.txt"})),
                Part::ToolCall(ToolCallPart {
                    id: "call_3".into(),
                    tool_name: "read_file".into(),
                    arguments: ToolArguments::Unparsed("{\"path\": \"b.t".into()),
                    provider_data: None,
                }),
            ],
            StopReason::ToolUse,
            "openai_chat",
            "gpt-4o",
        ),
        Message::tool_result(ToolResultPart::success(
            "call|abc/1",
            "list_dir",
            "a.txt\nb.txt",
        )),
        // call_2 never got a result (the process died); call_3 got the malformed-arguments error.
        Message::tool_result(ToolResultPart::error(
            "call_3",
            "read_file",
            "Malformed arguments.",
        )),
        assistant(
            vec![
                Part::text("Reading a.t"),
                call("call_4", "read_file", json!({"path": "a.txt"})),
            ],
            StopReason::Error,
            "openai_chat",
            "gpt-4o",
        ),
        Message::tool_result(ToolResultPart::error("call_4", "read_file", "aborted")),
        Message::user("Continue, please."),
    ];
    let body = body(&ModelRequest::new(messages));
    assert_eq!(roles(&body), ["user", "assistant", "user", "user"]);
    let replayed = body["messages"][1]["content"].as_array().unwrap();
    assert_eq!(
        replayed[0],
        json!({"type": "text", "text": "I should list first."}),
        "foreign thinking becomes text"
    );
    assert_eq!(replayed[2]["id"], "call_abc_1", "ids normalised");
    assert_eq!(
        replayed[4]["input"],
        json!({}),
        "unparsed arguments sent as {{}}"
    );
    let results = body["messages"][2]["content"].as_array().unwrap();
    let ids: Vec<_> = results.iter().map(|r| r["tool_use_id"].clone()).collect();
    assert_eq!(ids, [json!("call_abc_1"), json!("call_3"), json!("call_2")]);
    assert_eq!(
        results[2]["content"][0]["text"], "No result provided",
        "the dangling call gets a synthetic result"
    );
    assert_eq!(results[2]["is_error"], true);
    assert!(
        !body.to_string().contains("call_4") && !body.to_string().contains("Reading a.t"),
        "the errored assistant message and its result are not replayed"
    );
    assert_json_snapshot!(
        "a_transcript_from_openai_chat_is_replayed_by_the_rules",
        body
    );
}

#[test]
fn thinking_stays_off_in_a_tool_loop_that_lost_its_thinking_block() {
    // Handed over from OpenAI mid tool loop: the newest assistant turn has tool calls but no
    // signed thinking, which the API rejects when thinking is enabled.
    let handoff = vec![
        Message::user("Time?"),
        assistant(
            vec![
                Part::Thinking(ThinkingPart {
                    thinking: "Call now.".into(),
                    ..ThinkingPart::default()
                }),
                call("call_1", "now", json!({})),
            ],
            StopReason::ToolUse,
            "openai_chat",
            "gpt-4o",
        ),
        Message::tool_result(ToolResultPart::success("call_1", "now", "12:00")),
    ];
    let mut request = ModelRequest::new(handoff.clone());
    request.reasoning = Some(ReasoningLevel::Medium);
    request.temperature = Some(0.3);
    let in_loop = body(&request);
    assert!(in_loop.get("thinking").is_none(), "{in_loop}");
    assert_eq!(in_loop["temperature"], json!(0.3));

    // Once the newest assistant turn has no tool calls, thinking is back.
    let mut after = handoff;
    after.push(assistant(
        vec![Part::text("It is noon.")],
        StopReason::Stop,
        "openai_chat",
        "gpt-4o",
    ));
    after.push(Message::user("And tomorrow?"));
    let mut request = ModelRequest::new(after);
    request.reasoning = Some(ReasoningLevel::Medium);
    request.temperature = Some(0.3);
    let next_turn = body(&request);
    assert_eq!(next_turn["thinking"]["budget_tokens"], 8192);
    assert!(next_turn.get("temperature").is_none());
}

#[test]
fn prompt_cache_breakpoints_cover_system_tools_and_the_newest_user_turn_and_can_be_switched_off() {
    let messages = vec![
        Message::user("Read a.txt"),
        ours(
            vec![call("toolu_1", "read_file", json!({"path": "a.txt"}))],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::success("toolu_1", "read_file", "hello")),
        Message::user("And the time?"),
    ];
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("You are terse.".into());
    request.tools = tools().into();
    request.prompt_cache_key = Some("session-1".into());
    let on = body(&request);
    assert_eq!(
        markers(&on),
        ["/messages/3/content/0", "/system/0", "/tools/1"],
        "{on:#}"
    );
    assert!(on.get("prompt_cache_key").is_none(), "OpenAI only");
    let off = Anthropic::new(
        ProviderConfig::new("https://api.anthropic.invalid")
            .model(MODEL)
            .prompt_cache(false),
    )
    .request_body(&request);
    assert!(markers(&off).is_empty(), "{off:#}");
}
