//! [`PostgresStore`]: the [`SessionStore`] on a PostgreSQL server, for several machines (or
//! workers) sharing one set of sessions. Behind the `postgres` feature.
//!
//! It behaves exactly like [`SqliteStore`](super::SqliteStore) — the same conformance suite
//! runs against both — on `tokio-postgres` with a `deadpool` connection pool driven by a
//! runtime of the store's own ([`bridge`]).

mod approvals;
mod bridge;
mod listen;
mod lock;
mod schema;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::{NoTls, Row};

use self::bridge::Bridge;
use super::columns::{
    NewSessionColumns, SessionRow, info_from_row, lenient_json, settings_columns, stats_json,
    storable_json, stored_message,
};
use super::stats::Counted;
use super::{
    ChangeSignal, Durability, NewSession, SessionError, SessionFilter, SessionInfo, SessionLock,
    SessionSettings, SessionStats, SessionStore, StoredMessage, derive_title, redact,
};
use crate::agent::{ParkedRun, PendingApproval, PendingStatus};
use crate::transcript::{Message, Role, now_ms};

/// How to open a [`PostgresStore`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresOptions {
    /// The schema the tables live in, created if missing (lowercase ASCII letters, digits and
    /// `_`; it becomes the connections' `search_path`). `None` (default): the connection's
    /// `current_schema()`, normally `public`.
    pub schema: Option<String>,
    /// Most connections the pool opens (each store, and each held session lock or follower,
    /// adds one of its own). Default 4.
    pub pool_size: usize,
    /// What a successful append survives. Default [`Durability::PowerLoss`]: the server's
    /// `synchronous_commit` (normally `on`: the commit is flushed to the server's WAL before
    /// `append` returns). [`Durability::ProcessCrash`] sets `synchronous_commit = off` for the
    /// store's connections: a commit is acknowledged before the flush, so a crash of the
    /// *server* may lose the last ~0.6 s of appends (never corrupting anything), while the
    /// agent's process dying loses nothing.
    pub durability: Durability,
    /// How long connecting may take, and how long a call waits for a free pooled connection.
    /// Default 10 s.
    pub timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            schema: None,
            pool_size: 4,
            durability: Durability::PowerLoss,
            timeout: Duration::from_secs(10),
        }
    }
}

impl PostgresOptions {
    crate::setters! {
        /// Sets [`schema`](Self::schema).
        pub fn schema(schema: impl Into<String>) => schema = Some(schema.into());
        /// Sets [`pool_size`](Self::pool_size) (at least 1).
        pub fn pool_size(size: usize) => pool_size = size.max(1);
        /// Sets [`durability`](Self::durability).
        pub fn durability(durability: Durability) => durability = durability;
        /// Sets [`timeout`](Self::timeout).
        pub fn timeout(timeout: Duration) => timeout = timeout;
    }
}

/// The session store on a PostgreSQL server (11 or newer).
///
/// Open it with a connection URL (`postgres://user:password@host:port/database?…`, any
/// parameter `tokio-postgres` accepts; `sslmode=disable` or `prefer` — connections are not
/// encrypted, so use it on a trusted network, a Unix socket or a tunnel). Opening creates or
/// migrates the schema (see below). Cheap to clone; clones share the pool.
///
/// The methods block the calling thread like [`SqliteStore`](super::SqliteStore)'s do, and
/// may be called from inside a Tokio runtime (the work runs on the store's own runtime thread).
///
/// # Schema (version 2, kept in table `schema_version`)
///
/// The tables and columns of the SQLite schema — `sessions`, `messages` (the message JSON as
/// `TEXT`, so exports stay byte-identical), `pending_approvals`, `parked_queues`; rows go away
/// with their session (`ON DELETE CASCADE`), the session's `workspace`, `settings` and running
/// totals (`stats`), the `parent_id`, `parent_call` and `parent_agent` of a sub-agent's child
/// session (version 2) — plus the sequence `sessions_touched` (the "most recently updated" order) and a trigger
/// that sends `NOTIFY agentloop_messages, '<schema>/<session id>'` for each stored message,
/// in the appending transaction. Migrations run under a transaction-level advisory lock, so
/// several processes may open a new database at once.
///
/// # Appends and writers
///
/// An append is one transaction: it locks the session's row (which orders concurrent writers),
/// reads its running totals, and in one statement bumps `sessions.last_seq`, stores the totals
/// with the batch counted in ([`SessionStats::add`], message by message, as every store counts)
/// and inserts the messages with the numbers it got. One writer
/// per session across processes: [`lock_session`](SessionStore::lock_session) takes a
/// session-level advisory lock on a dedicated connection (named `agentloop pid=N host=H`, for
/// the "in use by process N" error); the server releases it when the lock is dropped or the
/// holder's connection ends, however its process ends.
///
/// Texts other than message JSON (titles, model names, tool names, reasons) cannot hold the
/// NUL character in PostgreSQL; it is stored as U+FFFD. A session id containing NUL is
/// refused.
#[derive(Clone)]
pub struct PostgresStore {
    shared: Arc<Shared>,
}

/// What every call of one store (and its clones) shares.
struct Shared {
    /// Dropped before the bridge: the pooled connections end with the pool.
    pool: Pool,
    /// The settings each dedicated connection (locks, followers) is opened with.
    config: tokio_postgres::Config,
    /// The schema of the tables (`current_schema()` at open).
    schema: String,
    /// The URL with its password replaced by `***`.
    shown: String,
    options: PostgresOptions,
    bridge: Arc<Bridge>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.shared.shown)
            .field("schema", &self.shared.schema)
            .field("options", &self.shared.options)
            .finish_non_exhaustive()
    }
}

/// A [`SessionError::Postgres`] for `error`, which happened while doing `what`.
pub(super) fn pg_error<E>(what: &str, error: E) -> SessionError
where
    E: std::error::Error + Send + Sync + 'static,
{
    // The client's messages do not quote the connection string, but make sure of it.
    let mut text = redact(&error.to_string());
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        let cause_text = redact(&cause.to_string());
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    SessionError::Postgres {
        message: format!("{what}: {text}"),
        source: Some(Box::new(error)),
    }
}

fn query_error(error: tokio_postgres::Error) -> SessionError {
    pg_error("query failed", error)
}

/// `text` as PostgreSQL can store it (NUL becomes U+FFFD).
fn pg_text(text: &str) -> String {
    text.replace('\0', "\u{FFFD}")
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn to_u64(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

fn now() -> i64 {
    to_i64(now_ms())
}

/// A valid unquoted schema name: lowercase ASCII letters, digits and `_`, not starting with a
/// digit, at most 63 bytes.
fn check_schema(name: &str) -> Result<(), SessionError> {
    let valid = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit();
    if valid {
        Ok(())
    } else {
        Err(SessionError::Invalid {
            what: "schema",
            reason: format!(
                "{name:?} is not a plain schema name (lowercase ASCII letters, digits and _)"
            ),
        })
    }
}

/// A 64-bit key for an advisory lock on `name` in `schema` (FNV-1a; locks are per database, so
/// the schema is part of the key).
pub(super) fn lock_key(schema: &str, name: &str) -> i64 {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for b in "agentloop"
        .bytes()
        .chain([0])
        .chain(schema.bytes())
        .chain([0])
        .chain(name.bytes())
    {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x1000_0000_01b3);
    }
    i64::from_ne_bytes(hash.to_ne_bytes())
}

/// The advisory-lock name of the migrations (session ids cannot contain NUL).
const MIGRATION_LOCK: &str = "\0migrate";

const SESSION_COLUMNS: &str = "id, title, model, created_ms, updated_ms, message_count, \
                               last_seq, forked_from, forked_at_seq, workspace, settings, stats, \
                               parent_id, parent_call, parent_agent";

fn session_from_row(row: &Row) -> Result<SessionInfo, SessionError> {
    info_from_row(row).map_err(query_error)
}

impl SessionRow for Row {
    type Error = tokio_postgres::Error;
    fn text(&self, column: usize) -> Result<Option<String>, tokio_postgres::Error> {
        self.try_get(column)
    }
    fn number(&self, column: usize) -> Result<Option<i64>, tokio_postgres::Error> {
        self.try_get(column)
    }
}

/// The role's name in the transcript's JSON (`"user"`, `"tool_result"`, …).
fn role_name(role: Role) -> String {
    match serde_json::to_value(role) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{role:?}"),
    }
}

/// Locks session `id`'s row for an append and reads its running totals (no row: no session).
const LOCK_FOR_APPEND: &str = "SELECT stats FROM sessions WHERE id = $1 FOR UPDATE";

/// Appends `messages` to session `id` (locked by [`LOCK_FOR_APPEND`] in the same transaction)
/// in one statement, storing the totals `$8`; returns their sequence numbers. `messages` must
/// not be empty.
const APPEND: &str = "
WITH s AS (
    UPDATE sessions SET last_seq = last_seq + $2, message_count = message_count + $2,
        updated_ms = $3, touched = nextval('sessions_touched'),
        model = COALESCE($4, model), title = COALESCE(title, $5), stats = $8
    WHERE id = $1 RETURNING last_seq
)
INSERT INTO messages (session_id, seq, role, created_ms, json)
SELECT $1, s.last_seq - $2 + m.ord, m.role, $3, m.json
FROM s, unnest($6::text[], $7::text[]) WITH ORDINALITY AS m (role, json, ord)
RETURNING seq";

/// The parameters of [`APPEND`] for a batch: its JSON and roles, the model of its last
/// assistant message that names one, and the title of its first user message that gives one
/// (what SQLite's message-by-message updates end up with), and what the running totals count
/// of each message, in order.
struct Batch {
    roles: Vec<String>,
    jsons: Vec<String>,
    model: Option<String>,
    title: Option<String>,
    counted: Vec<Counted>,
}

impl Batch {
    fn new(messages: &[Message]) -> Result<Batch, SessionError> {
        let mut batch = Batch {
            roles: Vec::with_capacity(messages.len()),
            jsons: Vec::with_capacity(messages.len()),
            model: None,
            title: None,
            counted: Vec::new(),
        };
        for message in messages {
            batch.counted.extend(Counted::of(message));
            batch.jsons.push(storable_json(message)?);
            batch.roles.push(role_name(message.role));
            match message.role {
                Role::Assistant => {
                    if let Some(model) = &message.model {
                        batch.model = Some(pg_text(model));
                    }
                }
                Role::User if batch.title.is_none() => {
                    batch.title = derive_title(message).map(|t| pg_text(&t));
                }
                _ => {}
            }
        }
        Ok(batch)
    }

    /// The running totals to store with this batch, from the row [`LOCK_FOR_APPEND`] read.
    fn stats_after(&self, locked: &Row) -> Result<String, SessionError> {
        let mut stats: SessionStats = lenient_json(locked.try_get(0).map_err(query_error)?);
        for counted in &self.counted {
            stats.add_counted(counted);
        }
        stats_json(&stats)
    }

    fn count(&self) -> i64 {
        i64::try_from(self.jsons.len()).unwrap_or(i64::MAX)
    }

    /// The sequence numbers [`APPEND`] returned, in order.
    fn seqs(rows: &[Row]) -> Result<Vec<u64>, SessionError> {
        let mut seqs = rows
            .iter()
            .map(|row| row.try_get::<_, i64>(0).map(to_u64))
            .collect::<Result<Vec<u64>, _>>()
            .map_err(query_error)?;
        seqs.sort_unstable();
        Ok(seqs)
    }

    /// Locks the session and runs the prepared [`APPEND`], inside transaction `tx` (one round
    /// trip after another: the transaction goes on after it); `Ok(None)` when the session does
    /// not exist.
    async fn append(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        append: &tokio_postgres::Statement,
        id: &str,
    ) -> Result<Option<Vec<u64>>, SessionError> {
        let Some(row) = tx
            .query_opt(LOCK_FOR_APPEND, &[&id])
            .await
            .map_err(query_error)?
        else {
            return Ok(None);
        };
        let stats = self.stats_after(&row)?;
        let rows = tx
            .query(
                append,
                &[
                    &id,
                    &self.count(),
                    &now(),
                    &self.model,
                    &self.title,
                    &self.roles,
                    &self.jsons,
                    &stats,
                ],
            )
            .await
            .map_err(query_error)?;
        if rows.is_empty() {
            return Ok(None);
        }
        Batch::seqs(&rows).map(Some)
    }

    /// The whole append as its own transaction, in two round trips instead of four: `BEGIN` is
    /// pipelined with the lock, the append with `COMMIT` (tokio-postgres sends the requests of
    /// futures polled together back to back). A `COMMIT` after a failed statement rolls the
    /// transaction back, so the append is still all or nothing. `Ok(None)`: no such session.
    ///
    /// On an error the transaction may still be open (a lost connection, a failed `COMMIT`):
    /// the caller must not hand `client` back to the pool.
    async fn append_pipelined(
        &self,
        client: &tokio_postgres::Client,
        lock: &tokio_postgres::Statement,
        append: &tokio_postgres::Statement,
        id: &str,
    ) -> Result<Option<Vec<u64>>, SessionError> {
        let key: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&id];
        let (begun, locked) =
            futures::join!(client.batch_execute("BEGIN"), client.query_opt(lock, &key));
        begun.map_err(query_error)?;
        let stats = locked
            .map_err(query_error)
            .and_then(|row| row.map(|row| self.stats_after(&row)).transpose());
        let stats = match stats {
            Ok(Some(stats)) => stats,
            // No such session, or the lock or the totals failed: end the transaction.
            other => {
                client
                    .batch_execute("ROLLBACK")
                    .await
                    .map_err(query_error)?;
                return other.map(|_| None);
            }
        };
        let count = self.count();
        let now = now();
        let params: [&(dyn tokio_postgres::types::ToSql + Sync); 8] = [
            &id,
            &count,
            &now,
            &self.model,
            &self.title,
            &self.roles,
            &self.jsons,
            &stats,
        ];
        let (rows, committed) = futures::join!(
            client.query(append, &params),
            client.batch_execute("COMMIT")
        );
        let rows = rows.map_err(query_error)?;
        committed.map_err(query_error)?;
        if rows.is_empty() {
            return Ok(None);
        }
        Batch::seqs(&rows).map(Some)
    }
}

fn not_found(id: &str) -> SessionError {
    SessionError::NotFound { id: id.to_owned() }
}

fn clean_title(title: &str) -> Result<String, SessionError> {
    super::columns::clean_title(title).map(pg_text)
}

/// The connection settings of `url` with the store's own: the schema as `search_path`, the
/// durability, and a connect timeout and application name unless the URL gives them.
fn connection_config(
    url: &str,
    shown: &str,
    options: &PostgresOptions,
) -> Result<tokio_postgres::Config, SessionError> {
    let parsed: Result<tokio_postgres::Config, _> = url.parse();
    let mut config = parsed.map_err(|e: tokio_postgres::Error| SessionError::Invalid {
        what: "PostgreSQL URL",
        reason: format!("{shown}: {}", redact(&e.to_string())),
    })?;
    let mut settings = config.get_options().unwrap_or("").to_owned();
    if let Some(schema) = &options.schema {
        check_schema(schema)?;
        settings.push_str(&format!(" -c search_path={schema}"));
    }
    if options.durability == Durability::ProcessCrash {
        settings.push_str(" -c synchronous_commit=off");
    }
    let settings = settings.trim().to_owned();
    if !settings.is_empty() {
        config.options(&settings);
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(options.timeout);
    }
    if config.get_application_name().is_none() {
        config.application_name("agentloop");
    }
    Ok(config)
}

/// The store's connection pool: at least one connection, every wait bounded by the timeout.
fn connection_pool(
    config: &tokio_postgres::Config,
    options: &PostgresOptions,
) -> Result<Pool, SessionError> {
    let manager = Manager::from_config(
        config.clone(),
        NoTls,
        ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        },
    );
    let timeout = options.timeout;
    Pool::builder(manager)
        .max_size(options.pool_size.max(1))
        .runtime(deadpool_postgres::Runtime::Tokio1)
        .wait_timeout(Some(timeout))
        .create_timeout(Some(timeout))
        .recycle_timeout(Some(timeout))
        .build()
        .map_err(|e| pg_error("cannot build the connection pool", e))
}

/// Creates the chosen schema if missing, under the migration lock: two processes may open
/// at once.
async fn create_schema(
    client: &mut deadpool_postgres::Object,
    schema: String,
) -> Result<String, SessionError> {
    let tx = client.transaction().await.map_err(query_error)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&lock_key(&schema, MIGRATION_LOCK)],
    )
    .await
    .map_err(query_error)?;
    tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .await
        .map_err(query_error)?;
    tx.commit().await.map_err(query_error)?;
    Ok(schema)
}

/// The connection's current schema, where the tables go when no schema was chosen.
async fn current_schema(
    client: &deadpool_postgres::Object,
    where_: &str,
) -> Result<String, SessionError> {
    client
        .query_one("SELECT current_schema()", &[])
        .await
        .map_err(query_error)?
        .try_get::<_, Option<String>>(0)
        .map_err(query_error)?
        .ok_or_else(|| SessionError::Postgres {
            message: format!(
                "{where_}: no schema to create the tables in (the search_path names \
                 none that exists)"
            ),
            source: None,
        })
}

impl PostgresStore {
    /// Connects to the database at `url` with the default options, creating or migrating the
    /// schema.
    pub fn open(url: &str) -> Result<PostgresStore, SessionError> {
        PostgresStore::open_with(url, PostgresOptions::default())
    }

    /// Connects to the database at `url`, creating or migrating the schema. Errors never
    /// contain the URL's password.
    pub fn open_with(url: &str, options: PostgresOptions) -> Result<PostgresStore, SessionError> {
        let shown = redact(url);
        let config = connection_config(url, &shown, &options)?;
        let bridge = Arc::new(Bridge::start()?);
        let pool = connection_pool(&config, &options)?;
        let chosen = options.schema.clone();
        let opened = pool.clone();
        let where_ = shown.clone();
        let schema = bridge.run(async move {
            let mut client = opened
                .get()
                .await
                .map_err(|e| pg_error(&format!("cannot connect to {where_}"), e))?;
            let schema = match chosen {
                Some(schema) => create_schema(&mut client, schema).await?,
                None => current_schema(&client, &where_).await?,
            };
            schema::migrate(&mut client, lock_key(&schema, MIGRATION_LOCK)).await?;
            Ok(schema)
        })?;
        Ok(PostgresStore {
            shared: Arc::new(Shared {
                pool,
                config,
                schema,
                shown,
                options,
                bridge,
            }),
        })
    }

    /// The schema the tables live in.
    pub fn schema(&self) -> &str {
        &self.shared.schema
    }

    /// The options it was opened with.
    pub fn options(&self) -> &PostgresOptions {
        &self.shared.options
    }

    /// Runs `f` on the store's runtime with a pooled connection's owner, blocking until done.
    fn run<T, F, Fut>(&self, f: F) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: FnOnce(Arc<Shared>) -> Fut,
        Fut: Future<Output = Result<T, SessionError>> + Send + 'static,
    {
        self.shared.bridge.run(f(self.shared.clone()))
    }
}

impl Shared {
    async fn client(&self) -> Result<deadpool_postgres::Object, SessionError> {
        self.pool
            .get()
            .await
            .map_err(|e| pg_error(&format!("no connection to {}", self.shown), e))
    }
}

/// One session's metadata, through `client`.
async fn session_info(
    client: &impl tokio_postgres::GenericClient,
    id: &str,
) -> Result<SessionInfo, SessionError> {
    let row = client
        .query_opt(
            &format!("SELECT {SESSION_COLUMNS} FROM sessions WHERE id = $1"),
            &[&id],
        )
        .await
        .map_err(query_error)?;
    match row {
        Some(row) => session_from_row(&row),
        None => Err(not_found(id)),
    }
}

/// Whether `id` can name a stored session (PostgreSQL text cannot hold NUL).
fn storable_id(id: &str) -> bool {
    !id.contains('\0')
}

/// `id` as an owned query parameter; an id PostgreSQL cannot store names no session, so it is
/// reported unknown without a round trip.
fn session_key(id: &str) -> Result<String, SessionError> {
    if storable_id(id) {
        Ok(id.to_owned())
    } else {
        Err(not_found(id))
    }
}

/// Runs `statement`, which changes the row of session `id`: no row changed means there is no
/// such session.
async fn change_session(
    client: &tokio_postgres::Client,
    id: &str,
    statement: &str,
    params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
) -> Result<(), SessionError> {
    let changed = client
        .execute(statement, params)
        .await
        .map_err(query_error)?;
    if changed == 0 {
        return Err(not_found(id));
    }
    Ok(())
}

impl SessionStore for PostgresStore {
    fn create_with(
        &self,
        new: NewSession,
        messages: &[Message],
    ) -> Result<SessionInfo, SessionError> {
        let new = NewSessionColumns::of(new, |id| {
            if id.trim().is_empty() || !storable_id(id) {
                return Err(SessionError::Invalid {
                    what: "id",
                    reason: "a session id must not be empty or contain NUL".into(),
                });
            }
            Ok(())
        })?;
        let id = new.id;
        let title = new.title.as_deref().map(pg_text);
        let model = new.model.as_deref().map(pg_text);
        let settings = new.settings;
        let workspace = new.workspace.as_deref().map(pg_text);
        let parent = new.parent.map(|p| {
            (
                pg_text(&p.session_id),
                pg_text(&p.call_id),
                pg_text(&p.agent),
            )
        });
        let (parent_id, parent_call, parent_agent) = match parent {
            Some((id, call, agent)) => (Some(id), Some(call), Some(agent)),
            None => (None, None, None),
        };
        let batch = if messages.is_empty() {
            None
        } else {
            Some(Batch::new(messages)?)
        };
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            let client: &mut tokio_postgres::Client = &mut pooled;
            let tx = client.transaction().await.map_err(query_error)?;
            let created = tx
                .query_opt(
                    "INSERT INTO sessions (id, title, model, created_ms, updated_ms, touched, \
                     workspace, settings, parent_id, parent_call, parent_agent) \
                     VALUES ($1, $2, $3, $4, $4, nextval('sessions_touched'), $5, $6, $7, $8, \
                     $9) ON CONFLICT (id) DO NOTHING RETURNING 1",
                    &[
                        &id,
                        &title,
                        &model,
                        &now(),
                        &workspace,
                        &settings,
                        &parent_id,
                        &parent_call,
                        &parent_agent,
                    ],
                )
                .await
                .map_err(query_error)?;
            if created.is_none() {
                return Err(SessionError::AlreadyExists { id });
            }
            if let Some(batch) = batch {
                let append = tx.prepare(APPEND).await.map_err(query_error)?;
                batch.append(&tx, &append, &id).await?;
            }
            let info = session_info(&tx, &id).await?;
            tx.commit().await.map_err(query_error)?;
            Ok(info)
        })
    }

    fn info(&self, id: &str) -> Result<SessionInfo, SessionError> {
        let id = session_key(id)?;
        self.run(move |db| async move {
            let pooled = db.client().await?;
            let client: &tokio_postgres::Client = &pooled;
            session_info(client, &id).await
        })
    }

    fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.run(move |db| async move {
            let client = db.client().await?;
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions ORDER BY touched DESC"
                ))
                .await
                .map_err(query_error)?;
            let rows = client.query(&statement, &[]).await.map_err(query_error)?;
            rows.iter().map(session_from_row).collect()
        })
    }

    fn set_settings(&self, id: &str, settings: &SessionSettings) -> Result<(), SessionError> {
        let id = session_key(id)?;
        let (workspace, settings) = settings_columns(settings)?;
        let workspace = workspace.as_deref().map(pg_text);
        self.run(move |db| async move {
            let client = db.client().await?;
            change_session(
                &client,
                &id,
                "UPDATE sessions SET workspace = $2, settings = $3 WHERE id = $1",
                &[&id, &workspace, &settings],
            )
            .await
        })
    }

    fn list_where(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>, SessionError> {
        if filter.id_prefix.as_deref() == Some("") {
            return Ok(Vec::new());
        }
        // NUL cannot be stored, so a condition holding one matches nothing.
        let unstorable = |text: &Option<String>| text.as_deref().is_some_and(|t| t.contains('\0'));
        if unstorable(&filter.workspace)
            || unstorable(&filter.id_prefix)
            || unstorable(&filter.parent)
        {
            return Ok(Vec::new());
        }
        // Every condition is always in the statement (NULL turns it off), so there is one
        // statement to prepare and cache.
        let workspace = filter.workspace.clone();
        let prefix = filter.id_prefix.clone();
        let with_reply = filter.with_reply;
        let top_level = filter.top_level;
        let parent = filter.parent.clone();
        let limit = filter.limit.map(|n| to_i64(n as u64));
        self.run(move |db| async move {
            let client = db.client().await?;
            let statement = client
                .prepare_cached(&format!(
                    "SELECT {SESSION_COLUMNS} FROM sessions \
                     WHERE ($1::text IS NULL OR workspace = $1) \
                     AND ($2::text IS NULL OR starts_with(id, $2)) \
                     AND (NOT $3 OR (stats::jsonb ->> 'turns')::numeric > 0) \
                     AND (NOT $5 OR parent_id IS NULL) \
                     AND ($6::text IS NULL OR parent_id = $6) \
                     ORDER BY touched DESC LIMIT $4"
                ))
                .await
                .map_err(query_error)?;
            let rows = client
                .query(
                    &statement,
                    &[
                        &workspace,
                        &prefix,
                        &with_reply,
                        &limit,
                        &top_level,
                        &parent,
                    ],
                )
                .await
                .map_err(query_error)?;
            rows.iter().map(session_from_row).collect()
        })
    }

    fn last(&self) -> Result<Option<SessionInfo>, SessionError> {
        self.run(move |db| async move {
            let client = db.client().await?;
            let row = client
                .query_opt(
                    &format!(
                        "SELECT {SESSION_COLUMNS} FROM sessions WHERE parent_id IS NULL \
                         ORDER BY touched DESC LIMIT 1"
                    ),
                    &[],
                )
                .await
                .map_err(query_error)?;
            row.as_ref().map(session_from_row).transpose()
        })
    }

    fn append_all(&self, id: &str, messages: &[Message]) -> Result<Vec<u64>, SessionError> {
        let id = session_key(id)?;
        if messages.is_empty() {
            self.info(&id)?;
            return Ok(Vec::new());
        }
        let batch = Batch::new(messages)?;
        self.run(move |db| async move {
            let pooled = db.client().await?;
            let lock = pooled
                .prepare_cached(LOCK_FOR_APPEND)
                .await
                .map_err(query_error)?;
            let append = pooled.prepare_cached(APPEND).await.map_err(query_error)?;
            match batch.append_pipelined(&pooled, &lock, &append, &id).await {
                Ok(Some(seqs)) => Ok(seqs),
                Ok(None) => Err(not_found(&id)),
                Err(error) => {
                    // The transaction may still be open: close this connection rather than
                    // hand it back to the pool.
                    drop(deadpool_postgres::Object::take(pooled));
                    Err(error)
                }
            }
        })
    }

    fn entries(&self, id: &str) -> Result<Vec<StoredMessage>, SessionError> {
        self.entries_after(id, 0)
    }

    fn entries_after(&self, id: &str, after: u64) -> Result<Vec<StoredMessage>, SessionError> {
        let id = session_key(id)?;
        self.run(move |db| async move {
            let client = db.client().await?;
            // One statement, one snapshot: the session's existence and its rows agree.
            let statement = client
                .prepare_cached(
                    "SELECT m.seq, m.created_ms, m.json FROM sessions s \
                     LEFT JOIN messages m ON m.session_id = s.id AND m.seq > $2 \
                     WHERE s.id = $1 ORDER BY m.seq",
                )
                .await
                .map_err(query_error)?;
            let rows = client
                .query(&statement, &[&id, &to_i64(after)])
                .await
                .map_err(query_error)?;
            if rows.is_empty() {
                return Err(not_found(&id));
            }
            let mut out = Vec::with_capacity(rows.len());
            for row in &rows {
                let Some(seq) = row.try_get::<_, Option<i64>>(0).map_err(query_error)? else {
                    continue; // the session has no message after `after`
                };
                let seq = to_u64(seq);
                let created_ms = to_u64(row.try_get(1).map_err(query_error)?);
                let json: &str = row.try_get(2).map_err(query_error)?;
                out.push(stored_message(&id, seq, created_ms, json)?);
            }
            Ok(out)
        })
    }

    fn set_title(&self, id: &str, title: &str) -> Result<(), SessionError> {
        let title = clean_title(title)?;
        let id = session_key(id)?;
        self.run(move |db| async move {
            let client = db.client().await?;
            change_session(
                &client,
                &id,
                "UPDATE sessions SET title = $2, updated_ms = $3, \
                 touched = nextval('sessions_touched') WHERE id = $1",
                &[&id, &title, &now()],
            )
            .await
        })
    }

    fn delete(&self, id: &str) -> Result<(), SessionError> {
        let id = session_key(id)?;
        self.run(move |db| async move {
            let client = db.client().await?;
            // Messages, pending approvals and parked queues go with it (ON DELETE CASCADE).
            change_session(&client, &id, "DELETE FROM sessions WHERE id = $1", &[&id]).await
        })
    }

    fn fork(&self, id: &str, seq: u64) -> Result<SessionInfo, SessionError> {
        let id = session_key(id)?;
        let new_id = uuid::Uuid::new_v4().to_string();
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            let client: &mut tokio_postgres::Client = &mut pooled;
            let tx = client.transaction().await.map_err(query_error)?;
            session_info(&tx, &id).await?;
            let seq_i = to_i64(seq);
            let found = tx
                .query_opt(
                    "SELECT 1 FROM messages WHERE session_id = $1 AND seq = $2",
                    &[&id, &seq_i],
                )
                .await
                .map_err(query_error)?;
            if found.is_none() {
                return Err(SessionError::SeqNotFound { id, seq });
            }
            let mut stats = SessionStats::default();
            let replies = tx
                .query(
                    "SELECT seq, json FROM messages WHERE session_id = $1 AND seq <= $2 \
                     AND role = 'assistant' ORDER BY seq",
                    &[&id, &seq_i],
                )
                .await
                .map_err(query_error)?;
            for row in &replies {
                let json: &str = row.try_get(1).map_err(query_error)?;
                let message: Message =
                    serde_json::from_str(json).map_err(|source| SessionError::Corrupt {
                        id: id.clone(),
                        seq: to_u64(row.try_get(0).unwrap_or(0)),
                        source,
                    })?;
                stats.add(&message);
            }
            let stats = stats_json(&stats)?;
            tx.execute(
                "INSERT INTO sessions (id, title, model, created_ms, updated_ms, touched, \
                 last_seq, message_count, forked_from, forked_at_seq, workspace, settings, \
                 stats) \
                 SELECT $1, title, model, $3, $3, nextval('sessions_touched'), $4, \
                 (SELECT count(*) FROM messages WHERE session_id = $2 AND seq <= $4), $2, $4, \
                 workspace, settings, $5 \
                 FROM sessions WHERE id = $2",
                &[&new_id, &id, &now(), &seq_i, &stats],
            )
            .await
            .map_err(query_error)?;
            tx.execute(
                "INSERT INTO messages (session_id, seq, role, created_ms, json) \
                 SELECT $1, seq, role, created_ms, json FROM messages \
                 WHERE session_id = $2 AND seq <= $3",
                &[&new_id, &id, &seq_i],
            )
            .await
            .map_err(query_error)?;
            let info = session_info(&tx, &new_id).await?;
            tx.commit().await.map_err(query_error)?;
            Ok(info)
        })
    }

    fn save_parked(&self, id: &str, parked: &ParkedRun) -> Result<(), SessionError> {
        let id = session_key(id)?;
        let rows = approvals::ParkedRows::new(parked)?;
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            approvals::save(&mut pooled, &id, &rows).await
        })
    }

    fn parked(&self, id: &str) -> Result<Option<ParkedRun>, SessionError> {
        let id = session_key(id)?;
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            approvals::load(&mut pooled, &id).await
        })
    }

    fn decide(&self, id: &str, call_id: &str, status: &PendingStatus) -> Result<(), SessionError> {
        let id = session_key(id)?;
        let (call_id, status) = (call_id.to_owned(), status.clone());
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            approvals::decide(&mut pooled, &id, &call_id, &status).await
        })
    }

    fn resolve_pending(&self, id: &str, call_id: &str) -> Result<(), SessionError> {
        if !storable_id(id) {
            return Ok(());
        }
        let (id, call_id) = (id.to_owned(), pg_text(call_id));
        self.run(move |db| async move {
            let client = db.client().await?;
            client
                .execute(
                    "DELETE FROM pending_approvals WHERE session_id = $1 AND call_id = $2",
                    &[&id, &call_id],
                )
                .await
                .map_err(query_error)?;
            Ok(())
        })
    }

    fn clear_parked(&self, id: &str) -> Result<(), SessionError> {
        if !storable_id(id) {
            return Ok(());
        }
        let id = id.to_owned();
        self.run(move |db| async move {
            let mut pooled = db.client().await?;
            let client: &mut tokio_postgres::Client = &mut pooled;
            let tx = client.transaction().await.map_err(query_error)?;
            tx.execute(
                "DELETE FROM pending_approvals WHERE session_id = $1",
                &[&id],
            )
            .await
            .map_err(query_error)?;
            tx.execute("DELETE FROM parked_queues WHERE session_id = $1", &[&id])
                .await
                .map_err(query_error)?;
            tx.commit().await.map_err(query_error)
        })
    }

    fn awaiting_approval(&self) -> Result<Vec<(String, Vec<PendingApproval>)>, SessionError> {
        self.run(move |db| async move {
            let pooled = db.client().await?;
            let client: &tokio_postgres::Client = &pooled;
            approvals::awaiting(client).await
        })
    }

    fn subscribe(&self, id: &str) -> Result<Option<Box<dyn ChangeSignal>>, SessionError> {
        let config = self.shared.config.clone();
        let want = schema::payload(&self.shared.schema, id);
        let bridge = self.shared.bridge.clone();
        let signal = self
            .shared
            .bridge
            .run(async move { listen::subscribe(config, want).await })?;
        Ok(Some(Box::new(signal.keeping(bridge))))
    }

    fn lock_session(&self, id: &str, wait: Duration) -> Result<SessionLock, SessionError> {
        let config = self.shared.config.clone();
        let key = lock_key(&self.shared.schema, id);
        let id = id.to_owned();
        let client = self
            .shared
            .bridge
            .run(async move { lock::acquire(config, key, &id, wait).await })?;
        Ok(SessionLock::held_by(lock::Held::new(
            client,
            key,
            self.shared.bridge.clone(),
        )))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema("agentloop_1").is_ok());
        for bad in ["", "1abc", "Upper", "a-b", "a;drop", &"x".repeat(64)] {
            assert!(check_schema(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lock_keys_depend_on_schema_and_name() {
        assert_ne!(lock_key("a", "s"), lock_key("b", "s"));
        assert_ne!(lock_key("a", "s"), lock_key("a", "t"));
        assert_eq!(lock_key("a", "s"), lock_key("a", "s"));
    }

    #[test]
    fn the_connection_settings_add_the_store_options_to_the_url() {
        let options = PostgresOptions {
            schema: Some("agents".into()),
            durability: Durability::ProcessCrash,
            ..PostgresOptions::default()
        };
        let url = "postgres://me@localhost/db?options=-c%20work_mem%3D4MB";
        let config = connection_config(url, url, &options).unwrap();
        assert_eq!(
            config.get_options(),
            Some("-c work_mem=4MB -c search_path=agents -c synchronous_commit=off")
        );
        assert_eq!(config.get_connect_timeout(), Some(&options.timeout));
        assert_eq!(config.get_application_name(), Some("agentloop"));

        let given = "postgres://me@localhost/db?connect_timeout=3&application_name=mine";
        let config = connection_config(given, given, &PostgresOptions::default()).unwrap();
        assert_eq!(config.get_options(), None);
        assert_eq!(config.get_connect_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(config.get_application_name(), Some("mine"));

        let bad_schema = PostgresOptions {
            schema: Some("Bad-Name".into()),
            ..PostgresOptions::default()
        };
        assert!(connection_config(given, given, &bad_schema).is_err());
    }

    #[test]
    fn a_bad_url_is_refused_without_showing_its_password() {
        let err = PostgresStore::open("postgres://me:hunter2@/db?port=notanumber")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("PostgreSQL URL"), "{err}");
        assert!(!err.contains("hunter2"), "{err}");
    }
}
