//! The Responses SSE parser: output items into deltas and the assistant message, with encrypted
//! reasoning, item ids and client tool-search calls kept (see the module docs of [`super`]).

use std::borrow::Cow;
use std::collections::HashMap;

use serde_json::{Value, json};

use super::tool_search::is_client_search;
use super::{PROVIDER, item_data};
use crate::model::{MessageAssembler, ModelError, ModelEvent, PartId};
use crate::providers::core::{StreamParser, stream_error, unreadable, usage_with_cached_input};
use crate::providers::sse::SseEvent;
use crate::transcript::{Part, StopReason, ThinkingPart};

/// What an output item assembles into.
#[derive(Clone, Debug)]
enum Body {
    Reasoning {
        part: PartId,
        summary_index: Option<u64>,
        encrypted: Option<String>,
    },
    Message {
        part: PartId,
        /// This item's refusal text (all items' together are the message's refusal).
        refusal: String,
    },
    Call {
        /// Position among this message's tool calls.
        index: usize,
        /// A client tool search whose arguments arrived (a JSON value on the wire).
        searched: bool,
    },
    Ignored,
}

/// The kind of item a delta implies when the server skipped `output_item.added`.
#[derive(Clone, Copy)]
enum Implied {
    Message,
    Reasoning,
}

#[derive(Clone, Debug)]
struct Item {
    output_index: Option<u64>,
    id: String,
    done: bool,
    body: Body,
}

#[derive(Clone, Debug, PartialEq)]
enum Terminal {
    Completed,
    Incomplete(Option<String>),
    Failed(ModelError),
}

/// Assembles Responses stream events into deltas and the final message. The [`StreamParser`] of
/// the protocol; public so that a protocol built on this one can reuse it.
#[derive(Clone, Debug)]
pub struct ResponsesParser {
    message: MessageAssembler,
    /// The tool a client `tool_search_call` is a call of.
    search_name: String,
    items: Vec<Item>,
    /// The first item with each `output_index`, and with each non-empty item id: finding the
    /// item an event refers to is O(1), so a reply of many items is parsed in linear time.
    by_output: HashMap<u64, usize>,
    by_id: HashMap<String, usize>,
    terminal: Option<Terminal>,
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// `code` (or `type`) and `message` of an error object (`error` event or `response.error`).
fn provider_error(err: &Value, default_code: &str) -> ModelError {
    stream_error(err, &["code", "type"], default_code)
}

/// The full summary of a done reasoning item, its parts separated by blank lines; `None` when
/// it has no text parts.
fn summary_text(item: &Value) -> Option<String> {
    let full: Vec<&str> = item["summary"]
        .as_array()
        .map(|parts| parts.iter().filter_map(|p| str_of(p, "text")).collect())
        .unwrap_or_default();
    (!full.is_empty()).then(|| full.join("\n\n"))
}

/// The `key` texts of a message's content parts of type `kind`, concatenated.
fn content_of_type(parts: &[Value], kind: &str, key: &str) -> String {
    parts
        .iter()
        .filter(|p| str_of(p, "type") == Some(kind))
        .filter_map(|p| str_of(p, key))
        .collect()
}

/// A client tool search's arguments as a JSON value (sent as a value or as JSON text; text
/// that is not JSON stays a string).
fn search_arguments(item: &Value) -> Value {
    match item.get("arguments").cloned().unwrap_or(json!({})) {
        Value::String(text) => serde_json::from_str(&text).unwrap_or(Value::String(text)),
        other => other,
    }
}

/// A done function call's full arguments as text (some gateways send a JSON value).
fn call_arguments_text(item: &Value) -> Option<Cow<'_, str>> {
    match item.get("arguments") {
        Some(Value::String(full)) => Some(Cow::Borrowed(full)),
        Some(v @ (Value::Object(_) | Value::Array(_))) => Some(Cow::Owned(v.to_string())),
        _ => None,
    }
}

/// Why an incomplete response stopped (`content_filter`, `max_output_tokens`...).
fn incomplete_reason(response: &Value) -> Option<String> {
    response
        .pointer("/incomplete_details/reason")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The error of a failed response: its error object, or a generic failure.
fn failure_of(response: &Value) -> ModelError {
    match response.get("error").filter(|e| e.is_object()) {
        Some(err) => provider_error(err, "failed"),
        None => ModelError::Provider {
            code: "failed".to_owned(),
            message: "the response failed".to_owned(),
        },
    }
}

impl ResponsesParser {
    /// A parser for a response to a request for `model`; a client `tool_search_call` becomes a
    /// call of the tool `search_name`.
    pub fn new(model: String, search_name: String) -> Self {
        ResponsesParser {
            message: MessageAssembler::for_provider(PROVIDER, model),
            search_name,
            items: Vec::new(),
            by_output: HashMap::new(),
            by_id: HashMap::new(),
            terminal: None,
        }
    }

    fn apply_usage(&mut self, u: &Value) {
        if !u.is_object() {
            return;
        }
        let cached = u
            .pointer("/input_tokens_details/cached_tokens")
            .and_then(Value::as_u64);
        self.message.set_usage(usage_with_cached_input(
            u["input_tokens"].as_u64().unwrap_or(0),
            cached.unwrap_or(0),
            u["output_tokens"].as_u64().unwrap_or(0),
        ));
    }

    /// The item an event refers to, by `output_index`, else by `item_id`.
    fn find(&self, event: &Value) -> Option<usize> {
        if let Some(oi) = event.get("output_index").and_then(Value::as_u64) {
            if let Some(&at) = self.by_output.get(&oi) {
                return Some(at);
            }
        }
        let id = str_of(event, "item_id").filter(|id| !id.is_empty())?;
        self.by_id.get(id).copied()
    }

    /// Adds an item and indexes it; returns its position.
    fn push_item(&mut self, item: Item) -> usize {
        let at = self.items.len();
        if let Some(oi) = item.output_index {
            self.by_output.entry(oi).or_insert(at);
        }
        self.index_id(at, &item.id);
        self.items.push(item);
        at
    }

    /// Indexes item `at` under `id` (unless empty, or an earlier item has it).
    fn index_id(&mut self, at: usize, id: &str) {
        if !id.is_empty() && !self.by_id.contains_key(id) {
            self.by_id.insert(id.to_owned(), at);
        }
    }

    fn open_reasoning(&mut self, encrypted: Option<String>, out: &mut Vec<ModelEvent>) -> Body {
        let part = self.message.open_thinking(ThinkingPart::default(), out);
        Body::Reasoning {
            part,
            summary_index: None,
            encrypted,
        }
    }

    fn open_message(&mut self, out: &mut Vec<ModelEvent>) -> Body {
        Body::Message {
            part: self.message.open_text("", None, out),
            refusal: String::new(),
        }
    }

    /// The item an event refers to, opening one of the implied kind when the server skipped
    /// `output_item.added`.
    fn find_or_open(&mut self, event: &Value, kind: Implied, out: &mut Vec<ModelEvent>) -> usize {
        if let Some(at) = self.find(event) {
            return at;
        }
        let body = match kind {
            Implied::Message => self.open_message(out),
            Implied::Reasoning => self.open_reasoning(None, out),
        };
        let at = self.push_item(Item {
            output_index: event.get("output_index").and_then(Value::as_u64),
            id: str_of(event, "item_id").unwrap_or_default().to_owned(),
            done: false,
            body,
        });
        self.sync(at);
        at
    }

    fn open_call(&mut self, call_id: &str, name: &str, out: &mut Vec<ModelEvent>) -> Body {
        // A missing or repeated id would break the call/result pairing: made unique.
        let id = self.message.unique_call_id(call_id, name);
        Body::Call {
            index: self.message.start_call(&id, name, None, out),
            searched: false,
        }
    }

    /// Brings item `at`'s part up to date with what only the item knows: its id (provider
    /// data, the reasoning signature) and the encrypted reasoning.
    fn sync(&mut self, at: usize) {
        let Some(item) = self.items.get(at) else {
            return;
        };
        match &item.body {
            Body::Reasoning {
                part, encrypted, ..
            } => {
                let signature = encrypted
                    .as_ref()
                    .map(|e| json!({"id": item.id, "encrypted_content": e}).to_string());
                if let Some(Part::Thinking(t)) = self.message.part_mut(*part) {
                    t.redacted = t.thinking.is_empty() && signature.is_some();
                    t.signature = signature;
                }
            }
            Body::Message { part, .. } => {
                // The id goes back with the text; a message without text leaves no part.
                let data = item_data(&item.id, "message");
                if let Some(Part::Text {
                    text,
                    provider_data,
                }) = self.message.part_mut(*part)
                {
                    *provider_data = data.filter(|_| !text.is_empty());
                }
            }
            Body::Call { index, searched } => {
                let kind = if *searched {
                    "tool_search_call"
                } else {
                    "function_call"
                };
                let data = item_data(&item.id, kind);
                if let Some(call) = self.message.call_mut(*index) {
                    call.provider_data = data;
                }
            }
            Body::Ignored => {}
        }
    }

    /// The message's refusal: every message item's, in order.
    fn sync_refusal(&mut self) {
        let refusal: String = self
            .items
            .iter()
            .filter_map(|i| match &i.body {
                Body::Message { refusal, .. } => Some(refusal.as_str()),
                _ => None,
            })
            .collect();
        self.message.set_refusal(refusal);
    }

    fn on_item_added(&mut self, event: &Value, out: &mut Vec<ModelEvent>) {
        let item = &event["item"];
        let output_index = event.get("output_index").and_then(Value::as_u64);
        if output_index.is_some() && self.find(event).is_some() {
            return; // repeated
        }
        let body = match str_of(item, "type") {
            Some("reasoning") => {
                self.open_reasoning(str_of(item, "encrypted_content").map(str::to_owned), out)
            }
            Some("message") => self.open_message(out),
            Some("function_call") => {
                let call_id = str_of(item, "call_id").unwrap_or_default();
                let name = str_of(item, "name").unwrap_or_default();
                self.open_call(call_id, name, out)
            }
            Some("tool_search_call") if is_client_search(item) => {
                let call_id = str_of(item, "call_id").unwrap_or_default();
                let name = self.search_name.clone();
                self.open_call(call_id, &name, out)
            }
            _ => Body::Ignored,
        };
        let at = self.push_item(Item {
            output_index,
            id: str_of(item, "id").unwrap_or_default().to_owned(),
            done: false,
            body,
        });
        self.sync(at);
        // Some servers send a call's arguments whole with the item.
        if matches!(str_of(item, "type"), Some("function_call")) {
            if let Some(args) = str_of(item, "arguments") {
                self.push_arguments(at, args, out);
            }
        }
    }

    fn call_index(&self, at: usize) -> Option<usize> {
        match self.items.get(at)?.body {
            Body::Call { index, .. } => Some(index),
            _ => None,
        }
    }

    fn push_arguments(&mut self, at: usize, fragment: &str, out: &mut Vec<ModelEvent>) {
        if let Some(index) = self.call_index(at) {
            self.message.call_arguments(index, fragment, out);
        }
    }

    /// Fixes a call's arguments up to the full text `full`: the missing suffix is streamed as a
    /// delta; text that does not extend what was streamed replaces it.
    fn finish_arguments(&mut self, at: usize, full: &str, out: &mut Vec<ModelEvent>) {
        if let Some(index) = self.call_index(at) {
            self.message.complete_call_arguments(index, full, out);
        }
    }

    /// Completes an item from its `output_item.done` (or its restatement in the terminal
    /// response): the full text, summary, arguments or id the deltas may have missed.
    fn on_item_done(&mut self, item: &Value, output_index: Option<u64>, out: &mut Vec<ModelEvent>) {
        let at = self.find_done_item(item, output_index, out);
        if !self.mark_done(at, item) {
            return;
        }
        match self.items[at].body {
            Body::Reasoning { part, .. } => self.finish_reasoning(at, part, item, out),
            Body::Message { part, .. } => self.finish_message(at, part, item, out),
            Body::Call { index, searched } => self.finish_call(at, index, searched, item, out),
            Body::Ignored => {}
        }
        self.sync(at);
    }

    /// The item a done event refers to; one never announced is opened now (as
    /// `output_item.added` would have), its arguments left to the done event's fix-up.
    fn find_done_item(
        &mut self,
        item: &Value,
        output_index: Option<u64>,
        out: &mut Vec<ModelEvent>,
    ) -> usize {
        let probe = json!({
            "output_index": output_index,
            "item_id": str_of(item, "id").unwrap_or_default(),
        });
        if let Some(at) = self.find(&probe) {
            return at;
        }
        let mut fresh = item.clone();
        if let Some(obj) = fresh.as_object_mut() {
            obj.remove("arguments");
        }
        let added = json!({"output_index": output_index, "item": fresh});
        self.on_item_added(&added, out);
        self.items.len() - 1
    }

    /// Marks item `at` done, taking the done event's id when the item had none. False when it
    /// was done already: a repeated done event changes nothing.
    fn mark_done(&mut self, at: usize, item: &Value) -> bool {
        if self.items[at].done {
            return false;
        }
        self.items[at].done = true;
        if self.items[at].id.is_empty() {
            if let Some(id) = str_of(item, "id") {
                self.items[at].id = id.to_owned();
                self.index_id(at, id);
            }
        }
        true
    }

    /// A done reasoning item: its encrypted content, and the full summary text.
    fn finish_reasoning(
        &mut self,
        at: usize,
        part: PartId,
        item: &Value,
        out: &mut Vec<ModelEvent>,
    ) {
        if let Some(e) = str_of(item, "encrypted_content") {
            if let Body::Reasoning { encrypted, .. } = &mut self.items[at].body {
                *encrypted = Some(e.to_owned());
            }
        }
        if let Some(full) = summary_text(item) {
            self.message.complete_thinking(part, &full, out);
        }
    }

    /// A done message item: its full refusal and text.
    fn finish_message(&mut self, at: usize, part: PartId, item: &Value, out: &mut Vec<ModelEvent>) {
        let parts = item["content"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        let full_refusal = content_of_type(parts, "refusal", "refusal");
        let refused = !full_refusal.is_empty();
        if refused {
            if let Body::Message { refusal, .. } = &mut self.items[at].body {
                *refusal = full_refusal;
            }
        }
        let full_text = content_of_type(parts, "output_text", "text");
        if !full_text.is_empty() {
            self.message.complete_text(part, &full_text, out);
        }
        if refused {
            self.sync_refusal();
        }
    }

    /// A done call item: its name when the deltas gave none, its full arguments, and its end.
    fn finish_call(
        &mut self,
        at: usize,
        index: usize,
        searched: bool,
        item: &Value,
        out: &mut Vec<ModelEvent>,
    ) {
        if let (Some(name), Some(call)) = (str_of(item, "name"), self.message.call_mut(index)) {
            if call.tool_name.is_empty() {
                name.clone_into(&mut call.tool_name);
            }
        }
        if str_of(item, "type") == Some("tool_search_call") {
            let args = search_arguments(item);
            if searched {
                self.message.set_call_value(index, args);
            } else {
                if let Body::Call { searched, .. } = &mut self.items[at].body {
                    *searched = true;
                }
                self.message.call_value(index, args, out);
            }
        } else if let Some(full) = call_arguments_text(item) {
            self.finish_arguments(at, &full, out);
        }
        self.message.end_call(index, out);
    }

    fn on_terminal(&mut self, response: &Value, out: &mut Vec<ModelEvent>) {
        self.apply_usage(&response["usage"]);
        // The terminal response restates every output item: fix up any item whose
        // `output_item.done` never came.
        if let Some(output) = response["output"].as_array() {
            for (i, item) in output.iter().enumerate() {
                self.on_item_done(item, Some(i as u64), out);
            }
        }
    }

    fn on_payload(
        &mut self,
        kind: &str,
        v: &Value,
        out: &mut Vec<ModelEvent>,
    ) -> Result<bool, ModelError> {
        self.message
            .response_id_if_unset(v.pointer("/response/id").and_then(Value::as_str));
        match kind {
            "response.output_item.added" => self.on_item_added(v, out),
            "response.output_item.done" => {
                let oi = v.get("output_index").and_then(Value::as_u64);
                self.on_item_done(&v["item"], oi, out);
            }
            "response.output_text.delta" => self.on_text_delta(v, out),
            "response.refusal.delta" => self.on_refusal_delta(v, out),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                self.on_reasoning_delta(v, out)
            }
            "response.function_call_arguments.delta" => {
                let delta = str_of(v, "delta").unwrap_or_default();
                if let Some(at) = self.find(v) {
                    self.push_arguments(at, delta, out);
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(at), Some(full)) = (self.find(v), str_of(v, "arguments")) {
                    self.finish_arguments(at, full, out);
                }
            }
            "response.completed" => {
                self.on_terminal(&v["response"], out);
                return self.end(Terminal::Completed);
            }
            "response.incomplete" => {
                let response = &v["response"];
                self.on_terminal(response, out);
                return self.end(Terminal::Incomplete(incomplete_reason(response)));
            }
            "response.failed" => {
                let response = &v["response"];
                self.apply_usage(&response["usage"]);
                return self.end(Terminal::Failed(failure_of(response)));
            }
            "error" => {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
                return Err(provider_error(err, "error"));
            }
            _ => {}
        }
        Ok(false)
    }

    /// Records how the response ended; the stream is over.
    fn end(&mut self, terminal: Terminal) -> Result<bool, ModelError> {
        self.terminal = Some(terminal);
        Ok(true)
    }

    /// A text delta, on its message item (opened when the server skipped announcing it).
    fn on_text_delta(&mut self, v: &Value, out: &mut Vec<ModelEvent>) {
        let delta = str_of(v, "delta").unwrap_or_default();
        if delta.is_empty() {
            return;
        }
        let at = self.find_or_open(v, Implied::Message, out);
        if let Body::Message { part, .. } = self.items[at].body {
            let first = !self.message.has_text_in(part);
            self.message.append_text(part, delta, out);
            if first {
                self.sync(at); // the item id goes on the text, now that it has some
            }
        }
    }

    /// A refusal delta: the item's refusal grows, and with it the message's.
    fn on_refusal_delta(&mut self, v: &Value, out: &mut Vec<ModelEvent>) {
        let delta = str_of(v, "delta").unwrap_or_default();
        let at = self.find_or_open(v, Implied::Message, out);
        if let Body::Message { refusal, .. } = &mut self.items[at].body {
            refusal.push_str(delta);
            self.sync_refusal();
        }
    }

    /// A reasoning (summary) delta; a new summary part is separated from the previous one by
    /// a blank line.
    fn on_reasoning_delta(&mut self, v: &Value, out: &mut Vec<ModelEvent>) {
        let delta = str_of(v, "delta").unwrap_or_default();
        if delta.is_empty() {
            return;
        }
        let index = v
            .get("summary_index")
            .or_else(|| v.get("content_index"))
            .and_then(Value::as_u64);
        let at = self.find_or_open(v, Implied::Reasoning, out);
        if let Body::Reasoning {
            part,
            summary_index,
            ..
        } = &mut self.items[at].body
        {
            let part = *part;
            let started = matches!(
                self.message.part(part),
                Some(Part::Thinking(t)) if !t.thinking.is_empty()
            );
            let mut piece = String::new();
            if started && index != *summary_index {
                piece.push_str("\n\n"); // a new summary part
            }
            *summary_index = index;
            piece.push_str(delta);
            self.message.append_thinking(part, &piece, out);
        }
    }
}

impl StreamParser for ResponsesParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let payload: Value =
            crate::json::lossy_json::parse_value(data).map_err(|e| unreadable(data, &e))?;
        let kind = str_of(&payload, "type")
            .map(str::to_owned)
            .unwrap_or_else(|| event.event.clone());
        self.on_payload(&kind, &payload, out)
    }

    fn message(&self) -> &MessageAssembler {
        &self.message
    }

    fn stop_reason(&self) -> Result<StopReason, ModelError> {
        Ok(match &self.terminal {
            Some(Terminal::Failed(error)) => return Err(error.clone()),
            Some(Terminal::Incomplete(reason)) => match reason.as_deref() {
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::Length,
            },
            Some(Terminal::Completed) | None => {
                if self.message.call_count() > 0 {
                    StopReason::ToolUse
                } else if self.message.has_refusal() && !self.message.has_text() {
                    StopReason::Refusal
                } else {
                    StopReason::Stop
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_joins_its_text_parts_with_blank_lines() {
        let item = json!({"summary": [{"text": "one"}, {"type": "x"}, {"text": "two"}]});
        assert_eq!(summary_text(&item).as_deref(), Some("one\n\ntwo"));
        // Text parts that are empty still count: the summary is known, and empty.
        assert_eq!(
            summary_text(&json!({"summary": [{"text": ""}]})).as_deref(),
            Some("")
        );
        assert_eq!(summary_text(&json!({"summary": []})), None);
        assert_eq!(summary_text(&json!({})), None);
    }

    #[test]
    fn content_of_one_type_is_concatenated_in_order() {
        let parts = [
            json!({"type": "output_text", "text": "Hel"}),
            json!({"type": "refusal", "refusal": "No."}),
            json!({"type": "output_text", "text": "lo"}),
            json!({"type": "output_text"}),
        ];
        assert_eq!(content_of_type(&parts, "output_text", "text"), "Hello");
        assert_eq!(content_of_type(&parts, "refusal", "refusal"), "No.");
        assert_eq!(content_of_type(&[], "refusal", "refusal"), "");
    }

    #[test]
    fn search_arguments_are_a_json_value_however_they_were_sent() {
        let value = json!({"arguments": {"query": "weather"}});
        assert_eq!(search_arguments(&value), json!({"query": "weather"}));
        let text = json!({"arguments": "{\"query\":\"weather\"}"});
        assert_eq!(search_arguments(&text), json!({"query": "weather"}));
        let not_json = json!({"arguments": "weather"});
        assert_eq!(search_arguments(&not_json), json!("weather"));
        assert_eq!(search_arguments(&json!({})), json!({}));
    }

    #[test]
    fn call_arguments_are_text_however_they_were_sent() {
        let text = json!({"arguments": "{\"a\":1}"});
        assert_eq!(call_arguments_text(&text).as_deref(), Some("{\"a\":1}"));
        let value = json!({"arguments": {"a": 1}});
        assert_eq!(call_arguments_text(&value).as_deref(), Some("{\"a\":1}"));
        assert_eq!(call_arguments_text(&json!({"arguments": 3})), None);
        assert_eq!(call_arguments_text(&json!({})), None);
    }

    #[test]
    fn a_failed_response_gives_its_error_or_a_generic_one() {
        let given = json!({"error": {"code": "server_error", "message": "boom"}});
        match failure_of(&given) {
            ModelError::Provider { code, message } => {
                assert_eq!(code, "server_error");
                assert_eq!(message, "boom");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert_eq!(
            failure_of(&json!({"error": null})),
            ModelError::Provider {
                code: "failed".to_owned(),
                message: "the response failed".to_owned(),
            }
        );
        let incomplete = json!({"incomplete_details": {"reason": "content_filter"}});
        assert_eq!(
            incomplete_reason(&incomplete).as_deref(),
            Some("content_filter")
        );
        assert_eq!(incomplete_reason(&json!({})), None);
    }
}
