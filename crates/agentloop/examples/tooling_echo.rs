//! The smallest tool example: define the `echo` tool with a hand-written schema, register it, run
//! the call `call-1` with `{"text": "hello"}` without a model, and print the result's content and
//! its error flag, one per line.
//!
//! Run it with `cargo run --example tooling_echo`; it prints `hello` then `false`.

use std::sync::Arc;

use agentloop::tooling::{Deps, Registry, ToolContext, ToolSpec, run_tools};
use agentloop::transcript::ToolCallPart;
use serde::Deserialize;
use serde_json::json;

/// The handler's typed arguments: binding the model's arguments is deserializing into this.
#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

/// The handler: the deps bundle first, then the typed arguments.
fn echo(_deps: ToolContext<Deps>, args: EchoArgs) -> String {
    args.text
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false,
        }))
        .blocking_handler(echo)
        .build()?;
    let call = ToolCallPart::new("call-1", "echo", json!({"text": "hello"}));
    let registry = Registry::new(vec![spec])?;
    let results = run_tools(&[call], &registry, &Arc::new(Deps::new()), None).await;
    let result = &results[0];
    println!("{}", result.content);
    println!("{}", result.is_error);
    Ok(())
}
