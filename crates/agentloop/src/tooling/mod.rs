//! Tools: their specification ([`ToolSpec`]), the [`Registry`] that holds them, the dependency
//! bundle and approval hook ([`ToolDeps`], [`Deps`]), and the executor ([`run_tools`]).
//!
//! This is the tool contract of docs/ARCHITECTURE.md, plus what Rust makes possible: full
//! JSON-Schema validation of arguments before a handler runs, and timeouts that really cancel
//! async handlers. The executor knows nothing about models or HTTP; the agent loop joins them.
//!
//! Whether a call may run is decided in one place, [`ToolDeps::approve`], after the schema, the
//! agent's `tool_call` hooks and binding (the order and the reasons are in [`ToolDeps`]'s docs);
//! a tool declares that it needs a decision with [`ToolSpecBuilder::requires_approval`] /
//! `#[tool(requires_approval)]`, and `approve` reads typed arguments through
//! [`ApprovalRequest::arguments_as`].
//!
//! ```
//! use agentloop::tooling::{run_tools, Deps, Registry, ToolContext, ToolSpec};
//! use agentloop::transcript::ToolCallPart;
//! use serde::Deserialize;
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! #[derive(Deserialize)]
//! struct EchoArgs { text: String }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let echo = ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
//!     .parameters(json!({
//!         "type": "object",
//!         "properties": {"text": {"type": "string"}},
//!         "required": ["text"],
//!         "additionalProperties": false
//!     }))
//!     .blocking_handler(|_deps: ToolContext<Deps>, args: EchoArgs| args.text)
//!     .build()
//!     .unwrap();
//! let call = ToolCallPart::new("call-1", "echo", json!({"text": "hello"}));
//! let results = run_tools(&[call], &Registry::new(vec![echo]).unwrap(), &Arc::new(Deps::new()), None).await;
//! assert_eq!(results[0].content, "hello");
//! assert!(!results[0].is_error);
//! # }
//! ```

mod deps;
mod error;
mod executor;
mod guidance;
mod observer;
mod registry;
mod search;
mod source;
pub(crate) mod spans;
mod spec;
pub(crate) mod validate;

use std::any::Any;
use std::time::Duration;

pub use deps::{Approval, ApprovalHook, ApprovalRequest, ApproverHook, Deps, ToolDeps, allow_all};
pub use error::{RegistryError, SpecError, ToolError, ToolErrorKind};
pub(crate) use executor::check_call;
pub use executor::{
    ExecOptions, Finalizer, MAX_PARALLEL_TOOLS, ToolOutcome, batch_is_parallel_safe, run_tools,
    run_tools_with,
};
pub use guidance::{render_guidance, render_guidance_for};
pub use observer::ToolObserver;
pub use registry::{Registry, ToolSchema};
pub use search::{
    Bm25Index, LoadedTools, SearchLoad, TOOL_SEARCH_NAME, bm25_tool_search, search_result_names,
};
pub(crate) use source::{SourcedTools, TurnRegistry};
pub use source::{ToolSource, ToolSourceError};
pub use spec::{
    IntoToolOutput, Json, ToolContext, ToolFuture, ToolOutput, ToolSpec, ToolSpecBuilder,
    serialize_result, validate_name,
};
pub(crate) use spec::{is_name_char, name_safe};

/// The text of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "the handler panicked with a non-text payload".to_owned()
    }
}

/// Renders a duration for people and models: `250ms`, `30s`, `1.5s`, `2m`.
pub(crate) fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms}ms")
    } else if ms % 60_000 == 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_naturally() {
        assert_eq!(format_duration(Duration::from_millis(250)), "250ms");
        assert_eq!(format_duration(Duration::from_secs(30)), "30s");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1.5s");
        assert_eq!(format_duration(Duration::from_secs(120)), "2m");
    }
}
