use agentloop::tool;

/// Shout the text.
#[tool(timeout = "30 seconds")]
fn shout(text: String) -> String {
    text.to_uppercase()
}

fn main() {}
