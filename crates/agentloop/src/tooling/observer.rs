//! Observation of a batch: callbacks when each call starts, reports progress and finishes.
//!
//! Observers are for UIs and logs; they cannot change a result. Every callback is guarded: a
//! panicking observer is logged and ignored, and the batch goes on exactly as without it.

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde_json::Value;

use crate::transcript::{ToolCallPart, ToolResultPart};

/// Callbacks for the life of each tool call in a batch. All methods default to doing nothing.
///
/// A call that runs gets `call_started` (after every check and the approval hook passed, right
/// before its handler starts), any `call_progress`, then `call_finished`. A call refused before
/// it runs (unknown tool, invalid arguments, binding failure, denied, aborted before it started)
/// gets only `call_blocked`; a call the approval hook deferred gets nothing (it has no result
/// yet). `call_finished` and `call_blocked` fire in completion order (the results returned by
/// the executor stay in call order). Callbacks may run on any thread, including a blocking-pool
/// thread for progress updates.
pub trait ToolObserver: Send + Sync {
    /// A call passed every check and its handler starts now.
    fn call_started(&self, call: &ToolCallPart) {
        let _ = call;
    }
    /// A running handler reported progress.
    fn call_progress(&self, call_id: &str, tool_name: &str, update: &Value) {
        let _ = (call_id, tool_name, update);
    }
    /// A call that ran has its result.
    fn call_finished(&self, call: &ToolCallPart, result: &ToolResultPart) {
        let _ = (call, result);
    }
    /// A call was answered without running (no `call_started` came before); `result` is the
    /// error saying why. The default does nothing.
    fn call_blocked(&self, call: &ToolCallPart, result: &ToolResultPart) {
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
