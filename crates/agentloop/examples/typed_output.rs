//! Typed output against the testkit mock server (no key, no network): the agent looks a host up
//! with a tool, then answers with a `Ticket` as native structured output on the OpenAI Chat wire.
//! The first answer is invalid (a priority out of range), so the violation goes back to the
//! model, which repairs it. The partial output is printed as it streams, then the value.
//!
//! Run it with `cargo run -p agentloop --example typed_output`.

use std::sync::Arc;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig};
use agentloop::output::Output;
use agentloop::providers::{OpenAiChat, ProviderConfig};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script};
use serde::Deserialize;
use serde_json::{Value, json};

/// A support ticket.
#[agentloop::schema]
#[derive(Debug, Deserialize)]
#[allow(dead_code)] // the fields are read through `Debug`
struct Ticket {
    /// One-line summary.
    title: String,
    /// 1 (urgent) to 5.
    #[schemars(range(min = 1, max = 5))]
    priority: u8,
    /// Labels.
    tags: Vec<String>,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let script = Script::from_value(json!({"turns": [
        {"text": "Checking the host first.",
         "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"host": "b1"}}]},
        {"text": "{\"title\": \"Disk full on b1\", \"priority\": 0, \"tags\": [\"disk\"]}"},
        {"text": "{\"title\": \"Disk full on b1\", \"priority\": 1, \"tags\": [\"disk\", \"build\"]}",
         "chunk_size": 12}
    ]}))?;
    let server = MockServer::start(script);

    let model = OpenAiChat::new(ProviderConfig::new(server.openai_base_url()).api_key("mock"));
    let lookup = ToolSpec::<Deps>::builder("lookup", "Look a host up.")
        .handler(|_c: ToolContext<Deps>, args: Value| async move {
            format!("{} is the build host; its disk is 100% full", args["host"])
        })
        .build()?;
    let config = AgentLoopConfig {
        model: Some("gpt-4o-mini".into()),
        ..AgentLoopConfig::default()
    };
    let agent = AgentLoop::new(config, Arc::new(model))
        .with_tools([lookup])?
        .with_emit(|event| {
            if let AgentEvent::MessageUpdate {
                output: Some(partial),
                ..
            } = event
            {
                println!("partial: {partial}");
            }
        });

    let output = Output::<Ticket>::of().retries(2);
    println!("strategy: {:?}", agent.output_strategy(&output)?);
    let typed = agent
        .run_output(
            &output,
            vec![Message::user("File a ticket for host b1")],
            vec![],
        )
        .await?;
    println!("ticket: {:?}", typed.value);
    println!(
        "turns: {}, messages: {}",
        typed.outcome.turns,
        typed.outcome.new_messages().len()
    );
    Ok(())
}
