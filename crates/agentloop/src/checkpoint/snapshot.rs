//! Snapshots of a workspace tree with a stat cache: one `lstat` per entry, and a file is read
//! (hashed, copied into the blob store) only when its size, mtime, ctime, inode or mode differ
//! from the previous snapshot's — or when its mtime is so close to that snapshot's start that a
//! write in the same timestamp tick could have gone unseen (git's "racy" entries).

use std::collections::HashMap;
use std::fs::Metadata;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::blobs::{BlobStore, hash_of, write_atomically};
use super::ignores::{IgnoreCache, Rules};
use super::walk::{Found, Walk};
use super::watch::Watcher;
use super::{Change, CheckpointError, CheckpointOptions, Entry, EntryKind};

/// Every recorded path of a workspace, by `/`-separated relative path (hashed, not sorted: a
/// snapshot is looked up path by path, and only its few changes are sorted).
pub(crate) type Tree = HashMap<String, Entry>;

/// How close (ns) to a snapshot's start an mtime makes a cached hash untrustworthy. File
/// timestamps come from a coarse clock that may lag the system clock by a tick.
pub(crate) const RACY_NS: i64 = 50_000_000;

/// A tree and when its walk started (ns since the epoch).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Snapshot {
    /// The root it was taken of (the persisted cache of another root is not used).
    #[serde(default)]
    pub root: String,
    /// When the walk started.
    pub started: i64,
    /// The entries.
    pub entries: Tree,
    /// How many files this walk read (the stat cache missed).
    #[serde(skip)]
    pub hashed: usize,
}

/// Where a walk starts, within which limits, and what watches the directories it lists.
pub(crate) struct Below<'a> {
    /// A directory below the root and the rules in force in its parent (`None`: the root).
    pub start: Option<(&'a str, Arc<Rules>)>,
    pub limits: &'a CheckpointOptions,
    pub watch: Option<&'a Watcher>,
}

/// Takes snapshots of one workspace.
#[derive(Clone, Debug)]
pub(crate) struct Scanner {
    root: PathBuf,
    /// The store directory, skipped when it lies inside the workspace.
    skip: PathBuf,
    limits: CheckpointOptions,
    blobs: BlobStore,
    /// The ignore files parsed by earlier walks (parsed again only when changed).
    ignores: Arc<IgnoreCache>,
}

pub(crate) fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

impl Scanner {
    pub(crate) fn new(root: &Path, store: &Path, limits: CheckpointOptions) -> Self {
        Scanner {
            root: root.to_path_buf(),
            skip: store.to_path_buf(),
            limits,
            blobs: BlobStore::new(store),
            ignores: Arc::default(),
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The limits snapshots are taken with.
    pub(crate) fn limits(&self) -> &CheckpointOptions {
        &self.limits
    }

    /// The store directory relative to the root, when it lies inside the workspace.
    pub(crate) fn skipped(&self) -> Option<String> {
        relative(&self.root, &self.skip)
    }

    /// Walks the workspace; entries unchanged since `cache` keep their hash.
    #[cfg(test)]
    pub(crate) fn scan(&self, cache: &Snapshot) -> Result<Snapshot, CheckpointError> {
        self.scan_watched(cache, None)
    }

    /// [`scan`](Self::scan), every directory listed also watched by `watch`.
    pub(crate) fn scan_watched(
        &self,
        cache: &Snapshot,
        watch: Option<&Watcher>,
    ) -> Result<Snapshot, CheckpointError> {
        let started = now_ns();
        let below = Below {
            start: None,
            limits: &self.limits,
            watch,
        };
        let (found, hashed) = self.walk(&below, &cache.entries, cache.started)?;
        Ok(Snapshot {
            root: self.root.to_string_lossy().into_owned(),
            started,
            entries: found.into_iter().collect(),
            hashed,
        })
    }

    /// The entries found by a walk (`below` says where and how), files hashed unless their
    /// entry in `cache` (taken at `cache_started`) can be trusted; and how many were read.
    pub(crate) fn walk(
        &self,
        below: &Below<'_>,
        cache: &Tree,
        cache_started: i64,
    ) -> Result<(Vec<(String, Entry)>, usize), CheckpointError> {
        let lookup = |rel: &str, now: &Entry| {
            let cached = cache.get(rel)?;
            stat_matches(cached, now, cache_started).then(|| cached.clone())
        };
        let walk = Walk {
            root: &self.root,
            skip: self.skipped(),
            limits: below.limits,
            ignores: &self.ignores,
            lookup: &lookup,
            start: below.start.clone(),
            watch: below.watch,
        };
        let found = walk.run()?;
        let (mut entries, mut hashed) = (Vec::with_capacity(found.len()), 0);
        for Found {
            rel,
            entry,
            cached,
            shared,
        } in found
        {
            if let (true, Some(watch)) = (shared, below.watch) {
                watch.set_shared(&rel, true);
            }
            let entry = if !cached && entry.kind == EntryKind::File {
                hashed += 1;
                self.read_file(&rel, entry)?
            } else {
                entry
            };
            entries.push((rel, entry));
        }
        Ok((entries, hashed))
    }

    /// The entry of a file the stat cache missed: its content hashed and stored, or recorded
    /// as not restorable when it is too large or unreadable.
    pub(crate) fn read_file(&self, rel: &str, mut entry: Entry) -> Result<Entry, CheckpointError> {
        if entry.size > self.limits.max_file_size {
            entry.kind = EntryKind::Unrestorable;
            return Ok(entry);
        }
        match std::fs::read(self.root.join(rel)) {
            Ok(bytes) => {
                entry.hash = Some(self.blobs.put(&bytes)?);
                entry.size = bytes.len() as u64;
            }
            // Unreadable (permissions): its changes are seen by stat, its content not kept.
            Err(_) => entry.kind = EntryKind::Unrestorable,
        }
        Ok(entry)
    }

    /// The current entry of `rel` (hashed, nothing stored), for checks before a restore.
    pub(crate) fn current(&self, rel: &str) -> Option<Entry> {
        let path = self.root.join(rel);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        let mut entry = stat_entry(&meta);
        let kind = meta.file_type();
        if kind.is_symlink() {
            entry.kind = EntryKind::Symlink;
            entry.mode = 0;
            entry.target = Some(std::fs::read_link(&path).ok()?.to_str()?.to_owned());
        } else if kind.is_dir() {
            entry.kind = EntryKind::Dir;
            entry.size = 0;
        } else if entry.size > self.limits.max_file_size {
            entry.kind = EntryKind::Unrestorable;
        } else if let Ok(bytes) = std::fs::read(&path) {
            entry.hash = Some(hash_of(&bytes));
        } else {
            entry.kind = EntryKind::Unrestorable;
        }
        Some(entry)
    }

    fn index_path(&self, store: &Path) -> PathBuf {
        let key = hash_of(self.root.to_string_lossy().as_bytes());
        store.join("index").join(format!("{}.json", &key[..32]))
    }

    /// The persisted stat cache of this workspace (empty when there is none or it is unusable:
    /// it is only a cache).
    pub(crate) fn load_cache(&self, store: &Path) -> Snapshot {
        let Ok(text) = std::fs::read(self.index_path(store)) else {
            return Snapshot::default();
        };
        match serde_json::from_slice::<Snapshot>(&text) {
            Ok(snapshot) if snapshot.root == self.root.to_string_lossy() => snapshot,
            _ => Snapshot::default(),
        }
    }

    /// Persists `snapshot` as the stat cache of this workspace.
    pub(crate) fn save_cache(
        &self,
        store: &Path,
        snapshot: &Snapshot,
    ) -> Result<(), CheckpointError> {
        let bytes = serde_json::to_vec(snapshot).map_err(|e| CheckpointError::Corrupt {
            path: self.index_path(store).display().to_string(),
            detail: e.to_string(),
        })?;
        write_atomically(&self.index_path(store), &bytes)
    }
}

fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

/// A cached entry is trusted when the stat fields all match and its mtime is not racy.
pub(crate) fn stat_matches(cached: &Entry, now: &Entry, cache_started: i64) -> bool {
    matches!(cached.kind, EntryKind::File | EntryKind::Unrestorable)
        && cached.size == now.size
        && cached.mtime == now.mtime
        && cached.ctime == now.ctime
        && cached.ino == now.ino
        && cached.mode == now.mode
        && now.mtime.saturating_add(RACY_NS) < cache_started
}

#[cfg(unix)]
pub(crate) fn stat_entry(meta: &Metadata) -> Entry {
    use std::os::unix::fs::MetadataExt;
    Entry {
        kind: EntryKind::File,
        hash: None,
        target: None,
        size: meta.size(),
        mode: meta.mode() & 0o7777,
        mtime: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        ctime: meta
            .ctime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.ctime_nsec()),
        ino: meta.ino(),
    }
}

#[cfg(not(unix))]
pub(crate) fn stat_entry(meta: &Metadata) -> Entry {
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    Entry {
        kind: EntryKind::File,
        hash: None,
        target: None,
        size: meta.len(),
        mode: if meta.permissions().readonly() {
            0o444
        } else {
            0o644
        },
        mtime,
        ctime: mtime,
        ino: 0,
    }
}

/// What changed from `old` to `new` in the workspace `root`, by path. A path that only became
/// visible (a `.gitignore` line removed: its ctime predates `old`) or hidden (it still exists)
/// is not a change: undoing it would delete or resurrect a file nobody touched.
pub(crate) fn diff(old: &Snapshot, new: &Snapshot, root: &Path) -> Vec<Change> {
    let (mut out, mut kept) = (Vec::new(), 0usize);
    for (path, after) in &new.entries {
        let before = old.entries.get(path);
        kept += usize::from(before.is_some());
        out.extend(change(path, before, Some(after), old.started, root));
    }
    // Every old path is still there: nothing was removed (the common case, no second pass).
    if kept < old.entries.len() {
        for (path, before) in &old.entries {
            if !new.entries.contains_key(path) {
                out.extend(change(path, Some(before), None, old.started, root));
            }
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

/// The change of one path from `before` (in a snapshot started at `old_started`) to `after`,
/// as [`diff`] decides it.
pub(crate) fn change(
    path: &str,
    before: Option<&Entry>,
    after: Option<&Entry>,
    old_started: i64,
    root: &Path,
) -> Option<Change> {
    let changed = match (before, after) {
        (Some(before), Some(after)) => !before.same_content(after),
        (None, Some(after)) => after.ctime.saturating_add(2 * RACY_NS) >= old_started,
        (Some(_), None) => std::fs::symlink_metadata(root.join(path)).is_err(),
        (None, None) => false,
    };
    changed.then(|| Change {
        path: path.to_owned(),
        before: before.cloned(),
        after: after.cloned(),
    })
}
