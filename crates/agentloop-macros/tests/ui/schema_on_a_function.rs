/// Not a type.
#[agentloop::schema]
fn not_a_type() {}

fn main() {}
