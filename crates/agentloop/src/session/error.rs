//! [`SessionError`], the one error type of the session layer.

/// Why a session-store operation failed.
///
/// Operator-facing: these never reach the model. A failed append leaves the store unchanged
/// (each append is its own transaction).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// No session has this id.
    #[error("no session with id {id:?}")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// The session has no message with this sequence number.
    #[error("session {id:?} has no message with sequence number {seq}")]
    SeqNotFound {
        /// The session.
        id: String,
        /// The sequence number asked for.
        seq: u64,
    },
    /// A session with this id already exists (creating with a chosen id, or importing with
    /// `keep_id`).
    #[error("a session with id {id:?} already exists")]
    AlreadyExists {
        /// The id.
        id: String,
    },
    /// A title or id was empty.
    #[error("invalid {what}: {reason}")]
    Invalid {
        /// What was invalid (`"title"`, `"id"`).
        what: &'static str,
        /// Why.
        reason: String,
    },
    /// A stored message is not valid transcript JSON (the database was edited or damaged).
    #[error("session {id:?}, message {seq}: stored JSON is not a valid message: {source}")]
    Corrupt {
        /// The session.
        id: String,
        /// The message's sequence number.
        seq: u64,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A message could not be serialized.
    #[error("a message could not be serialized: {0}")]
    Serialize(#[source] serde_json::Error),
    /// A JSON Lines import failed at `line` (1-based); nothing was imported.
    #[error("import failed at line {line}: {reason}")]
    Import {
        /// The 1-based line number.
        line: usize,
        /// What was wrong with it.
        reason: String,
    },
    /// The database was written by a newer version of agentloop.
    #[error(
        "the session database has schema version {found}; this build understands up to {supported}"
    )]
    SchemaTooNew {
        /// The database's schema version (SQLite: `user_version`; PostgreSQL: the
        /// `schema_version` table).
        found: i64,
        /// The newest version this build reads.
        supported: i64,
    },
    /// The store does not implement this feature.
    #[error("this session store does not support {0}")]
    Unsupported(&'static str),
    /// SQLite failed (I/O error, the database stayed locked past the busy timeout, a full disk…).
    #[cfg(feature = "sqlite")]
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed (the server could not be reached, authentication, a lost connection, a
    /// query error, no pooled connection free in time). The message never contains a password.
    #[error("postgresql: {message}")]
    Postgres {
        /// What failed, with the underlying error's text.
        message: String,
        /// The underlying error (from the PostgreSQL client or its connection pool).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// Reading or writing an export failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// Another process is writing to the session (it holds the session's lock).
    #[error("session {id:?} is in use by {holder}; wait for it to finish or use another session")]
    InUse {
        /// The session.
        id: String,
        /// Who holds it: `process N` (or `another process` when its id is unknown).
        holder: String,
    },
}

impl SessionError {
    /// True for [`SessionError::NotFound`] and [`SessionError::SeqNotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(
            self,
            SessionError::NotFound { .. } | SessionError::SeqNotFound { .. }
        )
    }

    /// True when another connection held the database locked for longer than the busy timeout;
    /// retrying later may succeed.
    pub fn is_busy(&self) -> bool {
        #[cfg(feature = "sqlite")]
        if let SessionError::Sqlite(e) = self {
            return sqlite_busy(e);
        }
        false
    }
}

/// True when SQLite gave up waiting for a lock.
#[cfg(feature = "sqlite")]
pub(super) fn sqlite_busy(error: &rusqlite::Error) -> bool {
    use rusqlite::ErrorCode::{DatabaseBusy, DatabaseLocked};
    match error {
        rusqlite::Error::SqliteFailure(e, _) => matches!(e.code, DatabaseBusy | DatabaseLocked),
        _ => false,
    }
}
