use agentloop::tool;

struct Opaque;

/// Make something that cannot be serialized.
#[tool]
fn make() -> Opaque {
    Opaque
}

fn main() {}
