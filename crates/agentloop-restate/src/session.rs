//! `AgentSession`: the Restate virtual object (key = session id) whose exclusive `run` handler
//! drives one [`AgentLoop`] run with every model reply and tool result journaled (see
//! `bridge.rs`), and whose shared handlers answer `approve`, `status` and `history` while a run
//! is in progress or parked.
//!
//! The session's messages live in the object's state (`messages`), read at the start of a run and
//! written at its end, so a replayed run starts from exactly the context the first attempt saw.
//! Completed messages are also mirrored into the worker's session store as they complete (when
//! one is configured); a replay does not append them twice (see [`MirrorStore`]).
//!
//! A model step hands its reply to the loop as soon as its closure has it, and the handler keeps
//! polling the loop while it waits for the engine's acknowledgement, but turns no job into a
//! journal entry until then (see `bridge.rs`, "Pipelined model calls").
//!
//! # Where a tool call runs
//!
//! A call is a durable call of the `ToolExecutor` service, so each result is journaled as it
//! completes, a batch runs in parallel, and the engine can run the call on any worker. Such a
//! call costs the engine about four log appends (the call, the callee's start, its result, the
//! completion back to the caller) and an invocation of its own, against one append for a
//! journaled step. So a reply's **lone** call (the reply asks for exactly one) is a step of the
//! session instead, in one of two ways:
//!
//! - **A read-only call** (`read_file`, `list_dir`, `grep`, `find_files`, which every approval
//!   policy allows) runs inside the model's own step, right after the reply arrives, and its
//!   result is journaled with the reply; when the loop then executes the call, it gets the
//!   journaled result. Such a turn is one journaled step. A retry after a worker's death
//!   repeats nothing with side effects (it may repeat the read, as it repeats the model
//!   request, when the worker died before the step was journaled). If the loop does not
//!   execute the call after all (the run was aborted, say), the read happened anyway and its
//!   result is dropped; if it executes it with other arguments than the reply's, the call goes
//!   to the `ToolExecutor` like any other.
//! - **Any other call to a tool that stops within two minutes** (`write_file`, `edit_file`) is a
//!   step of its own, once the loop has decided to run it (after approval, when the policy
//!   asks for it) and the model's step is journaled: the call is in the journal before it runs,
//!   and a call whose worker died mid-step is run again with the same arguments, at least once
//!   as in the `ToolExecutor`. Such a turn is two journaled steps, and the loop goes on with
//!   the result while the engine journals it, as with a model reply.
//!
//! In both cases the engine's cancellation is noticed when the step ends (the file tools stop
//! at two minutes), not while the call runs. That is why `shell`, whose commands may run for
//! ten minutes, and every call of a batch stay durable calls of the `ToolExecutor`.
//!
//! # Task calls
//!
//! A `task` call (see `bridge.rs`) runs a child agent as its own durable invocation: the `task`
//! handler of this object under the key [`child_key`] (the parent's key and the call id). The
//! parent's handler makes it a durable call, so it is an entry of the parent's journal: a
//! replay of the parent finds the entry and waits for the same child (or takes its journaled
//! result) instead of starting another, and the child, whose model replies and tool results are
//! in its own journal, resumes after a worker's death like any run. The child's output carries
//! its usage and model calls, which the parent's `task` tool adds to the parent run's totals.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use agentloop::agent::{
    AbortSignal, AgentError, AgentEvent, AgentLoop, AgentLoopConfig, RunOutcome, RunStop,
};
use agentloop::builtin::WorkspaceDeps;
use agentloop::session::{NewSession, ParentLink, SessionRecorder, SessionStore};
use agentloop::tooling::Approval;
use agentloop::transcript::{Message, Usage};
use restate_sdk::context::{DurableFuture, RequestTarget};
use restate_sdk::prelude::*;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::bridge::{
    self, Job, JournaledModel, LoneRead, LoneReadSlot, ModelWork, TASK_TOOL, arguments_value,
    forwarding_tool, task_tool,
};
use crate::executor::ToolExecutor;
use crate::mirror::MirrorStore;
use crate::types::{
    ApprovalDecision, ApprovalInput, ModelReply, PendingApproval, RunInput, RunOutput,
    SessionStatus, TaskInput, ToolCallInput, ToolCallOutcome,
};
use crate::worker::WorkerConfig;

const MESSAGES: &str = "messages";
const PENDING: &str = "pending";
const RUNNING: &str = "running";
const LAST_STOP: &str = "last_stop";

/// Restate's status code for a cancelled invocation.
const CANCELLED: u16 = 409;

/// The agent-session virtual object.
pub struct AgentSession {
    config: Arc<WorkerConfig>,
    /// Runs a lone read-only call inside the model's step (see the module docs).
    tools: Arc<ToolExecutor>,
}

impl AgentSession {
    /// The object for a worker's configuration.
    pub fn new(config: Arc<WorkerConfig>) -> Self {
        let tools = Arc::new(ToolExecutor::new(&config));
        AgentSession { config, tools }
    }

    fn default_system_prompt(&self) -> String {
        format!(
            "You are a coding agent working in the directory {}. Use the tools to inspect and \
             change the files in it; paths are relative to that directory. Finish with a short \
             summary of what you did.",
            self.config.workspace.root().display()
        )
    }

    /// The loop for one run attempt: the journaled model, forwarding tools (and the `task`
    /// tool, for a run that is not itself a task's child), and an approval hook that posts calls
    /// needing a person to the handler; with the store mirror it records into, if the worker
    /// has a store.
    fn build_agent(
        &self,
        session_id: &str,
        jobs: mpsc::UnboundedSender<Job>,
        base: u64,
        task: Option<&TaskInput>,
    ) -> Result<Attempt, TerminalError> {
        let config = AgentLoopConfig {
            model: self.config.model_name.clone(),
            system_prompt: Some(
                self.config
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| self.default_system_prompt()),
            ),
            reasoning: self.config.reasoning,
            max_turns: self.config.max_turns,
            // The executor applies each tool's own timeout; a loop-side timeout would make the
            // first attempt and a replay disagree about a call's result.
            default_tool_timeout: None,
            ..AgentLoopConfig::default()
        };
        let approvals = jobs.clone();
        let deps = WorkspaceDeps::new(self.config.workspace.clone(), self.config.policy)
            .with_async_asker(move |call| {
                let approvals = approvals.clone();
                async move {
                    let (reply, answer) = oneshot::channel();
                    if approvals.send(Job::Approval { call, reply }).is_err() {
                        return Approval::deny("the durable run ended before approval");
                    }
                    answer
                        .await
                        .unwrap_or_else(|_| Approval::deny("the run ended before a decision"))
                }
            });
        let live = Arc::new(AtomicBool::new(false));
        let lone_read: LoneReadSlot = Arc::default();
        let model = JournaledModel {
            inner: self.config.model.clone(),
            jobs: jobs.clone(),
            pipeline: self.config.pipeline_model_calls,
            live: live.clone(),
            tools: self.tools.clone(),
            session_id: session_id.to_owned(),
        };
        let mut agent = AgentLoop::with_deps(config, model, Arc::new(deps));
        for spec in self.tools.specs() {
            let forward = forwarding_tool(spec, session_id, jobs.clone(), lone_read.clone());
            agent
                .add_tool(forward)
                .map_err(|e| TerminalError::new(format!("cannot register tool: {e}")))?;
        }
        // A child gets no `task` of its own: sub-agents nest one level deep.
        if self.config.task_tool && task.is_none() {
            let spec = task_tool(jobs.clone())
                .map_err(|e| TerminalError::new(format!("cannot build the task tool: {e}")))?;
            agent
                .add_tool(spec)
                .map_err(|e| TerminalError::new(format!("cannot register tool: {e}")))?;
        }
        let mut mirror = None;
        if let Some(store) = &self.config.store {
            let mut new = NewSession::new().id(session_id);
            if let Some(model) = &self.config.model_name {
                new = new.model(model.clone());
            }
            if let Some(task) = task {
                new = new.parent(ParentLink::new(
                    &task.parent_session,
                    &task.call_id,
                    TASK_TOOL,
                ));
            }
            let store = Arc::new(MirrorStore::new(store.clone(), new, base));
            let recorder = SessionRecorder::new(store.clone() as Arc<dyn SessionStore>, session_id);
            agent = agent.with_emit(move |event: &AgentEvent| recorder.on_event(event));
            mirror = Some(store);
        }
        Ok(Attempt {
            agent,
            mirror,
            live,
            lone_read,
        })
    }
}

/// What one attempt of a run works with (see [`AgentSession::build_agent`]).
struct Attempt {
    agent: AgentLoop<WorkspaceDeps>,
    mirror: Option<Arc<MirrorStore>>,
    /// Set once a step's closure runs in this attempt (see `bridge.rs`).
    live: Arc<AtomicBool>,
    lone_read: LoneReadSlot,
}

/// The loop's channel for one step's value, answered once: by the step's closure as soon as the
/// value is known, or by the handler when the step returns (on replay, or when it failed).
type AnswerOnce<T> = Arc<Mutex<Option<oneshot::Sender<T>>>>;

/// The loop's channel for one model reply.
type ReplyTo = AnswerOnce<ModelReply>;

/// Takes the sender of `once` unless the loop has been answered already.
fn unanswered<T>(once: &AnswerOnce<T>) -> Option<oneshot::Sender<T>> {
    once.lock().ok().and_then(|mut sender| sender.take())
}

/// A journaled step the handler is waiting on: a model call, or a lone tool call of its own
/// (see the module docs).
struct Step<'a> {
    future: Pin<Box<dyn Future<Output = StepDone> + Send + 'a>>,
}

/// What a step returned, with the loop's channel for its value.
enum StepDone {
    Model(Box<Result<Json<ModelReply>, TerminalError>>, ReplyTo),
    Tool(
        Result<Json<ToolCallOutcome>, TerminalError>,
        AnswerOnce<ToolCallOutcome>,
    ),
}

/// Hands `reply` to the loop unless it has it already; sets the lone read first, so the loop's
/// next tool call finds it.
fn deliver(reply_to: &ReplyTo, reply: ModelReply, slot: &LoneReadSlot, tools: &ToolExecutor) {
    let Some(sender) = unanswered(reply_to) else {
        return;
    };
    if let Ok(mut slot) = slot.lock() {
        *slot = LoneRead::of(&reply, tools);
    }
    let _ = sender.send(reply);
}

/// A completed durable future: which kind, and its result.
enum Completion {
    Tool(Result<Json<ToolCallOutcome>, TerminalError>),
    Approval(Result<Json<ApprovalInput>, TerminalError>),
    Task(Result<Json<RunOutput>, TerminalError>),
}

/// Who waits for a completion.
enum Waiter {
    Tool(oneshot::Sender<ToolCallOutcome>),
    Task(oneshot::Sender<Result<RunOutput, String>>),
    Approval {
        call_id: String,
        reply: oneshot::Sender<Approval>,
    },
}

/// A tool call's outcome from what the engine returned for it (a step or a durable call): a
/// call the engine could not complete (cancelled, or failed for good) is an error result.
fn tool_outcome(result: Result<Json<ToolCallOutcome>, TerminalError>) -> ToolCallOutcome {
    match result {
        Ok(outcome) => outcome.into_inner(),
        Err(error) => ToolCallOutcome::error(format!(
            "the tool call failed in the engine: {}",
            error.message()
        )),
    }
}

/// The object key of the child run serving `task` call `call_id` of session `parent`: derived
/// from both, so the same call always reaches the same child.
pub(crate) fn child_key(parent: &str, call_id: &str) -> String {
    format!("{parent}:{call_id}")
}

fn stop_value(stop: &RunStop) -> Value {
    serde_json::to_value(stop).unwrap_or(Value::Null)
}

/// The run handler's side of one attempt: it answers the loop's jobs (model calls, tool calls,
/// approvals) with journaled steps, durable calls and awakeables, one step at a time.
struct Driver<'a, 'c> {
    ctx: &'a ObjectContext<'c>,
    session: &'a AgentSession,
    session_id: String,
    abort: AbortSignal,
    mirror: Option<Arc<MirrorStore>>,
    live: Arc<AtomicBool>,
    lone_read: LoneReadSlot,
    /// Durable calls and awakeables in flight, with who waits for each.
    inflight: DurableFuturesUnordered<Pin<Box<dyn DurableFuture<Output = Completion> + Send + 'a>>>,
    waiters: HashMap<usize, Waiter>,
    pending: Vec<PendingApproval>,
    turn: u32,
    cancelled: bool,
    /// The step (a model call, or a lone tool call) waiting for the engine's acknowledgement.
    /// Meanwhile the loop runs on (it may have the step's value already), but no job becomes a
    /// journal entry: see `bridge.rs`.
    step: Option<Step<'a>>,
    /// The call of the last model reply when it was the reply's only call: its job may run as a
    /// step of its own (see the module docs).
    lone_call: Option<String>,
}

impl<'a, 'c> Driver<'a, 'c> {
    fn new(
        ctx: &'a ObjectContext<'c>,
        session: &'a AgentSession,
        session_id: &str,
        attempt: &Attempt,
    ) -> Self {
        Driver {
            ctx,
            session,
            session_id: session_id.to_owned(),
            abort: attempt.agent.abort_signal().clone(),
            mirror: attempt.mirror.clone(),
            live: attempt.live.clone(),
            lone_read: attempt.lone_read.clone(),
            inflight: DurableFuturesUnordered::new(),
            waiters: HashMap::new(),
            pending: Vec::new(),
            turn: 0,
            cancelled: false,
            step: None,
            lone_call: None,
        }
    }

    /// Polls the loop and answers its jobs until the loop has ended and no step is waiting.
    async fn drive(
        &mut self,
        run: impl Future<Output = Result<RunOutcome, AgentError>>,
        jobs: &mut mpsc::UnboundedReceiver<Job>,
    ) -> Result<RunOutcome, AgentError> {
        tokio::pin!(run);
        let mut finished = None;
        loop {
            if self.step.is_none()
                && let Some(result) = finished.take()
            {
                return result;
            }
            let waiting = self.step.is_some();
            tokio::select! {
                biased;
                done = async {
                    match self.step.as_mut() {
                        Some(step) => step.future.as_mut().await,
                        None => std::future::pending().await,
                    }
                }, if waiting => self.on_step_done(done),
                result = &mut run, if finished.is_none() => finished = Some(result),
                Some(job) = jobs.recv(), if !waiting => self.on_job(job),
                next = self.inflight.next(), if !waiting && !self.inflight.is_empty() => {
                    self.on_completion(next)
                }
            }
        }
    }

    /// The engine failed or cancelled something: the loop is aborted, which answers every
    /// pending call.
    fn cancel_if(&mut self, error: &TerminalError) {
        if error.code() == CANCELLED {
            self.cancelled = true;
            self.abort.abort();
        }
    }

    fn on_step_done(&mut self, done: StepDone) {
        self.step = None;
        match done {
            StepDone::Model(result, reply_to) => {
                let reply = match *result {
                    Ok(reply) => reply.into_inner(),
                    Err(error) => {
                        self.cancel_if(&error);
                        ModelReply::failed(error.message().to_owned())
                    }
                };
                self.lone_call = match &reply {
                    ModelReply::Done { message, .. } => {
                        bridge::lone_call(message).map(|call| call.id.clone())
                    }
                    ModelReply::Failed { .. } => None,
                };
                // On replay (or a failed step) the loop gets the reply only now.
                deliver(&reply_to, reply, &self.lone_read, &self.session.tools);
            }
            StepDone::Tool(result, outcome_to) => {
                if let Err(error) = &result {
                    self.cancel_if(error);
                }
                let outcome = tool_outcome(result);
                // On replay (or when the engine cancelled the step before it ran) the loop gets
                // the result only now.
                if let Some(sender) = unanswered(&outcome_to) {
                    let _ = sender.send(outcome);
                }
            }
        }
        if let Some(mirror) = &self.mirror {
            mirror.release();
        }
    }

    fn on_job(&mut self, job: Job) {
        match job {
            Job::Model { work, reply } => {
                self.turn += 1;
                if self.cancelled {
                    // Never start a model call after the invocation was cancelled (one started
                    // early is aborted with `work`); the loop's reply channel closes, which ends
                    // its turn.
                    drop(work);
                    return;
                }
                self.start_model_step(work, reply);
            }
            // After a cancellation nothing new goes to the engine: the loop may still post jobs
            // for a reply it got before the cancellation was known (pipelining).
            Job::Tool { reply, .. } if self.cancelled => {
                let _ = reply.send(ToolCallOutcome::error(
                    "aborted: the run was cancelled before this call was sent",
                ));
            }
            Job::Approval { reply, .. } if self.cancelled => {
                let _ = reply.send(Approval::deny("the run was cancelled"));
            }
            Job::Task { reply, .. } if self.cancelled => {
                let _ = reply.send(Err(
                    "aborted: the run was cancelled before the task was sent".to_owned(),
                ));
            }
            Job::Task {
                call_id,
                prompt,
                reply,
            } => self.start_task(call_id, prompt, reply),
            Job::Tool { input, reply }
                if self.lone_call.as_deref() == Some(input.call.id.as_str())
                    && self.session.tools.runs_in_step(&input.call.tool_name) =>
            {
                self.lone_call = None;
                self.start_tool_step(input, reply);
            }
            Job::Tool { input, reply } => {
                let call = self
                    .ctx
                    .request::<_, Json<ToolCallOutcome>>(
                        RequestTarget::service("ToolExecutor", "execute"),
                        Json(input),
                    )
                    .call()
                    .map(Completion::Tool);
                let index = self.inflight.push(Box::pin(call));
                self.waiters.insert(index, Waiter::Tool(reply));
            }
            Job::Approval { call, reply } => {
                let (awakeable_id, decision) = self.ctx.awakeable::<Json<ApprovalInput>>();
                self.pending.push(PendingApproval {
                    call_id: call.id.clone(),
                    tool: call.tool_name.clone(),
                    arguments: arguments_value(&call.arguments),
                    awakeable_id,
                });
                self.ctx.set(PENDING, Json(self.pending.clone()));
                let index = self
                    .inflight
                    .push(Box::pin(decision.map(Completion::Approval)));
                self.waiters.insert(
                    index,
                    Waiter::Approval {
                        call_id: call.id,
                        reply,
                    },
                );
            }
        }
    }

    /// A `task` call as a durable call of the child's own object (key: this session's id and
    /// the call id), so the call is in this run's journal: a replay of this run waits for the
    /// same child instead of starting another, and the child's journal is its own.
    fn start_task(
        &mut self,
        call_id: String,
        prompt: String,
        reply: oneshot::Sender<Result<RunOutput, String>>,
    ) {
        let input = TaskInput {
            prompt,
            parent_session: self.session_id.clone(),
            call_id,
        };
        let key = child_key(&self.session_id, &input.call_id);
        let call = self
            .ctx
            .request::<_, Json<RunOutput>>(
                RequestTarget::object("AgentSession", key, "task"),
                Json(input),
            )
            .call()
            .map(Completion::Task);
        let index = self.inflight.push(Box::pin(call));
        self.waiters.insert(index, Waiter::Task(reply));
    }

    /// The model call as a journaled step; its closure hands the reply to the loop at once.
    fn start_model_step(&mut self, work: ModelWork, reply: oneshot::Sender<ModelReply>) {
        let reply_to: ReplyTo = Arc::new(Mutex::new(Some(reply)));
        let closure = {
            let (live, tools, session, mirror, reply_to, slot) = (
                self.live.clone(),
                self.session.tools.clone(),
                self.session_id.clone(),
                self.mirror.clone(),
                reply_to.clone(),
                self.lone_read.clone(),
            );
            move || async move {
                // This step is new to the journal, and so is every later one.
                live.store(true, std::sync::atomic::Ordering::SeqCst);
                let reply = work.reply(&tools, &session).await;
                // The loop goes on with the reply while the engine journals it; the store waits
                // for the acknowledgement.
                if let Some(mirror) = &mirror {
                    mirror.hold();
                }
                deliver(&reply_to, reply.clone(), &slot, &tools);
                Ok(Json(reply))
            }
        };
        let run = self
            .ctx
            .run(closure)
            .name(format!("model call {}", self.turn));
        self.step = Some(Step {
            future: Box::pin(async move { StepDone::Model(Box::new(run.await), reply_to) }),
        });
    }

    /// A reply's lone call as a journaled step of its own (see the module docs).
    fn start_tool_step(&mut self, input: ToolCallInput, reply: oneshot::Sender<ToolCallOutcome>) {
        let name = format!("tool call {} ({})", input.call.tool_name, input.call.id);
        let outcome_to: AnswerOnce<ToolCallOutcome> = Arc::new(Mutex::new(Some(reply)));
        let closure = {
            let (live, tools, mirror, outcome_to) = (
                self.live.clone(),
                self.session.tools.clone(),
                self.mirror.clone(),
                outcome_to.clone(),
            );
            move || async move {
                live.store(true, std::sync::atomic::Ordering::SeqCst);
                let outcome = tools.execute_call(&input).await;
                // As with a model reply: the loop goes on with the result while the engine
                // journals it; the store waits.
                if let Some(mirror) = &mirror {
                    mirror.hold();
                }
                if let Some(sender) = unanswered(&outcome_to) {
                    let _ = sender.send(outcome.clone());
                }
                Ok(Json(outcome))
            }
        };
        let run = self.ctx.run(closure).name(name);
        self.step = Some(Step {
            future: Box::pin(async move { StepDone::Tool(run.await, outcome_to) }),
        });
    }

    fn on_completion(&mut self, next: Result<Option<(usize, Completion)>, TerminalError>) {
        let (index, completion) = match next {
            Ok(Some(done)) => done,
            Ok(None) => return,
            Err(error) => {
                // The invocation was cancelled (or failed) while waiting: abort the loop, which
                // answers every pending call with "aborted".
                self.cancelled |= error.code() == CANCELLED;
                self.abort.abort();
                self.waiters.clear();
                self.inflight = DurableFuturesUnordered::new();
                return;
            }
        };
        match (self.waiters.remove(&index), completion) {
            (Some(Waiter::Tool(reply)), Completion::Tool(result)) => {
                if let Err(error) = &result {
                    self.cancel_if(error);
                }
                let _ = reply.send(tool_outcome(result));
            }
            (Some(Waiter::Task(reply)), Completion::Task(result)) => {
                if let Err(error) = &result {
                    self.cancel_if(error);
                }
                let _ = reply.send(
                    result
                        .map(Json::into_inner)
                        .map_err(|error| error.message().to_owned()),
                );
            }
            (Some(Waiter::Approval { call_id, reply }), Completion::Approval(result)) => {
                self.pending.retain(|p| p.call_id != call_id);
                self.ctx.set(PENDING, Json(self.pending.clone()));
                let _ = reply.send(self.approval_of(result));
            }
            _ => {}
        }
    }

    /// The loop's answer for a decided (or failed) approval awakeable.
    fn approval_of(&mut self, result: Result<Json<ApprovalInput>, TerminalError>) -> Approval {
        match result {
            Ok(input) => {
                let input = input.into_inner();
                match input.decision {
                    ApprovalDecision::Allow => Approval::Allow,
                    ApprovalDecision::Deny => Approval::Deny(
                        input
                            .reason
                            .unwrap_or_else(|| "denied by a person".to_owned()),
                    ),
                }
            }
            Err(error) => {
                self.cancel_if(&error);
                Approval::deny(format!("no decision: {}", error.message()))
            }
        }
    }
}

/// Ends a run: stores the context and stop in the object's state (after every completed message
/// is in the mirror), and returns the run's output.
async fn finish_run(
    ctx: &ObjectContext<'_>,
    session_id: &str,
    result: Result<RunOutcome, AgentError>,
    history: Vec<Message>,
    mirror: &Option<Arc<MirrorStore>>,
    cancelled: bool,
) -> Result<Json<RunOutput>, HandlerError> {
    let (stop, context, usage, turns) = match &result {
        Ok(outcome) => (
            outcome.stop.clone(),
            outcome.context.clone(),
            outcome.usage,
            outcome.turns,
        ),
        Err(error) => {
            // The completed messages start with the prompt.
            let mut context = history;
            context.extend(error.completed_messages().iter().cloned());
            let stop = RunStop::Internal {
                message: error.to_string(),
            };
            (stop, context, Usage::default(), 0)
        }
    };
    if let Some(mirror) = mirror {
        // Every completed message is in the store before the caller gets the output.
        mirror.flush().await;
    }
    let final_text = result
        .as_ref()
        .map(RunOutcome::final_text)
        .unwrap_or_default();
    ctx.set(MESSAGES, Json(context));
    ctx.set(LAST_STOP, Json(stop_value(&stop)));
    ctx.clear(PENDING);
    ctx.clear(RUNNING);
    if cancelled {
        tracing::info!(session = %session_id, "run aborted by cancellation");
    }
    if let Err(AgentError::Config(message)) = &result {
        return Err(TerminalError::new(message.clone()).into());
    }
    Ok(Json(RunOutput {
        stop: stop_value(&stop),
        final_text,
        usage,
        turns,
    }))
}

impl AgentSession {
    /// Runs the agent on `prompt` on top of the session's messages, to the end; `task` is the
    /// parent's call when this run is a task's child.
    async fn run_to_end(
        &self,
        ctx: ObjectContext<'_>,
        prompt: String,
        task: Option<&TaskInput>,
    ) -> Result<Json<RunOutput>, HandlerError> {
        let session_id = ctx.key().to_owned();
        let history: Vec<Message> = ctx
            .get::<Json<Vec<Message>>>(MESSAGES)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        ctx.set(RUNNING, true);

        let (jobs_tx, mut jobs) = mpsc::unbounded_channel();
        let attempt = self.build_agent(&session_id, jobs_tx, history.len() as u64, task)?;
        let mut driver = Driver::new(&ctx, self, &session_id, &attempt);
        let run = attempt
            .agent
            .run(vec![Message::user(prompt)], history.clone());
        let result = driver.drive(run, &mut jobs).await;
        let cancelled = driver.cancelled;
        finish_run(
            &ctx,
            &session_id,
            result,
            history,
            &attempt.mirror,
            cancelled,
        )
        .await
    }
}

#[restate_sdk::object]
impl AgentSession {
    /// Runs the agent on `prompt` on top of the session's messages, to the end.
    #[handler]
    async fn run(
        &self,
        ctx: ObjectContext<'_>,
        input: Json<RunInput>,
    ) -> Result<Json<RunOutput>, HandlerError> {
        self.run_to_end(ctx, input.into_inner().prompt, None).await
    }

    /// Runs one `task` call of a parent run as a child run (see [`child_key`] for its key):
    /// the same agent without a `task` tool of its own, journaled like any run.
    #[handler]
    async fn task(
        &self,
        ctx: ObjectContext<'_>,
        input: Json<TaskInput>,
    ) -> Result<Json<RunOutput>, HandlerError> {
        let input = input.into_inner();
        self.run_to_end(ctx, input.prompt.clone(), Some(&input))
            .await
    }

    /// Decides a pending call (`{"call_id", "decision": "allow"|"deny", "reason"?}`).
    #[handler]
    async fn approve(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<ApprovalInput>,
    ) -> Result<(), HandlerError> {
        let input = input.into_inner();
        let pending: Vec<PendingApproval> = ctx
            .get::<Json<Vec<PendingApproval>>>(PENDING)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        let Some(found) = pending.iter().find(|p| p.call_id == input.call_id) else {
            let known: Vec<_> = pending.iter().map(|p| p.call_id.as_str()).collect();
            return Err(TerminalError::new_with_code(
                404,
                format!(
                    "no pending call {:?} in session {:?} (pending: {})",
                    input.call_id,
                    ctx.key(),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ),
            )
            .into());
        };
        ctx.resolve_awakeable(&found.awakeable_id, Json(input));
        Ok(())
    }

    /// Whether a run is in progress, the pending approvals and how the last run ended.
    #[handler]
    async fn status(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<SessionStatus>, HandlerError> {
        let running = ctx.get::<bool>(RUNNING).await?.unwrap_or(false);
        let messages = ctx
            .get::<Json<Vec<Message>>>(MESSAGES)
            .await?
            .map(|m| m.into_inner().len())
            .unwrap_or(0);
        let pending = ctx
            .get::<Json<Vec<PendingApproval>>>(PENDING)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        let last_stop = ctx
            .get::<Json<Value>>(LAST_STOP)
            .await?
            .map(Json::into_inner);
        Ok(Json(SessionStatus {
            running,
            messages,
            pending,
            last_stop,
        }))
    }

    /// The session's messages as of the last finished run.
    #[handler]
    async fn history(
        &self,
        ctx: SharedObjectContext<'_>,
    ) -> Result<Json<Vec<Message>>, HandlerError> {
        Ok(Json(
            ctx.get::<Json<Vec<Message>>>(MESSAGES)
                .await?
                .map(Json::into_inner)
                .unwrap_or_default(),
        ))
    }
}
