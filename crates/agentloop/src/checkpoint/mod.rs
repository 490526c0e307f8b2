//! Workspace checkpoints: what a workspace looked like before each mutating tool call, so that
//! the files can be put back (`rewind`) and the session's changes shown (`diff`).
//!
//! The design follows git's index. A [`Recorder`] snapshots the workspace before and after
//! every mutating call (`write_file`, `edit_file`, `shell`, mutating MCP tools — plugged in as
//! an [`Extension`](crate::agent::Extension) through [`Recorder::extension`]) and once more when
//! the run ends ([`Recorder::seal`]), so changes made by a command's children and background
//! jobs are seen too. A snapshot walks the tree (`.gitignore` respected, `.git` skipped) and
//! `lstat`s each entry; an entry whose size, mtime, ctime, inode and mode match the previous
//! snapshot keeps its recorded content hash, so an unchanged tree costs one stat walk and only
//! changed files are read. File contents go into a content-addressed blob store (SHA-256,
//! shared by every workspace and session of the store, so a content is kept once).
//!
//! Between the snapshots of one run the tree is not walked again: on Linux the first snapshot
//! watches every directory it walks (inotify, at most [`CheckpointOptions::max_watches`]), and
//! a later one reads the queued events and looks only at the paths they name — a file stat'ed
//! and read again if its stat changed, a directory created, moved in or whose `.gitignore`
//! changed walked, one removed or moved out dropped — giving the same entries and changes as a
//! walk. Whatever the events cannot vouch for makes that snapshot walk the whole tree and
//! watch it anew: the queue overflowed, a watch could not be added (the user's inotify limit
//! or the cap), the queue could not be read, the root was removed or replaced, an ignore file
//! above the root changed, or inotify is unavailable (other systems always walk). The run's
//! last snapshot ([`Recorder::seal`]) walks the whole tree too, so what inotify does not see —
//! writes through a shared memory map, from another mount namespace, on a network filesystem,
//! or through a hard link made from outside the workspace after the run's first snapshot (files
//! that already had other links are stat'ed at every snapshot) — is still attributed, to the
//! run's latest checkpoint.
//!
//! Each checkpoint records, per path the call changed, the entry before and after (file with
//! its hash and mode, symbolic link with its target, directory with its mode). Files over
//! [`CheckpointOptions::max_file_size`] are recorded as not restorable instead of copied.
//! Rewinding ([`CheckpointStore::rewind`]) puts every path changed by that checkpoint and the
//! later ones back to its state before the checkpoint — unless the file changed since the
//! agent's last recorded state of it (someone else's work): that path is skipped unless
//! [`RewindOptions::force`].
//!
//! Layout of a store directory: `blobs/xx/<sha256>`, `index/<hash of the root>.json` (the stat
//! cache of a workspace, written when a run ends), `sessions/<session>.jsonl` (one record
//! per line: a checkpoint, the changes attributed to it, a rewind's result) and `lock` (held
//! shared by every running recorder, exclusively by a blob garbage collection:
//! [`CheckpointStore::collect_garbage`]).

mod blobs;
mod gc;
mod ignores;
mod log;
mod recorder;
mod restore;
mod snapshot;
#[cfg(target_os = "linux")]
mod update;
#[cfg(unix)]
mod walk;
#[cfg(not(unix))]
#[path = "walk_portable.rs"]
mod walk;
mod walk_input;
#[cfg(target_os = "linux")]
mod watch;
#[cfg(not(target_os = "linux"))]
#[path = "watch_none.rs"]
mod watch;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use gc::GarbageReport;
pub use recorder::{Recorder, SnapshotReport};
pub use restore::{RewindOptions, RewindReport, Skipped};

/// Default of [`CheckpointOptions::max_file_size`]: 8 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 8 * 1024 * 1024;

/// Default of [`CheckpointOptions::max_entries`].
pub const DEFAULT_MAX_ENTRIES: usize = 250_000;

/// Default of [`CheckpointOptions::max_total_bytes`]: 2 GiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// Default of [`CheckpointOptions::max_watches`].
pub const DEFAULT_MAX_WATCHES: usize = 8192;

/// What went wrong reading or writing checkpoints.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// A file of the store or the workspace could not be read or written.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path.
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A record of the store is not what this version writes.
    #[error("{path}: corrupt checkpoint record: {detail}")]
    Corrupt {
        /// The file.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// The session has no checkpoint with this id.
    #[error("session {session} has no checkpoint {id} (`agentloop checkpoints` lists them)")]
    UnknownCheckpoint {
        /// The session.
        session: String,
        /// The id asked for.
        id: String,
    },
    /// The workspace is over [`CheckpointOptions::max_entries`] or
    /// [`CheckpointOptions::max_total_bytes`] (a home directory, a disk): no snapshot is taken.
    #[error("the workspace is too large to checkpoint: {0}")]
    TooLarge(String),
}

impl CheckpointError {
    /// Whether the checkpoint asked for does not exist.
    pub fn is_unknown_checkpoint(&self) -> bool {
        matches!(self, CheckpointError::UnknownCheckpoint { .. })
    }

    /// Whether the workspace is over the limits of [`CheckpointOptions`].
    pub fn is_too_large(&self) -> bool {
        matches!(self, CheckpointError::TooLarge(_))
    }

    /// Whether a stored record could not be parsed.
    pub fn is_corrupt(&self) -> bool {
        matches!(self, CheckpointError::Corrupt { .. })
    }

    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        CheckpointError::Io {
            what: what.into(),
            source,
        }
    }
}

/// What kind of entry a path is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum EntryKind {
    /// A regular file whose content is in the blob store.
    File,
    /// A symbolic link (its target is recorded, never followed).
    Symlink,
    /// A directory.
    Dir,
    /// A regular file too large to copy: changes are seen, the content cannot be restored.
    Unrestorable,
}

/// The state of one path in a snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// File, symbolic link, directory or unrestorable file.
    pub kind: EntryKind,
    /// SHA-256 of a file's content (hex).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// A symbolic link's target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Size in bytes (files).
    #[serde(default)]
    pub size: u64,
    /// Permission bits (`st_mode & 0o7777`).
    #[serde(default)]
    pub mode: u32,
    /// Modification time, nanoseconds since the epoch (stat cache only).
    #[serde(default)]
    pub mtime: i64,
    /// Status-change time, nanoseconds since the epoch (stat cache only).
    #[serde(default)]
    pub ctime: i64,
    /// Inode number (stat cache only).
    #[serde(default)]
    pub ino: u64,
}

impl Entry {
    /// Whether two entries hold the same thing: kind, content, link target and mode (the stat
    /// fields are only a cache, except for an unrestorable file, which has nothing else).
    pub fn same_content(&self, other: &Entry) -> bool {
        self.kind == other.kind
            && self.hash == other.hash
            && self.target == other.target
            && self.mode == other.mode
            && (self.kind != EntryKind::Unrestorable
                || (self.size == other.size && self.mtime == other.mtime))
    }
}

/// One path's change: its entry before and after (`None`: absent).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Relative to the workspace root, `/`-separated.
    pub path: String,
    /// Before the change.
    pub before: Option<Entry>,
    /// After it.
    pub after: Option<Entry>,
}

/// One checkpoint: the state before a mutating call, and what the call changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Checkpoint {
    /// Its id within the session (1, 2, …).
    pub id: u64,
    /// The session's model turn that made the call.
    pub turn: u32,
    /// The tool called.
    pub tool: String,
    /// The call's id.
    pub call_id: String,
    /// The workspace root.
    pub workspace: String,
    /// Milliseconds since the epoch when it was taken.
    pub created_ms: u64,
    /// The paths the call changed (with what a background job it started changed later), by path.
    #[serde(default)]
    pub changes: Vec<Change>,
}

impl Checkpoint {
    /// The changed paths.
    pub fn files(&self) -> Vec<&str> {
        self.changes.iter().map(|c| c.path.as_str()).collect()
    }
}

/// How snapshots are taken.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CheckpointOptions {
    /// Files larger than this are recorded as not restorable instead of copied.
    pub max_file_size: u64,
    /// A workspace with more entries than this is not checkpointed (the run goes on without).
    pub max_entries: usize,
    /// Nor one whose copyable files (those up to `max_file_size`) hold more bytes than this:
    /// the first snapshot copies them all into the store.
    pub max_total_bytes: u64,
    /// At most this many directories are watched for changes (Linux inotify: one watch per
    /// directory, counted against the user's limit, of which a couple of thousand are also
    /// left to other programs). A workspace with more directories is walked whole at every
    /// snapshot.
    pub max_watches: usize,
}

impl Default for CheckpointOptions {
    fn default() -> Self {
        CheckpointOptions {
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            max_entries: DEFAULT_MAX_ENTRIES,
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
            max_watches: DEFAULT_MAX_WATCHES,
        }
    }
}

impl CheckpointOptions {
    crate::setters! {
        /// Sets [`max_file_size`](Self::max_file_size).
        pub fn max_file_size(bytes: u64) => max_file_size = bytes;
        /// Sets [`max_entries`](Self::max_entries).
        pub fn max_entries(entries: usize) => max_entries = entries;
        /// Sets [`max_total_bytes`](Self::max_total_bytes).
        pub fn max_total_bytes(bytes: u64) => max_total_bytes = bytes;
        /// Sets [`max_watches`](Self::max_watches).
        pub fn max_watches(watches: usize) => max_watches = watches;
    }
}

/// A checkpoint store: a directory outside any workspace (see the module docs for its layout).
#[derive(Clone, Debug)]
pub struct CheckpointStore {
    dir: PathBuf,
}

impl CheckpointStore {
    /// The store in `dir`, created when missing — private to its owner (mode 0700 on Unix):
    /// it holds copies of workspace files, some of which may be private.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, CheckpointError> {
        let dir = dir.into();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        for sub in ["blobs", "index", "sessions"] {
            let path = dir.join(sub);
            builder
                .create(&path)
                .map_err(|e| CheckpointError::io(format!("cannot create {}", path.display()), e))?;
        }
        // Canonical, so a store inside a workspace is recognised (and skipped) by its walk.
        let dir = std::fs::canonicalize(&dir).unwrap_or(dir);
        Ok(CheckpointStore { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Starts recording the checkpoints of `session` in the workspace `root`.
    pub fn recorder(
        &self,
        root: &Path,
        session: &str,
        options: CheckpointOptions,
    ) -> Result<Recorder, CheckpointError> {
        Recorder::new(self.clone(), root, session, options)
    }

    /// The checkpoints of `session`, oldest first (empty when it has none).
    pub fn list(&self, session: &str) -> Result<Vec<Checkpoint>, CheckpointError> {
        Ok(log::SessionLog::new(&self.dir, session).read()?.checkpoints)
    }

    /// What the session changed so far: per path, its state before the first checkpoint that
    /// changed it and after the last one, by path; paths back as they were are left out.
    pub fn session_changes(&self, session: &str) -> Result<Vec<Change>, CheckpointError> {
        let folded = log::SessionLog::new(&self.dir, session).read()?;
        Ok(restore::net_changes(&folded.checkpoints))
    }

    /// The content of a file entry's blob.
    pub fn read_blob(&self, hash: &str) -> Result<Vec<u8>, CheckpointError> {
        blobs::BlobStore::new(&self.dir).read(hash)
    }

    /// Restores the files of `session`'s workspace to their state before checkpoint `id` (see
    /// the module docs and [`RewindOptions`]).
    pub fn rewind(
        &self,
        session: &str,
        id: u64,
        options: &RewindOptions,
    ) -> Result<RewindReport, CheckpointError> {
        restore::rewind(self, session, id, options)
    }

    /// Deletes the checkpoint log of `session` (its blobs stay until
    /// [`collect_garbage`](Self::collect_garbage): other sessions may share them).
    pub fn remove_session(&self, session: &str) -> Result<(), CheckpointError> {
        log::SessionLog::new(&self.dir, session).remove()
    }

    /// Deletes the blobs no session log and no workspace stat cache refers to — unless a
    /// recorder is running on the store (in any process): then nothing is deleted and the
    /// report says [`busy`](GarbageReport::busy).
    pub fn collect_garbage(&self) -> Result<GarbageReport, CheckpointError> {
        gc::collect(self)
    }

    /// Copies the checkpoints of `from` older than `before` into the log of `to` (a session
    /// forked from `from` at that checkpoint, so it can rewind further back).
    pub fn copy_before(&self, from: &str, to: &str, before: u64) -> Result<(), CheckpointError> {
        log::SessionLog::new(&self.dir, from)
            .copy_before(&log::SessionLog::new(&self.dir, to), before)
    }
}

#[cfg(test)]
mod test_fixture;
#[cfg(test)]
mod tests;
#[cfg(all(test, target_os = "linux"))]
mod watch_tests;
