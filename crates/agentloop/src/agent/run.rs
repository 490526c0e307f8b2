//! One run of the loop: the turn cycle, the model call, tool execution with hooks, limits and the
//! guarantee that every run ends with exactly one `AgentEnd`.
//!
//! Cost per turn is independent of the history's length: the context is borrowed into the model
//! request (copied only when a `context` hook or a custom message requires it), and events are
//! only built when someone listens.

use std::borrow::Cow;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::{FutureExt, StreamExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

mod turn;

use super::calls::{BlockedCall, FinalizedToolCall, PreparedToolCall};
use super::events::{AgentEvent, Emitter, EventObserver, RunStop};
use super::hooks::HookKind;
use super::pending::{Answer, ParkedRun};
use super::{AgentError, AgentLoop, RunOutcome, ToolExecutionMode};
use crate::agent::output::{OutputPlan, OutputRun, PartialOutput};
use crate::model::{
    MessageAssembler, ModelDelta, ModelError, ModelEvent, ModelRequest, messages_for_model,
};
use crate::tooling::{
    ExecOptions, Finalizer, LoadedTools, MAX_PARALLEL_TOOLS, ToolDeps, ToolObserver, ToolSchema,
    check_call, panic_message, render_guidance, run_tools_with, search_result_names,
};
use crate::transcript::{
    Message, Role, StopReason, ToolArguments, ToolCallPart, ToolResultPart, Usage, now_ms,
};

/// The run's mutable state, kept outside the run future so that a panic inside it still leaves
/// every completed message available.
#[derive(Default)]
pub(crate) struct RunState {
    context: Vec<Message>,
    new_from: usize,
    turns: u32,
    usage: Usage,
    /// Deferred tools loaded by tool searches so far in this conversation.
    loaded: LoadedTools,
    /// Typed output of this run, when one was asked for (see [`crate::agent::output`]).
    output: Option<OutputRun>,
}

impl RunState {
    fn push(&mut self, message: Message) {
        self.context.push(message);
    }

    fn new_messages(&self) -> &[Message] {
        self.context.get(self.new_from..).unwrap_or(&[])
    }
}

/// Holds a run's state while its turn cycle runs, and closes the event stream of a sub-agent's
/// run whose future is dropped before it ended (its parent was aborted, its call timed out): an
/// aborted result for each call it had started (its relay tracks them), then one
/// `AgentEnd { stop: Aborted }` listing the messages it had completed. The run's state is what
/// that `AgentEnd` lists, so nothing keeps a second copy of the messages for the purpose.
struct RunGuard {
    state: RunState,
    /// A sub-agent run's emitter, until the run ends and emits its own `AgentEnd` (`None` for
    /// any other run: nothing is emitted for a dropped top-level run).
    closes: Option<Emitter>,
}

impl RunGuard {
    fn new(state: RunState, emitter: &Emitter) -> Self {
        RunGuard {
            state,
            closes: emitter.forwards().then(|| emitter.clone()),
        }
    }

    /// The run ended (it emits its own `AgentEnd`): its state, handed back.
    fn finish(mut self) -> RunState {
        self.closes = None;
        std::mem::take(&mut self.state)
    }
}

impl Drop for RunGuard {
    fn drop(&mut self) {
        let Some(emitter) = self.closes.take() else {
            return;
        };
        for call in emitter.take_open_calls() {
            let result = ToolResultPart::error(
                &call.id,
                &call.tool_name,
                format!(
                    "Tool call \"{}\" was not finished: the run was aborted.",
                    call.tool_name
                ),
            );
            emitter.emit(AgentEvent::ToolExecutionEnd {
                call,
                result,
                blocked: false,
            });
        }
        emitter.emit(AgentEvent::AgentEnd {
            messages: self.state.new_messages().to_vec(),
            stop: RunStop::Aborted,
        });
    }
}

/// How the model call of a turn ended.
enum Reply {
    Done(Message),
    Aborted(Message),
    Failed(Message, ModelError),
}

/// Detects the same wholly failing batch repeating turn after turn.
struct RepeatTracker {
    limit: Option<u32>,
    last: Option<Vec<(String, ToolArguments)>>,
    count: u32,
}

impl RepeatTracker {
    /// Records a turn's batch; true when the limit is reached.
    fn observe(&mut self, calls: &[ToolCallPart], results: &[ToolResultPart]) -> bool {
        let Some(limit) = self.limit else {
            return false;
        };
        if calls.is_empty() || !results.iter().all(|r| r.is_error) {
            self.last = None;
            self.count = 0;
            return false;
        }
        let signature: Vec<_> = calls
            .iter()
            .map(|c| (c.tool_name.clone(), c.arguments.clone()))
            .collect();
        if self.last.as_ref() == Some(&signature) {
            self.count += 1;
        } else {
            self.last = Some(signature);
            self.count = 1;
        }
        self.count >= limit
    }
}

fn truncated_call_result(call: &ToolCallPart) -> ToolResultPart {
    ToolResultPart::error(
        &call.id,
        &call.tool_name,
        format!(
            "Tool call \"{}\" was cut off by the output-token limit before it was complete, so it \
             was not run. Re-issue the call (keep its arguments shorter, or split the work into \
             several calls).",
            call.tool_name
        ),
    )
}

fn aborted_call_result(call: &ToolCallPart) -> ToolResultPart {
    ToolResultPart::error(
        &call.id,
        &call.tool_name,
        format!(
            "Tool call \"{}\" was not run: the run was aborted while the model was still \
             answering.",
            call.tool_name
        ),
    )
}

/// What a turn's final-result calls decided (typed output, tool strategy).
enum OutputTurn {
    /// No decision: the run goes on.
    Continue,
    /// A valid final result: the run ends.
    Accepted,
    /// Invalid again, and no repair left: the run ends without output.
    Exhausted,
}

fn output_instructions(output: &Option<OutputRun>) -> Option<&str> {
    output.as_ref()?.plan.instructions.as_deref()
}

fn output_invalid(output: &Option<OutputRun>) -> RunStop {
    RunStop::OutputInvalid {
        attempts: output.as_ref().map_or(0, |o| o.failures),
    }
}

fn empty_assistant() -> Message {
    let mut m = Message::assistant(Vec::new(), StopReason::Stop);
    m.stop_reason = None;
    m
}

/// One assistant reply being streamed: what was assembled so far, and the events that open
/// and close it, so that every way a reply ends emits exactly one `MessageStart`/`MessageEnd`.
struct ReplyBuilder<'a> {
    emitter: &'a Emitter,
    model_id: Option<String>,
    provider: &'a str,
    assembler: MessageAssembler,
    partial_output: PartialOutput,
    started: bool,
}

impl<'a> ReplyBuilder<'a> {
    fn new(model_id: Option<String>, provider: &'a str, emitter: &'a Emitter) -> Self {
        Self {
            emitter,
            model_id,
            provider,
            assembler: MessageAssembler::new(),
            partial_output: PartialOutput::default(),
            started: false,
        }
    }

    /// Emits `MessageStart` once, before the reply's first event reaches listeners.
    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.emitter.emit_with(|| AgentEvent::MessageStart {
                message: empty_assistant(),
            });
        }
    }

    /// Fills in what the provider left out (model, provider, time, cost) on the final message.
    fn stamp(&self, mut m: Message) -> Message {
        if m.model.is_none() {
            m.model = self.model_id.clone();
        }
        if m.provider.is_none() {
            m.provider = Some(self.provider.to_owned());
        }
        m.timestamp_ms = now_ms();
        crate::cost::fill_cost(&mut m);
        m
    }

    /// Closes the reply: stamps it and emits its `MessageEnd`.
    fn end(&mut self, message: Message) -> Message {
        self.start();
        let message = self.stamp(message);
        // A sub-agent's model call counts in its ancestors' totals as soon as it is made, so
        // an aborted child's calls count too.
        super::subagent::report_model_call(message.usage.as_ref());
        self.emitter.emit_with(|| AgentEvent::MessageEnd {
            message: message.clone(),
        });
        message
    }

    /// Forwards one streamed delta, with the typed output so far when someone listens.
    fn delta(&mut self, delta: ModelDelta, output: Option<&OutputPlan>) {
        self.start();
        self.assembler.push(&delta);
        let output = match output {
            Some(plan) if self.emitter.enabled() => self.partial_output.on_delta(plan, &delta),
            _ => None,
        };
        self.emitter
            .emit_with(|| AgentEvent::MessageUpdate { delta, output });
    }

    /// The run was cancelled: keeps what was streamed so far.
    fn aborted(&mut self) -> Reply {
        let partial = self.assembler.to_message(StopReason::Aborted);
        Reply::Aborted(self.end(partial))
    }

    /// The model finished its reply.
    fn done(&mut self, message: Message) -> Reply {
        Reply::Done(self.end(completed_reply(message)))
    }

    /// The model call failed; the message carries what the provider had.
    fn failed(&mut self, message: Message, error: ModelError) -> Reply {
        Reply::Failed(self.end(failed_reply(message, &error)), error)
    }

    /// The stream ended without a terminal event: what was streamed, as an error.
    fn cut(&mut self) -> Reply {
        let error = ModelError::stream(
            crate::model::StreamErrorKind::Cut,
            "the model stream ended without a terminal event",
        );
        let mut partial = self.assembler.to_message(StopReason::Error);
        partial.error_message = Some(error.to_string());
        Reply::Failed(self.end(partial), error)
    }
}

/// A finished reply is an assistant message that says why it stopped (tool use when it calls
/// tools), even when the provider did not.
fn completed_reply(mut message: Message) -> Message {
    message.role = Role::Assistant;
    if message.stop_reason.is_none() {
        message.stop_reason = Some(if message.tool_calls().next().is_some() {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        });
    }
    message
}

/// A failed reply is an assistant message stopped by an error (an abort stays an abort) that
/// carries the error's text unless the provider gave one.
fn failed_reply(mut message: Message, error: &ModelError) -> Message {
    message.role = Role::Assistant;
    if message.stop_reason != Some(StopReason::Aborted) {
        message.stop_reason = Some(StopReason::Error);
    }
    if message.error_message.is_none() {
        message.error_message = Some(error.to_string());
    }
    message
}

/// One answer per call, in call order; a slot left empty (which the executor never does) is
/// answered with an internal error rather than dropped, so the model still sees every call.
fn answers_in_call_order(slots: Vec<Option<Answer>>, calls: &[ToolCallPart]) -> Vec<Answer> {
    slots
        .into_iter()
        .zip(calls)
        .map(|(slot, call)| {
            slot.unwrap_or_else(|| {
                Answer::Result(ToolResultPart::error(
                    &call.id,
                    &call.tool_name,
                    "internal error: no result",
                ))
            })
        })
        .collect()
}

impl<D: ToolDeps> AgentLoop<D> {
    /// Runs to the end, emitting `AgentStart` first and exactly one `AgentEnd` last, whatever
    /// happens in between (model errors, hook panics, aborts, bugs).
    pub(crate) async fn drive(
        &self,
        prompts: Option<Vec<Message>>,
        context: Vec<Message>,
        emitter: Emitter,
    ) -> Result<RunOutcome, AgentError> {
        self.drive_with(prompts, context, None, emitter).await
    }

    /// [`drive`](Self::drive), optionally resuming a run parked for approval first.
    pub(crate) async fn drive_with(
        &self,
        prompts: Option<Vec<Message>>,
        context: Vec<Message>,
        resume: Option<ParkedRun>,
        emitter: Emitter,
    ) -> Result<RunOutcome, AgentError> {
        self.drive_full(prompts, context, resume, emitter, None)
            .await
            .0
    }

    /// [`drive`](Self::drive) with a typed output: the output state comes back with the result
    /// (also when the run failed), so the caller can report the last raw output.
    pub(crate) async fn drive_with_output(
        &self,
        prompts: Option<Vec<Message>>,
        context: Vec<Message>,
        emitter: Emitter,
        output: Option<OutputRun>,
    ) -> (Result<RunOutcome, AgentError>, Option<OutputRun>) {
        self.drive_full(prompts, context, None, emitter, output)
            .await
    }

    /// The one implementation behind [`drive`](Self::drive), [`drive_with`](Self::drive_with)
    /// and [`drive_with_output`](Self::drive_with_output).
    async fn drive_full(
        &self,
        prompts: Option<Vec<Message>>,
        context: Vec<Message>,
        resume: Option<ParkedRun>,
        emitter: Emitter,
        output: Option<OutputRun>,
    ) -> (Result<RunOutcome, AgentError>, Option<OutputRun>) {
        emitter.emit(AgentEvent::AgentStart);
        if let Some(err) = self.precondition_error(&prompts, &context, resume.is_some()) {
            emitter.emit(AgentEvent::AgentEnd {
                messages: Vec::new(),
                stop: RunStop::Internal {
                    message: err.to_string(),
                },
            });
            return (Err(err), output);
        }

        let run_abort = self.abort.begin();
        // A child of the abort token, cancelled also when the run ends however it ends (the
        // guard drops with this future): tools whose work outlives a call (background jobs)
        // watch it through their call's token to end with the run.
        let cancel = run_abort.token.child_token();
        let _run_over = cancel.clone().drop_guard();
        let mut loaded = LoadedTools::default();
        self.load_searched_tools(&context, &mut loaded);
        let state = RunState {
            new_from: context.len(),
            context,
            turns: 0,
            usage: Usage::default(),
            loaded,
            output,
        };
        let mut run = RunGuard::new(state, &emitter);
        let span = crate::telemetry::agent_span(
            &self.config.telemetry,
            self.model.provider(),
            self.config.model.as_deref(),
        );
        // Sub-agent tools find this run (its emitter, depth, children's usage) through the scope.
        let scope = super::subagent::RunScope::for_run(&emitter, self.session_id.clone());
        let start = turn::RunStart { prompts, resume };
        // The turn cycle is built inside the awaited expression: held in a local first, it
        // would keep a slot of its own in this future beside the awaited copy.
        let result = scope
            .clone()
            .enter(
                AssertUnwindSafe(self.execute(&mut run.state, start, &emitter, &cancel))
                    .catch_unwind(),
            )
            .instrument(span.clone())
            .await;
        let mut state = run.finish();
        // Children cut short by an abort or an error settled after the last tool batch was
        // counted: their usage still belongs to this run's total.
        state.usage.accumulate(&scope.take_child_usage());
        // The abort that ended this run (if any) is used up: the next run starts clean. (A run
        // whose future is dropped releases it the same way, when the guard drops.)
        drop(run_abort);
        let (stop, returned, partial) = settle(result);
        let error_type = run_error_type(&stop, &returned);
        crate::telemetry::record_run_end(&span, &state.usage, error_type.as_deref());
        drop(span);
        emitter.emit_with(|| {
            let mut messages = state.new_messages().to_vec();
            messages.extend(partial.clone());
            AgentEvent::AgentEnd {
                messages,
                stop: stop.clone(),
            }
        });
        let output = state.output.take();
        (outcome(state, stop, returned, partial), output)
    }

    /// Why a run cannot start: a zero turn limit, invalid usage limits, nothing to answer, or a
    /// context that already ends with the assistant's answer (a parked batch may end with its
    /// assistant message: every call deferred).
    fn precondition_error(
        &self,
        prompts: &Option<Vec<Message>>,
        context: &[Message],
        resuming: bool,
    ) -> Option<AgentError> {
        let invalid_limits = self.config.usage_limits.validate().err();
        match (prompts, context.last()) {
            _ if resuming && self.config.max_turns != Some(0) => None,
            _ if self.config.max_turns == Some(0) => Some(AgentError::Config(
                "max_turns must be at least 1 (use None for no ceiling)".into(),
            )),
            _ if invalid_limits.is_some() => invalid_limits.map(AgentError::Config),
            (None, None) => Some(AgentError::EmptyContext),
            (None, Some(last)) if last.role == Role::Assistant => {
                Some(AgentError::ContinueFromAssistant)
            }
            _ => None,
        }
    }

    /// Compacts the context when it is over the threshold (or always, after an overflow
    /// error): the summary replaces the older turns in `state.context` and is emitted as a
    /// custom message (so a recorder stores it after the full history), then a `Compaction`
    /// event. Returns whether it compacted. A failed summary is logged and leaves the context
    /// as it was: the model call then decides.
    async fn compact_if_needed(
        &self,
        state: &mut RunState,
        emitter: &Emitter,
        overflow: bool,
    ) -> bool {
        let Some(config) = &self.config.compaction else {
            return false;
        };
        if !overflow {
            let window = config.context_window.or_else(|| {
                self.config
                    .model
                    .as_deref()
                    .and_then(super::compaction::context_window)
            });
            let Some(window) = window else {
                return false;
            };
            let used = super::compaction::estimate_tokens(&state.context);
            if (used as f64) < window as f64 * config.threshold {
                return false;
            }
        }
        let default = super::compaction::ModelCompactor;
        let compactor: &dyn super::compaction::Compactor = match &config.compactor {
            Some(custom) => custom.as_ref(),
            None => &default,
        };
        let compacted = match super::compaction::compact(
            &state.context,
            config.keep_recent_turns,
            compactor,
            self.model.as_ref(),
            self.config.model.as_deref(),
        )
        .await
        {
            Ok(Some(compacted)) => compacted,
            Ok(None) => return false,
            Err(error) => {
                tracing::warn!(%error, "context compaction failed; continuing uncompacted");
                return false;
            }
        };
        emitter.emit_whole_message(&compacted.entry);
        let kept = compacted.context.len() - 1;
        // The run's own messages that were summarised are no longer in the context.
        state.new_from = state.new_from.saturating_sub(compacted.summarized) + 1;
        state.new_from = state.new_from.min(compacted.context.len());
        state.context = compacted.context;
        emitter.emit_with(|| AgentEvent::Compaction {
            summarized: compacted.summarized,
            kept,
            tokens_before: compacted.tokens_before,
            tokens_after: compacted.tokens_after,
            usage: compacted.usage,
            trigger: if overflow { "overflow" } else { "threshold" }.to_owned(),
        });
        true
    }

    /// Appends a complete non-assistant message with its start/end events.
    fn inject(&self, state: &mut RunState, message: Message, emitter: &Emitter) {
        emitter.emit_whole_message(&message);
        state.push(message);
    }

    /// The system prompt of a run: the configured one, the tool guidance, and the typed-output
    /// instructions.
    fn run_system_prompt(&self, output: &Option<OutputRun>) -> Option<String> {
        match (self.system_prompt(), output_instructions(output)) {
            (prompt, None) => prompt,
            (None, Some(extra)) => Some(extra.to_owned()),
            (Some(prompt), Some(extra)) => Some(format!("{prompt}\n\n{extra}")),
        }
    }

    fn system_prompt(&self) -> Option<String> {
        match (
            &self.config.system_prompt,
            render_guidance(&self.turn_registry()),
        ) {
            (None, None) => None,
            (Some(prompt), None) => Some(prompt.clone()),
            (None, Some(guidance)) => Some(guidance),
            (Some(prompt), Some(guidance)) => Some(format!("{prompt}\n\n{guidance}")),
        }
    }

    fn search_schema(registry: &crate::tooling::Registry<D>, name: &str) -> Option<ToolSchema> {
        registry.schemas().iter().find(|s| s.name == name).cloned()
    }

    /// Loads the deferred tools named by successful tool-search results in `messages` (so a
    /// resumed conversation keeps the tools it had loaded).
    fn load_searched_tools(&self, messages: &[Message], loaded: &mut LoadedTools) {
        let registry = self.turn_registry();
        let Some(search) = registry.tool_search() else {
            return;
        };
        for result in messages.iter().filter_map(Message::tool_result_part) {
            if result.is_error || result.tool_name != search.name() {
                continue;
            }
            if let Some(names) = search_result_names(&result.content) {
                let load = registry.load_from_search_result(loaded, names);
                if let Some(note) = load.note() {
                    tracing::debug!(%note, "tool search result named tools that were ignored");
                }
            }
        }
    }

    /// The request of the run's next model call, from its context and the tools it has loaded.
    fn build_request<'a>(
        &'a self,
        registry: &'a crate::tooling::Registry<D>,
        state: &'a RunState,
        system_prompt: &Option<String>,
        output: Option<&OutputPlan>,
    ) -> ModelRequest<'a> {
        let (context, loaded) = (&state.context, &state.loaded);
        let messages: Cow<'a, [Message]> = if self.hooks.has(HookKind::Context) {
            let mut copy = context.to_vec();
            self.hooks.context(&mut copy);
            for m in copy.iter_mut().filter(|m| m.role == Role::Custom) {
                m.role = Role::User;
                m.custom_type = None;
            }
            Cow::Owned(copy)
        } else {
            messages_for_model(context)
        };
        let search = registry.tool_search();
        let native_search = search.is_some() && self.model.capabilities().native_tool_search;
        let tools = if registry.deferred_names().is_empty() && search.is_none() {
            Cow::Borrowed(registry.schemas())
        } else {
            let mut visible: Vec<ToolSchema> = registry
                .visible_schemas(loaded)
                .into_iter()
                .cloned()
                .collect();
            // Without native tool search the search tool is offered as a plain function tool
            // (beyond the deferred-tool contract), with the same effect on which tools load.
            if let (Some(spec), false) = (search, native_search) {
                visible.extend(Self::search_schema(registry, spec.name()));
            }
            Cow::Owned(visible)
        };
        let tools = match output {
            Some(plan) if !plan.tools.is_empty() => {
                let mut all = tools.into_owned();
                all.extend(plan.tool_schemas().cloned());
                Cow::Owned(all)
            }
            _ => tools,
        };
        let mut request = ModelRequest::new(messages);
        request.output = output.and_then(|plan| plan.format.clone());
        request.model = self.config.model.clone();
        request.system_prompt = system_prompt.clone();
        request.tools = tools;
        request.temperature = self.config.temperature;
        request.reasoning = self.config.reasoning;
        request.max_output_tokens = self.config.output_tokens_per_call();
        request.api_key = self.config.api_key.clone();
        request.prompt_cache_key = self.config.prompt_cache_key.clone();
        if native_search {
            request.deferred_tools =
                Cow::Owned(registry.deferred_schemas().into_iter().cloned().collect());
            request.tool_search =
                search.and_then(|spec| Self::search_schema(registry, spec.name()));
        }
        if self.hooks.has(HookKind::BeforeProviderRequest) {
            self.hooks.before_provider_request(&mut request);
        }
        request
    }

    /// Streams one assistant reply, forwarding deltas as `MessageUpdate`s. An abort keeps what
    /// was streamed; a stream that ends without its terminal event is an error.
    async fn stream_reply(
        &self,
        request: ModelRequest<'_>,
        emitter: &Emitter,
        cancel: &CancellationToken,
        output: Option<&OutputPlan>,
    ) -> Reply {
        let mut reply = ReplyBuilder::new(request.model.clone(), self.model.provider(), emitter);
        let mut stream = self.model.stream(request);
        loop {
            let event = tokio::select! {
                biased;
                _ = cancel.cancelled() => return reply.aborted(),
                event = stream.next() => event,
            };
            match event {
                Some(ModelEvent::Delta(delta)) => reply.delta(delta, output),
                Some(ModelEvent::Retry {
                    attempt,
                    delay,
                    reason,
                }) => {
                    crate::telemetry::record_retry(attempt);
                    emitter.emit_with(|| AgentEvent::ModelRetry {
                        attempt,
                        delay_ms: delay.as_millis() as u64,
                        reason,
                    })
                }
                Some(ModelEvent::Fallback { from, to, error }) => {
                    // Nothing of the failed reply was streamed: the next model starts afresh.
                    reply.assembler = MessageAssembler::new();
                    emitter.emit_with(|| AgentEvent::ModelFallback {
                        from,
                        to,
                        reason: error.to_string(),
                    })
                }
                Some(ModelEvent::Done(message)) => return reply.done(message),
                Some(ModelEvent::Error { message, error }) => return reply.failed(message, error),
                None => return reply.cut(),
            }
        }
    }

    /// Gives every call a result without running it (each reported blocked: an end event
    /// without a start).
    fn answer_without_running(
        &self,
        calls: &[ToolCallPart],
        answer: fn(&ToolCallPart) -> ToolResultPart,
        error_type: &str,
        emitter: &Emitter,
    ) -> Vec<ToolResultPart> {
        calls
            .iter()
            .map(|call| {
                let result = answer(call);
                crate::tooling::spans::answered_tool_call(call, error_type);
                emitter.emit_blocked(call, &result);
                result
            })
            .collect()
    }

    /// Prepares the calls in order (tool_call hooks may veto or rewrite), then runs the allowed
    /// ones through the executor. Answers come back in call order, one per call (a result, or a
    /// deferral when the approval hook deferred the call).
    async fn execute_tools(
        &self,
        calls: &[ToolCallPart],
        loaded: &LoadedTools,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Vec<Answer> {
        let registry = self.turn_registry();
        // A deferred tool the model names before a search loaded it was never shown to the
        // model (a guess or a hallucination): refuse it instead of running it.
        let hidden = |call: &ToolCallPart| {
            registry
                .get(&call.tool_name)
                .is_some_and(|spec| spec.deferred() && !loaded.contains(&call.tool_name))
        };
        let options = self.exec_options(emitter, cancel);

        if !self.hooks.has(HookKind::ToolCall) && !calls.iter().any(hidden) {
            return run_tools_with(calls, &registry, &self.deps, &options)
                .await
                .into_iter()
                .zip(calls)
                .map(|(o, call)| Answer::from_outcome(call, o))
                .collect();
        }

        let mut slots: Vec<Option<Answer>> =
            std::iter::repeat_with(|| None).take(calls.len()).collect();
        let mut to_run: Vec<(usize, ToolCallPart)> = Vec::with_capacity(calls.len());
        for (i, call) in calls.iter().enumerate() {
            let screened = if hidden(call) {
                Err(self.refuse_not_loaded(call, &registry, emitter))
            } else {
                self.screen_call(call, &registry, emitter)
            };
            match screened {
                Ok(call) => to_run.push((i, call)),
                Err(result) => slots[i] = Some(Answer::Result(result)),
            }
        }
        let runnable: Vec<ToolCallPart> = to_run.iter().map(|(_, c)| c.clone()).collect();
        let outcomes = run_tools_with(&runnable, &registry, &self.deps, &options).await;
        for ((i, call), outcome) in to_run.into_iter().zip(outcomes) {
            slots[i] = Some(Answer::from_outcome(&call, outcome));
        }
        answers_in_call_order(slots, calls)
    }

    /// Answers a call of a deferred tool no search has loaded yet, pointing the model at the
    /// search that would load it.
    fn refuse_not_loaded(
        &self,
        call: &ToolCallPart,
        registry: &crate::tooling::Registry<D>,
        emitter: &Emitter,
    ) -> ToolResultPart {
        let search = registry
            .tool_search()
            .map(|s| s.name().to_owned())
            .unwrap_or_else(|| "the tool search".to_owned());
        let result = ToolResultPart::error(
            &call.id,
            &call.tool_name,
            format!(
                "Tool \"{}\" is not loaded yet: call {search} to find and load it first.",
                call.tool_name
            ),
        );
        crate::tooling::spans::answered_tool_call(call, "not_loaded");
        emitter.emit_blocked(call, &result);
        result
    }

    /// Runs the `tool_call` hooks on one call: the call to run (rewritten when a hook changed
    /// its arguments), or the result of a call a hook blocked.
    fn screen_call(
        &self,
        call: &ToolCallPart,
        registry: &crate::tooling::Registry<D>,
        emitter: &Emitter,
    ) -> Result<ToolCallPart, ToolResultPart> {
        // Calls that fail lookup or validation go to the executor unchanged: it answers
        // them with the same error text as without hooks, and hooks never see them.
        let Ok((_, arguments)) = check_call(call, registry) else {
            return Ok(call.clone());
        };
        let prepared = PreparedToolCall {
            id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            arguments,
        };
        match self.hooks.tool_call(&prepared) {
            Ok(None) => Ok(call.clone()),
            Ok(Some(arguments)) => Ok(ToolCallPart {
                arguments: ToolArguments::Json(arguments),
                ..call.clone()
            }),
            Err((blocked_by_extension, error)) => {
                let blocked = BlockedCall {
                    call: prepared,
                    error,
                    blocked_by_extension,
                };
                let result = ToolResultPart::error(&call.id, &call.tool_name, blocked.render());
                crate::tooling::spans::answered_tool_call(call, "denied");
                emitter.emit_blocked(call, &result);
                Err(result)
            }
        }
    }

    /// How the executor runs this turn's calls: events to the run's listeners, the loop's
    /// limits and retries, and `tool_result` hooks applied to every outcome.
    pub(super) fn exec_options(
        &self,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> ExecOptions {
        let observer: Option<Arc<dyn ToolObserver>> = emitter
            .enabled()
            .then(|| Arc::new(EventObserver(emitter.clone())) as Arc<dyn ToolObserver>);
        let finalize: Option<Finalizer> = self.hooks.has(HookKind::ToolResult).then(|| {
            let hooks = self.hooks.clone();
            Arc::new(
                move |call: &ToolCallPart, outcome: &mut crate::tooling::ToolOutcome| {
                    let mut finalized = FinalizedToolCall {
                        id: call.id.clone(),
                        tool_name: call.tool_name.clone(),
                        arguments: match &call.arguments {
                            ToolArguments::Json(v) => v.clone(),
                            ToolArguments::Unparsed(t) => serde_json::Value::String(t.clone()),
                        },
                        is_error: outcome.result.is_error,
                        result: outcome.result.clone(),
                    };
                    hooks.tool_result(&mut finalized);
                    outcome.result = finalized.result;
                },
            ) as Finalizer
        });
        ExecOptions {
            observer,
            cancel: cancel.clone(),
            max_parallel: MAX_PARALLEL_TOOLS,
            sequential: self.config.tool_execution_mode == ToolExecutionMode::Sequential,
            default_timeout: self.config.default_tool_timeout,
            max_retries: self.config.max_retries,
            retry_backoff: self.config.tool_retry_backoff,
            finalize,
            capture_content: self.config.telemetry.capture_content,
            skip_approval: false,
            session_id: self.session_id.clone(),
        }
    }

    /// Answers a turn that calls a final-result tool (typed output, tool strategy). The first
    /// final call is checked: when valid, the run ends with it and every other call of the turn
    /// gets a "not run" result; when invalid, it gets the violations (a repair attempt) and the
    /// turn's other calls run as usual. Every call gets exactly one result, in call order.
    async fn execute_final_calls(
        &self,
        calls: &[ToolCallPart],
        loaded: &LoadedTools,
        output: &mut OutputRun,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> (Vec<ToolResultPart>, OutputTurn) {
        let first = calls
            .iter()
            .position(|c| output.plan.final_tool(&c.tool_name).is_some())
            .unwrap_or(0);
        let (slots, turn) = match output.plan.check_call(&calls[first]) {
            Ok(accepted) => {
                output.accepted = Some(accepted);
                (accepted_final_slots(calls, first), OutputTurn::Accepted)
            }
            Err(violations) => rejected_final_slots(calls, first, output, violations),
        };
        // Answered here: events like the executor's, so a UI sees every call end.
        if emitter.enabled() {
            emit_answered(emitter, calls, &slots);
        }
        let ran = if matches!(turn, OutputTurn::Exhausted) {
            Vec::new()
        } else {
            self.execute_unanswered(calls, &slots, loaded, emitter, cancel)
                .await
        };
        (merge_final_results(slots, ran, calls), turn)
    }

    /// Runs the calls of a typed-output turn that the final-result check left unanswered.
    async fn execute_unanswered(
        &self,
        calls: &[ToolCallPart],
        slots: &[Option<ToolResultPart>],
        loaded: &LoadedTools,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Vec<ToolResultPart> {
        let others: Vec<ToolCallPart> = calls
            .iter()
            .zip(slots)
            .filter(|(_, slot)| slot.is_none())
            .map(|(c, _)| c.clone())
            .collect();
        if others.is_empty() {
            return Vec::new();
        }
        // A call deferred for approval cannot park a typed-output turn (the final result is
        // in the same batch): it is answered as not run, and the model may call it again.
        self.execute_tools(&others, loaded, emitter, cancel)
            .await
            .into_iter()
            .map(|answer| match answer {
                super::pending::Answer::Result(result) => result,
                super::pending::Answer::Deferred(pending) => ToolResultPart::error(
                    &pending.call_id,
                    &pending.tool_name,
                    format!(
                        "Tool call was not run: it needs approval ({}), and a final result \
                         was given in the same answer.",
                        pending.reason
                    ),
                ),
            })
            .collect()
    }
}

/// The answers of a turn whose final call (at `first`) was accepted: that call succeeds and
/// every other call is reported not run, since the run ends here.
fn accepted_final_slots(calls: &[ToolCallPart], first: usize) -> Vec<Option<ToolResultPart>> {
    let chosen = &calls[first];
    calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            Some(if i == first {
                ToolResultPart::success(&call.id, &call.tool_name, "Final result accepted.")
            } else {
                ToolResultPart::error(
                    &call.id,
                    &call.tool_name,
                    format!(
                        "Tool call \"{}\" was not run: the run ended with the final result \
                         of call {}.",
                        call.tool_name, chosen.id
                    ),
                )
            })
        })
        .collect()
}

/// The answers of a turn whose final call (at `first`) was invalid: that call gets the
/// violations to repair, other final calls are ignored, and the remaining calls are left
/// unanswered to run as usual. The turn continues while repair attempts remain.
fn rejected_final_slots(
    calls: &[ToolCallPart],
    first: usize,
    output: &mut OutputRun,
    violations: Vec<String>,
) -> (Vec<Option<ToolResultPart>>, OutputTurn) {
    let chosen = &calls[first];
    let mut slots: Vec<Option<ToolResultPart>> = vec![None; calls.len()];
    let raw = chosen.arguments.to_json_string();
    let more = output.fail(raw, violations);
    slots[first] = Some(ToolResultPart::error(
        &chosen.id,
        &chosen.tool_name,
        output.repair_call_text(&chosen.tool_name),
    ));
    for (i, call) in calls.iter().enumerate() {
        if i != first && output.plan.final_tool(&call.tool_name).is_some() {
            slots[i] = Some(ToolResultPart::error(
                &call.id,
                &call.tool_name,
                "Only one final result may be given per answer; this call was ignored.",
            ));
        }
    }
    let turn = if more {
        OutputTurn::Continue
    } else {
        OutputTurn::Exhausted
    };
    (slots, turn)
}

/// Emits start and end events for the calls answered without the executor.
fn emit_answered(emitter: &Emitter, calls: &[ToolCallPart], slots: &[Option<ToolResultPart>]) {
    for (call, slot) in calls.iter().zip(slots) {
        if let Some(result) = slot {
            emitter.emit(AgentEvent::ToolExecutionStart { call: call.clone() });
            emitter.emit(AgentEvent::ToolExecutionEnd {
                call: call.clone(),
                result: result.clone(),
                blocked: false,
            });
        }
    }
}

/// Fills the unanswered slots, in order, with the results of the calls that ran; a call left
/// without either is reported not run.
fn merge_final_results(
    slots: Vec<Option<ToolResultPart>>,
    ran: Vec<ToolResultPart>,
    calls: &[ToolCallPart],
) -> Vec<ToolResultPart> {
    let mut ran = ran.into_iter();
    slots
        .into_iter()
        .zip(calls)
        .map(|(slot, call)| {
            slot.or_else(|| ran.next()).unwrap_or_else(|| {
                ToolResultPart::error(
                    &call.id,
                    &call.tool_name,
                    "Tool call was not run: the run ended without a valid final result.",
                )
            })
        })
        .collect()
}

/// How the turn cycle ended: the stop, the model error (or the panic, as an error) to return,
/// and the partial assistant message of a failed model call.
fn settle(
    result: std::thread::Result<Result<RunStop, (ModelError, Message)>>,
) -> (RunStop, Result<(), ModelError>, Option<Message>) {
    match result {
        Ok(Ok(stop)) => (stop, Ok(()), None),
        Ok(Err((error, partial))) => {
            let stop = RunStop::ModelError {
                message: error.to_string(),
            };
            (stop, Err(error), Some(partial))
        }
        Err(payload) => {
            let message = panic_message(&*payload);
            tracing::error!(panic = %message, "the agent loop panicked");
            let error = ModelError::stream(crate::model::StreamErrorKind::Other, message.clone());
            (RunStop::Internal { message }, Err(error), None)
        }
    }
}

/// The `error.type` of the run's span, when it ended in an error.
fn run_error_type(stop: &RunStop, returned: &Result<(), ModelError>) -> Option<String> {
    match stop {
        RunStop::ModelError { .. } => match returned {
            Err(error) => Some(crate::model::spans::model_error_type(error)),
            Ok(()) => None,
        },
        RunStop::Internal { .. } => Some("internal".to_owned()),
        _ => None,
    }
}

/// What the run returns: its outcome, or the error with the messages it completed.
fn outcome(
    state: RunState,
    stop: RunStop,
    returned: Result<(), ModelError>,
    partial: Option<Message>,
) -> Result<RunOutcome, AgentError> {
    match returned {
        Ok(()) => Ok(RunOutcome {
            new_from: state.new_from,
            context: state.context,
            stop,
            turns: state.turns,
            usage: state.usage,
        }),
        Err(error) => {
            let completed = state.new_messages().to_vec();
            Err(match (stop, partial) {
                (RunStop::Internal { message }, _) => AgentError::Internal { message, completed },
                (_, Some(partial)) => AgentError::Model {
                    error,
                    partial: Box::new(partial),
                    completed,
                },
                (_, None) => AgentError::Internal {
                    message: error.to_string(),
                    completed,
                },
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::StreamErrorKind;
    use crate::transcript::Part;

    fn call(id: &str, tool: &str) -> ToolCallPart {
        ToolCallPart::new(id, tool, serde_json::json!({}))
    }

    #[test]
    fn a_completed_reply_says_why_it_stopped() {
        let text = completed_reply(empty_assistant());
        assert_eq!(text.role, Role::Assistant);
        assert_eq!(text.stop_reason, Some(StopReason::Stop));

        let mut calling = empty_assistant();
        calling.content = vec![Part::ToolCall(call("c1", "echo"))];
        assert_eq!(
            completed_reply(calling).stop_reason,
            Some(StopReason::ToolUse)
        );

        let mut given = empty_assistant();
        given.stop_reason = Some(StopReason::Length);
        assert_eq!(completed_reply(given).stop_reason, Some(StopReason::Length));
    }

    #[test]
    fn a_failed_reply_is_an_error_unless_aborted_and_keeps_the_provider_text() {
        let error = ModelError::stream(StreamErrorKind::Cut, "cut short");
        let failed = failed_reply(empty_assistant(), &error);
        assert_eq!(failed.role, Role::Assistant);
        assert_eq!(failed.stop_reason, Some(StopReason::Error));
        assert_eq!(failed.error_message, Some(error.to_string()));

        let mut aborted = empty_assistant();
        aborted.stop_reason = Some(StopReason::Aborted);
        aborted.error_message = Some("provider said".to_owned());
        let aborted = failed_reply(aborted, &error);
        assert_eq!(aborted.stop_reason, Some(StopReason::Aborted));
        assert_eq!(aborted.error_message.as_deref(), Some("provider said"));
    }

    #[test]
    fn an_empty_slot_is_answered_with_an_internal_error() {
        let calls = [call("a", "x"), call("b", "y")];
        let given = ToolResultPart::success("a", "x", "ok");
        let answers = answers_in_call_order(vec![Some(Answer::Result(given)), None], &calls);
        let results: Vec<&ToolResultPart> = answers
            .iter()
            .map(|a| match a {
                Answer::Result(r) => r,
                Answer::Deferred(_) => panic!("no deferral expected"),
            })
            .collect();
        assert_eq!(results[0].content, "ok");
        assert!(!results[0].is_error);
        assert_eq!(results[1].call_id, "b");
        assert!(results[1].is_error);
        assert_eq!(results[1].content, "internal error: no result");
    }

    #[test]
    fn an_accepted_final_call_ends_the_turn_for_every_other_call() {
        let calls = [call("a", "search"), call("f", "final"), call("c", "read")];
        let slots = accepted_final_slots(&calls, 1);
        let slots: Vec<ToolResultPart> = slots.into_iter().map(Option::unwrap).collect();
        assert!(!slots[1].is_error);
        assert_eq!(slots[1].content, "Final result accepted.");
        for i in [0, 2] {
            assert!(slots[i].is_error);
            assert_eq!(slots[i].call_id, calls[i].id);
            assert!(slots[i].content.contains("final result of call f"));
        }
    }

    #[test]
    fn results_of_calls_that_ran_fill_the_open_slots_in_order() {
        let calls = [call("a", "x"), call("b", "y"), call("c", "z")];
        let slots = vec![None, Some(ToolResultPart::success("b", "y", "kept")), None];
        let ran = vec![ToolResultPart::success("a", "x", "first")];
        let results = merge_final_results(slots, ran, &calls);
        assert_eq!(results[0].content, "first");
        assert_eq!(results[1].content, "kept");
        assert!(results[2].is_error);
        assert_eq!(results[2].call_id, "c");
        assert!(results[2].content.contains("without a valid final result"));
    }
}
