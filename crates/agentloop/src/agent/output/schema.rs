//! Schema shaping for typed output: wrapping non-object outputs (provider APIs want an object at
//! the top), the lossless rewrite into OpenAI's strict subset, and splitting a union into one
//! final-result tool per branch.
//!
//! Everything here is pure `Value -> Value` work done once per run, before the first model call.

use serde_json::{Value, json};

use crate::tooling::name_safe;

/// The property a non-object output is wrapped in (`{"response": <the value>}`).
pub(crate) const WRAP_KEY: &str = "response";

/// Keywords that describe a schema (annotations); dropping them never changes which values are
/// valid.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
];

/// Keywords OpenAI's strict mode rejects. A schema that needs one cannot be made strict without
/// changing what it accepts, so it goes out non-strict instead.
const STRICT_UNSUPPORTED: &[&str] = &[
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "patternProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "contains",
    "minContains",
    "maxContains",
    "prefixItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "minLength",
    "maxLength",
];

/// String formats strict mode accepts; other formats are annotations to our validator (formats
/// are not asserted), so dropping them is lossless.
const STRICT_FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Whether `schema` describes only JSON objects (what a tool's parameters and a provider's
/// response schema must be).
pub(crate) fn is_object_schema(schema: &Value) -> bool {
    let Some(map) = schema.as_object() else {
        return false;
    };
    if map.contains_key("anyOf") || map.contains_key("oneOf") {
        return false;
    }
    match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(_) => false,
        None => map.contains_key("properties"),
    }
}

/// `schema` wrapped as `{"response": schema}` (its `$defs` move to the new root so `$ref`s keep
/// resolving).
pub(crate) fn wrap(schema: &Value) -> Value {
    let mut inner = schema.clone();
    let defs = inner.as_object_mut().and_then(|m| {
        m.remove("$schema");
        m.remove("$defs")
    });
    let mut root = json!({
        "type": "object",
        "properties": { WRAP_KEY: inner },
        "required": [WRAP_KEY],
        "additionalProperties": false,
    });
    if let (Some(defs), Some(map)) = (defs, root.as_object_mut()) {
        map.insert("$defs".into(), defs);
    }
    root
}

/// The schema rewritten into OpenAI's strict subset, or `None` when that would change which
/// values are accepted (then the schema is sent non-strict).
///
/// Lossless rewrites: objects with declared properties get `additionalProperties: false`;
/// optional properties that already accept `null` become required (a model then sends `null`
/// instead of leaving the key out, which deserializes the same); `oneOf` whose branches are
/// provably disjoint (distinct tags or constants) becomes `anyOf`; annotations and unknown
/// formats are dropped. Anything else strict mode cannot express (maps, optional non-nullable
/// properties, `allOf`, length limits…) makes the whole schema non-strict.
pub(crate) fn strictify(schema: &Value) -> Option<Value> {
    let mut out = schema.clone();
    strict_node(&mut out, schema)?;
    if !is_object_schema(&out) {
        return None;
    }
    Some(out)
}

fn strict_node(node: &mut Value, root: &Value) -> Option<()> {
    let map = node.as_object_mut()?; // `true` / `false` schemas have no strict form
    for key in STRICT_UNSUPPORTED {
        if map.contains_key(*key) {
            return None;
        }
    }
    for key in ANNOTATIONS {
        map.remove(*key);
    }
    if let Some(Value::String(format)) = map.get("format") {
        if !STRICT_FORMATS.contains(&format.as_str()) {
            map.remove("format");
        }
    }
    if let Some(one_of) = map.remove("oneOf") {
        if !branches_disjoint(&one_of, root) {
            return None;
        }
        map.insert("anyOf".into(), one_of);
    }
    let is_object = match map.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => ts.iter().any(|t| t == "object"),
        None => map.contains_key("properties"),
        Some(_) => false,
    };
    if is_object {
        match map.get("additionalProperties") {
            None | Some(Value::Bool(false)) => {}
            // A map (`HashMap<String, T>`) or an explicit "anything goes": not expressible.
            Some(_) => return None,
        }
        let Some(Value::Object(properties)) = map.get("properties") else {
            // A free-form object: strict mode needs its keys spelled out.
            return None;
        };
        let mut required: Vec<Value> = match map.get("required") {
            Some(Value::Array(r)) => r.clone(),
            _ => Vec::new(),
        };
        for (name, property) in properties {
            let listed = required.iter().any(|r| r == name);
            if !listed {
                if !accepts_null(property, root) {
                    return None;
                }
                required.push(Value::String(name.clone()));
            }
        }
        map.insert("required".into(), Value::Array(required));
        map.insert("additionalProperties".into(), Value::Bool(false));
    }
    for key in ["properties", "$defs", "definitions"] {
        if let Some(Value::Object(children)) = map.get_mut(key) {
            for child in children.values_mut() {
                strict_node(child, root)?;
            }
        }
    }
    for key in ["anyOf"] {
        if let Some(Value::Array(children)) = map.get_mut(key) {
            for child in children.iter_mut() {
                strict_node(child, root)?;
            }
        }
    }
    match map.get_mut("items") {
        Some(Value::Bool(_)) => return None,
        Some(items @ Value::Object(_)) => strict_node(items, root)?,
        Some(_) => return None,
        None => {}
    }
    Some(())
}

/// Follows a local `$ref` (`#/$defs/Name`) to its target in `root`.
fn resolve<'a>(schema: &'a Value, root: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(pointer) if pointer.starts_with('#') => root.pointer(&pointer[1..]).unwrap_or(schema),
        _ => schema,
    }
}

/// Whether the schema accepts `null` (a `type` that lists it, `null` among its constants, or a
/// branch that does).
fn accepts_null(schema: &Value, root: &Value) -> bool {
    let schema = resolve(schema, root);
    match schema.get("type") {
        Some(Value::String(t)) if t == "null" => return true,
        Some(Value::Array(ts)) if ts.iter().any(|t| t == "null") => return true,
        _ => {}
    }
    if schema.get("const") == Some(&Value::Null) {
        return true;
    }
    if let Some(Value::Array(values)) = schema.get("enum") {
        if values.contains(&Value::Null) {
            return true;
        }
    }
    ["anyOf", "oneOf"].iter().any(|key| {
        schema
            .get(*key)
            .and_then(Value::as_array)
            .is_some_and(|branches| branches.iter().any(|b| accepts_null(b, root)))
    })
}

/// What tells one branch of a union apart from the others.
#[derive(Debug, PartialEq)]
enum Discriminant {
    /// The branch is a set of constants (`const` / `enum`).
    Constants(Vec<Value>),
    /// An object branch with a property fixed to one value (serde's internally tagged enums).
    Tag(String, Value),
    /// An object branch with exactly one, required property and no others (serde's externally
    /// tagged enums).
    Key(String),
}

fn discriminant(branch: &Value, root: &Value) -> Option<Discriminant> {
    let branch = resolve(branch, root);
    if let Some(c) = branch.get("const") {
        return Some(Discriminant::Constants(vec![c.clone()]));
    }
    if let Some(Value::Array(values)) = branch.get("enum") {
        return Some(Discriminant::Constants(values.clone()));
    }
    let properties = branch.get("properties")?.as_object()?;
    let required: Vec<&str> = branch
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    for (name, property) in properties {
        let property = resolve(property, root);
        let fixed = property
            .get("const")
            .cloned()
            .or_else(|| match property.get("enum") {
                Some(Value::Array(values)) if values.len() == 1 => values.first().cloned(),
                _ => None,
            });
        if let (Some(value), true) = (fixed, required.contains(&name.as_str())) {
            return Some(Discriminant::Tag(name.clone(), value));
        }
    }
    let closed = branch.get("additionalProperties") == Some(&Value::Bool(false));
    if properties.len() == 1 && required.len() == 1 && closed {
        return Some(Discriminant::Key(required[0].to_owned()));
    }
    None
}

/// Whether no value can match two branches of `one_of` (so `anyOf` accepts exactly the same
/// values).
fn branches_disjoint(one_of: &Value, root: &Value) -> bool {
    let Some(branches) = one_of.as_array() else {
        return false;
    };
    let mut seen: Vec<Discriminant> = Vec::with_capacity(branches.len());
    for branch in branches {
        let Some(d) = discriminant(branch, root) else {
            return false;
        };
        for other in &seen {
            let clash = match (&d, other) {
                (Discriminant::Constants(a), Discriminant::Constants(b)) => {
                    a.iter().any(|v| b.contains(v))
                }
                // Constants that are not objects never match an object branch.
                (Discriminant::Constants(c), _) | (_, Discriminant::Constants(c)) => {
                    c.iter().any(Value::is_object)
                }
                (Discriminant::Tag(ka, va), Discriminant::Tag(kb, vb)) => ka != kb || va == vb,
                (Discriminant::Key(a), Discriminant::Key(b)) => a == b,
                // A tagged branch and a single-key branch: disjoint only if the key is not the
                // tag property — too subtle to prove in general, so treat it as a clash.
                _ => true,
            };
            if clash {
                return false;
            }
        }
        seen.push(d);
    }
    true
}

/// One final-result tool of a union output: its name and the branch schema.
#[derive(Clone, Debug)]
pub(crate) struct Branch {
    /// Suggested tool-name suffix (sanitised later).
    pub(crate) label: String,
    /// The branch schema, self-contained (the root's `$defs` copied in).
    pub(crate) schema: Value,
    /// The branch's description, if any.
    pub(crate) description: Option<String>,
}

/// The branches of a union output (`oneOf` / `anyOf` at the top with at least two branches), or
/// `None` when the output is not a union.
pub(crate) fn union_branches(schema: &Value) -> Option<Vec<Branch>> {
    let map = schema.as_object()?;
    if map.contains_key("type") || map.contains_key("properties") {
        return None;
    }
    let branches = map.get("oneOf").or_else(|| map.get("anyOf"))?.as_array()?;
    if branches.len() < 2 {
        return None;
    }
    let defs = map.get("$defs").cloned();
    Some(
        branches
            .iter()
            .enumerate()
            .map(|(i, branch)| {
                let resolved = resolve(branch, schema);
                let label = branch_label(resolved, schema).unwrap_or_else(|| format!("{}", i + 1));
                let description = resolved
                    .get("description")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let mut own = resolved.clone();
                if let (Some(defs), Some(m)) = (&defs, own.as_object_mut()) {
                    m.entry("$defs").or_insert_with(|| defs.clone());
                }
                Branch {
                    label,
                    schema: own,
                    description,
                }
            })
            .collect(),
    )
}

fn branch_label(branch: &Value, root: &Value) -> Option<String> {
    if let Some(title) = branch.get("title").and_then(Value::as_str) {
        return Some(title.to_owned());
    }
    match discriminant(branch, root)? {
        Discriminant::Constants(values) => {
            values.first().and_then(Value::as_str).map(str::to_owned)
        }
        Discriminant::Tag(_, value) => value.as_str().map(str::to_owned),
        Discriminant::Key(key) => Some(key),
    }
}

/// A provider-safe tool name (`[A-Za-z0-9_-]{1,64}`) made from `base` and `label`.
pub(crate) fn tool_name(base: &str, label: &str) -> String {
    let mut name = format!("{base}_{}", name_safe(label, 64));
    name.truncate(64);
    name
}

/// Schema of a union branch offered as tool parameters: objects as they are, anything else
/// wrapped. Returns the parameters and whether they are wrapped.
pub(crate) fn as_parameters(schema: &Value) -> (Value, bool) {
    if is_object_schema(schema) {
        let mut params = schema.clone();
        if let Some(m) = params.as_object_mut() {
            m.remove("$schema");
        }
        (params, false)
    } else {
        (wrap(schema), true)
    }
}

/// Removes the keys a tool-parameters schema should not carry at its top (kept small: providers
/// accept the rest).
pub(crate) fn tidy_root(schema: &mut Value) {
    if let Some(m) = schema.as_object_mut() {
        m.remove("$schema");
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn nullable_optionals_become_required_and_objects_close() {
        let schema = json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "note": {"type": ["string", "null"]},
                "n": {"type": "integer", "format": "uint32", "minimum": 0}
            },
            "required": ["title", "n"]
        });
        let strict = strictify(&schema).unwrap();
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(strict["required"], json!(["title", "n", "note"]));
        assert!(strict["properties"]["n"].get("format").is_none());
        assert_eq!(strict["properties"]["n"]["minimum"], json!(0));
    }

    #[test]
    fn optional_non_nullable_maps_and_length_limits_are_not_strict() {
        let optional = json!({"type": "object", "properties": {"a": {"type": "string"}}});
        assert!(strictify(&optional).is_none());
        let map = json!({"type": "object", "properties": {},
                         "additionalProperties": {"type": "integer"}});
        assert!(strictify(&map).is_none());
        let limit = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}},
                           "required": ["a"]});
        assert!(strictify(&limit).is_none());
        let free = json!({"type": "object"});
        assert!(strictify(&free).is_none());
    }

    #[test]
    fn tagged_one_of_becomes_any_of_untagged_does_not() {
        let tagged = json!({"type": "object", "properties": {"r": {"oneOf": [
            {"type": "object", "properties": {"kind": {"const": "a"}, "x": {"type": "integer"}},
             "required": ["kind", "x"]},
            {"type": "object", "properties": {"kind": {"const": "b"}}, "required": ["kind"]}
        ]}}, "required": ["r"]});
        let strict = strictify(&tagged).unwrap();
        assert!(strict["properties"]["r"].get("anyOf").is_some());
        let untagged = json!({"type": "object", "properties": {"r": {"oneOf": [
            {"type": "integer"}, {"type": "number"}
        ]}}, "required": ["r"]});
        assert!(strictify(&untagged).is_none());
    }

    #[test]
    fn wrapping_moves_defs_to_the_root() {
        let schema = json!({"type": "array", "items": {"$ref": "#/$defs/X"},
                            "$defs": {"X": {"type": "string"}}});
        let wrapped = wrap(&schema);
        assert_eq!(wrapped["required"], json!(["response"]));
        assert_eq!(wrapped["$defs"]["X"], json!({"type": "string"}));
        assert!(wrapped["properties"]["response"].get("$defs").is_none());
        let v = jsonschema::validator_for(&wrapped).unwrap();
        assert!(v.is_valid(&json!({"response": ["a"]})));
        assert!(!v.is_valid(&json!({"response": [1]})));
    }

    #[test]
    fn union_branches_are_labelled_by_tag_key_or_title() {
        let external = json!({"oneOf": [
            {"type": "object", "properties": {"Answer": {"type": "object"}}, "required": ["Answer"],
             "additionalProperties": false},
            {"type": "object", "properties": {"NeedsInfo": {"type": "string"}},
             "required": ["NeedsInfo"], "additionalProperties": false}
        ]});
        let b = union_branches(&external).unwrap();
        assert_eq!(b[0].label, "Answer");
        assert_eq!(b[1].label, "NeedsInfo");
        assert_eq!(tool_name("final_result", "a b/c"), "final_result_a_b_c");
        assert!(union_branches(&json!({"type": "object"})).is_none());
    }
}
