//! A mock LLM provider server for tests, benchmarks and demos.
//!
//! One JSON [`Script`] drives four streaming wire formats, each mirroring the recorded provider
//! streams in `crates/agentloop/tests/fixtures/providers/`:
//!
//! | endpoint | format |
//! |---|---|
//! | `POST /v1/chat/completions`, `POST /chat/completions` | OpenAI Chat Completions SSE (`data:` lines, `data: [DONE]`) |
//! | `POST /v1/responses`, `POST /responses` | OpenAI Responses SSE (`event:` + `data:`) |
//! | `POST /v1/messages`, `POST /messages` | Anthropic Messages SSE (`event:` + `data:`) |
//! | `POST /v1beta/models/{model}:streamGenerateContent` (also `/v1/models/…`) | Google Gemini SSE (`data:` + `\r\n\r\n`, no terminal event; see below) |
//!
//! Every request is answered with a stream (`content-type: text/event-stream`), whatever its
//! `stream` flag. The OpenAI base URL is `{base_url}/v1`; the Anthropic and Gemini base URL is
//! `{base_url}`. `GET /v1/models` lists the script's models in OpenAI's shape (Anthropic's when
//! the request carries `anthropic-version`), `GET /v1beta/models` in Gemini's.
//!
//! The server speaks HTTP/1.1 and HTTP/2 cleartext with prior knowledge (h2c) on the same port;
//! one h2c connection carries up to [`MockServerBuilder::http2_max_concurrent_streams`]
//! concurrent streams (100,000 by default).
//!
//! This crate must not depend on `agentloop`: agentloop's own tests use it as a dev-dependency.
//!
//! # Example
//!
//! ```
//! use agentloop_testkit::{MockServer, Script};
//!
//! let script = Script::from_json(r#"{
//!   "turns": [
//!     {"text": "Let me check.", "tool_calls": [{"id": "call_1", "name": "get_weather",
//!                                              "arguments": {"city": "Paris"}, "arg_chunks": 3}]},
//!     {"text": "It is sunny.", "chunk_size": 4, "usage": {"input_tokens": 50, "output_tokens": 5}}
//!   ]
//! }"#).unwrap();
//! let server = MockServer::start(script);
//! // Point an OpenAI client at `server.openai_base_url()`, an Anthropic client at
//! // `server.base_url()`, run the conversation, then:
//! assert!(server.violations().is_empty());
//! ```
//!
//! # Turn selection
//!
//! * **`by_position`** (default): the turn for a request is the number of assistant turns
//!   already in its history, so any number of conversations can play the same script
//!   concurrently and independently.
//!   - Chat Completions: messages with `role: "assistant"`.
//!   - Anthropic: messages with `role: "assistant"`.
//!   - Gemini: maximal runs of `contents` with `role: "model"`.
//!   - Responses: maximal runs of model-output items in `input` (assistant `message`,
//!     `function_call`, `reasoning`, `tool_search_call` and the other `*_call` items); any other
//!     item (user/system/developer message, `function_call_output`, `tool_search_output`, …) ends
//!     a run. When the client echoes this mock's item ids (`rs_mock_<n>_<i>`, `msg_mock_<n>`,
//!     `ts_mock_<n>_<i>`, `fc_mock_<n>_<i>`), items of the same response `n` count as one turn
//!     even when outputs are interleaved between them. A string `input` is turn 0.
//!     `previous_response_id` is not followed: send the whole history.
//!
//!   Past the last turn: HTTP 500 (`code: "script_exhausted"`), or with `"repeat": true` the
//!   turn index modulo the number of turns.
//! * **`sequential`**: requests take entries from one global queue in arrival order. A turn with
//!   `n` faults occupies `n + 1` entries (its faults in order, then the normal answer). Past the
//!   end: HTTP 500, or with `"repeat": true` the queue starts over.
//!
//! # Faults and attempts
//!
//! A turn's `faults[i]` applies to attempt `i + 1` at that turn; later attempts are served
//! normally. In `by_position` mode attempts are counted per (wire format, conversation
//! fingerprint, turn index), where the fingerprint is the FNV-1a 64-bit hash of the compact JSON serialization of
//! the first user message's `content` (the `input` string itself for a string `input`; the
//! system prompt is not part of it). Two conversations with the same first user message share
//! attempt counters, so give concurrent conversations distinct first messages when they use
//! faults. See [`Fault`] for what each fault does on the wire.
//!
//! # Request invariants
//!
//! Before a turn is selected, every request's history is checked: each tool call has exactly one
//! result and each result refers to an earlier call (Chat: assistant `tool_calls[].id` vs `tool`
//! messages' `tool_call_id`; Responses: `function_call`/`function_call_output` and client
//! `tool_search_call`/`tool_search_output` by `call_id`; Anthropic: assistant `tool_use` block ids
//! vs user `tool_result` blocks' `tool_use_id`; Gemini, which has no call ids: the
//! `functionCall` parts of a model content vs the `functionResponse` parts of the next content,
//! same number, same names in the same order, and the same `id` when the call has one), and each
//! call's arguments are a JSON object (Chat and Responses: `arguments` is JSON text of an object;
//! Anthropic: `input` is an object; Gemini: `args` is an object), as real servers require. Gemini
//! requests are also checked as Gemini 3 checks them: the first `functionCall` of each model
//! content in the current turn (after the last user content that is not only function
//! responses) must carry a `thoughtSignature` (the mock's own, a replayed one, or Google's
//! `skip_thought_signature_validator`), else HTTP 400 "Function call is missing a
//! thought_signature". A request that breaks it gets HTTP 400 (or the status set with
//! [`MockServerBuilder::reject_status`], e.g. 500 like llama.cpp) with a provider-shaped JSON
//! error explaining why; one whose body is not JSON gets 400. Neither consumes a turn or attempt;
//! both are listed in [`MockServer::violations`].
//!
//! # Tool search on the Responses wire
//!
//! A turn's `tool_searches` become `tool_search_call` output items, emitted after the message
//! item and before the function calls, with no delta events:
//!
//! ```text
//! event: response.output_item.added
//! data: {"type":"response.output_item.added","sequence_number":N,"output_index":I,
//!        "item":{"id":"ts_mock_R_I","type":"tool_search_call","call_id":"<call_id>",
//!                "execution":"client","arguments":{},"status":"in_progress"}}
//!
//! event: response.output_item.done
//! data: {"type":"response.output_item.done","sequence_number":N+1,"output_index":I,
//!        "item":{"id":"ts_mock_R_I","type":"tool_search_call","call_id":"<call_id>",
//!                "execution":"client","arguments":<arguments as JSON>,"status":"completed"}}
//! ```
//!
//! The item also appears in the terminal `response.completed` output. The client answers with an
//! input item `{"type": "tool_search_output", "call_id": "<call_id>", "execution": "client",
//! "tools": [...]}`. On the Chat and Anthropic wires a tool search is an ordinary tool call of
//! the function `search_tools` (or the search's `name`).
//!
//! # The Gemini wire
//!
//! One `data:` event per thinking piece (`{"text": …, "thought": true}` parts) and per text
//! piece, then one event with every function call (tool searches first, as plain function calls),
//! then the final event: an empty text part, `finishReason` (`STOP`, also for function calls, or
//! `MAX_TOKENS`) and the full `usageMetadata`. There is no terminal event: the body ends
//! (`eof_without_terminal` drops the final event, so no `finishReason` arrives). Function calls
//! carry an `id` only when the script gives one. The first function call, or else the final
//! empty text part, carries a `thoughtSignature`: the turn's `thinking_signature`, or
//! `mock-sig-<responseId>`.

/// Generates by-value builder setters inside an `impl` block: each entry
/// `pub fn NAME(ARGS) => FIELD = VALUE;` becomes
/// `pub fn NAME(mut self, ARGS) -> Self { self.FIELD = VALUE; self }`, with the entry's doc
/// comment. (`agentloop::setters!` is the same idea; this crate does not depend on agentloop, so
/// that agentloop's own tests can use it.)
macro_rules! setters {
    ($(
        $(#[$doc:meta])*
        pub fn $name:ident($($arg:ident: $ty:ty),+) => $field:ident = $value:expr;
    )*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $($arg: $ty),+) -> Self {
                self.$field = $value;
                self
            }
        )*
    };
}

pub mod external;
mod history;
mod script;
mod server;
mod wire;

pub use script::{
    Fault, Mode, Script, ScriptError, StopReason, ToolArguments, ToolCall, ToolSearch, Turn, Usage,
};
pub use server::{MockServer, MockServerBuilder, RecordedRequest, ServerError};
pub use wire::WireFormat;

/// FNV-1a 64-bit hash, as used for conversation fingerprints (exposed so tests can compute one).
pub fn fingerprint(first_user_content: &serde_json::Value) -> u64 {
    history::fnv1a64(first_user_content.to_string().as_bytes())
}
