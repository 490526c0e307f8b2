//! A two-turn agent run against the scripted model: the model calls the `echo` tool, gets its
//! result, then answers. Every event is printed on one line as it happens.
//!
//! Run it with `cargo run --example agent_scripted`.

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

fn describe(event: &AgentEvent) -> String {
    match event {
        AgentEvent::TurnStart { turn } => format!("turn_start {turn}"),
        AgentEvent::MessageStart { message } => format!("message_start {:?}", message.role),
        AgentEvent::MessageUpdate { delta, .. } => format!("message_update {}", json!(delta)),
        AgentEvent::MessageEnd { message } => {
            format!("message_end {:?} {:?}", message.role, message.text())
        }
        AgentEvent::ToolExecutionStart { call } => format!(
            "tool_execution_start {} {}",
            call.tool_name,
            call.arguments.to_json_string()
        ),
        AgentEvent::ToolExecutionEnd { call, result, .. } => format!(
            "tool_execution_end {} -> {:?} (error: {})",
            call.tool_name, result.content, result.is_error
        ),
        AgentEvent::TurnEnd {
            turn, tool_results, ..
        } => {
            format!("turn_end {turn} ({} tool results)", tool_results.len())
        }
        AgentEvent::AgentEnd { messages, stop } => {
            format!(
                "agent_end {} messages, stop: {}",
                messages.len(),
                json!(stop)
            )
        }
        other => other.kind().to_owned(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = ScriptedModel::new([
        ScriptedTurn::new()
            .with_text("Let me echo that.")
            .tool_call("call-1", "echo", json!({"text": "hello"})),
        ScriptedTurn::text("The tool said: hello").chunked(8),
    ]);
    let echo = ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }))
        .blocking_handler(|_deps: ToolContext<Deps>, args: EchoArgs| args.text)
        .build()?;
    let agent = AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools([echo])?
        .with_emit(|event| println!("{}", describe(event)));
    let outcome = agent.run(vec![Message::user("Echo hello")], vec![]).await?;
    println!("final answer: {}", outcome.final_text());
    Ok(())
}
