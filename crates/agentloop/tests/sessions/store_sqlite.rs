//! The session store conformance suite (`store_conformance/`) on [`SqliteStore`]: each test
//! gets a new database file in a temporary directory.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::store_conformance;

use std::any::Any;
use std::sync::Arc;

use agentloop::session::{SessionError, SessionStore, SqliteStore};
use store_conformance::{Backend, TempDir, conformance_suite};

struct Sqlite;

impl Backend for Sqlite {
    fn fresh_spec() -> Option<(String, Box<dyn Any>)> {
        let dir = TempDir::new("sqlite");
        let spec = dir.0.join("sessions.db").display().to_string();
        Some((spec, Box::new(dir)))
    }

    fn open(spec: &str) -> Result<Arc<dyn SessionStore>, SessionError> {
        Ok(Arc::new(SqliteStore::open(spec)?))
    }
}

conformance_suite!(Sqlite);
