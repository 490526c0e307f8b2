//! A synchronous view over the async API, for applications without an async runtime of their
//! own (the tool contract's `sync()`; in the spirit of `reqwest::blocking`).
//!
//! [`SyncRuntime`] is where async work runs on behalf of plain functions; [`BlockingTools`] calls
//! tools through it, with exactly the executor's checks (schema validation, approval hook,
//! timeouts). This module owns only the bridging: it adds no behaviour of its own to the calls.
//!
//! # Which runtime
//!
//! - [`SyncRuntime::new`] / [`BlockingTools::new`]: a dedicated background thread runs a private
//!   Tokio runtime. Use it from a plain `fn main`, a CLI, a test, a thread pool — anywhere there is
//!   no runtime, or where you do not want to share one. Dropping the last handle to it stops the
//!   runtime and joins its thread (tasks still running are cancelled; a blocking tool handler still
//!   running gets [`SHUTDOWN_GRACE`] to finish, then is left behind).
//! - [`SyncRuntime::with_handle`] / [`BlockingTools::with_handle`]: run on a runtime the
//!   application already has (pass its [`Handle`]). No extra thread; the runtime's shutdown stays
//!   the application's business and dropping the view leaves it running. Use it from threads
//!   *outside* that runtime's async tasks: plain threads, or `tokio::task::spawn_blocking` closures.
//!
//! The calling thread polls the work itself (through [`Handle::block_on`], which needs no `Send`
//! future and borrows freely) while the runtime supplies timers, I/O and the blocking pool. That
//! is legal on any thread that is not running async code: a plain thread, `fn main`, or the
//! blocking context of another runtime (a `spawn_blocking` closure), so there is no "Cannot start
//! a runtime from within a runtime" panic there. It is not meant for async code: inside an
//! `async fn` or a task, await the async API instead (calling a blocking view there panics with
//! Tokio's message rather than stalling a worker thread).
//!
//! A shared *current-thread* runtime provides timers and I/O only while some thread is inside its
//! `Runtime::block_on` (for example the `main` that spawned the blocking closure); a multi-thread
//! runtime always does.
//!
//! ```
//! use agentloop::blocking::BlockingTools;
//! use agentloop::tooling::{Deps, Registry};
//! use agentloop::tool;
//! use std::sync::Arc;
//!
//! /// Shout the text.
//! #[tool]
//! fn shout(text: String) -> String {
//!     text.to_uppercase()
//! }
//!
//! // A plain function: no runtime anywhere.
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     let tools = BlockingTools::new(Registry::new([shout_tool()])?, Arc::new(Deps::new()))?;
//!     let out = tools.call("shout", serde_json::json!({"text": "hi"}))?;
//!     assert_eq!(out.content, "HI");
//!     Ok(())
//! }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use serde_json::Value;
use tokio::runtime::Handle;

use crate::tooling::{
    ExecOptions, Registry, ToolDeps, ToolError, ToolErrorKind, ToolOutput, run_tools_with,
};
use crate::transcript::{ToolCallPart, ToolResultPart};

/// How long dropping a private runtime waits for blocking tool handlers still running.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// Where async work runs on behalf of synchronous callers: a private runtime on a background
/// thread ([`new`](SyncRuntime::new)) or a shared one ([`with_handle`](SyncRuntime::with_handle)).
///
/// Cheap to clone; a private runtime stops when the last clone is dropped. Share one between
/// several blocking views with [`BlockingTools::with_runtime`].
///
/// ```
/// use agentloop::blocking::SyncRuntime;
/// use std::time::Duration;
///
/// let runtime = SyncRuntime::new()?;
/// let answer = runtime.run(async {
///     tokio::time::sleep(Duration::from_millis(1)).await;
///     42
/// });
/// assert_eq!(answer, 42);
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SyncRuntime {
    inner: Arc<RuntimeInner>,
}

#[derive(Debug)]
struct RuntimeInner {
    handle: Handle,
    /// Present for a private runtime only.
    owned: Option<OwnedRuntime>,
}

#[derive(Debug)]
struct OwnedRuntime {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl SyncRuntime {
    /// Starts a private runtime on a dedicated background thread (`agentloop-blocking`).
    ///
    /// Fails only if the runtime or the thread cannot be created (the OS refused resources).
    pub fn new() -> std::io::Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .thread_name("agentloop-blocking")
            .build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::Builder::new()
            .name("agentloop-blocking".to_owned())
            .spawn(move || {
                // The thread drives the runtime (its timers, I/O and spawned tasks) until asked to
                // stop; callers poll their own futures through `Handle::block_on`.
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })?;
        Ok(SyncRuntime {
            inner: Arc::new(RuntimeInner {
                handle,
                owned: Some(OwnedRuntime {
                    stop: Some(stop),
                    thread: Some(thread),
                }),
            }),
        })
    }

    /// Uses a runtime the application already has. Dropping the view does not stop it.
    pub fn with_handle(handle: Handle) -> Self {
        SyncRuntime {
            inner: Arc::new(RuntimeInner {
                handle,
                owned: None,
            }),
        }
    }

    /// The runtime's handle (to spawn work on it, or to share it with another view).
    pub fn handle(&self) -> &Handle {
        &self.inner.handle
    }

    /// Whether this is a private runtime (stopped on drop) rather than a shared one.
    pub fn is_private(&self) -> bool {
        self.inner.owned.is_some()
    }

    /// Runs `future` to completion on the calling thread, with this runtime's context (timers,
    /// I/O, `spawn`, `spawn_blocking`), and returns its output. The future need not be `Send`
    /// and may borrow.
    ///
    /// # Panics
    ///
    /// When called from async code (inside a task or an `async fn` polled by a runtime), as
    /// [`Handle::block_on`] does; and when the future panics.
    pub fn run<F: Future>(&self, future: F) -> F::Output {
        self.inner.handle.block_on(future)
    }
}

impl Drop for OwnedRuntime {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            // Never join from the runtime's own thread (the last clone dropped inside one of its
            // tasks): that would wait for itself. The thread then ends on its own.
            if thread.thread().id() != thread::current().id() {
                let _ = thread.join();
            }
        }
    }
}

/// Calls tools from synchronous code: a [`Registry`], a deps bundle and a [`SyncRuntime`].
///
/// Every call goes through the executor ([`run_tools_with`]) exactly as in an agent run: schema
/// validation, the deps' approval hook, timeouts, panics turned into error results.
pub struct BlockingTools<D> {
    registry: Registry<D>,
    deps: Arc<D>,
    runtime: SyncRuntime,
    options: ExecOptions,
    next_call: AtomicU64,
}

impl<D> std::fmt::Debug for BlockingTools<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingTools")
            .field("registry", &self.registry)
            .field("runtime", &self.runtime)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl<D: ToolDeps> BlockingTools<D> {
    /// A view on a private runtime (see [`SyncRuntime::new`]).
    pub fn new(registry: Registry<D>, deps: Arc<D>) -> std::io::Result<Self> {
        Ok(Self::with_runtime(registry, deps, SyncRuntime::new()?))
    }

    /// A view on a runtime the application shares (see [`SyncRuntime::with_handle`]).
    pub fn with_handle(registry: Registry<D>, deps: Arc<D>, handle: Handle) -> Self {
        Self::with_runtime(registry, deps, SyncRuntime::with_handle(handle))
    }

    /// A view on an existing [`SyncRuntime`] (e.g. one shared with other blocking views).
    pub fn with_runtime(registry: Registry<D>, deps: Arc<D>, runtime: SyncRuntime) -> Self {
        BlockingTools {
            registry,
            deps,
            runtime,
            options: ExecOptions::default(),
            next_call: AtomicU64::new(1),
        }
    }

    /// Replaces the executor options (default timeout, retries, observer, abort signal…).
    pub fn exec_options(mut self, options: ExecOptions) -> Self {
        self.options = options;
        self
    }

    /// Calls the tool `name` with a JSON object of arguments and waits for its result. The call
    /// id is `blocking-<n>`. A failed call (unknown tool, invalid arguments, denied, timed out,
    /// handler error…) is an `Err` with the same [`ToolError`] the model would see.
    pub fn call(&self, name: &str, args: Value) -> Result<ToolOutput, ToolError> {
        let id = format!(
            "blocking-{}",
            self.next_call.fetch_add(1, Ordering::Relaxed)
        );
        let call = ToolCallPart::new(id, name, args);
        let outcome = self
            .runtime
            .run(run_tools_with(
                std::slice::from_ref(&call),
                &self.registry,
                &self.deps,
                &self.options,
            ))
            .pop();
        match outcome {
            Some(outcome) => match outcome.error {
                Some(error) => Err(error),
                None => Ok(ToolOutput {
                    content: outcome.result.content,
                    images: outcome.result.images,
                }),
            },
            None => Err(ToolError::with_kind(
                ToolErrorKind::Aborted,
                format!("Tool \"{name}\" produced no result."),
            )),
        }
    }

    /// Runs a batch of calls (concurrently when the tools allow it) and returns one result per
    /// call, in call order: [`run_tools`](crate::tooling::run_tools) for synchronous code.
    pub fn run_tools(&self, calls: &[ToolCallPart]) -> Vec<ToolResultPart> {
        self.runtime
            .run(run_tools_with(
                calls,
                &self.registry,
                &self.deps,
                &self.options,
            ))
            .into_iter()
            .map(|outcome| outcome.result)
            .collect()
    }

    /// The tools.
    pub fn registry(&self) -> &Registry<D> {
        &self.registry
    }

    /// The deps bundle handed to every call.
    pub fn deps(&self) -> &Arc<D> {
        &self.deps
    }

    /// The runtime the calls run on.
    pub fn runtime(&self) -> &SyncRuntime {
        &self.runtime
    }
}

/// A synchronous view of an [`AgentLoop`](crate::agent::AgentLoop): run an agent from plain
/// functions.
///
/// ```
/// use agentloop::agent::{AgentLoop, AgentLoopConfig};
/// use agentloop::blocking::BlockingAgent;
/// use agentloop::model::{ScriptedModel, ScriptedTurn};
/// use agentloop::transcript::Message;
///
/// let agent = AgentLoop::new(AgentLoopConfig::default(), ScriptedModel::new([ScriptedTurn::text("hi")]));
/// let blocking = BlockingAgent::new(agent).unwrap();
/// let outcome = blocking.run(vec![Message::user("hello")], vec![]).unwrap();
/// assert_eq!(outcome.final_text(), "hi");
/// ```
pub struct BlockingAgent<D: ToolDeps = crate::tooling::Deps> {
    agent: crate::agent::AgentLoop<D>,
    runtime: SyncRuntime,
}

impl<D: ToolDeps> std::fmt::Debug for BlockingAgent<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingAgent")
            .field("agent", &self.agent)
            .field("runtime", &self.runtime)
            .finish()
    }
}

impl<D: ToolDeps> BlockingAgent<D> {
    /// Wraps `agent` with its own background runtime.
    pub fn new(agent: crate::agent::AgentLoop<D>) -> std::io::Result<Self> {
        Ok(BlockingAgent {
            agent,
            runtime: SyncRuntime::new()?,
        })
    }

    /// Wraps `agent`, running on a runtime the caller shares.
    pub fn with_runtime(agent: crate::agent::AgentLoop<D>, runtime: SyncRuntime) -> Self {
        BlockingAgent { agent, runtime }
    }

    /// Runs the loop to completion (see [`AgentLoop::run`](crate::agent::AgentLoop::run)).
    pub fn run(
        &self,
        prompts: Vec<crate::transcript::Message>,
        context: Vec<crate::transcript::Message>,
    ) -> Result<crate::agent::RunOutcome, crate::agent::AgentError> {
        self.runtime.run(self.agent.run(prompts, context))
    }

    /// Continues a conversation (see
    /// [`AgentLoop::run_continue`](crate::agent::AgentLoop::run_continue)).
    pub fn run_continue(
        &self,
        context: Vec<crate::transcript::Message>,
    ) -> Result<crate::agent::RunOutcome, crate::agent::AgentError> {
        self.runtime.run(self.agent.run_continue(context))
    }

    /// The agent (to steer, abort or inspect it from another thread).
    pub fn agent(&self) -> &crate::agent::AgentLoop<D> {
        &self.agent
    }
}
