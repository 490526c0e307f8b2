//! The turn cycle of one run: start (prompts, a parked run's answers, queued steering), then turn
//! after turn — one model call, its tool calls answered, the checks that may end the run, and the
//! messages the next turn starts with — until something ends the run.
//!
//! Each step returns [`ControlFlow::Break`] with how the run ends, so the cycle reads as the
//! sequence of steps it is.

use std::ops::ControlFlow;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::{
    OutputTurn, RepeatTracker, Reply, RunState, aborted_call_result, empty_assistant,
    output_invalid, truncated_call_result,
};
use crate::agent::AgentLoop;
use crate::agent::events::{AgentEvent, Emitter, RunStop};
use crate::agent::hooks::{HookKind, TurnSummary};
use crate::agent::output::OutputRun;
use crate::agent::pending::{Answer, ParkedRun, PendingApproval};
use crate::model::ModelError;
use crate::tooling::{Registry, ToolDeps};
use crate::transcript::{Message, StopReason, ToolCallPart, ToolResultPart};

/// How a run ends: why it stopped, or the model error with its partial message.
pub(super) type RunEnd = Result<RunStop, (ModelError, Message)>;

/// What a run starts from before its first model call: new prompts, and the parked run whose
/// answered calls it settles first.
pub(super) struct RunStart {
    pub(super) prompts: Option<Vec<Message>>,
    pub(super) resume: Option<ParkedRun>,
}

/// What a turn's tool calls got: results in call order, the calls deferred for approval, and
/// what final-result calls decided.
struct Answered {
    results: Vec<ToolResultPart>,
    deferred: Vec<PendingApproval>,
    output: OutputTurn,
}

impl<D: ToolDeps> AgentLoop<D> {
    /// The turn cycle. Returns why the run stopped, or the model error with its partial message.
    pub(super) async fn execute(
        &self,
        state: &mut RunState,
        start: RunStart,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> RunEnd {
        if let ControlFlow::Break(end) = self.begin(state, start, emitter, cancel).await {
            return end;
        }
        let mut system_prompt = self.run_system_prompt(&state.output);
        let mut repeats = RepeatTracker {
            limit: self.config.repeat_tool_call_limit.filter(|&n| n > 0),
            last: None,
            count: 0,
        };
        loop {
            // Awaited where it is built: a future held in a local first keeps a slot of its
            // own in this future besides the awaited copy, doubling its size (and the bytes
            // every move of the run's future copies).
            if let ControlFlow::Break(end) = self
                .turn(state, &mut system_prompt, &mut repeats, emitter, cancel)
                .await
            {
                return end;
            }
        }
    }

    /// Everything before the first model call: the prompts, the answers of a parked run, and
    /// steering queued between runs.
    async fn begin(
        &self,
        state: &mut RunState,
        start: RunStart,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> ControlFlow<RunEnd> {
        if cancel.is_cancelled() {
            return ControlFlow::Break(Ok(RunStop::Aborted));
        }
        if self.refresh_tools().await {
            // Deferred source tools a search in the history had loaded are loaded again.
            self.load_searched_tools(&state.context, &mut state.loaded);
        }
        emitter.emit(AgentEvent::TurnStart { turn: 1 });
        for prompt in start.prompts.into_iter().flatten() {
            self.inject(state, prompt, emitter);
        }
        if let Some(parked) = start.resume {
            let (context, new_from) = (&mut state.context, &mut state.new_from);
            if let Some(stop) = self
                .resume_calls(context, new_from, parked, emitter, cancel)
                .await
            {
                return ControlFlow::Break(Ok(stop));
            }
            if cancel.is_cancelled() {
                return ControlFlow::Break(Ok(RunStop::Aborted));
            }
        }
        // Steering queued between runs is due before the first model call.
        for message in self.steering.take(self.config.steering_mode) {
            self.inject(state, message, emitter);
        }
        ControlFlow::Continue(())
    }

    /// One turn: the model call, its tool calls answered, then the checks that may end the run
    /// and the messages the next turn starts with.
    async fn turn(
        &self,
        state: &mut RunState,
        system_prompt: &mut Option<String>,
        repeats: &mut RepeatTracker,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> ControlFlow<RunEnd> {
        if cancel.is_cancelled() {
            emitter.emit_with(|| AgentEvent::TurnEnd {
                turn: state.turns + 1,
                message: empty_assistant(),
                tool_results: Vec::new(),
            });
            return ControlFlow::Break(Ok(RunStop::Aborted));
        }
        state.turns += 1;
        let turn = state.turns;
        if self.config.compaction.is_some() {
            self.compact_if_needed(state, emitter, false).await;
        }
        // A tool source's changes (e.g. MCP `tools/list_changed`) apply from this request on.
        if self.refresh_tools().await {
            *system_prompt = self.run_system_prompt(&state.output);
        }
        let registry = self.turn_registry();
        // Awaited where it is built (see `execute`).
        let reply = self
            .call_model(state, &registry, system_prompt, emitter, cancel)
            .await;
        let message = self.accept_reply(state, turn, reply, emitter)?;
        if let Some(usage) = &message.usage {
            state.usage.accumulate(usage);
        }
        let calls: Vec<ToolCallPart> = message.tool_calls().cloned().collect();
        let truncated = message.stop_reason == Some(StopReason::Length);
        state.push(message.clone());

        let answered = self
            .answer_calls(state, &calls, truncated, emitter, cancel)
            .await;
        let searchable = registry.tool_search().is_some();
        self.record_results(state, &answered.results, searchable, emitter);
        emitter.emit_with(|| AgentEvent::TurnEnd {
            turn,
            message: message.clone(),
            tool_results: answered.results.clone(),
        });
        let summary = TurnSummary {
            turn,
            message: &message,
            tool_results: &answered.results,
        };
        let decided = (answered.deferred, answered.output);
        self.stop_after_turn(state, &calls, decided, &summary, repeats, emitter, cancel)?;
        let repair = self.check_text_output(state, &calls, &message)?;
        self.next_turn(state, turn, !calls.is_empty(), repair, emitter)
    }

    /// The turn's model call, retried once after compacting when the context overflowed.
    async fn call_model(
        &self,
        state: &mut RunState,
        registry: &Registry<D>,
        system_prompt: &Option<String>,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Reply {
        let plan = state.output.as_ref().map(|o| o.plan.clone());
        let request = self.build_request(registry, state, system_prompt, plan.as_deref());
        let chat = crate::model::spans::ChatCall::start(
            &request,
            self.model.provider(),
            self.model.base_url(),
            &self.config.telemetry,
        );
        let mut reply = self
            .stream_reply(request, emitter, cancel, plan.as_deref())
            .instrument(chat.span().clone())
            .await;
        // A context-overflow error: compact and retry the request once.
        if let Reply::Failed(_, error) = &reply {
            if self.config.compaction.is_some()
                && crate::agent::compaction::is_context_overflow(error)
                && self.compact_if_needed(state, emitter, true).await
            {
                let request = self.build_request(registry, state, system_prompt, plan.as_deref());
                reply = self
                    .stream_reply(request, emitter, cancel, plan.as_deref())
                    .instrument(chat.span().clone())
                    .await;
            }
        }
        match &reply {
            Reply::Done(message) | Reply::Aborted(message) => chat.finish(message),
            Reply::Failed(message, error) => chat.fail(message, error),
        }
        reply
    }

    /// The complete assistant message of the turn, or the end of the run when the model call
    /// was aborted (each streamed call still gets a result) or failed.
    fn accept_reply(
        &self,
        state: &mut RunState,
        turn: u32,
        reply: Reply,
        emitter: &Emitter,
    ) -> ControlFlow<RunEnd, Message> {
        match reply {
            Reply::Done(message) => ControlFlow::Continue(message),
            Reply::Aborted(partial) => {
                // Calls the model had already streamed never run, but each still gets a
                // result so the transcript has no call without one.
                let results: Vec<_> = partial.tool_calls().map(aborted_call_result).collect();
                state.push(partial.clone());
                for result in &results {
                    self.inject(state, Message::tool_result(result.clone()), emitter);
                }
                emitter.emit_with(|| AgentEvent::TurnEnd {
                    turn,
                    message: partial,
                    tool_results: results,
                });
                ControlFlow::Break(Ok(RunStop::Aborted))
            }
            Reply::Failed(partial, error) => {
                emitter.emit_with(|| AgentEvent::TurnEnd {
                    turn,
                    message: partial.clone(),
                    tool_results: Vec::new(),
                });
                ControlFlow::Break(Err((error, partial)))
            }
        }
    }

    /// Answers the turn's tool calls: none; all refused when the reply was cut off; final-result
    /// calls of a typed output; or the ordinary execution (which may defer some for approval).
    async fn answer_calls(
        &self,
        state: &mut RunState,
        calls: &[ToolCallPart],
        truncated: bool,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Answered {
        let mut answered = Answered {
            results: Vec::new(),
            deferred: Vec::new(),
            output: OutputTurn::Continue,
        };
        if calls.is_empty() {
        } else if truncated {
            answered.results =
                self.answer_without_running(calls, truncated_call_result, "truncated", emitter);
        } else if let Some(output) = state.output.as_mut().filter(|o| {
            calls
                .iter()
                .any(|c| o.plan.final_tool(&c.tool_name).is_some())
        }) {
            let (results, turn) = self
                .execute_final_calls(calls, &state.loaded, output, emitter, cancel)
                .await;
            (answered.results, answered.output) = (results, turn);
        } else {
            let answers = self
                .execute_tools(calls, &state.loaded, emitter, cancel)
                .await;
            (answered.results, answered.deferred) = Answer::split(answers);
        }
        answered
    }

    /// Adds the turn's results to the context, and (with a tool search) loads the tools a
    /// search among them named.
    fn record_results(
        &self,
        state: &mut RunState,
        results: &[ToolResultPart],
        searchable: bool,
        emitter: &Emitter,
    ) {
        for result in results {
            self.inject(state, Message::tool_result(result.clone()), emitter);
        }
        state
            .usage
            .accumulate(&crate::agent::subagent::take_child_usage());
        if searchable {
            let from = state.context.len() - results.len();
            let (context, loaded) = (&state.context, &mut state.loaded);
            self.load_searched_tools(&context[from..], loaded);
        }
    }

    /// What may end the run once a turn's calls are answered: calls waiting for approval, a
    /// final result decided, an abort, the same failing batch repeated, or a stop hook.
    #[allow(clippy::too_many_arguments)]
    fn stop_after_turn(
        &self,
        state: &RunState,
        calls: &[ToolCallPart],
        (deferred, output): (Vec<PendingApproval>, OutputTurn),
        summary: &TurnSummary<'_>,
        repeats: &mut RepeatTracker,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> ControlFlow<RunEnd> {
        if !deferred.is_empty() {
            return ControlFlow::Break(Ok(self.park(deferred, emitter)));
        }
        match output {
            OutputTurn::Continue => {}
            OutputTurn::Accepted => return ControlFlow::Break(Ok(RunStop::Done)),
            OutputTurn::Exhausted => return ControlFlow::Break(Ok(output_invalid(&state.output))),
        }
        if cancel.is_cancelled() {
            return ControlFlow::Break(Ok(RunStop::Aborted));
        }
        if repeats.observe(calls, summary.tool_results) {
            let turns = repeats.count;
            return ControlFlow::Break(Ok(RunStop::RepeatedToolFailures { turns }));
        }
        if self.hooks.has(HookKind::ShouldStopAfterTurn) {
            if let Some(extension) = self.hooks.should_stop_after_turn(summary) {
                return ControlFlow::Break(Ok(RunStop::HookStop { extension }));
            }
        }
        ControlFlow::Continue(())
    }

    /// The model answered without tool calls: with a typed output, that answer is the output
    /// (native / prompted) or a missing final-tool call; an invalid one goes back to the model
    /// with its violations (the returned repair message) while repairs remain.
    fn check_text_output(
        &self,
        state: &mut RunState,
        calls: &[ToolCallPart],
        answer: &Message,
    ) -> ControlFlow<RunEnd, Option<Message>> {
        let Some(output) = state.output.as_mut().filter(|o| o.accepted.is_none()) else {
            return ControlFlow::Continue(None);
        };
        if !calls.is_empty() {
            return ControlFlow::Continue(None);
        }
        let checked = if output.plan.text_output() {
            output.plan.check_text(answer)
        } else {
            Err(vec!["$: no final-result tool was called".to_owned()])
        };
        match checked {
            Ok(accepted) => {
                output.accepted = Some(accepted);
                ControlFlow::Break(Ok(RunStop::Done))
            }
            Err(violations) => {
                if !output.fail(answer.text(), violations) {
                    return ControlFlow::Break(Ok(output_invalid(&state.output)));
                }
                ControlFlow::Continue(state.output.as_ref().map(OutputRun::repair_text_message))
            }
        }
    }

    /// Decides whether another turn is needed, and only then takes from the queues (so a stop
    /// never swallows a queued message): the limits, then the next turn's first messages.
    fn next_turn(
        &self,
        state: &mut RunState,
        turn: u32,
        called_tools: bool,
        repair: Option<Message>,
        emitter: &Emitter,
    ) -> ControlFlow<RunEnd> {
        let from_steering = called_tools || !self.steering.is_empty() || repair.is_some();
        if !from_steering && self.follow_ups.is_empty() {
            return ControlFlow::Break(Ok(RunStop::Done));
        }
        if let Some(limit) = self.config.max_turns {
            if state.turns >= limit {
                return ControlFlow::Break(Ok(RunStop::MaxTurns { limit }));
            }
        }
        // Children's model calls count against the run's request ceiling.
        let requests = state.turns + crate::agent::subagent::child_requests();
        if let Some((which, used, limit)) = self.config.usage_limits.reached(requests, &state.usage)
        {
            return ControlFlow::Break(Ok(RunStop::UsageLimit { which, used, limit }));
        }
        let pending = if from_steering {
            self.steering.take(self.config.steering_mode)
        } else {
            self.follow_ups.take(self.config.follow_up_mode)
        };
        emitter.emit(AgentEvent::TurnStart { turn: turn + 1 });
        for message in repair.into_iter().chain(pending) {
            self.inject(state, message, emitter);
        }
        ControlFlow::Continue(())
    }
}
