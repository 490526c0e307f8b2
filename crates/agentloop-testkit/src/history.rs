//! Reading a request's conversation history: which turn it asks for, which conversation it
//! belongs to, and whether its tool calls and results pair up.
//!
//! Owns the three rules the server applies to every request body (documented in the crate docs):
//! the *turn index* (assistant turns already in the history), the *conversation fingerprint*
//! (FNV-1a 64 of the first user message's content) and the *tool-call invariant* (every call has
//! exactly one result, every result refers to an earlier call, and every call's arguments are a
//! JSON object, as real servers require — OpenAI answers 400, llama.cpp 500 "Failed to parse
//! tool call arguments as JSON"). It must not decide what to answer; that is `server`'s job.

use std::collections::HashMap;

use serde_json::Value;

use crate::wire::WireFormat;

/// What the server needs to know about a request's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct History {
    /// Assistant turns already in the history.
    pub turn_index: usize,
    /// FNV-1a 64 of the compact JSON of the first user message's content.
    pub fingerprint: u64,
    /// Broken tool-call invariants, one message each. Empty when the history is sound.
    pub problems: Vec<String>,
}

impl History {
    /// `turn_index` assistant turns, the conversation named by its first user content.
    fn new(turn_index: usize, first_user: Option<&Value>, problems: Vec<String>) -> History {
        History {
            turn_index,
            fingerprint: fingerprint_of(first_user),
            problems,
        }
    }
}

/// The history of a request checked; `reused_ids`: a call id may come again once its earlier
/// call has its result (see [`MockServerBuilder::allow_reused_call_ids`]).
///
/// [`MockServerBuilder::allow_reused_call_ids`]: crate::MockServerBuilder::allow_reused_call_ids
pub(crate) fn analyze(format: WireFormat, body: &Value, reused_ids: bool) -> History {
    let ledger = Ledger {
        reused_ids,
        ..Ledger::default()
    };
    match format {
        WireFormat::OpenAiChat => chat(body, ledger),
        WireFormat::Anthropic => anthropic(body, ledger),
        WireFormat::OpenAiResponses => responses(body, ledger),
        WireFormat::Gemini => gemini(body),
    }
}

/// FNV-1a, 64 bit: stable across processes and platforms (unlike `DefaultHasher`).
pub(crate) fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

fn fingerprint_of(content: Option<&Value>) -> u64 {
    let text = content.map_or_else(|| "null".to_string(), Value::to_string);
    fnv1a64(text.as_bytes())
}

/// Pairs tool calls with their results, in history order.
#[derive(Default)]
struct Ledger {
    /// id -> (kind, name, results seen)
    calls: HashMap<String, (&'static str, String, u32)>,
    order: Vec<String>,
    problems: Vec<String>,
    /// Whether an id whose call has its result may name a later call.
    reused_ids: bool,
}

impl Ledger {
    /// A tool call `name` (a `kind`) with id `id`, whose arguments `args` must be a JSON object,
    /// given as a value (Anthropic's `input`, a tool search's `arguments`) or, when
    /// `args_as_text`, as JSON text (Chat and Responses `arguments`).
    fn call(
        &mut self,
        kind: &'static str,
        id: Option<&str>,
        name: &str,
        args: Option<&Value>,
        args_as_text: bool,
    ) {
        self.record_call(kind, id, name);
        self.arguments(kind, id, name, args, args_as_text);
    }

    fn record_call(&mut self, kind: &'static str, id: Option<&str>, name: &str) {
        let Some(id) = id else {
            self.problems.push(format!(
                "a {kind} `{name}` has no id, so no result can refer to it"
            ));
            return;
        };
        if let Some((_, _, results)) = self.calls.get(id) {
            if !(self.reused_ids && *results > 0) {
                self.problems
                    .push(format!("{kind} id `{id}` is used by more than one call"));
                return;
            }
        } else {
            self.order.push(id.to_string());
        }
        self.calls
            .insert(id.to_string(), (kind, name.to_string(), 0));
    }

    /// Checks a call's arguments (see [`call`](Self::call)).
    fn arguments(
        &mut self,
        kind: &'static str,
        id: Option<&str>,
        name: &str,
        args: Option<&Value>,
        text: bool,
    ) {
        let ok = match args {
            Some(Value::Object(_)) => !text,
            Some(Value::String(text_value)) if text => {
                matches!(
                    serde_json::from_str::<Value>(text_value),
                    Ok(Value::Object(_))
                )
            }
            _ => false,
        };
        if !ok {
            let shown = match args {
                None => "(missing)".to_string(),
                Some(v) => {
                    let text = v.to_string();
                    let cut: String = text.chars().take(80).collect();
                    if cut.len() < text.len() {
                        format!("{cut}…")
                    } else {
                        cut
                    }
                }
            };
            self.problems.push(format!(
                "Failed to parse tool call arguments as JSON: the arguments of {kind} `{}` \
                 (`{name}`) are not a JSON object: {shown}",
                id.unwrap_or("?")
            ));
        }
    }

    fn result(&mut self, kind: &'static str, result_kind: &str, id: Option<&str>) {
        let Some(id) = id else {
            self.problems
                .push(format!("a {result_kind} has no call id"));
            return;
        };
        match self.calls.get_mut(id) {
            None => self.problems.push(format!(
                "{result_kind} refers to `{id}`, but no earlier {kind} has that id"
            )),
            Some((call_kind, _, _)) if *call_kind != kind => self.problems.push(format!(
                "{result_kind} refers to `{id}`, which is a {call_kind}, not a {kind}"
            )),
            Some((_, name, seen)) => {
                *seen += 1;
                if *seen == 2 {
                    self.problems.push(format!(
                        "{kind} `{id}` (`{name}`) has more than one {result_kind}"
                    ));
                }
            }
        }
    }

    fn finish(mut self) -> Vec<String> {
        for id in &self.order {
            if let Some((kind, name, 0)) = self.calls.get(id) {
                self.problems
                    .push(format!("{kind} `{id}` (`{name}`) has no result"));
            }
        }
        self.problems
    }
}

fn str_field<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

/// `v[key]` as a slice: empty when it is missing or not an array.
fn array_field<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
}

fn chat(body: &Value, mut ledger: Ledger) -> History {
    let messages = array_field(body, "messages");
    let mut turn_index = 0;
    let mut first_user = None;
    for m in messages {
        match str_field(m, "role") {
            Some("assistant") => {
                turn_index += 1;
                for tc in array_field(m, "tool_calls") {
                    let name = tc
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    ledger.call(
                        "tool call",
                        str_field(tc, "id"),
                        name,
                        tc.pointer("/function/arguments"),
                        true,
                    );
                }
            }
            Some("tool") => {
                ledger.result("tool call", "tool message", str_field(m, "tool_call_id"));
            }
            Some("user") if first_user.is_none() => first_user = m.get("content"),
            _ => {}
        }
    }
    History::new(turn_index, first_user, ledger.finish())
}

fn anthropic(body: &Value, mut ledger: Ledger) -> History {
    let messages = array_field(body, "messages");
    let mut turn_index = 0;
    let mut first_user = None;
    for m in messages {
        let blocks = array_field(m, "content");
        match str_field(m, "role") {
            Some("assistant") => {
                turn_index += 1;
                for b in blocks
                    .iter()
                    .filter(|b| str_field(b, "type") == Some("tool_use"))
                {
                    ledger.call(
                        "tool_use block",
                        str_field(b, "id"),
                        str_field(b, "name").unwrap_or(""),
                        b.get("input"),
                        false,
                    );
                }
            }
            Some("user") => {
                if first_user.is_none() {
                    first_user = m.get("content");
                }
                for b in blocks
                    .iter()
                    .filter(|b| str_field(b, "type") == Some("tool_result"))
                {
                    ledger.result(
                        "tool_use block",
                        "tool_result block",
                        str_field(b, "tool_use_id"),
                    );
                }
            }
            _ => {}
        }
    }
    History::new(turn_index, first_user, ledger.finish())
}

/// Item types the model produces (anything else — user/system/developer messages, `*_output`
/// items — ends a run of model output).
fn is_model_output(item: &Value) -> bool {
    match str_field(item, "type") {
        None | Some("message") => str_field(item, "role") == Some("assistant"),
        Some(t) => {
            !t.ends_with("_output")
                && matches!(
                    t,
                    "function_call"
                        | "reasoning"
                        | "tool_search_call"
                        | "custom_tool_call"
                        | "web_search_call"
                        | "file_search_call"
                        | "computer_call"
                        | "code_interpreter_call"
                        | "image_generation_call"
                        | "local_shell_call"
                        | "shell_call"
                        | "apply_patch_call"
                        | "mcp_call"
                        | "mcp_list_tools"
                        | "mcp_approval_request"
                )
        }
    }
}

/// The response number `n` of an output item this mock produced (ids `rs_mock_<n>_<i>`,
/// `msg_mock_<n>`, `ts_mock_<n>_<i>`, `fc_mock_<n>_<i>`), when the client echoed the id back.
fn mock_response_of(item: &Value) -> Option<u64> {
    let id = str_field(item, "id")?;
    let rest = ["rs_mock_", "msg_mock_", "ts_mock_", "fc_mock_"]
        .iter()
        .find_map(|p| id.strip_prefix(p))?;
    rest.split('_').next()?.parse().ok()
}

fn responses(body: &Value, mut ledger: Ledger) -> History {
    let Some(input) = body.get("input") else {
        return History::new(0, None, Vec::new());
    };
    let items = match input {
        Value::Array(items) => items.as_slice(),
        // A plain string is one user message.
        other => {
            return History::new(0, Some(other), Vec::new());
        }
    };
    let mut turn_index = 0;
    let mut in_run = false;
    let mut last_response: Option<u64> = None;
    let mut first_user = None;
    for item in items {
        let model = is_model_output(item);
        if model {
            let response = mock_response_of(item);
            let new_turn = match (response, last_response) {
                (Some(r), Some(last)) => r != last,
                _ => !in_run,
            };
            if new_turn {
                turn_index += 1;
            }
            last_response = response;
        }
        in_run = model;
        let role = str_field(item, "role");
        if role == Some("user") && first_user.is_none() {
            first_user = item.get("content");
        }
        match str_field(item, "type") {
            Some("function_call") => {
                ledger.call(
                    "function_call",
                    str_field(item, "call_id"),
                    str_field(item, "name").unwrap_or(""),
                    item.get("arguments"),
                    true,
                );
            }
            Some("function_call_output") => ledger.result(
                "function_call",
                "function_call_output",
                str_field(item, "call_id"),
            ),
            // Server-executed searches have no call id and need no output from the client.
            Some("tool_search_call") if str_field(item, "call_id").is_some() => {
                ledger.call(
                    "tool_search_call",
                    str_field(item, "call_id"),
                    "tool_search",
                    item.get("arguments"),
                    false,
                );
            }
            Some("tool_search_output") if str_field(item, "call_id").is_some() => ledger.result(
                "tool_search_call",
                "tool_search_output",
                str_field(item, "call_id"),
            ),
            _ => {}
        }
    }
    History::new(turn_index, first_user, ledger.finish())
}

/// Gemini: `contents` alternate `user` and `model`; function calls have no ids to pair by, so a
/// model content's `functionCall` parts must be answered, in order and by name, by the
/// `functionResponse` parts of the next content (and by `id` when the call has one). As Gemini
/// 3 requires, the first `functionCall` of each model content of the current turn (everything
/// after the last user content that is not only function responses) carries a
/// `thoughtSignature`.
fn gemini(body: &Value) -> History {
    let contents = array_field(body, "contents");
    let mut turn_index = 0;
    let mut in_model_run = false;
    let mut first_user = None;
    let mut check = GeminiCheck::default();
    let current_turn = gemini_current_turn(contents);
    for (at, content) in contents.iter().enumerate() {
        let parts = array_field(content, "parts");
        if str_field(content, "role") == Some("model") {
            if !in_model_run {
                turn_index += 1;
            }
            in_model_run = true;
            check.unanswered();
            check.model_calls(parts, at >= current_turn);
            continue;
        }
        in_model_run = false;
        if first_user.is_none() && parts.iter().all(|p| p.get("functionResponse").is_none()) {
            first_user = content.get("parts");
        }
        let responses: Vec<&Value> = parts
            .iter()
            .filter_map(|p| p.get("functionResponse"))
            .collect();
        if responses.is_empty() {
            check.unanswered();
            continue;
        }
        check.responses(&responses);
    }
    check.unanswered();
    History::new(turn_index, first_user, check.problems)
}

/// Where the current turn starts: after the last user content with a part that is not a
/// function response (only the current turn's calls must be signed).
fn gemini_current_turn(contents: &[Value]) -> usize {
    contents
        .iter()
        .rposition(|c| {
            str_field(c, "role") != Some("model")
                && array_field(c, "parts")
                    .iter()
                    .any(|p| p.get("functionResponse").is_none())
        })
        .map_or(0, |at| at + 1)
}

/// The Gemini pairing check in progress: problems found so far, and the calls of the
/// previous model content still waiting for their responses.
#[derive(Default)]
struct GeminiCheck {
    problems: Vec<String>,
    /// (name, id) of each unanswered call, in order.
    pending: Vec<(String, Option<String>)>,
}

impl GeminiCheck {
    /// Reports every call still pending: the next content did not answer it.
    fn unanswered(&mut self) {
        for (name, _) in self.pending.drain(..) {
            self.problems.push(format!(
                "functionCall `{name}` has no functionResponse in the next content"
            ));
        }
    }

    /// Checks a model content's calls (object args; a signature on the first call of a
    /// content in the current turn) and records them as pending.
    fn model_calls(&mut self, parts: &[Value], in_current_turn: bool) {
        let problems = &mut self.problems;
        let mut first = true;
        for (position, part) in parts.iter().enumerate() {
            let Some(call) = part.get("functionCall") else {
                continue;
            };
            let name = str_field(call, "name").unwrap_or("").to_string();
            match call.get("args") {
                None | Some(Value::Object(_)) => {}
                Some(other) => problems.push(format!(
                        "Failed to parse tool call arguments as JSON: the args of functionCall                          `{name}` are not a JSON object: {other}"
                    )),
            }
            let signature = str_field(part, "thoughtSignature").unwrap_or("");
            if first && in_current_turn && signature.is_empty() {
                problems.push(format!(
                    "Function call is missing a thought_signature in functionCall parts. \
                         This is required for tools to work correctly, and missing \
                         thought_signature may lead to degraded model performance. Additional \
                         data, function call `default_api:{name}` , position {}. Please refer \
                         to https://ai.google.dev/gemini-api/docs/thought-signatures for more \
                         details.",
                    position + 1
                ));
            }
            first = false;
            self.pending
                .push((name, str_field(call, "id").map(str::to_string)));
        }
    }

    /// Checks a user content's function responses against the pending calls (count, order,
    /// names, ids, object responses); every pending call counts as answered afterwards.
    fn responses(&mut self, responses: &[&Value]) {
        let (pending, problems) = (&mut self.pending, &mut self.problems);
        if responses.len() != pending.len() {
            problems.push(format!(
                "Please ensure that the number of function response parts is equal to the \
                 number of function call parts of the function call turn: {} call(s), {} \
                 response(s)",
                pending.len(),
                responses.len()
            ));
        }
        for (i, response) in responses.iter().enumerate() {
            let name = str_field(response, "name").unwrap_or("");
            match pending.get(i) {
                Some((call, _)) if call != name => problems.push(format!(
                    "functionResponse {} is named `{name}`, but function call {} is `{call}`",
                    i + 1,
                    i + 1
                )),
                Some((_, Some(id))) if str_field(response, "id") != Some(id.as_str()) => problems
                    .push(format!(
                        "functionResponse `{name}` must carry the id `{id}` of its call"
                    )),
                _ => {}
            }
            if !response.get("response").is_some_and(Value::is_object) {
                problems.push(format!(
                    "functionResponse `{name}`: `response` must be a JSON object"
                ));
            }
        }
        pending.clear();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn chat_counts_and_pairs() {
        let body = json!({"messages": [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "more"},
        ]});
        let h = analyze(WireFormat::OpenAiChat, &body, false);
        assert_eq!(h.turn_index, 2);
        assert!(h.problems.is_empty(), "{:?}", h.problems);
        assert_eq!(h.fingerprint, fnv1a64(b"\"hi\""));
    }

    #[test]
    fn chat_violations() {
        let body = json!({"messages": [
            {"role": "user", "content": "hi"},
            {"role": "tool", "tool_call_id": "early", "content": "x"},
            {"role": "assistant", "tool_calls": [
                {"id": "a", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "function": {"name": "g", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "a", "content": "1 again"},
        ]});
        let h = analyze(WireFormat::OpenAiChat, &body, false);
        assert_eq!(h.problems.len(), 3, "{:?}", h.problems);
        assert!(h.problems[0].contains("early"));
        assert!(h.problems[1].contains("more than one"));
        assert!(h.problems[2].contains("`b`") && h.problems[2].contains("no result"));
    }

    #[test]
    fn a_reused_call_id_passes_only_when_allowed_and_after_its_result() {
        let call = |id: &str| {
            json!({"role": "assistant", "tool_calls": [
            {"id": id, "function": {"name": "f", "arguments": "{}"}}]})
        };
        let result = |id: &str| json!({"role": "tool", "tool_call_id": id, "content": "r"});
        let twice = json!({"messages": [
            {"role": "user", "content": "hi"},
            call("call_0"), result("call_0"), call("call_0"), result("call_0"),
        ]});
        assert!(
            analyze(WireFormat::OpenAiChat, &twice, true)
                .problems
                .is_empty()
        );
        let strict = analyze(WireFormat::OpenAiChat, &twice, false).problems;
        assert!(strict[0].contains("more than one call"), "{strict:?}");
        // Before its result, the id is still taken; and the later call needs its own result.
        let pending = json!({"messages": [
            {"role": "user", "content": "hi"},
            call("call_0"), call("call_0"), result("call_0"),
        ]});
        let p = analyze(WireFormat::OpenAiChat, &pending, true).problems;
        assert!(p[0].contains("more than one call"), "{p:?}");
        let unanswered = json!({"messages": [
            {"role": "user", "content": "hi"},
            call("call_0"), result("call_0"), call("call_0"),
        ]});
        let p = analyze(WireFormat::OpenAiChat, &unanswered, true).problems;
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].contains("no result"), "{p:?}");
    }

    #[test]
    fn anthropic_counts_and_pairs() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
        ]});
        let h = analyze(WireFormat::Anthropic, &body, false);
        assert_eq!(h.turn_index, 1);
        assert!(h.problems.is_empty());
        let bad = json!({"messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "r"}]},
        ]});
        assert_eq!(
            analyze(WireFormat::Anthropic, &bad, false).problems.len(),
            1
        );
    }

    #[test]
    fn responses_runs() {
        let body = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "reasoning", "id": "rs", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {"type": "function_call_output", "call_id": "c2", "output": "2"},
            {"type": "tool_search_call", "call_id": "s1", "execution": "client", "arguments": {}},
            {"type": "tool_search_output", "call_id": "s1", "execution": "client", "tools": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "ok"}]},
            {"role": "user", "content": "next"},
        ]});
        let h = analyze(WireFormat::OpenAiResponses, &body, false);
        assert_eq!(h.turn_index, 3);
        assert!(h.problems.is_empty(), "{:?}", h.problems);
        assert_eq!(h.fingerprint, fnv1a64(b"\"hi\""));
        // A string input is the same conversation as a user message with that string.
        let s = analyze(WireFormat::OpenAiResponses, &json!({"input": "hi"}), false);
        assert_eq!((s.turn_index, s.fingerprint), (0, h.fingerprint));

        let bad = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "tool_search_output", "call_id": "c1", "tools": []},
        ]});
        let p = analyze(WireFormat::OpenAiResponses, &bad, false).problems;
        assert_eq!(p.len(), 2, "{p:?}");
    }

    #[test]
    fn arguments_must_be_json_objects_on_every_wire() {
        for (args, ok) in [
            (json!("{\"a\":1}"), true),
            (json!("{\"a\": 1"), false),
            (json!("[1]"), false),
            (json!("\"text\""), false),
            (json!("null"), false),
            (json!(""), false),
        ] {
            let chat = json!({"messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": args}}]},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
            ]});
            let p = analyze(WireFormat::OpenAiChat, &chat, false).problems;
            assert_eq!(p.is_empty(), ok, "chat {args}: {p:?}");
            let responses = json!({"input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c1", "name": "f", "arguments": args},
                {"type": "function_call_output", "call_id": "c1", "output": "1"},
            ]});
            let p = analyze(WireFormat::OpenAiResponses, &responses, false).problems;
            assert_eq!(p.is_empty(), ok, "responses {args}: {p:?}");
            if !ok {
                assert!(p[0].contains("not a JSON object"), "{p:?}");
            }
        }
        for (input, ok) in [
            (json!({"a": 1}), true),
            (json!("{\"a\":1}"), false),
            (json!([]), false),
            (Value::Null, false),
        ] {
            let body = json!({"messages": [
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": input}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "r"}]},
            ]});
            let p = analyze(WireFormat::Anthropic, &body, false).problems;
            assert_eq!(p.is_empty(), ok, "anthropic {input}: {p:?}");
        }
    }

    #[test]
    fn gemini_pairs_by_name_in_order_and_wants_signatures_in_the_current_turn() {
        let call = |name: &str, signature: Option<&str>| {
            let mut part = json!({"functionCall": {"name": name, "args": {}}});
            if let Some(s) = signature {
                part["thoughtSignature"] = json!(s);
            }
            part
        };
        let response =
            |name: &str| json!({"functionResponse": {"name": name, "response": {"output": "x"}}});
        let body = json!({"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            // An earlier turn: no signature needed.
            {"role": "model", "parts": [call("f", None)]},
            {"role": "user", "parts": [response("f")]},
            {"role": "model", "parts": [{"text": "done"}]},
            {"role": "user", "parts": [{"text": "again"}]},
            {"role": "model", "parts": [call("f", Some("skip_thought_signature_validator")), call("g", None)]},
            {"role": "user", "parts": [response("f"), response("g")]},
        ]});
        let h = analyze(WireFormat::Gemini, &body, false);
        assert_eq!(h.turn_index, 3);
        assert!(h.problems.is_empty(), "{:?}", h.problems);
        assert_eq!(h.fingerprint, fnv1a64(br#"[{"text":"hi"}]"#));

        let bad = json!({"contents": [
            {"role": "user", "parts": [{"text": "hi"}]},
            {"role": "model", "parts": [call("f", None), call("g", None)]},
            {"role": "user", "parts": [response("g")]},
            {"role": "model", "parts": [call("h", Some("s"))]},
        ]});
        let p = analyze(WireFormat::Gemini, &bad, false).problems;
        assert_eq!(p.len(), 4, "{p:?}");
        assert!(p[0].contains("missing a thought_signature"), "{p:?}");
        assert!(p[1].contains("number of function response parts"), "{p:?}");
        assert!(p[2].contains("named `g`"), "{p:?}");
        assert!(p[3].contains("`h` has no functionResponse"), "{p:?}");
    }

    #[test]
    fn responses_interleaved_outputs_with_mock_ids() {
        // Calls of one response interleaved with their outputs: one turn when the ids say so.
        let body = json!({"input": [
            {"role": "user", "content": "hi"},
            {"type": "function_call", "id": "fc_mock_7_0", "call_id": "c1", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "1"},
            {"type": "function_call", "id": "fc_mock_7_1", "call_id": "c2", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c2", "output": "2"},
            {"type": "message", "id": "msg_mock_9", "role": "assistant", "content": []},
            {"type": "function_call", "id": "fc_mock_9_1", "call_id": "c3", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c3", "output": "3"},
        ]});
        assert_eq!(
            analyze(WireFormat::OpenAiResponses, &body, false).turn_index,
            2
        );
    }
}
