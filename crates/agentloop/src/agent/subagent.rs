//! Sub-agents: an [`AgentLoop`] used as a tool of another agent ([`SubAgent`],
//! [`AgentLoop::into_tool`]).
//!
//! A call `{"prompt": TEXT}` runs the child loop on that prompt and answers with the child's
//! final text (an error result with the reason when the child failed or stopped early). What
//! the parent sees of its children:
//!
//! - **Events**: every event of a child reaches the parent's listeners wrapped in
//!   [`AgentEvent::Child`] (the parent's call id and the sub-agent's name); a grandchild's event
//!   is wrapped twice, so the nesting spells the path of calls that led to it. The parent's own
//!   stream still ends with exactly one unwrapped `AgentEnd`.
//! - **Abort**: aborting the parent drops its running children; each child's stream is closed
//!   right then with an aborted result for every call it had started and one
//!   `AgentEnd { stop: Aborted }`, before the parent answers the sub-agent call as aborted.
//! - **Usage**: the tokens and cost of every child model call (grandchildren included) are added
//!   to the parent run's [`RunOutcome::usage`](super::RunOutcome::usage) and count against the
//!   parent's [`UsageLimits`](super::UsageLimits); their model calls count against its
//!   `max_requests` ceiling too. The parent's `max_turns` counts only its own turns.
//! - **Depth**: the top-level agent is depth 0, its children depth 1. A sub-agent call that
//!   would run deeper than [`SubAgent::max_depth`] (default 1, also capped by every ancestor's
//!   limit) is refused with an error result, so by default a child cannot spawn children.
//! - **Parallelism**: the tool is parallel-safe: several sub-agent calls in one reply run
//!   concurrently like any other parallel-safe tools.
//!
//! How a handler reaches its parent run: each run keeps a task-local [`RunScope`] (its emitter,
//! depth and the totals of its children) around its turn cycle. The executor polls async
//! handlers inside the run's task, so the sub-agent handler finds its parent's scope there.
//!
//! A child cannot park for approval: a child that stops awaiting approval answers the parent's
//! call with an error saying so.
//!
//! **Child sessions** ([`SubAgent::recorded_by`], and `SubAgent::record_in` for a session
//! store): when the parent run belongs to a session (its agent has
//! [`with_session`](AgentLoop::with_session) or
//! [`with_session_label`](AgentLoop::with_session_label)), each call records the child's run
//! as a session of its own, linked to the parent session and the call, under the child
//! session's writer lock. A call
//! whose child session already exists — the same call run again after the process died in the
//! middle of the child, e.g. by a resume that re-runs the interrupted call — continues that
//! session where it stopped (loaded with the same repair as any session) instead of starting
//! over, and a child that had already given its final answer answers with it without a model
//! call.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;

use super::events::{AgentEvent, EmitFn, Emitter, RunStop};
use super::output::{Output, OutputError, OutputPlan, OutputRun};
use super::{AgentError, AgentLoop, RunOutcome};
use crate::tooling::{SpecError, ToolContext, ToolDeps, ToolError, ToolSpec};
use crate::transcript::{Message, Role, ToolCallPart, ToolResultPart, Usage};

/// The default [`SubAgent::max_depth`]: children, but no grandchildren.
pub const DEFAULT_MAX_SUBAGENT_DEPTH: u32 = 1;

tokio::task_local! {
    /// The run whose turn cycle is being polled (set by every run of the loop).
    static RUN: RunScope;
    /// Handed by a sub-agent call to the child run it is about to start (taken once).
    static CHILD_START: Cell<Option<ChildStart>>;
}

/// Where a child run sits: its depth and the depth ceiling inherited from its ancestors.
#[derive(Clone, Copy, Debug)]
struct ChildStart {
    depth: u32,
    max_depth: u32,
}

/// One run's place in the tree of agents, reachable from its tools' handlers.
#[derive(Clone)]
pub(crate) struct RunScope {
    inner: Arc<ScopeInner>,
}

struct ScopeInner {
    emitter: Emitter,
    /// The session the run belongs to (its agent's session label), if any.
    session_id: Option<Arc<str>>,
    depth: u32,
    /// The deepest level any descendant may run at (`u32::MAX`: only the tools' own limits).
    max_depth: u32,
    /// Children's usage not yet added to the run's total.
    child_usage: Mutex<Usage>,
    /// Model calls made by children (and their descendants) so far in this run.
    child_requests: AtomicU32,
}

impl RunScope {
    /// The scope of a run starting now: a child run takes the depth its sub-agent call handed
    /// it; any other run is a top-level one.
    pub(crate) fn for_run(emitter: &Emitter, session_id: Option<Arc<str>>) -> RunScope {
        let start = CHILD_START.try_with(Cell::take).ok().flatten();
        RunScope {
            inner: Arc::new(ScopeInner {
                emitter: emitter.clone(),
                session_id,
                depth: start.map_or(0, |s| s.depth),
                max_depth: start.map_or(u32::MAX, |s| s.max_depth),
                child_usage: Mutex::new(Usage::default()),
                child_requests: AtomicU32::new(0),
            }),
        }
    }

    /// Polls `future` (the run's turn cycle) with this scope as the current run.
    pub(crate) fn enter<F: Future>(self, future: F) -> impl Future<Output = F::Output> {
        RUN.scope(self, future)
    }

    fn current() -> Option<RunScope> {
        RUN.try_with(Clone::clone).ok()
    }

    /// Takes the usage this run's children reported since the last call.
    pub(crate) fn take_child_usage(&self) -> Usage {
        std::mem::take(&mut *lock(&self.inner.child_usage))
    }

    fn add_child(&self, usage: &Usage, requests: u32) {
        lock(&self.inner.child_usage).accumulate(usage);
        self.inner
            .child_requests
            .fetch_add(requests, Ordering::Relaxed);
    }
}

/// Takes the usage the current run's children reported since the last call (zero outside a
/// run); the loop adds it to the run's total after each tool batch.
pub(crate) fn take_child_usage() -> Usage {
    RunScope::current()
        .map(|scope| scope.take_child_usage())
        .unwrap_or_default()
}

/// Model calls the current run's children have made so far (zero outside a run).
pub(crate) fn child_requests() -> u32 {
    RunScope::current().map_or(0, |scope| {
        scope.inner.child_requests.load(Ordering::Relaxed)
    })
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// An agent packaged as a tool of another agent. Build it, then [`into_tool`](Self::into_tool).
///
/// ```
/// use agentloop::agent::{AgentLoop, AgentLoopConfig, SubAgent};
/// use agentloop::model::{ScriptedModel, ScriptedTurn};
/// use agentloop::tooling::{Deps, ToolSpec};
///
/// let researcher = AgentLoop::new(
///     AgentLoopConfig { system_prompt: Some("Research the question.".into()), ..Default::default() },
///     ScriptedModel::new([ScriptedTurn::text("Paris.")]),
/// );
/// let tool: ToolSpec<Deps> = SubAgent::new(researcher, "researcher", "Answers research questions.")
///     .max_depth(1)
///     .into_tool()
///     .unwrap();
/// assert_eq!(tool.name(), "researcher");
/// ```
pub struct SubAgent<D: ToolDeps> {
    agent: Arc<AgentLoop<D>>,
    name: String,
    description: String,
    max_depth: u32,
    /// The typed output the child must give (its JSON is the call's result), if any.
    output: Option<Arc<OutputPlan>>,
    /// Where each call's child run is recorded, if anywhere.
    records: Option<Arc<dyn ChildRecords>>,
}

/// Where a sub-agent's runs are recorded: each call's child run as a record of its own, linked
/// to the parent's session and call. The session layer implements it on a session store
/// (`SubAgent::record_in`); the loop only needs what this trait gives.
pub trait ChildRecords: Send + Sync {
    /// Opens the record of the child run serving call `call_id` of session `parent_session`
    /// for sub-agent `agent`: the existing one (the call runs again after an interruption),
    /// or a new one. The error is one line saying why it could not be recorded.
    fn open(&self, parent_session: &str, call_id: &str, agent: &str)
    -> Result<OpenedChild, String>;
}

/// A child run's record, opened by [`ChildRecords::open`].
#[non_exhaustive]
pub struct OpenedChild {
    /// Its stored conversation (repaired); empty for a new record.
    pub context: Vec<Message>,
    /// Its final answer, when the child had already finished.
    pub finished: Option<String>,
    /// Records the child's events.
    pub listener: EmitFn,
    /// Held while the child runs (e.g. the record's writer lock).
    pub guard: Box<dyn std::any::Any + Send>,
}

impl OpenedChild {
    /// An opened record.
    pub fn new(
        context: Vec<Message>,
        finished: Option<String>,
        listener: EmitFn,
        guard: Box<dyn std::any::Any + Send>,
    ) -> Self {
        OpenedChild {
            context,
            finished,
            listener,
            guard,
        }
    }
}

impl<D: ToolDeps> std::fmt::Debug for SubAgent<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SubAgent")
            .field("name", &self.name)
            .field("max_depth", &self.max_depth)
            .field("agent", &self.agent)
            .finish_non_exhaustive()
    }
}

impl<D: ToolDeps> SubAgent<D> {
    /// A sub-agent named `name` (the tool's name and the `agent` of its [`AgentEvent::Child`]
    /// events). The child keeps its own model, instructions, tools, limits and approval hook
    /// (its deps bundle).
    pub fn new(
        agent: AgentLoop<D>,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        SubAgent {
            agent: Arc::new(agent),
            name: name.into(),
            description: description.into(),
            max_depth: DEFAULT_MAX_SUBAGENT_DEPTH,
            output: None,
            records: None,
        }
    }

    /// Records each call's child run through `records` (see [`ChildRecords`]; a session
    /// store records them as sessions with `record_in`). Only calls from a parent run that
    /// belongs to a session (its agent has a session label) are recorded. A call whose record
    /// already exists — the same call run again after the process died in the middle of the
    /// child — continues it where it stopped; a child that had already given its final answer
    /// answers with it without a model call.
    pub fn recorded_by(mut self, records: Arc<dyn ChildRecords>) -> Self {
        self.records = Some(records);
        self
    }

    /// Makes the child answer with a validated typed output (see [`crate::agent::output`]):
    /// the call's result is that output's JSON instead of the child's final text, and a child
    /// that never produced a valid output answers with an error result listing the violations.
    /// Fails when the output's schema is unusable with the child's model.
    pub fn output<T>(mut self, output: &Output<T>) -> Result<Self, OutputError> {
        self.output = Some(Arc::new(self.agent.plan_output(output)?));
        Ok(self)
    }

    /// The deepest level this sub-agent may run at (the top-level agent is 0). Default
    /// [`DEFAULT_MAX_SUBAGENT_DEPTH`] (1): it runs as a child of a top-level agent, but not as
    /// a grandchild. Set 2 on the child's own sub-agent tools *and* on this one to allow
    /// grandchildren: a call runs only when no ancestor's limit forbids its depth.
    pub fn max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }

    /// The tool (for a parent whose deps bundle is `P`). Fails only when the name is not a
    /// valid tool name.
    pub fn into_tool<P: ToolDeps>(self) -> Result<ToolSpec<P>, SpecError> {
        let shared = Arc::new(self);
        let description = shared.description.clone();
        ToolSpec::<P>::builder(shared.name.clone(), description)
            .parameters(json!({
                "type": "object",
                "properties": {
                    "prompt": {
                        "type": "string",
                        "description": "The complete task for the sub-agent: it sees nothing else of this conversation."
                    }
                },
                "required": ["prompt"],
                "additionalProperties": false
            }))
            .handler(move |ctx: ToolContext<P>, args: PromptArgs| {
                let shared = shared.clone();
                let call_id = ctx.call_id().to_owned();
                async move { shared.call(call_id, args.prompt, false).await }
            })
            .build()
    }

    /// The sub-agent's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The sub-agent's description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Runs the child on `prompt` for the parent's call `call_id`, from inside a tool handler
    /// of the parent (for a tool that picks among several sub-agents): the same events, abort,
    /// usage and depth rules as the tool built by [`into_tool`](Self::into_tool). Returns the
    /// child's answer, or the error the call should end with.
    pub async fn run_call(&self, call_id: &str, prompt: String) -> Result<String, ToolError> {
        self.call(call_id.to_owned(), prompt, false).await
    }

    /// Runs the child again for the same call `call_id` on a further `prompt` (e.g. why its
    /// answer was not accepted). A child recorded in a session ([`recorded_by`](Self::recorded_by))
    /// continues that session with `prompt` as a new message, keeping what it did; otherwise
    /// this is [`run_call`](Self::run_call).
    pub async fn continue_call(&self, call_id: &str, prompt: String) -> Result<String, ToolError> {
        self.call(call_id.to_owned(), prompt, true).await
    }

    /// Runs the child on `prompt` for the parent's call `call_id`.
    /// `continuing`: a further prompt for a child that already ran for this call.
    async fn call(
        &self,
        call_id: String,
        prompt: String,
        continuing: bool,
    ) -> Result<String, ToolError> {
        let parent = RunScope::current();
        let depth = parent.as_ref().map_or(0, |p| p.inner.depth) + 1;
        let max_depth = parent
            .as_ref()
            .map_or(u32::MAX, |p| p.inner.max_depth)
            .min(self.max_depth);
        if depth > max_depth {
            return Err(ToolError::new(format!(
                "Sub-agent \"{}\" was not run: it would run at depth {depth}, and sub-agents may \
                 nest at most {max_depth} level(s) deep here. Do the work yourself instead.",
                self.name
            )));
        }
        let relay = Arc::new(Relay {
            parent: parent.clone(),
            call_id,
            agent: self.name.clone(),
            own: self.agent.emitter(None),
            state: Mutex::new(RelayState::default()),
        });
        let mut guard = EndGuard {
            relay: relay.clone(),
            finished: false,
        };
        // Held until the child's run ends (declared before the run so it outlives it).
        let _child_guard: Box<dyn std::any::Any + Send>;
        let parent_session = parent.as_ref().and_then(|p| p.inner.session_id.clone());
        let child = match (&self.records, parent_session) {
            (Some(records), Some(parent_id)) => Some(
                records
                    .open(&parent_id, &relay.call_id, &self.name)
                    .map_err(|e| {
                        ToolError::new(format!(
                            "Sub-agent \"{}\" was not run: its session could not be recorded: {e}",
                            self.name
                        ))
                    })?,
            ),
            _ => None,
        };
        let forward = relay.clone();
        let callback: EmitFn = Arc::new(move |event: &AgentEvent| forward.on_event(event));
        let mut listeners = Vec::new();
        let (prompts, context) = match child {
            Some(child) => {
                let finished = child
                    .finished
                    .filter(|_| self.output.is_none() && !continuing);
                if let Some(answer) = finished {
                    guard.finished = true;
                    relay.state_ended();
                    return Ok(answer);
                }
                listeners.push(child.listener);
                _child_guard = child.guard;
                match child.context {
                    context if context.is_empty() || continuing => {
                        (vec![Message::user(prompt)], context)
                    }
                    context => (Vec::new(), context),
                }
            }
            None => (vec![Message::user(prompt)], Vec::new()),
        };
        listeners.push(callback);
        let emitter = Emitter::new(Arc::from(listeners), None);
        let start = Cell::new(Some(ChildStart { depth, max_depth }));
        let output = self.output.clone().map(OutputRun::new);
        let run = self
            .agent
            .drive_with_output(Some(prompts), context, emitter, output);
        let (result, output) = CHILD_START.scope(start, run).await;
        guard.finished = true;
        match output {
            Some(output) => self.answer_output(result, output),
            None => self.answer(result),
        }
    }

    /// The tool result for a child that had to give a typed output: the output's JSON.
    fn answer_output(
        &self,
        result: Result<RunOutcome, AgentError>,
        mut output: OutputRun,
    ) -> Result<String, ToolError> {
        match (result, output.accepted.take()) {
            (Ok(outcome), Some(accepted)) if outcome.stop == RunStop::Done => {
                Ok(accepted.json.to_string())
            }
            (Ok(outcome), _) if outcome.stop == RunStop::Done => {
                let violations = output.last_violations.join("; ");
                Err(ToolError::new(format!(
                    "Sub-agent \"{}\" produced no valid output ({} invalid attempt(s)): {violations}",
                    self.name, output.failures
                )))
            }
            (other, _) => self.answer(other),
        }
    }

    /// The tool result for the child's outcome.
    fn answer(&self, result: Result<RunOutcome, AgentError>) -> Result<String, ToolError> {
        let name = &self.name;
        match result {
            Ok(outcome) if outcome.stop == RunStop::Done => Ok(outcome.final_text()),
            Ok(outcome) => {
                let reason = serde_json::to_string(&outcome.stop)
                    .unwrap_or_else(|_| format!("{:?}", outcome.stop));
                let last = outcome.final_text();
                let tail = if last.is_empty() {
                    String::new()
                } else {
                    format!(" Its last answer: {last}")
                };
                Err(ToolError::new(format!(
                    "Sub-agent \"{name}\" stopped before finishing: {reason}.{tail}"
                )))
            }
            Err(error) => Err(ToolError::new(format!(
                "Sub-agent \"{name}\" failed: {error}"
            ))),
        }
    }
}

impl<D: ToolDeps> AgentLoop<D> {
    /// This agent as a tool of another agent, with the default depth limit; see [`SubAgent`]
    /// for the details and the builder with more options.
    pub fn into_tool<P: ToolDeps>(
        self,
        name: impl Into<String>,
        description: impl Into<String>,
    ) -> Result<ToolSpec<P>, SpecError> {
        SubAgent::new(self, name, description).into_tool()
    }
}

#[derive(Deserialize)]
struct PromptArgs {
    prompt: String,
}

/// Forwards a child's events to its parent (tagged) and keeps what closing the child's stream
/// early needs.
struct Relay {
    parent: Option<RunScope>,
    call_id: String,
    agent: String,
    /// The child agent's own `emit` listeners, which see the events untagged.
    own: Emitter,
    state: Mutex<RelayState>,
}

#[derive(Default)]
struct RelayState {
    /// Calls the child started and has not answered yet.
    open_calls: Vec<ToolCallPart>,
    /// Messages the child completed.
    messages: Vec<Message>,
    /// Usage and model calls of the child and its descendants, not yet given to the parent.
    usage: Usage,
    requests: u32,
    ended: bool,
}

impl Relay {
    fn on_event(&self, event: &AgentEvent) {
        {
            let mut state = lock(&self.state);
            tally(&mut state, event);
            match event {
                AgentEvent::ToolExecutionStart { call } => state.open_calls.push(call.clone()),
                AgentEvent::ToolExecutionEnd { call, .. } => {
                    state.open_calls.retain(|c| c.id != call.id);
                }
                AgentEvent::MessageEnd { message } => state.messages.push(message.clone()),
                AgentEvent::AgentEnd { .. } => state.ended = true,
                _ => {}
            }
        }
        // The emitter contains a panicking listener: the parent's events still flow.
        self.own.emit_with(|| event.clone());
        if let Some(parent) = &self.parent {
            parent.inner.emitter.emit_with(|| AgentEvent::Child {
                parent_call_id: self.call_id.clone(),
                agent: self.agent.clone(),
                event: Box::new(event.clone()),
            });
        }
    }

    /// Marks the child's stream as ended without a run (its answer was already stored).
    fn state_ended(&self) {
        lock(&self.state).ended = true;
    }

    /// Gives the child's usage to the parent run (once; later calls add what came since).
    fn settle(&self) {
        let (usage, requests) = {
            let mut state = lock(&self.state);
            (
                std::mem::take(&mut state.usage),
                std::mem::take(&mut state.requests),
            )
        };
        if let Some(parent) = &self.parent {
            parent.add_child(&usage, requests);
        }
    }
}

/// Counts the model calls and usage in an event of the child or of any of its descendants.
fn tally(state: &mut RelayState, event: &AgentEvent) {
    match event {
        AgentEvent::MessageEnd { message } if message.role == Role::Assistant => {
            state.requests += 1;
            if let Some(usage) = &message.usage {
                state.usage.accumulate(usage);
            }
        }
        AgentEvent::Child { event, .. } => tally(state, event),
        _ => {}
    }
}

/// Settles the child's usage when the call ends, and — when the call is dropped before the
/// child finished (the parent was aborted or the call timed out) — closes the child's stream:
/// an aborted result for each call it had started, then its one `AgentEnd`.
struct EndGuard {
    relay: Arc<Relay>,
    finished: bool,
}

impl Drop for EndGuard {
    fn drop(&mut self) {
        let relay = &self.relay;
        let unfinished = !self.finished && !lock(&relay.state).ended;
        if unfinished {
            let (open, messages) = {
                let mut state = lock(&relay.state);
                (
                    std::mem::take(&mut state.open_calls),
                    state.messages.clone(),
                )
            };
            for call in open {
                let result = ToolResultPart::error(
                    &call.id,
                    &call.tool_name,
                    format!(
                        "Tool call \"{}\" was not finished: the run was aborted.",
                        call.tool_name
                    ),
                );
                relay.on_event(&AgentEvent::ToolExecutionEnd {
                    call,
                    result,
                    blocked: false,
                });
            }
            relay.on_event(&AgentEvent::AgentEnd {
                messages,
                stop: RunStop::Aborted,
            });
        }
        relay.settle();
    }
}
