use agentloop::tool;

/// Shout the text.
#[tool(name = "shout loudly")]
fn shout(text: String) -> String {
    text.to_uppercase()
}

fn main() {}
