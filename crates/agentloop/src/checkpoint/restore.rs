//! Rewinding: every path changed at or after a checkpoint goes back to its state before it —
//! file bytes and mode, symbolic links, directories (re-created, or removed when the agent
//! created them) — unless someone other than the agent changed it since (then it is skipped,
//! unless forced). Removals go deepest first, creations shallowest first, so a directory is
//! empty before it is removed and exists before its files are written.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::blobs::{BlobStore, write_atomically};
use super::log::{Record, SessionLog};
use super::snapshot::Scanner;
use super::{
    Change, Checkpoint, CheckpointError, CheckpointOptions, CheckpointStore, Entry, EntryKind,
};

/// How to rewind.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct RewindOptions {
    /// Also restore paths changed since the agent's last change to them (someone else's work).
    pub force: bool,
}

impl RewindOptions {
    /// Sets [`force`](Self::force).
    pub fn force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }
}

/// A path a rewind left alone, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skipped {
    /// The path, relative to the workspace.
    pub path: String,
    /// Why, one line.
    pub reason: String,
}

/// What a rewind did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RewindReport {
    /// The workspace root.
    pub workspace: String,
    /// The paths put back.
    pub restored: Vec<String>,
    /// The paths left alone.
    pub skipped: Vec<Skipped>,
}

fn same(a: Option<&Entry>, b: Option<&Entry>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.same_content(b),
        _ => false,
    }
}

/// Per path changed by `checkpoints`: its state before the first of them that changed it.
fn targets(checkpoints: &[Checkpoint]) -> BTreeMap<String, Option<Entry>> {
    let mut out = BTreeMap::new();
    for checkpoint in checkpoints {
        for change in &checkpoint.changes {
            out.entry(change.path.clone())
                .or_insert_with(|| change.before.clone());
        }
    }
    out
}

/// Per path: the state before the first checkpoint that changed it and after the last one.
pub(crate) fn net_changes(checkpoints: &[Checkpoint]) -> Vec<Change> {
    let mut net: BTreeMap<String, Change> = BTreeMap::new();
    for change in checkpoints.iter().flat_map(|c| &c.changes) {
        net.entry(change.path.clone())
            .and_modify(|c| c.after = change.after.clone())
            .or_insert_with(|| change.clone());
    }
    net.into_values()
        .filter(|c| !same(c.before.as_ref(), c.after.as_ref()))
        .collect()
}

/// One path to put back: where it should end up, and what is there now.
struct Step {
    path: String,
    target: Option<Entry>,
    current: Option<Entry>,
}

pub(crate) fn rewind(
    store: &CheckpointStore,
    session: &str,
    id: u64,
    options: &RewindOptions,
) -> Result<RewindReport, CheckpointError> {
    let log = SessionLog::new(store.dir(), session);
    let folded = log.read()?;
    let Some(pos) = folded.checkpoints.iter().position(|c| c.id == id) else {
        return Err(CheckpointError::UnknownCheckpoint {
            session: session.to_owned(),
            id: id.to_string(),
        });
    };
    let root = PathBuf::from(&folded.checkpoints[pos].workspace);
    let scanner = Scanner::new(
        &root,
        store.dir(),
        CheckpointOptions::default().max_file_size(u64::MAX),
    );
    let mut report = RewindReport {
        workspace: folded.checkpoints[pos].workspace.clone(),
        ..RewindReport::default()
    };
    let mut steps = Vec::new();
    for (path, target) in targets(&folded.checkpoints[pos..]) {
        let last = folded.last_known.get(&path).cloned().flatten();
        let current = current_like(&scanner, &path, last.as_ref().or(target.as_ref()));
        if !options.force && !same(current.as_ref(), last.as_ref()) {
            report.skipped.push(skipped(
                &path,
                "changed since the agent's last change to it",
            ));
        } else if same(current.as_ref(), target.as_ref()) {
            continue; // already as it was
        } else if target
            .as_ref()
            .is_some_and(|t| t.kind == EntryKind::Unrestorable)
        {
            report.skipped.push(skipped(
                &path,
                "too large to have been copied; not restorable",
            ));
        } else {
            steps.push(Step {
                path,
                target,
                current,
            });
        }
    }
    apply(&root, &BlobStore::new(store.dir()), steps, &mut report);
    record_restored(&log, &scanner, &report)?;
    Ok(report)
}

fn skipped(path: &str, reason: &str) -> Skipped {
    Skipped {
        path: path.to_owned(),
        reason: reason.to_owned(),
    }
}

/// The current entry of `path`, comparable with `like`: an unrestorable file is compared by
/// its stat fields only (it was never hashed).
fn current_like(scanner: &Scanner, path: &str, like: Option<&Entry>) -> Option<Entry> {
    let mut current = scanner.current(path)?;
    if like.is_some_and(|l| l.kind == EntryKind::Unrestorable) && current.kind == EntryKind::File {
        current.kind = EntryKind::Unrestorable;
        current.hash = None;
    }
    Some(current)
}

fn depth(path: &str) -> usize {
    path.matches('/').count()
}

/// Removes what must go (deepest first), then creates and writes (shallowest first).
fn apply(root: &Path, blobs: &BlobStore, mut steps: Vec<Step>, report: &mut RewindReport) {
    steps.sort_by(|a, b| {
        depth(b.path.as_str())
            .cmp(&depth(&a.path))
            .then(b.path.cmp(&a.path))
    });
    let mut failed = std::collections::BTreeSet::new();
    for step in &steps {
        let Some(current) = &step.current else {
            continue;
        };
        let replace = match &step.target {
            None => true,
            Some(t) => t.kind != current.kind || t.kind == EntryKind::Symlink,
        };
        if replace {
            if let Err(reason) = remove(root, &step.path, current) {
                report.skipped.push(skipped(&step.path, &reason));
                failed.insert(step.path.clone());
            }
        }
    }
    steps.reverse();
    for step in steps {
        if failed.contains(&step.path) {
            continue;
        }
        let result = match &step.target {
            None => Ok(()),
            Some(target) => create(root, blobs, &step.path, target),
        };
        match result {
            Ok(()) => report.restored.push(step.path),
            Err(reason) => report.skipped.push(skipped(&step.path, &reason)),
        }
    }
    report.restored.sort();
    report.skipped.sort_by(|a, b| a.path.cmp(&b.path));
}

/// Checks that no existing ancestor of `rel` is a symbolic link (a rewind never writes
/// through one, which could lead outside the workspace), creating missing directories.
fn safe_parent(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let mut dir = root.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        if matches!(*part, "" | "." | "..") {
            return Err("not a plain relative path".into());
        }
        dir.push(part);
        match std::fs::symlink_metadata(&dir) {
            Ok(meta) if meta.file_type().is_dir() => {}
            Ok(_) => return Err(format!("{part} on its path is not a directory")),
            Err(_) => {
                std::fs::create_dir(&dir).map_err(|e| format!("cannot create {part}: {e}"))?
            }
        }
    }
    Ok(dir)
}

fn remove(root: &Path, rel: &str, current: &Entry) -> Result<(), String> {
    safe_parent(root, rel)?;
    let path = root.join(rel);
    let result = if current.kind == EntryKind::Dir {
        std::fs::remove_dir(&path)
    } else {
        std::fs::remove_file(&path)
    };
    result.map_err(|e| format!("cannot remove it: {e}"))
}

fn create(root: &Path, blobs: &BlobStore, rel: &str, target: &Entry) -> Result<(), String> {
    let parent = safe_parent(root, rel)?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let path = parent.join(name);
    match target.kind {
        EntryKind::Dir => {
            if !path.is_dir() {
                std::fs::create_dir(&path).map_err(|e| format!("cannot create it: {e}"))?;
            }
            set_mode(&path, target.mode)
        }
        EntryKind::File => {
            let hash = target.hash.as_deref().unwrap_or_default();
            let bytes = blobs.read(hash).map_err(|e| e.to_string())?;
            write_atomically(&path, &bytes).map_err(|e| e.to_string())?;
            set_mode(&path, target.mode)
        }
        EntryKind::Symlink => symlink(target.target.as_deref().unwrap_or_default(), &path),
        EntryKind::Unrestorable => Err("not restorable".into()),
    }
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("cannot set its mode: {e}"))
}

#[cfg(not(unix))]
fn set_mode(_path: &Path, _mode: u32) -> Result<(), String> {
    Ok(())
}

#[cfg(unix)]
fn symlink(target: &str, path: &Path) -> Result<(), String> {
    std::os::unix::fs::symlink(target, path).map_err(|e| format!("cannot create the link: {e}"))
}

#[cfg(not(unix))]
fn symlink(_target: &str, _path: &Path) -> Result<(), String> {
    Err("symbolic links are restored on Unix only".into())
}

/// Records the restored paths' new states: they are the agent's last known ones now, so a
/// later rewind of the same session does not take them for someone else's work.
fn record_restored(
    log: &SessionLog,
    scanner: &Scanner,
    report: &RewindReport,
) -> Result<(), CheckpointError> {
    if report.restored.is_empty() {
        return Ok(());
    }
    let changes = report
        .restored
        .iter()
        .map(|path| Change {
            path: path.clone(),
            before: None,
            after: scanner.current(path),
        })
        .collect();
    log.append(&[Record::Restored { changes }])
}
