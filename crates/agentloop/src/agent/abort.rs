//! [`AbortSignal`]: a cloneable handle that stops the current run.
//!
//! The loop checks it between every phase and races it against the model stream and the tool
//! batch, so an abort takes effect at once even when a tool ignores cancellation. A signal that is
//! already aborted when a run starts ends that run immediately; call [`AbortSignal::reset`] to
//! arm it again for the next run.

use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

/// Stops an agent run from anywhere (another task, a signal handler, a UI button).
#[derive(Clone, Debug, Default)]
pub struct AbortSignal {
    token: Arc<Mutex<CancellationToken>>,
}

impl AbortSignal {
    /// A signal that is not aborted.
    pub fn new() -> Self {
        AbortSignal::default()
    }

    /// Aborts the run that is using this signal (and any run started before a `reset`).
    pub fn abort(&self) {
        self.current().cancel();
    }

    /// Whether `abort` was called since the last `reset`.
    pub fn is_aborted(&self) -> bool {
        self.current().is_cancelled()
    }

    /// Re-arms the signal for the next run (a run already aborted stays aborted).
    pub fn reset(&self) {
        let mut token = self.token.lock().unwrap_or_else(|p| p.into_inner());
        if token.is_cancelled() {
            *token = CancellationToken::new();
        }
    }

    /// The token the current run listens to.
    pub(crate) fn current(&self) -> CancellationToken {
        self.token.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_and_reset() {
        let signal = AbortSignal::new();
        let clone = signal.clone();
        let run_token = signal.current();
        clone.abort();
        assert!(signal.is_aborted());
        assert!(run_token.is_cancelled());
        signal.reset();
        assert!(!signal.is_aborted());
        assert!(run_token.is_cancelled(), "the old run stays aborted");
    }
}
