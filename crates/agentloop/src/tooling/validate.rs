//! Validation of a call's arguments against its tool's full JSON Schema (beyond the executor contract, which
//! only binds arguments to the handler).
//!
//! Schemas are compiled once, when a tool enters a [`Registry`](crate::tooling::Registry) or is
//! first called directly (clones of a spec share the compiled schema); each call is then
//! checked in one pass that collects *every* violation, so the model can fix all of them in
//! its next attempt. The message shape follows what models already handle well:
//!
//! ```text
//! Validation failed for tool "echo":
//!   - $.text: 5 is not of type "string"
//!
//! Received arguments:
//! {
//!   "text": 5
//! }
//! ```

use jsonschema::Validator;
use jsonschema::paths::{Location, LocationSegment};
use serde_json::Value;

use super::error::{ToolError, ToolErrorKind};

/// Compiles a tool's parameter schema.
pub(crate) fn compile(schema: &Value) -> Result<Validator, String> {
    jsonschema::validator_for(schema).map_err(|e| e.to_string())
}

/// Checks `args` against the compiled schema; `Err` carries the model-facing report.
pub(crate) fn check(tool: &str, validator: &Validator, args: &Value) -> Result<(), ToolError> {
    if validator.is_valid(args) {
        return Ok(());
    }
    let mut violations: Vec<String> = validator
        .iter_errors(args)
        .map(|e| format!("  - {}: {}", json_path(e.instance_path()), e))
        .collect();
    violations.dedup();
    let received = serde_json::to_string_pretty(args).unwrap_or_else(|_| args.to_string());
    Err(ToolError::with_kind(
        ToolErrorKind::InvalidArguments,
        format!(
            "Validation failed for tool \"{tool}\":\n{}\n\nReceived arguments:\n{received}",
            violations.join("\n")
        ),
    ))
}

/// Renders an instance location as a JSONPath (`$`, `$.a.b`, `$.items[2]`, `$["odd key"]`).
pub(crate) fn json_path(location: &Location) -> String {
    let mut out = String::from("$");
    for segment in location.iter() {
        match segment {
            LocationSegment::Index(i) => {
                out.push('[');
                out.push_str(&i.to_string());
                out.push(']');
            }
            LocationSegment::Property(name) => {
                let plain = !name.is_empty()
                    && !name.starts_with(|c: char| c.is_ascii_digit())
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if plain {
                    out.push('.');
                    out.push_str(&name);
                } else {
                    out.push('[');
                    out.push_str(&Value::String(name.into_owned()).to_string());
                    out.push(']');
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn report(schema: Value, args: Value) -> String {
        let v = compile(&schema).unwrap_or_else(|e| panic!("{e}"));
        match check("t", &v, &args) {
            Ok(()) => String::new(),
            Err(e) => e.message().to_owned(),
        }
    }

    #[test]
    fn nested_paths_are_rendered_as_json_path() {
        let schema = json!({
            "type": "object",
            "properties": {
                "items": {"type": "array", "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}, "odd key": {"type": "integer"}}
                }}
            }
        });
        let msg = report(
            schema,
            json!({"items": [{"name": "a"}, {"name": 3, "odd key": "x"}]}),
        );
        assert!(
            msg.contains("  - $.items[1].name: 3 is not of type \"string\""),
            "{msg}"
        );
        assert!(msg.contains("  - $.items[1][\"odd key\"]: "), "{msg}");
        assert!(msg.contains("Received arguments:\n{"), "{msg}");
    }

    #[test]
    fn valid_arguments_pass() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
        assert_eq!(report(schema, json!({"a": 1})), "");
    }
}
