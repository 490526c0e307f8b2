//! Bringing a run's previous snapshot up to date from the watcher's events instead of walking
//! the tree: only the paths the events name are stat'ed again (a file whose stat changed, or
//! changed too recently to trust, is read again), a directory created, moved in or whose
//! ignore rules changed is walked (and watched), a path removed, moved out or now ignored is
//! dropped with everything below it. The result — entries and changes — is what a full walk
//! would give. Anything unexpected (an error, a limit crossed) undoes the update and lets the
//! snapshot walk the whole tree, which decides.

use std::collections::{HashMap, HashSet};
use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

use super::ignores::Rules;
use super::snapshot::{Below, Scanner, Snapshot, change, now_ns, stat_entry, stat_matches};
use super::watch::{Events, Watcher, is_below};
use super::{Change, CheckpointError, CheckpointOptions, Entry, EntryKind};

/// What an update found.
#[derive(Debug)]
pub(crate) struct Updated {
    /// What changed since the previous snapshot, by path.
    pub changes: Vec<Change>,
    /// How many files were read.
    pub hashed: usize,
}

/// Brings `snap` up to date with what `watcher` reports, or returns `None` (and leaves `snap`
/// as it was) when the whole tree must be walked.
pub(crate) fn update(scanner: &Scanner, watcher: &Watcher, snap: &mut Snapshot) -> Option<Updated> {
    let started = now_ns();
    let events = watcher.drain()?;
    if events.rewalk.contains("") {
        return None; // the root's own rules changed: everything may be in or out
    }
    let mut update = Update {
        scanner,
        watcher,
        base_started: snap.started,
        snap,
        before: HashMap::new(),
        done: HashSet::new(),
        linked: Vec::new(),
        hashed: 0,
    };
    match update.apply(&events) {
        Ok(true) => Some(update.finish(started)),
        // An error (the store unwritable…) is reported by the full walk that follows.
        Ok(false) | Err(_) => {
            update.rollback();
            None
        }
    }
}

struct Update<'a> {
    scanner: &'a Scanner,
    watcher: &'a Watcher,
    snap: &'a mut Snapshot,
    /// When the snapshot brought up to date was taken (the stat cache's racy reference).
    base_started: i64,
    /// Every path changed so far, with its entry before (to diff, or to roll back).
    before: HashMap<String, Option<Entry>>,
    /// Directories walked again or dropped: what lies below them is up to date.
    done: HashSet<String>,
    /// The other names of files found with several hard links, to look at too.
    linked: Vec<String>,
    hashed: usize,
}

impl Update<'_> {
    /// Looks at every path the events name; `false` when the result is over the limits.
    fn apply(&mut self, events: &Events) -> Result<bool, CheckpointError> {
        // Rules first: a directory walked again makes the events below it moot.
        for dir in &events.rewalk {
            self.check(dir, true)?;
        }
        for path in &events.dirty {
            self.check(path, false)?;
        }
        while let Some(path) = self.linked.pop() {
            self.check(&path, false)?;
        }
        Ok(self.before.is_empty() || self.within_limits())
    }

    /// Brings the entry of `rel` (and, for a directory new here or with new rules —
    /// `rewalk` — everything below it) up to date.
    fn check(&mut self, rel: &str, rewalk: bool) -> Result<(), CheckpointError> {
        if self.is_done(rel) {
            return Ok(());
        }
        let (parent, name) = rel.rsplit_once('/').unwrap_or(("", rel));
        let Some(rules) = self.watcher.rules_of(parent) else {
            self.drop_path(rel); // its directory is not listed: nothing in it is recorded
            return Ok(());
        };
        if name == ".git" || self.scanner.skipped().as_deref() == Some(rel) {
            return Ok(()); // never recorded (a `.git` appearing is a rules change: walked)
        }
        let path = self.scanner.root().join(rel);
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            self.drop_path(rel);
            return Ok(());
        };
        let kind = meta.file_type();
        if rules.is_ignored(rel, kind.is_dir()) {
            self.drop_path(rel);
            return Ok(());
        }
        let old_dir = self
            .snap
            .entries
            .get(rel)
            .filter(|e| e.kind == EntryKind::Dir)
            .map(|e| (e.ino, e.mode));
        if kind.is_dir() {
            let entry = dir_entry(&meta);
            // The same directory, still listed as it was (a new mode may make it unreadable).
            let same = old_dir == Some((entry.ino, entry.mode)) && self.watcher.is_watched(rel);
            if rewalk || !same {
                return self.walk_dir(rel, entry, rules);
            }
            self.set(rel, Some(entry));
            return Ok(());
        }
        let entry = if kind.is_symlink() {
            link_entry(&path, &meta)
        } else if kind.is_file() {
            Some(self.file_entry(rel, &meta)?)
        } else {
            None // sockets, devices: not recorded
        };
        if old_dir.is_some() {
            self.drop_dir(rel); // a directory replaced by a file
        }
        match entry {
            Some(entry) => self.set(rel, Some(entry)),
            None => self.drop_path(rel),
        }
        Ok(())
    }

    /// The entry of the regular file `rel`: the recorded one when its stat is unchanged (and
    /// not racy), else read again.
    fn file_entry(&mut self, rel: &str, meta: &Metadata) -> Result<Entry, CheckpointError> {
        let now = stat_entry(meta);
        self.note_links(rel, meta);
        if let Some(old) = self.snap.entries.get(rel) {
            if stat_matches(old, &now, self.base_started) {
                return Ok(old.clone());
            }
        }
        self.hashed += 1;
        self.scanner.read_file(rel, now)
    }

    /// A file with several names: a write through another name is reported to that name's
    /// directory only, so every name is stat'ed at each snapshot (and now, the first time).
    fn note_links(&mut self, rel: &str, meta: &Metadata) {
        let first = self.watcher.set_shared(rel, meta.nlink() > 1);
        if first {
            let ino = meta.ino();
            for (path, entry) in &self.snap.entries {
                if entry.ino == ino && path != rel && entry.kind != EntryKind::Dir {
                    self.linked.push(path.clone());
                }
            }
        }
    }

    /// Walks the directory `rel` (new here, or with new rules) and replaces what was recorded
    /// below it.
    fn walk_dir(
        &mut self,
        rel: &str,
        entry: Entry,
        rules: Arc<Rules>,
    ) -> Result<(), CheckpointError> {
        self.done.insert(rel.to_owned());
        // Its old watches go; the walk watches what it lists.
        self.watcher.forget(rel);
        let limits = self.budget(rel);
        let below = Below {
            start: Some((rel, rules)),
            limits: &limits,
            watch: Some(self.watcher),
        };
        let (found, hashed) = self
            .scanner
            .walk(&below, &self.snap.entries, self.base_started)?;
        self.hashed += hashed;
        self.drop_below(rel);
        self.set(rel, Some(entry));
        for (path, entry) in found {
            self.set(&path, Some(entry));
        }
        Ok(())
    }

    /// The limits for a walk of `dir`: what the rest of the tree leaves of them (checked before
    /// any file is read, as a full walk does).
    fn budget(&self, dir: &str) -> CheckpointOptions {
        let limits = self.scanner.limits();
        let (mut entries, mut bytes) = (1usize, 0u64); // `dir` itself
        for (path, entry) in &self.snap.entries {
            if !is_below(path, dir) {
                entries += 1;
                bytes = bytes.saturating_add(counted_bytes(entry, limits));
            }
        }
        CheckpointOptions {
            max_entries: limits.max_entries.saturating_sub(entries),
            max_total_bytes: limits.max_total_bytes.saturating_sub(bytes),
            ..limits.clone()
        }
    }

    fn within_limits(&self) -> bool {
        let limits = self.scanner.limits();
        let bytes = self
            .snap
            .entries
            .values()
            .fold(0u64, |sum, e| sum.saturating_add(counted_bytes(e, limits)));
        self.snap.entries.len() <= limits.max_entries && bytes <= limits.max_total_bytes
    }

    /// `rel` is gone (or now ignored): its entry and, for a directory, everything below.
    fn drop_path(&mut self, rel: &str) {
        self.watcher.set_shared(rel, false);
        if self
            .snap
            .entries
            .get(rel)
            .is_some_and(|e| e.kind == EntryKind::Dir)
        {
            self.drop_dir(rel);
        }
        if self.snap.entries.contains_key(rel) {
            self.set(rel, None);
        }
    }

    /// The directory `rel` is no more: its watches and everything recorded below it go.
    fn drop_dir(&mut self, rel: &str) {
        self.watcher.forget(rel);
        self.drop_below(rel);
        self.done.insert(rel.to_owned());
    }

    fn drop_below(&mut self, dir: &str) {
        let below: Vec<String> = self
            .snap
            .entries
            .keys()
            .filter(|path| path.len() > dir.len() && is_below(path, dir))
            .cloned()
            .collect();
        for path in below {
            self.set(&path, None);
        }
    }

    /// Records `entry` for `rel` (`None`: absent), keeping the first entry it replaced.
    fn set(&mut self, rel: &str, entry: Option<Entry>) {
        let old = match entry {
            Some(entry) => self.snap.entries.insert(rel.to_owned(), entry),
            None => self.snap.entries.remove(rel),
        };
        self.before.entry(rel.to_owned()).or_insert(old);
    }

    /// Whether `rel` or a directory above it was walked again or dropped in this update.
    fn is_done(&self, rel: &str) -> bool {
        self.done.contains(rel)
            || rel
                .match_indices('/')
                .any(|(at, _)| self.done.contains(&rel[..at]))
    }

    fn finish(self, started: i64) -> Updated {
        let root = self.scanner.root();
        let mut changes: Vec<Change> = self
            .before
            .iter()
            .filter_map(|(path, before)| {
                let after = self.snap.entries.get(path);
                change(path, before.as_ref(), after, self.base_started, root)
            })
            .collect();
        changes.sort_by(|a, b| a.path.cmp(&b.path));
        self.snap.started = started;
        self.snap.hashed = self.hashed;
        Updated {
            changes,
            hashed: self.hashed,
        }
    }

    fn rollback(self) {
        for (path, before) in self.before {
            match before {
                Some(entry) => self.snap.entries.insert(path, entry),
                None => self.snap.entries.remove(&path),
            };
        }
    }
}

/// The bytes an entry counts against [`CheckpointOptions::max_total_bytes`], as the walk
/// counts them: regular files up to the size limit.
fn counted_bytes(entry: &Entry, limits: &CheckpointOptions) -> u64 {
    let file = matches!(entry.kind, EntryKind::File | EntryKind::Unrestorable);
    if file && entry.size <= limits.max_file_size {
        entry.size
    } else {
        0
    }
}

fn dir_entry(meta: &Metadata) -> Entry {
    let mut entry = stat_entry(meta);
    (entry.kind, entry.size) = (EntryKind::Dir, 0);
    entry
}

/// A symbolic link's entry (`None` when its target is unreadable or not UTF-8: not recorded).
fn link_entry(path: &std::path::Path, meta: &Metadata) -> Option<Entry> {
    let target = std::fs::read_link(path)
        .ok()?
        .into_os_string()
        .into_string()
        .ok()?;
    let mut entry = stat_entry(meta);
    (entry.kind, entry.mode, entry.target) = (EntryKind::Symlink, 0, Some(target));
    Some(entry)
}
