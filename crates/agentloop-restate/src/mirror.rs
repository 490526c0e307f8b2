//! [`MirrorStore`]: how a durable run's completed messages reach the worker's session store
//! (SQLite or PostgreSQL) so that other processes can list and follow the session live.
//!
//! The engine's state is the source of truth for the run; the store is a mirror. Two things
//! follow from that, and shape this module:
//!
//! - **Off the run's path.** An append (a SQLite commit, a PostgreSQL round trip) costs 0.2–3 ms;
//!   done inside the event callback, on the handler's task, it added that much to every turn of a
//!   durable run, before the next journaled step could start. Appends go to a writer thread
//!   instead, in the order the run emitted them; the handler waits for the writer once, at the
//!   end of the run ([`MirrorStore::flush`]), so a caller that gets the run's output finds every
//!   message in the store.
//! - **Only what the engine holds.** The handler hands a model reply to the loop before the
//!   engine has acknowledged journaling it (see `bridge.rs`); until it does, the messages the
//!   loop completes are held back ([`MirrorStore::hold`], [`MirrorStore::release`]), so the store
//!   never shows a reply that a replay after a crash could replace with another.
//! - **Replays do not append twice.** A replay after a crash emits every completed message
//!   again, in the same order. The writer reads how many messages the session holds before its
//!   first append and skips the positions an earlier attempt already stored.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use agentloop::session::{
    NewSession, SessionError, SessionFilter, SessionInfo, SessionSettings, SessionStore,
    StoredMessage,
};
use agentloop::transcript::Message;
use tokio::sync::oneshot;

/// Work for the writer thread.
enum Write {
    /// Store `message` as the session's message number `position` (0-based), unless an earlier
    /// attempt of the run stored it already.
    Append {
        position: u64,
        message: Box<Message>,
    },
    /// Answer once every earlier write is done.
    Flush(oneshot::Sender<()>),
}

/// The worker's store as the session recorder sees it during one run attempt: appends are
/// queued to a writer thread (see the module docs); everything else goes straight through.
pub(crate) struct MirrorStore {
    inner: Arc<dyn SessionStore>,
    /// Messages the session had when the run started.
    base: u64,
    /// Messages this attempt has produced so far.
    produced: AtomicU64,
    writes: mpsc::Sender<Write>,
    /// While a reply is not yet journaled: the appends held back until it is.
    held: Mutex<Option<Vec<Write>>>,
}

impl MirrorStore {
    /// A mirror of session `new`'s id in `inner` for a run that starts after `base` messages.
    /// The writer creates the session first if it does not exist yet (another worker may create
    /// it at the same moment; that is fine).
    pub(crate) fn new(inner: Arc<dyn SessionStore>, new: NewSession, base: u64) -> Self {
        let (writes, queue) = mpsc::channel();
        let store = inner.clone();
        let spawned = std::thread::Builder::new()
            .name("agentloop-mirror".to_owned())
            .spawn(move || write_all(store.as_ref(), new, queue));
        if let Err(error) = spawned {
            // The run goes on without a mirror; its appends are dropped with the queue.
            tracing::error!(%error, "cannot start the session mirror's writer thread");
        }
        MirrorStore {
            inner,
            base,
            produced: AtomicU64::new(0),
            writes,
            held: Mutex::new(None),
        }
    }

    /// Holds back the appends from now on, until [`MirrorStore::release`]: the loop got a reply
    /// the engine has not acknowledged yet.
    pub(crate) fn hold(&self) {
        if let Ok(mut held) = self.held.lock() {
            held.get_or_insert_with(Vec::new);
        }
    }

    /// Queues the appends held back, in order, and stops holding: the reply is journaled.
    pub(crate) fn release(&self) {
        let held = self.held.lock().ok().and_then(|mut held| held.take());
        for write in held.into_iter().flatten() {
            // A send fails only when the writer thread could not start (logged then).
            let _ = self.writes.send(write);
        }
    }

    /// Queues `write`, or holds it back (see [`MirrorStore::hold`]).
    fn queue(&self, write: Write) {
        if let Ok(mut held) = self.held.lock()
            && let Some(held) = held.as_mut()
        {
            held.push(write);
            return;
        }
        // A send fails only when the writer thread could not start (logged then).
        let _ = self.writes.send(write);
    }

    /// Waits until every message queued so far is stored (or failed, which the writer logs);
    /// messages held back are not waited for.
    pub(crate) async fn flush(&self) {
        let (done, wait) = oneshot::channel();
        if self.writes.send(Write::Flush(done)).is_ok() {
            // An error means the writer is gone: nothing more will be stored anyway.
            let _ = wait.await;
        }
    }
}

/// The writer thread's body: ensure the session exists, learn how many messages it holds, then
/// store each queued message whose position is new, until the mirror is dropped. Appends queued
/// together (a turn's reply and tool results, released at once) go in one transaction.
fn write_all(store: &dyn SessionStore, new: NewSession, queue: mpsc::Receiver<Write>) {
    let id = new.id.clone().unwrap_or_default();
    if let Err(error) = ensure_session(store, new) {
        tracing::error!(%error, session = %id, "cannot create the mirrored session");
    }
    // Read lazily (and again after a failure), before the first append of this attempt.
    let mut stored: Option<u64> = None;
    let mut next = queue.recv().ok();
    while let Some(write) = next.take() {
        match write {
            Write::Flush(done) => {
                let _ = done.send(());
            }
            Write::Append { position, message } => {
                let mut batch = vec![(position, message)];
                loop {
                    match queue.try_recv() {
                        Ok(Write::Append { position, message }) => batch.push((position, message)),
                        // Answered once the batch before it is stored.
                        Ok(flush) => {
                            next = Some(flush);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                store_new(store, &id, &mut stored, batch);
            }
        }
        if next.is_none() {
            next = queue.recv().ok();
        }
    }
}

/// Appends the messages of `batch` whose positions the session does not hold yet.
fn store_new(
    store: &dyn SessionStore,
    id: &str,
    stored: &mut Option<u64>,
    batch: Vec<(u64, Box<Message>)>,
) {
    let count = match *stored {
        Some(count) => count,
        None => match store.info(id) {
            Ok(info) => *stored.insert(info.message_count),
            Err(error) => {
                tracing::error!(%error, session = %id, "cannot mirror messages");
                return;
            }
        },
    };
    // Positions below `count` were stored by an earlier attempt of this run.
    let messages: Vec<Message> = batch
        .into_iter()
        .filter(|(position, _)| *position >= count)
        .map(|(_, message)| *message)
        .collect();
    if messages.is_empty() {
        return;
    }
    if let Err(error) = store.append_all(id, &messages) {
        tracing::error!(
            %error,
            session = %id,
            messages = messages.len(),
            "cannot mirror messages into the session store"
        );
    }
}

fn ensure_session(store: &dyn SessionStore, new: NewSession) -> Result<(), SessionError> {
    let id = new.id.clone().unwrap_or_default();
    match store.info(&id) {
        Ok(_) => Ok(()),
        Err(SessionError::NotFound { .. }) => match store.create(new) {
            Ok(_) => Ok(()),
            // Another worker created it meanwhile.
            Err(_) if store.info(&id).is_ok() => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

impl SessionStore for MirrorStore {
    fn create_with(
        &self,
        new: NewSession,
        messages: &[Message],
    ) -> Result<SessionInfo, SessionError> {
        self.inner.create_with(new, messages)
    }
    fn info(&self, id: &str) -> Result<SessionInfo, SessionError> {
        self.inner.info(id)
    }
    fn list(&self) -> Result<Vec<SessionInfo>, SessionError> {
        self.inner.list()
    }
    fn set_settings(&self, id: &str, settings: &SessionSettings) -> Result<(), SessionError> {
        self.inner.set_settings(id, settings)
    }
    fn list_where(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>, SessionError> {
        self.inner.list_where(filter)
    }
    /// Queues the messages for the writer and returns the sequence numbers they will have
    /// (1-based positions); a failure to store them is logged by the writer, not returned.
    fn append_all(&self, _id: &str, messages: &[Message]) -> Result<Vec<u64>, SessionError> {
        let mut seqs = Vec::with_capacity(messages.len());
        for message in messages {
            let position = self.base + self.produced.fetch_add(1, Ordering::SeqCst);
            self.queue(Write::Append {
                position,
                message: Box::new(message.clone()),
            });
            seqs.push(position + 1);
        }
        Ok(seqs)
    }
    fn entries(&self, id: &str) -> Result<Vec<StoredMessage>, SessionError> {
        self.inner.entries(id)
    }
    fn set_title(&self, id: &str, title: &str) -> Result<(), SessionError> {
        self.inner.set_title(id, title)
    }
    fn delete(&self, id: &str) -> Result<(), SessionError> {
        self.inner.delete(id)
    }
    fn fork(&self, id: &str, seq: u64) -> Result<SessionInfo, SessionError> {
        self.inner.fork(id, seq)
    }
}
