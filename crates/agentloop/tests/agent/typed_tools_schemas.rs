//! The JSON Schemas `#[tool]` generates are part of what the model sees: these snapshots fail on
//! any change to them (the example's three tools, and nested, enum, optional, constrained and
//! recursive arguments).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop::tool;
use agentloop::tooling::{Deps, ToolSpec};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[path = "../../examples/typed_tools.rs"]
#[allow(dead_code)]
mod example;

fn shown<D>(spec: &ToolSpec<D>) -> Value {
    json!({
        "name": spec.name(),
        "description": spec.description(),
        "parameters": spec.parameters(),
    })
}

#[test]
fn example_convert_temperature() {
    insta::assert_json_snapshot!(shown::<Deps>(&example::convert_temperature_tool()));
}

#[test]
fn example_lookup() {
    insta::assert_json_snapshot!(shown(&example::lookup_tool()));
}

#[test]
fn example_text_stats() {
    insta::assert_json_snapshot!(shown::<Deps>(&example::text_stats_tool()));
}

/// Where a parcel goes.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)] // only the schema matters here
struct Address {
    /// Street and number.
    street: String,
    /// Postal code.
    #[schemars(regex(pattern = r"^[0-9]{5}$"))]
    postcode: String,
    /// Country, if not the default one.
    country: Option<String>,
}

/// How fast a parcel travels.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Service {
    /// The cheapest option.
    Standard,
    /// Delivered on a chosen day.
    Scheduled {
        /// The delivery day, `YYYY-MM-DD`.
        #[schemars(extend("format" = "date"))]
        day: String,
    },
}

/// Ship a parcel to an address.
#[tool]
fn ship(
    /// The recipient's address.
    to: Address,
    /// The delivery service.
    service: Service,
    /// Parcel weights in kilograms, one per parcel.
    #[schemars(length(min = 1, max = 10))]
    weights: Vec<f32>,
    /// Insured value in cents.
    #[schemars(range(min = 0, max = 1_000_000))]
    insured_cents: Option<u64>,
    /// Leave at the door when nobody answers.
    #[serde(default)]
    leave_at_door: bool,
) -> String {
    let _ = (to, service, weights, insured_cents, leave_at_door);
    "shipped".into()
}

#[test]
fn nested_enum_and_optional_arguments() {
    insta::assert_json_snapshot!(shown::<Deps>(&ship_tool()));
}

/// A folder tree.
#[derive(Deserialize, JsonSchema)]
#[allow(dead_code)]
struct Folder {
    /// The folder's name.
    name: String,
    /// Sub-folders.
    children: Vec<Folder>,
}

/// Create a folder tree.
#[tool]
fn create_tree(
    /// The root folder.
    root: Folder,
) -> String {
    root.name
}

#[test]
fn recursive_types_keep_their_definitions() {
    let spec: ToolSpec<Deps> = create_tree_tool();
    insta::assert_json_snapshot!(shown(&spec));
    // The `$ref`s resolve inside the schema itself.
    let text = serde_json::to_string(spec.parameters()).unwrap();
    assert!(text.contains("#/$defs/Folder"), "{text}");
    assert!(spec.parameters()["$defs"]["Folder"].is_object(), "{text}");
}

#[tokio::test]
async fn recursive_schemas_validate() {
    let spec: ToolSpec<Deps> = create_tree_tool();
    let deps = std::sync::Arc::new(Deps::new());
    let ok = spec
        .call(
            deps.clone(),
            json!({"root": {"name": "a", "children": [{"name": "b", "children": []}]}}),
        )
        .await
        .unwrap();
    assert_eq!(ok.content, "a");
    let err = spec
        .call(
            deps,
            json!({"root": {"name": "a", "children": [{"name": 1, "children": []}]}}),
        )
        .await
        .unwrap_err();
    assert!(err.message().contains("$.root.children[0].name"), "{err}");
}
