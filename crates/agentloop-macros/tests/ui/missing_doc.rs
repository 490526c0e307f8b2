use agentloop::tool;

#[tool]
fn undocumented(text: String) -> String {
    text
}

fn main() {}
