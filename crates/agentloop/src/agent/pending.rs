//! Runs that pause for a person and resume later, possibly in another process (durable approval).
//!
//! When the approval hook answers [`Approval::Defer`](crate::tooling::Approval::Defer) for a call,
//! the loop runs the rest of the batch as usual, records the deferred calls as
//! [`PendingApproval`]s and stops with [`RunStop::AwaitingApproval`]. Before it reports the stop
//! it emits [`AgentEvent::RunParked`] (everything needed to resume: the pending calls and the
//! steering / follow-up messages still queued — a
//! [`SessionRecorder`](crate::session::SessionRecorder) stores it) and one
//! [`AgentEvent::ApprovalRequested`] per call. A person then decides each call
//! ([`ParkedRun::approve`], [`ParkedRun::deny`], or through a session store from another process)
//! and [`AgentLoop::resume_parked`] runs the approved calls, answers the denied ones with an error result
//! carrying the reason, and continues the loop as if it had never stopped.
//!
//! What resume guarantees: a call that already has a result in the context is never run again
//! (checked by call id); a call that was approved and *started* in an earlier resume but has no
//! result (the process died while it ran) gets an "interrupted" result instead of a second
//! execution; calls still undecided stay pending and the run stops again. Handlers see a stable
//! [`idempotency_key`](crate::tooling::ToolContext::idempotency_key) (`session id/call id`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::events::{AgentEvent, Emitter, RunStop};
use super::{AgentError, AgentLoop, RunOutcome};
use crate::tooling::{ExecOptions, ToolDeps, ToolErrorKind, ToolOutcome, run_tools_with};
use crate::transcript::interrupted_result;
use crate::transcript::{Message, Role, ToolArguments, ToolCallPart, ToolResultPart};

/// Where a deferred call stands.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PendingStatus {
    /// Nobody has decided yet.
    #[default]
    Awaiting,
    /// A person approved it; the next resume runs it.
    Approved,
    /// A person denied it; the next resume answers it with an error result carrying `reason`.
    Denied {
        /// Shown to the model.
        reason: String,
    },
    /// A resume started running it. If it has no result when the run is resumed again, the
    /// process died while it ran: it gets an "interrupted" result and is never run twice.
    Started,
}

impl PendingStatus {
    /// The state's name as stored and printed (`awaiting`, `approved`, `denied`, `started`).
    pub fn name(&self) -> &'static str {
        match self {
            PendingStatus::Awaiting => "awaiting",
            PendingStatus::Approved => "approved",
            PendingStatus::Denied { .. } => "denied",
            PendingStatus::Started => "started",
        }
    }
}

/// A tool call waiting for a person's decision.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingApproval {
    /// The call id (from the model).
    pub call_id: String,
    /// The tool.
    pub tool_name: String,
    /// The arguments, exactly as they will run (after any `tool_call` hook rewrite).
    pub arguments: Value,
    /// What the approval policy asked (the text of its [`Defer`](crate::tooling::Approval::Defer)).
    pub reason: String,
    /// The decision so far.
    #[serde(default)]
    pub status: PendingStatus,
}

impl PendingApproval {
    /// The call as it will run.
    pub fn call(&self) -> ToolCallPart {
        ToolCallPart {
            id: self.call_id.clone(),
            tool_name: self.tool_name.clone(),
            arguments: ToolArguments::Json(self.arguments.clone()),
            provider_data: None,
        }
    }
}

/// Everything a stopped run needs to continue: its pending calls (with decisions) and the
/// messages that were queued when it stopped.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ParkedRun {
    /// The deferred calls, in call order.
    pub pending: Vec<PendingApproval>,
    /// Steering messages to queue again before continuing (those queued at the stop, as a store
    /// keeps them; leave empty when resuming on the same agent, whose queue still holds them).
    #[serde(default)]
    pub steering: Vec<Message>,
    /// Follow-up messages to queue again (same rule as `steering`).
    #[serde(default)]
    pub follow_ups: Vec<Message>,
}

impl ParkedRun {
    /// The parked state of a run that stopped with [`RunStop::AwaitingApproval`] (for resuming on
    /// the same agent); `None` for any other stop.
    pub fn from_stop(stop: &RunStop) -> Option<Self> {
        match stop {
            RunStop::AwaitingApproval { pending } => Some(ParkedRun {
                pending: pending.clone(),
                ..ParkedRun::default()
            }),
            _ => None,
        }
    }

    fn set(&mut self, call_id: &str, status: PendingStatus) -> bool {
        match self.pending.iter_mut().find(|p| p.call_id == call_id) {
            Some(p) if p.status != PendingStatus::Started => {
                p.status = status;
                true
            }
            _ => false,
        }
    }

    /// Approves one call; false when no such call is pending (or it already started).
    pub fn approve(&mut self, call_id: &str) -> bool {
        self.set(call_id, PendingStatus::Approved)
    }

    /// Denies one call with a reason the model sees; false when no such call is pending.
    pub fn deny(&mut self, call_id: &str, reason: impl Into<String>) -> bool {
        self.set(
            call_id,
            PendingStatus::Denied {
                reason: reason.into(),
            },
        )
    }

    /// Approves every call still awaiting a decision.
    pub fn approve_all(&mut self) {
        for p in &mut self.pending {
            if p.status == PendingStatus::Awaiting {
                p.status = PendingStatus::Approved;
            }
        }
    }

    /// The calls nobody has decided yet.
    pub fn undecided(&self) -> impl Iterator<Item = &PendingApproval> {
        self.pending
            .iter()
            .filter(|p| p.status == PendingStatus::Awaiting)
    }
}

/// What the executor made of one call of a batch: a result, or a deferral.
pub(crate) enum Answer {
    Result(ToolResultPart),
    Deferred(PendingApproval),
}

impl Answer {
    /// Classifies an executor outcome for `call` (as it was run).
    pub(crate) fn from_outcome(call: &ToolCallPart, outcome: ToolOutcome) -> Self {
        match &outcome.error {
            Some(e) if e.kind() == ToolErrorKind::Deferred => Answer::Deferred(PendingApproval {
                call_id: call.id.clone(),
                tool_name: call.tool_name.clone(),
                arguments: match &call.arguments {
                    ToolArguments::Json(v) => v.clone(),
                    ToolArguments::Unparsed(t) => Value::String(t.clone()),
                },
                reason: e.message().to_owned(),
                status: PendingStatus::Awaiting,
            }),
            _ => Answer::Result(outcome.result),
        }
    }

    /// Results in call order, and the deferred calls in call order.
    pub(crate) fn split(answers: Vec<Answer>) -> (Vec<ToolResultPart>, Vec<PendingApproval>) {
        let mut results = Vec::with_capacity(answers.len());
        let mut pending = Vec::new();
        for answer in answers {
            match answer {
                Answer::Result(r) => results.push(r),
                Answer::Deferred(p) => pending.push(p),
            }
        }
        (results, pending)
    }
}

fn denied_result(p: &PendingApproval, reason: &str) -> ToolResultPart {
    ToolResultPart::error(
        &p.call_id,
        &p.tool_name,
        format!("Tool call \"{}\" was denied: {reason}", p.tool_name),
    )
}

impl<D: ToolDeps> AgentLoop<D> {
    /// Labels this agent's runs with a session id **without recording anything**: tools see
    /// `session id/call id` as their
    /// [`idempotency_key`](crate::tooling::ToolContext::idempotency_key), and
    /// [`AgentEvent::ApprovalRequested`] carries it. To record the runs in a session store (and
    /// label them), use [`with_session`](Self::with_session) instead.
    pub fn with_session_label(mut self, session_id: impl Into<String>) -> Self {
        self.session_id = Some(Arc::from(session_id.into()));
        self
    }

    /// Renamed [`with_session_label`](Self::with_session_label): it attaches no store.
    #[deprecated(
        note = "it attaches no store: use `with_session_label` (label only) or `with_session` (record into a store)"
    )]
    pub fn with_session_id(self, session_id: impl Into<String>) -> Self {
        self.with_session_label(session_id)
    }

    /// The session id set with [`with_session_label`](Self::with_session_label) or
    /// [`with_session`](Self::with_session).
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// Renamed [`resume_parked`](Self::resume_parked): it continues a run parked for approval,
    /// not a stored session.
    #[deprecated(
        note = "use `resume_parked` (a run parked for approval); a stored session continues with `with_session` + `run_in_session`"
    )]
    pub async fn resume(
        &self,
        context: Vec<Message>,
        parked: ParkedRun,
    ) -> Result<RunOutcome, AgentError> {
        self.resume_parked(context, parked).await
    }

    /// Continues a run that stopped with [`RunStop::AwaitingApproval`] (a run *parked for
    /// approval*; to continue a stored conversation, see
    /// [`with_session`](Self::with_session) and [`run_in_session`](Self::run_in_session)).
    ///
    /// `context` is the conversation as it stood at the stop (the run's `context`, or a
    /// session's stored messages — see
    /// [`load_parked`](crate::session::load_parked)); `parked` holds the pending calls with their
    /// decisions. Approved calls run (without asking the approval hook again), denied ones get an
    /// error result with the reason, calls with a result already in `context` are skipped, calls
    /// that had started in an earlier resume get an "interrupted" result. If calls remain
    /// undecided the run stops again with `AwaitingApproval` for them; otherwise the loop
    /// continues (queued steering first, then the model). The results of the resumed batch are
    /// kept in call order, so `new_messages` of the outcome may start at the batch's first result.
    pub async fn resume_parked(
        &self,
        context: Vec<Message>,
        parked: ParkedRun,
    ) -> Result<RunOutcome, AgentError> {
        self.drive_with(None, context, Some(parked), self.emitter(None))
            .await
    }

    /// Stops the run for approval: reports the parked state, then one request per call.
    pub(crate) fn park(&self, pending: Vec<PendingApproval>, emitter: &Emitter) -> RunStop {
        // The queues are snapshotted, not drained: this agent keeps them for its next run,
        // and a store keeps the snapshot for a resume in another process.
        emitter.emit_with(|| AgentEvent::RunParked {
            parked: ParkedRun {
                pending: pending.clone(),
                steering: self.steering.snapshot(),
                follow_ups: self.follow_ups.snapshot(),
            },
        });
        let session_id = self.session_id.as_deref().map(str::to_owned);
        for approval in &pending {
            emitter.emit_with(|| AgentEvent::ApprovalRequested {
                session_id: session_id.clone(),
                approval: approval.clone(),
            });
        }
        RunStop::AwaitingApproval { pending }
    }

    /// The resume step, before the turn cycle: answers the decided calls of `parked` into
    /// `context` (batch kept in call order). Returns the stop when calls remain undecided.
    pub(crate) async fn resume_calls(
        &self,
        context: &mut Vec<Message>,
        new_from: &mut usize,
        parked: ParkedRun,
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Option<RunStop> {
        for m in parked.steering {
            self.steering.push(m);
        }
        for m in parked.follow_ups {
            self.follow_ups.push(m);
        }
        let triage = triage_pending(parked.pending, context);
        let mut results: Vec<ToolResultPart> = triage
            .unrun
            .iter()
            .map(|p| self.answer_unrun(p, emitter))
            .collect();
        if !triage.to_run.is_empty() {
            results.extend(self.run_approved(&triage.to_run, emitter, cancel).await);
        }
        for result in results {
            push_result(context, result, emitter);
        }
        sort_last_batch(context, new_from);
        if triage.remaining.is_empty() {
            None
        } else {
            Some(self.park(triage.remaining, emitter))
        }
    }

    /// Answers a call that will not run: denied (with the reason), or started by an earlier
    /// resume that never recorded its result (interrupted, never run twice).
    fn answer_unrun(&self, p: &PendingApproval, emitter: &Emitter) -> ToolResultPart {
        emitter.emit_with(|| AgentEvent::ApprovalResolved {
            call_id: p.call_id.clone(),
            tool_name: p.tool_name.clone(),
            status: p.status.clone(),
        });
        let result = match &p.status {
            PendingStatus::Denied { reason } => denied_result(p, reason),
            _ => interrupted_result(&p.call()),
        };
        self.announce_unrun(&p.call(), &result, emitter);
        result
    }

    /// Runs the approved calls (without asking the approval hook again), results in call order.
    async fn run_approved(
        &self,
        to_run: &[PendingApproval],
        emitter: &Emitter,
        cancel: &CancellationToken,
    ) -> Vec<ToolResultPart> {
        // Reported (and recorded as started) before any handler runs: a crash from here on
        // leaves "started" behind, which the next resume answers as interrupted.
        for p in to_run {
            emitter.emit(AgentEvent::ApprovalResolved {
                call_id: p.call_id.clone(),
                tool_name: p.tool_name.clone(),
                status: PendingStatus::Started,
            });
        }
        let calls: Vec<ToolCallPart> = to_run.iter().map(PendingApproval::call).collect();
        let options = self.resume_options(emitter, cancel);
        let outcomes = run_tools_with(&calls, &self.turn_registry(), &self.deps, &options).await;
        outcomes.into_iter().map(|o| o.result).collect()
    }

    fn announce_unrun(&self, call: &ToolCallPart, result: &ToolResultPart, emitter: &Emitter) {
        emitter.emit_blocked(call, result);
    }

    /// Executor options for approved calls: like a normal batch, without the approval hook.
    fn resume_options(&self, emitter: &Emitter, cancel: &CancellationToken) -> ExecOptions {
        ExecOptions {
            skip_approval: true,
            ..self.exec_options(emitter, cancel)
        }
    }
}

/// The parked calls sorted by what resuming does with them, each list in call order.
#[derive(Debug, Default, PartialEq)]
struct Triage {
    /// Denied, or started without a result: answered without running.
    unrun: Vec<PendingApproval>,
    /// Approved: run now.
    to_run: Vec<PendingApproval>,
    /// Still awaiting a decision: the run parks again.
    remaining: Vec<PendingApproval>,
}

/// Sorts the parked calls by status, dropping those `context` already answers.
fn triage_pending(pending: Vec<PendingApproval>, context: &[Message]) -> Triage {
    let answered = crate::transcript::answered_call_ids(context);
    let mut triage = Triage::default();
    for p in pending {
        if answered.contains(p.call_id.as_str()) {
            // Already answered (e.g. the process died after recording the result but
            // before clearing the pending entry): never run it again.
            continue;
        }
        match &p.status {
            PendingStatus::Awaiting => triage.remaining.push(p),
            PendingStatus::Approved => triage.to_run.push(p),
            PendingStatus::Denied { .. } | PendingStatus::Started => triage.unrun.push(p),
        }
    }
    triage
}

/// Appends one tool result to the context, emitting its message events when someone listens.
fn push_result(context: &mut Vec<Message>, result: ToolResultPart, emitter: &Emitter) {
    let message = Message::tool_result(result);
    emitter.emit_whole_message(&message);
    context.push(message);
}

/// Puts the tool results after the last assistant message with calls in call order (results
/// answering no call of it keep their order after the others). Moves `new_from` back to the
/// batch's start when the order changed across it.
fn sort_last_batch(context: &mut [Message], new_from: &mut usize) {
    let Some(at) = context
        .iter()
        .rposition(|m| m.role == Role::Assistant && m.tool_calls().next().is_some())
    else {
        return;
    };
    let start = at + 1;
    let end = context[start..]
        .iter()
        .position(|m| m.role != Role::ToolResult)
        .map_or(context.len(), |n| start + n);
    let ids: Vec<String> = context[at].tool_calls().map(|c| c.id.clone()).collect();
    let batch = &mut context[start..end];
    let key = |m: &Message| {
        m.tool_result_part()
            .and_then(|r| ids.iter().position(|id| *id == r.call_id))
            .unwrap_or(usize::MAX)
    };
    if batch.windows(2).all(|w| key(&w[0]) <= key(&w[1])) {
        return;
    }
    batch.sort_by_key(key);
    if *new_from > start && *new_from < end {
        *new_from = start;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(id: &str, status: PendingStatus) -> PendingApproval {
        PendingApproval {
            call_id: id.to_owned(),
            tool_name: "shell".to_owned(),
            arguments: serde_json::json!({}),
            reason: "asks".to_owned(),
            status,
        }
    }

    #[test]
    fn triage_sorts_by_status_and_never_reruns_an_answered_call() {
        let denied = PendingStatus::Denied {
            reason: "no".to_owned(),
        };
        let parked = vec![
            pending("a", PendingStatus::Approved),
            pending("b", denied.clone()),
            pending("c", PendingStatus::Awaiting),
            pending("d", PendingStatus::Started),
            pending("e", PendingStatus::Approved),
            pending("done", PendingStatus::Approved),
        ];
        let context = vec![Message::tool_result(ToolResultPart::success(
            "done", "shell", "ran",
        ))];
        let triage = triage_pending(parked, &context);
        let ids = |list: &[PendingApproval]| -> Vec<String> {
            list.iter().map(|p| p.call_id.clone()).collect()
        };
        assert_eq!(ids(&triage.to_run), ["a", "e"]);
        assert_eq!(ids(&triage.unrun), ["b", "d"]);
        assert_eq!(ids(&triage.remaining), ["c"]);
        assert_eq!(triage.unrun[0].status, denied);
    }
}
