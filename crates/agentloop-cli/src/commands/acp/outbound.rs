//! The one ordered queue from the agent loop's `Send` callbacks to the (not `Send`) ACP
//! connection: session updates, permission questions, requests to the client (its files and
//! terminals), and flush markers that let a prompt's response wait until every update of its
//! turn was written.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use agent_client_protocol::{
    AgentSideConnection, Client, RequestPermissionRequest, RequestPermissionResponse,
    SessionNotification, SessionUpdate,
};
use tokio::sync::{mpsc, oneshot};

/// One thing to send to the client.
pub enum Outbound {
    /// A `session/update` notification.
    Update(SessionNotification),
    /// A `session/request_permission` request; `None` answers a request that failed.
    Permission(
        RequestPermissionRequest,
        oneshot::Sender<Option<RequestPermissionResponse>>,
    ),
    /// A request to the client, made on the connection's task (it answers through a channel
    /// it captured).
    Call(ClientCall),
    /// Answered once everything queued before it was sent.
    Flush(oneshot::Sender<()>),
}

/// A request to the client: given the connection, the future that makes it and delivers the
/// answer. `Send`, so any thread can queue one; the future it returns runs on the connection's
/// (local) task.
pub type ClientCall =
    Box<dyn FnOnce(Rc<AgentSideConnection>) -> Pin<Box<dyn Future<Output = ()>>> + Send>;

/// The sending end, cheap to clone and `Send`.
#[derive(Clone)]
pub struct Queue(mpsc::UnboundedSender<Outbound>);

impl Queue {
    /// Queues a `session/update` for `session_id`.
    pub fn update(&self, session_id: &str, update: SessionUpdate) {
        let _ = self.0.send(Outbound::Update(SessionNotification::new(
            session_id.to_owned(),
            update,
        )));
    }

    /// Asks the client for permission; `None` when the connection is gone or the request failed.
    pub async fn permission(
        &self,
        request: RequestPermissionRequest,
    ) -> Option<RequestPermissionResponse> {
        let (reply, answer) = oneshot::channel();
        self.0.send(Outbound::Permission(request, reply)).ok()?;
        answer.await.ok().flatten()
    }

    /// Queues a request to the client; false when the connection is gone.
    pub fn call(&self, call: ClientCall) -> bool {
        self.0.send(Outbound::Call(call)).is_ok()
    }

    /// Waits until everything queued so far was sent.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        if self.0.send(Outbound::Flush(done)).is_ok() {
            let _ = flushed.await;
        }
    }
}

/// A new queue and its receiving end (for [`drain`]).
pub fn queue() -> (Queue, mpsc::UnboundedReceiver<Outbound>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (Queue(sender), receiver)
}

/// Sends the queued items in order. A permission request runs in its own local task: updates
/// keep flowing while the person decides.
pub async fn drain(
    connection: Rc<AgentSideConnection>,
    mut receiver: mpsc::UnboundedReceiver<Outbound>,
) {
    while let Some(item) = receiver.recv().await {
        match item {
            Outbound::Update(notification) => {
                if let Err(e) = connection.session_notification(notification).await {
                    eprintln!("agentloop: acp: cannot send a session update: {e}");
                }
            }
            Outbound::Permission(request, reply) => {
                let connection = connection.clone();
                tokio::task::spawn_local(async move {
                    let answer = match connection.request_permission(request).await {
                        Ok(answer) => Some(answer),
                        Err(e) => {
                            eprintln!("agentloop: acp: the permission request failed: {e}");
                            None
                        }
                    };
                    let _ = reply.send(answer);
                });
            }
            Outbound::Call(call) => {
                // In its own task, like a permission request: updates keep flowing meanwhile.
                tokio::task::spawn_local(call(connection.clone()));
            }
            Outbound::Flush(done) => {
                let _ = done.send(());
            }
        }
    }
}
