#[agentloop::schema(crate = "schemars")]
#[derive(serde::Deserialize)]
struct Args {
    text: String,
}

fn main() {}
