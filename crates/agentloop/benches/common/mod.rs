//! What several benches share: the `echo` tool their agents call.

use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

/// A tool that returns its `text` argument.
pub fn echo() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }))
        .handler(|_c: ToolContext<Deps>, a: EchoArgs| async move { a.text })
        .build()
        .unwrap()
}
