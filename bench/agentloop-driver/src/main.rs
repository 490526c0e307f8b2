//! agentloop side of the overhead benchmark: the real `OpenAiChat` provider against the mock
//! server, real tools, the real loop. Prints one JSON line.

#[path = "../../common.rs"]
mod common;

use std::sync::atomic::Ordering::Relaxed;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::providers::{HttpVersion, OpenAiChat, ProviderConfig};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use common::*;
use serde_json::Value;

fn tools() -> Vec<ToolSpec<Deps>> {
    let add = ToolSpec::<Deps>::builder("add", "Add two integers.")
        .parameters(add_params())
        .handler(|_ctx: ToolContext<Deps>, args: Value| async move {
            TOOL_CALLS.fetch_add(1, Relaxed);
            (args["a"].as_i64().unwrap_or(0) + args["b"].as_i64().unwrap_or(0)).to_string()
        })
        .build()
        .expect("add tool");
    let upper = ToolSpec::<Deps>::builder("upper", "Upper-case a text.")
        .parameters(upper_params())
        .handler(|_ctx: ToolContext<Deps>, args: Value| async move {
            TOOL_CALLS.fetch_add(1, Relaxed);
            args["text"].as_str().unwrap_or_default().to_uppercase()
        })
        .build()
        .expect("upper tool");
    vec![add, upper]
}

fn agent(a: &Args) -> AgentLoop {
    let version = if a.http2 { HttpVersion::Http2PriorKnowledge } else { HttpVersion::Auto };
    let provider = OpenAiChat::new(
        ProviderConfig::new(&a.base_url).api_key("dummy").model("mock-model").http_version(version),
    );
    let config = AgentLoopConfig { model: Some("mock-model".into()), ..AgentLoopConfig::default() };
    AgentLoop::new(config, provider).with_tools(tools()).expect("tools")
}

/// The real loop as the workloads' subject.
struct Driver(AgentLoop);

impl Subject for Driver {
    const FRAMEWORK: &'static str = "agentloop";
    type History = Vec<Message>;

    fn new(a: &Args) -> Self {
        Driver(agent(a))
    }

    async fn answer(&self, history: &mut Vec<Message>, prompt: String) -> String {
        let context = std::mem::take(history);
        let out = self.0.run(vec![Message::user(prompt)], context).await.expect("run failed");
        assert_eq!(out.stop, RunStop::Done, "run did not finish");
        let text = out.final_text();
        *history = out.context;
        text
    }

    fn check_session(history: &Vec<Message>) {
        assert_eq!(history.len(), 25 * 4, "history length");
    }
}

fn main() {
    common::main::<Driver>();
}
