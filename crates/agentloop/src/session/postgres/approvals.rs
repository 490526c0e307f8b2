//! Pending approvals on PostgreSQL: the queries behind the [`SessionStore`](crate::session::SessionStore)
//! approval methods of [`PostgresStore`](super::PostgresStore), the same rules as SQLite's
//! (`session/approvals.rs`): saving again keeps earlier decisions, a started call cannot be
//! decided again, the rows go away with their session.

use tokio_postgres::GenericClient;

use super::{not_found, now, pg_text, query_error};
use crate::agent::{ParkedRun, PendingApproval, PendingStatus};
use crate::session::SessionError;
use crate::session::approvals::{check_decidable, status_from, status_parts, to_json};
use crate::transcript::Message;

/// One pending call as stored.
struct CallRow {
    call_id: String,
    tool_name: String,
    arguments: String,
    reason: String,
    status: &'static str,
    deny_reason: Option<String>,
}

/// A [`ParkedRun`] serialized for storage (done on the caller's thread).
pub(super) struct ParkedRows {
    calls: Vec<CallRow>,
    steering: String,
    follow_ups: String,
}

impl ParkedRows {
    pub(super) fn new(parked: &ParkedRun) -> Result<ParkedRows, SessionError> {
        let calls = parked
            .pending
            .iter()
            .map(|p| {
                let (status, deny) = status_parts(&p.status);
                Ok(CallRow {
                    call_id: pg_text(&p.call_id),
                    tool_name: pg_text(&p.tool_name),
                    arguments: to_json(&p.arguments)?,
                    reason: pg_text(&p.reason),
                    status,
                    deny_reason: deny.map(pg_text),
                })
            })
            .collect::<Result<_, SessionError>>()?;
        Ok(ParkedRows {
            calls,
            steering: to_json(&parked.steering)?,
            follow_ups: to_json(&parked.follow_ups)?,
        })
    }
}

/// Locks session `id`'s row for the transaction (or fails with `NotFound`).
async fn lock_session_row(
    client: &impl GenericClient,
    id: &str,
    mode: &str,
) -> Result<(), SessionError> {
    client
        .query_opt(
            &format!("SELECT 1 FROM sessions WHERE id = $1 {mode}"),
            &[&id],
        )
        .await
        .map_err(query_error)?
        .map(|_| ())
        .ok_or_else(|| not_found(id))
}

/// Adds the parked calls (existing rows, and their decisions, are kept) and replaces the queue
/// snapshot, in one transaction.
pub(super) async fn save(
    client: &mut tokio_postgres::Client,
    id: &str,
    rows: &ParkedRows,
) -> Result<(), SessionError> {
    let tx = client.transaction().await.map_err(query_error)?;
    lock_session_row(&tx, id, "FOR UPDATE").await?;
    let now = now();
    for call in &rows.calls {
        tx.execute(
            "INSERT INTO pending_approvals (session_id, call_id, position, tool_name, arguments, \
             reason, status, deny_reason, created_ms) \
             VALUES ($1, $2, (SELECT COALESCE(max(position), 0) + 1 FROM pending_approvals \
             WHERE session_id = $1), $3, $4, $5, $6, $7, $8) \
             ON CONFLICT (session_id, call_id) DO NOTHING",
            &[
                &id,
                &call.call_id,
                &call.tool_name,
                &call.arguments,
                &call.reason,
                &call.status,
                &call.deny_reason,
                &now,
            ],
        )
        .await
        .map_err(query_error)?;
    }
    tx.execute(
        "INSERT INTO parked_queues (session_id, steering, follow_ups) VALUES ($1, $2, $3) \
         ON CONFLICT (session_id) DO UPDATE SET steering = EXCLUDED.steering, \
         follow_ups = EXCLUDED.follow_ups",
        &[&id, &rows.steering, &rows.follow_ups],
    )
    .await
    .map_err(query_error)?;
    tx.commit().await.map_err(query_error)
}

/// A pending call from its columns: call id, tool, arguments, reason, status, deny reason.
fn pending_from(row: &tokio_postgres::Row, first: usize) -> Result<PendingApproval, SessionError> {
    let text = |i: usize| row.try_get::<_, String>(first + i).map_err(query_error);
    let call_id = text(0)?;
    let arguments = serde_json::from_str(&text(2)?).map_err(|e| SessionError::Invalid {
        what: "pending approval",
        reason: format!("call {call_id:?}: stored arguments are not JSON: {e}"),
    })?;
    let deny: Option<String> = row.try_get(first + 5).map_err(query_error)?;
    Ok(PendingApproval {
        tool_name: text(1)?,
        arguments,
        reason: text(3)?,
        status: status_from(&text(4)?, deny),
        call_id,
    })
}

const CALL_COLUMNS: &str = "call_id, tool_name, arguments, reason, status, deny_reason";

/// The parked state of session `id` (`None` when nothing is pending), from one snapshot.
pub(super) async fn load(
    client: &mut tokio_postgres::Client,
    id: &str,
) -> Result<Option<ParkedRun>, SessionError> {
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(query_error)?;
    lock_session_row(&tx, id, "").await?;
    let pending = tx
        .query(
            &format!(
                "SELECT {CALL_COLUMNS} FROM pending_approvals WHERE session_id = $1 \
                 ORDER BY position"
            ),
            &[&id],
        )
        .await
        .map_err(query_error)?
        .iter()
        .map(|row| pending_from(row, 0))
        .collect::<Result<Vec<_>, _>>()?;
    if pending.is_empty() {
        return Ok(None);
    }
    let queues = tx
        .query_opt(
            "SELECT steering, follow_ups FROM parked_queues WHERE session_id = $1",
            &[&id],
        )
        .await
        .map_err(query_error)?;
    tx.commit().await.map_err(query_error)?;
    let parse = |text: &str| -> Result<Vec<Message>, SessionError> {
        serde_json::from_str(text).map_err(|e| SessionError::Invalid {
            what: "parked queue",
            reason: format!("stored messages are not valid: {e}"),
        })
    };
    let (steering, follow_ups) = match queues {
        Some(row) => {
            let steering: String = row.try_get(0).map_err(query_error)?;
            let follow_ups: String = row.try_get(1).map_err(query_error)?;
            (parse(&steering)?, parse(&follow_ups)?)
        }
        None => (Vec::new(), Vec::new()),
    };
    Ok(Some(ParkedRun {
        pending,
        steering,
        follow_ups,
    }))
}

/// Sets a pending call's status. A started call cannot be approved or denied again.
pub(super) async fn decide(
    client: &mut tokio_postgres::Client,
    id: &str,
    call_id: &str,
    status: &PendingStatus,
) -> Result<(), SessionError> {
    let call_id = pg_text(call_id);
    let tx = client.transaction().await.map_err(query_error)?;
    lock_session_row(&tx, id, "FOR SHARE").await?;
    let current: Option<String> = tx
        .query_opt(
            "SELECT status FROM pending_approvals WHERE session_id = $1 AND call_id = $2 \
             FOR UPDATE",
            &[&id, &call_id],
        )
        .await
        .map_err(query_error)?
        .map(|row| row.try_get(0))
        .transpose()
        .map_err(query_error)?;
    check_decidable(id, &call_id, current.as_deref(), status)?;
    let (name, deny) = status_parts(status);
    let deny = deny.map(pg_text);
    tx.execute(
        "UPDATE pending_approvals SET status = $3, deny_reason = $4, decided_ms = $5 \
         WHERE session_id = $1 AND call_id = $2",
        &[&id, &call_id, &name, &deny, &now()],
    )
    .await
    .map_err(query_error)?;
    tx.commit().await.map_err(query_error)
}

/// Every session with pending calls, most recently parked first (ties by id, bytewise, as in
/// SQLite), each with its calls in call order.
pub(super) async fn awaiting(
    client: &impl GenericClient,
) -> Result<Vec<(String, Vec<PendingApproval>)>, SessionError> {
    let rows = client
        .query(
            &format!(
                "SELECT session_id, {CALL_COLUMNS} FROM ( \
                 SELECT *, max(created_ms) OVER (PARTITION BY session_id) AS parked_ms \
                 FROM pending_approvals) p \
                 ORDER BY parked_ms DESC, session_id COLLATE \"C\", position"
            ),
            &[],
        )
        .await
        .map_err(query_error)?;
    let mut out: Vec<(String, Vec<PendingApproval>)> = Vec::new();
    for row in &rows {
        let session: String = row.try_get(0).map_err(query_error)?;
        let call = pending_from(row, 1)?;
        match out.last_mut() {
            Some((last, calls)) if *last == session => calls.push(call),
            _ => out.push((session, vec![call])),
        }
    }
    Ok(out)
}
