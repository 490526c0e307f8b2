//! Answering a server's `elicitation/create` (a request for input from the user during a
//! call). An agent often runs with nobody to ask, so without an [`Elicitor`] the answer never
//! waits for anyone: [`ElicitationMode::Decline`] (the default) declines at once,
//! [`ElicitationMode::Defaults`] accepts with the default value of every field of the
//! requested form (declining when a required field has none), and URL-mode requests are
//! declined (nothing is opened). An application with a person at hand (the CLI's chat on a
//! terminal) sets an [`Elicitor`], which gets every request, forms and URLs alike.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use serde_json::{Map, Value};

/// A server's request for input, as an [`Elicitor`] gets it.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ElicitationRequest {
    /// Fill in a form.
    Form {
        /// The server's name.
        server: String,
        /// What the server says it needs (untrusted text).
        message: String,
        /// The requested schema: an object of primitive properties (strings with a format
        /// or length bounds, numbers and integers with bounds, booleans, enums).
        schema: Value,
        /// The properties' names in the order the server sent them (`schema` is a map).
        order: Vec<String>,
    },
    /// Open a URL (out-of-band interaction, e.g. a payment or a third-party login).
    Url {
        /// The server's name.
        server: String,
        /// What the server says it needs (untrusted text).
        message: String,
        /// The URL to open (untrusted).
        url: String,
    },
}

/// The person's answer to an [`ElicitationRequest`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum ElicitationAnswer {
    /// Accepted: the form's values (empty for a URL the person agreed to open).
    Accept(Map<String, Value>),
    /// Explicitly declined.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

/// The future an [`Elicitor`] returns.
pub type ElicitFuture = Pin<Box<dyn Future<Output = ElicitationAnswer> + Send>>;

/// Asks a person for what a server requests. Compared by identity.
#[derive(Clone)]
pub struct Elicitor(Arc<dyn Fn(ElicitationRequest) -> ElicitFuture + Send + Sync>);

impl Elicitor {
    /// An elicitor answering with `ask`.
    pub fn new(ask: impl Fn(ElicitationRequest) -> ElicitFuture + Send + Sync + 'static) -> Self {
        Elicitor(Arc::new(ask))
    }

    /// Asks for `request`.
    pub fn ask(&self, request: ElicitationRequest) -> ElicitFuture {
        (self.0)(request)
    }
}

impl fmt::Debug for Elicitor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Elicitor(..)")
    }
}

impl PartialEq for Elicitor {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for Elicitor {}

/// Asks `elicitor` for server `server`'s `request`; its answer as the protocol's result.
pub(crate) async fn ask(
    elicitor: &Elicitor,
    server: &str,
    request: ElicitRequestParams,
) -> ElicitResult {
    let request = match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => ElicitationRequest::Form {
            server: server.to_owned(),
            message,
            order: requested_schema
                .property_order
                .clone()
                .unwrap_or_else(|| requested_schema.properties.keys().cloned().collect()),
            schema: serde_json::to_value(requested_schema).unwrap_or_default(),
        },
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => ElicitationRequest::Url {
            server: server.to_owned(),
            message,
            url,
        },
        // A kind of request this version does not know: nothing to show the person.
        _ => return ElicitResult::new(ElicitationAction::Decline),
    };
    let is_form = matches!(request, ElicitationRequest::Form { .. });
    match elicitor.ask(request).await {
        ElicitationAnswer::Accept(content) if is_form => {
            ElicitResult::new(ElicitationAction::Accept).with_content(Value::Object(content))
        }
        ElicitationAnswer::Accept(_) => ElicitResult::new(ElicitationAction::Accept),
        ElicitationAnswer::Decline => ElicitResult::new(ElicitationAction::Decline),
        _ => ElicitResult::new(ElicitationAction::Cancel),
    }
}

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
