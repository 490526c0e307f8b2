//! The store's own Tokio runtime, and how the blocking [`SessionStore`](crate::session::SessionStore)
//! methods run async client code on it.
//!
//! The trait's methods are synchronous and are called both from plain threads and from inside
//! Tokio tasks (the recorder appends from the agent's task), so they cannot `block_on` the
//! caller's runtime (that panics inside one). Instead the store owns a current-thread runtime
//! on a thread of its own, which drives the pool's connections; each method sends its future
//! there and blocks the calling thread on a channel until it completes — exactly as a SQLite
//! call blocks it. The thread ends by itself once the store and everything holding the
//! [`Bridge`] (session locks, followers) are dropped.

use std::future::Future;
use std::pin::Pin;

use tokio::sync::mpsc;

use crate::session::SessionError;

type Job = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A handle on the store's runtime thread.
#[derive(Debug)]
pub(super) struct Bridge {
    jobs: mpsc::UnboundedSender<Job>,
}

fn stopped() -> SessionError {
    SessionError::Postgres {
        message: "the store's runtime thread stopped".into(),
        source: None,
    }
}

impl Bridge {
    /// Starts the runtime thread.
    pub(super) fn start() -> Result<Bridge, SessionError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let (jobs, mut queue) = mpsc::unbounded_channel::<Job>();
        std::thread::Builder::new()
            .name("agentloop-postgres".into())
            .spawn(move || {
                runtime.block_on(async move {
                    while let Some(job) = queue.recv().await {
                        tokio::spawn(job);
                    }
                });
                // Dropping the runtime here (a plain thread) cancels what is left: the idle
                // pool connections' tasks.
            })?;
        Ok(Bridge { jobs })
    }

    /// Runs `future` on the store's runtime and blocks the calling thread until it is done.
    pub(super) fn run<T, F>(&self, future: F) -> Result<T, SessionError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, SessionError>> + Send + 'static,
    {
        let (done, result) = std::sync::mpsc::sync_channel(1);
        self.jobs
            .send(Box::pin(async move {
                let _ = done.send(future.await);
            }))
            .map_err(|_| stopped())?;
        result.recv().map_err(|_| stopped())?
    }
}
