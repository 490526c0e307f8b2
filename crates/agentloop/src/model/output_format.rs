//! The native structured-output part of a [`ModelRequest`](super::ModelRequest).
//!
//! Typed output ([`crate::agent::output`]) decides *what* the final answer must match; this is only the
//! wire-neutral description the provider adapters map to their own fields. It lives with the
//! model request so that providers depend on the model layer alone, not on typed output.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Native structured output as sent on a [`ModelRequest`](super::ModelRequest): the
/// schema the final answer must match. Each provider adapter maps it to its own field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct OutputFormat {
    /// Schema name (`[A-Za-z0-9_-]`, at most 64 characters).
    pub name: String,
    /// What the output is, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema (always an object schema: non-object outputs are wrapped in
    /// `{"response": …}`).
    pub schema: Value,
    /// Whether the schema is in OpenAI's strict subset and should be enforced strictly.
    pub strict: bool,
}

impl OutputFormat {
    /// A format for `schema`, named `name`.
    pub fn new(name: impl Into<String>, schema: Value, strict: bool) -> Self {
        OutputFormat {
            name: name.into(),
            description: None,
            schema,
            strict,
        }
    }
}
