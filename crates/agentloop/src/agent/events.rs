//! [`AgentEvent`]s, the way the loop reports progress to a UI, a log or the CLI's `--json` output,
//! and [`RunStop`], why a run ended.
//!
//! Order (pi-style): `AgentStart`, `TurnStart`, `MessageStart`/`MessageEnd` for each prompt, then
//! per turn `MessageStart`, `MessageUpdate`* (assistant streaming only), `MessageEnd`,
//! `ToolExecutionStart`/`Update`*/`End` for each call that runs (`End` in completion order), a
//! `MessageStart`/`MessageEnd` pair per tool result (in call order), `TurnEnd`; finally exactly one
//! `AgentEnd`, whatever happened. Events serialize as `{"type": "snake_case_name", …}`.
//!
//! # Blocked calls
//!
//! `ToolExecutionStart` means "the tool is running now" (a UI shows a spinner): it comes only
//! for a call that passed every check — known tool, schema, binding to the handler's type,
//! approval, `tool_call` hooks — right before its handler starts. A call refused before it
//! runs (an unknown tool, invalid arguments, an approval denial, a hook's veto, a deferred tool
//! not loaded yet, a call cut off by the output-token limit, an abort before it started, a
//! denied or interrupted call on resume) gets **no** `ToolExecutionStart`: only a
//! `ToolExecutionEnd` with `blocked: true` and its error result (which says why). A call
//! deferred for approval gets neither; its `ApprovalRequested` follows at the end of the turn.
//!
//! Listeners add up: every callback registered with
//! [`AgentLoop::with_emit`](super::AgentLoop::with_emit) (and a session attached with
//! [`with_session`](super::AgentLoop::with_session)) gets every event, in registration order,
//! then the run's event stream, if any. Delivery is guarded: a panicking listener is logged and
//! ignored; it cannot stop the run, the other listeners or the event stream.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc::UnboundedSender;

use crate::model::ModelDelta;
use crate::tooling::{ToolObserver, panic_message};
use crate::transcript::{Message, ToolCallPart, ToolResultPart};

/// Why a run ended.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunStop {
    /// The model finished and no queued message asked for more.
    Done,
    /// `max_turns` model calls were made and the agent still had work to do.
    MaxTurns {
        /// The configured limit.
        limit: u32,
    },
    /// The same wholly failing batch of tool calls repeated `turns` turns in a row.
    RepeatedToolFailures {
        /// The configured limit.
        turns: u32,
    },
    /// The caller aborted the run.
    Aborted,
    /// The model failed (see the run's error).
    ModelError {
        /// What failed.
        message: String,
    },
    /// An extension's `should_stop_after_turn` hook ended the run.
    HookStop {
        /// Which extension.
        extension: String,
    },
    /// A typed output ([`crate::agent::output`]) was invalid on every attempt and the repairs ran out.
    OutputInvalid {
        /// How many invalid outputs the model gave.
        attempts: u32,
    },
    /// The loop itself failed unexpectedly (a bug); the completed messages are kept.
    Internal {
        /// What failed.
        message: String,
    },
    /// A ceiling of [`UsageLimits`](crate::agent::UsageLimits) was reached before the next
    /// model call; the completed messages are kept. The amounts are `f64` so one variant holds
    /// counts and dollars alike; for a count ([`UsageLimit::is_count`](crate::cost::UsageLimit::is_count):
    /// requests, tokens) they are whole numbers, serialized as JSON integers (`"used": 2`) and
    /// shown without a fraction by this type's `Display` ("request limit reached: 2 of 2").
    UsageLimit {
        /// Which ceiling.
        which: crate::cost::UsageLimit,
        /// How much the run had used (requests, tokens or US dollars).
        #[serde(serialize_with = "whole_or_fraction")]
        used: f64,
        /// The ceiling.
        #[serde(serialize_with = "whole_or_fraction")]
        limit: f64,
    },
    /// Some tool calls wait for a person's decision (the approval hook deferred them); the
    /// rest of their batch ran. Decide and continue with
    /// [`AgentLoop::resume_parked`](super::AgentLoop::resume_parked).
    AwaitingApproval {
        /// The deferred calls, in call order.
        pending: Vec<super::PendingApproval>,
    },
}

/// A whole amount as a JSON integer (a count of requests or tokens), any other as a float.
fn whole_or_fraction<S: serde::Serializer>(amount: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if amount.fract() == 0.0 && amount.abs() < 9.0e15 {
        serializer.serialize_i64(*amount as i64)
    } else {
        serializer.serialize_f64(*amount)
    }
}

/// A shared string as a JSON string (serde serializes `Arc<str>` only with its `rc` feature).
fn shared_str<S: serde::Serializer>(text: &Arc<str>, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(text)
}

/// One plain sentence for a person (`max turns reached (10)`, `the model produced no valid
/// output after 3 attempts`); the serialized form stays the machine-readable one.
impl std::fmt::Display for RunStop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunStop::Done => f.write_str("done"),
            RunStop::MaxTurns { limit } => write!(f, "stopped at the limit of {limit} turns"),
            RunStop::RepeatedToolFailures { turns } => {
                write!(f, "the same tool calls failed {turns} turns in a row")
            }
            RunStop::Aborted => f.write_str("aborted"),
            RunStop::ModelError { message } => write!(f, "model error: {message}"),
            RunStop::HookStop { extension } => write!(f, "stopped by extension {extension}"),
            RunStop::OutputInvalid { attempts } => {
                write!(f, "no valid output after {attempts} attempt(s)")
            }
            RunStop::Internal { message } => write!(f, "internal error: {message}"),
            // Counts (requests, tokens) are whole numbers: shown without a fraction.
            RunStop::UsageLimit { which, used, limit } if which.is_count() => {
                write!(f, "{which} limit reached ({used:.0} of {limit:.0})")
            }
            RunStop::UsageLimit { which, used, limit } => {
                write!(f, "{which} limit reached ({used} of {limit})")
            }
            RunStop::AwaitingApproval { pending } => {
                write!(f, "{} tool call(s) await approval", pending.len())
            }
        }
    }
}

// The amounts in `UsageLimit` are finite (limits are validated, usage is counted), so equality
// stays reflexive and `RunStop` keeps its `Eq`.
impl Eq for RunStop {}

/// Something that happened during a run.
///
/// # Blocked calls
///
/// `ToolExecutionStart` means "the tool is running now" (a UI shows a spinner): it comes only
/// for a call that passed every check — known tool, schema, `tool_call` hooks, binding to the
/// handler's type, approval — right before its handler starts. A call refused before it runs
/// gets **no** `ToolExecutionStart`, only a `ToolExecutionEnd` with `blocked: true` and the
/// error result saying why; a call deferred for approval gets neither (its `ApprovalRequested`
/// follows at the end of the turn).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// The run began.
    AgentStart,
    /// A turn (one model call and its tool batch) began.
    TurnStart {
        /// 1-based turn number within the run.
        turn: u32,
    },
    /// A message began: a prompt, an injected message, the assistant's streaming reply (empty at
    /// this point) or a tool result.
    MessageStart {
        /// The message so far.
        message: Message,
    },
    /// A piece of the assistant's streaming reply.
    MessageUpdate {
        /// The piece.
        delta: ModelDelta,
        /// For a run with a typed output ([`crate::agent::output`]): the output parsed so far (a
        /// best-effort partial value from the streaming JSON text or final-tool arguments), when
        /// this piece changed it. Absent otherwise.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    /// A message is complete.
    MessageEnd {
        /// The complete message.
        message: Message,
    },
    /// The model provider is retrying a failed request.
    ModelRetry {
        /// Which retry (1 for the first).
        attempt: u32,
        /// Wait before it, in milliseconds.
        delay_ms: u64,
        /// Why.
        reason: String,
    },
    /// The model failed before streaming anything and a fallback model got the same request
    /// (see [`FallbackModel`](crate::model::FallbackModel)).
    ModelFallback {
        /// The model that failed (`provider:model`).
        from: String,
        /// The model that answers now.
        to: String,
        /// Why `from` failed.
        reason: String,
    },
    /// A tool call passed every check and its handler starts now (never sent for a blocked
    /// call: see [Blocked calls](AgentEvent#blocked-calls)).
    ToolExecutionStart {
        /// The call.
        call: ToolCallPart,
    },
    /// A running tool reported progress.
    ToolExecutionUpdate {
        /// Which call.
        call_id: String,
        /// Which tool.
        tool_name: String,
        /// What it reported.
        update: Value,
    },
    /// A tool call has its result (in completion order). For a call that ran, it closes its
    /// `ToolExecutionStart`; for a blocked call it is the only event (see
    /// [Blocked calls](AgentEvent#blocked-calls)).
    ToolExecutionEnd {
        /// The call.
        call: ToolCallPart,
        /// Its final result (after any `tool_result` hook).
        result: ToolResultPart,
        /// True when the call never ran: it was refused before its handler started and had no
        /// `ToolExecutionStart`; `result` is the error telling why. Serialized only when true.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        blocked: bool,
    },
    /// A turn ended.
    TurnEnd {
        /// 1-based turn number.
        turn: u32,
        /// The turn's assistant message.
        message: Message,
        /// Its tool results, in call order.
        tool_results: Vec<ToolResultPart>,
    },
    /// The run stops for approval: what a store must keep to resume it (emitted before the
    /// `ApprovalRequested` events and the `AgentEnd`, so it is durable before anyone is told).
    RunParked {
        /// The pending calls and the messages queued at the stop.
        parked: super::ParkedRun,
    },
    /// A tool call waits for a person's decision (one event per deferred call).
    ApprovalRequested {
        /// The agent's session id, when it has one.
        session_id: Option<String>,
        /// The call.
        #[serde(flatten)]
        approval: super::PendingApproval,
    },
    /// A resume acted on a decided call: `started` (it is about to run), `denied`, or — for a
    /// call that had started before a crash — `started` again, answered as interrupted.
    ApprovalResolved {
        /// Which call.
        call_id: String,
        /// Which tool.
        tool_name: String,
        /// The decision acted on.
        status: super::PendingStatus,
    },
    /// Older turns were replaced by a summary (context compaction). The summary itself comes
    /// as a custom message's `MessageStart`/`MessageEnd` right before this event.
    Compaction {
        /// Messages summarised.
        summarized: usize,
        /// Messages kept verbatim after the summary.
        kept: usize,
        /// Estimated context tokens before.
        tokens_before: u64,
        /// Estimated context tokens after.
        tokens_after: u64,
        /// What the summary cost.
        usage: Option<crate::transcript::Usage>,
        /// `threshold`, `overflow` or `manual`.
        trigger: String,
    },
    /// An event of a sub-agent run started by the tool call `parent_call_id` (see
    /// [`SubAgent`](super::SubAgent)). A grandchild's event is wrapped once per level, so the
    /// nesting is the path of calls that led to it. A child's `AgentEnd` arrives wrapped: only
    /// the run's own `AgentEnd` ends its stream.
    Child {
        /// The parent's call that runs the sub-agent (shared by all the events of that call).
        #[serde(serialize_with = "shared_str")]
        parent_call_id: Arc<str>,
        /// The sub-agent's name (its tool name; shared by all the events of its calls).
        #[serde(serialize_with = "shared_str")]
        agent: Arc<str>,
        /// The child's event.
        event: Box<AgentEvent>,
    },
    /// The run ended. Always the last event.
    AgentEnd {
        /// Every message the run produced (prompts included), in order.
        messages: Vec<Message>,
        /// Why it ended.
        stop: RunStop,
    },
}

impl AgentEvent {
    /// The text of a streamed text piece (`MessageUpdate` with a text delta), else `None` —
    /// for printing a reply as it streams without a nested pattern.
    ///
    /// ```
    /// use agentloop::agent::AgentEvent;
    /// use agentloop::model::ModelDelta;
    ///
    /// let event = AgentEvent::MessageUpdate { delta: ModelDelta::Text { delta: "Hel".into() }, output: None };
    /// assert_eq!(event.text_delta(), Some("Hel"));
    /// assert_eq!(AgentEvent::AgentStart.text_delta(), None);
    /// ```
    pub fn text_delta(&self) -> Option<&str> {
        match self.model_delta()? {
            ModelDelta::Text { delta } => Some(delta),
            _ => None,
        }
    }

    /// The text of a streamed thinking piece, else `None`.
    pub fn thinking_delta(&self) -> Option<&str> {
        match self.model_delta()? {
            ModelDelta::Thinking { delta } => Some(delta),
            _ => None,
        }
    }

    /// The delta of a `MessageUpdate`, else `None`.
    fn model_delta(&self) -> Option<&ModelDelta> {
        match self {
            AgentEvent::MessageUpdate { delta, .. } => Some(delta),
            _ => None,
        }
    }

    /// The message a `MessageEnd` completes, else `None`.
    pub fn completed_message(&self) -> Option<&Message> {
        match self {
            AgentEvent::MessageEnd { message } => Some(message),
            _ => None,
        }
    }

    /// For a `ToolExecutionEnd`: the call, its result and whether it was blocked (never ran).
    pub fn tool_end(&self) -> Option<(&ToolCallPart, &ToolResultPart, bool)> {
        match self {
            AgentEvent::ToolExecutionEnd {
                call,
                result,
                blocked,
            } => Some((call, result, *blocked)),
            _ => None,
        }
    }

    /// Why the run ended, for the final `AgentEnd`; else `None`.
    pub fn run_stop(&self) -> Option<&RunStop> {
        match self {
            AgentEvent::AgentEnd { stop, .. } => Some(stop),
            _ => None,
        }
    }

    /// The event's `type` name as it appears in JSON (`"agent_start"`, …).
    pub fn kind(&self) -> &'static str {
        match self {
            AgentEvent::AgentStart => "agent_start",
            AgentEvent::TurnStart { .. } => "turn_start",
            AgentEvent::MessageStart { .. } => "message_start",
            AgentEvent::MessageUpdate { .. } => "message_update",
            AgentEvent::MessageEnd { .. } => "message_end",
            AgentEvent::ModelRetry { .. } => "model_retry",
            AgentEvent::ModelFallback { .. } => "model_fallback",
            AgentEvent::ToolExecutionStart { .. } => "tool_execution_start",
            AgentEvent::ToolExecutionUpdate { .. } => "tool_execution_update",
            AgentEvent::ToolExecutionEnd { .. } => "tool_execution_end",
            AgentEvent::TurnEnd { .. } => "turn_end",
            AgentEvent::RunParked { .. } => "run_parked",
            AgentEvent::ApprovalRequested { .. } => "approval_requested",
            AgentEvent::ApprovalResolved { .. } => "approval_resolved",
            AgentEvent::Compaction { .. } => "compaction",
            AgentEvent::Child { .. } => "child",
            AgentEvent::AgentEnd { .. } => "agent_end",
        }
    }
}

/// An `emit` callback.
pub type EmitFn = Arc<dyn Fn(&AgentEvent) + Send + Sync>;

/// Fans events out to every listener, in registration order, then to a stream's channel or,
/// for a sub-agent's run, to its parent ([`Forward`]).
/// Events are only built when someone listens (`enabled`), so a loop nobody observes pays
/// nothing for them.
#[derive(Clone, Default)]
pub(crate) struct Emitter {
    listeners: Arc<[EmitFn]>,
    channel: Option<UnboundedSender<AgentEvent>>,
    forward: Option<Arc<dyn Forward>>,
}

/// Where a sub-agent run's events go after its own listeners: it takes each event by value, so
/// the parent's tagged copy is the event itself, not a clone (see `subagent.rs`).
pub(crate) trait Forward: Send + Sync {
    /// Takes one event of the run, after its listeners saw it. With `give_back`, returns the
    /// event once delivered (`Some`), so the emitting relay keeps what it needs of it by moving
    /// instead of copying it first; without, returns `None`.
    fn forward(&self, event: AgentEvent, give_back: bool) -> Option<AgentEvent>;

    /// The calls the run started and has not answered yet, taken (for the aborted results that
    /// close the stream of a run whose future was dropped).
    fn take_open_calls(&self) -> Vec<ToolCallPart>;
}

impl Emitter {
    pub(crate) fn new(
        listeners: Arc<[EmitFn]>,
        channel: Option<UnboundedSender<AgentEvent>>,
    ) -> Self {
        Emitter {
            listeners,
            channel,
            forward: None,
        }
    }

    /// An emitter whose events go to `listeners`, then to `forward`.
    pub(crate) fn forwarding(listeners: Arc<[EmitFn]>, forward: Arc<dyn Forward>) -> Self {
        Emitter {
            listeners,
            channel: None,
            forward: Some(forward),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        !self.listeners.is_empty() || self.channel.is_some() || self.forward.is_some()
    }

    /// Emits the event built by `make`, if anyone listens.
    pub(crate) fn emit_with(&self, make: impl FnOnce() -> AgentEvent) {
        if self.enabled() {
            self.emit(make());
        }
    }

    /// Reports a message that enters the context whole (a tool result, an injected message, a
    /// compaction summary): its `MessageStart` and `MessageEnd`, with no updates between, as
    /// listeners expect of every message.
    pub(crate) fn emit_whole_message(&self, message: &Message) {
        if self.enabled() {
            self.emit(AgentEvent::MessageStart {
                message: message.clone(),
            });
            self.emit(AgentEvent::MessageEnd {
                message: message.clone(),
            });
        }
    }

    /// Reports a call answered without running: a `ToolExecutionEnd` with `blocked: true`, no
    /// `ToolExecutionStart`.
    pub(crate) fn emit_blocked(&self, call: &ToolCallPart, result: &ToolResultPart) {
        self.emit_with(|| AgentEvent::ToolExecutionEnd {
            call: call.clone(),
            result: result.clone(),
            blocked: true,
        });
    }

    pub(crate) fn emit(&self, event: AgentEvent) {
        self.deliver(event, false);
    }

    /// Delivers `event` to the listeners, then to the stream's channel or the parent; with
    /// `give_back`, returns it afterwards (the channel gets a copy, a parent hands it back).
    pub(crate) fn deliver(&self, event: AgentEvent, give_back: bool) -> Option<AgentEvent> {
        self.call_listeners(&event);
        // A closed channel means the stream's consumer went away; the run still finishes.
        match (&self.channel, &self.forward) {
            (Some(channel), Some(forward)) => {
                let _ = channel.send(event.clone());
                forward.forward(event, give_back)
            }
            (Some(channel), None) if give_back => {
                let _ = channel.send(event.clone());
                Some(event)
            }
            (Some(channel), None) => {
                let _ = channel.send(event);
                None
            }
            (None, Some(forward)) => forward.forward(event, give_back),
            (None, None) => give_back.then_some(event),
        }
    }

    /// Whether this is a sub-agent run's emitter, whose events go on to its parent.
    pub(crate) fn forwards(&self) -> bool {
        self.forward.is_some()
    }

    /// The calls a sub-agent run started and has not answered yet (none for any other run).
    pub(crate) fn take_open_calls(&self) -> Vec<ToolCallPart> {
        self.forward
            .as_ref()
            .map(|forward| forward.take_open_calls())
            .unwrap_or_default()
    }

    /// Whether listeners are all that receive this emitter's events: no stream's channel and no
    /// parent, which take events by value. Such an emitter can deliver a borrowed event
    /// ([`deliver_borrowed`](Self::deliver_borrowed)).
    pub(crate) fn listeners_only(&self) -> bool {
        self.channel.is_none() && self.forward.is_none()
    }

    /// Delivers a borrowed `event` to the listeners alone (see
    /// [`listeners_only`](Self::listeners_only)).
    pub(crate) fn deliver_borrowed(&self, event: &AgentEvent) {
        self.call_listeners(event);
    }

    fn call_listeners(&self, event: &AgentEvent) {
        for listener in self.listeners.iter() {
            if let Err(payload) = catch_unwind(AssertUnwindSafe(|| listener(event))) {
                tracing::warn!(
                    panic = %panic_message(&*payload),
                    event = event.kind(),
                    "an emit listener panicked; the event was dropped for it alone"
                );
            }
        }
    }
}

/// Turns executor callbacks into tool-execution events.
pub(crate) struct EventObserver(pub(crate) Emitter);

impl ToolObserver for EventObserver {
    fn call_started(&self, call: &ToolCallPart) {
        self.0
            .emit_with(|| AgentEvent::ToolExecutionStart { call: call.clone() });
    }

    fn call_progress(&self, call_id: &str, tool_name: &str, update: &Value) {
        self.0.emit_with(|| AgentEvent::ToolExecutionUpdate {
            call_id: call_id.to_owned(),
            tool_name: tool_name.to_owned(),
            update: update.clone(),
        });
    }

    fn call_finished(&self, call: &ToolCallPart, result: &ToolResultPart) {
        self.0.emit_with(|| AgentEvent::ToolExecutionEnd {
            call: call.clone(),
            result: result.clone(),
            blocked: false,
        });
    }

    fn call_blocked(&self, call: &ToolCallPart, result: &ToolResultPart) {
        self.0.emit_blocked(call, result);
    }
}
