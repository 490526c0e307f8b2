//! A session's checkpoint log: `sessions/<session>.jsonl`, appended one record per line — a
//! checkpoint taken, changes attributed to one, a rewind's result — and folded on reading.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Change, Checkpoint, CheckpointError, Entry};

/// One line of the log.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Record {
    /// A checkpoint was taken (its changes, empty here, follow in `Changes` records).
    Checkpoint(Checkpoint),
    /// Changes attributed to checkpoint `id`.
    Changes { id: u64, changes: Vec<Change> },
    /// A rewind left these paths in these states (`after`); the agent's last known state.
    Restored { changes: Vec<Change> },
}

/// The log folded: the checkpoints with their merged changes, and the agent's last known state
/// of every path any record touched.
#[derive(Debug, Default)]
pub(crate) struct Folded {
    pub checkpoints: Vec<Checkpoint>,
    pub last_known: BTreeMap<String, Option<Entry>>,
}

/// The log of one session.
#[derive(Clone, Debug)]
pub(crate) struct SessionLog {
    path: PathBuf,
}

/// A file name for any session id: kept when it is plain, else hex-encoded.
fn file_name(session: &str) -> String {
    format!("{}.jsonl", crate::builtin::safe_file_name(session))
}

impl SessionLog {
    pub(crate) fn new(store: &Path, session: &str) -> Self {
        SessionLog {
            path: store.join("sessions").join(file_name(session)),
        }
    }

    /// The log in the file `path`.
    pub(crate) fn at(path: PathBuf) -> Self {
        SessionLog { path }
    }

    /// Deletes the log (nothing when there is none).
    pub(crate) fn remove(&self) -> Result<(), CheckpointError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(self.io("cannot delete", e)),
            _ => Ok(()),
        }
    }

    /// Appends records (one `write` of whole lines).
    pub(crate) fn append(&self, records: &[Record]) -> Result<(), CheckpointError> {
        let mut text = String::new();
        for record in records {
            let line = serde_json::to_string(record).map_err(|e| self.corrupt(e.to_string()))?;
            text.push_str(&line);
            text.push('\n');
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| self.io("cannot open", e))?;
        file.write_all(text.as_bytes())
            .map_err(|e| self.io("cannot append to", e))
    }

    fn io(&self, what: &str, e: std::io::Error) -> CheckpointError {
        CheckpointError::io(format!("{what} {}", self.path.display()), e)
    }

    fn corrupt(&self, detail: String) -> CheckpointError {
        CheckpointError::Corrupt {
            path: self.path.display().to_string(),
            detail,
        }
    }

    /// The records, in order (none when the log does not exist).
    pub(crate) fn records(&self) -> Result<Vec<Record>, CheckpointError> {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(self.io("cannot read", e)),
        };
        let mut out = Vec::new();
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            match serde_json::from_str(line) {
                Ok(record) => out.push(record),
                // A last line cut short by a crash is dropped; anything else is an error.
                Err(_) if n + 1 == text.lines().count() && !text.ends_with('\n') => {}
                Err(e) => return Err(self.corrupt(format!("line {}: {e}", n + 1))),
            }
        }
        Ok(out)
    }

    /// The log folded (see [`Folded`]).
    pub(crate) fn read(&self) -> Result<Folded, CheckpointError> {
        Ok(fold(self.records()?))
    }

    /// Copies the checkpoint records (with their changes) older than `before` into `to`.
    pub(crate) fn copy_before(&self, to: &SessionLog, before: u64) -> Result<(), CheckpointError> {
        let kept: Vec<Record> = self
            .records()?
            .into_iter()
            .filter(|r| match r {
                Record::Checkpoint(Checkpoint { id, .. }) | Record::Changes { id, .. } => {
                    *id < before
                }
                Record::Restored { .. } => false,
            })
            .collect();
        if kept.is_empty() {
            return Ok(());
        }
        to.append(&kept)
    }
}

/// Merges `change` into a checkpoint's changes: the earliest `before` and latest `after` of a
/// path; a path back to its earlier state is dropped.
fn merge(changes: &mut Vec<Change>, change: Change) {
    match changes.iter().position(|c| c.path == change.path) {
        Some(i) => {
            changes[i].after = change.after;
            let same = match (&changes[i].before, &changes[i].after) {
                (None, None) => true,
                (Some(a), Some(b)) => a.same_content(b),
                _ => false,
            };
            if same {
                changes.remove(i);
            }
        }
        None => changes.push(change),
    }
}

fn fold(records: Vec<Record>) -> Folded {
    let mut folded = Folded::default();
    for record in records {
        match record {
            Record::Checkpoint(checkpoint) => folded.checkpoints.push(checkpoint),
            Record::Changes { id, changes } => {
                for change in &changes {
                    folded
                        .last_known
                        .insert(change.path.clone(), change.after.clone());
                }
                if let Some(checkpoint) = folded.checkpoints.iter_mut().find(|c| c.id == id) {
                    for change in changes {
                        merge(&mut checkpoint.changes, change);
                    }
                    checkpoint.changes.sort_by(|a, b| a.path.cmp(&b.path));
                }
            }
            Record::Restored { changes } => {
                for change in changes {
                    folded.last_known.insert(change.path, change.after);
                }
            }
        }
    }
    folded
}
