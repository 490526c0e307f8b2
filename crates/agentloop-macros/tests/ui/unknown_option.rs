use agentloop::tool;

/// Shout the text.
#[tool(paralel_safe = false)]
fn shout(text: String) -> String {
    text.to_uppercase()
}

fn main() {}
