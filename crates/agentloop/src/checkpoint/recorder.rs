//! The recorder of one run: snapshots before and after each mutating call and when the run
//! ends, attributing each difference to a checkpoint — a call's own changes to its checkpoint,
//! what appears between calls (a background job's writes) to the run's latest checkpoint, and
//! what changed before the run's first mutating call to nobody (that was not the agent).
//!
//! The run's first snapshot walks the whole tree and watches its directories; the later ones
//! look only at what the watcher reports changed (see [`update`](super::update)), and walk the
//! whole tree again — rebuilding the watches — whenever the reports cannot be trusted. The
//! run's last snapshot ([`Recorder::seal`]) always walks the whole tree.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};

use super::gc::StoreLock;
use super::log::{Record, SessionLog};
use super::snapshot::{Scanner, Snapshot, diff};
use super::watch::Watcher;
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
    /// Whether it walked the whole tree (the run's first snapshot, or change notification
    /// unavailable or not to be trusted) rather than only what was reported changed.
    pub full_walk: bool,
}

/// One snapshot taken: what changed since the previous one.
struct Taken {
    changes: Vec<Change>,
    files_read: usize,
    full_walk: bool,
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
    /// Watches the directories of `last` (`None`: the next snapshot walks the whole tree).
    watcher: Option<Watcher>,
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
        self.snapshot_into(&mut state, latest, true);
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
            self.snapshot_into(&mut state, Some(id), true);
        }
    }

    /// When the run ends (after its background jobs were stopped): a last snapshot, attributed
    /// to the run's latest checkpoint, and the stat cache saved for the next run. It walks the
    /// whole tree, so what change notification cannot see (writes through a shared memory
    /// map, from another mount namespace, on a network filesystem) is attributed too; the
    /// watches are released.
    pub fn seal(&self) {
        let mut state = self.state();
        state.watcher = None;
        let (Some(latest), false) = (state.latest, state.off) else {
            return; // no mutating call: nothing to attribute, nothing walked
        };
        self.snapshot_into(&mut state, Some(latest), false);
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
        let taken = self.take(&mut state, true)?;
        Ok(SnapshotReport {
            changes: taken.changes,
            files_read: taken.files_read,
            entries: state.last.as_ref().map_or(0, |last| last.entries.len()),
            full_walk: taken.full_walk,
        })
    }

    /// Makes the next snapshot find the change notification queue overflowed.
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn simulate_overflow(&self) {
        if let Some(watcher) = &self.state().watcher {
            watcher.simulate_overflow();
        }
    }

    /// The run's current snapshot (tests compare it with a fresh walk).
    #[cfg(all(test, target_os = "linux"))]
    pub(crate) fn last_snapshot(&self) -> Option<Snapshot> {
        self.state().last.clone()
    }

    /// Takes a snapshot into `state.last`: the previous one brought up to date from the
    /// watcher's reports when `watch` and they can be trusted, else a walk of the whole tree
    /// (which watches the tree anew when `watch`).
    fn take(&self, state: &mut State, watch: bool) -> Result<Taken, CheckpointError> {
        if let (true, Some(last), Some(watcher)) = (watch, &mut state.last, &state.watcher) {
            if let Some(taken) = incremental(&self.scanner, watcher, last) {
                return Ok(taken);
            }
        }
        // Released before the walk adds new watches (they count against the user's limit).
        state.watcher = None;
        let first = state.last.is_none();
        let base = match state.last.take() {
            Some(last) => last,
            None => state.cache.take().unwrap_or_default(),
        };
        let watcher = watch.then(|| self.watcher(&base)).flatten();
        match self.scanner.scan_watched(&base, watcher.as_ref()) {
            Ok(next) => {
                let taken = Taken {
                    changes: diff(&base, &next, self.scanner.root()),
                    files_read: next.hashed,
                    full_walk: true,
                };
                state.last = Some(next);
                state.watcher = watcher.filter(|w| !w.is_broken());
                Ok(taken)
            }
            Err(e) => {
                state.last = (!first).then_some(base);
                Err(e)
            }
        }
    }

    /// A new watcher for a walk of the tree last seen as `base`, unless change notification
    /// is unavailable or the tree has more directories than may be watched.
    fn watcher(&self, base: &Snapshot) -> Option<Watcher> {
        let cap = self.scanner.limits().max_watches;
        let dirs = base
            .entries
            .values()
            .filter(|e| e.kind == super::EntryKind::Dir)
            .count();
        if dirs >= cap {
            return None; // the walk would give up watching it midway
        }
        match Watcher::new(self.scanner.root(), cap) {
            Ok(watcher) => Some(watcher),
            Err(e) => {
                tracing::debug!(error = %e, "no change notification: every snapshot walks the tree");
                None
            }
        }
    }

    /// The errors met so far (each once), emptied.
    pub fn take_errors(&self) -> Vec<String> {
        std::mem::take(&mut self.state().errors)
    }

    /// Snapshots; the differences from the run's previous snapshot go to checkpoint `to` (none
    /// before the run's first snapshot: there is nothing to compare with).
    fn snapshot_into(&self, state: &mut State, to: Option<u64>, watch: bool) {
        if state.off {
            return;
        }
        let first = state.last.is_none();
        let changes = match self.take(state, watch) {
            Ok(taken) => taken.changes,
            Err(e) => {
                tracing::warn!(error = %e, "checkpoint snapshot failed");
                // Too large stays too large: no more walks in this run.
                state.off = e.is_too_large();
                state.errors.push(e.to_string());
                return;
            }
        };
        if let (false, Some(id), false) = (first, to, changes.is_empty()) {
            if let Err(e) = self.log.append(&[Record::Changes { id, changes }]) {
                state.errors.push(e.to_string());
            }
        }
    }
}

/// The previous snapshot brought up to date from the watcher's reports, `None` when the whole
/// tree must be walked.
#[cfg(target_os = "linux")]
fn incremental(scanner: &Scanner, watcher: &Watcher, last: &mut Snapshot) -> Option<Taken> {
    let updated = super::update::update(scanner, watcher, last)?;
    Some(Taken {
        changes: updated.changes,
        files_read: updated.hashed,
        full_walk: false,
    })
}

/// No change notification here: a watcher never exists.
#[cfg(not(target_os = "linux"))]
fn incremental(_scanner: &Scanner, _watcher: &Watcher, _last: &mut Snapshot) -> Option<Taken> {
    None
}
