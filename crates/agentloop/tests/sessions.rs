//! SQLite-only behaviour of the session store: the file's journal mode and durability setting,
//! refusing a database from a newer version, and reporting a damaged row. What every store
//! owes (create, append, fork, export, approvals, locks, concurrent writers, follow…) is the
//! shared conformance suite, run on SQLite by `store_sqlite.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentloop::session::{
    Durability, NewSession, SessionError, SessionStore, SqliteOptions, SqliteStore,
};
use agentloop::transcript::Message;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "agentloop-sessions-{tag}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("sessions.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(dir.db()).unwrap()
}

#[test]
fn the_database_uses_wal_and_the_chosen_synchronous_level() {
    let dir = TempDir::new("pragmas");
    for durability in [Durability::ProcessCrash, Durability::PowerLoss] {
        let store = SqliteStore::open_with(
            dir.db(),
            SqliteOptions::default()
                .durability(durability)
                .busy_timeout(Duration::from_secs(2)),
        )
        .unwrap();
        let s = store.create(NewSession::new()).unwrap();
        store.append(&s.id, &Message::user("x")).unwrap();
        // `synchronous` is per connection (not observable from outside); the journal mode is
        // the file's.
        assert_eq!(store.options().durability, durability);
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

#[test]
fn a_database_from_a_newer_version_is_refused() {
    let dir = TempDir::new("schema");
    drop(open(&dir));
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    assert!(matches!(
        SqliteStore::open(dir.db()),
        Err(SessionError::SchemaTooNew { found: 99, .. })
    ));
}

#[test]
fn a_damaged_message_is_reported_not_skipped() {
    let dir = TempDir::new("corrupt");
    let store = open(&dir);
    let s = store.create(NewSession::new()).unwrap();
    store.append(&s.id, &Message::user("fine")).unwrap();
    store.append(&s.id, &Message::user("damaged")).unwrap();
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute("UPDATE messages SET json = '{not json' WHERE seq = 2", [])
        .unwrap();
    assert!(matches!(
        store.load(&s.id),
        Err(SessionError::Corrupt { seq: 2, .. })
    ));
}

#[test]
fn an_in_memory_store_has_locks_that_exclude_nothing() {
    let store = SqliteStore::open_in_memory().unwrap();
    let _first = store.lock_session("s", Duration::ZERO).unwrap();
    let second = SessionStore::lock_session(&store, "s", Duration::ZERO).unwrap();
    assert!(second.path().is_none());
}
