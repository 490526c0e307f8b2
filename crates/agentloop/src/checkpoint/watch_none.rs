//! Change notification where there is no inotify (not Linux): a watcher can never be made,
//! so every snapshot walks the whole tree. Same interface as the Linux watcher, for the walk.
// The walk that calls it is the Unix one; elsewhere nothing does.
#![cfg_attr(not(unix), allow(dead_code))]

use std::path::Path;
use std::sync::Arc;

use super::ignores::Rules;

/// A watch descriptor.
pub(crate) type Wd = i32;

#[derive(Debug)]
enum Never {}

/// A watcher that cannot exist.
#[derive(Debug)]
pub(crate) struct Watcher(Never);

impl Watcher {
    /// Always fails: change notification is not available here.
    pub(crate) fn new(_root: &Path, _cap: usize) -> std::io::Result<Self> {
        Err(std::io::Error::new(
            std::io::ErrorKind::Unsupported,
            "no change notification on this platform",
        ))
    }

    pub(crate) fn is_broken(&self) -> bool {
        match self.0 {}
    }

    pub(crate) fn add(&self, _rel: &str) -> Option<Wd> {
        match self.0 {}
    }

    pub(crate) fn listed(&self, _rel: &str, _wd: Option<Wd>, _rules: &Arc<Rules>, _git: bool) {
        match self.0 {}
    }

    pub(crate) fn set_shared(&self, _rel: &str, _shared: bool) -> bool {
        match self.0 {}
    }
}
