//! A crate that depends on agentloop, serde and tokio only (no schemars) defines tool argument
//! types, a typed output and a deps bundle: this crate's dev-dependencies are those, so this test
//! is the proof that a crate needs no schemars dependency of its own.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use agentloop::tooling::{Registry, ToolContext};
use serde::{Deserialize, Serialize};

/// How urgent a ticket is.
#[agentloop::schema]
#[derive(Deserialize, Serialize, Debug)]
#[serde(rename_all = "snake_case")]
enum Priority {
    Low,
    High,
}

/// The structured answer of a triage run.
#[agentloop::schema]
#[derive(Deserialize, Debug)]
struct Triage {
    /// How urgent.
    priority: Priority,
    /// One line for the queue.
    summary: String,
}

#[derive(agentloop::ToolDeps)]
struct Shop {
    name: &'static str,
}

/// Open a ticket.
#[agentloop::tool(requires_approval)]
fn open_ticket(ctx: ToolContext<Shop>, priority: Priority, title: String) -> String {
    format!("{}: {priority:?} {title}", ctx.name)
}

/// Look a ticket up.
#[agentloop::tool]
async fn look_up(id: u64) -> String {
    format!("ticket {id}")
}

#[tokio::test]
async fn tools_outputs_and_deps_need_no_schemars_dependency() {
    let spec = open_ticket_tool();
    assert!(spec.requires_approval());
    assert_eq!(
        spec.parameters()["properties"]["priority"]["enum"],
        serde_json::json!(["low", "high"])
    );
    let schema = agentloop::output::output_schema::<Triage>();
    assert_eq!(schema["properties"]["summary"]["type"], "string");
    let triage: Triage =
        serde_json::from_value(serde_json::json!({"priority": "low", "summary": "s"})).unwrap();
    assert!(matches!(triage.priority, Priority::Low));
    assert_eq!(triage.summary, "s");
    let registry = Registry::new([spec, look_up_tool()]).unwrap();
    assert_eq!(registry.names().len(), 2);
    let out = open_ticket_tool()
        .call(
            Arc::new(Shop { name: "shop" }),
            serde_json::json!({"priority": "high", "title": "t"}),
        )
        .await
        .unwrap();
    assert_eq!(out.content, "shop: High t");
}
