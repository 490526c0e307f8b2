//! Snapshots of a workspace tree with a stat cache: one `lstat` per entry, and a file is read
//! (hashed, copied into the blob store) only when its size, mtime, ctime, inode or mode differ
//! from the previous snapshot's — or when its mtime is so close to that snapshot's start that a
//! write in the same timestamp tick could have gone unseen (git's "racy" entries).

use std::collections::BTreeMap;
use std::fs::Metadata;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::blobs::{BlobStore, hash_of, write_atomically};
use super::{Change, CheckpointError, CheckpointOptions, Entry, EntryKind};

/// Every recorded path of a workspace, by `/`-separated relative path.
pub(crate) type Tree = BTreeMap<String, Entry>;

/// How close (ns) to a snapshot's start an mtime makes a cached hash untrustworthy. File
/// timestamps come from a coarse clock that may lag the system clock by a tick.
const RACY_NS: i64 = 50_000_000;

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

/// Takes snapshots of one workspace.
#[derive(Clone, Debug)]
pub(crate) struct Scanner {
    root: PathBuf,
    /// The store directory, skipped when it lies inside the workspace.
    skip: PathBuf,
    limits: CheckpointOptions,
    blobs: BlobStore,
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
        }
    }

    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Walks the workspace; entries unchanged since `cache` keep their hash.
    pub(crate) fn scan(&self, cache: &Snapshot) -> Result<Snapshot, CheckpointError> {
        let started = now_ns();
        let (mut entries, mut hashed) = (Tree::new(), 0);
        for (rel, path, meta) in self.stat_walk()? {
            let cached = cache.entries.get(&rel);
            if let Some((entry, read)) = self.entry_for(&path, &meta, cached, cache.started)? {
                hashed += usize::from(read);
                entries.insert(rel, entry);
            }
        }
        Ok(Snapshot {
            root: self.root.to_string_lossy().into_owned(),
            started,
            entries,
            hashed,
        })
    }

    /// Every path to record with its `lstat`, checked against the limits before anything is
    /// read or copied. Unreadable directories are left out (their contents are not recorded).
    fn stat_walk(&self) -> Result<Vec<(String, PathBuf, Metadata)>, CheckpointError> {
        let skip = self.skip.clone();
        let walk = ignore::WalkBuilder::new(&self.root)
            .hidden(false)
            .ignore(false)
            .git_global(false)
            .git_ignore(true)
            .git_exclude(true)
            .require_git(false)
            .follow_links(false)
            .filter_entry(move |e| e.file_name() != ".git" && e.path() != skip)
            .build();
        let (mut out, mut bytes) = (Vec::new(), 0u64);
        for item in walk.flatten() {
            if item.depth() == 0 {
                continue;
            }
            let Some(rel) = relative(&self.root, item.path()) else {
                continue;
            };
            let Ok(meta) = std::fs::symlink_metadata(item.path()) else {
                continue; // gone since it was listed
            };
            if meta.is_file() && meta.len() <= self.limits.max_file_size {
                bytes = bytes.saturating_add(meta.len());
            }
            out.push((rel, item.into_path(), meta));
            self.check_limits(out.len(), bytes)?;
        }
        Ok(out)
    }

    fn check_limits(&self, entries: usize, bytes: u64) -> Result<(), CheckpointError> {
        if entries > self.limits.max_entries {
            return Err(CheckpointError::TooLarge(format!(
                "more than {} files and directories",
                self.limits.max_entries
            )));
        }
        if bytes > self.limits.max_total_bytes {
            return Err(CheckpointError::TooLarge(format!(
                "more than {} bytes of files",
                self.limits.max_total_bytes
            )));
        }
        Ok(())
    }

    /// The entry of one path and whether its content was read (`None` for what is not
    /// recorded: sockets, devices, a link whose target is not UTF-8).
    fn entry_for(
        &self,
        path: &Path,
        meta: &Metadata,
        cached: Option<&Entry>,
        cache_started: i64,
    ) -> Result<Option<(Entry, bool)>, CheckpointError> {
        let mut entry = stat_entry(meta);
        let kind = meta.file_type();
        if kind.is_symlink() {
            let Ok(target) = std::fs::read_link(path) else {
                return Ok(None);
            };
            entry.kind = EntryKind::Symlink;
            entry.mode = 0;
            entry.target = target.to_str().map(str::to_owned);
            return Ok(entry.target.is_some().then_some((entry, false)));
        }
        if kind.is_dir() {
            entry.kind = EntryKind::Dir;
            entry.size = 0;
            return Ok(Some((entry, false)));
        }
        if !kind.is_file() {
            return Ok(None);
        }
        if let Some(cached) = cached.filter(|c| stat_matches(c, &entry, cache_started)) {
            return Ok(Some((cached.clone(), false)));
        }
        if entry.size > self.limits.max_file_size {
            entry.kind = EntryKind::Unrestorable;
            return Ok(Some((entry, false)));
        }
        match std::fs::read(path) {
            Ok(bytes) => {
                entry.hash = Some(self.blobs.put(&bytes)?);
                entry.size = bytes.len() as u64;
            }
            // Unreadable (permissions): its changes are seen by stat, its content not kept.
            Err(_) => entry.kind = EntryKind::Unrestorable,
        }
        Ok(Some((entry, true)))
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
fn stat_matches(cached: &Entry, now: &Entry, cache_started: i64) -> bool {
    matches!(cached.kind, EntryKind::File | EntryKind::Unrestorable)
        && cached.size == now.size
        && cached.mtime == now.mtime
        && cached.ctime == now.ctime
        && cached.ino == now.ino
        && cached.mode == now.mode
        && now.mtime.saturating_add(RACY_NS) < cache_started
}

#[cfg(unix)]
fn stat_entry(meta: &Metadata) -> Entry {
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
fn stat_entry(meta: &Metadata) -> Entry {
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
    let mut out = Vec::new();
    for (path, after) in &new.entries {
        match old.entries.get(path) {
            Some(before) if before.same_content(after) => {}
            Some(before) => out.push(change(path, Some(before), Some(after))),
            None if after.ctime.saturating_add(2 * RACY_NS) < old.started => {}
            None => out.push(change(path, None, Some(after))),
        }
    }
    for (path, before) in &old.entries {
        if !new.entries.contains_key(path) && std::fs::symlink_metadata(root.join(path)).is_err() {
            out.push(change(path, Some(before), None));
        }
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    out
}

fn change(path: &str, before: Option<&Entry>, after: Option<&Entry>) -> Change {
    Change {
        path: path.to_owned(),
        before: before.cloned(),
        after: after.cloned(),
    }
}
