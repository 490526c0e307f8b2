//! OpenAI Responses (`POST {base}/responses`, streaming, stateless: `store: false`, the whole
//! conversation is sent every time). The body is built in `request`, the stream parsed in
//! `stream`, client-executed tool search lives in `tool_search`; retries, timeouts, SSE and
//! message assembly come from the shared [`core`](super::core).
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
//! This adapter is the only one that runs tool search natively: its
//! [`capabilities`](crate::model::Model::capabilities) say so, and the agent loop then fills
//! [`ModelRequest::tool_search`] and [`ModelRequest::deferred_tools`] for it (for every other
//! model it offers the search as a plain function tool). Active when the request carries a
//! search tool (the registry's `local_tool_search` tool) and at least one deferred tool:
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
//!
//! [`replay`]: super::replay
//! [`replay::prepare`]: super::replay::prepare
//! [`ThinkingPart`]: crate::transcript::ThinkingPart
//! [`ModelDelta::Text`]: crate::model::ModelDelta::Text
//! [`ModelDelta::Thinking`]: crate::model::ModelDelta::Thinking
//! [`search_result_names`]: crate::tooling::search_result_names
//! [`TOOL_SEARCH_NAME`]: crate::tooling::TOOL_SEARCH_NAME

mod request;
mod stream;
mod tool_search;

#[cfg(test)]
mod tests;

use serde_json::json;

use super::ProviderConfig;
use super::core::{Adapter, ModelCapabilities, Protocol, WireBody, WireRequest};
use crate::model::{ModelError, ModelRequest};
use crate::transcript::ProviderData;

pub use stream::ResponsesParser;

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
pub type OpenAiResponses = Adapter<Responses>;

/// The Responses API protocol (see the module docs); [`OpenAiResponses`] is its adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Responses;

impl Adapter<Responses> {
    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::try_new(super::OPENAI_ENV.config())
    }
}

impl Protocol for Responses {
    type Parser = ResponsesParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn path(&self, _config: &ProviderConfig) -> String {
        "responses".to_owned()
    }

    // Authentication: the protocol's default, bearer.

    fn encode(
        &self,
        config: &ProviderConfig,
        request: &ModelRequest<'_>,
    ) -> WireRequest<ResponsesParser> {
        let body = request::build_body(config, request);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let parser = ResponsesParser::new(model, tool_search::search_name(request));
        WireRequest::new(WireBody::Json(body), parser)
    }

    /// Client-executed tool search runs natively here (see the module docs).
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default().with_native_tool_search(true)
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
