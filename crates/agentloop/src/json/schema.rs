//! The JSON Schema schemars generates for a Rust type, in the one form the crate hands out: draft
//! 2020-12, self-contained (subschemas inlined; only recursive types keep `$defs`), without the
//! `$schema` key. Tool arguments (`macro_support`) and typed outputs (`agent::output`) both
//! start from it and tidy it for their own use.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

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

#[cfg(test)]
mod tests {
    use super::*;

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
