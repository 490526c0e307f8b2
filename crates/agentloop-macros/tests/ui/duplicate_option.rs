use agentloop::tool;

/// Shout the text.
#[tool(timeout = 5, timeout = 10)]
fn shout(text: String) -> String {
    text.to_uppercase()
}

fn main() {}
