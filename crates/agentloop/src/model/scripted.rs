//! Deterministic models for tests and demos: [`ScriptedModel`] (a queue of turns) and [`FnModel`]
//! (a closure from request to turn).
//!
//! A [`ScriptedTurn`] describes one assistant message — text, thinking, tool calls, stop reason,
//! usage — and how it streams: optional delays, chunking of text and arguments, and faults (an
//! error after K deltas, a stream that hangs, a stream that ends without its terminal event).
//! Both models stream through the same [`ModelEvent`] protocol real providers use.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::Duration;

use futures::StreamExt;
use serde_json::Value;

use super::{
    MessageAssembler, Model, ModelDelta, ModelError, ModelEvent, ModelRequest, ModelStream,
};
use crate::transcript::{Message, StopReason, Usage};

#[derive(Clone, Debug)]
enum Item {
    Text(String),
    Thinking(String),
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
}

#[derive(Clone, Debug)]
enum Fault {
    Error(String),
    Hang,
    EndWithoutTerminal,
}

/// One scripted assistant turn. Build with the chained methods; see [`ScriptedModel`].
#[derive(Clone, Debug, Default)]
pub struct ScriptedTurn {
    items: Vec<Item>,
    stop_reason: Option<StopReason>,
    usage: Usage,
    response_id: Option<String>,
    delay: Duration,
    chunk_delay: Duration,
    chunk_chars: Option<usize>,
    fault: Option<(usize, Fault)>,
}

impl ScriptedTurn {
    /// An empty turn (add parts with the methods below).
    pub fn new() -> Self {
        ScriptedTurn::default()
    }

    /// A turn that answers with `text` and stops.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedTurn::new().with_text(text)
    }

    /// A turn that fails immediately with a provider error.
    pub fn error(message: impl Into<String>) -> Self {
        ScriptedTurn::new().fail_after(0, message)
    }

    /// Adds visible text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.items.push(Item::Text(text.into()));
        self
    }

    /// Adds reasoning text.
    pub fn thinking(mut self, text: impl Into<String>) -> Self {
        self.items.push(Item::Thinking(text.into()));
        self
    }

    /// Adds a tool call with JSON arguments.
    pub fn tool_call(self, id: impl Into<String>, name: impl Into<String>, args: Value) -> Self {
        self.tool_call_raw(id, name, args.to_string())
    }

    /// Adds a tool call whose argument text is sent verbatim (may be invalid JSON).
    pub fn tool_call_raw(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        self.items.push(Item::ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        });
        self
    }

    crate::setters! {
        /// Overrides the stop reason (default: `tool_use` when the turn has tool calls, else
        /// `stop`).
        pub fn stop_reason(reason: StopReason) => stop_reason = Some(reason);
        /// Sets the reported usage.
        pub fn usage(usage: Usage) => usage = usage;
        /// Sets the provider's response id the message carries (`Message::response_id`).
        pub fn response_id(id: impl Into<String>) => response_id = Some(id.into());
        /// Waits this long before the first event.
        pub fn delay(delay: Duration) => delay = delay;
        /// Waits this long before each delta after the first.
        pub fn chunk_delay(delay: Duration) => chunk_delay = delay;
        /// Splits text, thinking and argument text into deltas of at most `chars` characters.
        pub fn chunked(chars: usize) => chunk_chars = Some(chars.max(1));
        /// After `deltas` deltas, ends with a [`ModelEvent::Error`] carrying `message`.
        pub fn fail_after(deltas: usize, message: impl Into<String>) =>
            fault = Some((deltas, Fault::Error(message.into())));
        /// After `deltas` deltas, never yields again (for abort and timeout tests).
        pub fn hang_after(deltas: usize) => fault = Some((deltas, Fault::Hang));
        /// After `deltas` deltas, the stream ends without a terminal event (a broken provider).
        pub fn end_without_terminal_after(deltas: usize) =>
            fault = Some((deltas, Fault::EndWithoutTerminal));
    }

    fn deltas(&self) -> Vec<ModelDelta> {
        let chunk = |s: &str| -> Vec<String> {
            match self.chunk_chars {
                None => vec![s.to_owned()],
                Some(n) => {
                    let chars: Vec<char> = s.chars().collect();
                    if chars.is_empty() {
                        return vec![String::new()];
                    }
                    chars.chunks(n).map(|c| c.iter().collect()).collect()
                }
            }
        };
        let mut out = Vec::new();
        let mut index = 0;
        for item in &self.items {
            match item {
                Item::Text(t) => {
                    out.extend(chunk(t).into_iter().map(|delta| ModelDelta::Text { delta }))
                }
                Item::Thinking(t) => out.extend(
                    chunk(t)
                        .into_iter()
                        .map(|delta| ModelDelta::Thinking { delta }),
                ),
                Item::ToolCall {
                    id,
                    name,
                    arguments,
                } => {
                    out.push(ModelDelta::ToolCallStart {
                        index,
                        id: id.clone(),
                        name: name.clone(),
                    });
                    out.extend(chunk(arguments).into_iter().map(|delta| {
                        ModelDelta::ToolCallArguments {
                            index,
                            delta,
                            partial: None,
                        }
                    }));
                    out.push(ModelDelta::ToolCallEnd { index });
                    index += 1;
                }
            }
        }
        out
    }

    fn default_stop(&self) -> StopReason {
        if self
            .items
            .iter()
            .any(|i| matches!(i, Item::ToolCall { .. }))
        {
            StopReason::ToolUse
        } else {
            StopReason::Stop
        }
    }

    /// Turns the script into a model stream for a request to `model` from `provider`.
    fn into_stream(self, model: String, provider: &str) -> ModelStream {
        let provider = provider.to_owned();
        let deltas = self.deltas();
        let (cut, fault) = match &self.fault {
            Some((k, f)) => ((*k).min(deltas.len()), Some(f.clone())),
            None => (deltas.len(), None),
        };
        let mut assembler = MessageAssembler::new();
        for d in &deltas[..cut] {
            assembler.push(d);
        }
        let finish = |mut m: Message| {
            m.model = Some(model.clone());
            m.provider = Some(provider.clone());
            m.usage = Some(self.usage);
            m.response_id.clone_from(&self.response_id);
            m
        };
        let terminal: Option<ModelEvent> = match fault {
            None => Some(ModelEvent::Done(finish(assembler.to_message(
                self.stop_reason.unwrap_or_else(|| self.default_stop()),
            )))),
            Some(Fault::Error(message)) => {
                let mut m = finish(assembler.to_message(StopReason::Error));
                m.error_message = Some(message.clone());
                Some(ModelEvent::Error {
                    message: m,
                    error: ModelError::Script(message),
                })
            }
            Some(Fault::Hang) | Some(Fault::EndWithoutTerminal) => None,
        };
        let hang = matches!(self.fault, Some((_, Fault::Hang)));
        let (delay, chunk_delay) = (self.delay, self.chunk_delay);
        let events: Vec<(Duration, ModelEvent)> = deltas
            .into_iter()
            .take(cut)
            .map(ModelEvent::Delta)
            .chain(terminal)
            .enumerate()
            .map(|(i, e)| (if i == 0 { delay } else { chunk_delay }, e))
            .collect();
        let body = futures::stream::iter(events).then(|(wait, event)| async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            event
        });
        if hang {
            body.chain(futures::stream::pending()).boxed()
        } else {
            body.boxed()
        }
    }
}

/// A copy of one request a scripted model received: the request itself, owning its messages and
/// tools.
pub type RecordedRequest = ModelRequest<'static>;

/// A model that plays back a queue of [`ScriptedTurn`]s, one per call, and records every request.
///
/// When the queue is empty a call fails with a "script exhausted" error, so a loop that calls the
/// model more often than the test expects fails loudly.
///
/// ```
/// use agentloop::model::{ScriptedModel, ScriptedTurn};
/// use serde_json::json;
///
/// let model = ScriptedModel::new([
///     ScriptedTurn::new().tool_call("call-1", "echo", json!({"text": "hi"})),
///     ScriptedTurn::text("done"),
/// ]);
/// assert_eq!(model.remaining(), 2);
/// ```
#[derive(Debug)]
pub struct ScriptedModel {
    turns: Mutex<VecDeque<ScriptedTurn>>,
    requests: Mutex<Vec<RecordedRequest>>,
    record: bool,
}

impl ScriptedModel {
    /// A model that plays `turns` in order.
    pub fn new(turns: impl IntoIterator<Item = ScriptedTurn>) -> Self {
        ScriptedModel {
            turns: Mutex::new(turns.into_iter().collect()),
            requests: Mutex::new(Vec::new()),
            record: true,
        }
    }

    /// Stops recording requests (benchmarks: recording copies the whole conversation per call).
    pub fn without_recording(mut self) -> Self {
        self.record = false;
        self
    }

    /// Appends a turn to the queue.
    pub fn push(&self, turn: ScriptedTurn) {
        lock(&self.turns).push_back(turn);
    }

    /// Turns not yet played.
    pub fn remaining(&self) -> usize {
        lock(&self.turns).len()
    }

    /// Every request received so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    /// Panics (with the number left) unless every scripted turn was played. For tests.
    pub fn assert_consumed(&self) {
        let left = self.remaining();
        assert!(
            left == 0,
            "scripted model: {left} turn(s) were never requested"
        );
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a queue half-updated; keep going.
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Model for ScriptedModel {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        if self.record {
            lock(&self.requests).push(request.to_owned_request());
        }
        let model = request.model.clone().unwrap_or_else(|| "scripted".into());
        match lock(&self.turns).pop_front() {
            Some(turn) => turn.into_stream(model, self.provider()),
            None => ScriptedTurn::new()
                .fail_after(
                    0,
                    "script exhausted: the model was called more times than scripted",
                )
                .into_stream(model, self.provider()),
        }
    }

    fn provider(&self) -> &str {
        "scripted"
    }
}

type TurnFn = dyn Fn(&ModelRequest<'_>) -> ScriptedTurn + Send + Sync;

/// A model whose every answer is computed by a closure from the request.
///
/// ```
/// use agentloop::model::{FnModel, ScriptedTurn};
///
/// let model = FnModel::new(|req| ScriptedTurn::text(format!("{} messages", req.messages.len())));
/// # let _ = model;
/// ```
pub struct FnModel {
    f: Box<TurnFn>,
}

impl FnModel {
    /// Wraps the closure.
    pub fn new(f: impl Fn(&ModelRequest<'_>) -> ScriptedTurn + Send + Sync + 'static) -> Self {
        FnModel { f: Box::new(f) }
    }
}

impl std::fmt::Debug for FnModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FnModel")
    }
}

impl Model for FnModel {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let model = request.model.clone().unwrap_or_else(|| "fn-model".into());
        (self.f)(&request).into_stream(model, self.provider())
    }

    fn provider(&self) -> &str {
        "fn"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    async fn drain(stream: ModelStream) -> Vec<ModelEvent> {
        stream.collect().await
    }

    #[tokio::test]
    async fn a_turn_streams_chunked_deltas_then_done() {
        let model = ScriptedModel::new([ScriptedTurn::text("Hello").chunked(2)]);
        let events = drain(model.stream(ModelRequest::new(vec![Message::user("hi")]))).await;
        let texts: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(ModelDelta::Text { delta }) => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, ["He", "ll", "o"]);
        match events.last() {
            Some(ModelEvent::Done(m)) => {
                assert_eq!(m.text(), "Hello");
                assert_eq!(m.stop_reason, Some(StopReason::Stop));
            }
            other => panic!("unexpected terminal {other:?}"),
        }
        assert_eq!(model.requests()[0].messages[0].text(), "hi");
        model.assert_consumed();
    }

    #[tokio::test]
    async fn faults_cut_the_stream_where_told() {
        let model = ScriptedModel::new([
            ScriptedTurn::text("abcdef")
                .chunked(1)
                .fail_after(2, "boom"),
            ScriptedTurn::text("abc").end_without_terminal_after(1),
        ]);
        let events = drain(model.stream(ModelRequest::new(vec![]))).await;
        assert_eq!(events.len(), 3);
        match &events[2] {
            ModelEvent::Error { message, error } => {
                assert_eq!(message.text(), "ab");
                assert_eq!(message.stop_reason, Some(StopReason::Error));
                assert_eq!(error, &ModelError::Script("boom".into()));
            }
            other => panic!("{other:?}"),
        }
        let events = drain(model.stream(ModelRequest::new(vec![]))).await;
        assert_eq!(events.len(), 1);
        assert!(matches!(events[0], ModelEvent::Delta(_)));
    }

    #[tokio::test]
    async fn exhausted_script_fails_loudly() {
        let model = ScriptedModel::new([]);
        let events = drain(model.stream(ModelRequest::new(vec![]))).await;
        assert!(
            matches!(&events[0], ModelEvent::Error { error: ModelError::Script(m), .. } if m.contains("exhausted"))
        );
    }

    #[tokio::test]
    async fn tool_calls_default_to_tool_use() {
        let model = ScriptedModel::new([ScriptedTurn::new().tool_call("c", "t", json!({"a": 1}))]);
        let events = drain(model.stream(ModelRequest::new(vec![]))).await;
        match events.last() {
            Some(ModelEvent::Done(m)) => {
                assert_eq!(m.stop_reason, Some(StopReason::ToolUse));
                assert_eq!(m.tool_calls().count(), 1);
            }
            other => panic!("{other:?}"),
        }
    }
}
