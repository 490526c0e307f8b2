//! HTTP provider adapters implementing [`Model`](crate::model::Model): OpenAI Chat Completions
//! (and every OpenAI-compatible server), OpenAI Responses, Anthropic Messages and Google Gemini.
//!
//! Each adapter is one directory (`<name>/{mod.rs, request.rs, stream.rs}`): a
//! [`Protocol`](core::Protocol) that converts the neutral
//! [`ModelRequest`](crate::model::ModelRequest) into its wire body, and a
//! [`StreamParser`](core::StreamParser) that turns its server-sent events into neutral deltas
//! through the shared [`MessageAssembler`](crate::model::MessageAssembler). Everything else is
//! the shared [`core`]: the generic [`Adapter`] (each provider type is an alias of it, e.g.
//! [`OpenAiChat`] = `Adapter<ChatCompletions>`), the transport (retries with backoff that
//! honour `Retry-After`, an idle timeout, a clear error when the stream ends without its terminal
//! event), error and usage mapping. The core is public, so a provider can be written outside this
//! crate the same way. Adapters know nothing about tools' handlers.
//! What a provider needs back verbatim on a later turn (Gemini thought signatures, Responses item
//! ids, Anthropic thinking signatures) is kept on the parts it came with
//! ([`ProviderData`](crate::transcript::ProviderData), thinking signatures) and replayed only to
//! the same provider and model ([`replay`]).
//! API keys never appear in errors, events or logs: they live in [`ApiKey`](crate::model::ApiKey) and only reach the
//! wire as headers.

//!
//! # Features
//!
//! The core and the settings need feature `http` (hyper with rustls); each adapter has its own feature
//! (`openai-chat`, `openai-responses`, `anthropic`, `gemini`, each turning `http` on). The
//! stream-level helpers ([`sse`], [`partial_json`], [`replay`]) are always there.

#[cfg(feature = "anthropic")]
pub mod anthropic;
#[cfg(feature = "http")]
mod config;
#[cfg(feature = "http")]
pub mod core;
#[cfg(test)]
mod fixtures;
#[cfg(feature = "gemini")]
pub mod gemini;
#[cfg(feature = "openai-chat")]
pub mod openai_chat;
#[cfg(feature = "openai-responses")]
pub mod openai_responses;
#[cfg(all(test, feature = "http"))]
mod parser_tests;
/// The streamed-arguments parser, re-exported under its earlier path.
pub use crate::json::partial_json;
pub mod replay;
pub mod sse;

#[cfg(feature = "http")]
pub use self::core::{Adapter, RetryPolicy};
#[cfg(feature = "http")]
pub use self::core::{Proxy, ProxyRules};
#[cfg(feature = "anthropic")]
pub use anthropic::Anthropic;
#[cfg(any(feature = "anthropic", feature = "gemini"))]
pub(crate) use config::EnvSettings;
#[cfg(feature = "http")]
pub use config::{
    DEFAULT_MAX_TOOL_ARGUMENT_BYTES, DEFAULT_MAX_TOOL_CALLS, DEFAULT_POOL_IDLE_TIMEOUT,
    DEFAULT_REQUEST_TIMEOUT, HttpVersion, ProviderConfig,
};
#[cfg(any(feature = "openai-chat", feature = "openai-responses"))]
pub(crate) use config::{OPENAI_ENV, openai_reasoning_effort};
#[cfg(feature = "gemini")]
pub use gemini::Gemini;
#[cfg(feature = "openai-chat")]
pub use openai_chat::OpenAiChat;
#[cfg(feature = "openai-responses")]
pub use openai_responses::OpenAiResponses;

/// `url` with any `user:password@` part replaced by `***@`, for errors, events and stored
/// sessions. Works on text that does not parse as a URL too.
///
/// ```
/// use agentloop::providers::redact_url;
/// assert_eq!(redact_url("https://me:s3cret@gw.example/v1"), "https://***@gw.example/v1");
/// assert_eq!(redact_url("https://api.openai.com/v1"), "https://api.openai.com/v1");
/// ```
pub fn redact_url(url: &str) -> std::borrow::Cow<'_, str> {
    let Some(scheme_end) = url.find("://") else {
        return std::borrow::Cow::Borrowed(url);
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            std::borrow::Cow::Owned(format!("{}://***@{}", &url[..scheme_end], &rest[at + 1..]))
        }
        None => std::borrow::Cow::Borrowed(url),
    }
}
