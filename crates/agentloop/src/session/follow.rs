//! [`Follower`]: a session's messages as they are appended, by any process (`agentloop sessions
//! follow`, a dashboard next to a Restate worker).
//!
//! A follower asks its store for the messages after the last one it returned
//! ([`SessionStore::entries_after`]) and, while there are none, waits for a change. Stores that
//! can signal a change ([`SessionStore::subscribe`]: the PostgreSQL store listens for the
//! `NOTIFY` its append transaction sends) wake it at once; the others (SQLite) are polled every
//! [`POLL_INTERVAL`]. Signals are only hints: the follower re-reads the store at least every
//! [`RECHECK_INTERVAL`] even without one, so a lost notification delays a message, never loses
//! it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{SessionError, SessionStore, StoredMessage};

/// How often a follower re-reads a store that cannot signal changes (SQLite).
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The longest a follower waits on a change signal before re-reading the store anyway.
pub const RECHECK_INTERVAL: Duration = Duration::from_secs(1);

/// Wakes a [`Follower`] when its session may have changed; returned by
/// [`SessionStore::subscribe`].
pub trait ChangeSignal: Send {
    /// Blocks until the session may have new messages, or `timeout` has passed. Returns `true`
    /// when a change was signalled. Spurious wake-ups are allowed.
    fn wait(&mut self, timeout: Duration) -> bool;
}

/// Reads a session's messages as they are appended.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use agentloop::session::{Follower, NewSession, SessionStore, SqliteStore};
/// use agentloop::transcript::Message;
///
/// # fn main() -> Result<(), agentloop::session::SessionError> {
/// let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open_in_memory()?);
/// let session = store.create_with(NewSession::new(), &[Message::user("hi")])?;
/// let mut follower = Follower::new(store.clone(), &session.id, 0)?;
/// assert_eq!(follower.next_batch(Duration::ZERO)?.len(), 1); // what is already there
/// store.append(&session.id, &Message::user("more"))?;
/// let batch = follower.next_batch(Duration::from_secs(5))?;
/// assert_eq!(batch[0].seq, 2);
/// assert!(follower.next_batch(Duration::from_millis(10))?.is_empty()); // nothing new
/// # Ok(()) }
/// ```
pub struct Follower {
    store: Arc<dyn SessionStore>,
    id: String,
    after: u64,
    signal: Option<Box<dyn ChangeSignal>>,
}

impl std::fmt::Debug for Follower {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Follower")
            .field("id", &self.id)
            .field("after", &self.after)
            .field("signalled", &self.signal.is_some())
            .finish_non_exhaustive()
    }
}

impl Follower {
    /// Follows session `id` from the message after sequence number `after` (`0`: from the
    /// first). Subscribes before the first read, so nothing appended in between is missed.
    /// Fails with [`SessionError::NotFound`] when the session does not exist.
    pub fn new(
        store: Arc<dyn SessionStore>,
        id: &str,
        after: u64,
    ) -> Result<Follower, SessionError> {
        let signal = store.subscribe(id)?;
        store.info(id)?;
        Ok(Follower {
            store,
            id: id.to_owned(),
            after,
            signal,
        })
    }

    /// The session followed.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The sequence number of the last message returned (or the starting point).
    pub fn last_seq(&self) -> u64 {
        self.after
    }

    /// Whether the store wakes this follower on changes (`false`: it polls).
    pub fn is_signalled(&self) -> bool {
        self.signal.is_some()
    }

    /// The messages appended after the last one returned, in sequence order, waiting up to
    /// `timeout` for at least one; empty when none came in time. Blocks the calling thread
    /// (use `spawn_blocking` from async code). Fails with [`SessionError::NotFound`] once the
    /// session is deleted.
    pub fn next_batch(&mut self, timeout: Duration) -> Result<Vec<StoredMessage>, SessionError> {
        let deadline = Instant::now() + timeout;
        loop {
            let batch = self.store.entries_after(&self.id, self.after)?;
            if let Some(last) = batch.last() {
                self.after = last.seq;
                return Ok(batch);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(batch);
            }
            let left = deadline - now;
            match &mut self.signal {
                Some(signal) => {
                    signal.wait(left.min(RECHECK_INTERVAL));
                }
                None => std::thread::sleep(left.min(POLL_INTERVAL)),
            }
        }
    }
}
