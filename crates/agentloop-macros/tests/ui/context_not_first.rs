use agentloop::tool;
use agentloop::tooling::{Deps, ToolContext};

/// Shout the text.
#[tool]
fn shout(text: String, ctx: ToolContext<Deps>) -> String {
    let _ = ctx;
    text.to_uppercase()
}

fn main() {}
