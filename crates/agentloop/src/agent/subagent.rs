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

use derive_where::derive_where;
use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use serde::Deserialize;
use serde_json::json;

use super::events::{AgentEvent, EmitFn, Emitter, Forward, RunStop};
use super::output::{Output, OutputError, OutputPlan, OutputRun};
use super::{AgentError, AgentLoop, RunOutcome};
use crate::tooling::{SpecError, ToolContext, ToolDeps, ToolError, ToolSpec};
use crate::transcript::{Message, ToolCallPart, Usage};

/// The default [`SubAgent::max_depth`]: children, but no grandchildren.
pub const DEFAULT_MAX_SUBAGENT_DEPTH: u32 = 1;

tokio::task_local! {
    /// The run whose turn cycle is being polled (set by every run of the loop).
    static RUN: RunScope;
    /// Handed by a sub-agent call to the child run it is about to start (taken once).
    static CHILD_START: Cell<Option<ChildStart>>;
}

/// Where a child run sits: its parent run, its depth and the depth ceiling inherited from its
/// ancestors.
struct ChildStart {
    parent: Option<RunScope>,
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
    /// The run that started this one through a sub-agent call, if any: every model call of
    /// this run counts in its totals, and in those of its ancestors.
    parent: Option<RunScope>,
    depth: u32,
    /// The deepest level any descendant may run at (`u32::MAX`: only the tools' own limits).
    max_depth: u32,
    /// Descendants' usage not yet added to the run's total.
    child_usage: Mutex<Usage>,
    /// Model calls made by descendants so far in this run.
    child_requests: AtomicU32,
}

impl RunScope {
    /// The scope of a run starting now: a child run takes the parent and depth its sub-agent
    /// call handed it; any other run is a top-level one.
    pub(crate) fn for_run(emitter: &Emitter, session_id: Option<Arc<str>>) -> RunScope {
        let start = CHILD_START.try_with(Cell::take).ok().flatten();
        let (parent, depth, max_depth) = match start {
            Some(start) => (start.parent, start.depth, start.max_depth),
            None => (None, 0, u32::MAX),
        };
        RunScope {
            inner: Arc::new(ScopeInner {
                emitter: emitter.clone(),
                session_id,
                parent,
                depth,
                max_depth,
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

    /// Takes the usage this run's descendants reported since the last call.
    pub(crate) fn take_child_usage(&self) -> Usage {
        std::mem::take(&mut *lock(&self.inner.child_usage))
    }

    /// Adds a descendant's model calls to this run's totals and to every ancestor's.
    fn add_descendant(&self, usage: Option<&Usage>, requests: u32) {
        let mut scope = Some(self);
        while let Some(run) = scope {
            if let Some(usage) = usage {
                lock(&run.inner.child_usage).accumulate(usage);
            }
            run.inner
                .child_requests
                .fetch_add(requests, Ordering::Relaxed);
            scope = run.inner.parent.as_ref();
        }
    }
}

/// Takes the usage the current run's descendants reported since the last call (zero outside a
/// run); the loop adds it to the run's total after each tool batch.
pub(crate) fn take_child_usage() -> Usage {
    RunScope::current()
        .map(|scope| scope.take_child_usage())
        .unwrap_or_default()
}

/// Model calls the current run's descendants have made so far (zero outside a run).
pub(crate) fn child_requests() -> u32 {
    RunScope::current().map_or(0, |scope| {
        scope.inner.child_requests.load(Ordering::Relaxed)
    })
}

/// Counts one model call of the current run (with its usage, if reported) in its ancestors'
/// totals: a sub-agent's tokens and requests reach its parent as they are spent, so they count
/// even when the child is cut short. Nothing happens for a top-level run.
pub(crate) fn report_model_call(usage: Option<&Usage>) {
    let _ = RUN.try_with(|scope| {
        if let Some(parent) = &scope.inner.parent {
            parent.add_descendant(usage, 1);
        }
    });
}

/// Adds the tokens and model calls of a child run that ran somewhere else — another process, a
/// durable invocation of its own — to the current run's totals, as a [`SubAgent`]'s are added:
/// they appear in its [`RunOutcome::usage`](super::RunOutcome::usage) and count against its
/// [`UsageLimits`](super::UsageLimits) (and those of the run's own ancestors). Call it from the
/// tool handler that ran the child: handlers run inside their run. Outside a run it does
/// nothing.
pub fn add_child_usage(usage: &Usage, requests: u32) {
    let _ = RUN.try_with(|scope| scope.add_descendant(Some(usage), requests));
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
#[derive_where(Debug)]
pub struct SubAgent<D: ToolDeps> {
    agent: Arc<AgentLoop<D>>,
    /// Shared with every [`AgentEvent::Child`] of its calls.
    name: Arc<str>,
    description: String,
    max_depth: u32,
    /// The typed output the child must give (its JSON is the call's result), if any.
    output: Option<Arc<OutputPlan>>,
    /// Where each call's child run is recorded, if anywhere.
    #[derive_where(skip(Debug))]
    records: Option<Arc<dyn ChildRecords>>,
    /// The child agent's own `emit` listeners, which see its events untagged.
    #[derive_where(skip(Debug))]
    own: Arc<[EmitFn]>,
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
            own: agent.emit.iter().cloned().collect(),
            agent: Arc::new(agent),
            name: Arc::from(name.into()),
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
        ToolSpec::<P>::builder(shared.name.to_string(), description)
            .parameters(prompt_parameters())
            .handler(move |ctx: ToolContext<P>, args: PromptArgs| {
                let shared = shared.clone();
                async move { shared.call(ctx.call_id(), args.prompt, false).await }
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
        self.call(call_id, prompt, false).await
    }

    /// Runs the child again for the same call `call_id` on a further `prompt` (e.g. why its
    /// answer was not accepted). A child recorded in a session ([`recorded_by`](Self::recorded_by))
    /// continues that session with `prompt` as a new message, keeping what it did; otherwise
    /// this is [`run_call`](Self::run_call).
    pub async fn continue_call(&self, call_id: &str, prompt: String) -> Result<String, ToolError> {
        self.call(call_id, prompt, true).await
    }

    /// Runs the child on `prompt` for the parent's call `call_id`.
    /// `continuing`: a further prompt for a child that already ran for this call.
    async fn call(
        &self,
        call_id: &str,
        prompt: String,
        continuing: bool,
    ) -> Result<String, ToolError> {
        let parent = RunScope::current();
        let (depth, max_depth) = self.depth_under(parent.as_ref())?;
        let opened = self.open_record(parent.as_ref(), call_id)?;
        // Held until the child's run ends (declared before the run so it outlives it).
        let _record_guard;
        let (prompts, context, record_listener) = match opened {
            Some(record) => {
                let finished = record
                    .finished
                    .filter(|_| self.output.is_none() && !continuing);
                if let Some(answer) = finished {
                    return Ok(answer);
                }
                _record_guard = record.guard;
                let (prompts, context) = match record.context {
                    context if context.is_empty() || continuing => {
                        (vec![Message::user(prompt)], context)
                    }
                    context => (Vec::new(), context),
                };
                (prompts, context, Some(record.listener))
            }
            None => (vec![Message::user(prompt)], Vec::new(), None),
        };
        let emitter = self.child_emitter(parent.as_ref(), call_id, record_listener);
        let start = ChildStart {
            parent,
            depth,
            max_depth,
        };
        let (result, output) = self.drive_child(prompts, context, emitter, start).await;
        match output {
            Some(output) => self.answer_output(result, output),
            None => self.answer(result),
        }
    }

    /// The depth a call from `parent` would run the child at, with the ceiling its ancestors
    /// allow; an error result when that is too deep.
    fn depth_under(&self, parent: Option<&RunScope>) -> Result<(u32, u32), ToolError> {
        let depth = parent.map_or(0, |p| p.inner.depth) + 1;
        let max_depth = parent
            .map_or(u32::MAX, |p| p.inner.max_depth)
            .min(self.max_depth);
        if depth > max_depth {
            return Err(ToolError::new(format!(
                "Sub-agent \"{}\" was not run: it would run at depth {depth}, and sub-agents may \
                 nest at most {max_depth} level(s) deep here. Do the work yourself instead.",
                self.name
            )));
        }
        Ok((depth, max_depth))
    }

    /// Opens the record of call `call_id`'s child run, when this sub-agent records its runs and
    /// the parent run belongs to a session.
    fn open_record(
        &self,
        parent: Option<&RunScope>,
        call_id: &str,
    ) -> Result<Option<OpenedChild>, ToolError> {
        let parent_session = parent.and_then(|p| p.inner.session_id.as_deref());
        let (Some(records), Some(parent_id)) = (&self.records, parent_session) else {
            return Ok(None);
        };
        records
            .open(parent_id, call_id, &self.name)
            .map(Some)
            .map_err(|e| {
                ToolError::new(format!(
                    "Sub-agent \"{}\" was not run: its session could not be recorded: {e}",
                    self.name
                ))
            })
    }

    /// The child run's emitter: its own listeners (and its record's), then the parent's
    /// listeners through a [`Relay`] that tags each event. When nobody listens anywhere, a
    /// silent emitter and no relay: the child builds no events at all, as a run nobody
    /// observes.
    fn child_emitter(
        &self,
        parent: Option<&RunScope>,
        call_id: &str,
        record_listener: Option<EmitFn>,
    ) -> Emitter {
        let listeners: Arc<[EmitFn]> = match record_listener {
            Some(record) => self.own.iter().cloned().chain([record]).collect(),
            None => self.own.clone(),
        };
        let parent = parent
            .map(|p| &p.inner.emitter)
            .filter(|e| e.enabled())
            .cloned();
        if listeners.is_empty() && parent.is_none() {
            return Emitter::new(listeners, None);
        }
        let relay = Arc::new(Relay {
            parent,
            call_id: Arc::from(call_id),
            agent: self.name.clone(),
            open_calls: Mutex::new(Vec::new()),
            shell: Mutex::new(None),
        });
        Emitter::forwarding(listeners, relay)
    }

    /// Runs the child loop as the child `start` describes.
    async fn drive_child(
        &self,
        prompts: Vec<Message>,
        context: Vec<Message>,
        emitter: Emitter,
        start: ChildStart,
    ) -> (Result<RunOutcome, AgentError>, Option<OutputRun>) {
        let output = self.output.clone().map(OutputRun::new);
        // Boxed once here: the run's future is large, and held inline it would be copied
        // again by every future that wraps it (this call, the tool's handler, the executor).
        let run = Box::pin(
            self.agent
                .drive_with_output(Some(prompts), context, emitter, output),
        );
        CHILD_START.scope(Cell::new(Some(start)), run).await
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

/// The JSON Schema of a sub-agent call's arguments, `{"prompt": TEXT}`: the parameters of the
/// tool [`SubAgent::into_tool`] builds, for a tool that delegates to a child run another way
/// (e.g. as a durable invocation of its own) and takes the same arguments.
pub fn prompt_parameters() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "prompt": {
                "type": "string",
                "description": "The complete task for the sub-agent: it sees nothing else of this conversation."
            }
        },
        "required": ["prompt"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
struct PromptArgs {
    prompt: String,
}

/// Forwards a child's events to its parent's listeners, each tagged with the call and the
/// sub-agent, and tracks the calls the child has started and not answered (a child run whose
/// future is dropped closes its stream with an aborted result for each). It exists only when
/// someone listens to the child (its own listeners, its record, or the parent's).
struct Relay {
    /// The parent run's emitter, when anyone listens to the parent.
    parent: Option<Emitter>,
    /// The tag of every event, shared by them all.
    call_id: Arc<str>,
    agent: Arc<str>,
    /// Calls the child started and has not answered yet.
    open_calls: Mutex<Vec<ToolCallPart>>,
    /// The tagged event the parent's listeners are shown, made once and reused for every event
    /// of the child (each moved in, then out or dropped in place): relaying an event to
    /// listeners allocates nothing and touches no reference count.
    shell: Mutex<Option<AgentEvent>>,
}

impl Forward for Relay {
    fn forward(&self, event: AgentEvent, give_back: bool) -> Option<AgentEvent> {
        let keeps = match &event {
            AgentEvent::ToolExecutionStart { .. } => true,
            AgentEvent::ToolExecutionEnd { call, .. } => {
                lock(&self.open_calls).retain(|c| c.id != call.id);
                false
            }
            _ => false,
        };
        let wanted = keeps || give_back;
        let event = match &self.parent {
            Some(parent) if parent.listeners_only() => {
                self.deliver_in_shell(parent, event, wanted)?
            }
            // The event itself becomes the parent's copy, and comes back when this relay keeps
            // part of it: no clone.
            Some(parent) => untag(parent.deliver(self.tagged(event), wanted))?,
            None => event,
        };
        if give_back {
            if keeps {
                self.keep(event.clone());
            }
            Some(event)
        } else {
            self.keep(event);
            None
        }
    }

    fn take_open_calls(&self) -> Vec<ToolCallPart> {
        std::mem::take(&mut *lock(&self.open_calls))
    }
}

impl Relay {
    /// `event` tagged with this relay's call and agent.
    fn tagged(&self, event: AgentEvent) -> AgentEvent {
        AgentEvent::Child {
            parent_call_id: self.call_id.clone(),
            agent: self.agent.clone(),
            event: Box::new(event),
        }
    }

    /// Shows `event` to the parent's listeners (which borrow it) in the reused shell; returns
    /// it afterwards when `wanted`, and drops it in place otherwise.
    fn deliver_in_shell(
        &self,
        parent: &Emitter,
        event: AgentEvent,
        wanted: bool,
    ) -> Option<AgentEvent> {
        let Ok(mut shell) = self.shell.try_lock() else {
            // Another thread is relaying an event of this child: this one gets its own tag.
            return untag(parent.deliver(self.tagged(event), wanted));
        };
        let tagged = shell.get_or_insert_with(|| self.tagged(AgentEvent::AgentStart));
        match &mut *tagged {
            AgentEvent::Child { event: slot, .. } => **slot = event,
            other => *other = self.tagged(event),
        }
        parent.deliver_borrowed(tagged);
        let AgentEvent::Child { event: slot, .. } = tagged else {
            return None;
        };
        if wanted {
            Some(std::mem::replace(&mut **slot, AgentEvent::AgentStart))
        } else {
            **slot = AgentEvent::AgentStart;
            None
        }
    }

    /// Keeps what closing the child's stream early needs of `event`: a started call.
    fn keep(&self, event: AgentEvent) {
        if let AgentEvent::ToolExecutionStart { call } = event {
            lock(&self.open_calls).push(call);
        }
    }
}

/// The child's event inside a tagged one handed back by the parent's emitter.
fn untag(tagged: Option<AgentEvent>) -> Option<AgentEvent> {
    match tagged {
        Some(AgentEvent::Child { event, .. }) => Some(*event),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A relay to a parent whose one listener records the kinds of what it sees, with each
    /// child event's own kind.
    fn relay_to_recorder() -> (Relay, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let record = seen.clone();
        let listener: EmitFn = Arc::new(move |event: &AgentEvent| {
            let kind = match event {
                AgentEvent::Child {
                    parent_call_id,
                    agent,
                    event,
                } => format!("{agent}/{parent_call_id}:{}", event.kind()),
                other => other.kind().to_owned(),
            };
            lock(&record).push(kind);
        });
        let relay = Relay {
            parent: Some(Emitter::new(Arc::from([listener]), None)),
            call_id: Arc::from("call-1"),
            agent: Arc::from("helper"),
            open_calls: Mutex::new(Vec::new()),
            shell: Mutex::new(None),
        };
        (relay, seen)
    }

    #[test]
    fn events_relayed_through_the_reused_shell_arrive_tagged_and_whole() {
        let (relay, seen) = relay_to_recorder();
        assert!(relay.forward(AgentEvent::AgentStart, false).is_none());
        let message = Message::user("hi");
        let back = relay.forward(
            AgentEvent::MessageEnd {
                message: message.clone(),
            },
            true,
        );
        assert!(matches!(back, Some(AgentEvent::MessageEnd { message: m }) if m == message));
        assert_eq!(
            *lock(&seen),
            ["helper/call-1:agent_start", "helper/call-1:message_end"]
        );
    }

    #[test]
    fn an_event_relayed_while_the_shell_is_in_use_gets_a_tag_of_its_own() {
        let (relay, seen) = relay_to_recorder();
        relay.forward(AgentEvent::TurnStart { turn: 1 }, false);
        let in_use = lock(&relay.shell);
        relay.forward(AgentEvent::AgentStart, false);
        drop(in_use);
        relay.forward(AgentEvent::TurnStart { turn: 2 }, false);
        assert_eq!(
            *lock(&seen),
            [
                "helper/call-1:turn_start",
                "helper/call-1:agent_start",
                "helper/call-1:turn_start"
            ]
        );
    }
}
