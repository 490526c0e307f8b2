//! [`SessionLock`]: one writer per session across processes.
//!
//! Two processes appending to one session at once interleave their transcripts (two runs'
//! tool calls and results mixed, which providers then reject). The lock is an exclusive
//! `flock` on a file next to the database (`<db>.locks/<session>.lock`), held for as long as
//! the [`SessionLock`] lives. The kernel releases it when its process ends in any way,
//! `SIGKILL` included, so a lock is never left stale by a dead owner. The file also holds the
//! owner's process id, for the "in use by process N" error. In-memory stores, and platforms
//! other than Unix, get a lock that excludes nothing. Other stores put their own lock in a
//! [`SessionLock`] (the PostgreSQL store: a session-level advisory lock held by a dedicated
//! connection).

use std::path::{Path, PathBuf};
#[cfg(feature = "sqlite")]
use std::time::{Duration, Instant};

#[cfg(feature = "sqlite")]
use super::SessionError;

/// Holds a session's writer lock until dropped (see
/// [`SessionStore::lock_session`](super::SessionStore::lock_session)).
///
/// For a [`SqliteStore`](super::SqliteStore) file: an exclusive `flock` on
/// `<db>.locks/<session>.lock`, released by the kernel when the owner exits in any way (so a
/// dead owner never leaves it stale); the file holds the owner's pid for the "in use by
/// process N" error. For the PostgreSQL store: a session-level advisory lock held by a
/// connection of its own, released when the lock is dropped or the owner's connection ends.
/// In-memory stores and non-Unix platforms get a lock that excludes nothing.
pub struct SessionLock {
    /// Held, never read: the `flock` lives as long as this open file.
    #[allow(dead_code)]
    file: Option<std::fs::File>,
    path: Option<PathBuf>,
    /// Held, never read: a lock kept by another store, released when this is dropped.
    #[allow(dead_code)]
    guard: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl std::fmt::Debug for SessionLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLock")
            .field("path", &self.path)
            .field("held", &(self.file.is_some() || self.guard.is_some()))
            .finish()
    }
}

impl SessionLock {
    /// A lock that excludes nothing (for stores without a file).
    pub(crate) fn none() -> Self {
        SessionLock {
            file: None,
            path: None,
            guard: None,
        }
    }

    /// A lock held by `guard` until it is dropped (another store's lock).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn held_by(guard: impl std::any::Any + Send + Sync) -> Self {
        SessionLock {
            file: None,
            path: None,
            guard: Some(Box::new(guard)),
        }
    }

    /// The lock file, if there is one.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// The lock file of session `id` of the database at `db`.
#[cfg(feature = "sqlite")]
fn lock_path(db: &Path, id: &str) -> PathBuf {
    let mut dir = db.as_os_str().to_owned();
    dir.push(".locks");
    // Hex keeps any id a valid file name; long ids are cut and told apart by a hash.
    let mut name: String = id.bytes().take(64).map(|b| format!("{b:02x}")).collect();
    if id.len() > 64 {
        let hash = id.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3)
        });
        name.push_str(&format!("-{hash:016x}"));
    }
    PathBuf::from(dir).join(format!("{name}.lock"))
}

/// Takes the writer lock of session `id` of the database at `db`, waiting up to `wait` for
/// another process to let go of it.
#[cfg(all(unix, feature = "sqlite"))]
pub(crate) fn acquire(db: &Path, id: &str, wait: Duration) -> Result<SessionLock, SessionError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};

    use rustix::fs::{FlockOperation, flock};

    let path = lock_path(db, id);
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
    }
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)?;
    let deadline = Instant::now() + wait;
    loop {
        match flock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => break,
            Err(e) if e == rustix::io::Errno::WOULDBLOCK || e == rustix::io::Errno::INTR => {
                if Instant::now() >= deadline {
                    let mut text = String::new();
                    let _ = file.read_to_string(&mut text);
                    let holder = match text.trim().parse::<u32>() {
                        Ok(pid) => format!("process {pid}"),
                        Err(_) => "another process".to_owned(),
                    };
                    return Err(SessionError::InUse {
                        id: id.to_owned(),
                        holder,
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => return Err(SessionError::Io(e.into())),
        }
    }
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    file.flush()?;
    Ok(SessionLock {
        file: Some(file),
        path: Some(path),
        guard: None,
    })
}

/// Without `flock`: a lock that excludes nothing.
#[cfg(all(not(unix), feature = "sqlite"))]
pub(crate) fn acquire(_db: &Path, _id: &str, _wait: Duration) -> Result<SessionLock, SessionError> {
    Ok(SessionLock::none())
}

#[cfg(all(test, unix, feature = "sqlite"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_owner_pid_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("s.db");
        let first = acquire(&db, "abc", Duration::ZERO).unwrap();
        let err = acquire(&db, "abc", Duration::from_millis(100)).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("in use by process {}", std::process::id())),
            "{text}"
        );
        // Other sessions are independent.
        let _other = acquire(&db, "abd", Duration::ZERO).unwrap();
        drop(first);
        acquire(&db, "abc", Duration::ZERO).unwrap();
        assert_ne!(
            lock_path(&db, &"x".repeat(300)),
            lock_path(&db, &"x".repeat(301))
        );
    }
}
