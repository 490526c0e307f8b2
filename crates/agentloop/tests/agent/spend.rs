//! Spend: the cost of each assistant message from the price table, over HTTP for each
//! provider's usage shape (cache tokens included), summed per run; and the per-run usage limits,
//! which stop a run before the model call that would go past them, keeping everything completed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentError, AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::agent::{UsageLimit, UsageLimits};
use agentloop::cost::{fill_cost, price};
use agentloop::model::{Model, ScriptedModel, ScriptedTurn};
use agentloop::providers::{Anthropic, OpenAiChat, OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::transcript::{Message, Role, StopReason, Usage};
use agentloop_testkit::{MockServer, Script};
use common::*;
use serde_json::json;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// One answered turn over HTTP with the given wire usage; returns the assistant message.
async fn answer(model: Arc<dyn Model>) -> Message {
    let agent = AgentLoop::new(AgentLoopConfig::default(), model);
    let out = run_prompt(&agent, "hi").await;
    assert_eq!(out.stop, RunStop::Done);
    let message = out.new_messages().last().unwrap().clone();
    assert_eq!(message.role, Role::Assistant);
    assert_eq!(out.usage.cost_usd, message.usage.as_ref().unwrap().cost_usd);
    message
}

fn config(base: String, model: &str) -> ProviderConfig {
    ProviderConfig::new(base)
        .api_key("test")
        .model(model)
        .retry(RetryPolicy::none())
        .idle_timeout(Duration::from_secs(10))
}

fn script(usage: serde_json::Value) -> Script {
    Script::from_value(json!({"turns": [{"text": "hello", "usage": usage}]})).unwrap()
}

// gpt-4o: $2.50 / M input, $1.25 / M cached input, $10 / M output.
// 1,000 uncached + 2,000 cached prompt tokens and 500 output tokens:
const GPT_4O_COST: f64 = 1000.0 * 2.5e-6 + 2000.0 * 1.25e-6 + 500.0 * 10e-6;

#[tokio::test]
async fn openai_chat_usage_with_cached_tokens_is_priced() {
    // Chat's prompt_tokens include the cached ones.
    let server = MockServer::start(script(
        json!({"input_tokens": 3000, "cache_read_tokens": 2000, "output_tokens": 500}),
    ));
    let m = answer(Arc::new(OpenAiChat::new(config(
        server.openai_base_url(),
        "gpt-4o",
    ))))
    .await;
    let usage = m.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.cache_read_tokens), (1000, 2000));
    assert!(close(usage.cost_usd.unwrap(), GPT_4O_COST), "{usage:?}");
}

#[tokio::test]
async fn openai_responses_usage_with_cached_tokens_is_priced() {
    let server = MockServer::start(script(
        json!({"input_tokens": 3000, "cache_read_tokens": 2000, "output_tokens": 500}),
    ));
    let m = answer(Arc::new(OpenAiResponses::new(config(
        server.openai_base_url(),
        "gpt-4o",
    ))))
    .await;
    let usage = m.usage.unwrap();
    assert!(close(usage.cost_usd.unwrap(), GPT_4O_COST), "{usage:?}");
}

#[tokio::test]
async fn anthropic_usage_with_cache_reads_and_writes_is_priced() {
    // claude-haiku-4-5: $1 / M input, $0.10 / M cache reads, $1.25 / M cache writes, $5 / M output.
    // Anthropic's input_tokens exclude the cache.
    let server = MockServer::start(script(json!({
        "input_tokens": 1000, "cache_read_tokens": 10000, "cache_write_tokens": 2000,
        "output_tokens": 1000
    })));
    let m = answer(Arc::new(Anthropic::new(config(
        server.base_url(),
        "claude-haiku-4-5",
    ))))
    .await;
    let usage = m.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens
        ),
        (1000, 10000, 2000)
    );
    let expected = 1000.0 * 1e-6 + 10000.0 * 0.1e-6 + 2000.0 * 1.25e-6 + 1000.0 * 5e-6;
    assert!(close(usage.cost_usd.unwrap(), expected), "{usage:?}");
}

#[test]
fn a_cost_the_provider_reported_wins_and_unknown_models_stay_unpriced() {
    let mut m = Message::assistant(Vec::new(), StopReason::Stop);
    m.model = Some("gpt-4o".into());
    m.provider = Some("openai_chat".into());
    m.usage = Some(Usage {
        input_tokens: 1_000_000,
        cost_usd: Some(42.0),
        ..Usage::default()
    });
    fill_cost(&mut m);
    assert_eq!(m.usage.as_ref().unwrap().cost_usd, Some(42.0));

    m.usage.as_mut().unwrap().cost_usd = None;
    fill_cost(&mut m);
    assert!(close(m.usage.as_ref().unwrap().cost_usd.unwrap(), 2.5));

    m.model = Some("no-such-model-anywhere-xyz".into());
    m.usage.as_mut().unwrap().cost_usd = None;
    fill_cost(&mut m);
    assert_eq!(m.usage.as_ref().unwrap().cost_usd, None);
    assert_eq!(
        price(
            "no-such-model-anywhere-xyz",
            "anthropic",
            &Usage::default(),
            0
        ),
        None
    );
}

/// Three tool-call turns and a final answer, 100 prompt + 10 output tokens and $0.01 each.
fn three_turns() -> Arc<ScriptedModel> {
    let usage = Usage {
        input_tokens: 100,
        output_tokens: 10,
        cost_usd: Some(0.01),
        ..Usage::default()
    };
    Arc::new(ScriptedModel::new(
        (0..3)
            .map(|i| {
                ScriptedTurn::new()
                    .tool_call(format!("c{i}"), "echo", json!({"text": "again"}))
                    .usage(usage)
            })
            .chain([ScriptedTurn::text("done").usage(usage)]),
    ))
}

async fn limited(limits: UsageLimits) -> (RunStop, usize, Arc<ScriptedModel>, Vec<AgentEvent>) {
    let model = three_turns();
    let log = Recorder::default();
    let agent = agent_with(
        AgentLoopConfig {
            usage_limits: limits,
            ..AgentLoopConfig::default()
        },
        model.clone(),
        vec![echo_tool()],
    )
    .with_emit(log.callback());
    let out = run_prompt(&agent, "go").await;
    let new = out.new_messages().len();
    (out.stop, new, model, log.events())
}

#[tokio::test]
async fn each_limit_stops_the_run_before_the_call_that_would_exceed_it() {
    let cases = [
        (
            UsageLimits {
                max_requests: Some(2),
                ..UsageLimits::default()
            },
            UsageLimit::Requests,
            2.0,
            2.0,
        ),
        (
            UsageLimits {
                max_input_tokens: Some(200),
                ..UsageLimits::default()
            },
            UsageLimit::InputTokens,
            200.0,
            200.0,
        ),
        (
            UsageLimits {
                max_output_tokens: Some(15),
                ..UsageLimits::default()
            },
            UsageLimit::OutputTokens,
            20.0,
            15.0,
        ),
        (
            UsageLimits {
                max_total_tokens: Some(220),
                ..UsageLimits::default()
            },
            UsageLimit::TotalTokens,
            220.0,
            220.0,
        ),
        (
            UsageLimits {
                max_cost_usd: Some(0.015),
                ..UsageLimits::default()
            },
            UsageLimit::CostUsd,
            0.02,
            0.015,
        ),
    ];
    for (limits, which, used, limit) in cases {
        let (stop, new, model, events) = limited(limits).await;
        match stop {
            RunStop::UsageLimit {
                which: w,
                used: u,
                limit: l,
            } => {
                assert_eq!(w, which);
                assert!(close(u, used) && close(l, limit), "{which}: {u} / {l}");
            }
            other => panic!("{which}: {other:?}"),
        }
        // Two model calls made, the third never requested; prompt + 2 × (call, result) kept.
        assert_eq!(model.remaining(), 2, "{which}");
        assert_eq!(new, 5, "{which}");
        let starts = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::TurnStart { .. }))
            .count();
        let ends = events
            .iter()
            .filter(|e| matches!(e, AgentEvent::TurnEnd { .. }))
            .count();
        assert_eq!((starts, ends), (2, 2), "{which}");
        assert!(matches!(
            events.last(),
            Some(AgentEvent::AgentEnd {
                stop: RunStop::UsageLimit { .. },
                ..
            })
        ));
    }
}

#[tokio::test]
async fn limits_not_reached_leave_the_run_alone() {
    let (stop, new, model, _) = limited(UsageLimits {
        max_requests: Some(4),
        max_total_tokens: Some(10_000),
        max_cost_usd: Some(1.0),
        ..UsageLimits::default()
    })
    .await;
    assert_eq!(stop, RunStop::Done);
    assert_eq!(new, 8);
    assert_eq!(model.remaining(), 0);
}

#[tokio::test]
async fn invalid_limits_are_a_config_error() {
    let agent = agent_with(
        AgentLoopConfig {
            usage_limits: UsageLimits {
                max_cost_usd: Some(-1.0),
                ..UsageLimits::default()
            },
            ..AgentLoopConfig::default()
        },
        three_turns(),
        vec![echo_tool()],
    );
    let err = within(agent.run(vec![Message::user("go")], vec![]))
        .await
        .unwrap_err();
    assert!(
        matches!(err, AgentError::Config(ref m) if m.contains("max_cost_usd")),
        "{err}"
    );
}
