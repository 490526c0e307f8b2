//! The directories every checkpoint test works in, made once: a workspace, a directory beside
//! it (outside the workspace, for links and moves that cross its boundary) and a store, all
//! under one temporary root that is removed when the fixture is dropped; plus the scanner,
//! walk, recorder and recorded run most tests start from.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use super::snapshot::{Scanner, Snapshot};
use super::{Checkpoint, CheckpointOptions, CheckpointStore, Recorder};

/// A workspace, its neighbour and a store under one temporary root.
pub(super) struct Dirs {
    /// The temporary root (the parent of the other three); removed on drop.
    pub(super) tmp: tempfile::TempDir,
    /// The workspace, canonical (as the recorder and scanner report paths against it).
    pub(super) ws: PathBuf,
    /// An empty directory beside the workspace.
    pub(super) outside: PathBuf,
    /// The checkpoint store.
    pub(super) store: CheckpointStore,
}

/// A fresh fixture: an empty workspace, an empty neighbour and a new store.
pub(super) fn dirs() -> Dirs {
    let tmp = tempfile::tempdir().unwrap();
    let ws = tmp.path().join("ws");
    let outside = tmp.path().join("outside");
    std::fs::create_dir(&ws).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let ws = std::fs::canonicalize(ws).unwrap();
    let store = CheckpointStore::open(tmp.path().join("store")).unwrap();
    Dirs {
        tmp,
        ws,
        outside,
        store,
    }
}

impl Dirs {
    /// A scanner of the workspace into the store, with the default options.
    pub(super) fn scanner(&self) -> Scanner {
        Scanner::new(&self.ws, self.store.dir(), CheckpointOptions::default())
    }

    /// A full walk of the workspace as it is now (no earlier snapshot to trust).
    pub(super) fn walk(&self) -> Snapshot {
        self.scanner().scan(&Snapshot::default()).unwrap()
    }

    /// A recorder of the workspace for `session`, with the default options.
    pub(super) fn recorder(&self, session: &str) -> Recorder {
        self.store
            .recorder(&self.ws, session, CheckpointOptions::default())
            .unwrap()
    }

    /// Runs `calls` in order under a recorder of `session`, each as its own `shell` call (`c1`,
    /// `c2`, …), and seals the run; a recording error fails the test. Returns the session's
    /// checkpoints.
    pub(super) fn record<F: Fn(&Dirs)>(
        &self,
        session: &str,
        calls: impl IntoIterator<Item = F>,
    ) -> Vec<Checkpoint> {
        let recorder = self.recorder(session);
        for (i, call) in calls.into_iter().enumerate() {
            let id = format!("c{}", i + 1);
            recorder.begin(&id, "shell");
            call(self);
            recorder.finish(&id);
        }
        recorder.seal();
        let errors = recorder.take_errors();
        assert!(errors.is_empty(), "{errors:?}");
        self.store.list(session).unwrap()
    }
}

/// Writes `path`, creating its parent directories.
pub(super) fn write(path: &Path, bytes: impl AsRef<[u8]>) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(path, bytes).unwrap();
}
