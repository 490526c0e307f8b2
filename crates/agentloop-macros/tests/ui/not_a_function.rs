use agentloop::tool;

/// A struct is not a tool.
#[tool]
struct Shout;

fn main() {}
