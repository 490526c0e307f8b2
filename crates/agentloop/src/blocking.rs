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
//! Outside any runtime (a plain thread, `fn main`) the calling thread polls the work itself
//! (through [`Handle::block_on`], which needs no `Send` future and borrows freely) while the
//! runtime supplies timers, I/O and the blocking pool.
//!
//! # Inside a runtime
//!
//! Where [`Handle::try_current`] finds a runtime — async code such as a `#[tokio::main]` body or
//! a task, or a `spawn_blocking` closure — polling there is not allowed ("Cannot start a runtime
//! from within a runtime"). [`BlockingAgent`] and [`BlockingTools`] then run the work on a
//! short-lived helper thread of their own and wait for it, so they work (blocking only the
//! calling thread) instead of panicking. The one thing no thread can do is wait for a
//! current-thread runtime from that same runtime's async code (its only thread would wait for
//! itself): a view on such a shared runtime ([`SyncRuntime::with_handle`]) called from there
//! gets [`BlockingError::InsideRuntime`] from the methods that return one, never a deadlock
//! (Tokio still prints its refusal to stderr through the panic hook).
//! [`SyncRuntime::run`], which accepts futures that are not `Send`, always polls on the calling
//! thread and panics in async code as Tokio does; [`SyncRuntime::run_send`] is the variant that
//! works inside a runtime. Inside async code, awaiting the async API is still the better choice.
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

use derive_where::derive_where;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::Duration;

use futures::StreamExt;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::runtime::Handle;

use crate::agent::output::{Output, OutputError, TypedOutcome};
use crate::agent::{AgentError, AgentEvent, AgentEventStream, AgentLoop, ParkedRun, RunOutcome};
use crate::transcript::Message;

use crate::tooling::{
    ExecOptions, Registry, ToolDeps, ToolError, ToolErrorKind, ToolOutput, run_tools_with,
};
use crate::transcript::{ToolCallPart, ToolResultPart};

/// Why a blocking call could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BlockingError {
    /// Called from the async code of the current-thread runtime the view runs on: waiting
    /// there would wait for the very thread that must do the work.
    #[error(
        "a blocking view on this current-thread runtime was called from that runtime's own async code; await the async API instead (or give the view its own runtime with SyncRuntime::new)"
    )]
    InsideRuntime,
}

impl BlockingError {
    /// True for [`BlockingError::InsideRuntime`].
    pub fn is_inside_runtime(&self) -> bool {
        matches!(self, BlockingError::InsideRuntime)
    }

    /// The same refusal as a run's error ([`AgentError::InsideRuntime`]).
    pub fn into_agent_error(self) -> AgentError {
        match self {
            BlockingError::InsideRuntime => AgentError::InsideRuntime,
        }
    }
}

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

    /// Runs a `Send` future to completion from synchronous code, wherever that code is: outside
    /// a runtime on the calling thread, inside one (async code, a `spawn_blocking` closure) on a
    /// helper thread it waits for (see [Inside a runtime](self#inside-a-runtime)).
    ///
    /// Fails with [`BlockingError::InsideRuntime`] only when called from the async code of the
    /// current-thread runtime this one shares, where nothing could ever run the future.
    pub fn run_send<F>(&self, future: F) -> Result<F::Output, BlockingError>
    where
        F: Future + Send,
        F::Output: Send,
    {
        let Ok(current) = Handle::try_current() else {
            return Ok(self.inner.handle.block_on(future));
        };
        let handle = &self.inner.handle;
        if current.id() == handle.id()
            && handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::CurrentThread
        {
            // This thread belongs to the runtime that must run the future: fine from a
            // `spawn_blocking` closure (another thread drives the runtime), impossible from its
            // async code, and nothing public tells the two apart. Tokio refuses the second
            // before it polls anything, so a refusal before the first poll is that case.
            let polled = AtomicBool::new(false);
            let watched = async {
                polled.store(true, Ordering::Relaxed);
                future.await
            };
            return match std::panic::catch_unwind(AssertUnwindSafe(|| handle.block_on(watched))) {
                Ok(output) => Ok(output),
                Err(_) if !polled.load(Ordering::Relaxed) => Err(BlockingError::InsideRuntime),
                Err(payload) => std::panic::resume_unwind(payload),
            };
        }
        Ok(thread::scope(|scope| {
            let worker = thread::Builder::new()
                .name("agentloop-blocking-call".to_owned())
                .spawn_scoped(scope, move || handle.block_on(future));
            match worker {
                Ok(worker) => worker
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p)),
                Err(error) => {
                    panic!("could not start a helper thread for a blocking call: {error}")
                }
            }
        }))
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
#[derive_where(Debug)]
pub struct BlockingTools<D> {
    registry: Registry<D>,
    #[derive_where(skip(Debug))]
    deps: Arc<D>,
    runtime: SyncRuntime,
    options: ExecOptions,
    next_call: AtomicU64,
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
            .run_send(run_tools_with(
                std::slice::from_ref(&call),
                &self.registry,
                &self.deps,
                &self.options,
            ))
            .map_err(|e| ToolError::new(e.to_string()))?
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
        let ran = self.runtime.run_send(run_tools_with(
            calls,
            &self.registry,
            &self.deps,
            &self.options,
        ));
        match ran {
            Ok(outcomes) => outcomes.into_iter().map(|outcome| outcome.result).collect(),
            Err(error) => calls
                .iter()
                .map(|c| ToolResultPart::error(&c.id, &c.tool_name, error.to_string()))
                .collect(),
        }
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

/// A synchronous view of an [`AgentLoop`]: every run method of the
/// async agent, for plain functions — plain, continued, streamed (as an iterator of events),
/// typed, resumed after approval, and in an attached session.
///
/// ```
/// use agentloop::agent::{AgentLoop, AgentLoopConfig};
/// use agentloop::blocking::BlockingAgent;
/// use agentloop::model::{ScriptedModel, ScriptedTurn};
/// use agentloop::transcript::Message;
///
/// let agent = AgentLoop::new(AgentLoopConfig::default(), ScriptedModel::new([ScriptedTurn::text("hi")]));
/// let blocking = BlockingAgent::new(agent).unwrap();
/// let mut events = blocking.run_stream(vec![Message::user("hello")], vec![]);
/// let text: String = events.by_ref().filter_map(|e| e.text_delta().map(str::to_owned)).collect();
/// assert_eq!(text, "hi");
/// assert_eq!(events.outcome().unwrap().unwrap().final_text(), "hi");
/// ```
///
/// Inside a runtime it runs the work on a helper thread (see
/// [Inside a runtime](self#inside-a-runtime)); where that cannot work the methods fail with
/// [`AgentError::InsideRuntime`] instead of panicking.
pub struct BlockingAgent<D: ToolDeps = crate::tooling::Deps> {
    agent: AgentLoop<D>,
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
    pub fn new(agent: AgentLoop<D>) -> std::io::Result<Self> {
        Ok(BlockingAgent {
            agent,
            runtime: SyncRuntime::new()?,
        })
    }

    /// Wraps `agent`, running on a runtime the caller shares.
    pub fn with_runtime(agent: AgentLoop<D>, runtime: SyncRuntime) -> Self {
        BlockingAgent { agent, runtime }
    }

    /// Runs `run` to completion; a runtime failure becomes the run's own error type
    /// ([`AgentError`], or [`OutputError::Run`] for typed output).
    fn block<T: Send, E: From<AgentError> + Send>(
        &self,
        run: impl Future<Output = Result<T, E>> + Send,
    ) -> Result<T, E> {
        self.runtime
            .run_send(run)
            .map_err(|e| E::from(e.into_agent_error()))?
    }

    /// Runs the loop to completion (see [`AgentLoop::run`]).
    pub fn run(
        &self,
        prompts: Vec<Message>,
        context: Vec<Message>,
    ) -> Result<RunOutcome, AgentError> {
        self.block(self.agent.run(prompts, context))
    }

    /// Continues a conversation (see [`AgentLoop::run_continue`]).
    pub fn run_continue(&self, context: Vec<Message>) -> Result<RunOutcome, AgentError> {
        self.block(self.agent.run_continue(context))
    }

    /// Like [`run`](Self::run), as an iterator of events that ends after `AgentEnd` (see
    /// [`AgentLoop::run_stream`]); [`BlockingEvents::outcome`] gives the result afterwards.
    pub fn run_stream(&self, prompts: Vec<Message>, context: Vec<Message>) -> BlockingEvents<'_> {
        BlockingEvents::new(self.agent.run_stream(prompts, context), &self.runtime)
    }

    /// Like [`run_continue`](Self::run_continue), as an iterator of events.
    pub fn run_continue_stream(&self, context: Vec<Message>) -> BlockingEvents<'_> {
        BlockingEvents::new(self.agent.run_continue_stream(context), &self.runtime)
    }

    /// A run that returns a validated `T` (see [`AgentLoop::run_typed`]).
    pub fn run_typed<T>(
        &self,
        prompts: Vec<Message>,
        context: Vec<Message>,
    ) -> Result<TypedOutcome<T>, OutputError>
    where
        T: DeserializeOwned + JsonSchema + Send + 'static,
    {
        self.block(self.agent.run_typed::<T>(prompts, context))
    }

    /// A run that returns the output `output` describes (see [`AgentLoop::run_output`]).
    pub fn run_output<T: Send + Sync + 'static>(
        &self,
        output: &Output<T>,
        prompts: Vec<Message>,
        context: Vec<Message>,
    ) -> Result<TypedOutcome<T>, OutputError> {
        self.block(self.agent.run_output(output, prompts, context))
    }

    /// Like [`run_output`](Self::run_output) without new prompts (see
    /// [`AgentLoop::run_output_continue`]).
    pub fn run_output_continue<T: Send + Sync + 'static>(
        &self,
        output: &Output<T>,
        context: Vec<Message>,
    ) -> Result<TypedOutcome<T>, OutputError> {
        self.block(self.agent.run_output_continue(output, context))
    }

    /// Continues a run parked for approval (see [`AgentLoop::resume_parked`]).
    pub fn resume_parked(
        &self,
        context: Vec<Message>,
        parked: ParkedRun,
    ) -> Result<RunOutcome, AgentError> {
        self.block(self.agent.resume_parked(context, parked))
    }

    /// Runs `prompts` on the attached session's stored conversation (see
    /// [`AgentLoop::run_in_session`]).
    pub fn run_in_session(&self, prompts: Vec<Message>) -> Result<RunOutcome, AgentError> {
        self.block(self.agent.run_in_session(prompts))
    }

    /// The agent (to steer, abort or inspect it from another thread).
    pub fn agent(&self) -> &AgentLoop<D> {
        &self.agent
    }
}

/// The events of one run of a [`BlockingAgent`], as a blocking iterator that ends after
/// `AgentEnd`; then [`outcome`](Self::outcome) gives the run's result. Dropping it early
/// drops the run (as dropping an [`AgentEventStream`] does).
pub struct BlockingEvents<'a> {
    stream: AgentEventStream<'a>,
    runtime: &'a SyncRuntime,
    refused: Option<BlockingError>,
}

impl std::fmt::Debug for BlockingEvents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockingEvents")
            .field("refused", &self.refused)
            .finish_non_exhaustive()
    }
}

impl<'a> BlockingEvents<'a> {
    fn new(stream: AgentEventStream<'a>, runtime: &'a SyncRuntime) -> Self {
        BlockingEvents {
            stream,
            runtime,
            refused: None,
        }
    }

    /// The run's result, once the iterator has ended (taken: later calls return `None`).
    pub fn outcome(&mut self) -> Option<Result<RunOutcome, AgentError>> {
        match self.refused.take() {
            Some(error) => Some(Err(error.into_agent_error())),
            None => self.stream.outcome(),
        }
    }
}

impl Iterator for BlockingEvents<'_> {
    type Item = AgentEvent;

    fn next(&mut self) -> Option<AgentEvent> {
        if self.refused.is_some() {
            return None;
        }
        match self.runtime.run_send(self.stream.next()) {
            Ok(event) => event,
            Err(error) => {
                self.refused = Some(error);
                None
            }
        }
    }
}
