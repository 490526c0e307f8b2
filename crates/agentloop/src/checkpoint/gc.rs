//! Blob garbage collection: a blob is deleted only when no session log and no workspace stat
//! cache of the store refers to it, and only while no recorder is running.
//!
//! Why the lock: a running recorder holds hashes in memory (its last snapshot) whose blobs no
//! file on disk names yet — the files its run's first snapshot read, until the run's changes
//! or its stat cache are written. Each recorder holds a shared lock on the store's `lock` file
//! for its whole life; a collection takes the lock exclusively and, when a recorder holds it,
//! deletes nothing (the next collection will). A log or cache that cannot be parsed stops the
//! collection too: what it refers to is unknown, so nothing may go.

use std::collections::HashSet;
use std::path::Path;

use super::log::{Record, SessionLog};
use super::snapshot::Snapshot;
use super::{Change, CheckpointError, CheckpointStore};

/// What a [`CheckpointStore::collect_garbage`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GarbageReport {
    /// Blobs deleted.
    pub deleted: usize,
    /// Their bytes.
    pub freed_bytes: u64,
    /// Blobs kept (still referred to).
    pub kept: usize,
    /// A recorder was running: nothing was deleted.
    pub busy: bool,
}

/// A shared (recorder) or exclusive (collection) hold on the store's lock file; released when
/// dropped. Without flock (not Unix) holds nothing.
#[derive(Debug)]
pub(crate) struct StoreLock {
    #[cfg(unix)]
    _file: std::fs::File,
}

impl StoreLock {
    fn open(store: &Path) -> Result<std::fs::File, CheckpointError> {
        let path = store.join("lock");
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| CheckpointError::io(format!("cannot open {}", path.display()), e))
    }

    /// The shared hold a recorder keeps (waits while a collection runs: it is short).
    pub(crate) fn shared(store: &Path) -> Result<Self, CheckpointError> {
        let file = Self::open(store)?;
        #[cfg(unix)]
        {
            rustix::fs::flock(&file, rustix::fs::FlockOperation::LockShared)
                .map_err(|e| CheckpointError::io("cannot lock the checkpoint store", e.into()))?;
            Ok(StoreLock { _file: file })
        }
        #[cfg(not(unix))]
        {
            drop(file);
            Ok(StoreLock {})
        }
    }

    /// The exclusive hold of a collection, `None` when a recorder holds the lock.
    fn exclusive(store: &Path) -> Result<Option<Self>, CheckpointError> {
        let file = Self::open(store)?;
        #[cfg(unix)]
        {
            use rustix::fs::FlockOperation;
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => Ok(Some(StoreLock { _file: file })),
                Err(rustix::io::Errno::WOULDBLOCK) => Ok(None),
                Err(e) => Err(CheckpointError::io(
                    "cannot lock the checkpoint store",
                    e.into(),
                )),
            }
        }
        #[cfg(not(unix))]
        {
            drop(file);
            Ok(Some(StoreLock {}))
        }
    }
}

fn add_changes(changes: &[Change], into: &mut HashSet<String>) {
    for change in changes {
        for entry in [&change.before, &change.after].into_iter().flatten() {
            if let Some(hash) = &entry.hash {
                into.insert(hash.clone());
            }
        }
    }
}

/// Every blob hash a session log or a stat cache of the store refers to.
fn referenced(store: &CheckpointStore) -> Result<HashSet<String>, CheckpointError> {
    let mut hashes = HashSet::new();
    for path in files_in(&store.dir().join("sessions"), "jsonl")? {
        for record in SessionLog::at(path).records()? {
            match record {
                Record::Changes { changes, .. } | Record::Restored { changes } => {
                    add_changes(&changes, &mut hashes);
                }
                Record::Checkpoint(_) => {}
            }
        }
    }
    for path in files_in(&store.dir().join("index"), "json")? {
        let bytes = std::fs::read(&path)
            .map_err(|e| CheckpointError::io(format!("cannot read {}", path.display()), e))?;
        let cache: Snapshot =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::Corrupt {
                path: path.display().to_string(),
                detail: e.to_string(),
            })?;
        hashes.extend(cache.entries.into_values().filter_map(|e| e.hash));
    }
    Ok(hashes)
}

/// The files of `dir` ending in `.ext` (none when it does not exist).
fn files_in(dir: &Path, ext: &str) -> Result<Vec<std::path::PathBuf>, CheckpointError> {
    let mut out = Vec::new();
    for item in entries(dir)? {
        let path = item.map_err(|e| cannot_list(dir, e))?.path();
        if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    Ok(out)
}

/// The entries of `dir`; none when it does not exist (a store that never wrote there).
fn entries(
    dir: &Path,
) -> Result<impl Iterator<Item = std::io::Result<std::fs::DirEntry>>, CheckpointError> {
    match std::fs::read_dir(dir) {
        Ok(read) => Ok(Some(read).into_iter().flatten()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None.into_iter().flatten()),
        Err(e) => Err(cannot_list(dir, e)),
    }
}

fn cannot_list(dir: &Path, error: std::io::Error) -> CheckpointError {
    CheckpointError::io(format!("cannot list {}", dir.display()), error)
}

/// Deletes the blobs nothing refers to (see the module docs).
pub(crate) fn collect(store: &CheckpointStore) -> Result<GarbageReport, CheckpointError> {
    let Some(_hold) = StoreLock::exclusive(store.dir())? else {
        return Ok(GarbageReport {
            busy: true,
            ..GarbageReport::default()
        });
    };
    let keep = referenced(store)?;
    let mut report = GarbageReport::default();
    let blobs = store.dir().join("blobs");
    for fan in files_in_dirs(&blobs)? {
        for item in std::fs::read_dir(&fan).map_err(|e| cannot_list(&fan, e))? {
            let Ok(item) = item else { continue };
            let name = item.file_name();
            let name = name.to_string_lossy();
            // Temporary files of a write cut short are garbage too; a blob is its hash.
            if keep.contains(name.as_ref()) {
                report.kept += 1;
                continue;
            }
            let size = item.metadata().map_or(0, |m| m.len());
            if std::fs::remove_file(item.path()).is_ok() {
                report.deleted += 1;
                report.freed_bytes += size;
            }
        }
    }
    Ok(report)
}

/// The fan-out directories `blobs/xx/`.
fn files_in_dirs(blobs: &Path) -> Result<Vec<std::path::PathBuf>, CheckpointError> {
    Ok(entries(blobs)?
        .flatten()
        .map(|item| item.path())
        .filter(|p| p.is_dir())
        .collect())
}
