//! What the OpenAI Chat Completions adapter sends: a request-body snapshot covering every message
//! shape (system prompt, user text and images, assistant text with several parts, tool calls with
//! parsed and unparsed arguments, tool results with images, custom messages), tools and sampling
//! options; and a check that the bytes on the wire are exactly that body, with the configured
//! headers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop::model::{Model, ModelEvent, ModelRequest, ReasoningLevel};
use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::transcript::{
    Message, Part, Role, StopReason, ToolArguments, ToolCallPart, ToolResultPart,
};
use agentloop_testkit::{MockServer, Script, Turn};
use futures::StreamExt;
use serde_json::json;

use crate::support::{png_image, read_file_and_screenshot_tools, screenshot_result};

fn adapter(base_url: &str) -> OpenAiChat {
    OpenAiChat::new(
        ProviderConfig::new(base_url)
            .api_key("sk-test")
            .model("gpt-test")
            .header("x-team", "agents")
            .retry(RetryPolicy::none()),
    )
}

fn every_shape() -> ModelRequest<'static> {
    let mut unparsed = ToolCallPart::new("call_3", "read_file", json!({}));
    unparsed.arguments = ToolArguments::Unparsed("{\"path\": \"notes.t".into());
    let mut custom = Message::user("A note injected by an extension.");
    custom.role = Role::Custom;
    let messages = vec![
        Message::user_parts(vec![
            Part::text("What is in this picture? "),
            Part::Image(png_image()),
            Part::text("Then read notes.txt."),
        ]),
        Message::assistant(
            vec![
                Part::text("A cat."),
                Part::text("Reading the file and taking a screenshot."),
                Part::ToolCall(ToolCallPart::new(
                    "call_1",
                    "read_file",
                    json!({"path": "notes.txt", "quote": "say \"hi\"\n"}),
                )),
                Part::ToolCall(ToolCallPart::new("call_2", "screenshot", json!({}))),
            ],
            StopReason::ToolUse,
        ),
        Message::tool_result(ToolResultPart::error(
            "call_1",
            "read_file",
            "notes.txt: no such file",
        )),
        Message::tool_result(screenshot_result()),
        Message::assistant(vec![Part::ToolCall(unparsed)], StopReason::ToolUse),
        Message::tool_result(ToolResultPart::error(
            "call_3",
            "read_file",
            "the arguments are not valid JSON",
        )),
        custom,
        Message::user_parts(vec![Part::text("Thanks, "), Part::text("that's all.")]),
        Message::assistant(vec![Part::text("")], StopReason::Stop),
        Message::user("Bye."),
    ];
    let mut request = ModelRequest::new(messages);
    request.system_prompt = Some("You are terse.".into());
    request.tools = read_file_and_screenshot_tools().into();
    request.temperature = Some(0.25);
    request.max_output_tokens = Some(512);
    request.reasoning = Some(ReasoningLevel::Low);
    request
}

#[test]
fn every_message_shape_tools_and_options() {
    let body = adapter("http://127.0.0.1:9/v1").request_body(&every_shape());
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["stream"], true);
    insta::assert_json_snapshot!("every_shape", body);
}

#[test]
fn a_bare_request_has_no_optional_fields() {
    let body = adapter("http://127.0.0.1:9/v1")
        .request_body(&ModelRequest::new(vec![Message::user("hi")]));
    assert_eq!(
        body,
        json!({"model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
               "messages": [{"role": "user", "content": "hi"}]})
    );
}

#[tokio::test]
async fn the_wire_carries_exactly_the_body_and_headers() {
    // The mock picks the turn by the number of assistant messages in the history (three).
    let server = MockServer::start(Script::new(vec![
        Turn::text("unused"),
        Turn::text("unused"),
        Turn::text("unused"),
        Turn::text("Bye!"),
    ]));
    let model = adapter(&server.openai_base_url());
    let request = every_shape();
    let expected = model.request_body(&request);
    let mut stream = model.stream(request);
    let mut done = None;
    while let Some(event) = stream.next().await {
        match event {
            ModelEvent::Done(m) => done = Some(m),
            ModelEvent::Error { error, .. } => panic!("{error}"),
            _ => {}
        }
    }
    assert_eq!(done.expect("a Done event").text(), "Bye!");
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].path, "/v1/chat/completions");
    assert_eq!(requests[0].body, expected);
    let headers = &requests[0].headers;
    assert_eq!(headers["content-type"], "application/json");
    assert_eq!(headers["authorization"], "Bearer <redacted>");
    assert_eq!(headers["x-team"], "agents");
}

#[tokio::test]
async fn a_bad_base_url_or_header_is_a_clear_error_not_a_retry_loop() {
    for config in [
        ProviderConfig::new("not a url"),
        ProviderConfig::new("ftp://example.com/v1"),
        ProviderConfig::new("http://127.0.0.1:9/v1").header("bad header", "x"),
        ProviderConfig::new("http://127.0.0.1:9/v1").api_key("sk-\nnewline"),
    ] {
        let model = OpenAiChat::new(config.retry(RetryPolicy::default()));
        let events: Vec<ModelEvent> = model
            .stream(ModelRequest::new(vec![Message::user("hi")]))
            .collect()
            .await;
        assert_eq!(events.len(), 1, "{events:?}");
        let ModelEvent::Error { error, message } = &events[0] else {
            panic!("expected an error terminal, got {events:?}")
        };
        assert_eq!(message.stop_reason, Some(StopReason::Error));
        let text = error.to_string();
        assert!(
            text.contains("URL") || text.contains("header"),
            "unclear error: {text}"
        );
        assert!(!text.contains("sk-"), "the key leaked: {text}");
    }
}

#[test]
fn the_prompt_cache_key_goes_out_unless_caching_is_off() {
    let mut request = ModelRequest::new(vec![Message::user("hi")]);
    assert!(
        adapter("http://127.0.0.1:9/v1")
            .request_body(&request)
            .get("prompt_cache_key")
            .is_none()
    );
    request.prompt_cache_key = Some("session-42".into());
    let on = adapter("http://127.0.0.1:9/v1").request_body(&request);
    assert_eq!(on["prompt_cache_key"], "session-42");
    let off = OpenAiChat::new(ProviderConfig::new("http://127.0.0.1:9/v1").prompt_cache(false))
        .request_body(&request);
    assert!(off.get("prompt_cache_key").is_none());
}
