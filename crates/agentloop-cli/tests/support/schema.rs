//! The `--json` event lines checked against the documented schema
//! (`schema/events.schema.json`), so that every test reading them also holds the binary to it.

use std::process::Output;

use serde_json::Value;

/// Every line of `stdout`, each parsed and checked against `schema/events.schema.json`.
pub fn schema_checked(stdout: &[u8]) -> Vec<Value> {
    let schema: Value =
        serde_json::from_str(include_str!("../../schema/events.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|line| {
            let value: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| format!("{} at {}", e, e.instance_path()))
                .collect();
            assert!(errors.is_empty(), "{line}\n{}", errors.join("\n"));
            value
        })
        .collect()
}

/// [`schema_checked`] of the stdout of `out`.
pub fn events(out: &Output) -> Vec<Value> {
    schema_checked(&out.stdout)
}
