//! Pending approvals kept with a session: the state of a run parked for a person's decision
//! ([`ParkedRun`]), so that another process can list, decide and resume it.
//!
//! This module owns the SQLite schema migration that adds the two tables (schema version 2),
//! the queries behind the [`SessionStore`] approval methods for [`SqliteStore`](super::SqliteStore),
//! and [`load_parked`], which rebuilds the context and the parked state of a session for
//! [`AgentLoop::resume_parked`](crate::agent::AgentLoop::resume_parked).
//!
//! Tables: `pending_approvals` (one row per deferred call: session, call id, position in call
//! order, tool, arguments JSON, what policy asked, status `awaiting|approved|denied|started`,
//! deny reason, timestamps) and `parked_queues` (per session, the steering and follow-up
//! messages queued at the stop, as JSON arrays). Rows go away with their session.

use std::collections::HashSet;

#[cfg(feature = "sqlite")]
use rusqlite::{Connection, OptionalExtension, Transaction, params};

use super::{SessionError, SessionStore, repair};
use crate::agent::ParkedRun;
#[cfg(feature = "sqlite")]
use crate::agent::PendingApproval;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use crate::agent::PendingStatus;
use crate::transcript::Message;
#[cfg(feature = "sqlite")]
use crate::transcript::now_ms;

/// Creates the approval tables (idempotent): the step from schema version 1 to 2.
#[cfg(feature = "sqlite")]
pub(crate) fn migrate(tx: &Transaction<'_>) -> Result<(), rusqlite::Error> {
    tx.execute_batch(
        "
CREATE TABLE IF NOT EXISTS pending_approvals (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    position    INTEGER NOT NULL,
    tool_name   TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL,
    deny_reason TEXT,
    created_ms  INTEGER NOT NULL,
    decided_ms  INTEGER,
    PRIMARY KEY (session_id, call_id)
);
CREATE TABLE IF NOT EXISTS parked_queues (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    steering   TEXT NOT NULL,
    follow_ups TEXT NOT NULL
);
",
    )
}

#[cfg(feature = "sqlite")]
fn now() -> i64 {
    i64::try_from(now_ms()).unwrap_or(i64::MAX)
}

#[cfg(feature = "sqlite")]
fn exists(tx: &Connection, id: &str) -> Result<(), SessionError> {
    if tx
        .prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")?
        .exists([id])?
    {
        Ok(())
    } else {
        Err(SessionError::NotFound { id: id.to_owned() })
    }
}

/// Whether a pending call whose stored status is `current` (`None`: there is no such call) may
/// take `status`: a started call cannot be approved or denied again (it may have run: the next
/// resume answers it as interrupted).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn check_decidable(
    id: &str,
    call_id: &str,
    current: Option<&str>,
    status: &PendingStatus,
) -> Result<(), SessionError> {
    let Some(current) = current else {
        return Err(SessionError::Invalid {
            what: "call id",
            reason: format!("session {id:?} has no pending call {call_id:?}"),
        });
    };
    if current == "started" && *status != PendingStatus::Started {
        return Err(SessionError::Invalid {
            what: "decision",
            reason: format!(
                "call {call_id:?} already started running; it cannot be decided again (the next \
                 resume reports it as interrupted)"
            ),
        });
    }
    Ok(())
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn status_parts(status: &PendingStatus) -> (&'static str, Option<&str>) {
    match status {
        PendingStatus::Denied { reason } => ("denied", Some(reason.as_str())),
        other => (other.name(), None),
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn status_from(name: &str, deny_reason: Option<String>) -> PendingStatus {
    match name {
        "approved" => PendingStatus::Approved,
        "denied" => PendingStatus::Denied {
            reason: deny_reason.unwrap_or_default(),
        },
        "started" => PendingStatus::Started,
        _ => PendingStatus::Awaiting,
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> Result<String, SessionError> {
    serde_json::to_string(value).map_err(SessionError::Serialize)
}

/// Adds the parked calls (existing rows, and their decisions, are kept) and replaces the queue
/// snapshot.
#[cfg(feature = "sqlite")]
pub(crate) fn save(tx: &Transaction<'_>, id: &str, parked: &ParkedRun) -> Result<(), SessionError> {
    exists(tx, id)?;
    let now = now();
    for p in &parked.pending {
        let (status, deny) = status_parts(&p.status);
        tx.prepare_cached(
            "INSERT INTO pending_approvals (session_id, call_id, position, tool_name, arguments, \
             reason, status, deny_reason, created_ms) \
             VALUES (?1, ?2, (SELECT IFNULL(MAX(position), 0) + 1 FROM pending_approvals \
             WHERE session_id = ?1), ?3, ?4, ?5, ?6, ?7, ?8) \
             ON CONFLICT (session_id, call_id) DO NOTHING",
        )?
        .execute(params![
            id,
            p.call_id,
            p.tool_name,
            to_json(&p.arguments)?,
            p.reason,
            status,
            deny,
            now
        ])?;
    }
    tx.execute(
        "INSERT INTO parked_queues (session_id, steering, follow_ups) VALUES (?1, ?2, ?3) \
         ON CONFLICT (session_id) DO UPDATE SET steering = ?2, follow_ups = ?3",
        params![id, to_json(&parked.steering)?, to_json(&parked.follow_ups)?],
    )?;
    Ok(())
}

#[cfg(feature = "sqlite")]
fn pending_in(conn: &Connection, id: &str) -> Result<Vec<PendingApproval>, SessionError> {
    let mut stmt = conn.prepare_cached(
        "SELECT call_id, tool_name, arguments, reason, status, deny_reason \
         FROM pending_approvals WHERE session_id = ?1 ORDER BY position",
    )?;
    let rows = stmt.query_map([id], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
            r.get::<_, Option<String>>(5)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (call_id, tool_name, arguments, reason, status, deny) = row?;
        let arguments = serde_json::from_str(&arguments).map_err(|e| SessionError::Invalid {
            what: "pending approval",
            reason: format!("call {call_id:?}: stored arguments are not JSON: {e}"),
        })?;
        out.push(PendingApproval {
            call_id,
            tool_name,
            arguments,
            reason,
            status: status_from(&status, deny),
        });
    }
    Ok(out)
}

/// The parked state of session `id` (`None` when nothing is pending).
#[cfg(feature = "sqlite")]
pub(crate) fn load(conn: &Connection, id: &str) -> Result<Option<ParkedRun>, SessionError> {
    exists(conn, id)?;
    let pending = pending_in(conn, id)?;
    if pending.is_empty() {
        return Ok(None);
    }
    let queues: Option<(String, String)> = conn
        .query_row(
            "SELECT steering, follow_ups FROM parked_queues WHERE session_id = ?1",
            [id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?;
    let parse = |text: &str| -> Result<Vec<Message>, SessionError> {
        serde_json::from_str(text).map_err(|e| SessionError::Invalid {
            what: "parked queue",
            reason: format!("stored messages are not valid: {e}"),
        })
    };
    let (steering, follow_ups) = match queues {
        Some((s, f)) => (parse(&s)?, parse(&f)?),
        None => (Vec::new(), Vec::new()),
    };
    Ok(Some(ParkedRun {
        pending,
        steering,
        follow_ups,
    }))
}

/// Sets a pending call's status. A started call cannot be approved or denied again (it may
/// have run: the next resume answers it as interrupted).
#[cfg(feature = "sqlite")]
pub(crate) fn decide(
    tx: &Transaction<'_>,
    id: &str,
    call_id: &str,
    status: &PendingStatus,
) -> Result<(), SessionError> {
    exists(tx, id)?;
    let current: Option<String> = tx
        .query_row(
            "SELECT status FROM pending_approvals WHERE session_id = ?1 AND call_id = ?2",
            params![id, call_id],
            |r| r.get(0),
        )
        .optional()?;
    check_decidable(id, call_id, current.as_deref(), status)?;
    let (name, deny) = status_parts(status);
    tx.execute(
        "UPDATE pending_approvals SET status = ?3, deny_reason = ?4, decided_ms = ?5 \
         WHERE session_id = ?1 AND call_id = ?2",
        params![id, call_id, name, deny, now()],
    )?;
    Ok(())
}

/// Removes a pending call (it has its result now).
#[cfg(feature = "sqlite")]
pub(crate) fn resolve(tx: &Transaction<'_>, id: &str, call_id: &str) -> Result<(), SessionError> {
    tx.execute(
        "DELETE FROM pending_approvals WHERE session_id = ?1 AND call_id = ?2",
        params![id, call_id],
    )?;
    Ok(())
}

/// Removes every pending call and the queue snapshot of a session.
#[cfg(feature = "sqlite")]
pub(crate) fn clear(tx: &Transaction<'_>, id: &str) -> Result<(), SessionError> {
    tx.execute("DELETE FROM pending_approvals WHERE session_id = ?1", [id])?;
    tx.execute("DELETE FROM parked_queues WHERE session_id = ?1", [id])?;
    Ok(())
}

/// Every session with pending calls, most recently parked first.
#[cfg(feature = "sqlite")]
pub(crate) fn awaiting(
    conn: &Connection,
) -> Result<Vec<(String, Vec<PendingApproval>)>, SessionError> {
    let ids: Vec<String> = {
        let mut stmt = conn.prepare_cached(
            "SELECT session_id FROM pending_approvals GROUP BY session_id \
             ORDER BY MAX(created_ms) DESC, session_id",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        rows.collect::<Result<_, _>>()?
    };
    ids.into_iter()
        .map(|id| {
            let pending = pending_in(conn, &id)?;
            Ok((id, pending))
        })
        .collect()
}

/// What a resume of session `id` needs: its context (interrupted batches repaired, except the
/// calls still pending, which must stay unanswered) and its parked state (`None` when nothing
/// is pending; the context is then what [`SessionStore::load`] returns).
///
/// ```
/// use agentloop::session::{load_parked, NewSession, SessionStore, SqliteStore};
/// use agentloop::transcript::Message;
///
/// let store = SqliteStore::open_in_memory()?;
/// let session = store.create_with(NewSession::new(), &[Message::user("hi")])?;
/// let (context, parked) = load_parked(&store, &session.id)?;
/// assert_eq!(context.len(), 1);
/// assert!(parked.is_none());
/// # Ok::<(), agentloop::session::SessionError>(())
/// ```
pub fn load_parked(
    store: &dyn SessionStore,
    id: &str,
) -> Result<(Vec<Message>, Option<ParkedRun>), SessionError> {
    let raw = store.load_raw(id)?;
    let parked = store.parked(id)?;
    let keep: HashSet<&str> = parked
        .iter()
        .flat_map(|p| p.pending.iter().map(|c| c.call_id.as_str()))
        .collect();
    let context = repair::repair_interrupted_except(raw, &keep);
    Ok((context, parked))
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::session::{SqliteStore, StoredMessage};
    use crate::transcript::{Message, Part, StopReason, ToolCallPart, ToolResultPart};
    use serde_json::json;

    /// A database exactly as version 1 of this crate created it (before pending approvals):
    /// the base schema, which the later versions migrate.
    fn schema_v1() -> String {
        format!(
            "{}PRAGMA user_version = 1;\n",
            crate::session::sqlite::SCHEMA
        )
    }

    fn pending(id: &str) -> PendingApproval {
        PendingApproval {
            call_id: id.into(),
            tool_name: "write_file".into(),
            arguments: json!({"path": "a.txt", "content": id}),
            reason: "needs approval".into(),
            status: PendingStatus::Awaiting,
        }
    }

    #[test]
    fn a_version_1_database_is_migrated_and_keeps_its_sessions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v1.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(&schema_v1()).unwrap();
            let message = serde_json::to_string(&Message::user("old prompt")).unwrap();
            conn.execute(
                "INSERT INTO sessions (id, created_ms, updated_ms, touched, last_seq, \
                 message_count) VALUES ('old', 1, 1, 1, 1, 1)",
                [],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO messages VALUES ('old', 1, 'user', 1, ?1)",
                [message],
            )
            .unwrap();
        }
        let store = SqliteStore::open(&path).unwrap();
        let entries: Vec<StoredMessage> = store.entries("old").unwrap();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].message.text(), "old prompt");
        assert_eq!(store.parked("old").unwrap(), None);
        let parked = ParkedRun {
            pending: vec![pending("c1"), pending("c2")],
            steering: vec![Message::user("steer")],
            follow_ups: vec![],
        };
        store.save_parked("old", &parked).unwrap();
        drop(store);
        // Reopening a migrated database changes nothing.
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.parked("old").unwrap(), Some(parked));
        let version: i64 = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, crate::session::sqlite::SCHEMA_VERSION);
    }

    #[test]
    fn decisions_persist_and_started_calls_cannot_be_decided_again() {
        let store = SqliteStore::open_in_memory().unwrap();
        let s = store.create(crate::session::NewSession::new()).unwrap();
        let parked = ParkedRun {
            pending: vec![pending("c1"), pending("c2")],
            ..ParkedRun::default()
        };
        store.save_parked(&s.id, &parked).unwrap();
        store.decide(&s.id, "c1", &PendingStatus::Approved).unwrap();
        store
            .decide(
                &s.id,
                "c2",
                &PendingStatus::Denied {
                    reason: "no".into(),
                },
            )
            .unwrap();
        assert!(store.decide(&s.id, "zz", &PendingStatus::Approved).is_err());
        // Saving again (a re-park) keeps the decisions.
        store.save_parked(&s.id, &parked).unwrap();
        let got = store.parked(&s.id).unwrap().unwrap();
        assert_eq!(got.pending[0].status, PendingStatus::Approved);
        assert_eq!(
            got.pending[1].status,
            PendingStatus::Denied {
                reason: "no".into()
            }
        );
        store.decide(&s.id, "c1", &PendingStatus::Started).unwrap();
        assert!(store.decide(&s.id, "c1", &PendingStatus::Approved).is_err());
        assert_eq!(store.awaiting_approval().unwrap().len(), 1);
        store.resolve_pending(&s.id, "c1").unwrap();
        store.clear_parked(&s.id).unwrap();
        assert_eq!(store.parked(&s.id).unwrap(), None);
        assert!(store.awaiting_approval().unwrap().is_empty());
    }

    #[test]
    fn load_parked_leaves_pending_calls_unanswered() {
        let store = SqliteStore::open_in_memory().unwrap();
        let assistant = Message::assistant(
            vec![
                Part::ToolCall(ToolCallPart::new("c1", "write_file", json!({}))),
                Part::ToolCall(ToolCallPart::new("r", "read_file", json!({}))),
                Part::ToolCall(ToolCallPart::new("lost", "read_file", json!({}))),
            ],
            StopReason::ToolUse,
        );
        let s = store
            .create_with(
                crate::session::NewSession::new(),
                &[
                    Message::user("go"),
                    assistant,
                    Message::tool_result(ToolResultPart::success("r", "read_file", "x")),
                ],
            )
            .unwrap();
        store
            .save_parked(
                &s.id,
                &ParkedRun {
                    pending: vec![pending("c1")],
                    ..ParkedRun::default()
                },
            )
            .unwrap();
        let (context, parked) = load_parked(&store, &s.id).unwrap();
        let ids: Vec<_> = context
            .iter()
            .filter_map(Message::tool_result_part)
            .map(|r| (r.call_id.as_str(), r.is_error))
            .collect();
        assert_eq!(ids, [("r", false), ("lost", true)]);
        assert_eq!(parked.unwrap().pending.len(), 1);
    }
}
