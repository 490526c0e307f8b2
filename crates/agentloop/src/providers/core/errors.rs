//! Error mapping every provider shares: a readable message and a code from an HTTP error body,
//! a provider error reported inside the stream, and an event that is not JSON.

use serde_json::Value;

use crate::model::{ModelError, StreamErrorKind};

/// A readable message from a provider's error body (`{"error": {"message": …}}` and variants),
/// falling back to the (bounded) raw text.
///
/// ```
/// use agentloop::providers::core::error_message;
/// assert_eq!(error_message(r#"{"error": {"message": "Rate limit reached"}}"#), "Rate limit reached");
/// assert_eq!(error_message(""), "(empty body)");
/// ```
pub fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let from_json = parsed.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("message"))
            .or_else(|| v.get("error"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    from_json.unwrap_or_else(|| {
        let trimmed = body.trim();
        if trimmed.is_empty() {
            "(empty body)".to_owned()
        } else {
            prefix(trimmed, 500).to_owned()
        }
    })
}

/// The error type or code in a provider's error body (`{"error": {"type": …}}`,
/// `{"error": {"code": …}}`, Gemini's `{"error": {"status": …}}`), when there is one.
pub fn error_code(body: &str) -> Option<String> {
    let value: Value = serde_json::from_str(body).ok()?;
    let error = value.get("error").unwrap_or(&value);
    ["code", "type", "status"].iter().find_map(|key| {
        error.get(*key).and_then(|v| match v {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            _ => None,
        })
    })
}

/// A provider error sent inside the stream (an error object such as `{"code", "message"}`), as
/// [`ModelError::Provider`]: the code is the first of `code_keys` present and not null (a
/// number is written out), else `default_code`.
///
/// ```
/// use agentloop::model::ModelError;
/// use agentloop::providers::core::stream_error;
/// let error = serde_json::json!({"type": "overloaded_error", "message": "Overloaded"});
/// assert_eq!(
///     stream_error(&error, &["type"], "error"),
///     ModelError::Provider { code: "overloaded_error".into(), message: "Overloaded".into() }
/// );
/// ```
pub fn stream_error(error: &Value, code_keys: &[&str], default_code: &str) -> ModelError {
    let code = code_keys
        .iter()
        .filter_map(|key| error.get(*key))
        .find(|code| !code.is_null())
        .map(|code| match code {
            Value::String(code) => code.clone(),
            other => other.to_string(),
        })
        .unwrap_or_else(|| default_code.to_owned());
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("the provider reported an error")
        .to_owned();
    ModelError::Provider { code, message }
}

/// An event whose data is not JSON, with the start of the data for diagnosis.
pub fn unreadable(data: &str, error: &serde_json::Error) -> ModelError {
    ModelError::stream(
        StreamErrorKind::Unreadable,
        format!(
            "unreadable event from the provider ({error}): {}",
            prefix(data, 200)
        ),
    )
}

/// At most `max` bytes of `text`, cut at a character boundary.
fn prefix(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn provider_error_bodies_become_readable_messages() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Rate limit reached", "type": "x"}}"#),
            "Rate limit reached"
        );
        assert_eq!(
            error_message(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded"
        );
        assert_eq!(error_message("plain text"), "plain text");
        assert_eq!(error_message(""), "(empty body)");
    }

    #[test]
    fn stream_errors_take_the_first_code_present() {
        let code = |error: Value| match stream_error(&error, &["code", "type"], "error") {
            ModelError::Provider { code, .. } => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            code(json!({"code": null, "type": "server_error"})),
            "server_error"
        );
        assert_eq!(code(json!({"code": 429})), "429");
        assert_eq!(code(json!({"message": "x"})), "error");
    }

    #[test]
    fn unreadable_data_is_cut_at_a_character_boundary() {
        let data = "é".repeat(150);
        let Err(e) = serde_json::from_str::<Value>(&data) else {
            panic!("not JSON")
        };
        let ModelError::Stream { message, .. } = unreadable(&data, &e) else {
            panic!("a stream error")
        };
        assert!(message.ends_with(&"é".repeat(100)), "{message}");
    }
}
