//! [`SqliteStore`]: the embedded default [`SessionStore`], one SQLite file.
//!
//! (The schema is documented on [`SqliteStore`].)

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use rusqlite::types::Type;
use rusqlite::{Connection, OptionalExtension, Row, Transaction, TransactionBehavior, params};

use super::columns::{
    NewSessionColumns, SessionRow, info_from_row, lenient_json, settings_columns, stats_json,
    storable_json, stored_message,
};
use super::error::sqlite_busy;
use super::{
    Durability, NewSession, SessionError, SessionFilter, SessionInfo, SessionSettings,
    SessionStats, SessionStore, StoredMessage, derive_title,
};
use crate::agent::{ParkedRun, PendingApproval, PendingStatus};
use crate::transcript::{Message, Role, now_ms};

/// Creates `dir` and its missing parents private to the user (0700 on Unix).
fn create_private_dirs(dir: &Path) -> std::io::Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates the database file private to the user (0600 on Unix) if it does not exist yet;
/// SQLite gives its `-wal` and `-shm` files the same permissions.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path).map(drop)
}

/// SQLite's `synchronous` setting for `durability`.
fn synchronous_pragma(durability: Durability) -> &'static str {
    match durability {
        Durability::ProcessCrash => "NORMAL",
        Durability::PowerLoss => "FULL",
    }
}

/// SQLite's `synchronous` setting while the schema is created or migrated. A file created
/// by this open holds no data yet: its schema is committed without the two syncs a first
/// commit costs (the WAL header and the WAL's directory entry), which would otherwise delay
/// every first start. Nothing is weakened: the WAL (header included) and its directory are
/// synced by the first later commit that syncs or by the first checkpoint, before any data
/// depends on them, and a power loss before that leaves an empty file that the next open
/// migrates again. Any other file is migrated with its durability's setting.
fn setup_synchronous(fresh: bool, durability: Durability) -> &'static str {
    if fresh {
        "OFF"
    } else {
        synchronous_pragma(durability)
    }
}

/// How to open a [`SqliteStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SqliteOptions {
    /// What an append survives. Default [`Durability::ProcessCrash`].
    pub durability: Durability,
    /// How long a writer waits for another connection's write lock before failing with a
    /// busy error. Default 5 s.
    pub busy_timeout: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            durability: Durability::default(),
            busy_timeout: Duration::from_secs(5),
        }
    }
}

impl SqliteOptions {
    crate::setters! {
        /// Sets [`durability`](Self::durability).
        pub fn durability(durability: Durability) => durability = durability;
        /// Sets [`busy_timeout`](Self::busy_timeout).
        pub fn busy_timeout(timeout: Duration) => busy_timeout = timeout;
    }
}

/// The embedded session store: one SQLite file.
///
/// One connection per `SqliteStore`, behind a mutex: share the store (`Arc`) within a process;
/// several processes may open the same file at once.
///
/// # Schema (version 4, kept in `PRAGMA user_version`)
///
/// Version 1 is the two tables below; version 2 adds the pending-approval tables
/// (`pending_approvals`, `parked_queues`; see [`load_parked`](super::load_parked)); version 3
/// adds the session's settings and running totals (`workspace`, `settings`, `stats`); version 4
/// adds the link of a sub-agent's child session to its parent (the `parent_…` columns).
/// Opening an older file migrates it in place, in one transaction (version 3 computes the
/// totals of the sessions already stored; their settings stay empty; version 4 leaves every
/// existing session top-level).
///
/// The settings are a JSON object ([`SessionSettings`]'s serde shape) except the workspace,
/// which has its own indexed column: `--continue` looks sessions up by workspace, and new
/// settings fields then need no migration. The totals are a JSON object ([`SessionStats`]),
/// updated by each append from the message appended ([`SessionStats::add`]), so listing sessions
/// never reads their messages.
///
/// ```sql
/// CREATE TABLE sessions (
///     id            TEXT PRIMARY KEY NOT NULL,
///     title         TEXT,              -- NULL until set or derived from the first user prompt
///     model         TEXT,
///     created_ms    INTEGER NOT NULL,
///     updated_ms    INTEGER NOT NULL,
///     touched       INTEGER NOT NULL,  -- global change counter: "most recently updated" order
///     last_seq      INTEGER NOT NULL DEFAULT 0,
///     message_count INTEGER NOT NULL DEFAULT 0,
///     forked_from   TEXT,
///     forked_at_seq INTEGER,
///     workspace     TEXT,              -- canonical path; NULL when not recorded
///     settings      TEXT,              -- JSON SessionSettings without the workspace
///     stats         TEXT NOT NULL DEFAULT '{}', -- JSON SessionStats
///     parent_id     TEXT,              -- the parent session of a sub-agent's run, else NULL
///     parent_call   TEXT,              -- the parent's call that ran it
///     parent_agent  TEXT               -- the sub-agent's name
/// );
/// CREATE INDEX sessions_by_touched ON sessions (touched);
/// CREATE INDEX sessions_by_workspace ON sessions (workspace, touched);
/// CREATE INDEX sessions_by_parent ON sessions (parent_id, touched);
/// CREATE TABLE messages (
///     session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
///     seq        INTEGER NOT NULL,     -- 1, 2, 3, … per session
///     role       TEXT NOT NULL,        -- "user", "assistant", "tool_result", "custom"
///     created_ms INTEGER NOT NULL,     -- when it was appended
///     json       TEXT NOT NULL,        -- serde_json::to_string(&Message)
///     PRIMARY KEY (session_id, seq)
/// );
/// ```
///
/// Every connection runs in WAL mode with a busy timeout and `foreign_keys=ON`. An append is
/// one `BEGIN IMMEDIATE` transaction that takes the writer lock first, bumps
/// `sessions.last_seq` (`UPDATE … RETURNING`) and inserts the row, so writers in other processes
/// wait their turn instead of failing, and sequence numbers never collide. Readers never block
/// writers (WAL).
///
/// ```
/// use agentloop::session::{NewSession, SessionStore, SqliteStore};
/// use agentloop::transcript::Message;
///
/// # fn main() -> Result<(), agentloop::session::SessionError> {
/// let store = SqliteStore::open_in_memory()?;
/// let session = store.create(NewSession::new())?;
/// assert_eq!(store.append(&session.id, &Message::user("hi"))?, 1);
/// assert_eq!(store.append(&session.id, &Message::user("again"))?, 2);
/// assert_eq!(store.load(&session.id)?.len(), 2);
/// # Ok(()) }
/// ```
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: Option<PathBuf>,
    options: SqliteOptions,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i64 = 4;

/// The schema of version 1, which a new file starts from; each later version is a migration on
/// top of it (so an old file and a new one end up alike).
pub(crate) const SCHEMA: &str = "
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    title         TEXT,
    model         TEXT,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    touched       INTEGER NOT NULL,
    last_seq      INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    forked_from   TEXT,
    forked_at_seq INTEGER
);
CREATE INDEX sessions_by_touched ON sessions (touched);
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
";

const SESSION_COLUMNS: &str = "id, title, model, created_ms, updated_ms, message_count, \
                               last_seq, forked_from, forked_at_seq, workspace, settings, stats, \
                               parent_id, parent_call, parent_agent";

/// Version 4: the link of a sub-agent's child session to its parent session and call.
fn migrate_v4(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE sessions ADD COLUMN parent_id TEXT;
         ALTER TABLE sessions ADD COLUMN parent_call TEXT;
         ALTER TABLE sessions ADD COLUMN parent_agent TEXT;
         CREATE INDEX sessions_by_parent ON sessions (parent_id, touched);",
    )
}

/// Version 3: the session's settings and running totals. The totals of the sessions already
/// stored are computed from their messages (a message that no longer parses is not counted).
fn migrate_v3(tx: &Transaction<'_>) -> rusqlite::Result<()> {
    tx.execute_batch(
        "ALTER TABLE sessions ADD COLUMN workspace TEXT;
         ALTER TABLE sessions ADD COLUMN settings TEXT;
         ALTER TABLE sessions ADD COLUMN stats TEXT NOT NULL DEFAULT '{}';
         CREATE INDEX sessions_by_workspace ON sessions (workspace, touched);",
    )?;
    let ids: Vec<String> = tx
        .prepare("SELECT id FROM sessions")?
        .query_map([], |row| row.get(0))?
        .collect::<Result<_, _>>()?;
    for id in ids {
        let mut stats = SessionStats::default();
        {
            let mut stmt = tx.prepare_cached(
                "SELECT json FROM messages WHERE session_id = ?1 AND role = 'assistant' \
                 ORDER BY seq",
            )?;
            let mut rows = stmt.query([&id])?;
            while let Some(row) = rows.next()? {
                let json: String = row.get(0)?;
                if let Ok(message) = serde_json::from_str::<Message>(&json) {
                    stats.add(&message);
                }
            }
        }
        tx.execute(
            "UPDATE sessions SET stats = ?2 WHERE id = ?1",
            params![
                id,
                stats_json(&stats)
                    .map_err(|e| rusqlite::Error::ToSqlConversionFailure(Box::new(e)))?
            ],
        )?;
    }
    Ok(())
}

/// The next value of the global change counter (inside a write transaction).
const NEXT_TOUCH: &str = "(SELECT IFNULL(MAX(touched), 0) + 1 FROM sessions)";

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn session_from_row(row: &Row<'_>) -> rusqlite::Result<SessionInfo> {
    info_from_row(row)
}

impl SessionRow for Row<'_> {
    type Error = rusqlite::Error;
    fn text(&self, column: usize) -> rusqlite::Result<Option<String>> {
        self.get(column)
    }
    fn number(&self, column: usize) -> rusqlite::Result<Option<i64>> {
        self.get(column)
    }
}

/// The role's name in the transcript's JSON (`"user"`, `"tool_result"`, …).
fn role_name(role: Role) -> String {
    match serde_json::to_value(role) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{role:?}"),
    }
}

fn session_info(tx: &Connection, id: &str) -> Result<SessionInfo, SessionError> {
    tx.prepare_cached(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?1"
    ))?
    .query_row([id], session_from_row)
    .optional()?
    .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })
}

/// Appends one message inside a write transaction; returns its sequence number.
fn append_in(tx: &Transaction<'_>, id: &str, message: &Message) -> Result<u64, SessionError> {
    let json = storable_json(message)?;
    let now = to_i64(now_ms());
    let model = match message.role {
        Role::Assistant => message.model.as_deref(),
        _ => None,
    };
    let title = match message.role {
        Role::User => derive_title(message),
        _ => None,
    };
    let row: Option<(i64, Option<String>)> = tx
        .prepare_cached(&format!(
            "UPDATE sessions SET last_seq = last_seq + 1, message_count = message_count + 1, \
             updated_ms = ?2, touched = {NEXT_TOUCH}, model = COALESCE(?3, model), \
             title = COALESCE(title, ?4) WHERE id = ?1 RETURNING last_seq, stats"
        ))?
        .query_row(params![id, now, model, title], |row| {
            Ok((row.get(0)?, row.get(1)?))
        })
        .optional()?;
    let (seq, stats) = row.ok_or_else(|| SessionError::NotFound { id: id.to_owned() })?;
    let before: SessionStats = lenient_json(stats);
    let mut after = before;
    after.add(message);
    if after != before {
        tx.prepare_cached("UPDATE sessions SET stats = ?2 WHERE id = ?1")?
            .execute(params![id, stats_json(&after)?])?;
    }
    tx.prepare_cached(
        "INSERT INTO messages (session_id, seq, role, created_ms, json) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![id, seq, role_name(message.role), now, json])?;
    Ok(to_u64(seq))
}

fn check_id(id: &str) -> Result<(), SessionError> {
    if id.trim().is_empty() {
        return Err(SessionError::Invalid {
            what: "id",
            reason: "a session id must not be empty".into(),
        });
    }
    Ok(())
}

fn clean_title(title: &str) -> Result<String, SessionError> {
    super::columns::clean_title(title).map(str::to_owned)
}

/// Retries `f` while SQLite reports the database busy, for up to `timeout`. Only for opening:
/// switching to WAL and creating the schema can report "busy" without SQLite's busy handler
/// when several processes open a new file at the same moment.
fn retry_busy<T>(
    timeout: Duration,
    mut f: impl FnMut() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Err(e) if sqlite_busy(&e) && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

impl SqliteStore {
    /// Opens (creating if needed, with its parent directories) the database file at `path`
    /// with the default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, SessionError> {
        SqliteStore::open_with(path, SqliteOptions::default())
    }

    /// Opens (creating if needed, with its parent directories) the database file at `path`.
    ///
    /// What it creates is private to the user: directories 0700, the file 0600 (on Unix;
    /// existing files and directories keep their permissions). A file it creates gets its
    /// schema without waiting for the disk (it holds no data yet); the first commit that
    /// syncs, or the first checkpoint, makes the file durable before any data depends on it.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self, SessionError> {
        let path = path.as_ref();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            create_private_dirs(parent)?;
        }
        let fresh = !path.exists();
        if fresh {
            create_private_file(path)?;
        }
        let conn = Connection::open(path)?;
        SqliteStore::setup(conn, Some(path.to_owned()), options, fresh)
    }

    /// A private in-memory database (for tests and examples; nothing is durable).
    pub fn open_in_memory() -> Result<Self, SessionError> {
        SqliteStore::setup(
            Connection::open_in_memory()?,
            None,
            SqliteOptions::default(),
            false,
        )
    }

    /// Sets the connection up and brings the schema up to date. `fresh`: the file was created
    /// just now and holds nothing, so its schema is written without syncing (see
    /// [`setup_synchronous`]).
    fn setup(
        mut conn: Connection,
        path: Option<PathBuf>,
        options: SqliteOptions,
        fresh: bool,
    ) -> Result<Self, SessionError> {
        conn.busy_timeout(options.busy_timeout)?;
        retry_busy(options.busy_timeout, || {
            conn.query_row("PRAGMA journal_mode = WAL", [], |row| {
                row.get::<_, String>(0)
            })
        })?;
        conn.pragma_update(
            None,
            "synchronous",
            setup_synchronous(fresh, options.durability),
        )?;
        conn.pragma_update(None, "foreign_keys", true)?;
        let version = retry_busy(options.busy_timeout, || {
            let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
            let version: i64 = tx.query_row("PRAGMA user_version", [], |row| row.get(0))?;
            if version == 0 {
                tx.execute_batch(SCHEMA)?;
            }
            if version < 2 {
                // Version 2 added the pending-approval tables (an existing file is migrated).
                super::approvals::migrate(&tx)?;
            }
            if version < 3 {
                migrate_v3(&tx)?;
            }
            if version < 4 {
                migrate_v4(&tx)?;
            }
            if version < SCHEMA_VERSION {
                tx.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            tx.commit()?;
            Ok(version)
        })?;
        if fresh {
            conn.pragma_update(None, "synchronous", synchronous_pragma(options.durability))?;
        }
        if version > SCHEMA_VERSION {
            return Err(SessionError::SchemaTooNew {
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            path,
            options,
        })
    }

    /// The database file (`None` for an in-memory store).
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The options it was opened with.
    pub fn options(&self) -> &SqliteOptions {
        &self.options
    }

    /// Takes the writer lock of session `id`, waiting up to `wait` while another process holds
    /// it, then failing with [`SessionError::InUse`] naming that process. Hold the returned
    /// [`SessionLock`](super::SessionLock) for as long as you append to the session (load its
    /// context *after* taking the lock). A process that dies releases its locks, however it
    /// dies. In-memory stores get a lock that excludes nothing. The session need not exist yet.
    pub fn lock_session(
        &self,
        id: &str,
        wait: Duration,
    ) -> Result<super::SessionLock, SessionError> {
        match &self.path {
            Some(path) => super::lock::acquire(path, id, wait),
            None => Ok(super::SessionLock::none()),
        }
    }

    /// The connection. A panic while it was held (it cannot leave a transaction open: an
    /// unfinished `Transaction` rolls back when dropped) does not make the store unusable.
    fn conn(&self) -> MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The messages of session `id` after sequence number `after`.
    fn read_entries(&self, id: &str, after: u64) -> Result<Vec<StoredMessage>, SessionError> {
        let mut conn = self.conn();
        // One read transaction: the existence check and the rows come from the same snapshot.
        let tx = conn.transaction()?;
        let info = session_info(&tx, id)?;
        let expected = info.last_seq.saturating_sub(after).min(info.message_count);
        let mut out = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
        {
            let mut stmt = tx.prepare_cached(
                "SELECT seq, created_ms, json FROM messages WHERE session_id = ?1 AND seq > ?2 \
                 ORDER BY seq",
            )?;
            let mut rows = stmt.query(params![id, to_i64(after)])?;
            while let Some(row) = rows.next()? {
                let seq = to_u64(row.get(0)?);
                let created_ms = to_u64(row.get(1)?);
                let json = row.get_ref(2)?.as_str().map_err(|e| {
                    rusqlite::Error::FromSqlConversionFailure(2, Type::Text, e.into())
                })?;
                out.push(stored_message(id, seq, created_ms, json)?);
            }
        }
        tx.finish()?;
        Ok(out)
    }

    fn write<T>(
        &self,
        f: impl FnOnce(&Transaction<'_>) -> Result<T, SessionError>,
    ) -> Result<T, SessionError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }
}

impl SessionStore for SqliteStore {
    fn create_with(
        &self,
        new: NewSession,
        messages: &[Message],
    ) -> Result<SessionInfo, SessionError> {
        let NewSessionColumns {
            id,
            title,
            model,
            workspace,
            settings,
            parent,
        } = NewSessionColumns::of(new, check_id)?;
        self.write(|tx| {
            if tx
                .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
                .exists([&id])?
            {
                return Err(SessionError::AlreadyExists { id: id.clone() });
            }
            let now = to_i64(now_ms());
            tx.execute(
                &format!(
                    "INSERT INTO sessions (id, title, model, created_ms, updated_ms, touched, \
                     workspace, settings, parent_id, parent_call, parent_agent) \
                     VALUES (?1, ?2, ?3, ?4, ?4, {NEXT_TOUCH}, ?5, ?6, ?7, ?8, ?9)"
                ),
                params![
                    id,
                    title,
                    model,
                    now,
                    workspace,
                    settings,
                    parent.as_ref().map(|p| &p.session_id),
                    parent.as_ref().map(|p| &p.call_id),
                    parent.as_ref().map(|p| &p.agent),
                ],
            )?;
            for message in messages {
                append_in(tx, &id, message)?;
            }
            session_info(tx, &id)
        })
    }

    fn info(&self, id: &str) -> Result<SessionInfo, SessionError> {
        session_info(&self.conn(), id)
    }

    fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY touched DESC"
        ))?;
        let rows = stmt.query_map([], session_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn set_settings(&self, id: &str, settings: &SessionSettings) -> Result<(), SessionError> {
        let (workspace, settings) = settings_columns(settings)?;
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE sessions SET workspace = ?2, settings = ?3 WHERE id = ?1",
                params![id, workspace, settings],
            )?;
            if changed == 0 {
                return Err(SessionError::NotFound { id: id.to_owned() });
            }
            Ok(())
        })
    }

    fn list_where(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>, SessionError> {
        let mut sql = format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE 1");
        let mut args: Vec<String> = Vec::new();
        if let Some(workspace) = &filter.workspace {
            args.push(workspace.clone());
            sql.push_str(&format!(" AND workspace = ?{}", args.len()));
        }
        if let Some(prefix) = &filter.id_prefix {
            if prefix.is_empty() {
                return Ok(Vec::new());
            }
            args.push(prefix.clone());
            let n = args.len();
            sql.push_str(&format!(" AND substr(id, 1, length(?{n})) = ?{n}"));
        }
        if filter.with_reply {
            sql.push_str(" AND json_extract(stats, '$.turns') > 0");
        }
        if filter.top_level {
            sql.push_str(" AND parent_id IS NULL");
        }
        if let Some(parent) = &filter.parent {
            args.push(parent.clone());
            sql.push_str(&format!(" AND parent_id = ?{}", args.len()));
        }
        sql.push_str(" ORDER BY touched DESC");
        if let Some(limit) = filter.limit {
            sql.push_str(&format!(" LIMIT {}", to_i64(limit as u64)));
        }
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(&sql)?;
        let rows = stmt.query_map(rusqlite::params_from_iter(args.iter()), session_from_row)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    fn last(&self) -> Result<Option<SessionInfo>, SessionError> {
        let conn = self.conn();
        Ok(conn
            .prepare_cached(&format!(
                "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_id IS NULL \
                 ORDER BY touched DESC LIMIT 1"
            ))?
            .query_row([], session_from_row)
            .optional()?)
    }

    fn append_all(&self, id: &str, messages: &[Message]) -> Result<Vec<u64>, SessionError> {
        self.write(|tx| {
            if messages.is_empty() {
                session_info(tx, id)?;
            }
            messages.iter().map(|m| append_in(tx, id, m)).collect()
        })
    }

    fn append(&self, id: &str, message: &Message) -> Result<u64, SessionError> {
        self.write(|tx| append_in(tx, id, message))
    }

    fn entries(&self, id: &str) -> Result<Vec<StoredMessage>, SessionError> {
        self.read_entries(id, 0)
    }

    fn set_title(&self, id: &str, title: &str) -> Result<(), SessionError> {
        let title = clean_title(title)?;
        self.write(|tx| {
            let changed = tx.execute(
                &format!(
                    "UPDATE sessions SET title = ?2, updated_ms = ?3, touched = {NEXT_TOUCH} \
                     WHERE id = ?1"
                ),
                params![id, title, to_i64(now_ms())],
            )?;
            if changed == 0 {
                return Err(SessionError::NotFound { id: id.to_owned() });
            }
            Ok(())
        })
    }

    fn delete(&self, id: &str) -> Result<(), SessionError> {
        self.write(|tx| {
            tx.execute("DELETE FROM messages WHERE session_id = ?1", [id])?;
            if tx.execute("DELETE FROM sessions WHERE id = ?1", [id])? == 0 {
                return Err(SessionError::NotFound { id: id.to_owned() });
            }
            Ok(())
        })
    }

    fn fork(&self, id: &str, seq: u64) -> Result<SessionInfo, SessionError> {
        let new_id = uuid::Uuid::new_v4().to_string();
        self.write(|tx| {
            session_info(tx, id)?;
            let seq_i = to_i64(seq);
            if !tx
                .prepare_cached("SELECT 1 FROM messages WHERE session_id = ?1 AND seq = ?2")?
                .exists(params![id, seq_i])?
            {
                return Err(SessionError::SeqNotFound {
                    id: id.to_owned(),
                    seq,
                });
            }
            let now = to_i64(now_ms());
            let mut stats = SessionStats::default();
            {
                let mut stmt = tx.prepare_cached(
                    "SELECT seq, json FROM messages WHERE session_id = ?1 AND seq <= ?2 \
                     AND role = 'assistant' ORDER BY seq",
                )?;
                let mut rows = stmt.query(params![id, seq_i])?;
                while let Some(row) = rows.next()? {
                    let json: String = row.get(1)?;
                    let message: Message =
                        serde_json::from_str(&json).map_err(|source| SessionError::Corrupt {
                            id: id.to_owned(),
                            seq: to_u64(row.get(0).unwrap_or(0)),
                            source,
                        })?;
                    stats.add(&message);
                }
            }
            tx.execute(
                &format!(
                    "INSERT INTO sessions (id, title, model, created_ms, updated_ms, touched, \
                     last_seq, message_count, forked_from, forked_at_seq, workspace, settings, \
                     stats) \
                     SELECT ?1, title, model, ?3, ?3, {NEXT_TOUCH}, ?4, \
                     (SELECT COUNT(*) FROM messages WHERE session_id = ?2 AND seq <= ?4), ?2, ?4, \
                     workspace, settings, ?5 \
                     FROM sessions WHERE id = ?2"
                ),
                params![new_id, id, now, seq_i, stats_json(&stats)?],
            )?;
            tx.execute(
                "INSERT INTO messages (session_id, seq, role, created_ms, json) \
                 SELECT ?1, seq, role, created_ms, json FROM messages \
                 WHERE session_id = ?2 AND seq <= ?3 ORDER BY seq",
                params![new_id, id, seq_i],
            )?;
            session_info(tx, &new_id)
        })
    }

    fn save_parked(&self, id: &str, parked: &ParkedRun) -> Result<(), SessionError> {
        self.write(|tx| super::approvals::save(tx, id, parked))
    }

    fn parked(&self, id: &str) -> Result<Option<ParkedRun>, SessionError> {
        super::approvals::load(&self.conn(), id)
    }

    fn decide(&self, id: &str, call_id: &str, status: &PendingStatus) -> Result<(), SessionError> {
        self.write(|tx| super::approvals::decide(tx, id, call_id, status))
    }

    fn resolve_pending(&self, id: &str, call_id: &str) -> Result<(), SessionError> {
        self.write(|tx| super::approvals::resolve(tx, id, call_id))
    }

    fn clear_parked(&self, id: &str) -> Result<(), SessionError> {
        self.write(|tx| super::approvals::clear(tx, id))
    }

    fn awaiting_approval(&self) -> Result<Vec<(String, Vec<PendingApproval>)>, SessionError> {
        super::approvals::awaiting(&self.conn())
    }

    fn entries_after(&self, id: &str, after: u64) -> Result<Vec<StoredMessage>, SessionError> {
        self.read_entries(id, after)
    }

    fn lock_session(&self, id: &str, wait: Duration) -> Result<super::SessionLock, SessionError> {
        SqliteStore::lock_session(self, id, wait)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The connection's `synchronous` level (0 OFF, 1 NORMAL, 2 FULL).
    fn synchronous(store: &SqliteStore) -> i64 {
        store
            .conn()
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .unwrap()
    }

    #[test]
    fn a_file_created_by_the_open_gets_its_durability_after_the_unsynced_schema() {
        for (durability, level) in [(Durability::ProcessCrash, 1), (Durability::PowerLoss, 2)] {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("new/sessions.db");
            let options = SqliteOptions::default().durability(durability);
            let store = SqliteStore::open_with(&path, options.clone()).unwrap();
            assert_eq!(synchronous(&store), level, "{durability:?}");
            let id = store.create(NewSession::new()).unwrap().id;
            drop(store);
            // Reopened (an existing file): the schema and the session are there.
            let store = SqliteStore::open_with(&path, options).unwrap();
            assert_eq!(synchronous(&store), level, "{durability:?}");
            assert!(store.info(&id).is_ok());
            let version: i64 = store
                .conn()
                .query_row("PRAGMA user_version", [], |row| row.get(0))
                .unwrap();
            assert_eq!(version, SCHEMA_VERSION);
        }
    }
}
