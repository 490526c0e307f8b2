//! The `gen_ai.client.token.usage` and `gen_ai.client.operation.duration` histograms of a run,
//! through a global meter provider exporting into memory (its own test binary: the meter
//! provider is process-wide).
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use agentloop::agent::AgentLoopConfig;
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::transcript::{Message, Usage};
use common::*;
use serde_json::json;

fn two_turn_model() -> Arc<ScriptedModel> {
    let usage = |input, cached, output| Usage {
        input_tokens: input,
        cache_read_tokens: cached,
        output_tokens: output,
        ..Usage::default()
    };
    Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("call-ok", "echo", json!({"text": "hi"}))
            .usage(usage(100, 50, 20)),
        ScriptedTurn::text("Done.").usage(usage(180, 0, 5)),
    ]))
}

#[test]
fn model_calls_record_the_genai_client_histograms() {
    use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData};
    use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let run = || {
        let agent = agent_with(
            AgentLoopConfig {
                model: Some("gpt-test".into()),
                ..AgentLoopConfig::default()
            },
            two_turn_model(),
            vec![echo_tool()],
        );
        runtime
            .block_on(agent.run(vec![Message::user("shout twice")], vec![]))
            .unwrap();
    };
    // A run before any provider is installed records into the no-op one; the histograms are
    // made again for the provider installed afterwards.
    run();
    let exporter = InMemoryMetricExporter::default();
    let provider = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(exporter.clone()).build())
        .build();
    opentelemetry::global::set_meter_provider(provider.clone());
    run();
    provider.force_flush().unwrap();

    let mut tokens = BTreeMap::new();
    let mut durations = 0;
    for resource in exporter.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                match (metric.name(), metric.data()) {
                    (
                        "gen_ai.client.token.usage",
                        AggregatedMetrics::U64(MetricData::Histogram(h)),
                    ) => {
                        assert_eq!(metric.unit(), "{token}");
                        for point in h.data_points() {
                            let kind = point
                                .attributes()
                                .find(|kv| kv.key.as_str() == "gen_ai.token.type")
                                .map(|kv| kv.value.to_string())
                                .unwrap();
                            tokens.insert(kind, (point.count(), point.sum()));
                        }
                    }
                    (
                        "gen_ai.client.operation.duration",
                        AggregatedMetrics::F64(MetricData::Histogram(h)),
                    ) => {
                        assert_eq!(metric.unit(), "s");
                        durations = h.data_points().map(|p| p.count()).sum::<u64>();
                    }
                    _ => {}
                }
            }
        }
    }
    assert_eq!(durations, 2, "one duration per model call");
    assert_eq!(
        tokens.get("input"),
        Some(&(2, 330)),
        "cached tokens count as input"
    );
    assert_eq!(tokens.get("output"), Some(&(2, 25)));
}
