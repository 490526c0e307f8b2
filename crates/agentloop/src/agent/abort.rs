//! [`AbortSignal`]: a cloneable handle that stops the current run.
//!
//! The loop checks it between every phase and races it against the model stream and the tool
//! batch, so an abort takes effect at once even when a tool ignores cancellation.
//!
//! # Which run an abort ends
//!
//! An abort ends **one** run — the one in progress — and the next run starts clean:
//!
//! - called while a run is in progress, it ends that run (with
//!   [`RunStop::Aborted`](crate::agent::RunStop::Aborted)), and the run consumes it: when the
//!   run ends, the signal re-arms itself for the next one;
//! - called while no run is in progress (typically just before a spawned run has started), it
//!   is not lost: the next run to start ends at once with `Aborted`, and consumes it;
//! - runs in progress at the same time on one signal all end; the signal re-arms when the
//!   first of them ends, and a run started after that is not affected.
//!
//! [`reset`](AbortSignal::reset) withdraws an abort no run has consumed yet.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio_util::sync::CancellationToken;

/// Stops an agent run from anywhere (another task, a signal handler, a UI button).
///
/// An abort ends **one** run — the one in progress — and the next run starts clean: the run it
/// ended consumes it (also when that run's future or event stream is dropped). An abort while
/// no run is in progress (typically just before a spawned run starts) is not lost: the next run
/// to start ends at once with `Aborted`, and consumes it. Runs in progress at the same time on
/// one signal all end. [`reset`](AbortSignal::reset) withdraws an abort no run has consumed.
#[derive(Clone, Debug, Default)]
pub struct AbortSignal {
    state: Arc<Mutex<Armed>>,
}

/// The token runs listen to, and how many times it was replaced (to tell whether a run's token
/// is still the current one).
#[derive(Debug, Default)]
struct Armed {
    generation: u64,
    token: CancellationToken,
}

/// The part of the signal one run holds: its token and the generation it was taken from. When
/// it is dropped — the run ended, or its future was dropped — an abort that reached the run
/// through this token is consumed (see [`AbortSignal::finish`]).
#[derive(Debug)]
pub(crate) struct RunAbort {
    signal: AbortSignal,
    generation: u64,
    pub(crate) token: CancellationToken,
}

impl Drop for RunAbort {
    fn drop(&mut self) {
        self.signal.finish(self.generation, &self.token);
    }
}

impl AbortSignal {
    /// A signal that is not aborted.
    pub fn new() -> Self {
        AbortSignal::default()
    }

    fn lock(&self) -> MutexGuard<'_, Armed> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Aborts the run in progress, or — when none is — the next run to start.
    pub fn abort(&self) {
        self.lock().token.cancel();
    }

    /// Whether an abort is pending: `abort` was called and no run has consumed it yet (nor
    /// `reset`).
    pub fn is_aborted(&self) -> bool {
        self.lock().token.is_cancelled()
    }

    /// Withdraws a pending abort (a run it already ended stays aborted). Runs re-arm the
    /// signal themselves, so this is only needed to cancel an abort before any run saw it.
    pub fn reset(&self) {
        let mut armed = self.lock();
        if armed.token.is_cancelled() {
            armed.generation += 1;
            armed.token = CancellationToken::new();
        }
    }

    /// The token a run starting now listens to (the current one: a pending abort ends it).
    /// Dropping the returned guard ends the run's hold on the signal.
    pub(crate) fn begin(&self) -> RunAbort {
        let armed = self.lock();
        RunAbort {
            signal: self.clone(),
            generation: armed.generation,
            token: armed.token.clone(),
        }
    }

    /// A run ended: if it was aborted through the token it took, that abort is consumed and
    /// the signal re-arms (unless a reset or another run already did).
    fn finish(&self, generation: u64, token: &CancellationToken) {
        let mut armed = self.lock();
        if token.is_cancelled() && armed.generation == generation {
            armed.generation += 1;
            armed.token = CancellationToken::new();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_consumes_the_abort_that_ended_it() {
        let signal = AbortSignal::new();
        let run = signal.begin();
        signal.clone().abort();
        assert!(signal.is_aborted());
        let token = run.token.clone();
        assert!(token.is_cancelled());
        drop(run);
        assert!(!signal.is_aborted(), "the next run starts clean");
        assert!(token.is_cancelled(), "the old run stays aborted");
        assert!(!signal.begin().token.is_cancelled());
    }

    #[test]
    fn an_abort_before_a_run_starts_ends_that_run() {
        let signal = AbortSignal::new();
        signal.abort();
        let run = signal.begin();
        assert!(run.token.is_cancelled());
        drop(run);
        assert!(!signal.begin().token.is_cancelled());
    }

    #[test]
    fn a_stale_run_does_not_re_arm_a_newer_abort() {
        let signal = AbortSignal::new();
        let first = signal.begin();
        signal.abort();
        signal.reset();
        signal.abort(); // aimed at the next run
        drop(first);
        assert!(signal.is_aborted(), "the pending abort is kept");
    }
}
