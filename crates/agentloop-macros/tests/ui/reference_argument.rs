use agentloop::tool;

/// Shout the text.
#[tool]
fn shout(text: &str) -> String {
    text.to_uppercase()
}

fn main() {}
