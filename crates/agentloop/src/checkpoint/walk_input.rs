//! What a stat walk of a workspace is given and what it finds: shared by the Unix walk (over
//! directory handles) and the portable one, which differ only in how they walk.

use std::path::Path;

use super::ignores::IgnoreCache;
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
}
