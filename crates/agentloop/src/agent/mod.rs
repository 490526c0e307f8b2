//! The agent loop (docs/ARCHITECTURE.md, "The loop"): call the model, execute the tool calls it makes, feed the results
//! back, repeat until the model is done — with events, steering and follow-up queues, abort,
//! extension hooks and limits.
//!
//! The loop is the only place where the model and the tools meet: it asks the [`Model`] for a
//! reply, hands the reply's tool calls to the [executor](crate::tooling::run_tools_with), and
//! records everything in the context. Every run ends with exactly one [`AgentEvent::AgentEnd`] and
//! a [`RunStop`] the caller can match on; an error that ends a run carries the messages completed
//! before it ([`completed_messages`]).
//!
//! An agent can be a tool of another ([`SubAgent`], [`AgentLoop::into_tool`]): the child's
//! events reach the parent's listeners as [`AgentEvent::Child`], aborting the parent aborts the
//! child, the child's usage counts in the parent's [`RunOutcome::usage`] and limits, and a
//! documented depth limit (default 1) keeps children from spawning children.
//!
//! ```
//! use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
//! use agentloop::model::{ScriptedModel, ScriptedTurn};
//! use agentloop::tooling::{Deps, ToolContext, ToolSpec};
//! use agentloop::transcript::Message;
//! use serde_json::{json, Value};
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = ScriptedModel::new([
//!     ScriptedTurn::new().tool_call("call-1", "upper", json!({"text": "hi"})),
//!     ScriptedTurn::text("It says HI."),
//! ]);
//! let upper = ToolSpec::<Deps>::builder("upper", "Upper-case text.")
//!     .blocking_handler(|_ctx: ToolContext<Deps>, args: Value| {
//!         args["text"].as_str().unwrap_or_default().to_uppercase()
//!     })
//!     .build()?;
//! let mut agent = AgentLoop::new(AgentLoopConfig::default(), model);
//! agent.add_tool(upper)?;
//! let outcome = agent.run(vec![Message::user("Shout hi")], vec![]).await?;
//! assert_eq!(outcome.stop, RunStop::Done);
//! assert_eq!(outcome.new_messages().len(), 4); // prompt, call, result, answer
//! assert_eq!(outcome.new_messages()[3].text(), "It says HI.");
//! # Ok(()) }
//! ```
//!
//! # Deciding whether a tool call may run
//!
//! One path, in this order for every call of a model reply:
//!
//! 1. **schema**: the tool exists and the arguments satisfy its JSON Schema;
//! 2. **`tool_call` hooks** ([`Extension::on_tool_call`]): policy vetoes and argument
//!    rewrites that need no person (a rewrite is validated again); typed arguments through
//!    [`PreparedToolCall::arguments_as`];
//! 3. **binding**: the arguments deserialize into the handler's type;
//! 4. **approval**: the deps bundle's [`crate::tooling::ToolDeps::approve`]
//!    — allow, deny, or defer to a person ([`RunStop::AwaitingApproval`], then
//!    [`resume_parked`](AgentLoop::resume_parked)); a tool declared
//!    `#[tool(requires_approval)]` is deferred unless `approve` decides it;
//! 5. the handler runs: only now does [`AgentEvent::ToolExecutionStart`] come. A call refused
//!    by steps 1–4 gets a `ToolExecutionEnd` with `blocked: true` and no start.
//!
//! Hooks come before approval so a person is only asked about the final arguments of a call no
//! policy refused. Put "may this run?" logic in `approve`; use hooks for automatic policy.
//!
//! # Sessions, aborts, names
//!
//! - [`with_session`](AgentLoop::with_session) records every run into a stored session;
//!   [`run_in_session`](AgentLoop::run_in_session) continues it.
//!   [`with_session_label`](AgentLoop::with_session_label) only labels runs (idempotency keys).
//! - [`abort`](AgentLoop::abort) ends the run in progress (or, when none is, the next one to
//!   start) and only that run: see [`AbortSignal`].
//! - [`resume_parked`](AgentLoop::resume_parked) continues a run parked for approval, not a
//!   stored session.

mod abort;
mod calls;
#[cfg(feature = "builtin-tools")]
pub mod command_hooks;
pub mod compaction;
mod config;
mod error;
mod events;
mod hooks;
pub mod output;
mod pending;
mod queue;
#[cfg(feature = "builtin-tools")]
mod retention;
mod run;
mod stream;
mod subagent;

use std::sync::Arc;

pub use abort::AbortSignal;
pub use calls::{BlockedCall, ErrorCall, FinalizedToolCall, PreparedToolCall};
pub use compaction::{CompactionConfig, Compactor};
pub use config::{AgentLoopConfig, TelemetryConfig, ToolExecutionMode, UsageLimit, UsageLimits};
pub use error::{AgentError, completed_messages};
pub use events::{AgentEvent, EmitFn, RunStop};
pub use hooks::{Extension, HookKind, ResultRewrite, ToolCallDecision, TurnSummary};
pub use pending::{ParkedRun, PendingApproval, PendingStatus};
pub use queue::{MessageQueue, QueueMode};
pub use stream::AgentEventStream;
pub use subagent::{
    ChildRecords, DEFAULT_MAX_SUBAGENT_DEPTH, OpenedChild, SubAgent, add_child_usage,
    prompt_parameters,
};

use crate::model::Model;
use crate::tooling::{
    Deps, Registry, RegistryError, SourcedTools, ToolDeps, ToolSource, ToolSpec, TurnRegistry,
};
use crate::transcript::{Message, Usage};

/// What a finished run returns.
#[derive(Clone, Debug, PartialEq)]
pub struct RunOutcome {
    /// The whole conversation after the run: the context passed in, then every new message.
    pub context: Vec<Message>,
    /// Index in `context` of the first message this run added.
    pub new_from: usize,
    /// Why the run ended.
    pub stop: RunStop,
    /// Model calls made.
    pub turns: u32,
    /// Token usage summed over the run's assistant messages.
    pub usage: Usage,
}

impl RunOutcome {
    /// The messages this run produced (prompts included), in order.
    pub fn new_messages(&self) -> &[Message] {
        self.context.get(self.new_from..).unwrap_or(&[])
    }

    /// The last assistant message's text ("" when there is none).
    pub fn final_text(&self) -> String {
        self.context
            .iter()
            .rev()
            .find(|m| m.role == crate::transcript::Role::Assistant)
            .map(Message::text)
            .unwrap_or_default()
    }
}

/// An agent: a model, tools, configuration, hooks and queues. Cheap to share behind an `Arc`;
/// runs take `&self`, so one agent can serve several sequential runs (queued messages carry over
/// between them).
pub struct AgentLoop<D: ToolDeps = Deps> {
    pub(crate) config: AgentLoopConfig,
    pub(crate) model: Arc<dyn Model>,
    pub(crate) registry: Registry<D>,
    pub(crate) deps: Arc<D>,
    /// Event listeners, in registration order (see `with_emit`).
    pub(crate) emit: Vec<EmitFn>,
    pub(crate) abort: AbortSignal,
    pub(crate) hooks: hooks::HookDispatcher,
    pub(crate) steering: MessageQueue,
    pub(crate) follow_ups: MessageQueue,
    /// The session runs belong to (idempotency keys, approval events); see `with_session_label`.
    pub(crate) session_id: Option<Arc<str>>,
    /// Tools that can change between model calls (see `with_tool_source`).
    pub(crate) tool_source: Option<SourcedTools<D>>,
    /// What `with_session` attached (the session layer's recorder, which sits above the loop
    /// and so is kept here without naming its type).
    pub(crate) attached: Option<Arc<dyn std::any::Any + Send + Sync>>,
}

impl<D: ToolDeps> std::fmt::Debug for AgentLoop<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentLoop")
            .field("config", &self.config)
            .field("provider", &self.model.provider())
            .field("registry", &self.registry)
            .field("hooks", &self.hooks)
            .finish_non_exhaustive()
    }
}

impl AgentLoop<Deps> {
    /// An agent with the default [`Deps`] bundle (every tool call allowed).
    pub fn new(config: AgentLoopConfig, model: impl Model + 'static) -> Self {
        AgentLoop::with_deps(config, model, Arc::new(Deps::new()))
    }
}

impl<D: ToolDeps> AgentLoop<D> {
    /// An agent whose tools receive `deps` (and whose approval hook is `deps.before_tool`).
    pub fn with_deps(config: AgentLoopConfig, model: impl Model + 'static, deps: Arc<D>) -> Self {
        AgentLoop {
            config,
            model: Arc::new(model),
            registry: Registry::default(),
            deps,
            emit: Vec::new(),
            abort: AbortSignal::new(),
            hooks: hooks::HookDispatcher::default(),
            steering: MessageQueue::new(),
            follow_ups: MessageQueue::new(),
            session_id: None,
            tool_source: None,
            attached: None,
        }
    }

    /// Registers a tool (errors on a duplicate name or a schema that does not compile).
    pub fn add_tool(&mut self, tool: ToolSpec<D>) -> Result<(), RegistryError> {
        self.registry.add(tool)
    }

    /// Registers several tools; see [`add_tool`](Self::add_tool).
    pub fn with_tools(
        mut self,
        tools: impl IntoIterator<Item = ToolSpec<D>>,
    ) -> Result<Self, RegistryError> {
        for tool in tools {
            self.registry.add(tool)?;
        }
        Ok(self)
    }

    /// Adds tools that can change while the agent runs (e.g. MCP servers' tools, which follow
    /// `notifications/tools/list_changed`): before every model call the loop asks `source`
    /// whether its tools changed and, if so, uses its new list from that request on. The
    /// tools added with [`add_tool`](Self::add_tool) stay; a source tool with a name already
    /// taken is skipped with a warning. [`registry`](Self::registry) shows only the agent's own
    /// tools. A second call replaces the first source.
    pub fn with_tool_source(mut self, source: Arc<dyn ToolSource<D>>) -> Self {
        self.tool_source = Some(SourcedTools::new(source));
        self
    }

    /// The tools a turn uses: the agent's own, merged with its tool source's latest ones.
    pub(crate) fn turn_registry(&self) -> TurnRegistry<'_, D> {
        match self
            .tool_source
            .as_ref()
            .and_then(|s| s.merged(&self.registry))
        {
            Some(merged) => TurnRegistry::Merged(merged),
            None => TurnRegistry::Fixed(&self.registry),
        }
    }

    /// Reloads the tool source's tools when they changed; whether they did.
    pub(crate) async fn refresh_tools(&self) -> bool {
        match &self.tool_source {
            Some(source) => source.refresh(&self.registry).await,
            None => false,
        }
    }

    /// Adds a listener that receives every event of every run. Listeners add up: each one
    /// registered gets every event, in registration order (then any
    /// [event stream](Self::run_stream) gets it). A panicking listener is logged and skipped for
    /// that event; the others and the run go on.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use agentloop::agent::{AgentLoop, AgentLoopConfig};
    /// use agentloop::model::{ScriptedModel, ScriptedTurn};
    /// use agentloop::transcript::Message;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let (first, second) = (seen.clone(), seen.clone());
    /// let agent = AgentLoop::new(AgentLoopConfig::default(), ScriptedModel::new([ScriptedTurn::text("hi")]))
    ///     .with_emit(move |e| if e.kind() == "agent_end" { first.lock().unwrap().push("first") })
    ///     .with_emit(move |e| if e.kind() == "agent_end" { second.lock().unwrap().push("second") });
    /// agent.run(vec![Message::user("hello")], vec![]).await?;
    /// assert_eq!(*seen.lock().unwrap(), ["first", "second"]);
    /// # Ok(()) }
    /// ```
    pub fn with_emit(mut self, emit: impl Fn(&AgentEvent) + Send + Sync + 'static) -> Self {
        self.emit.push(Arc::new(emit));
        self
    }

    /// Uses `signal` to abort runs (keep a clone to call `abort` on; see [`AbortSignal`] for
    /// which run an abort ends).
    pub fn with_abort_signal(mut self, signal: AbortSignal) -> Self {
        self.abort = signal;
        self
    }

    /// Adds an extension; hooks run in the order extensions were added.
    pub fn with_extension(mut self, extension: Extension) -> Self {
        self.hooks.add(extension);
        self
    }

    crate::setters! {
        /// Uses `queue` for steering messages (share it with whoever steers).
        pub fn with_steering_queue(queue: MessageQueue) => steering = queue;
        /// Uses `queue` for follow-up messages.
        pub fn with_follow_up_queue(queue: MessageQueue) => follow_ups = queue;
    }

    /// The configuration.
    pub fn config(&self) -> &AgentLoopConfig {
        &self.config
    }

    /// The tools added to the agent (a [tool source](Self::with_tool_source)'s are not among
    /// them).
    pub fn registry(&self) -> &Registry<D> {
        &self.registry
    }

    /// The abort signal (clone it to abort from another task).
    pub fn abort_signal(&self) -> &AbortSignal {
        &self.abort
    }

    /// Aborts the run in progress — or, when none is, the next run to start — and only that
    /// run: the run consumes the abort, so the run after it starts clean (see [`AbortSignal`]).
    pub fn abort(&self) {
        self.abort.abort();
    }

    /// Queues a steering message: delivered after the current tool batch, before the next model
    /// call.
    pub fn steer(&self, message: Message) {
        self.steering.push(message);
    }

    /// Queues a follow-up message: delivered only when the agent would otherwise stop.
    pub fn follow_up(&self, message: Message) {
        self.follow_ups.push(message);
    }

    /// The steering queue (clone it to steer from another task).
    pub fn steering_queue(&self) -> &MessageQueue {
        &self.steering
    }

    /// The follow-up queue.
    pub fn follow_up_queue(&self) -> &MessageQueue {
        &self.follow_ups
    }

    /// Whether any extension handles `kind` (the loop contract's `has_hook_handlers`): with none, the
    /// loop does no hook work at that point.
    pub fn has_hook_handlers(&self, kind: HookKind) -> bool {
        self.hooks.has(kind)
    }

    /// Runs the loop for `prompts` on top of `context`; returns when the run ends.
    pub async fn run(
        &self,
        prompts: Vec<Message>,
        context: Vec<Message>,
    ) -> Result<RunOutcome, AgentError> {
        self.drive(Some(prompts), context, self.emitter(None)).await
    }

    /// Runs another turn on `context` without new prompts. Fails when the context is empty or
    /// ends with an assistant message.
    pub async fn run_continue(&self, context: Vec<Message>) -> Result<RunOutcome, AgentError> {
        self.drive(None, context, self.emitter(None)).await
    }

    /// Like [`run`](Self::run), as a stream of events that always ends with `AgentEnd`; the
    /// outcome is available from the stream afterwards.
    pub fn run_stream(&self, prompts: Vec<Message>, context: Vec<Message>) -> AgentEventStream<'_> {
        AgentEventStream::new(self, Some(prompts), context)
    }

    /// Like [`run_continue`](Self::run_continue), as a stream of events.
    pub fn run_continue_stream(&self, context: Vec<Message>) -> AgentEventStream<'_> {
        AgentEventStream::new(self, None, context)
    }

    pub(crate) fn emitter(
        &self,
        channel: Option<tokio::sync::mpsc::UnboundedSender<AgentEvent>>,
    ) -> events::Emitter {
        events::Emitter::new(self.emit.iter().cloned().collect(), channel)
    }
}
