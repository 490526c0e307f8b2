//! [`SessionRecorder`]: appends a running agent's completed messages to a [`SessionStore`] the
//! moment each completes, by listening to its [`AgentEvent`]s. It never changes the run.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::{SessionError, SessionStore};
use crate::agent::{AgentEvent, PendingStatus, RunStop};
use crate::transcript::{Message, Role};

/// Records a run into one session of a store.
///
/// What it appends, and when:
///
/// - a prompt, a steering / follow-up message or an injected custom message: at its
///   [`MessageEnd`](AgentEvent::MessageEnd);
/// - each assistant message: at its `MessageEnd` (including one that ended in an error or an
///   abort — the transcript keeps it);
/// - each tool result **as its call finishes**
///   ([`ToolExecutionEnd`](AgentEvent::ToolExecutionEnd)), so a finished call of a parallel batch is durable while a slow sibling still runs. Results
///   are therefore stored in completion order; [`load`](SessionStore::load) puts each batch back
///   in call order. The tool-result `MessageEnd` the loop emits later for the same call is
///   skipped (matched by call id); one that never had a `ToolExecutionEnd` (a call answered
///   without running, e.g. aborted mid-stream) is appended then.
///
/// Appends happen synchronously inside the event callback, on the run's task: a WAL-mode SQLite
/// append takes about 0.2 ms with the default [`Durability`](super::Durability) (see the
/// `sessions` benchmark), small beside a model call. A failed append never
/// panics and never stops the run: it is logged with `tracing` at `error` level, counted
/// ([`failures`](Self::failures)) and kept ([`take_error`](Self::take_error)). A tool result
/// whose append failed at `ToolExecutionEnd` is retried at its `MessageEnd`.
///
/// Runs that pause for approval: at [`RunParked`](AgentEvent::RunParked) it stores the pending
/// calls and the queued messages ([`SessionStore::save_parked`]) — before the approval requests
/// and the stop are reported; at [`ApprovalResolved`](AgentEvent::ApprovalResolved) with status
/// `started` it marks the call started *before* its handler runs (so a crash leaves an
/// "interrupted" answer, never a second run); when a pending call's result is appended it
/// forgets the pending entry; and when a run that resumed or parked ends any other way than
/// awaiting approval, it clears what is left of the parked state.
///
/// Cheap to clone; clones share state.
#[derive(Clone)]
pub struct SessionRecorder {
    inner: Arc<Inner>,
}

struct Inner {
    store: Arc<dyn SessionStore>,
    session_id: String,
    /// Call ids recorded at `ToolExecutionEnd` whose `MessageEnd` has not come yet (a count, in
    /// case a model repeats a call id within one batch).
    pending_results: Mutex<HashMap<String, u32>>,
    last_error: Mutex<Option<SessionError>>,
    appended: AtomicU64,
    failures: AtomicU64,
    /// Call ids parked or resumed by this recorder's runs whose pending entry is still stored.
    parked_calls: Mutex<HashSet<String>>,
    /// The current run parked or resumed calls (its end may need to clear the parked state).
    parked_run: AtomicBool,
}

impl std::fmt::Debug for SessionRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionRecorder")
            .field("session_id", &self.inner.session_id)
            .field("appended", &self.appended())
            .field("failures", &self.failures())
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl SessionRecorder {
    /// A recorder appending to session `session_id` of `store` (the session must exist).
    pub fn new(store: Arc<dyn SessionStore>, session_id: impl Into<String>) -> Self {
        SessionRecorder {
            inner: Arc::new(Inner {
                store,
                session_id: session_id.into(),
                pending_results: Mutex::new(HashMap::new()),
                last_error: Mutex::new(None),
                appended: AtomicU64::new(0),
                failures: AtomicU64::new(0),
                parked_calls: Mutex::new(HashSet::new()),
                parked_run: AtomicBool::new(false),
            }),
        }
    }

    /// The session it records into.
    pub fn session_id(&self) -> &str {
        &self.inner.session_id
    }

    /// The store it records into.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.inner.store
    }

    /// An `emit` callback for [`AgentLoop::with_emit`](crate::agent::AgentLoop::with_emit)
    /// (listeners add up, so it combines with any other). Simpler:
    /// [`AgentLoop::with_session`](crate::agent::AgentLoop::with_session) creates the recorder
    /// and attaches it in one call.
    pub fn emit_fn(&self) -> impl Fn(&AgentEvent) + Send + Sync + 'static {
        let recorder = self.clone();
        move |event: &AgentEvent| recorder.on_event(event)
    }

    /// Handles one event (appends when it completes a message; ignores the rest).
    pub fn on_event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::ToolExecutionEnd { result, .. } => {
                let message = Message::tool_result(result.clone());
                if self.append(&message) {
                    *lock(&self.inner.pending_results)
                        .entry(result.call_id.clone())
                        .or_insert(0) += 1;
                    self.answered(&result.call_id);
                }
            }
            AgentEvent::MessageEnd { message } if message.role == Role::ToolResult => {
                let already = message.tool_result_part().is_some_and(|result| {
                    let mut pending = lock(&self.inner.pending_results);
                    match pending.get_mut(&result.call_id) {
                        Some(count) if *count > 1 => {
                            *count -= 1;
                            true
                        }
                        Some(_) => {
                            pending.remove(&result.call_id);
                            true
                        }
                        None => false,
                    }
                });
                if !already && self.append(message) {
                    if let Some(result) = message.tool_result_part() {
                        self.answered(&result.call_id);
                    }
                }
            }
            AgentEvent::RunParked { parked } => {
                self.inner.parked_run.store(true, Ordering::Relaxed);
                lock(&self.inner.parked_calls)
                    .extend(parked.pending.iter().map(|p| p.call_id.clone()));
                let id = &self.inner.session_id;
                self.record(self.inner.store.save_parked(id, parked));
            }
            AgentEvent::ApprovalResolved {
                call_id, status, ..
            } => {
                self.inner.parked_run.store(true, Ordering::Relaxed);
                lock(&self.inner.parked_calls).insert(call_id.clone());
                if *status == PendingStatus::Started {
                    let id = &self.inner.session_id;
                    self.record(self.inner.store.decide(id, call_id, status));
                }
            }
            AgentEvent::AgentEnd { stop, .. } => {
                let parked = self.inner.parked_run.swap(false, Ordering::Relaxed);
                if parked && !matches!(stop, RunStop::AwaitingApproval { .. }) {
                    lock(&self.inner.parked_calls).clear();
                    self.record(self.inner.store.clear_parked(&self.inner.session_id));
                }
            }
            AgentEvent::MessageEnd { message } => {
                self.append(message);
            }
            _ => {}
        }
    }

    /// A call got its result: forget its pending entry, if it had one.
    fn answered(&self, call_id: &str) {
        if lock(&self.inner.parked_calls).remove(call_id) {
            let id = &self.inner.session_id;
            self.record(self.inner.store.resolve_pending(id, call_id));
        }
    }

    /// Counts and keeps a failed store operation (like a failed append).
    fn record(&self, result: Result<(), SessionError>) {
        if let Err(error) = result {
            tracing::error!(
                session = %self.inner.session_id,
                %error,
                "could not record the approval state in the session store"
            );
            self.inner.failures.fetch_add(1, Ordering::Relaxed);
            *lock(&self.inner.last_error) = Some(error);
        }
    }

    fn append(&self, message: &Message) -> bool {
        match self.inner.store.append(&self.inner.session_id, message) {
            Ok(_) => {
                self.inner.appended.fetch_add(1, Ordering::Relaxed);
                true
            }
            Err(error) => {
                tracing::error!(
                    session = %self.inner.session_id,
                    role = ?message.role,
                    %error,
                    "could not record a message in the session store"
                );
                self.inner.failures.fetch_add(1, Ordering::Relaxed);
                *lock(&self.inner.last_error) = Some(error);
                false
            }
        }
    }

    /// Messages appended so far.
    pub fn appended(&self) -> u64 {
        self.inner.appended.load(Ordering::Relaxed)
    }

    /// Appends that failed so far.
    pub fn failures(&self) -> u64 {
        self.inner.failures.load(Ordering::Relaxed)
    }

    /// The most recent append error, if any (taking it clears it; [`failures`](Self::failures)
    /// keeps counting).
    pub fn take_error(&self) -> Option<SessionError> {
        lock(&self.inner.last_error).take()
    }
}
