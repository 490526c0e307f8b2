//! The shared shape of the built-in file tools' argument schemas: an object that refuses
//! unknown properties, and a `path` relative to the workspace root. One place, so that the
//! wording the model reads about paths is the same for every tool.

use serde_json::{Value, json};

/// The closed object schema every built-in tool's arguments use.
pub(super) use crate::json::schema::closed_object as object;

/// A `path` argument naming a file: "`what`, relative to the workspace root (absolute paths
/// must be inside the workspace)."
pub(super) fn file_path(what: &str) -> Value {
    json!({
        "type": "string",
        "description": format!(
            "{what}, relative to the workspace root (absolute paths must be inside the workspace)."
        ),
    })
}

/// A string argument.
pub(super) fn string(description: &str) -> Value {
    json!({ "type": "string", "description": description })
}

/// A string argument that must not be empty.
pub(super) fn non_empty_string(description: &str) -> Value {
    json!({ "type": "string", "minLength": 1, "description": description })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_path_says_where_it_is_relative_to() {
        assert_eq!(
            file_path("File to read")["description"],
            "File to read, relative to the workspace root (absolute paths must be inside the \
             workspace)."
        );
    }
}
