//! One writer per session on PostgreSQL: a session-level advisory lock, held by a connection
//! of its own for as long as the [`SessionLock`](crate::session::SessionLock) lives.
//!
//! The lock connection's `application_name` is `agentloop pid=N host=H`, so a process refused
//! the lock can say who holds it (`pg_locks` joined with `pg_stat_activity`). The server
//! releases the lock when the holder unlocks (dropping the lock), or when its connection ends —
//! the holder's process exiting in any way closes it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_postgres::{Client, NoTls};

use super::bridge::Bridge;
use super::{pg_error, query_error};
use crate::session::SessionError;

/// How often a waiting writer tries the lock again.
const RETRY: Duration = Duration::from_millis(50);

/// How long releasing a lock may take before the connection is simply closed (which releases
/// it too, a moment later).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

/// This machine's name, for the lock holder's description.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty() && !h.contains(char::is_whitespace))
        .unwrap_or_else(|| "unknown".into())
}

/// The `application_name` of a lock connection.
fn holder_name() -> String {
    format!("agentloop pid={} host={}", std::process::id(), host_name())
}

/// "process N on H" from a lock connection's `application_name`, else "another process".
fn describe_holder(application_name: Option<&str>) -> String {
    let mut pid = None;
    let mut host = None;
    for word in application_name.unwrap_or("").split_whitespace() {
        if let Some(p) = word.strip_prefix("pid=") {
            pid = p.parse::<u32>().ok();
        } else if let Some(h) = word.strip_prefix("host=") {
            host = Some(h);
        }
    }
    match (pid, host) {
        (Some(pid), Some(host)) => format!("process {pid} on {host}"),
        (Some(pid), None) => format!("process {pid}"),
        _ => "another process".into(),
    }
}

/// Who holds advisory lock `key` in this database, as [`describe_holder`] says it.
async fn holder(client: &Client, key: i64) -> String {
    let bits = u64::from_ne_bytes(key.to_ne_bytes());
    let (high, low) = ((bits >> 32) as u32, (bits & 0xffff_ffff) as u32);
    let name = client
        .query_opt(
            "SELECT a.application_name FROM pg_locks l \
             LEFT JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
             AND l.classid = $1 AND l.objid = $2 \
             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             LIMIT 1",
            &[&high, &low],
        )
        .await
        .ok()
        .flatten()
        .and_then(|row| row.try_get::<_, Option<String>>(0).ok().flatten());
    describe_holder(name.as_deref())
}

/// Opens a lock connection and takes advisory lock `key` (session `id`), retrying until `wait`
/// has passed; then fails with [`SessionError::InUse`] naming the holder.
pub(super) async fn acquire(
    mut config: tokio_postgres::Config,
    key: i64,
    id: &str,
    wait: Duration,
) -> Result<Client, SessionError> {
    config.application_name(holder_name());
    let (client, connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| pg_error("cannot open the session lock's connection", e))?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    let deadline = Instant::now() + wait;
    loop {
        let taken: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .await
            .and_then(|row| row.try_get(0))
            .map_err(query_error)?;
        if taken {
            return Ok(client);
        }
        if Instant::now() >= deadline {
            return Err(SessionError::InUse {
                id: id.to_owned(),
                holder: holder(&client, key).await,
            });
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// A held session lock: unlocks (and closes its connection) when dropped.
pub(super) struct Held {
    client: Option<Client>,
    key: i64,
    bridge: Arc<Bridge>,
}

impl Held {
    pub(super) fn new(client: Client, key: i64, bridge: Arc<Bridge>) -> Held {
        Held {
            client: Some(client),
            key,
            bridge,
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let key = self.key;
        // Waits for the unlock, so the session is free for the next writer when this returns.
        let _ = self.bridge.run(async move {
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 1] = [&key];
            let unlock = client.execute("SELECT pg_advisory_unlock($1)", &params);
            let _ = tokio::time::timeout(RELEASE_TIMEOUT, unlock).await;
            drop(client);
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holders_are_described_from_their_connection_name() {
        assert_eq!(
            describe_holder(Some("agentloop pid=42 host=box")),
            "process 42 on box"
        );
        assert_eq!(describe_holder(Some("agentloop pid=42")), "process 42");
        assert_eq!(describe_holder(Some("psql")), "another process");
        assert_eq!(describe_holder(None), "another process");
        assert!(holder_name().starts_with(&format!("agentloop pid={} host=", std::process::id())));
    }
}
