//! The stat walk of a workspace where directory handles are not available (not Unix): the
//! `ignore` crate's walker with one path-based `symlink_metadata` per entry. Same contract as
//! the Unix walk: every path to record with its stat, `.gitignore` respected, `.git` and the
//! store skipped, limits checked before any file is read.

use std::path::Path;

use super::snapshot::stat_entry;
use super::{CheckpointError, Entry, EntryKind};

pub(crate) use super::walk_input::{Found, Walk};

impl Walk<'_> {
    /// Every path to record, checked against the limits.
    pub(crate) fn run(&self) -> Result<Vec<Found>, CheckpointError> {
        let skip = self.skip.as_ref().map(|rel| self.root.join(rel));
        // The walker applies the ignore files of the start directory's parents itself.
        let start = match &self.start {
            Some((rel, _)) => self.root.join(rel),
            None => self.root.to_path_buf(),
        };
        let walk = super::walk_input::git_rules_walk(&start, skip);
        let (mut out, mut bytes) = (Vec::new(), 0u64);
        for item in walk.flatten() {
            let Some(rel) = item.path().strip_prefix(self.root).ok().and_then(slashed) else {
                continue;
            };
            if item.path() == start {
                continue;
            }
            let Ok(meta) = std::fs::symlink_metadata(item.path()) else {
                continue;
            };
            let mut entry = stat_entry(&meta);
            if meta.is_symlink() {
                let Some(target) = std::fs::read_link(item.path())
                    .ok()
                    .and_then(|t| t.to_str().map(str::to_owned))
                else {
                    continue;
                };
                (entry.kind, entry.mode, entry.target) = (EntryKind::Symlink, 0, Some(target));
            } else if meta.is_dir() {
                (entry.kind, entry.size) = (EntryKind::Dir, 0);
            } else if !meta.is_file() {
                continue;
            } else if entry.size <= self.limits.max_file_size {
                bytes = bytes.saturating_add(entry.size);
            }
            if out.len() >= self.limits.max_entries {
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
            let hit = (entry.kind == EntryKind::File)
                .then(|| (self.lookup)(&rel, &entry))
                .flatten();
            let cached = hit.is_some();
            out.push(Found {
                rel,
                entry: hit.unwrap_or(entry),
                cached,
                shared: false,
            });
        }
        Ok(out)
    }
}

fn slashed(rel: &Path) -> Option<String> {
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}
