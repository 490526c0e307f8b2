//! A worker: the configuration every run on this process uses (model, workspace, approval policy,
//! session store) and the HTTP endpoint that serves [`AgentSession`] and [`ToolExecutor`] to the
//! Restate server.

use std::net::SocketAddr;
use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, Workspace};
use agentloop::model::{Model, ReasoningLevel};
use agentloop::session::SessionStore;
use std::future::Future;

use hyper_util::rt::{TokioExecutor, TokioIo};
use restate_sdk::hyper::HyperEndpoint;
use restate_sdk::prelude::Endpoint;
use tokio::net::TcpListener;

use crate::executor::ToolExecutor;
use crate::session::AgentSession;

/// What every run on a worker uses.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The model adapter.
    pub model: Arc<dyn Model>,
    /// The model id (recorded on sessions and passed to the loop).
    pub model_name: Option<String>,
    /// Where the built-in tools work. Every worker that may execute a session's tool calls must
    /// see the same workspace (a shared directory), as with any tool that has side effects.
    pub workspace: Workspace,
    /// Which calls need a person: under `Mutating` a mutating call waits on an awakeable until
    /// `approve` resolves it; `Never` denies them; `Always` runs everything.
    pub policy: ApprovalPolicy,
    /// System prompt (`None`: a default that describes the workspace).
    pub system_prompt: Option<String>,
    /// Reasoning effort.
    pub reasoning: Option<ReasoningLevel>,
    /// Model-call ceiling per run.
    pub max_turns: Option<u32>,
    /// Where completed messages are mirrored as they complete, so other processes (the CLI,
    /// other workers) can list and follow sessions. The engine's state stays the source of
    /// truth for the run itself.
    pub store: Option<Arc<dyn SessionStore>>,
    /// Send a run's next model request while the engine is still journaling the reply before
    /// it (`true` in the binary; `agentloop-worker --no-pipeline` turns it off). A turn then
    /// costs about one engine round trip, not a round trip plus the model call; the price is
    /// that a worker that dies inside that window has made one request for nothing (the replay
    /// makes it again). Replays never send a request early. See the crate docs.
    pub pipeline_model_calls: bool,
    /// Offer a run's model the `task` tool (`{"prompt"}`): each call runs a child agent (same
    /// model, tools and workspace, no `task` of its own) as a durable invocation of its own,
    /// `AgentSession/{session id}:{call id}/task`, started from the parent's journal (`true`
    /// in the binary; `agentloop-worker --no-task` turns it off). See [`AgentSession`].
    pub task_tool: bool,
}

impl std::fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("provider", &self.model.provider())
            .field("model_name", &self.model_name)
            .field("workspace", &self.workspace.root())
            .field("policy", &self.policy)
            .field("max_turns", &self.max_turns)
            .field("store", &self.store.is_some())
            .field("pipeline_model_calls", &self.pipeline_model_calls)
            .field("task_tool", &self.task_tool)
            .finish_non_exhaustive()
    }
}

/// Why a worker could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkerError {
    /// The configuration is unusable.
    #[error("invalid worker configuration: {0}")]
    Config(String),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// A Restate service endpoint for agent runs.
#[derive(Clone, Debug)]
pub struct Worker {
    config: Arc<WorkerConfig>,
}

impl Worker {
    /// A worker with this configuration.
    pub fn new(config: WorkerConfig) -> Self {
        Worker {
            config: Arc::new(config),
        }
    }

    /// The endpoint serving `AgentSession` and `ToolExecutor`.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::builder()
            .bind(AgentSession::new(self.config.clone()))
            .bind(ToolExecutor::new(&self.config))
            .build()
    }

    /// Serves the endpoint on `addr` until the process is stopped. Register it with the Restate
    /// server (`POST {admin}/deployments {"uri": "http://ADDR"}`).
    ///
    /// The accept loop is this crate's rather than the SDK's `HttpServer`, for one reason: it
    /// sets `TCP_NODELAY` on every connection. The engine waits for each journal entry (a model
    /// step's result is a few kilobytes); with Nagle's algorithm on, such a write waits for the
    /// acknowledgement of the previous segment, which the server delays by up to 40 ms. Measured
    /// with the SDK's server: a journaled model step took ~45 ms instead of ~3 ms.
    pub async fn serve(self, addr: SocketAddr) -> Result<(), WorkerError> {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| WorkerError::Listen { addr, source })?;
        serve_endpoint(self.endpoint(), listener, tokio::signal::ctrl_c()).await;
        Ok(())
    }
}

/// Serves a Restate `endpoint` on `listener` until `stop` completes, with `TCP_NODELAY` on every
/// connection (see [`Worker::serve`]): what the worker runs, public so that other endpoints
/// (the benchmark's floor handlers, an application's own services) are served alike.
pub async fn serve_endpoint(endpoint: Endpoint, listener: TcpListener, stop: impl Future) {
    let endpoint = HyperEndpoint::new(endpoint);
    let mut stop = std::pin::pin!(stop);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => return,
        };
        if let Err(error) = stream.set_nodelay(true) {
            tracing::warn!(%error, %remote, "cannot set TCP_NODELAY");
        }
        let endpoint = endpoint.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http2::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), endpoint);
            if let Err(error) = connection.await {
                tracing::warn!(%error, %remote, "connection from the Restate server failed");
            }
        });
    }
}

#[cfg(test)]
impl WorkerConfig {
    /// A configuration for unit tests: tools on `workspace`, everything approved, and a model
    /// nobody answers on (the tests that use it never call it).
    pub(crate) fn for_tests(workspace: Workspace) -> Self {
        WorkerConfig {
            model: Arc::new(agentloop::providers::OpenAiChat::new(
                agentloop::providers::ProviderConfig::new("http://127.0.0.1:9"),
            )),
            model_name: None,
            workspace,
            policy: ApprovalPolicy::Always,
            system_prompt: None,
            reasoning: None,
            max_turns: None,
            store: None,
            pipeline_model_calls: true,
            task_tool: true,
        }
    }
}
