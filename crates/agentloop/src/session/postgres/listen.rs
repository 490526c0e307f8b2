//! Live follow on PostgreSQL: a connection of its own that `LISTEN`s for the notification the
//! append transaction sends (see the schema's `messages_notify` trigger), and wakes the
//! [`Follower`](crate::session::Follower) waiting on it.

use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::Duration;

use futures::StreamExt;
use tokio_postgres::{AsyncMessage, Client, NoTls};

use super::bridge::Bridge;
use super::schema::CHANNEL;
use super::{pg_error, query_error};
use crate::session::{ChangeSignal, POLL_INTERVAL, SessionError};

/// Notifications for one session, as a [`ChangeSignal`].
pub(super) struct Listener {
    changes: Receiver<()>,
    /// Keeps the listening connection open.
    _client: Client,
    /// Keeps the runtime that drives the connection running.
    bridge: Option<Arc<Bridge>>,
}

impl Listener {
    /// Keeps `bridge` (the store's runtime) alive as long as the listener.
    pub(super) fn keeping(mut self, bridge: Arc<Bridge>) -> Listener {
        self.bridge = Some(bridge);
        self
    }
}

impl ChangeSignal for Listener {
    fn wait(&mut self, timeout: Duration) -> bool {
        match self.changes.recv_timeout(timeout) {
            Ok(()) => {
                while self.changes.try_recv().is_ok() {}
                true
            }
            Err(RecvTimeoutError::Timeout) => false,
            // The connection ended: behave like a polled store.
            Err(RecvTimeoutError::Disconnected) => {
                std::thread::sleep(timeout.min(POLL_INTERVAL));
                false
            }
        }
    }
}

/// Opens a connection that listens for notifications with payload `want`.
pub(super) async fn subscribe(
    config: tokio_postgres::Config,
    want: String,
) -> Result<Listener, SessionError> {
    let (client, mut connection) = config
        .connect(NoTls)
        .await
        .map_err(|e| pg_error("cannot open the follower's connection", e))?;
    let (changed, changes) = channel();
    tokio::spawn(async move {
        let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
        while let Some(message) = messages.next().await {
            match message {
                Ok(AsyncMessage::Notification(n)) if n.payload() == want => {
                    if changed.send(()).is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(_) => break,
            }
        }
    });
    client
        .batch_execute(&format!("LISTEN {CHANNEL}"))
        .await
        .map_err(query_error)?;
    Ok(Listener {
        changes,
        _client: client,
        bridge: None,
    })
}
