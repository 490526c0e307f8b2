//! Errors of the tooling layer: what a handler reports ([`ToolError`]) and what building a tool or
//! a registry can refuse ([`SpecError`], [`RegistryError`]).
//!
//! A `ToolError` never escapes the executor: it becomes an error *result* the model can read. Spec
//! and registry errors are programming errors reported to the application at construction time.

use std::time::Duration;

/// Why a tool call failed. Every class the executor can produce has its own kind so that callers
/// (the agent loop, hooks, tests) can match on it instead of parsing text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ToolErrorKind {
    /// The handler returned an error.
    Failed,
    /// The arguments were not a JSON object (unparseable text, a string, null, an array).
    MalformedArguments,
    /// The arguments violate the tool's JSON Schema.
    InvalidArguments,
    /// The arguments passed the schema but did not deserialize into the handler's argument type.
    ArgumentsMismatch,
    /// No tool of that name is registered.
    UnknownTool,
    /// The approval hook (or an extension) denied the call.
    Denied,
    /// The approval hook itself failed (panicked).
    ApprovalFailed,
    /// The call ran longer than its timeout.
    Timeout,
    /// The handler panicked.
    Panicked,
    /// The run was aborted before the call finished.
    Aborted,
    /// The approval hook deferred the decision to a person ([`Approval::Defer`](super::Approval::Defer));
    /// the agent loop never sends this result to the model (the call is parked instead).
    Deferred,
}

/// An error returned by a tool handler (or produced by the executor for a call).
///
/// The message is shown to the model, so write it as an instruction the model can act on. Mark an
/// error [`retryable`](ToolError::retryable) when running the same call again may succeed (a
/// flaky network, a busy resource); the agent loop re-runs such calls up to `max_retries` times.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ToolError {
    message: String,
    kind: ToolErrorKind,
    retryable: bool,
}

impl ToolError {
    /// A handler failure with model-visible text.
    pub fn new(message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            kind: ToolErrorKind::Failed,
            retryable: false,
        }
    }

    /// A handler failure worth retrying (the loop re-runs the call before reporting it).
    pub fn retryable(message: impl Into<String>) -> Self {
        ToolError {
            retryable: true,
            ..ToolError::new(message)
        }
    }

    /// An error of a given kind (used by the executor for the failures it detects itself).
    pub fn with_kind(kind: ToolErrorKind, message: impl Into<String>) -> Self {
        ToolError {
            message: message.into(),
            kind,
            retryable: false,
        }
    }

    /// The model-visible text.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Which class of failure this is.
    pub fn kind(&self) -> ToolErrorKind {
        self.kind
    }

    /// Whether running the call again may succeed.
    pub fn is_retryable(&self) -> bool {
        self.retryable
    }

    pub(crate) fn unknown_tool(name: &str, available: &[String]) -> Self {
        let list = if available.is_empty() {
            "(none)".to_owned()
        } else {
            available.join(", ")
        };
        ToolError::with_kind(
            ToolErrorKind::UnknownTool,
            format!("Unknown tool \"{name}\". Available tools: {list}."),
        )
    }

    pub(crate) fn malformed(name: &str, received: &str, what: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::MalformedArguments,
            format!(
                "Malformed arguments for tool \"{name}\": expected a JSON object, got {what}. \
                 Received: {received}"
            ),
        )
    }

    pub(crate) fn denied(name: &str, reason: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::Denied,
            format!("Tool call \"{name}\" was denied: {reason}"),
        )
    }

    pub(crate) fn deferred(name: &str, reason: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::Deferred,
            format!("Tool call \"{name}\" is awaiting a person's approval: {reason}"),
        )
    }

    pub(crate) fn approval_failed(name: &str, detail: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::ApprovalFailed,
            format!(
                "The approval check for tool \"{name}\" failed ({detail}); the call was not run."
            ),
        )
    }

    pub(crate) fn mismatch(name: &str, detail: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::ArgumentsMismatch,
            format!("Arguments for tool \"{name}\" do not match its parameters: {detail}"),
        )
    }

    pub(crate) fn timeout(name: &str, limit: Duration) -> Self {
        ToolError::with_kind(
            ToolErrorKind::Timeout,
            format!(
                "Tool \"{name}\" timed out after {}.",
                crate::tooling::format_duration(limit)
            ),
        )
    }

    pub(crate) fn panicked(name: &str, detail: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::Panicked,
            format!("Tool \"{name}\" failed unexpectedly: {detail}"),
        )
    }

    pub(crate) fn aborted(name: &str) -> Self {
        ToolError::with_kind(
            ToolErrorKind::Aborted,
            format!("Tool \"{name}\" was aborted before it finished."),
        )
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        ToolError::new(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        ToolError::new(message)
    }
}

impl From<std::io::Error> for ToolError {
    fn from(err: std::io::Error) -> Self {
        ToolError::new(err.to_string())
    }
}

impl From<serde_json::Error> for ToolError {
    fn from(err: serde_json::Error) -> Self {
        ToolError::new(err.to_string())
    }
}

impl From<std::convert::Infallible> for ToolError {
    fn from(never: std::convert::Infallible) -> Self {
        match never {}
    }
}

/// Why a [`ToolSpec`](crate::tooling::ToolSpec) could not be built.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpecError {
    /// The name is empty.
    #[error("tool name must not be empty")]
    EmptyName,
    /// The name has characters or a length providers refuse.
    #[error(
        "tool name {0:?} is not accepted by providers: use 1 to 64 characters from A-Z, a-z, 0-9, '_' and '-'"
    )]
    InvalidName(String),
    /// The description is empty.
    #[error("tool {0:?} needs a non-empty description (the model chooses tools by it)")]
    EmptyDescription(String),
    /// No handler was given.
    #[error("tool {0:?} has no handler")]
    MissingHandler(String),
    /// The parameters are not a JSON Schema for an object.
    #[error("tool {name:?} has invalid parameters: {reason}")]
    InvalidParameters {
        /// The tool.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// Why a [`Registry`](crate::tooling::Registry) could not be built or extended.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// Two tools share a name.
    #[error("duplicate tool name {0:?}: every tool in a registry needs its own name")]
    DuplicateName(String),
    /// A tool's parameters do not compile as a JSON Schema.
    #[error("tool {name:?} has a parameters schema that does not compile: {reason}")]
    InvalidSchema {
        /// The tool.
        name: String,
        /// The compiler's message.
        reason: String,
    },
    /// More than one tool is marked `local_tool_search`.
    #[error(
        "tools {first:?} and {second:?} are both marked local_tool_search; a registry holds at most one"
    )]
    SecondToolSearch {
        /// The tool already registered.
        first: String,
        /// The tool refused.
        second: String,
    },
}
