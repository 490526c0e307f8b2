//! The PostgreSQL schema and its versioned migrations.
//!
//! The tables live in one schema (the connection's `current_schema()`, or the one chosen with
//! [`PostgresOptions::schema`](super::PostgresOptions::schema)). `schema_version` holds one row,
//! the version applied; each migration step runs, with the version update, in one transaction
//! that first takes a transaction-level advisory lock for the schema, so processes opening the
//! same database at once apply each step exactly once and never see a half-built schema.

use tokio_postgres::Client;

use super::pg_error;
use crate::session::SessionError;

/// The schema version this build writes and reads.
pub(crate) const SCHEMA_VERSION: i32 = 2;

/// Migration steps: `STEPS[n]` brings version `n` to `n + 1`.
const STEPS: [&str; 2] = [V1, V2];

/// Version 1: the tables of SQLite's schema version 3 — with the session's workspace, settings
/// (a JSON object, so new settings need no migration) and running totals (a JSON object) — and
/// the trigger that notifies followers of new messages. The JSON columns are `TEXT` rather than
/// `JSONB`, which refuses the `\u0000` escape a setting could contain; they are read and written
/// whole, never queried inside except the totals' `turns` (always a number).
const V1: &str = "
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    title         TEXT,
    model         TEXT,
    created_ms    BIGINT NOT NULL,
    updated_ms    BIGINT NOT NULL,
    touched       BIGINT NOT NULL,
    last_seq      BIGINT NOT NULL DEFAULT 0,
    message_count BIGINT NOT NULL DEFAULT 0,
    forked_from   TEXT,
    forked_at_seq BIGINT,
    workspace     TEXT,
    settings      TEXT,
    stats         TEXT NOT NULL DEFAULT '{}'
);
CREATE SEQUENCE sessions_touched;
CREATE INDEX sessions_by_touched ON sessions (touched);
CREATE INDEX sessions_by_workspace ON sessions (workspace, touched);
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        BIGINT NOT NULL,
    role       TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE pending_approvals (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    position    BIGINT NOT NULL,
    tool_name   TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL,
    deny_reason TEXT,
    created_ms  BIGINT NOT NULL,
    decided_ms  BIGINT,
    PRIMARY KEY (session_id, call_id)
);
CREATE TABLE parked_queues (
    session_id TEXT PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    steering   TEXT NOT NULL,
    follow_ups TEXT NOT NULL
);
CREATE FUNCTION agentloop_notify_message() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('agentloop_messages', TG_TABLE_SCHEMA || '/' || left(NEW.session_id, 1000));
    RETURN NULL;
END
$$;
CREATE TRIGGER messages_notify AFTER INSERT ON messages
    FOR EACH ROW EXECUTE FUNCTION agentloop_notify_message();
";

/// Version 2 (SQLite's version 4): the link of a sub-agent's child session to its parent
/// session and call; every existing session stays top-level.
const V2: &str = "
ALTER TABLE sessions ADD COLUMN parent_id TEXT;
ALTER TABLE sessions ADD COLUMN parent_call TEXT;
ALTER TABLE sessions ADD COLUMN parent_agent TEXT;
CREATE INDEX sessions_by_parent ON sessions (parent_id, touched);
";

/// The `NOTIFY` channel of new messages; the payload is `<schema>/<session id, first 1000
/// characters>`.
pub(super) const CHANNEL: &str = "agentloop_messages";

/// The notification payload for session `id` of `schema`.
pub(super) fn payload(schema: &str, id: &str) -> String {
    let id: String = id.chars().take(1000).collect();
    format!("{schema}/{id}")
}

/// Brings the schema up to [`SCHEMA_VERSION`] (creating it in an empty schema); returns the
/// version found. Fails with [`SessionError::SchemaTooNew`] when a newer build wrote it.
pub(super) async fn migrate(client: &mut Client, lock_key: i64) -> Result<i32, SessionError> {
    let tx = client
        .transaction()
        .await
        .map_err(|e| pg_error("migrating the schema", e))?;
    let step = |e| pg_error("migrating the schema", e);
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&lock_key])
        .await
        .map_err(step)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .await
        .map_err(step)?;
    let found: i32 = tx
        .query_opt("SELECT max(version) FROM schema_version", &[])
        .await
        .map_err(step)?
        .and_then(|row| row.get::<_, Option<i32>>(0))
        .unwrap_or(0);
    if found > SCHEMA_VERSION {
        return Err(SessionError::SchemaTooNew {
            found: i64::from(found),
            supported: i64::from(SCHEMA_VERSION),
        });
    }
    if found < SCHEMA_VERSION {
        for sql in STEPS.iter().skip(usize::try_from(found).unwrap_or(0)) {
            tx.batch_execute(sql).await.map_err(step)?;
        }
        tx.execute("DELETE FROM schema_version", &[])
            .await
            .map_err(step)?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES ($1)",
            &[&SCHEMA_VERSION],
        )
        .await
        .map_err(step)?;
    }
    tx.commit().await.map_err(step)?;
    Ok(found)
}
