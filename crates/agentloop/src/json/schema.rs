//! The JSON Schema schemars generates for a Rust type, in the one form the crate hands out: draft
//! 2020-12, self-contained (subschemas inlined; only recursive types keep `$defs`), without the
//! `$schema` key. Tool arguments (`macro_support`) and typed outputs (`agent::output`) both
//! start from it and tidy it for their own use. Hand-written argument schemas (the built-in
//! tools, tool search) share the object shape [`closed_object`].

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// The schema of `T` (see the module docs).
pub(crate) fn inlined_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    generator.into_root_schema_for::<T>().to_value()
}

/// `{"type": "object", "properties": …, "required": […], "additionalProperties": false}`
/// (`required` left out when empty): an object schema that refuses unknown properties.
pub(crate) fn closed_object(properties: Value, required: &[&str]) -> Value {
    let mut schema = json!({ "type": "object", "properties": properties });
    if !required.is_empty() {
        schema["required"] = json!(required);
    }
    schema["additionalProperties"] = json!(false);
    schema
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_object_lists_required_properties_only_when_there_are_some() {
        let with = closed_object(json!({"a": {"type": "string"}}), &["a"]);
        assert_eq!(
            with,
            json!({
                "type": "object",
                "properties": {"a": {"type": "string"}},
                "required": ["a"],
                "additionalProperties": false
            })
        );
        let without = closed_object(json!({}), &[]);
        assert_eq!(
            without,
            json!({"type": "object", "properties": {}, "additionalProperties": false})
        );
    }

    /// A node of a tree (recursive).
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Node {
        children: Vec<Node>,
    }

    /// Inner.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Inner {
        n: u32,
    }

    /// Outer.
    #[derive(JsonSchema)]
    #[allow(dead_code)]
    struct Outer {
        inner: Inner,
    }

    #[test]
    fn subschemas_are_inlined_and_there_is_no_meta_schema() {
        let schema = inlined_schema::<Outer>();
        assert!(schema.get("$schema").is_none(), "{schema}");
        assert!(schema.get("$defs").is_none(), "{schema}");
        assert_eq!(schema["properties"]["inner"]["type"], "object", "{schema}");
        // A recursive type refers to itself instead of being inlined forever.
        let recursive = inlined_schema::<Node>();
        assert_eq!(
            recursive["properties"]["children"]["items"]["$ref"], "#",
            "{recursive}"
        );
    }
}
