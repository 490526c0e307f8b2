//! Answering a server's `elicitation/create` (a request for input from the user during a
//! call). An agent often runs with nobody to ask, so the answer never waits for anyone:
//! [`ElicitationMode::Decline`] (the default) declines at once, [`ElicitationMode::Defaults`]
//! accepts with the default value of every field of the requested form (declining when a
//! required field has none). URL-mode requests are declined (nothing is opened).

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// How a server's request for user input is answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum ElicitationMode {
    /// Decline every request (the server is told the user declined).
    #[default]
    Decline,
    /// Accept with the form's default values; decline when a required field has no default.
    Defaults,
}

impl ElicitationMode {
    /// Whether the client announces the elicitation capability (only when it can accept).
    pub(crate) fn announced(self) -> bool {
        self == ElicitationMode::Defaults
    }
}

/// The answer to one request under `mode`.
pub(crate) fn answer(mode: ElicitationMode, request: &ElicitRequestParams) -> ElicitResult {
    let ElicitRequestParams::FormElicitationParams {
        requested_schema, ..
    } = request
    else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    if mode == ElicitationMode::Decline {
        return ElicitResult::new(ElicitationAction::Decline);
    }
    let schema = serde_json::to_value(requested_schema).unwrap_or_default();
    match defaults_of(&schema) {
        Some(content) => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        None => ElicitResult::new(ElicitationAction::Decline),
    }
}

/// Each property's `default`; `None` when a required property has none.
pub(crate) fn defaults_of(schema: &Value) -> Option<Map<String, Value>> {
    let mut content = Map::new();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    let required = schema["required"].as_array().into_iter().flatten();
    for name in required.filter_map(Value::as_str) {
        if !content.contains_key(name) {
            return None;
        }
    }
    Some(content)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_the_form_or_decline() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "Ada"},
            "age": {"type": "integer", "default": 36},
            "note": {"type": "string"}
        }, "required": ["name"]});
        let content = defaults_of(&schema).unwrap();
        assert_eq!(Value::Object(content), json!({"name": "Ada", "age": 36}));
        let schema = json!({"type": "object", "properties": {"pin": {"type": "string"}},
            "required": ["pin"]});
        assert!(defaults_of(&schema).is_none());
    }
}
