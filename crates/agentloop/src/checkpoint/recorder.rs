//! The recorder of one run: snapshots before and after each mutating call and when the run
//! ends, attributing each difference to a checkpoint — a call's own changes to its checkpoint,
//! what appears between calls (a background job's writes) to the run's latest checkpoint, and
//! what changed before the run's first mutating call to nobody (that was not the agent).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::gc::StoreLock;
use super::log::{Record, SessionLog};
use super::snapshot::{Scanner, Snapshot, diff};
use super::{Change, Checkpoint, CheckpointError, CheckpointOptions, CheckpointStore};
use crate::agent::{Extension, ToolCallDecision};

/// What one [`Recorder::snapshot`] saw.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SnapshotReport {
    /// What changed since the previous snapshot.
    pub changes: Vec<Change>,
    /// How many files were read (the stat cache missed them).
    pub files_read: usize,
    /// How many paths the snapshot holds.
    pub entries: usize,
}

/// Records the checkpoints of one session's run in one workspace. Cheap to share (`Arc`);
/// every method may be called from any thread. Errors do not stop the run: they are kept for
/// [`take_errors`](Self::take_errors) (and logged).
#[derive(Debug)]
pub struct Recorder {
    store: CheckpointStore,
    scanner: Scanner,
    log: SessionLog,
    state: Mutex<State>,
    /// Keeps blob garbage collection off while the run's snapshots live in memory.
    _lock: StoreLock,
}

#[derive(Debug, Default)]
struct State {
    /// The last snapshot of this run (`None` before the first).
    last: Option<Snapshot>,
    /// The persisted stat cache, used for the run's first snapshot.
    cache: Option<Snapshot>,
    next_id: u64,
    turn: u32,
    /// Calls begun and not finished: call id → checkpoint id.
    open: HashMap<String, u64>,
    /// The run's latest checkpoint.
    latest: Option<u64>,
    /// The workspace is too large: nothing more is recorded in this run.
    off: bool,
    errors: Vec<String>,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Recorder {
    pub(crate) fn new(
        store: CheckpointStore,
        root: &Path,
        session: &str,
        options: CheckpointOptions,
    ) -> Result<Self, CheckpointError> {
        let root = std::fs::canonicalize(root)
            .map_err(|e| CheckpointError::io(format!("cannot use {}", root.display()), e))?;
        let lock = StoreLock::shared(store.dir())?;
        let scanner = Scanner::new(&root, store.dir(), options);
        let log = SessionLog::new(store.dir(), session);
        let folded = log.read()?;
        let next_id = folded.checkpoints.iter().map(|c| c.id).max().unwrap_or(0) + 1;
        let cache = scanner.load_cache(store.dir());
        Ok(Recorder {
            store,
            scanner,
            log,
            state: Mutex::new(State {
                cache: Some(cache),
                next_id,
                ..State::default()
            }),
            _lock: lock,
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the session's turn number that later checkpoints are recorded with.
    pub fn set_turn(&self, turn: u32) {
        self.state().turn = turn;
    }

    /// An extension that calls [`begin`](Self::begin) before each call `is_mutating` says
    /// changes things and [`finish`](Self::finish) when it is done. Register it after any
    /// extension that may block calls, so a blocked call leaves no checkpoint.
    pub fn extension(
        self: &Arc<Self>,
        is_mutating: impl Fn(&str) -> bool + Send + Sync + 'static,
    ) -> Extension {
        let (before, after) = (self.clone(), self.clone());
        Extension::new("checkpoints")
            .on_tool_call(move |call| {
                if is_mutating(&call.tool_name) {
                    before.begin(&call.id, &call.tool_name);
                }
                ToolCallDecision::Continue
            })
            .on_tool_result(move |done| {
                after.finish(&done.id);
                None
            })
    }

    /// Before mutating call `call_id` of `tool`: snapshots (changes since the last snapshot go
    /// to the run's latest checkpoint) and records a new checkpoint. Returns its id.
    pub fn begin(&self, call_id: &str, tool: &str) -> Option<u64> {
        let mut state = self.state();
        let latest = state.latest;
        self.snapshot_into(&mut state, latest);
        if state.off {
            return None;
        }
        let id = state.next_id;
        let record = Record::Checkpoint(Checkpoint {
            id,
            turn: state.turn,
            tool: tool.to_owned(),
            call_id: call_id.to_owned(),
            workspace: self.scanner.root().to_string_lossy().into_owned(),
            created_ms: now_ms(),
            changes: Vec::new(),
        });
        if let Err(e) = self.log.append(&[record]) {
            state.errors.push(e.to_string());
            return None;
        }
        state.next_id += 1;
        state.open.insert(call_id.to_owned(), id);
        state.latest = Some(id);
        Some(id)
    }

    /// After call `call_id` (a no-op for calls not begun): snapshots and attributes the
    /// differences to its checkpoint.
    pub fn finish(&self, call_id: &str) {
        let mut state = self.state();
        if let Some(id) = state.open.remove(call_id) {
            self.snapshot_into(&mut state, Some(id));
        }
    }

    /// When the run ends (after its background jobs were stopped): a last snapshot, attributed
    /// to the run's latest checkpoint, and the stat cache saved for the next run.
    pub fn seal(&self) {
        let mut state = self.state();
        let (Some(latest), false) = (state.latest, state.off) else {
            return; // no mutating call: nothing to attribute, nothing walked
        };
        self.snapshot_into(&mut state, Some(latest));
        if let Some(last) = &state.last {
            if let Err(e) = self.scanner.save_cache(self.store.dir(), last) {
                state.errors.push(e.to_string());
            }
        }
    }

    /// Takes one snapshot now and reports what changed since the previous one (attributed to
    /// nobody). For measuring; a run uses the hooks.
    pub fn snapshot(&self) -> Result<SnapshotReport, CheckpointError> {
        let mut state = self.state();
        let base = match state.last.take() {
            Some(last) => last,
            None => state.cache.take().unwrap_or_default(),
        };
        let next = self.scanner.scan(&base)?;
        let report = SnapshotReport {
            changes: diff(&base, &next, self.scanner.root()),
            files_read: next.hashed,
            entries: next.entries.len(),
        };
        state.last = Some(next);
        Ok(report)
    }

    /// The errors met so far (each once), emptied.
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut self.state().errors)
    }

    /// Snapshots; the differences from the run's previous snapshot go to checkpoint `to` (none
    /// before the run's first snapshot: there is nothing to compare with).
    fn snapshot_into(&self, state: &mut State, to: Option<u64>) {
        if state.off {
            return;
        }
        let first = state.last.is_none();
        let base = match state.last.take() {
            Some(last) => last,
            None => state.cache.take().unwrap_or_default(),
        };
        let next = match self.scanner.scan(&base) {
            Ok(next) => next,
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint snapshot failed");
                // Too large stays too large: no more walks in this run.
                state.off = e.is_too_large();
                state.errors.push(e.to_string());
                state.last = (!first).then_some(base);
                return;
            }
        };
        if let (false, Some(id)) = (first, to) {
            let changes = diff(&base, &next, self.scanner.root());
            if !changes.is_empty() {
                if let Err(e) = self.log.append(&[Record::Changes { id, changes }]) {
                    state.errors.push(e.to_string());
                }
            }
        }
        state.last = Some(next);
    }
}
