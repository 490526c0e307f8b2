//! What a stat walk of a workspace is given and what it finds: shared by the Unix walk (over
//! directory handles) and the portable one, which differ only in how they walk.

use std::path::Path;
use std::sync::Arc;

use super::ignores::{IgnoreCache, Rules};
use super::watch::Watcher;
use super::{CheckpointOptions, Entry};

/// One path of the walk: its stat as an [`Entry`] (kind file, directory or symbolic link with
/// its target; no hash yet).
#[derive(Debug)]
pub(crate) struct Found {
    /// Relative to the workspace root, `/`-separated.
    pub rel: String,
    /// Its stat; `cached` when the caller's lookup replaced it with a trusted cached entry.
    pub entry: Entry,
    /// Whether the lookup gave the entry (nothing to read).
    pub cached: bool,
    /// A regular file with other hard links: a write through another of its names is not
    /// reported by the watch of this one's directory.
    pub shared: bool,
}

/// A cached entry for a path and its fresh stat, when the cache can be trusted (run on the
/// walk's threads).
pub(crate) type Lookup<'a> = dyn Fn(&str, &Entry) -> Option<Entry> + Sync + 'a;

/// One walk of one workspace.
pub(crate) struct Walk<'a> {
    pub root: &'a Path,
    /// The store directory relative to the root, when it lies inside the workspace.
    pub skip: Option<String>,
    pub limits: &'a CheckpointOptions,
    #[cfg_attr(not(unix), allow(dead_code))]
    pub ignores: &'a IgnoreCache,
    pub lookup: &'a Lookup<'a>,
    /// Where to start: a directory below the root and the rules in force in its parent
    /// (`None`: the root, with the rules of the directories above it).
    pub start: Option<(&'a str, Arc<Rules>)>,
    /// Told of every directory listed, to watch it for changes.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub watch: Option<&'a Watcher>,
}

/// The `ignore` crate's walker with the rules the snapshot walk follows: `.gitignore` files and
/// the repository's exclude file respected, nothing else (hidden entries are kept), links not
/// followed, `.git` and `skip` (the store) left out. The portable walk is this walker; the Unix
/// walk is checked against it.
#[cfg(any(not(unix), test))]
pub(crate) fn git_rules_walk(root: &Path, skip: Option<std::path::PathBuf>) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .ignore(false)
        .git_global(false)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .filter_entry(move |e| e.file_name() != ".git" && Some(e.path()) != skip.as_deref())
        .build()
}
