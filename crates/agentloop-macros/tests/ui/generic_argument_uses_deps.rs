use agentloop::tool;
use agentloop::tooling::{ToolContext, ToolDeps};

/// Echo a value of the deps type.
#[tool]
fn echo<D: ToolDeps>(ctx: ToolContext<D>, value: Vec<D>) -> usize {
    let _ = ctx;
    value.len()
}

fn main() {}
