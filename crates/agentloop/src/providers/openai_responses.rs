//! OpenAI Responses (`POST {base}/responses`, streaming, stateless: `store: false`, the whole
//! conversation is sent every time).
//!
//! # Request
//!
//! | neutral | wire |
//! |---|---|
//! | system prompt | `instructions` |
//! | user message | `{"role": "user", "content": [{"type": "input_text", "text"}, {"type": "input_image", "image_url": "data:<type>;base64,<data>"}]}` |
//! | assistant text | `{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text"}, …]}` (one `output_text` per consecutive text part); recorded with its item id (same provider and model): `"id": "msg_…", "status": "completed"` and `"annotations": []` on each `output_text` |
//! | assistant thinking (same provider and model) | `{"type": "reasoning", "id", "encrypted_content", "summary": [{"type": "summary_text", "text"}]}` (see below) |
//! | tool call | `{"type": "function_call", "call_id", "name", "arguments"}` (arguments as JSON text; arguments that are not a JSON object are sent as `{}`, see [`replay`]), plus `"id": "fc_…"` when recorded with its item id (same provider and model) |
//! | tool result | `{"type": "function_call_output", "call_id", "output"}` (`output` is an `input_text` + `input_image` array when the result has images) |
//! | tools | `[{"type": "function", "name", "description", "parameters"}]` |
//! | reasoning level | `reasoning: {"effort", "summary": "auto"}` (minimal, low, medium, high; xhigh → high; off → omitted) and `include: ["reasoning.encrypted_content"]` |
//! | output-token limit | `max_output_tokens` |
//!
//! The transcript first goes through [`replay::prepare`] for this provider and model: thinking
//! recorded by another provider or model becomes text, errored and aborted turns are dropped,
//! unanswered calls get a synthetic result.
//!
//! # Encrypted reasoning across turns
//!
//! With `store: false` the server forgets a response's reasoning; to keep it the request asks for
//! `reasoning.encrypted_content`, and each `reasoning` output item becomes a
//! [`ThinkingPart`] whose `thinking` is the readable summary (summary parts joined by a blank line)
//! and whose `signature` is the compact JSON object `{"id": "<rs_… item id>",
//! "encrypted_content": "<payload>"}`; `redacted` is set when there is a payload but no summary
//! text. Replayed to the same provider and model, such a part becomes the `reasoning` input item
//! again; a thinking part without that signature is dropped (the server could not resolve it
//! without `store`). Replayed anywhere else, the usual handoff rules apply (summary → text,
//! payload dropped).
//!
//! The server pairs a reasoning item with the output item that followed it, by id: reasoning
//! sent back without that item's id fails ("reasoning was provided without its required
//! following item"). So every message and call item keeps its output-item id as
//! [`ProviderData`] `{"id": "msg_…" | "fc_…", "type": <item type>}` on its text or tool-call part,
//! and it goes back with the item, to the same provider and model only (like the reasoning
//! itself; [`replay::prepare`] drops it anywhere else).
//!
//! # Stream
//!
//! Items are tracked by `output_index` (or `item_id`): `reasoning` (summary deltas →
//! [`ModelDelta::Thinking`]), `message` (`output_text` deltas → text; `refusal` deltas are kept
//! and become the text of a message that has no other text), `function_call` (argument deltas,
//! which carry no `content_index`), and client `tool_search_call` (below). Each
//! `response.output_item.done` restates its item and fixes up whatever the deltas missed; so do
//! the items of the terminal response. Terminal events: `response.completed` (stop reason
//! `tool_use` with at least one call, `refusal` when the only output is a refusal, else `stop`),
//! `response.incomplete` (`max_output_tokens` → `length`, `content_filter` → `refusal`; a
//! half-streamed call keeps its arguments as unparsed text), `response.failed` (an error with the
//! response's `error.code` and `error.message`); an `error` event is a
//! [`ModelError::Provider`]. Usage: `input_tokens` minus `input_tokens_details.cached_tokens` as
//! input, the cached tokens as cache reads, `output_tokens` as output. A tool call's id is the
//! item's `call_id`.
//!
//! # Deferred tools and client-executed tool search (docs/ARCHITECTURE.md, "Tools and the executor")
//!
//! Active when the request carries a search tool ([`ModelRequest::tool_search`], the registry's
//! `local_tool_search` tool) and at least one deferred tool ([`ModelRequest::deferred_tools`]):
//!
//! 1. `tools` lists the visible function tools, then every deferred tool as a function with
//!    `"defer_loading": true` (the model sees its name and description, not its parameters),
//!    then `{"type": "tool_search", "execution": "client", "description", "parameters"}` with
//!    the search tool's description and parameters. A deferred tool is always declared this way,
//!    even once loaded: loading happens in the conversation (step 3), so the declared tools stay
//!    the same from turn to turn (prompt caching).
//! 2. A `tool_search_call` output item with client execution (`call_id`, `arguments` as a JSON
//!    value) becomes an ordinary tool call of the search tool: id = `call_id`, arguments = the
//!    item's arguments. It counts as a tool call for the stop reason. The agent's executor runs
//!    the search tool, whose result names tools (see
//!    [`search_result_names`]). Server-executed searches
//!    (`call_id: null`) and `tool_search_output` items in the stream are ignored.
//! 3. On replay, a call of the search tool becomes `{"type": "tool_search_call", "call_id",
//!    "execution": "client", "status": "completed", "arguments"}` and its result becomes
//!    `{"type": "tool_search_output", "call_id", "execution": "client", "status": "completed",
//!    "tools": [...]}` where `tools` holds the full definitions (function tools with
//!    `"defer_loading": true`) of the deferred tools the result names, looked up in
//!    `deferred_tools`, in result order without repeats. Names that are not deferred tools
//!    (already visible, unknown) are left out; an error result, or one whose names cannot be read,
//!    loads nothing (`"tools": []`).
//!
//! Without an active search, calls named like the search tool are ordinary function calls and
//! deferred tools are not declared at all. A `tool_search_call` arriving anyway is mapped to a
//! call of [`TOOL_SEARCH_NAME`].

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::ProviderConfig;
use super::partial_json::PartialJson;
use super::replay::{self, ReplayTarget};
use super::sse::SseEvent;
use super::transport::{self, WireParser};
use crate::model::{Model, ModelDelta, ModelError, ModelEvent, ModelRequest, ModelStream};
use crate::output::OutputFormat;
use crate::tooling::{TOOL_SEARCH_NAME, ToolSchema, search_result_names};
use crate::transcript::{
    ImagePart, Message, Part, ProviderData, Role, StopReason, ThinkingPart, ToolArguments,
    ToolCallPart, ToolResultPart, Usage,
};

/// The provider name recorded on messages.
pub const PROVIDER: &str = "openai_responses";

/// OpenAI Responses adapter. See the module docs for the wire mapping, encrypted reasoning and
/// tool search.
///
/// ```no_run
/// use agentloop::providers::{OpenAiResponses, ProviderConfig};
///
/// // api.openai.com with OPENAI_API_KEY / OPENAI_BASE_URL from the environment:
/// let openai = OpenAiResponses::from_env().unwrap();
/// // Explicit settings (base URLs include `/v1`, as in the official SDK):
/// let custom = OpenAiResponses::new(
///     ProviderConfig::new("https://api.openai.com/v1").api_key("sk-…").model("gpt-5"),
/// );
/// # let _ = (openai, custom);
/// ```
#[derive(Clone, Debug)]
pub struct OpenAiResponses {
    config: ProviderConfig,
    endpoint: transport::Endpoint,
}

impl OpenAiResponses {
    /// An adapter with explicit settings.
    pub fn new(config: ProviderConfig) -> Self {
        let endpoint = transport::Endpoint::new(&config, "responses");
        OpenAiResponses { config, endpoint }
    }

    /// Like [`new`](OpenAiResponses::new), but a configuration that cannot work (a base URL that does
    /// not parse, a header that is not valid HTTP, an HTTP client that cannot be built) is an
    /// error here instead of the error of every request.
    pub fn try_new(config: ProviderConfig) -> Result<Self, ModelError> {
        let adapter = OpenAiResponses::new(config);
        adapter.endpoint.check()?;
        Ok(adapter)
    }

    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        OpenAiResponses::try_new(ProviderConfig::from_env_vars(
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
            "https://api.openai.com/v1",
        ))
    }

    /// The settings.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The JSON body this adapter sends for `request` (exposed for snapshot tests and
    /// debugging; contains no credentials).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        build_body(&self.config, request)
    }
}

fn input_image(image: &ImagePart) -> Value {
    json!({
        "type": "input_image",
        "image_url": format!("data:{};base64,{}", image.media_type, image.data),
    })
}

fn function_tool(tool: &ToolSchema, deferred: bool) -> Value {
    let mut t = json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    });
    if deferred {
        t["defer_loading"] = json!(true);
    }
    t
}

/// The client-executed tool search of one request, when active (see the module docs).
struct SearchPlan<'r> {
    tool: &'r ToolSchema,
    deferred: &'r [ToolSchema],
}

impl<'r> SearchPlan<'r> {
    fn of(request: &'r ModelRequest<'_>) -> Option<Self> {
        let tool = request.tool_search.as_ref()?;
        if request.deferred_tools.is_empty() {
            return None;
        }
        Some(SearchPlan {
            tool,
            deferred: &request.deferred_tools,
        })
    }

    fn is_deferred(&self, name: &str) -> bool {
        self.deferred.iter().any(|t| t.name == name)
    }

    /// The definitions of the deferred tools a search result names.
    fn loaded_tools(&self, result: &ToolResultPart) -> Vec<Value> {
        if result.is_error {
            return Vec::new();
        }
        let names = search_result_names(&result.content).unwrap_or_default();
        let mut seen: HashSet<&str> = HashSet::new();
        names
            .iter()
            .filter(|name| seen.insert(name.as_str()))
            .filter_map(|name| self.deferred.iter().find(|t| &t.name == name))
            .map(|t| function_tool(t, true))
            .collect()
    }
}

/// The `reasoning` input item stored in a thinking part's signature (see the module docs).
fn reasoning_item(thinking: &ThinkingPart) -> Option<Value> {
    let signature: Value = serde_json::from_str(thinking.signature.as_deref()?).ok()?;
    let id = signature.get("id")?.as_str()?;
    let encrypted = signature.get("encrypted_content")?.as_str()?;
    let summary = if thinking.thinking.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "summary_text", "text": thinking.thinking})]
    };
    Some(json!({
        "type": "reasoning",
        "id": id,
        "encrypted_content": encrypted,
        "summary": summary,
    }))
}

fn assistant_items(
    m: &Message,
    search: Option<&SearchPlan<'_>>,
    search_calls: &mut HashSet<String>,
    input: &mut Vec<Value>,
) {
    // Consecutive text parts of one output message share one message item, each its own
    // `output_text` (no separator is invented between, say, thinking turned into text and the
    // answer). A message recorded with its item id (`msg_…`) goes back with it: the server pairs
    // encrypted reasoning with the item that followed it.
    let mut text: Vec<Value> = Vec::new();
    let mut text_id: Option<&str> = None;
    let flush = |text: &mut Vec<Value>, text_id: Option<&str>, input: &mut Vec<Value>| {
        if text.is_empty() {
            return;
        }
        let mut item = Map::new();
        item.insert("type".into(), json!("message"));
        item.insert("role".into(), json!("assistant"));
        if let Some(id) = text_id {
            for t in text.iter_mut().filter_map(Value::as_object_mut) {
                t.insert("annotations".into(), json!([]));
            }
            item.insert("id".into(), json!(id));
            item.insert("status".into(), json!("completed"));
        }
        item.insert("content".into(), Value::Array(std::mem::take(text)));
        input.push(Value::Object(item));
    };
    for part in &m.content {
        match part {
            Part::Text {
                text: t,
                provider_data,
            } if !t.is_empty() => {
                let id = item_id(provider_data.as_ref(), "message");
                if id != text_id {
                    flush(&mut text, text_id, input);
                    text_id = id;
                }
                text.push(json!({"type": "output_text", "text": t}));
            }
            Part::Thinking(t) => {
                flush(&mut text, text_id, input);
                // Only same-source thinking is left after `replay::prepare`.
                if let Some(item) = reasoning_item(t) {
                    input.push(item);
                }
            }
            Part::ToolCall(c) => {
                flush(&mut text, text_id, input);
                let mut item = match search {
                    Some(plan) if c.tool_name == plan.tool.name => {
                        search_calls.insert(c.id.clone());
                        let arguments = replay::object_arguments(&c.arguments);
                        json!({
                            "type": "tool_search_call",
                            "call_id": c.id,
                            "execution": "client",
                            "status": "completed",
                            "arguments": arguments,
                        })
                    }
                    _ => json!({
                        "type": "function_call",
                        "call_id": c.id,
                        "name": c.tool_name,
                        // Only an object is accepted (see `replay`); the transcript keeps
                        // the raw text.
                        "arguments": replay::wire_arguments(&c.arguments),
                    }),
                };
                let kind = item["type"].as_str().unwrap_or_default().to_owned();
                if let (Some(id), Some(object)) = (
                    item_id(c.provider_data.as_ref(), &kind),
                    item.as_object_mut(),
                ) {
                    object.insert("id".into(), json!(id));
                }
                input.push(item);
            }
            _ => {}
        }
    }
    flush(&mut text, text_id, input);
}

fn build_body(config: &ProviderConfig, request: &ModelRequest<'_>) -> Value {
    let model = request
        .model
        .clone()
        .or_else(|| config.model.clone())
        .unwrap_or_default();
    let target = ReplayTarget::openai(PROVIDER, &model);
    let messages = replay::prepare(&request.messages, &target);
    let search = SearchPlan::of(request);
    let mut search_calls: HashSet<String> = HashSet::new();
    let mut input: Vec<Value> = Vec::with_capacity(messages.len());
    for m in messages.iter() {
        match m.role {
            Role::Assistant => assistant_items(m, search.as_ref(), &mut search_calls, &mut input),
            Role::ToolResult => {
                let Some(r) = m.tool_result_part() else {
                    continue;
                };
                match &search {
                    Some(plan) if search_calls.contains(&r.call_id) => input.push(json!({
                        "type": "tool_search_output",
                        "call_id": r.call_id,
                        "execution": "client",
                        "status": "completed",
                        "tools": plan.loaded_tools(r),
                    })),
                    _ => {
                        let output = if r.images.is_empty() {
                            json!(r.content)
                        } else {
                            let mut parts = vec![json!({"type": "input_text", "text": r.content})];
                            parts.extend(r.images.iter().map(input_image));
                            Value::Array(parts)
                        };
                        input.push(json!({
                            "type": "function_call_output",
                            "call_id": r.call_id,
                            "output": output,
                        }));
                    }
                }
            }
            _ => {
                let content: Vec<Value> = m
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        Part::Text { text, .. } => {
                            Some(json!({"type": "input_text", "text": text}))
                        }
                        Part::Image(i) => Some(input_image(i)),
                        _ => None,
                    })
                    .collect();
                input.push(json!({"role": "user", "content": content}));
            }
        }
    }

    let mut tools: Vec<Value> = Vec::new();
    for t in request.tools.iter() {
        if let Some(plan) = &search {
            // Declared below: deferred tools as deferred, the search tool as `tool_search`.
            if t.name == plan.tool.name || plan.is_deferred(&t.name) {
                continue;
            }
        }
        tools.push(function_tool(t, false));
    }
    if let Some(plan) = &search {
        tools.extend(plan.deferred.iter().map(|t| function_tool(t, true)));
        tools.push(json!({
            "type": "tool_search",
            "execution": "client",
            "description": plan.tool.description,
            "parameters": plan.tool.parameters,
        }));
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = &request.system_prompt {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    if let Some(key) = request
        .prompt_cache_key
        .as_deref()
        .filter(|_| config.prompt_cache)
    {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(t) = request.temperature {
        // Through its shortest decimal form: 0.2f32 goes out as 0.2, not 0.20000000298023224.
        body.insert("temperature".into(), json!(super::wire_temperature(t)));
    }
    if let Some(n) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(effort) = request.reasoning.and_then(super::openai_reasoning_effort) {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let Some(format) = &request.output {
        body.insert("text".into(), responses_text_format(format));
    }
    Value::Object(body)
}

/// Native structured output (typed output): `text.format` with a `json_schema`.
fn responses_text_format(format: &OutputFormat) -> Value {
    let mut f = Map::new();
    f.insert("type".into(), json!("json_schema"));
    f.insert("name".into(), json!(format.name));
    if let Some(description) = &format.description {
        f.insert("description".into(), json!(description));
    }
    f.insert("schema".into(), format.schema.clone());
    f.insert("strict".into(), json!(format.strict));
    json!({"format": f})
}

impl Model for OpenAiResponses {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let body = build_body(&self.config, &request);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let search_name = request
            .tool_search
            .as_ref()
            .map_or_else(|| TOOL_SEARCH_NAME.to_owned(), |t| t.name.clone());
        let auth: Vec<(&'static str, String)> = request
            .api_key
            .as_ref()
            .or(self.config.api_key.as_ref())
            .map(|key| ("authorization", format!("Bearer {}", key.expose())))
            .into_iter()
            .collect();
        self.endpoint.post(
            auth,
            // Serializing a `Value` cannot fail (its keys are strings).
            serde_json::to_vec(&body).unwrap_or_default(),
            move || ResponsesParser::new(model.clone(), search_name.clone()),
        )
    }

    fn provider(&self) -> &str {
        PROVIDER
    }
    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn model_id(&self) -> Option<&str> {
        self.config.model.as_deref()
    }

    fn supports_tool_search(&self) -> bool {
        true
    }
}

/// Brings `streamed` up to `full`; returns the missing suffix when `full` extends it (a delta to
/// emit), `None` when they were equal or `full` replaced something different.
fn reconcile(streamed: &mut String, full: &str) -> Option<String> {
    if streamed == full {
        return None;
    }
    let suffix = full.strip_prefix(streamed.as_str()).map(str::to_owned);
    *streamed = full.to_owned();
    suffix.filter(|s| !s.is_empty())
}

#[derive(Debug)]
enum Body {
    Reasoning {
        text: String,
        summary_index: Option<u64>,
        encrypted: Option<String>,
    },
    Message {
        text: String,
        refusal: String,
    },
    Call {
        /// Position among this message's tool calls.
        index: usize,
        call_id: String,
        name: String,
        args: PartialJson,
        /// The final arguments when they are not an extension of the streamed text.
        replaced: Option<String>,
        /// A tool search's arguments (a JSON value on the wire).
        value: Option<Value>,
    },
    Ignored,
}

#[derive(Debug)]
struct Item {
    output_index: Option<u64>,
    id: String,
    done: bool,
    body: Body,
}

#[derive(Debug, PartialEq)]
enum Terminal {
    Completed,
    Incomplete(Option<String>),
    Failed { code: String, message: String },
}

/// Assembles Responses stream events into deltas and the final message.
#[derive(Debug)]
pub(crate) struct ResponsesParser {
    model: String,
    /// `response.id` of the first event that carries the response (`response.created`).
    response_id: Option<String>,
    search_name: String,
    items: Vec<Item>,
    calls: usize,
    usage: Option<Usage>,
    terminal: Option<Terminal>,
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

fn parse_usage(u: &Value) -> Option<Usage> {
    if !u.is_object() {
        return None;
    }
    let input = u["input_tokens"].as_u64().unwrap_or(0);
    let cached = u
        .pointer("/input_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Some(Usage {
        input_tokens: input.saturating_sub(cached),
        output_tokens: u["output_tokens"].as_u64().unwrap_or(0),
        cache_read_tokens: cached,
        ..Usage::default()
    })
}

/// `code` and `message` of an error object (`error` event or `response.error`).
fn error_fields(err: &Value, default_code: &str) -> (String, String) {
    let code = err
        .get("code")
        .filter(|c| !c.is_null())
        .or_else(|| err.get("type").filter(|t| !t.is_null()))
        .map(|c| {
            c.as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| c.to_string())
        })
        .unwrap_or_else(|| default_code.to_owned());
    let message = str_of(err, "message")
        .unwrap_or("the provider reported an error")
        .to_owned();
    (code, message)
}

impl ResponsesParser {
    pub(crate) fn new(model: String, search_name: String) -> Self {
        ResponsesParser {
            model,
            response_id: None,
            search_name,
            items: Vec::new(),
            calls: 0,
            usage: None,
            terminal: None,
        }
    }

    /// The item an event refers to, by `output_index`, else by `item_id`.
    fn find(&self, event: &Value) -> Option<usize> {
        if let Some(oi) = event.get("output_index").and_then(Value::as_u64) {
            if let Some(at) = self.items.iter().position(|i| i.output_index == Some(oi)) {
                return Some(at);
            }
        }
        let id = str_of(event, "item_id").filter(|id| !id.is_empty())?;
        self.items.iter().position(|i| i.id == id)
    }

    /// The item an event refers to, opening one of the given kind when the server skipped
    /// `output_item.added`.
    fn find_or_open(&mut self, event: &Value, body: fn() -> Body) -> usize {
        if let Some(at) = self.find(event) {
            return at;
        }
        self.items.push(Item {
            output_index: event.get("output_index").and_then(Value::as_u64),
            id: str_of(event, "item_id").unwrap_or_default().to_owned(),
            done: false,
            body: body(),
        });
        self.items.len() - 1
    }

    fn open_call(&mut self, call_id: &str, name: &str, out: &mut Vec<ModelEvent>) -> Body {
        let index = self.calls;
        self.calls += 1;
        let mut id = call_id.to_owned();
        // A missing or repeated id would break the call/result pairing: make it unique.
        let taken = |id: &str| {
            self.items
                .iter()
                .any(|i| matches!(&i.body, Body::Call { call_id, .. } if call_id == id))
        };
        if id.is_empty() || taken(&id) {
            id = format!(
                "call_{index}_{}",
                if name.is_empty() { "tool" } else { name }
            );
        }
        out.push(ModelEvent::Delta(ModelDelta::ToolCallStart {
            index,
            id: id.clone(),
            name: name.to_owned(),
        }));
        Body::Call {
            index,
            call_id: id,
            name: name.to_owned(),
            args: PartialJson::new(),
            replaced: None,
            value: None,
        }
    }

    fn on_item_added(&mut self, event: &Value, out: &mut Vec<ModelEvent>) {
        let item = &event["item"];
        let output_index = event.get("output_index").and_then(Value::as_u64);
        if output_index.is_some() && self.find(event).is_some() {
            return; // repeated
        }
        let body = match str_of(item, "type") {
            Some("reasoning") => Body::Reasoning {
                text: String::new(),
                summary_index: None,
                encrypted: str_of(item, "encrypted_content").map(str::to_owned),
            },
            Some("message") => Body::Message {
                text: String::new(),
                refusal: String::new(),
            },
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
        self.items.push(Item {
            output_index,
            id: str_of(item, "id").unwrap_or_default().to_owned(),
            done: false,
            body,
        });
        // Some servers send a call's arguments whole with the item.
        if let Some(at) = self.items.len().checked_sub(1) {
            if matches!(str_of(item, "type"), Some("function_call")) {
                if let Some(args) = str_of(item, "arguments").filter(|a| !a.is_empty()) {
                    self.push_arguments(at, args, out);
                }
            }
        }
    }

    fn push_arguments(&mut self, at: usize, fragment: &str, out: &mut Vec<ModelEvent>) {
        if let Some(Item {
            body: Body::Call { index, args, .. },
            ..
        }) = self.items.get_mut(at)
        {
            let partial = args.push_and_snapshot(fragment);
            out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                index: *index,
                delta: fragment.to_owned(),
                partial,
            }));
        }
    }

    /// Fixes a call's arguments up to the full text `full`: the missing suffix is streamed as a
    /// delta; text that does not extend what was streamed replaces it.
    fn finish_arguments(&mut self, at: usize, full: &str, out: &mut Vec<ModelEvent>) {
        let suffix = match self.items.get_mut(at) {
            Some(Item {
                body: Body::Call { args, replaced, .. },
                ..
            }) => {
                if replaced.as_deref().unwrap_or(args.text()) == full {
                    return;
                }
                match full.strip_prefix(args.text()) {
                    Some(suffix) if replaced.is_none() => suffix.to_owned(),
                    _ => {
                        *replaced = Some(full.to_owned());
                        return;
                    }
                }
            }
            _ => return,
        };
        self.push_arguments(at, &suffix, out);
    }

    fn on_item_done(&mut self, item: &Value, output_index: Option<u64>, out: &mut Vec<ModelEvent>) {
        let probe = json!({
            "output_index": output_index,
            "item_id": str_of(item, "id").unwrap_or_default(),
        });
        let at = match self.find(&probe) {
            Some(at) => at,
            None => {
                // Never announced: open it now (as `output_item.added` would have); its
                // arguments are applied below, as a fix-up.
                let mut fresh = item.clone();
                if let Some(obj) = fresh.as_object_mut() {
                    obj.remove("arguments");
                }
                let added = json!({"output_index": output_index, "item": fresh});
                self.on_item_added(&added, out);
                self.items.len() - 1
            }
        };
        if self.items[at].done {
            return;
        }
        self.items[at].done = true;
        if self.items[at].id.is_empty() {
            if let Some(id) = str_of(item, "id") {
                self.items[at].id = id.to_owned();
            }
        }
        match &mut self.items[at].body {
            Body::Reasoning {
                text, encrypted, ..
            } => {
                if let Some(e) = str_of(item, "encrypted_content") {
                    *encrypted = Some(e.to_owned());
                }
                let full: Vec<&str> = item["summary"]
                    .as_array()
                    .map(|parts| parts.iter().filter_map(|p| str_of(p, "text")).collect())
                    .unwrap_or_default();
                if !full.is_empty() {
                    if let Some(delta) = reconcile(text, &full.join("\n\n")) {
                        out.push(ModelEvent::Delta(ModelDelta::Thinking { delta }));
                    }
                }
            }
            Body::Message { text, refusal } => {
                let parts = item["content"].as_array().cloned().unwrap_or_default();
                let full_text: String = parts
                    .iter()
                    .filter(|p| str_of(p, "type") == Some("output_text"))
                    .filter_map(|p| str_of(p, "text"))
                    .collect();
                let full_refusal: String = parts
                    .iter()
                    .filter(|p| str_of(p, "type") == Some("refusal"))
                    .filter_map(|p| str_of(p, "refusal"))
                    .collect();
                if !full_text.is_empty() {
                    if let Some(delta) = reconcile(text, &full_text) {
                        out.push(ModelEvent::Delta(ModelDelta::Text { delta }));
                    }
                }
                if !full_refusal.is_empty() {
                    reconcile(refusal, &full_refusal);
                }
            }
            Body::Call {
                index,
                call_id,
                name,
                value,
                ..
            } => {
                let index = *index;
                if name.is_empty() {
                    if let Some(n) = str_of(item, "name") {
                        *name = n.to_owned();
                    }
                }
                if call_id.is_empty() {
                    if let Some(c) = str_of(item, "call_id") {
                        *call_id = c.to_owned();
                    }
                }
                if str_of(item, "type") == Some("tool_search_call") {
                    let args = match item.get("arguments").cloned().unwrap_or(json!({})) {
                        Value::String(text) => {
                            serde_json::from_str(&text).unwrap_or(Value::String(text))
                        }
                        other => other,
                    };
                    if value.is_none() {
                        out.push(ModelEvent::Delta(ModelDelta::ToolCallArguments {
                            index,
                            delta: args.to_string(),
                            partial: Some(args.clone()),
                        }));
                    }
                    *value = Some(args);
                } else {
                    let full = match item.get("arguments") {
                        Some(Value::String(full)) => Some(full.clone()),
                        // Sent as a JSON value (some gateways).
                        Some(v @ (Value::Object(_) | Value::Array(_))) => Some(v.to_string()),
                        _ => None,
                    };
                    if let Some(full) = full {
                        self.finish_arguments(at, &full, out);
                    }
                }
                out.push(ModelEvent::Delta(ModelDelta::ToolCallEnd { index }));
            }
            Body::Ignored => {}
        }
    }

    fn on_terminal(&mut self, response: &Value, out: &mut Vec<ModelEvent>) {
        if let Some(usage) = parse_usage(&response["usage"]) {
            self.usage = Some(usage);
        }
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
        if self.response_id.is_none() {
            self.response_id = v
                .pointer("/response/id")
                .and_then(Value::as_str)
                .map(str::to_owned);
        }
        match kind {
            "response.output_item.added" => self.on_item_added(v, out),
            "response.output_item.done" => {
                let oi = v.get("output_index").and_then(Value::as_u64);
                self.on_item_done(&v["item"], oi, out);
            }
            "response.output_text.delta" => {
                let delta = str_of(v, "delta").unwrap_or_default();
                if !delta.is_empty() {
                    let at = self.find_or_open(v, || Body::Message {
                        text: String::new(),
                        refusal: String::new(),
                    });
                    if let Body::Message { text, .. } = &mut self.items[at].body {
                        text.push_str(delta);
                        out.push(ModelEvent::Delta(ModelDelta::Text {
                            delta: delta.to_owned(),
                        }));
                    }
                }
            }
            "response.refusal.delta" => {
                let delta = str_of(v, "delta").unwrap_or_default();
                let at = self.find_or_open(v, || Body::Message {
                    text: String::new(),
                    refusal: String::new(),
                });
                if let Body::Message { refusal, .. } = &mut self.items[at].body {
                    refusal.push_str(delta);
                }
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                let delta = str_of(v, "delta").unwrap_or_default();
                if !delta.is_empty() {
                    let index = v
                        .get("summary_index")
                        .or_else(|| v.get("content_index"))
                        .and_then(Value::as_u64);
                    let at = self.find_or_open(v, || Body::Reasoning {
                        text: String::new(),
                        summary_index: None,
                        encrypted: None,
                    });
                    if let Body::Reasoning {
                        text,
                        summary_index,
                        ..
                    } = &mut self.items[at].body
                    {
                        let mut piece = String::new();
                        if !text.is_empty() && index != *summary_index {
                            piece.push_str("\n\n"); // a new summary part
                        }
                        *summary_index = index;
                        piece.push_str(delta);
                        text.push_str(&piece);
                        out.push(ModelEvent::Delta(ModelDelta::Thinking { delta: piece }));
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                let delta = str_of(v, "delta").unwrap_or_default();
                if !delta.is_empty() {
                    if let Some(at) = self.find(v) {
                        self.push_arguments(at, delta, out);
                    }
                }
            }
            "response.function_call_arguments.done" => {
                if let (Some(at), Some(full)) = (self.find(v), str_of(v, "arguments")) {
                    self.finish_arguments(at, full, out);
                }
            }
            "response.completed" => {
                self.on_terminal(&v["response"], out);
                self.terminal = Some(Terminal::Completed);
                return Ok(true);
            }
            "response.incomplete" => {
                let response = &v["response"];
                self.on_terminal(response, out);
                let reason = response
                    .pointer("/incomplete_details/reason")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                self.terminal = Some(Terminal::Incomplete(reason));
                return Ok(true);
            }
            "response.failed" => {
                let response = &v["response"];
                if let Some(usage) = parse_usage(&response["usage"]) {
                    self.usage = Some(usage);
                }
                let (code, message) = match response.get("error").filter(|e| e.is_object()) {
                    Some(err) => error_fields(err, "failed"),
                    None => ("failed".to_owned(), "the response failed".to_owned()),
                };
                self.terminal = Some(Terminal::Failed { code, message });
                return Ok(true);
            }
            "error" => {
                let err = v.get("error").filter(|e| e.is_object()).unwrap_or(v);
                let (code, message) = error_fields(err, "error");
                return Err(ModelError::Provider { code, message });
            }
            _ => {}
        }
        Ok(false)
    }
}

/// The provider data of an output item of type `kind`: its id (`msg_…`, `fc_…`), when it has
/// one.
fn item_data(id: &str, kind: &str) -> Option<ProviderData> {
    (!id.is_empty()).then(|| ProviderData::new(PROVIDER, json!({"id": id, "type": kind})))
}

/// The id a part was recorded with (see [`item_data`]), when it was an item of type `kind`: an
/// id goes back only on an item of its own type (a search call replayed as a plain function call
/// when search is off goes without).
fn item_id<'d>(data: Option<&'d ProviderData>, kind: &str) -> Option<&'d str> {
    let data = data?;
    let recorded = data.get(PROVIDER, "type");
    if recorded.is_some_and(|t| t != kind) {
        return None;
    }
    data.get(PROVIDER, "id")
}

/// A `tool_search_call` the client must answer (server-executed ones carry no `call_id`).
fn is_client_search(item: &Value) -> bool {
    match str_of(item, "execution") {
        Some("server") => false,
        Some("client") => true,
        _ => str_of(item, "call_id").is_some(),
    }
}

impl WireParser for ResponsesParser {
    fn on_event(&mut self, event: SseEvent, out: &mut Vec<ModelEvent>) -> Result<bool, ModelError> {
        let data = event.data.trim();
        if data.is_empty() || data == "[DONE]" {
            return Ok(false);
        }
        let payload: Value = super::lossy_json::parse_value(data).map_err(|e| {
            ModelError::stream(
                crate::model::StreamErrorKind::Unreadable,
                format!("unreadable event from the provider ({e}): {data:.200}"),
            )
        })?;
        let kind = str_of(&payload, "type")
            .map(str::to_owned)
            .unwrap_or_else(|| event.event.clone());
        self.on_payload(&kind, &payload, out)
    }

    fn finish(&mut self) -> Result<Message, ModelError> {
        let stop = match &self.terminal {
            Some(Terminal::Failed { code, message }) => {
                return Err(ModelError::Provider {
                    code: code.clone(),
                    message: message.clone(),
                });
            }
            Some(Terminal::Incomplete(reason)) => match reason.as_deref() {
                Some("content_filter") => StopReason::Refusal,
                _ => StopReason::Length,
            },
            Some(Terminal::Completed) | None => {
                let text = self
                    .items
                    .iter()
                    .any(|i| matches!(&i.body, Body::Message { text, .. } if !text.is_empty()));
                let refusal = self.items.iter().any(
                    |i| matches!(&i.body, Body::Message { refusal, .. } if !refusal.is_empty()),
                );
                if self.calls > 0 {
                    StopReason::ToolUse
                } else if refusal && !text {
                    StopReason::Refusal
                } else {
                    StopReason::Stop
                }
            }
        };
        let mut message = self.partial();
        message.stop_reason = Some(stop);
        message.error_message = None;
        Ok(message)
    }

    fn partial(&self) -> Message {
        let mut parts = Vec::new();
        let mut refusals = String::new();
        for item in &self.items {
            match &item.body {
                Body::Reasoning {
                    text, encrypted, ..
                } => {
                    if text.is_empty() && encrypted.is_none() {
                        continue;
                    }
                    let signature = encrypted
                        .as_ref()
                        .map(|e| json!({"id": item.id, "encrypted_content": e}).to_string());
                    parts.push(Part::Thinking(ThinkingPart {
                        thinking: text.clone(),
                        redacted: text.is_empty() && signature.is_some(),
                        signature,
                    }));
                }
                Body::Message { text, refusal } => {
                    if !text.is_empty() {
                        parts.push(Part::Text {
                            text: text.clone(),
                            provider_data: item_data(&item.id, "message"),
                        });
                    }
                    refusals.push_str(refusal);
                }
                Body::Call {
                    call_id,
                    name,
                    args,
                    replaced,
                    value,
                    ..
                } => {
                    let arguments = match value {
                        Some(v) => ToolArguments::Json(v.clone()),
                        None => ToolArguments::parse(replaced.as_deref().unwrap_or(args.text())),
                    };
                    parts.push(Part::ToolCall(ToolCallPart {
                        id: call_id.clone(),
                        tool_name: name.clone(),
                        arguments,
                        provider_data: item_data(
                            &item.id,
                            if value.is_some() {
                                "tool_search_call"
                            } else {
                                "function_call"
                            },
                        ),
                    }));
                }
                Body::Ignored => {}
            }
        }
        // A refusal keeps its text (DESIGN: stop reason `refusal` with the refusal as text).
        if !refusals.is_empty() && !parts.iter().any(|p| matches!(p, Part::Text { .. })) {
            parts.push(Part::text(refusals));
        }
        let mut message = Message::assistant(parts, StopReason::Error);
        message.model = Some(self.model.clone());
        message.provider = Some(PROVIDER.to_owned());
        message.usage = self.usage;
        message.response_id.clone_from(&self.response_id);
        message
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::providers::sse::SseDecoder;

    fn frame(v: Value) -> String {
        format!("event: {}\ndata: {v}\n\n", v["type"].as_str().unwrap_or(""))
    }

    fn parse(events: &[Value]) -> (Vec<ModelEvent>, Result<Message, ModelError>) {
        let body: String = events.iter().cloned().map(frame).collect();
        let mut decoder = SseDecoder::new();
        let mut sse = Vec::new();
        decoder.push(body.as_bytes(), &mut sse).unwrap();
        let mut parser = ResponsesParser::new("m".into(), "find_tools".into());
        let mut out = Vec::new();
        for e in sse {
            match parser.on_event(e, &mut out) {
                Ok(true) => return (out, parser.finish()),
                Ok(false) => {}
                Err(e) => return (out, Err(e)),
            }
        }
        (
            out,
            Err(ModelError::stream(
                crate::model::StreamErrorKind::Cut,
                "no terminal",
            )),
        )
    }

    fn completed(output: Value) -> Value {
        json!({"type": "response.completed", "response": {"status": "completed", "output": output,
            "usage": {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3}}})
    }

    #[test]
    fn a_client_tool_search_call_becomes_a_call_of_the_search_tool() {
        let item = json!({"id": "ts_1", "type": "tool_search_call", "call_id": "call_s",
            "execution": "client", "arguments": {}, "status": "in_progress"});
        let done = json!({"id": "ts_1", "type": "tool_search_call", "call_id": "call_s",
            "execution": "client", "arguments": {"query": "email"}, "status": "completed"});
        let (events, message) = parse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            completed(json!([done])),
        ]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        let calls: Vec<_> = message.tool_calls().collect();
        let mut want = ToolCallPart::new("call_s", "find_tools", json!({"query": "email"}));
        want.provider_data = item_data("ts_1", "tool_search_call");
        assert_eq!(calls, [&want]);
        assert_eq!(message.stop_reason, Some(StopReason::ToolUse));
        let usage = message.usage.unwrap_or_default();
        assert_eq!((usage.input_tokens, usage.cache_read_tokens), (6, 4));
        let deltas: Vec<_> = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(d) => Some(d.clone()),
                _ => None,
            })
            .collect();
        assert!(
            matches!(&deltas[0], ModelDelta::ToolCallStart { name, .. } if name == "find_tools")
        );
        assert!(
            matches!(&deltas[1], ModelDelta::ToolCallArguments { delta, .. } if delta == r#"{"query":"email"}"#)
        );
        assert!(matches!(&deltas[2], ModelDelta::ToolCallEnd { index: 0 }));
    }

    #[test]
    fn server_tool_search_items_are_ignored() {
        let call = json!({"id": "ts_1", "type": "tool_search_call", "call_id": null,
            "execution": "server", "arguments": {"paths": ["crm"]}, "status": "completed"});
        let output = json!({"id": "tso_1", "type": "tool_search_output", "call_id": null,
            "execution": "server", "tools": [], "status": "completed"});
        let (_, message) = parse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": call}),
            json!({"type": "response.output_item.added", "output_index": 1, "item": output}),
            completed(json!([call, output])),
        ]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(message.tool_calls().count(), 0);
        assert_eq!(message.stop_reason, Some(StopReason::Stop));
    }

    #[test]
    fn encrypted_reasoning_is_kept_in_the_signature_and_summary_parts_are_separated() {
        let added =
            json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "enc-a"});
        let done = json!({"id": "rs_1", "type": "reasoning", "encrypted_content": "enc-b",
            "summary": [{"type": "summary_text", "text": "one"}, {"type": "summary_text", "text": "two"}]});
        let (_, message) = parse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": added}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 0, "delta": "one"}),
            json!({"type": "response.reasoning_summary_text.delta", "output_index": 0, "item_id": "rs_1", "summary_index": 1, "delta": "two"}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": done}),
            completed(json!([done])),
        ]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        let Part::Thinking(t) = &message.content[0] else {
            panic!("{:?}", message.content)
        };
        assert_eq!(t.thinking, "one\n\ntwo");
        assert!(!t.redacted);
        let sig: Value = serde_json::from_str(t.signature.as_deref().unwrap_or(""))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(sig, json!({"id": "rs_1", "encrypted_content": "enc-b"}));
        assert_eq!(
            reasoning_item(t),
            Some(
                json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "enc-b",
                "summary": [{"type": "summary_text", "text": "one\n\ntwo"}]})
            )
        );
    }

    #[test]
    fn done_events_fix_up_what_the_deltas_missed() {
        // No deltas at all: arguments and text only in the `.done` items.
        let call = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add", "arguments": ""});
        let call_done = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add", "arguments": "{\"x\":1}"});
        let msg_done = json!({"id": "m1", "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "hello"}]});
        let (events, message) = parse(&[
            json!({"type": "response.output_item.added", "output_index": 0, "item": call}),
            json!({"type": "response.output_item.done", "output_index": 0, "item": call_done}),
            // The message item only appears in the terminal output.
            completed(json!([call_done, msg_done])),
        ]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(message.text(), "hello");
        let calls: Vec<_> = message.tool_calls().collect();
        assert_eq!(calls[0].arguments, ToolArguments::Json(json!({"x": 1})));
        let text_deltas: String = events
            .iter()
            .filter_map(|e| match e {
                ModelEvent::Delta(ModelDelta::Text { delta }) => Some(delta.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text_deltas, "hello", "fix-ups are streamed as deltas too");
    }

    #[test]
    fn error_events_flat_or_nested_are_provider_errors() {
        let (_, flat) = parse(&[
            json!({"type": "error", "code": "server_error", "message": "boom", "param": null}),
        ]);
        assert_eq!(
            flat.err(),
            Some(ModelError::Provider {
                code: "server_error".into(),
                message: "boom".into()
            })
        );
        let (_, failed) = parse(&[json!({"type": "response.failed", "response": {
            "status": "failed", "error": {"code": "rate_limit_exceeded", "message": "slow down"}}})]);
        assert_eq!(
            failed.err(),
            Some(ModelError::Provider {
                code: "rate_limit_exceeded".into(),
                message: "slow down".into()
            })
        );
    }

    #[test]
    fn item_ids_are_kept_and_replayed_to_the_same_model_only() {
        let msg = json!({"id": "msg_1", "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": "hi"}]});
        let call = json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "add",
            "arguments": "{}"});
        let (_, message) = parse(&[completed(json!([msg, call]))]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            message.content[0],
            Part::Text {
                text: "hi".into(),
                provider_data: item_data("msg_1", "message"),
            }
        );
        let history = vec![
            Message::user("q"),
            message,
            Message::tool_result(ToolResultPart::success("c1", "add", "2")),
        ];
        let body = |model: &str| {
            let config = ProviderConfig::new("http://x").model(model);
            build_body(&config, &ModelRequest::new(history.clone()))
        };
        let same = body("m");
        assert_eq!(
            same["input"][1],
            json!({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                "content": [{"type": "output_text", "text": "hi", "annotations": []}]})
        );
        assert_eq!(
            same["input"][2],
            json!({"type": "function_call", "call_id": "c1", "name": "add", "arguments": "{}",
                "id": "fc_1"})
        );
        let other = body("m2");
        assert_eq!(
            other["input"][1],
            json!({"type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": "hi"}]})
        );
        assert!(other["input"][2].get("id").is_none());
    }

    #[test]
    fn incomplete_content_filter_is_a_refusal() {
        let (_, message) = parse(&[json!({"type": "response.incomplete", "response": {
            "status": "incomplete", "incomplete_details": {"reason": "content_filter"}, "output": []}})]);
        let message = message.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(message.stop_reason, Some(StopReason::Refusal));
    }
}
