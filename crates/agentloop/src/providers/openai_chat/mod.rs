//! OpenAI Chat Completions (`POST {base}/chat/completions`, streaming), which also covers
//! OpenAI-compatible servers: Ollama, vLLM, llama.cpp, OpenRouter and gateways.
//!
//! Tolerated quirks (each broke someone): usage missing or in a final chunk with empty
//! `choices`; reasoning as `reasoning_content` or `reasoning`; arguments streamed as text or sent
//! whole as an object; `""` or `null` arguments for a tool without parameters; tool-call deltas
//! keyed by `index` that repeat or omit `id` (a missing or duplicate id gets a unique one); content
//! and tool-call deltas in the same chunk; refusals on their own channel. Only choice 0 is
//! assembled (requests never ask for `n > 1`).
//!
//! The body is built in `request` (serialized straight from borrowed structs: no value tree per
//! turn), the stream parsed in `stream`; everything else comes from the shared
//! [`core`](super::core).

mod request;
mod stream;

#[cfg(test)]
mod tests;

use super::ProviderConfig;
use super::core::{Adapter, Protocol, WireBody, WireRequest};
use crate::model::{ModelError, ModelRequest};

pub use stream::ChatParser;

/// The provider name recorded on messages.
pub const PROVIDER: &str = "openai_chat";

/// OpenAI Chat Completions adapter. See the module docs.
///
/// ```no_run
/// use agentloop::providers::{OpenAiChat, ProviderConfig};
///
/// // api.openai.com with OPENAI_API_KEY / OPENAI_BASE_URL from the environment:
/// let openai = OpenAiChat::from_env().unwrap();
/// // A local OpenAI-compatible server (base URLs include `/v1`, as in the official SDK):
/// let ollama = OpenAiChat::new(ProviderConfig::new("http://localhost:11434/v1").model("llama3.2"));
/// # let _ = (openai, ollama);
/// ```
pub type OpenAiChat = Adapter<ChatCompletions>;

/// The Chat Completions protocol (see the module docs); [`OpenAiChat`] is its adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct ChatCompletions;

impl Adapter<ChatCompletions> {
    /// `OPENAI_BASE_URL` (default `https://api.openai.com/v1`) and `OPENAI_API_KEY`.
    pub fn from_env() -> Result<Self, ModelError> {
        Self::try_new(super::OPENAI_ENV.config())
    }
}

impl Protocol for ChatCompletions {
    type Parser = ChatParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn path(&self, _config: &ProviderConfig) -> String {
        "chat/completions".to_owned()
    }

    // Authentication: the protocol's default, bearer.

    fn encode(
        &self,
        config: &ProviderConfig,
        request: &ModelRequest<'_>,
    ) -> WireRequest<ChatParser> {
        let (body, model) = request::with_body(config, request, |body| {
            // The body holds strings, numbers and JSON values only: serializing it cannot fail.
            (
                serde_json::to_vec(body).unwrap_or_default(),
                body.model.to_owned(),
            )
        });
        WireRequest::new(WireBody::Bytes(body), ChatParser::new(model))
    }
}
