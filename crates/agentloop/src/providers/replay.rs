//! Preparing a transcript for replay to a provider — including one recorded on another provider
//! (cross-provider handoff).
//!
//! Rules (what users of pi-ai rely on):
//! - assistant messages that errored or were aborted are not replayed, nor the results answering
//!   their calls;
//! - thinking from another provider or model becomes plain text (empty or redacted thinking is
//!   dropped); signatures are kept only for the same provider and model;
//! - provider data on text and tool-call parts ([`ProviderData`](crate::transcript::ProviderData):
//!   Gemini thought signatures, OpenAI Responses item ids) is kept only for the same provider and
//!   model, like signatures: another provider could not read it, and another model of the same
//!   provider rejects or misreads it (a Responses item id without its reasoning item, a Gemini
//!   signature made by another model);
//! - a tool call without a result gets a synthetic error result ("No result provided") right
//!   after the results that do exist, so the provider never sees a dangling call;
//! - tool-call ids are normalised to `[A-Za-z0-9_-]{1,N}` (N = 64, what every supported API
//!   accepts, or the target's lower limit: 40 for OpenAI Chat Completions) and the same mapping is
//!   applied to the matching results;
//! - a call whose arguments are not a JSON object (unparsed text cut off mid-call, a string, an
//!   array, `null`) is replayed with `{}`: every API (and llama.cpp, which parses them) rejects
//!   anything else, which would fail every later request of the session. The transcript keeps the
//!   raw text; the call's error result already told the model what was wrong;
//! - a tool name that is not `[A-Za-z0-9_-]{1,64}` (garbled output such as `functions.read file`)
//!   is replayed with the offending characters replaced by `_` (`unknown_tool` when empty).
//!
//! The common case — a transcript recorded on the same provider, with nothing to fix — is
//! returned borrowed, without copying.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::tooling::{is_name_char, name_safe};
use crate::transcript::{
    Message, Part, Role, StopReason, ToolArguments, ToolCallPart, ToolResultPart,
};

/// Who the transcript is being replayed to.
#[derive(Clone, Debug)]
pub struct ReplayTarget {
    /// Provider name (as recorded in `Message::provider`).
    pub provider: String,
    /// Model id.
    pub model: String,
    /// Longest tool-call id the provider accepts (ids are cut to it, keeping them unique).
    pub max_id_len: usize,
}

/// The longest tool-call id every supported API accepts.
pub const MAX_ID_LEN: usize = 64;

impl ReplayTarget {
    /// A target for `provider` and `model`, with ids up to [`MAX_ID_LEN`].
    pub fn openai(provider: &str, model: &str) -> Self {
        ReplayTarget {
            provider: provider.to_owned(),
            model: model.to_owned(),
            max_id_len: MAX_ID_LEN,
        }
    }

    /// The same target with a lower id limit (OpenAI Chat Completions accepts 40 characters).
    pub fn max_id_len(mut self, len: usize) -> Self {
        self.max_id_len = len.clamp(1, MAX_ID_LEN);
        self
    }

    fn same_source(&self, m: &Message) -> bool {
        m.provider.as_deref() == Some(self.provider.as_str())
            && m.model.as_deref() == Some(self.model.as_str())
    }
}

/// Text used for a call that never got a result.
pub const NO_RESULT: &str = "No result provided";

fn valid_id(id: &str, max_len: usize) -> bool {
    !id.is_empty() && id.len() <= max_len && id.chars().all(is_name_char)
}

/// Whether a call's arguments can go back on the wire as they are: only a JSON object can.
fn replayable_arguments(arguments: &ToolArguments) -> bool {
    matches!(arguments, ToolArguments::Json(Value::Object(_)))
}

/// A tool name every API accepts: `[A-Za-z0-9_-]{1,64}`.
fn sanitize_name(name: &str) -> String {
    let clean = name_safe(name, MAX_ID_LEN);
    if clean.is_empty() {
        "unknown_tool".to_owned()
    } else {
        clean
    }
}

/// The JSON text to send for a call's arguments: the object's compact form, or `{}` for
/// anything that is not an object (see the module docs). For adapters whose wire wants text.
pub fn wire_arguments(arguments: &ToolArguments) -> String {
    match arguments {
        ToolArguments::Json(value @ Value::Object(_)) => value.to_string(),
        _ => "{}".to_owned(),
    }
}

/// The arguments as a JSON object value, `{}` for anything that is not an object.
pub fn object_arguments(arguments: &ToolArguments) -> Value {
    match arguments {
        ToolArguments::Json(value @ Value::Object(_)) => value.clone(),
        _ => Value::Object(serde_json::Map::new()),
    }
}

fn sanitize_id(id: &str, taken: &HashSet<String>, max_len: usize) -> String {
    let mut clean = name_safe(id, max_len);
    if clean.is_empty() {
        clean = "call".into();
    }
    let mut candidate = clean.clone();
    let mut n = 1;
    while taken.contains(&candidate) {
        let suffix = format!("_{n}");
        let keep = max_len.saturating_sub(suffix.len()).min(clean.len());
        candidate = format!("{}{suffix}", &clean[..keep]);
        n += 1;
    }
    candidate
}

fn needs_work(messages: &[Message], target: &ReplayTarget) -> bool {
    let mut open: HashSet<&str> = HashSet::new();
    for m in messages {
        match m.role {
            Role::Assistant => {
                if !open.is_empty() {
                    return true;
                }
                if matches!(m.stop_reason, Some(StopReason::Error | StopReason::Aborted)) {
                    return true;
                }
                let foreign = !target.same_source(m);
                for p in &m.content {
                    match p {
                        Part::Thinking(_) if foreign => return true,
                        Part::Text {
                            provider_data: Some(_),
                            ..
                        } if foreign => return true,
                        Part::ToolCall(c) => {
                            if foreign && c.provider_data.is_some() {
                                return true;
                            }
                            if !valid_id(&c.id, target.max_id_len)
                                || !replayable_arguments(&c.arguments)
                                || !valid_id(&c.tool_name, MAX_ID_LEN)
                            {
                                return true;
                            }
                            open.insert(c.id.as_str());
                        }
                        _ => {}
                    }
                }
            }
            Role::ToolResult => {
                if let Some(r) = m.tool_result_part() {
                    if !open.remove(r.call_id.as_str()) {
                        return true; // orphan result
                    }
                }
            }
            _ => {
                if !open.is_empty() {
                    return true;
                }
            }
        }
    }
    !open.is_empty()
}

/// The model `request` goes to (its own, else the `configured` one; empty when neither names
/// one) and its messages prepared for replay to that model of `provider`.
#[cfg_attr(
    not(any(
        feature = "anthropic",
        feature = "gemini",
        feature = "openai-responses"
    )),
    allow(dead_code)
)]
pub(crate) fn model_and_messages<'a>(
    configured: Option<&String>,
    request: &'a crate::model::ModelRequest<'_>,
    provider: &str,
) -> (String, Cow<'a, [Message]>) {
    let model = request
        .model
        .clone()
        .or_else(|| configured.cloned())
        .unwrap_or_default();
    let messages = prepare(&request.messages, &ReplayTarget::openai(provider, &model));
    (model, messages)
}

/// Applies the replay rules (see the module docs) for `target`.
pub fn prepare<'a>(messages: &'a [Message], target: &ReplayTarget) -> Cow<'a, [Message]> {
    if !needs_work(messages, target) {
        return Cow::Borrowed(messages);
    }
    let mut rewrite = Rewrite::new(target, messages.len());
    for m in messages {
        match m.role {
            Role::Assistant => rewrite.assistant(m),
            Role::ToolResult => rewrite.tool_result(m),
            _ => {
                rewrite.close_open();
                rewrite.out.push(m.clone());
            }
        }
    }
    rewrite.close_open();
    Cow::Owned(rewrite.out)
}

/// A transcript being rewritten for a target: the messages so far and what pairs calls with
/// their results across messages.
struct Rewrite<'t> {
    target: &'t ReplayTarget,
    out: Vec<Message>,
    /// Calls of dropped (failed or aborted) assistant messages: their results go too.
    dropped_calls: HashSet<String>,
    /// Call id in the transcript → id on the wire.
    id_map: HashMap<String, String>,
    /// Wire ids given out so far (they must be unique).
    taken: HashSet<String>,
    /// Calls of the last kept assistant message still waiting for a result: (wire id, name).
    open: Vec<(String, String)>,
}

impl<'t> Rewrite<'t> {
    fn new(target: &'t ReplayTarget, len: usize) -> Self {
        Rewrite {
            target,
            out: Vec::with_capacity(len),
            dropped_calls: HashSet::new(),
            id_map: HashMap::new(),
            taken: HashSet::new(),
            open: Vec::new(),
        }
    }

    /// Answers the calls still waiting for a result (providers reject a call without one).
    fn close_open(&mut self) {
        for (id, name) in self.open.drain(..) {
            self.out.push(Message::tool_result(ToolResultPart::error(
                id, name, NO_RESULT,
            )));
        }
    }

    /// Keeps an assistant message, rewritten for the target; a failed or aborted one is
    /// dropped with its calls.
    fn assistant(&mut self, m: &Message) {
        self.close_open();
        if matches!(m.stop_reason, Some(StopReason::Error | StopReason::Aborted)) {
            self.dropped_calls
                .extend(m.tool_calls().map(|c| c.id.clone()));
            return;
        }
        let foreign = !self.target.same_source(m);
        let mut copy = m.clone();
        copy.content = m
            .content
            .iter()
            .filter_map(|p| match p {
                Part::ToolCall(c) => Some(Part::ToolCall(self.call(c, foreign))),
                other if foreign => foreign_part(other),
                other => Some(other.clone()),
            })
            .collect();
        self.out.push(copy);
    }

    /// A call as the target accepts it: a valid, unique id (remembered for its result),
    /// object arguments, a valid name, and no other provider's data.
    fn call(&mut self, c: &ToolCallPart, foreign: bool) -> ToolCallPart {
        let mut c = c.clone();
        if foreign {
            c.provider_data = None;
        }
        let new_id = if valid_id(&c.id, self.target.max_id_len) && !self.taken.contains(&c.id) {
            c.id.clone()
        } else {
            sanitize_id(&c.id, &self.taken, self.target.max_id_len)
        };
        if !replayable_arguments(&c.arguments) {
            c.arguments = ToolArguments::Json(Value::Object(Default::default()));
        }
        if !valid_id(&c.tool_name, MAX_ID_LEN) {
            c.tool_name = sanitize_name(&c.tool_name);
        }
        self.taken.insert(new_id.clone());
        self.id_map.insert(c.id.clone(), new_id.clone());
        self.open.push((new_id.clone(), c.tool_name.clone()));
        c.id = new_id;
        c
    }

    /// Keeps a tool result that answers an open call, under the call's wire id; orphan and
    /// duplicate results, and those of dropped calls, go.
    fn tool_result(&mut self, m: &Message) {
        let Some(r) = m.tool_result_part() else {
            return;
        };
        if self.dropped_calls.contains(&r.call_id) {
            return;
        }
        let Some(new_id) = self.id_map.get(&r.call_id).cloned() else {
            return; // a result for a call we never saw: providers reject it
        };
        let Some(at) = self.open.iter().position(|(id, _)| *id == new_id) else {
            return; // duplicate result
        };
        self.open.remove(at);
        let mut copy = m.clone();
        for p in copy.content.iter_mut() {
            if let Part::ToolResult(r) = p {
                r.call_id = new_id.clone();
            }
        }
        self.out.push(copy);
    }
}

/// A non-call part of another source's message: its reasoning becomes plain text (or goes,
/// when redacted or empty) and its text loses the other provider's data.
fn foreign_part(part: &Part) -> Option<Part> {
    match part {
        Part::Thinking(t) => {
            if t.redacted || t.thinking.trim().is_empty() {
                None
            } else {
                Some(Part::text(t.thinking.clone()))
            }
        }
        Part::Text {
            text,
            provider_data: Some(_),
        } => Some(Part::text(text.clone())),
        other => Some(other.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::fixtures::{recorded, redacted_thinking, text_with_data, thinking};
    use crate::transcript::{ProviderData, ThinkingPart, ToolCallPart};
    use serde_json::json;

    /// An assistant turn of `provider`'s model `m1`.
    fn assistant(parts: Vec<Part>, provider: &str, stop: StopReason) -> Message {
        recorded(provider, "m1", parts, stop)
    }

    #[test]
    fn foreign_parts_keep_their_text_and_lose_provider_data() {
        assert_eq!(
            foreign_part(&thinking("plan", None)),
            Some(Part::text("plan"))
        );
        assert_eq!(foreign_part(&thinking("  ", None)), None);
        // Redacted thinking never becomes text, even with text of its own.
        let redacted = Part::Thinking(ThinkingPart {
            thinking: "secret".into(),
            redacted: true,
            ..ThinkingPart::default()
        });
        assert_eq!(foreign_part(&redacted), None);
        assert_eq!(foreign_part(&redacted_thinking(Some("payload"))), None);
        let with_data = text_with_data("hi", ProviderData::new("p", json!({"id": "x"})));
        assert_eq!(foreign_part(&with_data), Some(Part::text("hi")));
        assert_eq!(
            foreign_part(&Part::text("plain")),
            Some(Part::text("plain"))
        );
    }

    #[test]
    fn clean_same_provider_transcripts_are_borrowed() {
        let msgs = vec![
            Message::user("q"),
            assistant(
                vec![
                    thinking("", None),
                    Part::ToolCall(ToolCallPart::new("c1", "t", json!({}))),
                ],
                "p",
                StopReason::ToolUse,
            ),
            Message::tool_result(ToolResultPart::success("c1", "t", "ok")),
        ];
        let target = ReplayTarget::openai("p", "m1");
        assert!(matches!(prepare(&msgs, &target), Cow::Borrowed(_)));
    }

    #[test]
    fn handoff_rules() {
        let msgs = vec![
            Message::user("q"),
            assistant(
                vec![
                    thinking("plan", Some("sig")),
                    redacted_thinking(None),
                    Part::ToolCall(ToolCallPart::new("call|1/x", "t", json!({}))),
                    Part::ToolCall(ToolCallPart::new("c2", "t", json!({}))),
                ],
                "other",
                StopReason::ToolUse,
            ),
            Message::tool_result(ToolResultPart::success("call|1/x", "t", "ok")),
            assistant(
                vec![Part::ToolCall(ToolCallPart::new("c3", "t", json!({})))],
                "other",
                StopReason::Aborted,
            ),
            Message::tool_result(ToolResultPart::error("c3", "t", "aborted")),
            Message::user("next"),
        ];
        let out = prepare(&msgs, &ReplayTarget::openai("p", "m1"));
        let roles: Vec<_> = out.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::ToolResult,
                Role::ToolResult,
                Role::User
            ]
        );
        assert!(matches!(&out[1].content[0], Part::Text { text, .. } if text == "plan"));
        assert_eq!(out[1].content.len(), 3, "redacted thinking dropped");
        let calls: Vec<_> = out[1].tool_calls().collect();
        assert_eq!(calls[0].id, "call_1_x");
        assert_eq!(
            out[2].tool_result_part().map(|r| r.call_id.as_str()),
            Some("call_1_x")
        );
        let synthetic = out[3].tool_result_part().cloned();
        assert_eq!(synthetic.as_ref().map(|r| r.call_id.as_str()), Some("c2"));
        assert_eq!(
            synthetic.as_ref().map(|r| r.content.as_str()),
            Some(NO_RESULT)
        );
        assert!(synthetic.is_some_and(|r| r.is_error));
    }

    #[test]
    fn provider_data_is_kept_only_for_the_same_provider_and_model() {
        let data = ProviderData::new("p", json!({"thoughtSignature": "sig"}));
        let mut call = ToolCallPart::new("c1", "t", json!({}));
        call.provider_data = Some(data.clone());
        let msgs = vec![
            Message::user("q"),
            assistant(
                vec![text_with_data("a", data.clone()), Part::ToolCall(call)],
                "p",
                StopReason::ToolUse,
            ),
            Message::tool_result(ToolResultPart::success("c1", "t", "ok")),
        ];
        let same = prepare(&msgs, &ReplayTarget::openai("p", "m1"));
        assert!(matches!(same, Cow::Borrowed(_)), "nothing to do");
        for target in [
            ReplayTarget::openai("other", "m1"),
            ReplayTarget::openai("p", "m2"),
        ] {
            let out = prepare(&msgs, &target);
            assert_eq!(out[1].content[0], Part::text("a"), "{target:?}");
            assert_eq!(
                out[1]
                    .tool_calls()
                    .next()
                    .and_then(|c| c.provider_data.clone()),
                None,
                "{target:?}"
            );
        }
        // The transcript keeps its data.
        assert!(matches!(
            &msgs[1].content[0],
            Part::Text {
                provider_data: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn non_object_arguments_bad_names_and_long_ids_are_fixed_for_the_wire() {
        let long_id = "x".repeat(50);
        let mut bad = ToolCallPart::new(long_id.clone(), "functions.read file", json!({}));
        bad.arguments = ToolArguments::Unparsed("{\"path\": \"a".into());
        let mut array = ToolCallPart::new("c2", "t", json!({}));
        array.arguments = ToolArguments::Json(json!([1]));
        let msgs = vec![
            Message::user("q"),
            assistant(
                vec![Part::ToolCall(bad), Part::ToolCall(array)],
                "p",
                StopReason::ToolUse,
            ),
            Message::tool_result(ToolResultPart::error(long_id.clone(), "t", "malformed")),
            Message::tool_result(ToolResultPart::error("c2", "t", "malformed")),
        ];
        let target = ReplayTarget::openai("p", "m1").max_id_len(40);
        let out = prepare(&msgs, &target);
        let calls: Vec<_> = out[1].tool_calls().collect();
        assert_eq!(calls[0].arguments, ToolArguments::Json(json!({})));
        assert_eq!(calls[1].arguments, ToolArguments::Json(json!({})));
        assert_eq!(calls[0].tool_name, "functions_read_file");
        assert_eq!(calls[0].id.len(), 40);
        assert_eq!(
            out[2].tool_result_part().map(|r| r.call_id.clone()),
            Some(calls[0].id.clone())
        );
        // The transcript itself is untouched.
        assert!(matches!(
            msgs[1].tool_calls().next().map(|c| &c.arguments),
            Some(ToolArguments::Unparsed(_))
        ));
        // The same transcript to a target accepting 64 characters keeps the id.
        let out = prepare(&msgs, &ReplayTarget::openai("p", "m1"));
        assert_eq!(
            out[1].tool_calls().next().map(|c| c.id.clone()),
            Some(long_id)
        );
        assert_eq!(wire_arguments(&ToolArguments::Json(json!("s"))), "{}");
        assert_eq!(
            wire_arguments(&ToolArguments::Json(json!({"a": 1}))),
            "{\"a\":1}"
        );
    }
}
