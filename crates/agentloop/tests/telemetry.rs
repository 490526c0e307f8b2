//! The OpenTelemetry GenAI spans and metrics of a run, captured with the SDK's in-memory
//! exporters: exact span tree (names, kinds, parents, attributes) for a run with two turns and a
//! parallel batch with one failing call; message contents only on opt-in; the
//! `gen_ai.client.*` histograms.
//!
//! Its own test binary: `tracing` caches each callsite's interest process-wide, and while a
//! test's thread-local subscriber is the only one registered, a callsite first reached on
//! another thread without a subscriber is cached as uninteresting; the agent-loop tests of a
//! shared binary reach the same callsites concurrently, so spans would go missing from the tree.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunOutcome, RunStop, TelemetryConfig};
use agentloop::model::{Model, ScriptedModel, ScriptedTurn};
use agentloop::providers::{Anthropic, OpenAiChat, OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::telemetry::otlp;
use agentloop::tooling::Deps;
use agentloop::transcript::{Message, Role, Usage};
use agentloop_testkit::{MockServer, Script};
use common::*;
use opentelemetry::trace::{SpanId, SpanKind, Status, TracerProvider as _};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::{Value, json};
use tracing_subscriber::layer::SubscriberExt;

/// Runs `agent`'s prompt with a thread-local subscriber exporting into memory; returns the
/// finished spans.
async fn traced_run(
    config: AgentLoopConfig,
    model: Arc<ScriptedModel>,
) -> (RunStop, Vec<SpanData>) {
    let (out, spans) = traced(
        AgentLoop::new(config, model)
            .with_tools([echo_tool()])
            .unwrap(),
    )
    .await;
    (out.stop, spans)
}

/// Runs `agent` on one prompt, its spans exported into memory through a thread-local subscriber.
async fn traced(agent: AgentLoop<Deps>) -> (RunOutcome, Vec<SpanData>) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    let subscriber =
        tracing_subscriber::registry().with(otlp::layer(provider.tracer("agentloop-test")));
    let out = {
        let _guard = tracing::subscriber::set_default(subscriber);
        within(agent.run(vec![Message::user("shout twice")], vec![]))
            .await
            .unwrap()
    };
    provider.force_flush().unwrap();
    (out, exporter.get_finished_spans().unwrap())
}

fn usage(input: u64, cached: u64, output: u64, cost: Option<f64>) -> Usage {
    Usage {
        input_tokens: input,
        cache_read_tokens: cached,
        output_tokens: output,
        cost_usd: cost,
        ..Usage::default()
    }
}

fn two_turn_model() -> Arc<ScriptedModel> {
    Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("call-ok", "echo", json!({"text": "hi"}))
            .tool_call("call-bad", "echo", json!({"text": 5}))
            .usage(usage(100, 50, 20, Some(0.001)))
            .response_id("resp-1"),
        ScriptedTurn::text("Done.")
            .usage(usage(180, 0, 5, Some(0.002)))
            .response_id("resp-2"),
    ]))
}

fn config(capture_content: bool) -> AgentLoopConfig {
    AgentLoopConfig {
        model: Some("gpt-test".into()),
        temperature: Some(0.5),
        max_output_tokens_per_call: Some(256),
        telemetry: TelemetryConfig {
            agent_name: Some("coder".into()),
            conversation_id: Some("session-1".into()),
            capture_content,
        },
        ..AgentLoopConfig::default()
    }
}

fn attribute_value(v: &opentelemetry::Value) -> Value {
    match v {
        opentelemetry::Value::Bool(b) => json!(b),
        opentelemetry::Value::I64(n) => json!(n),
        opentelemetry::Value::F64(f) => json!(f),
        opentelemetry::Value::String(s) => json!(s.as_str()),
        other => json!(other.to_string()),
    }
}

/// The spans as a tree without ids and times: name, kind, status, attributes, children (sorted
/// by name then tool call id, since a parallel batch finishes in any order).
fn tree(spans: &[SpanData]) -> Value {
    fn node(span: &SpanData, spans: &[SpanData]) -> Value {
        let attributes: BTreeMap<String, Value> = span
            .attributes
            .iter()
            .map(|kv| (kv.key.to_string(), attribute_value(&kv.value)))
            .collect();
        let mut children: Vec<&SpanData> = spans
            .iter()
            .filter(|s| s.parent_span_id == span.span_context.span_id())
            .collect();
        children.sort_by_key(|s| (s.start_time, sort_key(s)));
        json!({
            "name": span.name,
            "kind": format!("{:?}", span.span_kind),
            "status": match &span.status {
                Status::Unset => "unset".to_owned(),
                Status::Ok => "ok".to_owned(),
                Status::Error { .. } => "error".to_owned(),
            },
            "attributes": attributes,
            "children": children.iter().map(|c| node(c, spans)).collect::<Vec<_>>(),
        })
    }
    fn sort_key(span: &SpanData) -> String {
        let id = span
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == "gen_ai.tool.call.id")
            .map(|kv| kv.value.to_string())
            .unwrap_or_default();
        format!("{}/{id}", span.name)
    }
    let roots: Vec<Value> = spans
        .iter()
        .filter(|s| s.parent_span_id == SpanId::INVALID)
        .map(|s| node(s, spans))
        .collect();
    json!(roots)
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a opentelemetry::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

#[tokio::test]
async fn a_run_produces_the_genai_span_tree() {
    let (stop, spans) = traced_run(config(false), two_turn_model()).await;
    assert_eq!(stop, RunStop::Done);
    assert_eq!(spans.len(), 5, "invoke_agent + 2 chat + 2 execute_tool");

    // Parents: every span but the run's is its direct child; one trace.
    let run = spans
        .iter()
        .find(|s| s.name == "invoke_agent coder")
        .expect("the run span");
    assert_eq!(run.span_kind, SpanKind::Internal);
    assert_eq!(run.parent_span_id, SpanId::INVALID);
    for span in spans.iter().filter(|s| s.name != run.name) {
        assert_eq!(
            span.parent_span_id,
            run.span_context.span_id(),
            "{}",
            span.name
        );
        assert_eq!(span.span_context.trace_id(), run.span_context.trace_id());
    }
    let chats: Vec<_> = spans.iter().filter(|s| s.name == "chat gpt-test").collect();
    assert_eq!(chats.len(), 2);
    assert!(chats.iter().all(|s| s.span_kind == SpanKind::Client));
    let tools: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "execute_tool echo")
        .collect();
    assert_eq!(tools.len(), 2);
    let bad = tools
        .iter()
        .find(|s| attr(s, "gen_ai.tool.call.id").map(|v| v.to_string()) == Some("call-bad".into()))
        .unwrap();
    assert_eq!(
        attr(bad, "error.type").map(|v| v.to_string()).as_deref(),
        Some("invalid_arguments")
    );
    assert!(matches!(bad.status, Status::Error { .. }));
    // The tool spans nest between the two model calls.
    assert!(
        tools
            .iter()
            .all(|t| t.start_time >= chats[0].end_time.min(chats[1].end_time))
    );
    // Contents are off by default.
    for span in &spans {
        for key in [
            "gen_ai.input.messages",
            "gen_ai.output.messages",
            "gen_ai.system_instructions",
            "gen_ai.tool.call.arguments",
            "gen_ai.tool.call.result",
        ] {
            assert!(attr(span, key).is_none(), "{key} on {}", span.name);
        }
    }
    insta::assert_json_snapshot!("genai_span_tree", tree(&spans));
}

#[tokio::test]
async fn message_contents_are_recorded_only_on_opt_in() {
    let (_, spans) = traced_run(config(true), two_turn_model()).await;
    let first_chat = spans
        .iter()
        .filter(|s| s.name == "chat gpt-test")
        .min_by_key(|s| s.start_time)
        .unwrap();
    let input: Value = serde_json::from_str(
        &attr(first_chat, "gen_ai.input.messages")
            .unwrap()
            .to_string(),
    )
    .unwrap();
    assert_eq!(
        input,
        json!([{"role": "user", "parts": [{"type": "text", "content": "shout twice"}]}])
    );
    let output: Value = serde_json::from_str(
        &attr(first_chat, "gen_ai.output.messages")
            .unwrap()
            .to_string(),
    )
    .unwrap();
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["finish_reason"], "tool_call");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "echo");
    let ok = spans
        .iter()
        .find(|s| attr(s, "gen_ai.tool.call.id").map(|v| v.to_string()) == Some("call-ok".into()))
        .unwrap();
    assert_eq!(
        attr(ok, "gen_ai.tool.call.arguments").unwrap().to_string(),
        r#"{"text":"hi"}"#
    );
    assert_eq!(
        attr(ok, "gen_ai.tool.call.result").unwrap().to_string(),
        "hi"
    );
}

#[tokio::test]
async fn without_a_subscriber_the_run_is_unchanged() {
    let agent = agent_with(config(true), two_turn_model(), vec![echo_tool()]);
    let out = within(agent.run(vec![Message::user("shout twice")], vec![]))
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Done);
    assert_eq!(out.usage.input_tokens + out.usage.cache_read_tokens, 330);
    assert!((out.usage.cost_usd.unwrap() - 0.003).abs() < 1e-12);
}

/// `gen_ai.response.id` is the id each provider gave its response (Chat `id`, Responses
/// `response.id`, Anthropic `message.id`), read from the stream and kept on the message.
#[tokio::test]
async fn each_provider_reports_its_response_id() {
    let config = |base: String| {
        ProviderConfig::new(base)
            .api_key("test")
            .model("wire-model")
            .retry(RetryPolicy::none())
    };
    for wire in ["chat", "responses", "anthropic"] {
        let server = MockServer::start(
            Script::from_value(json!({"turns": [
                {"tool_calls": [{"id": "call_1", "name": "echo", "arguments": {"text": "a"}}]},
                {"text": "done"}
            ]}))
            .unwrap(),
        );
        let (model, prefix): (Arc<dyn Model>, &str) = match wire {
            "chat" => (
                Arc::new(OpenAiChat::new(config(server.openai_base_url()))),
                "chatcmpl-mock-",
            ),
            "responses" => (
                Arc::new(OpenAiResponses::new(config(server.openai_base_url()))),
                "resp_mock_",
            ),
            _ => (
                Arc::new(Anthropic::new(config(server.base_url()))),
                "msg_mock_",
            ),
        };
        let agent = AgentLoop::new(AgentLoopConfig::default(), model)
            .with_tools([echo_tool()])
            .unwrap();
        let (out, spans) = traced(agent).await;
        assert_eq!(out.stop, RunStop::Done, "{wire}");
        let ids: Vec<String> = out
            .context
            .iter()
            .filter(|m| m.role == Role::Assistant)
            .map(|m| m.response_id.clone().unwrap_or_default())
            .collect();
        assert_eq!(ids.len(), 2, "{wire}");
        assert!(
            ids.iter().all(|id| id.starts_with(prefix)),
            "{wire}: {ids:?}"
        );
        assert_ne!(ids[0], ids[1], "{wire}: one id per response");
        let mut chats: Vec<&SpanData> = spans
            .iter()
            .filter(|s| s.name.starts_with("chat"))
            .collect();
        chats.sort_by_key(|s| s.start_time);
        let recorded: Vec<String> = chats
            .iter()
            .map(|s| {
                attr(s, "gen_ai.response.id")
                    .map(|v| v.to_string())
                    .unwrap_or_default()
            })
            .collect();
        assert_eq!(recorded, ids, "{wire}");
    }
}

/// Command hooks are spans of the run: `hook pre_tool_use` per hook run, with the event, the
/// command, the tool, the exit code and the outcome; a failing hook is an error span.
#[cfg(unix)]
#[tokio::test]
async fn each_command_hook_run_is_a_span_with_its_outcome() {
    use agentloop::agent::command_hooks::{CommandHook, CommandHooks, HookEvent, OnError};
    let dir = tempfile::tempdir().unwrap();
    let mut failing = CommandHook::new(HookEvent::PreToolUse, "exit 7");
    failing.on_error = OnError::Allow;
    let hooks = CommandHooks::new(
        vec![
            CommandHook::new(HookEvent::PreToolUse, "cat >/dev/null"),
            failing,
        ],
        "session-1",
        dir.path().to_path_buf(),
    );
    let agent = AgentLoop::new(config(false), two_turn_model())
        .with_tools([echo_tool()])
        .unwrap();
    let queue = agent.follow_up_queue().clone();
    let agent = agent.with_extension(hooks.extension(queue));
    let (out, spans) = traced(agent).await;
    assert_eq!(out.stop, RunStop::Done);
    let hooks: Vec<_> = spans
        .iter()
        .filter(|s| s.name == "hook pre_tool_use")
        .collect();
    // Two hooks for the one valid call (the invalid one never reaches pre_tool_use).
    assert_eq!(
        hooks.len(),
        2,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let text = |s: &SpanData, key: &str| attr(s, key).map(|v| v.to_string());
    let ok = hooks
        .iter()
        .find(|s| text(s, "agentloop.hook.command").as_deref() == Some("cat >/dev/null"))
        .unwrap();
    assert_eq!(
        text(ok, "agentloop.hook.outcome").as_deref(),
        Some("continue")
    );
    assert_eq!(text(ok, "agentloop.hook.exit_code").as_deref(), Some("0"));
    assert_eq!(text(ok, "gen_ai.tool.name").as_deref(), Some("echo"));
    assert_eq!(
        text(ok, "agentloop.hook.event").as_deref(),
        Some("pre_tool_use")
    );
    let bad = hooks
        .iter()
        .find(|s| text(s, "agentloop.hook.command").as_deref() == Some("exit 7"))
        .unwrap();
    assert_eq!(
        text(bad, "agentloop.hook.outcome").as_deref(),
        Some("error")
    );
    assert_eq!(text(bad, "error.type").as_deref(), Some("hook_error"));
    assert!(matches!(bad.status, Status::Error { .. }));
}
