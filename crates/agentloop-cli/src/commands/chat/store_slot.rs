//! The chat's session store, opened while the first prompt is drawn.
//!
//! A new conversation reads nothing from the store before its first prompt is sent (its
//! session is recorded with that prompt), so opening the database need not delay the prompt.
//! On the first start ever it is created and migrated, which SQLite syncs several times (a
//! new file goes through the rollback journal before it is in WAL mode): tens of milliseconds
//! on a busy disk, more than the rest of the start together. The open runs on a thread of
//! its own and the first use waits for it; a chat that resumes a session opens the store at
//! once (it reads the session before it draws anything).
//!
//! An open that failed fails every use with the same message, as the open at start did.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::thread::JoinHandle;

use agentloop::session::SessionStore;

use crate::commands::sessions::open_store;
use crate::error::Failure;

type Opened = Result<Arc<dyn SessionStore>, Failure>;

/// The store, or the thread opening it (see the module docs).
pub(super) struct StoreSlot {
    store: OnceLock<Result<Arc<dyn SessionStore>, (u8, String)>>,
    opening: Mutex<Option<JoinHandle<Opened>>>,
}

impl StoreSlot {
    /// A store opened already.
    pub(super) fn ready(store: Arc<dyn SessionStore>) -> Self {
        StoreSlot {
            store: OnceLock::from(Ok(store)),
            opening: Mutex::new(None),
        }
    }

    /// Starts opening the store `db` names (the default database without one) on a thread.
    pub(super) fn opening(db: Option<&str>) -> Self {
        let owned = db.map(str::to_owned);
        let handle = std::thread::Builder::new()
            .name("session-store".to_owned())
            .spawn(move || open_store(owned.as_deref()));
        match handle {
            Ok(handle) => StoreSlot {
                store: OnceLock::new(),
                opening: Mutex::new(Some(handle)),
            },
            // No thread to be had: open it here, as before.
            Err(_) => StoreSlot {
                store: OnceLock::from(open_store(db).map_err(|f| (f.code, f.message))),
                opening: Mutex::new(None),
            },
        }
    }

    /// The store, waiting for its opening if that has not finished.
    pub(super) fn get(&self) -> Result<&Arc<dyn SessionStore>, Failure> {
        let opened = self.store.get_or_init(|| {
            let handle = self
                .opening
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take();
            let opened = match handle {
                Some(handle) => handle.join().unwrap_or_else(|_| {
                    Err(Failure::new(
                        "cannot open the session database: its opening thread panicked",
                    ))
                }),
                None => Err(Failure::new("cannot open the session database")),
            };
            opened.map_err(|f| (f.code, f.message))
        });
        opened.as_ref().map_err(|(code, message)| Failure {
            code: *code,
            message: message.clone(),
        })
    }
}

impl Drop for StoreSlot {
    /// A chat left before its first prompt still lets the opening finish: a database being
    /// created is never left to the process's exit half-way.
    fn drop(&mut self) {
        let handle = self
            .opening
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_store_opened_on_its_thread_is_the_one_every_use_gets() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        let slot = StoreSlot::opening(db.to_str());
        let first = slot.get().unwrap().clone();
        assert!(Arc::ptr_eq(&first, slot.get().unwrap()));
        assert!(first.list().unwrap().is_empty());
        assert!(db.exists(), "the database is created by the opening");
    }

    #[test]
    fn a_failed_opening_fails_every_use_with_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("not-a-directory");
        std::fs::write(&file, "x").unwrap();
        let db = file.join("sessions.db");
        let slot = StoreSlot::opening(db.to_str());
        let first = slot.get().err().unwrap();
        let second = slot.get().err().unwrap();
        assert!(first.message.contains("cannot open the session database"));
        assert_eq!(first.message, second.message);
        assert_eq!(first.code, second.code);
    }

    #[test]
    fn a_slot_dropped_unused_waits_for_the_database_it_creates() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("sessions.db");
        drop(StoreSlot::opening(db.to_str()));
        let store = open_store(db.to_str()).unwrap();
        assert!(store.list().unwrap().is_empty());
    }
}
