//! Every fault kind of the testkit mock server, for each adapter: retried or failed as specified,
//! the partial message kept, and the agent's event stream terminating. Plus an end-to-end agent
//! run of three turns with parallel tool calls over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream};
use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{
    Message, Part, Role, StopReason, ToolArguments, ToolCallPart, ToolResultPart,
};
use agentloop_testkit::{MockServer, Script};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::Wire;

fn policy(retries: u32) -> RetryPolicy {
    RetryPolicy {
        max_retries: retries,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(5),
    }
}

fn model(wire: Wire, server: &MockServer, retry: RetryPolicy, idle: Duration) -> Arc<dyn Model> {
    model_with(wire, wire.base_url(server), |c| {
        c.retry(retry).idle_timeout(idle)
    })
}

fn script(value: Value) -> Script {
    Script::from_value(value).unwrap()
}

/// Drains one model call: (retry events, terminal message, error if any).
async fn call(model: &Arc<dyn Model>) -> (Vec<ModelEvent>, Message, Option<ModelError>) {
    drain(model.stream(ModelRequest::new(vec![Message::user("hello")]))).await
}

/// `f`'s output; a failure naming the hang after 20 s.
async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("model call hung")
}

/// Checks that `stream`, which has just announced a retry after `delay`, sends nothing to
/// `server` until `delay` has passed on Tokio's clock, which is paused for the check so that the
/// machine's speed plays no part. Needs a current-thread runtime; the clock runs again after.
async fn holds_the_retry_for(stream: &mut ModelStream, server: &MockServer, delay: Duration) {
    tokio::time::pause();
    let mut next = stream.next();
    sends_nothing(&mut next, server).await;
    tokio::time::advance(delay - Duration::from_millis(1)).await;
    sends_nothing(&mut next, server).await;
    tokio::time::advance(Duration::from_millis(1)).await;
    tokio::time::resume();
    let first = within(next).await;
    assert!(
        matches!(first, Some(ModelEvent::Delta(_))),
        "a reply streams after the retry: {first:?}"
    );
}

/// Drives `next` (the call's I/O included) a while without moving the paused clock, and checks
/// the server still saw one request: a retry sent early would reach it, and it counts requests on
/// its own threads (the short real pauses give it that chance).
async fn sends_nothing<F: std::future::Future + Unpin>(next: &mut F, server: &MockServer) {
    for _ in 0..20 {
        assert!(futures::poll!(&mut *next).is_pending());
        tokio::task::yield_now().await;
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(server.request_count(), 1, "the retry left before its delay");
}

/// [`call`] on a stream already started.
async fn drain(mut stream: ModelStream) -> (Vec<ModelEvent>, Message, Option<ModelError>) {
    let mut retries = Vec::new();
    let fut = async {
        while let Some(event) = stream.next().await {
            match event {
                ModelEvent::Retry { .. } => retries.push(event),
                ModelEvent::Done(m) => return (m, None),
                ModelEvent::Error { message, error } => return (message, Some(error)),
                ModelEvent::Delta(_) => {}
                _ => {}
            }
        }
        panic!("stream ended without a terminal event");
    };
    let (message, error) = within(fut).await;
    (retries, message, error)
}

const HELLO: &str = "Hello from the mock server";

fn long_text() -> String {
    (0..60).map(|i| format!("{HELLO} {i}. ")).collect()
}

fn text_turn_with(faults: Value) -> Value {
    json!({"turns": [{"text": HELLO, "chunk_size": 5, "faults": faults}]})
}

/// A long streamed text (hundreds of deltas), so that a fault K = 3,000 bytes into the body lands
/// after the first text deltas and before the end for every wire format.
fn long_turn_with(faults: Value) -> Value {
    json!({"turns": [{"text": long_text(), "chunk_size": 5, "faults": faults}]})
}

#[tokio::test]
async fn rate_limit_with_retry_after_is_honoured_then_succeeds() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 429, "headers": {"retry-after-ms": "150"}}
        ]))));
        let m = model(wire, &server, policy(3), Duration::from_secs(10));
        let mut stream = m.stream(ModelRequest::new(vec![Message::user("hello")]));
        let retry = within(stream.next()).await;
        assert!(matches!(retry, Some(ModelEvent::Retry { .. })), "{retry:?}");
        holds_the_retry_for(&mut stream, &server, Duration::from_millis(150)).await;
        let (mut retries, message, error) = drain(stream).await;
        retries.insert(0, retry.unwrap());
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(message.text(), "Hello from the mock server");
        assert_eq!(retries.len(), 1, "{wire:?}");
        match &retries[0] {
            ModelEvent::Retry {
                attempt,
                delay,
                reason,
            } => {
                assert_eq!(*attempt, 1);
                assert_eq!(
                    *delay,
                    Duration::from_millis(150),
                    "Retry-After is honoured"
                );
                assert!(reason.contains("429"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(server.request_count(), 2);
    }
}

#[tokio::test]
async fn server_errors_are_retried_up_to_the_limit() {
    for wire in Wire::ALL {
        for status in [500, 502, 503, 504, 529] {
            let server = MockServer::start(script(text_turn_with(json!([
                {"status": status}, {"status": status}
            ]))));
            let ok = model(wire, &server, policy(2), Duration::from_secs(10));
            let (retries, message, error) = call(&ok).await;
            assert!(error.is_none(), "{wire:?} {status}: {error:?}");
            assert_eq!(retries.len(), 2);
            assert_eq!(message.text(), "Hello from the mock server");
        }
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 503}, {"status": 503}
        ]))));
        let give_up = model(wire, &server, policy(1), Duration::from_secs(10));
        let (_, message, error) = call(&give_up).await;
        assert!(
            matches!(error, Some(ModelError::Status { status: 503, .. })),
            "{error:?}"
        );
        assert_eq!(message.stop_reason, Some(StopReason::Error));
    }
}

#[tokio::test]
async fn client_errors_are_not_retried_and_keys_never_leak() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 401, "body": "{\"error\": {\"message\": \"Incorrect API key provided\"}}"}
        ]))));
        let m = model(wire, &server, policy(3), Duration::from_secs(10));
        let (retries, message, error) = call(&m).await;
        assert!(retries.is_empty());
        let error = error.expect("an error");
        assert!(
            error.to_string().contains("Incorrect API key provided"),
            "{error}"
        );
        for text in [
            error.to_string(),
            format!("{error:?}"),
            format!("{message:?}"),
        ] {
            assert!(
                !text.contains("sk-secret-test-key"),
                "the key leaked: {text}"
            );
        }
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn a_longer_server_requested_wait_fails_fast_with_that_wait() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 429, "headers": {"retry-after": "120"}}
        ]))));
        let m = model(wire, &server, policy(3), Duration::from_secs(10));
        // `call` gives up after 20 s: a client that waited the 120 s fails there.
        let (_, _, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("120.0s") && text.contains("maximum"),
            "{text}"
        );
        assert_eq!(server.request_count(), 1, "{wire:?}: not retried");
    }
}

#[tokio::test]
async fn reset_mid_stream_fails_with_the_partial_message_and_is_not_retried() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(long_turn_with(json!([
            {"reset_after_bytes": 3000}
        ]))));
        let m = model(wire, &server, policy(3), Duration::from_secs(10));
        let (retries, message, error) = call(&m).await;
        assert!(
            retries.is_empty(),
            "never retry after bytes reached the caller"
        );
        assert!(
            matches!(error, Some(ModelError::Stream { .. })),
            "{error:?}"
        );
        assert_eq!(message.stop_reason, Some(StopReason::Error));
        let text = message.text();
        assert!(!text.is_empty(), "{wire:?}: the partial text is kept");
        assert!(
            text.len() < long_text().len(),
            "{wire:?}: the cut was mid-text"
        );
        assert!(long_text().starts_with(&text));
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn reset_before_any_delta_is_retried() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"reset_after_bytes": 1}
        ]))));
        let m = model(wire, &server, policy(3), Duration::from_secs(10));
        let (retries, message, error) = call(&m).await;
        assert!(error.is_none(), "{error:?}");
        assert_eq!(retries.len(), 1);
        assert_eq!(message.text(), "Hello from the mock server");
    }
}

#[tokio::test]
async fn a_stalled_stream_ends_at_the_idle_timeout_with_the_partial_message() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(long_turn_with(json!([
            {"stall_after_bytes": 3000}
        ]))));
        let m = model(wire, &server, policy(0), Duration::from_millis(300));
        // The stall never ends: only the idle timeout ends the call (`call` gives up after 20 s).
        let (_, message, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(text.contains("stalled"), "{text}");
        assert!(!message.text().is_empty());
    }
}

#[tokio::test]
async fn a_malformed_chunk_fails_clearly() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(long_turn_with(json!([
            {"malformed_after_bytes": 3000}
        ]))));
        let m = model(wire, &server, policy(0), Duration::from_secs(10));
        let (_, message, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(text.contains("unreadable"), "{text}");
        assert_eq!(message.stop_reason, Some(StopReason::Error));
    }
}

#[tokio::test]
async fn eof_without_the_terminal_event_is_an_error() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"eof_without_terminal": true}
        ]))));
        let m = model(wire, &server, policy(0), Duration::from_secs(10));
        let (_, message, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(text.contains("before its terminal event"), "{text}");
        assert_eq!(message.text(), "Hello from the mock server");
    }
}

#[tokio::test]
async fn the_agent_event_stream_terminates_for_every_fault() {
    let faults = [
        json!({"status": 500}),
        json!({"reset_after_bytes": 3000}),
        json!({"stall_after_bytes": 3000}),
        json!({"malformed_after_bytes": 3000}),
        json!({"eof_without_terminal": true}),
    ];
    for wire in Wire::ALL {
        for fault in &faults {
            let server = MockServer::start(script(long_turn_with(json!([fault]))));
            let m = model(wire, &server, policy(0), Duration::from_millis(300));
            let agent = AgentLoop::new(AgentLoopConfig::default(), m);
            let events: Vec<_> = tokio::time::timeout(
                Duration::from_secs(20),
                agent
                    .run_stream(vec![Message::user("hi")], vec![])
                    .collect::<Vec<_>>(),
            )
            .await
            .expect("the event stream did not terminate");
            match events.last() {
                Some(AgentEvent::AgentEnd {
                    stop: RunStop::ModelError { .. },
                    ..
                }) => {}
                other => panic!("{wire:?} {fault}: {other:?}"),
            }
        }
    }
}

fn weather_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("get_weather", "Weather for a city.")
        .parameters(json!({
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
            "additionalProperties": false
        }))
        .handler(|_c: ToolContext<Deps>, a: Value| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            format!("sunny in {}", a["city"].as_str().unwrap_or("?"))
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn three_turn_agent_run_with_parallel_tools_over_http() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(json!({"turns": [
            {"text": "Checking both.", "tool_calls": [
                {"id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}, "arg_chunks": 4},
                {"id": "call_b", "name": "get_weather", "arguments": {"city": "Tokyo"}, "arg_chunks": 3}
            ], "usage": {"input_tokens": 40, "output_tokens": 12}},
            {"tool_calls": [
                {"id": "call_c", "name": "get_weather", "arguments": {"city": "Lima"}}
            ], "usage": {"input_tokens": 60, "output_tokens": 8}},
            {"text": "Paris and Tokyo are sunny, and so is Lima.", "chunk_size": 7,
             "usage": {"input_tokens": 80, "output_tokens": 11}}
        ]})));
        let m = model(wire, &server, policy(0), Duration::from_secs(10));
        let agent = AgentLoop::new(AgentLoopConfig::default(), m)
            .with_tools([weather_tool()])
            .unwrap();
        let out = tokio::time::timeout(
            Duration::from_secs(20),
            agent.run(
                vec![Message::user("Weather in Paris, Tokyo, Lima?")],
                vec![],
            ),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(out.stop, RunStop::Done);
        assert_eq!(out.turns, 3);
        assert_eq!(
            out.final_text(),
            "Paris and Tokyo are sunny, and so is Lima."
        );
        let results: Vec<_> = out
            .new_messages()
            .iter()
            .filter(|m| m.role == Role::ToolResult)
            .filter_map(|m| m.tool_result_part().map(|r| r.content.clone()))
            .collect();
        assert_eq!(
            results,
            ["sunny in Paris", "sunny in Tokyo", "sunny in Lima"]
        );
        assert_eq!(out.usage.output_tokens, 31);
        assert_eq!(server.request_count(), 3);
        assert!(server.violations().is_empty(), "{:?}", server.violations());
        // The third request carried the whole history, results linked to their calls.
        let last = &server.requests()[2].body;
        let history = serde_json::to_string(last).unwrap();
        for needle in ["call_a", "call_b", "call_c", "sunny in Tokyo"] {
            assert!(history.contains(needle), "{wire:?}: {needle} missing");
        }
    }
}

/// A call whose arguments were cut off mid-JSON gets its error result, and the next request —
/// replaying the call — is accepted by the strict mock (which, like OpenAI with 400 and llama.cpp
/// with 500, rejects arguments that are not a JSON object). The transcript keeps the raw text.
#[tokio::test]
async fn a_malformed_call_is_replayed_as_a_valid_object_and_the_run_goes_on() {
    const RAW: &str = "{\"city\": \"Par";
    for wire in Wire::ALL {
        for reject in [400, 500] {
            let server = MockServer::builder(script(json!({"turns": [
                {"tool_calls": [{"id": "call_m", "name": "get_weather", "arguments": RAW}]},
                {"text": "Sorry, let me stop here."}
            ]})))
            .reject_status(reject)
            .start()
            .unwrap();
            let m = model(wire, &server, policy(3), Duration::from_secs(10));
            let agent = AgentLoop::new(AgentLoopConfig::default(), m)
                .with_tools([weather_tool()])
                .unwrap();
            let out = tokio::time::timeout(
                Duration::from_secs(20),
                agent.run(vec![Message::user("Weather in Paris?")], vec![]),
            )
            .await
            .unwrap()
            .unwrap();
            assert!(
                server.violations().is_empty(),
                "{wire:?} {reject}: {:?}",
                server.violations()
            );
            assert_eq!(out.stop, RunStop::Done, "{wire:?} {reject}");
            assert_eq!(out.final_text(), "Sorry, let me stop here.");
            assert_eq!(server.request_count(), 2, "{wire:?} {reject}");
            let call = out
                .new_messages()
                .iter()
                .find_map(|m| m.tool_calls().next())
                .unwrap()
                .clone();
            // Gemini's `args` is structured: the mock sends the broken text as a JSON string,
            // which is kept as received (and equally not run).
            let received = match wire {
                Wire::Gemini => ToolArguments::Json(json!(RAW)),
                _ => ToolArguments::Unparsed(RAW.into()),
            };
            assert_eq!(
                call.arguments, received,
                "the transcript keeps the raw text"
            );
            let result = out
                .new_messages()
                .iter()
                .find_map(|m| m.tool_result_part())
                .unwrap();
            assert!(result.is_error, "{wire:?}: {result:?}");
        }
    }
}

/// Every shape of arguments that is not a JSON object, in a stored transcript, is accepted by the
/// strict mock on every wire.
#[tokio::test]
async fn stored_calls_with_non_object_arguments_are_accepted_by_a_strict_server() {
    let shapes = [
        ToolArguments::Unparsed("{\"city\": \"Par".into()),
        ToolArguments::Unparsed("not json at all".into()),
        ToolArguments::Json(json!("a string")),
        ToolArguments::Json(json!([1, 2])),
        ToolArguments::Json(Value::Null),
        ToolArguments::Json(json!(42)),
    ];
    for wire in Wire::ALL {
        for (i, args) in shapes.iter().enumerate() {
            let server = MockServer::builder(script(json!({"turns": [
                {"text": "unused"}, {"text": HELLO}
            ]})))
            .reject_status(500)
            .start()
            .unwrap();
            let m = model(wire, &server, policy(0), Duration::from_secs(10));
            let mut call = ToolCallPart::new(format!("call_{i}"), "get_weather", json!({}));
            call.arguments = args.clone();
            let messages = vec![
                Message::user("hello"),
                Message::assistant(vec![Part::ToolCall(call)], StopReason::ToolUse),
                Message::tool_result(ToolResultPart::error(
                    format!("call_{i}"),
                    "get_weather",
                    "malformed arguments",
                )),
            ];
            let mut stream = m.stream(ModelRequest::new(messages));
            let mut error = None;
            while let Some(event) = stream.next().await {
                if let ModelEvent::Error { error: e, .. } = event {
                    error = Some(e);
                }
            }
            assert!(error.is_none(), "{wire:?} {args:?}: {error:?}");
            assert!(server.violations().is_empty(), "{:?}", server.violations());
        }
    }
}

/// Without the replay fix a strict server answers 500 "Failed to parse …": a 5xx that says the
/// request could not be parsed is final after one attempt, with the server's message.
#[tokio::test]
async fn a_server_error_saying_the_request_cannot_be_parsed_is_not_retried() {
    let body = r#"{"error":{"code":500,"message":"Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error","type":"server_error"}}"#;
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 500, "body": body}, {"status": 500, "body": body},
            {"status": 500, "body": body}, {"status": 500, "body": body}
        ]))));
        let m = model(wire, &server, policy(4), Duration::from_secs(10));
        let (retries, _, error) = call(&m).await;
        assert!(retries.is_empty(), "{wire:?}: {retries:?}");
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("Failed to parse tool call arguments"),
            "{text}"
        );
        assert_eq!(server.request_count(), 1, "{wire:?}");
    }
}

/// A 500 that repeats itself exactly is not retried forever, and an identical request that
/// already ended with it gets one attempt.
#[tokio::test]
async fn a_repeating_server_error_stops_early_and_is_not_retried_for_the_identical_request() {
    for wire in Wire::ALL {
        let same = json!({"status": 500, "body": "{\"error\": {\"message\": \"boom\"}}"});
        let server = MockServer::start(script(json!({"turns": [
            {"text": HELLO, "faults": [same, same, same, same, same, same, same, same]}
        ]})));
        let m = model(wire, &server, policy(4), Duration::from_secs(10));
        let (retries, _, error) = call(&m).await;
        assert!(error.is_some());
        assert_eq!(retries.len(), 2, "{wire:?}");
        assert_eq!(server.request_count(), 3, "{wire:?}");
        // The identical request again: one attempt.
        let (retries, _, error) = call(&m).await;
        assert!(error.is_some());
        assert!(retries.is_empty(), "{wire:?}: {retries:?}");
        assert_eq!(server.request_count(), 4, "{wire:?}");
    }
}

/// A huge, infinite or malformed Retry-After never panics; a wait beyond the maximum fails fast
/// with the real status and "the provider asked to wait", never "HTTP 0".
#[tokio::test]
async fn hostile_retry_after_values_fail_fast_or_fall_back_to_backoff() {
    for wire in Wire::ALL {
        for (value, fails) in [
            ("1e20", true),
            ("inf", true),
            ("-3", false),
            ("soon", false),
        ] {
            let server = MockServer::start(script(text_turn_with(json!([
                {"status": 429, "headers": {"retry-after": value}}
            ]))));
            let m = model(wire, &server, policy(2), Duration::from_secs(10));
            let (_, message, error) = call(&m).await;
            if fails {
                let error = error.expect("an error");
                let text = error.to_string();
                assert!(text.contains("the provider asked to wait"), "{text}");
                assert!(!text.contains("HTTP 0"), "{text}");
                assert!(
                    matches!(error, ModelError::Status { status: 429, .. }),
                    "{error:?}"
                );
            } else {
                assert!(error.is_none(), "{wire:?} {value}: {error:?}");
                assert_eq!(message.text(), HELLO);
            }
        }
    }
}

// ---- Hostile streams: huge lines, keep-alive-only streams, endless streams, lone surrogates,
// ---- redirects and credentials in the base URL (SECURITY.md, "Provider streams").

/// `wire`'s adapter for `base`, with a test key, model `mock` and no retries, then `configure`d.
fn model_with(
    wire: Wire,
    base: String,
    configure: impl Fn(ProviderConfig) -> ProviderConfig,
) -> Arc<dyn Model> {
    wire.adapter(configure(
        ProviderConfig::new(base)
            .api_key("sk-secret-test-key")
            .model("mock")
            .retry(policy(0)),
    ))
}

#[tokio::test]
async fn an_event_above_the_cap_ends_the_request_clearly_for_every_wire() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(text_turn_with(json!([
            {"huge_line_bytes": 4 * 1024 * 1024}
        ]))));
        let m = model_with(wire, wire.base_url(&server), |c| {
            c.max_event_bytes(1024 * 1024)
        });
        let (retries, _, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("exceeded 1048576 bytes") && text.contains("max_event_bytes"),
            "{wire:?}: {text}"
        );
        assert!(retries.is_empty(), "an oversized event is not retried");
        assert_eq!(server.request_count(), 1);
    }
}

/// Peak resident memory of this process (`VmHWM` in `/proc/self/status`), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

const HUGE_LINE_CHILD: &str = "AGENTLOOP_TEST_HUGE_LINE_CHILD";

/// A 100 MB line against the default 16 MiB cap: the request ends with the cap's error and the
/// process's peak memory grows by far less than the line. Measured in a child process (this
/// test binary re-run for this one test) so that other tests' memory does not count.
#[test]
fn a_100_mb_line_ends_the_request_with_bounded_memory() {
    if std::env::var_os(HUGE_LINE_CHILD).is_some() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let server = runtime.block_on(async {
            MockServer::start(script(text_turn_with(json!([
                {"huge_line_bytes": 100 * 1024 * 1024}
            ]))))
        });
        let m = model_with(Wire::Chat, server.openai_base_url(), |c| c);
        let before = peak_rss_kib().unwrap();
        let started = Instant::now();
        let (_, _, error) = runtime.block_on(call(&m));
        let elapsed = started.elapsed();
        let after = peak_rss_kib().unwrap();
        let text = error.expect("an error").to_string();
        assert!(text.contains("max_event_bytes"), "{text}");
        println!(
            "HUGE_LINE growth_kib={} elapsed_ms={}",
            after.saturating_sub(before),
            elapsed.as_millis()
        );
        return;
    }
    if peak_rss_kib().is_none() {
        eprintln!("no /proc/self/status here: peak memory cannot be measured");
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            &crate::test_name(
                module_path!(),
                "a_100_mb_line_ends_the_request_with_bounded_memory",
            ),
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(HUGE_LINE_CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let growth: u64 = stdout
        .split_whitespace()
        .find_map(|w| w.strip_prefix("growth_kib="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no measurement in: {stdout}"));
    eprintln!(
        "{}",
        stdout
            .lines()
            .find_map(|l| l.find("HUGE_LINE").map(|at| &l[at..]))
            .unwrap_or("")
    );
    // The cap is 16 MiB; the decoder's buffer may double once past it. The line is 100 MiB.
    assert!(
        growth < 60 * 1024,
        "peak memory grew by {growth} KiB for a 100 MiB line"
    );
}

#[tokio::test]
async fn keep_alive_comments_do_not_hold_a_stream_open() {
    for wire in Wire::ALL {
        // After the first text deltas, only `: keep-alive` comments every 50 ms.
        let server = MockServer::start(script(long_turn_with(json!([
            {"keep_alive_after_bytes": 3000}
        ]))));
        let m = model_with(wire, wire.base_url(&server), |c| {
            c.idle_timeout(Duration::from_millis(400))
        });
        // The comments never end: only the idle timeout ends the call (`call` gives up after
        // 20 s).
        let (_, message, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("stalled") && text.contains("keep-alive"),
            "{wire:?}: {text}"
        );
        assert!(!message.text().is_empty(), "the partial reply is kept");
    }
}

#[tokio::test]
async fn a_request_that_never_ends_stops_at_its_deadline_and_is_not_retried() {
    for wire in Wire::ALL {
        // Deltas every 40 ms for far longer than the deadline: the idle timeout never fires.
        let server = MockServer::start(script(json!({"turns": [{
            "text": long_text(), "chunk_size": 1, "chunk_delay_ms": 40
        }]})));
        let m = model_with(wire, wire.base_url(&server), |c| {
            c.idle_timeout(Duration::from_secs(5))
                .request_timeout(Some(Duration::from_millis(600)))
                .retry(policy(3))
        });
        // The deltas last over a minute: only the deadline ends the call within `call`'s 20 s.
        let (retries, message, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("deadline") && text.contains("request_timeout"),
            "{wire:?}: {text}"
        );
        assert!(retries.is_empty());
        assert!(!message.text().is_empty());
        assert_eq!(server.request_count(), 1);
    }
}

#[tokio::test]
async fn a_lone_surrogate_in_a_delta_becomes_a_replacement_character() {
    for wire in Wire::ALL {
        let server = MockServer::start(script(json!({"turns": [{
            "text": "before LONE-SURROGATE after",
            "faults": [{"replace_in_body": {"find": "LONE-SURROGATE", "with": "\\ud800"}}]
        }]})));
        let m = model_with(wire, wire.base_url(&server), |c| c.retry(policy(3)));
        let (retries, message, error) = call(&m).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert!(retries.is_empty(), "{wire:?}: {retries:?}");
        assert_eq!(message.text(), "before \u{fffd} after", "{wire:?}");
    }
}

#[tokio::test]
async fn a_lone_surrogate_in_tool_arguments_is_replaced_not_fatal() {
    for wire in Wire::ALL {
        // The arguments travel as JSON text inside a JSON string (escaped twice), except on the
        // Gemini wire, where `args` is an object in the event itself (escaped once).
        let surrogate = match wire {
            Wire::Gemini => "\\ud800",
            _ => "\\\\ud800",
        };
        let server = MockServer::start(script(json!({"turns": [{
            "tool_calls": [{"name": "echo", "arguments": {"text": "a LONE-SURROGATE b"}}],
            "faults": [{"replace_in_body": {"find": "LONE-SURROGATE", "with": surrogate}}]
        }]})));
        let m = model_with(wire, wire.base_url(&server), |c| c);
        let (_, message, error) = call(&m).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        let calls: Vec<&ToolCallPart> = message.tool_calls().collect();
        assert_eq!(calls.len(), 1, "{wire:?}");
        assert_eq!(
            calls[0].arguments.as_object().and_then(|o| o.get("text")),
            Some(&json!("a \u{fffd} b")),
            "{wire:?}: {:?}",
            calls[0].arguments
        );
    }
}

#[tokio::test]
async fn credentials_never_follow_a_redirect_to_another_origin() {
    for wire in Wire::ALL {
        let elsewhere = MockServer::start(script(text_turn_with(json!([]))));
        let target = format!(
            "{}/v1/messages",
            elsewhere.base_url().replace("127.0.0.1", "localhost")
        );
        let server = MockServer::start(script(text_turn_with(json!([
            {"status": 307, "headers": {"location": target.replace("http://", "http://user:pw-in-location@")}}
        ]))));
        let m = model_with(wire, wire.base_url(&server), |c| c.retry(policy(3)));
        let (retries, _, error) = call(&m).await;
        let text = error.expect("an error").to_string();
        assert!(
            text.contains("redirected") && text.contains("not followed"),
            "{wire:?}: {text}"
        );
        assert!(!text.contains("pw-in-location"), "{wire:?}: {text}");
        assert!(retries.is_empty());
        assert_eq!(
            elsewhere.request_count(),
            0,
            "{wire:?}: the request (and its key) reached another origin"
        );
    }
}

#[tokio::test]
async fn a_redirect_within_the_origin_is_followed_with_its_credentials() {
    for wire in Wire::ALL {
        // A relative location on the same server (the mock serves both `/v1/x` and `/x`).
        let location = wire.stream_path();
        let server = MockServer::start(script(json!({"turns": [
            {"text": HELLO, "faults": [{"status": 307, "headers": {"location": location}}]}
        ]})));
        let m = model_with(wire, wire.base_url(&server), |c| c);
        let (_, message, error) = call(&m).await;
        assert!(error.is_none(), "{wire:?}: {error:?}");
        assert_eq!(message.text(), HELLO);
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{wire:?}");
        let auth = |r: &agentloop_testkit::RecordedRequest| {
            r.headers
                .get("authorization")
                .or_else(|| r.headers.get("x-api-key"))
                .or_else(|| r.headers.get("x-goog-api-key"))
                .cloned()
        };
        assert!(
            auth(&requests[1]).is_some(),
            "{wire:?}: the key was dropped on a same-origin redirect"
        );
    }
}

#[tokio::test]
async fn credentials_in_the_base_url_are_sent_as_basic_auth_and_redacted_everywhere() {
    // A port nothing listens on: the connection error must not show the password.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    for wire in Wire::ALL {
        for base in [
            format!("http://gw-user:s3cret-pw@127.0.0.1:{closed}/v1"),
            "http://gw-user:s3cret-pw@[not a host/v1".to_owned(),
        ] {
            let m = model_with(wire, base, |c| c);
            let (_, message, error) = call(&m).await;
            let error = error.expect("an error");
            for text in [
                error.to_string(),
                format!("{error:?}"),
                format!("{message:?}"),
            ] {
                assert!(!text.contains("s3cret-pw"), "{wire:?}: {text}");
            }
        }
    }
    let server = MockServer::start(script(text_turn_with(json!([]))));
    let base = server
        .openai_base_url()
        .replace("http://", "http://gw-user:s3cret-pw@");
    let m: Arc<dyn Model> = Arc::new(OpenAiChat::new(
        ProviderConfig::new(base).model("mock").retry(policy(0)),
    ));
    let (_, message, error) = call(&m).await;
    assert!(error.is_none(), "{error:?}");
    assert_eq!(message.text(), HELLO);
    let requests = server.requests();
    assert_eq!(
        requests[0].headers.get("authorization").map(String::as_str),
        Some("Basic <redacted>")
    );
}

// ---- Fallback models: the next model gets the same request when one fails before answering.

/// Drains a call, keeping the fallback events.
async fn call_with_fallbacks(
    model: &dyn Model,
) -> (
    Vec<(String, String, ModelError)>,
    Message,
    Option<ModelError>,
) {
    let mut stream = model.stream(ModelRequest::new(vec![Message::user("hello")]));
    let mut fallbacks = Vec::new();
    let fut = async {
        while let Some(event) = stream.next().await {
            match event {
                ModelEvent::Fallback { from, to, error } => fallbacks.push((from, to, error)),
                ModelEvent::Done(m) => return (m, None),
                ModelEvent::Error { message, error } => return (message, Some(error)),
                _ => {}
            }
        }
        panic!("stream ended without a terminal event");
    };
    let (message, error) = tokio::time::timeout(Duration::from_secs(20), fut)
        .await
        .expect("model call hung");
    (fallbacks, message, error)
}

#[tokio::test]
async fn a_fallback_model_answers_after_500_401_and_overflow_across_providers() {
    let overflow = json!({"status": 400, "body": "{\"error\": {\"message\": \"This model's maximum context length is 8192 tokens\", \"type\": \"invalid_request_error\", \"code\": \"context_length_exceeded\"}}"});
    // (primary fault, attempts the primary gets with 2 retries, what the error says)
    let cases = [
        (
            json!([{"status": 500}, {"status": 500}, {"status": 500}]),
            3,
            "HTTP 500",
        ),
        (json!([{"status": 401}]), 1, "HTTP 401"),
        (json!([overflow]), 1, "context length"),
    ];
    for (primary_wire, fallback_wire) in [
        (Wire::Chat, Wire::Anthropic),
        (Wire::Anthropic, Wire::Gemini),
        (Wire::Gemini, Wire::Responses),
        (Wire::Responses, Wire::Chat),
    ] {
        for (faults, attempts, said) in &cases {
            let primary_server = MockServer::start(script(
                json!({"turns": [{"text": "unused", "faults": faults}]}),
            ));
            let fallback_server = MockServer::start(script(text_turn_with(json!([]))));
            let primary = model_with(primary_wire, primary_wire.base_url(&primary_server), |c| {
                c.retry(policy(2)).model("primary-model")
            });
            let fallback = model_with(
                fallback_wire,
                fallback_wire.base_url(&fallback_server),
                |c| c.model("fallback-model"),
            );
            let chain = agentloop::model::FallbackModel::new(primary).with_fallback(fallback);
            let (fallbacks, message, error) = call_with_fallbacks(&chain).await;
            let label = format!("{primary_wire:?} -> {fallback_wire:?} on {said}");
            assert!(error.is_none(), "{label}: {error:?}");
            assert_eq!(message.text(), HELLO, "{label}");
            assert_eq!(fallbacks.len(), 1, "{label}");
            let (from, to, why) = &fallbacks[0];
            assert!(from.ends_with(":primary-model"), "{label}: {from}");
            assert!(to.ends_with(":fallback-model"), "{label}: {to}");
            assert!(why.to_string().contains(said), "{label}: {why}");
            assert_eq!(primary_server.request_count(), *attempts, "{label}");
            assert_eq!(fallback_server.request_count(), 1, "{label}");
            // The transcript says who answered.
            let expected_provider = match fallback_wire {
                Wire::Chat => "openai_chat",
                Wire::Responses => "openai_responses",
                Wire::Anthropic => "anthropic",
                Wire::Gemini => "gemini",
            };
            assert_eq!(
                message.provider.as_deref(),
                Some(expected_provider),
                "{label}"
            );
        }
    }
}

#[tokio::test]
async fn no_fallback_once_the_reply_has_started_streaming() {
    let primary_server = MockServer::start(script(long_turn_with(json!([
        {"reset_after_bytes": 3000}
    ]))));
    let fallback_server = MockServer::start(script(text_turn_with(json!([]))));
    let primary = model_with(Wire::Chat, Wire::Chat.base_url(&primary_server), |c| c);
    let fallback = model_with(Wire::Chat, Wire::Chat.base_url(&fallback_server), |c| c);
    let chain = agentloop::model::FallbackModel::new(primary).with_fallback(fallback);
    let (fallbacks, message, error) = call_with_fallbacks(&chain).await;
    assert!(fallbacks.is_empty());
    assert!(error.is_some());
    assert!(!message.text().is_empty(), "the partial reply is kept");
    assert_eq!(fallback_server.request_count(), 0);
}

#[tokio::test]
async fn the_last_models_error_ends_the_chain_and_the_agent_reports_each_fallback() {
    let a = MockServer::start(script(text_turn_with(json!([{"status": 401}]))));
    let b = MockServer::start(script(text_turn_with(json!([{"status": 403}]))));
    let chain = agentloop::model::FallbackModel::new(model_with(
        Wire::Chat,
        Wire::Chat.base_url(&a),
        |c| c,
    ))
    .with_fallback(model_with(
        Wire::Anthropic,
        Wire::Anthropic.base_url(&b),
        |c| c,
    ));
    let agent = AgentLoop::new(AgentLoopConfig::default(), Arc::new(chain));
    let events: Vec<_> = tokio::time::timeout(
        Duration::from_secs(20),
        agent
            .run_stream(vec![Message::user("hi")], vec![])
            .collect::<Vec<_>>(),
    )
    .await
    .expect("the event stream did not terminate");
    let fallbacks: Vec<&AgentEvent> = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::ModelFallback { .. }))
        .collect();
    assert_eq!(fallbacks.len(), 1, "{events:?}");
    match events.last() {
        Some(AgentEvent::AgentEnd {
            stop: RunStop::ModelError { .. },
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(b.request_count(), 1);
}
