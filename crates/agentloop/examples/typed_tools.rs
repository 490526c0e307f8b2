//! Typed tools with `#[tool]`: three Rust functions become tools whose descriptions come from their
//! doc comments and whose JSON Schemas come from their argument types.
//!
//! - `convert_temperature`: a plain (sync) function with an enum argument;
//! - `lookup`: an async function that reads the application's deps through its `ToolContext`;
//! - `text_stats`: a function returning a struct, which the model receives as compact JSON.
//!
//! The example prints each generated schema, then the result of one direct call of each tool
//! (`ToolSpec::call`, which validates the arguments exactly as the executor does).
//!
//! Run it with `cargo run --example typed_tools`.

use std::collections::HashMap;
use std::sync::Arc;

use agentloop::tool;
use agentloop::tooling::{Registry, ToolContext, ToolError};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The application's dependency bundle: here, a small read-only key-value store.
#[derive(agentloop::ToolDeps)]
pub struct AppDeps {
    /// The stored values, by key.
    pub store: HashMap<String, String>,
}

/// A temperature scale.
#[agentloop::schema]
#[derive(Clone, Copy, Debug, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scale {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// Convert a temperature to the given scale.
#[tool(
    guidelines = ["Give temperatures to the user in the scale they used."],
    snippet = r#"convert_temperature({"value": 21.5, "to": "fahrenheit"})"#
)]
pub fn convert_temperature(
    /// The temperature, in the other scale.
    value: f64,
    /// The scale to convert to.
    to: Scale,
) -> String {
    match to {
        Scale::Fahrenheit => format!("{:.1} °F", value * 9.0 / 5.0 + 32.0),
        Scale::Celsius => format!("{:.1} °C", (value - 32.0) * 5.0 / 9.0),
    }
}

/// Look up the value stored under a key.
#[tool(timeout = "2s")]
pub async fn lookup(
    ctx: ToolContext<AppDeps>,
    /// The key, e.g. "owner".
    key: String,
) -> Result<String, ToolError> {
    // An async tool may await (a database, an HTTP call); this one only reads the deps.
    tokio::task::yield_now().await;
    ctx.store
        .get(&key)
        .cloned()
        .ok_or_else(|| ToolError::new(format!("No value is stored under {key:?}.")))
}

/// Counts of a text's words, lines and characters.
#[derive(Debug, Serialize)]
pub struct TextStats {
    /// Whitespace-separated words.
    pub words: usize,
    /// Lines.
    pub lines: usize,
    /// Unicode characters.
    pub chars: usize,
}

/// Count the words, lines and characters of a text.
#[tool]
pub fn text_stats(
    /// The text to measure.
    text: String,
) -> TextStats {
    TextStats {
        words: text.split_whitespace().count(),
        lines: text.lines().count(),
        chars: text.chars().count(),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let deps = Arc::new(AppDeps {
        store: HashMap::from([("owner".to_owned(), "Ada".to_owned())]),
    });
    // `lookup` needs `AppDeps`; the other two work with any deps bundle, so they adapt.
    let registry = Registry::new([convert_temperature_tool(), lookup_tool(), text_stats_tool()])?;

    for spec in registry.specs() {
        println!("{}: {}", spec.name(), spec.description());
        println!("{}\n", serde_json::to_string_pretty(spec.parameters())?);
    }

    let calls = [
        (
            "convert_temperature",
            json!({"value": 21.5, "to": "fahrenheit"}),
        ),
        ("lookup", json!({"key": "owner"})),
        ("text_stats", json!({"text": "one two\nthree"})),
    ];
    for (name, args) in calls {
        let spec = registry.get(name).ok_or("the tool is registered")?;
        match spec.call(deps.clone(), args.clone()).await {
            Ok(out) => println!("{name}({args}) -> {}", out.content),
            Err(err) => println!("{name}({args}) failed: {err}"),
        }
    }
    Ok(())
}
