//! A support agent in as few lines as the API allows, against the testkit's mock model: typed
//! tools (one needs approval), a veto, streamed text, a run parked for approval and resumed,
//! typed output, a SQLite session continued by a second agent (as a second process would), a
//! usage limit, an abort, and a blocking call.
//!
//! `cargo run -p agentloop --example support_agent`; `cargo test -p agentloop --example
//! support_agent` runs it as a test.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentloop::agent::UsageLimits;
use agentloop::agent::{AgentLoop, AgentLoopConfig, Extension, ParkedRun, ToolCallDecision};
use agentloop::blocking::BlockingAgent;
use agentloop::providers::{OpenAiChat, ProviderConfig};
use agentloop::session::SqliteStore;
use agentloop::tool;
use agentloop::transcript::Message;
use serde::Deserialize;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// Look an order up.
#[tool]
fn look_up_order(
    /** The order id, e.g. "A-1". */
    order: String,
) -> String {
    format!("{order}: delivered, paid 12.50 EUR")
}

/// Refund part of an order, in cents.
#[tool(requires_approval)]
fn refund(order: String, cents: u64) -> String {
    format!("refunded {cents} cents on {order}")
}

/// What the agent reports at the end of a ticket.
#[agentloop::schema]
#[derive(Deserialize, Debug)]
struct Summary {
    order: String,
    refunded_cents: u64,
}

/// An agent on the mock model with both tools, a veto, and text printed as it streams.
fn agent(url: &str, config: AgentLoopConfig) -> Result<AgentLoop, Error> {
    let model = OpenAiChat::new(ProviderConfig::new(url).api_key("mock").model("mock"));
    let fraud =
        Extension::new("fraud").on_tool_call(|call| match call.arguments["order"].as_str() {
            Some("X-9") => ToolCallDecision::Block("order X-9 is flagged".into()),
            _ => ToolCallDecision::Continue,
        });
    let agent = AgentLoop::new(config, model).with_tools([look_up_order_tool(), refund_tool()])?;
    Ok(agent
        .with_extension(fraud)
        .with_emit(|e| print!("{}", e.text_delta().unwrap_or(""))))
}

/// Both "processes"; returns how each run ended.
async fn run(url: &str, db: &std::path::Path) -> Result<Vec<String>, Error> {
    let mut stops = Vec::new();
    // First process: a run parks for the refund, a person approves, then a typed summary.
    let first = agent(url, AgentLoopConfig::default())?
        .with_session(Arc::new(SqliteStore::open(db)?), "t-1")?;
    let parked = first
        .run_in_session(vec![Message::user("Refund A-1 and X-9")])
        .await?;
    stops.push(parked.stop.to_string());
    let mut decision = ParkedRun::from_stop(&parked.stop).ok_or("not parked")?;
    decision.approve_all();
    stops.push(
        first
            .resume_parked(parked.context, decision)
            .await?
            .stop
            .to_string(),
    );
    let summary = first
        .run_typed::<Summary>(vec![Message::user("Summary?")], first.session_context()?)
        .await?;
    stops.push(format!(
        "{} refunded {}",
        summary.value.order, summary.value.refunded_cents
    ));

    // Second process: continue the stored session, one model call per run.
    let limits = UsageLimits {
        max_requests: Some(1),
        ..UsageLimits::default()
    };
    let second = agent(
        url,
        AgentLoopConfig {
            usage_limits: limits,
            ..AgentLoopConfig::default()
        },
    )?;
    let (signal, once) = (second.abort_signal().clone(), AtomicBool::new(false));
    let second = second
        .with_last_session(Arc::new(SqliteStore::open(db)?))?
        .with_emit(move |e| {
            if e.text_delta().is_some() && !once.swap(true, Ordering::Relaxed) {
                signal.abort(); // the user clicks "stop" as the reply starts
            }
        });
    stops.push(
        second
            .run_in_session(vec![Message::user("Check A-1 again")])
            .await?
            .stop
            .to_string(),
    );
    stops.push(
        second
            .run_in_session(vec![Message::user("Anything else?")])
            .await?
            .stop
            .to_string(),
    );
    // The abort ended that run only; synchronous code (here a blocking task) runs the next one.
    let last = tokio::task::spawn_blocking(move || -> Result<_, Error> {
        Ok(BlockingAgent::new(second)?.run_in_session(vec![Message::user("Thanks")])?)
    });
    let last = last.await??;
    stops.push(format!("{}: {}", last.stop, last.final_text()));
    Ok(stops)
}

/// The mock model's script: one entry per model call, in conversation order.
fn mock() -> Result<agentloop_testkit::MockServer, Error> {
    let script = agentloop_testkit::Script::from_value(serde_json::json!({"turns": [
        {"tool_calls": [{"name": "look_up_order", "arguments": {"order": "A-1"}},
            {"name": "refund", "arguments": {"order": "A-1", "cents": 1250}},
            {"name": "refund", "arguments": {"order": "X-9", "cents": 99999}}]},
        {"text": "Refunded 12.50 EUR on A-1; X-9 is flagged.\n"},
        {"text": "{\"order\": \"A-1\", \"refunded_cents\": 1250}"},
        {"tool_calls": [{"name": "look_up_order", "arguments": {"order": "A-1"}}]},
        {"text": "Glad to help, have a nice day.\n", "chunk_size": 6, "chunk_delay_ms": 5}
    ]}))?;
    Ok(agentloop_testkit::MockServer::start(script))
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (server, dir) = (mock()?, tempfile::tempdir()?);
    for stop in run(&server.openai_base_url(), &dir.path().join("sessions.db")).await? {
        println!("\n-> {stop}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_support_agent_does_everything_the_trial_did() {
        let (server, dir) = (super::mock().unwrap(), tempfile::tempdir().unwrap());
        let stops = super::run(&server.openai_base_url(), &dir.path().join("s.db"))
            .await
            .unwrap();
        assert_eq!(
            stops,
            [
                "1 tool call(s) await approval",
                "done",
                "A-1 refunded 1250",
                "requests limit reached (1 of 1)",
                "aborted",
                "done: Glad to help, have a nice day.\n",
            ]
        );
        assert!(server.violations().is_empty(), "{:?}", server.violations());
        // The approved refund ran once; the vetoed one never did.
        let bodies: Vec<String> = server
            .requests()
            .iter()
            .map(|r| r.body.to_string())
            .collect();
        let last = bodies.last().unwrap();
        assert!(last.contains("refunded 1250 cents on A-1"), "{last}");
        assert!(
            last.contains("blocked by fraud: order X-9 is flagged"),
            "{last}"
        );
        assert!(!last.contains("refunded 99999"), "{last}");
    }
}
