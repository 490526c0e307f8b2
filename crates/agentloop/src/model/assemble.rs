//! [`MessageAssembler`]: builds an assistant message from streamed pieces.
//!
//! Two users share it. The agent loop keeps one per model call and feeds it the neutral
//! [`ModelDelta`]s ([`push`](MessageAssembler::push)) so that an abort mid-stream still yields
//! the partial message (nothing streamed is lost). Every provider's stream parser keeps one per
//! response and builds its message through it: each method records a piece *and* emits the
//! matching delta, so what the caller saw streamed and the message it gets at the end cannot
//! disagree, and the rules every provider shares (which empty parts are dropped, a refusal
//! that becomes the text of a message without any, arguments parsed once at the end) live
//! here once.
//!
//! Appending is amortised O(1) per delta, and so is finding a call by its index or its id
//! (a reply of 100,000 tool calls assembles in linear time); a tool call's argument text is
//! parsed once, when the message is built (the provider path also keeps an incremental
//! [`PartialJson`] for the best-effort snapshots streamed with each argument delta). The
//! assembler counts the calls and the argument bytes it received
//! ([`call_count`](MessageAssembler::call_count),
//! [`argument_bytes`](MessageAssembler::argument_bytes)) so that the transport can end a reply
//! that exceeds its configured bounds.

use std::collections::HashSet;

use serde_json::Value;

use super::{ModelDelta, ModelEvent};
use crate::json::partial_json::PartialJson;
use crate::transcript::{
    Message, Part, ProviderData, StopReason, ThinkingPart, ToolArguments, ToolCallPart, Usage,
};

/// A part held by a [`MessageAssembler`], for appending to it later (a provider whose stream
/// addresses its blocks by index, such as Anthropic's, keeps one per block).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PartId(usize);

/// A tool call's argument text as it streams.
#[derive(Clone, Debug)]
enum ArgumentText {
    /// The loop's copy: text only (no snapshots wanted, so no scanning).
    Plain(String),
    /// A provider's: scanned incrementally for the snapshots sent with each delta.
    Scanned(PartialJson),
}

impl ArgumentText {
    fn text(&self) -> &str {
        match self {
            ArgumentText::Plain(text) => text,
            ArgumentText::Scanned(json) => json.text(),
        }
    }
}

/// One tool call being assembled.
#[derive(Clone, Debug)]
struct CallSlot {
    /// The call's position among the message's tool calls, as deltas name it.
    index: usize,
    /// Where its [`Part::ToolCall`] is.
    part: usize,
    text: ArgumentText,
    /// Arguments that arrived whole, as a JSON value: they win over streamed text, unless text
    /// streams after them.
    value: Option<Value>,
    /// The final argument text when it does not extend what was streamed.
    replaced: Option<String>,
}

impl CallSlot {
    fn arguments(&self) -> ToolArguments {
        match (&self.value, &self.replaced) {
            (Some(value), _) => ToolArguments::Json(value.clone()),
            (None, Some(text)) => ToolArguments::parse(text),
            (None, None) => ToolArguments::parse(self.text.text()),
        }
    }
}

/// Accumulates streamed pieces into an assistant [`Message`]. See the module docs.
///
/// A provider's parser builds it with [`for_provider`](MessageAssembler::for_provider), calls
/// the recording methods (each pushes the matching [`ModelDelta`] to `out`), and returns
/// [`partial`](MessageAssembler::partial) or [`finish`](MessageAssembler::finish):
///
/// ```
/// use agentloop::model::{MessageAssembler, ModelEvent};
/// use agentloop::transcript::{StopReason, ToolArguments};
///
/// let mut message = MessageAssembler::for_provider("example", "model-1");
/// let mut out: Vec<ModelEvent> = Vec::new();
/// message.text("Reading it.", &mut out);
/// let call = message.start_call("call_1", "read", None, &mut out);
/// message.call_arguments(call, "{\"path\": \"a.t", &mut out);
/// message.call_arguments(call, "xt\"}", &mut out);
/// message.end_call(call, &mut out);
/// assert_eq!(out.len(), 5, "text, call start, two argument deltas, call end");
///
/// let done = message.finish(StopReason::ToolUse);
/// assert_eq!(done.text(), "Reading it.");
/// assert_eq!(done.provider.as_deref(), Some("example"));
/// let args = done.tool_calls().next().map(|c| c.arguments.clone());
/// assert_eq!(args, Some(ToolArguments::Json(serde_json::json!({"path": "a.txt"}))));
/// ```
#[derive(Clone, Debug, Default)]
pub struct MessageAssembler {
    parts: Vec<Part>,
    calls: Vec<CallSlot>,
    /// Refusal text sent on its own channel (OpenAI): the text of a message that has none.
    refusal: String,
    provider: Option<String>,
    model: Option<String>,
    usage: Option<Usage>,
    response_id: Option<String>,
    /// The ids of the calls started, for [`unique_call_id`](Self::unique_call_id) in O(1).
    call_ids: HashSet<String>,
    /// Argument bytes received for all calls together (text fragments, values arrived whole,
    /// replacement texts).
    argument_bytes: usize,
}

fn delta(out: &mut Vec<ModelEvent>, delta: ModelDelta) {
    out.push(ModelEvent::Delta(delta));
}

/// Brings `streamed` up to `full`: the missing suffix when `full` extends it (a delta to emit),
/// `None` when they are equal or `full` replaced something different.
fn reconcile(streamed: &mut String, full: &str) -> Option<String> {
    if streamed == full {
        return None;
    }
    let suffix = full.strip_prefix(streamed.as_str()).map(str::to_owned);
    full.clone_into(streamed);
    suffix.filter(|s| !s.is_empty())
}

impl MessageAssembler {
    /// An empty assembler (the agent loop's).
    pub fn new() -> Self {
        MessageAssembler::default()
    }

    /// An empty assembler for a provider's response: the message it builds names `provider`
    /// and `model` (the requested model; see [`model_if_unset`](Self::model_if_unset)).
    pub fn for_provider(provider: &str, model: impl Into<String>) -> Self {
        MessageAssembler {
            provider: Some(provider.to_owned()),
            model: Some(model.into()),
            ..MessageAssembler::default()
        }
    }

    /// Whether nothing has been received (no part at all, not even an empty one).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// Adds one neutral delta (the agent loop's view of a stream).
    pub fn push(&mut self, delta: &ModelDelta) {
        match delta {
            ModelDelta::Text { delta } => self.append_last_text(delta),
            ModelDelta::Thinking { delta } => self.append_last_thinking(delta),
            ModelDelta::ToolCallStart { index, id, name } => {
                self.add_call(*index, id, name, None, ArgumentText::Plain(String::new()));
            }
            ModelDelta::ToolCallArguments { index, delta, .. } => {
                self.argument_bytes = self.argument_bytes.saturating_add(delta.len());
                if let Some(slot) = self.slot_mut(*index) {
                    match &mut slot.text {
                        ArgumentText::Plain(text) => text.push_str(delta),
                        ArgumentText::Scanned(json) => json.push(delta),
                    }
                }
            }
            ModelDelta::ToolCallEnd { .. } => {}
        }
    }

    /// The message assembled from [`push`](Self::push)ed deltas, with the given stop reason:
    /// every part as received (the loop keeps even empty ones).
    pub fn to_message(&self, stop_reason: StopReason) -> Message {
        Message::assistant(self.resolved_parts(), stop_reason)
    }

    // ----- text and thinking -----------------------------------------------------------------

    fn append_last_text(&mut self, text: &str) {
        match self.parts.last_mut() {
            Some(Part::Text { text: last, .. }) => last.push_str(text),
            _ => self.parts.push(Part::text(text)),
        }
    }

    fn append_last_thinking(&mut self, text: &str) {
        match self.parts.last_mut() {
            Some(Part::Thinking(last)) => last.thinking.push_str(text),
            _ => self.parts.push(Part::Thinking(ThinkingPart {
                thinking: text.to_owned(),
                ..ThinkingPart::default()
            })),
        }
    }

    /// More visible text, appended to the last part when it is text (else a new text part).
    /// Empty text is ignored.
    pub fn text(&mut self, text: &str, out: &mut Vec<ModelEvent>) {
        self.push_and_stream(text, |delta| ModelDelta::Text { delta }, out);
    }

    /// More reasoning text, appended to the last part when it is thinking (else a new
    /// thinking part). Empty text is ignored.
    pub fn thinking(&mut self, text: &str, out: &mut Vec<ModelEvent>) {
        self.push_and_stream(text, |delta| ModelDelta::Thinking { delta }, out);
    }

    /// Adds `text`, as the delta `kind` makes of it, to the message and streams that delta (so
    /// what is assembled is what was streamed). Empty text is ignored.
    fn push_and_stream(
        &mut self,
        text: &str,
        kind: fn(String) -> ModelDelta,
        out: &mut Vec<ModelEvent>,
    ) {
        if text.is_empty() {
            return;
        }
        let streamed = kind(text.to_owned());
        self.push(&streamed);
        delta(out, streamed);
    }

    /// A new text part starting with `text` (streamed when not empty), carrying
    /// `provider_data`.
    pub fn open_text(
        &mut self,
        text: &str,
        provider_data: Option<ProviderData>,
        out: &mut Vec<ModelEvent>,
    ) -> PartId {
        if !text.is_empty() {
            delta(
                out,
                ModelDelta::Text {
                    delta: text.to_owned(),
                },
            );
        }
        self.parts.push(Part::Text {
            text: text.to_owned(),
            provider_data,
        });
        PartId(self.parts.len() - 1)
    }

    /// A new thinking part (its text streamed when not empty).
    pub fn open_thinking(&mut self, part: ThinkingPart, out: &mut Vec<ModelEvent>) -> PartId {
        if !part.thinking.is_empty() {
            delta(
                out,
                ModelDelta::Thinking {
                    delta: part.thinking.clone(),
                },
            );
        }
        self.parts.push(Part::Thinking(part));
        PartId(self.parts.len() - 1)
    }

    /// More text for the text part `id` (ignored when empty, or when `id` is not text).
    pub fn append_text(&mut self, id: PartId, text: &str, out: &mut Vec<ModelEvent>) {
        if text.is_empty() {
            return;
        }
        if let Some(Part::Text { text: part, .. }) = self.parts.get_mut(id.0) {
            part.push_str(text);
            delta(
                out,
                ModelDelta::Text {
                    delta: text.to_owned(),
                },
            );
        }
    }

    /// More reasoning text for the thinking part `id` (ignored when empty, or when `id` is not
    /// thinking). A part that receives text is no longer redacted.
    pub fn append_thinking(&mut self, id: PartId, text: &str, out: &mut Vec<ModelEvent>) {
        if text.is_empty() {
            return;
        }
        if let Some(Part::Thinking(part)) = self.parts.get_mut(id.0) {
            part.thinking.push_str(text);
            part.redacted = false;
            delta(
                out,
                ModelDelta::Thinking {
                    delta: text.to_owned(),
                },
            );
        }
    }

    /// The complete text of the text part `id`, restated at the end of its item: what the
    /// deltas missed is streamed; text that does not extend what was streamed replaces it.
    pub fn complete_text(&mut self, id: PartId, full: &str, out: &mut Vec<ModelEvent>) {
        if let Some(Part::Text { text, .. }) = self.parts.get_mut(id.0) {
            if let Some(missing) = reconcile(text, full) {
                delta(out, ModelDelta::Text { delta: missing });
            }
        }
    }

    /// [`complete_text`](Self::complete_text) for the thinking part `id`.
    pub fn complete_thinking(&mut self, id: PartId, full: &str, out: &mut Vec<ModelEvent>) {
        if let Some(Part::Thinking(part)) = self.parts.get_mut(id.0) {
            if let Some(missing) = reconcile(&mut part.thinking, full) {
                delta(out, ModelDelta::Thinking { delta: missing });
            }
        }
    }

    /// The part `id`.
    pub fn part(&self, id: PartId) -> Option<&Part> {
        self.parts.get(id.0)
    }

    /// The part `id`, to set what only the provider knows (a signature, provider data). Tool
    /// calls are changed through [`call_mut`](Self::call_mut) instead.
    pub fn part_mut(&mut self, id: PartId) -> Option<&mut Part> {
        self.parts.get_mut(id.0)
    }

    /// The newest part.
    pub fn last_part(&self) -> Option<(PartId, &Part)> {
        let at = self.parts.len().checked_sub(1)?;
        Some((PartId(at), &self.parts[at]))
    }

    /// Refusal text sent apart from the text (OpenAI's `refusal`): it becomes the text of a
    /// message that has no other text.
    pub fn refusal(&mut self, text: &str) {
        self.refusal.push_str(text);
    }

    /// Replaces the refusal text.
    pub fn set_refusal(&mut self, text: String) {
        self.refusal = text;
    }

    /// Whether refusal text was received.
    pub fn has_refusal(&self) -> bool {
        !self.refusal.is_empty()
    }

    /// Whether any text part has text.
    pub fn has_text(&self) -> bool {
        self.parts
            .iter()
            .any(|p| matches!(p, Part::Text { text, .. } if !text.is_empty()))
    }

    /// Whether the text part `id` has text.
    pub fn has_text_in(&self, id: PartId) -> bool {
        matches!(self.parts.get(id.0), Some(Part::Text { text, .. }) if !text.is_empty())
    }

    // ----- tool calls ------------------------------------------------------------------------

    fn add_call(
        &mut self,
        index: usize,
        id: &str,
        name: &str,
        provider_data: Option<ProviderData>,
        text: ArgumentText,
    ) {
        self.call_ids.insert(id.to_owned());
        self.calls.push(CallSlot {
            index,
            part: self.parts.len(),
            text,
            value: None,
            replaced: None,
        });
        self.parts.push(Part::ToolCall(ToolCallPart {
            id: id.to_owned(),
            tool_name: name.to_owned(),
            arguments: ToolArguments::default(),
            provider_data,
        }));
    }

    /// Where call `index` is in `calls`. Calls are numbered in the order they start, so the
    /// call is normally at its own index (O(1)); a stream that numbers them otherwise (the
    /// loop's copy fed deltas from elsewhere) is searched from the end.
    fn slot_at(&self, index: usize) -> Option<usize> {
        if self.calls.get(index).is_some_and(|c| c.index == index) {
            return Some(index);
        }
        self.calls.iter().rposition(|c| c.index == index)
    }

    fn slot_mut(&mut self, index: usize) -> Option<&mut CallSlot> {
        let at = self.slot_at(index)?;
        self.calls.get_mut(at)
    }

    /// How many tool calls have started.
    pub fn call_count(&self) -> usize {
        self.calls.len()
    }

    /// How many bytes of tool-call arguments were received, all calls together: every text
    /// fragment, every value that arrived whole (as its JSON text) and every restated text
    /// that replaced what was streamed. The HTTP transport compares it with
    /// `ProviderConfig::max_tool_argument_bytes`.
    pub fn argument_bytes(&self) -> usize {
        self.argument_bytes
    }

    /// Whether a tool call with this id has started (O(1)).
    pub fn has_call_id(&self, id: &str) -> bool {
        self.call_ids.contains(id)
    }

    /// `id`, or — when it is empty or already taken by another call of this message (some
    /// servers reuse the function name) — `call_{index}_{name}`, so that every call pairs with
    /// its own result.
    pub fn unique_call_id(&self, id: &str, name: &str) -> String {
        if id.is_empty() || self.has_call_id(id) {
            let index = self.calls.len();
            format!(
                "call_{index}_{}",
                if name.is_empty() { "tool" } else { name }
            )
        } else {
            id.to_owned()
        }
    }

    /// A tool call begins; returns its index (its position among the message's calls).
    pub fn start_call(
        &mut self,
        id: &str,
        name: &str,
        provider_data: Option<ProviderData>,
        out: &mut Vec<ModelEvent>,
    ) -> usize {
        let index = self.calls.len();
        self.add_call(
            index,
            id,
            name,
            provider_data,
            ArgumentText::Scanned(PartialJson::new()),
        );
        delta(
            out,
            ModelDelta::ToolCallStart {
                index,
                id: id.to_owned(),
                name: name.to_owned(),
            },
        );
        index
    }

    /// The tool call `index`, to fill in what arrived late (its name, provider data).
    /// Its id is the one it started with as far as [`has_call_id`](Self::has_call_id) knows.
    pub fn call_mut(&mut self, index: usize) -> Option<&mut ToolCallPart> {
        let part = self.calls.get(self.slot_at(index)?)?.part;
        match self.parts.get_mut(part) {
            Some(Part::ToolCall(call)) => Some(call),
            _ => None,
        }
    }

    /// More argument text for call `index`, streamed with a best-effort parsed snapshot.
    /// Ignored when empty. Text streamed after arguments that arrived whole replaces them.
    pub fn call_arguments(&mut self, index: usize, fragment: &str, out: &mut Vec<ModelEvent>) {
        if fragment.is_empty() {
            return;
        }
        let Some(at) = self.slot_at(index) else {
            return;
        };
        self.argument_bytes = self.argument_bytes.saturating_add(fragment.len());
        let slot = &mut self.calls[at];
        if slot.text.text().is_empty() {
            slot.value = None;
        }
        let partial = match &mut slot.text {
            ArgumentText::Plain(text) => {
                text.push_str(fragment);
                None
            }
            ArgumentText::Scanned(json) => json.push_and_snapshot(fragment),
        };
        delta(
            out,
            ModelDelta::ToolCallArguments {
                index,
                delta: fragment.to_owned(),
                partial,
            },
        );
    }

    /// Call `index`'s arguments arrived whole, as a JSON value (streamed as one delta): they
    /// are the call's arguments unless argument text streams after them.
    pub fn call_value(&mut self, index: usize, value: Value, out: &mut Vec<ModelEvent>) {
        if self.slot_mut(index).is_none() {
            return;
        }
        let text = value.to_string();
        self.argument_bytes = self.argument_bytes.saturating_add(text.len());
        delta(
            out,
            ModelDelta::ToolCallArguments {
                index,
                delta: text,
                partial: Some(value.clone()),
            },
        );
        self.set_call_value(index, value);
    }

    /// Like [`call_value`](Self::call_value) without streaming anything (a restatement of
    /// arguments already streamed).
    pub fn set_call_value(&mut self, index: usize, value: Value) {
        if let Some(slot) = self.slot_mut(index) {
            slot.value = Some(value);
        }
    }

    /// Call `index`'s complete argument text, restated at the end of the call: what the deltas
    /// missed is streamed; text that does not extend what was streamed replaces it.
    pub fn complete_call_arguments(&mut self, index: usize, full: &str, out: &mut Vec<ModelEvent>) {
        let Some(slot) = self.slot_mut(index) else {
            return;
        };
        if slot.replaced.as_deref().unwrap_or(slot.text.text()) == full {
            return;
        }
        match full.strip_prefix(slot.text.text()) {
            Some(suffix) if slot.replaced.is_none() => {
                let suffix = suffix.to_owned();
                self.call_arguments(index, &suffix, out);
            }
            _ => {
                slot.replaced = Some(full.to_owned());
                self.argument_bytes = self.argument_bytes.saturating_add(full.len());
            }
        }
    }

    /// Call `index` is complete.
    pub fn end_call(&mut self, index: usize, out: &mut Vec<ModelEvent>) {
        delta(out, ModelDelta::ToolCallEnd { index });
    }

    // ----- response metadata -----------------------------------------------------------------

    /// The model the message will name.
    pub fn model(&self) -> &str {
        self.model.as_deref().unwrap_or_default()
    }

    /// Names `model` (as the response reported it) when the request named none.
    pub fn model_if_unset(&mut self, model: &str) {
        if self.model().is_empty() {
            self.model = Some(model.to_owned());
        }
    }

    /// The response's id (`Message::response_id`).
    pub fn set_response_id(&mut self, id: impl Into<String>) {
        self.response_id = Some(id.into());
    }

    /// Sets the response's id unless one is known already (the first event carrying it wins).
    pub fn response_id_if_unset(&mut self, id: Option<&str>) {
        if self.response_id.is_none() {
            self.response_id = id.map(str::to_owned);
        }
    }

    /// Replaces the token usage (for providers whose counts are cumulative).
    pub fn set_usage(&mut self, usage: Usage) {
        self.usage = Some(usage);
    }

    /// The token usage, created empty on first use (for providers that report it field by
    /// field).
    pub fn usage_mut(&mut self) -> &mut Usage {
        self.usage.get_or_insert_with(Usage::default)
    }

    // ----- the message -----------------------------------------------------------------------

    /// The parts with every tool call's arguments parsed.
    fn resolved_parts(&self) -> Vec<Part> {
        let mut parts = self.parts.clone();
        for slot in &self.calls {
            if let Some(Part::ToolCall(call)) = parts.get_mut(slot.part) {
                call.arguments = slot.arguments();
            }
        }
        parts
    }

    /// What a provider's response assembled so far, as a failed message (stop reason
    /// `error`): empty text and thinking parts are dropped unless they carry something to send
    /// back (provider data, a signature, redacted thinking), and refusal text becomes the text
    /// of a message that has none.
    pub fn partial(&self) -> Message {
        let mut parts = self.resolved_parts();
        parts.retain(|p| match p {
            Part::Text {
                text,
                provider_data,
            } => !text.is_empty() || provider_data.is_some(),
            Part::Thinking(t) => t.redacted || !t.thinking.is_empty() || t.signature.is_some(),
            _ => true,
        });
        if !self.refusal.is_empty() && !parts.iter().any(|p| matches!(p, Part::Text { .. })) {
            parts.push(Part::text(self.refusal.clone()));
        }
        let mut message = Message::assistant(parts, StopReason::Error);
        message.model.clone_from(&self.model);
        message.provider.clone_from(&self.provider);
        message.usage = self.usage;
        message.response_id.clone_from(&self.response_id);
        message
    }

    /// The complete message: [`partial`](Self::partial) with `stop_reason` and no error.
    pub fn finish(&self, stop_reason: StopReason) -> Message {
        let mut message = self.partial();
        message.stop_reason = Some(stop_reason);
        message.error_message = None;
        message
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deltas_assemble_in_order() {
        let mut a = MessageAssembler::new();
        for d in [
            ModelDelta::Thinking { delta: "hm".into() },
            ModelDelta::Thinking { delta: "m".into() },
            ModelDelta::Text {
                delta: "Hel".into(),
            },
            ModelDelta::Text { delta: "lo".into() },
            ModelDelta::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "echo".into(),
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "{\"text\":".into(),
                partial: None,
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "\"hi\"}".into(),
                partial: None,
            },
            ModelDelta::ToolCallEnd { index: 0 },
        ] {
            a.push(&d);
        }
        let m = a.to_message(StopReason::ToolUse);
        assert_eq!(m.text(), "Hello");
        assert!(matches!(&m.content[0], Part::Thinking(t) if t.thinking == "hmm"));
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Json(json!({"text": "hi"}))
        );
    }

    #[test]
    fn truncated_arguments_stay_unparsed() {
        let mut a = MessageAssembler::new();
        a.push(&ModelDelta::ToolCallStart {
            index: 0,
            id: "c".into(),
            name: "t".into(),
        });
        a.push(&ModelDelta::ToolCallArguments {
            index: 0,
            delta: "{\"x\": 4".into(),
            partial: None,
        });
        let m = a.to_message(StopReason::Aborted);
        let call = m.tool_calls().next().cloned();
        assert_eq!(
            call.map(|c| c.arguments),
            Some(ToolArguments::Unparsed("{\"x\": 4".into()))
        );
    }

    #[test]
    fn provider_pieces_stream_the_deltas_they_record() {
        let mut a = MessageAssembler::for_provider("p", "m");
        let mut out = Vec::new();
        let text = a.open_text("", None, &mut out);
        a.append_text(text, "Hi", &mut out);
        a.complete_text(text, "Hi there", &mut out);
        let call = a.start_call("c1", "run", None, &mut out);
        a.call_arguments(call, "{\"cmd\":", &mut out);
        a.complete_call_arguments(call, "{\"cmd\": \"ls\"}", &mut out);
        a.end_call(call, &mut out);
        let deltas: Vec<ModelDelta> = out
            .into_iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(d) => Some(d),
                _ => None,
            })
            .collect();
        let mut replay = MessageAssembler::new();
        for d in &deltas {
            replay.push(d);
        }
        let streamed = replay.to_message(StopReason::ToolUse);
        let built = a.finish(StopReason::ToolUse);
        assert_eq!(
            streamed.content, built.content,
            "what streamed is what was built"
        );
        assert_eq!(built.text(), "Hi there");
        assert_eq!(built.model.as_deref(), Some("m"));
    }

    #[test]
    fn whole_arguments_win_unless_text_streams_after_them() {
        let mut a = MessageAssembler::for_provider("p", "m");
        let mut out = Vec::new();
        let first = a.start_call("a", "t", None, &mut out);
        a.call_arguments(first, "{\"x\"", &mut out);
        a.call_value(first, json!({"x": 1}), &mut out);
        let second = a.start_call("b", "t", None, &mut out);
        a.call_value(second, json!({"y": 1}), &mut out);
        a.call_arguments(second, "{\"y\": 2}", &mut out);
        let args: Vec<_> = a
            .finish(StopReason::ToolUse)
            .tool_calls()
            .map(|c| c.arguments.clone())
            .collect();
        assert_eq!(
            args,
            vec![
                ToolArguments::Json(json!({"x": 1})),
                ToolArguments::Json(json!({"y": 2}))
            ]
        );
    }

    #[test]
    fn empty_parts_are_dropped_and_a_refusal_becomes_the_text() {
        let mut a = MessageAssembler::for_provider("p", "m");
        let mut out = Vec::new();
        a.open_text("", None, &mut out);
        a.open_thinking(ThinkingPart::default(), &mut out);
        a.refusal("I can't help with that.");
        let m = a.finish(StopReason::Refusal);
        assert_eq!(m.content, vec![Part::text("I can't help with that.")]);
        assert!(out.is_empty());
    }
}
