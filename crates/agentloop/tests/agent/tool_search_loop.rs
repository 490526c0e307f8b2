//! Deferred tools in the agent loop: hidden until a tool search loads them, the search tool
//! offered as a plain function to models without native tool search, and loaded tools kept when a
//! conversation is resumed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::tooling::{Deps, Registry, ToolContext, ToolSpec, bm25_tool_search};
use agentloop::transcript::Message;
use serde_json::{Value, json};

fn tool(name: &str, description: &str, deferred: bool) -> ToolSpec<Deps> {
    let label = name.to_owned();
    ToolSpec::<Deps>::builder(name, description)
        .deferred(deferred)
        .blocking_handler(move |_c: ToolContext<Deps>, _a: Value| format!("{label} ran"))
        .build()
        .unwrap()
}

fn agent(model: Arc<ScriptedModel>) -> AgentLoop<Deps> {
    let mut registry = Registry::new(vec![
        tool("echo", "Echo text back.", false),
        tool("get_weather", "Current weather forecast for a city.", true),
        tool(
            "stock_price",
            "Latest stock price for a ticker symbol.",
            true,
        ),
    ])
    .unwrap();
    let search = bm25_tool_search(&registry, 1);
    registry.add(search.clone()).unwrap();
    let specs: Vec<_> = registry.specs().cloned().collect();
    AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools(specs)
        .unwrap()
}

fn names(tools: &[agentloop::tooling::ToolSchema]) -> Vec<String> {
    tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn deferred_tools_appear_only_after_a_search_loads_them() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new().tool_call("s1", "tool_search", json!({"query": "weather forecast"})),
        ScriptedTurn::new().tool_call("w1", "get_weather", json!({"city": "Oslo"})),
        ScriptedTurn::text("It is cold."),
    ]));
    let agent = agent(model.clone());
    let out = agent
        .run(vec![Message::user("Weather in Oslo?")], vec![])
        .await
        .unwrap();
    assert_eq!(out.stop, RunStop::Done);
    let requests = model.requests();
    assert_eq!(names(&requests[0].tools), ["echo", "tool_search"]);
    assert_eq!(
        names(&requests[1].tools),
        ["echo", "get_weather", "tool_search"]
    );
    let search_result = out.new_messages()[2].tool_result_part().unwrap();
    assert_eq!(search_result.content, r#"["get_weather"]"#);
    assert_eq!(
        out.new_messages()[4].tool_result_part().unwrap().content,
        "get_weather ran"
    );

    // A resumed conversation keeps what it had loaded.
    let model2 = Arc::new(ScriptedModel::new([ScriptedTurn::text("Still cold.")]));
    let resumed = agent_with_model(model2.clone());
    let mut context = out.context.clone();
    context.push(Message::user("And now?"));
    resumed.run_continue(context).await.unwrap();
    assert_eq!(
        names(&model2.requests()[0].tools),
        ["echo", "get_weather", "tool_search"]
    );
}

fn agent_with_model(model: Arc<ScriptedModel>) -> AgentLoop<Deps> {
    agent(model)
}

#[tokio::test]
async fn a_deferred_tool_called_before_it_is_loaded_is_refused() {
    let model = Arc::new(ScriptedModel::new([
        ScriptedTurn::new()
            .tool_call("w0", "get_weather", json!({"city": "Oslo"}))
            .tool_call("e0", "echo", json!({})),
        ScriptedTurn::text("ok"),
    ]));
    let agent = agent(model.clone());
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    let refused = out.new_messages()[2].tool_result_part().unwrap();
    assert!(refused.is_error);
    assert_eq!(
        refused.content,
        "Tool \"get_weather\" is not loaded yet: call tool_search to find and load it first."
    );
    let echoed = out.new_messages()[3].tool_result_part().unwrap();
    assert_eq!(echoed.content, "echo ran", "the visible sibling still runs");
}
