//! Shared helpers for the agent-loop behaviour tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig};
use agentloop::model::ScriptedModel;
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

/// Every test run must end: a hang fails the test instead of the suite.
pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the run did not terminate within 20s")
}

/// Collects events as compact strings.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<AgentEvent>>>);

impl Recorder {
    pub fn callback(&self) -> impl Fn(&AgentEvent) + Send + Sync + 'static {
        let events = self.0.clone();
        move |e: &AgentEvent| events.lock().unwrap().push(e.clone())
    }

    pub fn events(&self) -> Vec<AgentEvent> {
        self.0.lock().unwrap().clone()
    }

    /// Compact names with consecutive `message_update`s collapsed into one.
    pub fn names(&self) -> Vec<String> {
        compact(&self.events())
    }
}

pub fn role(m: &Message) -> &'static str {
    match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool_result",
        Role::Custom => "custom",
        _ => "other",
    }
}

pub fn compact(events: &[AgentEvent]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let s = match e {
            AgentEvent::MessageStart { message } => format!("message_start({})", role(message)),
            AgentEvent::MessageEnd { message } => format!("message_end({})", role(message)),
            AgentEvent::ToolExecutionStart { call } => format!("tool_execution_start({})", call.id),
            AgentEvent::ToolExecutionEnd { call, .. } => format!("tool_execution_end({})", call.id),
            AgentEvent::TurnEnd { tool_results, .. } => format!(
                "turn_end[{}]",
                tool_results
                    .iter()
                    .map(|r| r.call_id.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => other.kind().to_owned(),
        };
        if s == "message_update" && out.last().map(String::as_str) == Some("message_update") {
            continue;
        }
        out.push(s);
    }
    out
}

/// Collects a run's events through the async stream interface.
pub async fn stream_names<D: agentloop::tooling::ToolDeps>(
    agent: &AgentLoop<D>,
    prompts: Vec<Message>,
    context: Vec<Message>,
) -> Vec<AgentEvent> {
    within(agent.run_stream(prompts, context).collect::<Vec<_>>()).await
}

#[derive(Deserialize)]
pub struct SleepArgs {
    pub ms: u64,
    #[serde(default)]
    pub label: String,
}

/// An async tool that sleeps `ms` then answers `label` (or "slept").
pub fn sleep_tool(name: &str) -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder(name, "Sleep, then answer.")
        .handler(|_c: ToolContext<Deps>, a: SleepArgs| async move {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            if a.label.is_empty() {
                "slept".to_owned()
            } else {
                a.label
            }
        })
        .build()
        .unwrap()
}

/// A tool that echoes its `text` argument.
pub fn echo_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }))
        .blocking_handler(|_c: ToolContext<Deps>, a: Value| {
            a["text"].as_str().unwrap_or_default().to_owned()
        })
        .build()
        .unwrap()
}

pub fn agent(model: Arc<ScriptedModel>, tools: Vec<ToolSpec<Deps>>) -> AgentLoop<Deps> {
    agent_with(AgentLoopConfig::default(), model, tools)
}

pub fn agent_with(
    config: AgentLoopConfig,
    model: Arc<ScriptedModel>,
    tools: Vec<ToolSpec<Deps>>,
) -> AgentLoop<Deps> {
    AgentLoop::new(config, model).with_tools(tools).unwrap()
}
