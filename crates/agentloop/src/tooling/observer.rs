//! Observation of a batch: callbacks when each call starts, reports progress and finishes.
//!
//! Observers are for UIs and logs; they cannot change a result. Every callback is guarded: a
//! panicking observer is logged and ignored, and the batch goes on exactly as without it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

use crate::transcript::{ToolCallPart, ToolResultPart};

/// Callbacks for the life of each tool call in a batch. All methods default to doing nothing.
///
/// `call_finished` fires in completion order (the results returned by the executor stay in call
/// order). Callbacks may run on any thread, including a blocking-pool thread for progress updates.
pub trait ToolObserver: Send + Sync {
    /// A call is about to be checked and run.
    fn call_started(&self, call: &ToolCallPart) {
        let _ = call;
    }
    /// A running handler reported progress.
    fn call_progress(&self, call_id: &str, tool_name: &str, update: &Value) {
        let _ = (call_id, tool_name, update);
    }
    /// A call has its result.
    fn call_finished(&self, call: &ToolCallPart, result: &ToolResultPart) {
        let _ = (call, result);
    }
}

/// Runs an observer callback, swallowing (and logging) a panic so it cannot change any result.
pub(crate) fn guarded(f: impl FnOnce()) {
    if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
        tracing::warn!(
            panic = %crate::tooling::panic_message(&*payload),
            "a tool observer panicked; the panic was ignored"
        );
    }
}
