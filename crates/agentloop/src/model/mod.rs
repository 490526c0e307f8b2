//! The [`Model`] trait the agent loop talks to, the request it sends and the events it receives.
//!
//! A model turns a [`ModelRequest`] into a stream of [`ModelEvent`]s: any number of deltas (text,
//! thinking, tool-call pieces) and retries, then exactly one terminal event — [`ModelEvent::Done`]
//! or [`ModelEvent::Error`] — carrying the assembled assistant message. The loop tolerates models
//! that break this contract (a stream that just ends is treated as an error, anything after the
//! terminal event is ignored). Providers (HTTP adapters) and the scripted models for tests both
//! implement this trait; nothing here knows about tools' handlers.

mod assemble;
mod error;
mod fallback;
mod output_format;
mod scripted;
pub(crate) mod spans;

use std::borrow::Cow;
use std::fmt;
use std::pin::Pin;
use std::time::Duration;

use futures::Stream;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use assemble::{MessageAssembler, PartId};
pub use error::{ErrorSource, ModelError, StreamErrorKind};
pub use fallback::FallbackModel;
pub use output_format::OutputFormat;
pub use scripted::{FnModel, RecordedRequest, ScriptedModel, ScriptedTurn};

use crate::tooling::ToolSchema;
use crate::transcript::{Message, Role};

/// How hard the model should think, where the provider supports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ReasoningLevel {
    /// No reasoning.
    Off,
    /// The least reasoning the provider offers.
    Minimal,
    /// Low effort.
    Low,
    /// Medium effort.
    Medium,
    /// High effort.
    High,
    /// The most the provider offers.
    Xhigh,
}

crate::keywords! {
    ReasoningLevel;
    /// An unknown reasoning level name.
    error ParseReasoningLevelError: "reasoning level";
    Off => "off" | "none",
    Minimal => "minimal",
    Low => "low",
    Medium => "medium",
    High => "high",
    Xhigh => "xhigh",
}

/// An API key. Its `Debug` and `Display` never show the secret, so it cannot leak into logs,
/// errors or events by accident; [`expose`](ApiKey::expose) is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        ApiKey(secret.into())
    }
    /// The secret, for building an authorization header.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// One model call: the conversation so far and what the model may use.
///
/// The messages are borrowed from the loop's context when no hook changed them, so building a
/// request costs nothing per message; a `context` hook or a custom message makes an owned copy.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ModelRequest<'a> {
    /// Model id (`None`: the model's own default).
    pub model: Option<String>,
    /// System prompt (including any tool-guidance section).
    pub system_prompt: Option<String>,
    /// The conversation, oldest first. Custom messages have already been turned into user
    /// messages.
    pub messages: Cow<'a, [Message]>,
    /// Tools the model may call.
    pub tools: Cow<'a, [ToolSchema]>,
    /// For a model with [native tool search](ModelCapabilities::native_tool_search) only
    /// (the agent loop leaves it empty for every other model, and only such a model reads it):
    /// every registered deferred tool, loaded or not, in registration order (the registry's
    /// [`deferred_schemas`](crate::tooling::Registry::deferred_schemas); docs/ARCHITECTURE.md,
    /// "Tools and the executor"). Empty by default.
    pub deferred_tools: Cow<'a, [ToolSchema]>,
    /// For a model with [native tool search](ModelCapabilities::native_tool_search) only: the
    /// registry's `local_tool_search` tool, whose description and parameters the model's own
    /// search takes and whose calls the agent's executor runs. `None` by default.
    pub tool_search: Option<ToolSchema>,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Reasoning effort.
    pub reasoning: Option<ReasoningLevel>,
    /// Output-token limit.
    pub max_output_tokens: Option<u32>,
    /// API key override (`None`: the provider's configured key).
    pub api_key: Option<ApiKey>,
    /// Native structured output: the final answer must be JSON matching this schema (see
    /// [`crate::agent::output`]). `None` by default; adapters without native support ignore it.
    pub output: Option<OutputFormat>,
    /// Groups requests of one conversation in the provider's prompt cache (OpenAI's
    /// `prompt_cache_key`; other adapters ignore it). `None` by default.
    pub prompt_cache_key: Option<String>,
}

impl ModelRequest<'_> {
    /// A copy that owns its messages and tools (for a call made after the caller's borrow
    /// ended, such as a fallback model's).
    pub fn to_owned_request(&self) -> ModelRequest<'static> {
        self.with_lists(
            Cow::Owned(self.messages.to_vec()),
            Cow::Owned(self.tools.to_vec()),
            Cow::Owned(self.deferred_tools.to_vec()),
        )
    }

    /// A request borrowing this one's messages and tools (no copy).
    pub fn reborrow(&self) -> ModelRequest<'_> {
        self.with_lists(
            Cow::Borrowed(&self.messages),
            Cow::Borrowed(&self.tools),
            Cow::Borrowed(&self.deferred_tools),
        )
    }

    /// This request's settings with `messages`, `tools` and `deferred_tools` in place of its own.
    fn with_lists<'b>(
        &self,
        messages: Cow<'b, [Message]>,
        tools: Cow<'b, [ToolSchema]>,
        deferred_tools: Cow<'b, [ToolSchema]>,
    ) -> ModelRequest<'b> {
        ModelRequest {
            model: self.model.clone(),
            system_prompt: self.system_prompt.clone(),
            messages,
            tools,
            deferred_tools,
            tool_search: self.tool_search.clone(),
            temperature: self.temperature,
            reasoning: self.reasoning,
            max_output_tokens: self.max_output_tokens,
            api_key: self.api_key.clone(),
            output: self.output.clone(),
            prompt_cache_key: self.prompt_cache_key.clone(),
        }
    }
}

impl<'a> ModelRequest<'a> {
    /// A request for `messages` with nothing else set.
    pub fn new(messages: impl Into<Cow<'a, [Message]>>) -> Self {
        ModelRequest {
            model: None,
            system_prompt: None,
            messages: messages.into(),
            tools: Cow::Borrowed(&[]),
            deferred_tools: Cow::Borrowed(&[]),
            tool_search: None,
            temperature: None,
            reasoning: None,
            max_output_tokens: None,
            api_key: None,
            output: None,
            prompt_cache_key: None,
        }
    }

    /// An owned copy, detached from the loop's context.
    pub fn into_owned(self) -> ModelRequest<'static> {
        ModelRequest {
            model: self.model,
            system_prompt: self.system_prompt,
            messages: Cow::Owned(self.messages.into_owned()),
            tools: Cow::Owned(self.tools.into_owned()),
            deferred_tools: Cow::Owned(self.deferred_tools.into_owned()),
            tool_search: self.tool_search,
            temperature: self.temperature,
            reasoning: self.reasoning,
            max_output_tokens: self.max_output_tokens,
            api_key: self.api_key,
            output: self.output,
            prompt_cache_key: self.prompt_cache_key,
        }
    }
}

/// Converts extension-injected custom messages into user messages (what every model API
/// accepts). Borrows when there are none.
pub fn messages_for_model(messages: &[Message]) -> Cow<'_, [Message]> {
    if !messages.iter().any(|m| m.role == Role::Custom) {
        return Cow::Borrowed(messages);
    }
    Cow::Owned(
        messages
            .iter()
            .map(|m| {
                if m.role == Role::Custom {
                    let mut user = m.clone();
                    user.role = Role::User;
                    user.custom_type = None;
                    user
                } else {
                    m.clone()
                }
            })
            .collect(),
    )
}

/// A piece of an assistant message as it streams.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelDelta {
    /// More visible text.
    Text {
        /// The new text.
        delta: String,
    },
    /// More reasoning text.
    Thinking {
        /// The new text.
        delta: String,
    },
    /// A tool call begins.
    ToolCallStart {
        /// Position of the call among this message's tool calls.
        index: usize,
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
    },
    /// More argument text for a tool call.
    ToolCallArguments {
        /// Which call.
        index: usize,
        /// The new argument text.
        delta: String,
        /// The arguments parsed so far (a best-effort partial object), when the provider
        /// computes it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        partial: Option<Value>,
    },
    /// A tool call's arguments are complete.
    ToolCallEnd {
        /// Which call.
        index: usize,
    },
}

/// What a model stream yields.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum ModelEvent {
    /// A piece of the message.
    Delta(ModelDelta),
    /// The provider is retrying a failed request (nothing has been streamed yet).
    Retry {
        /// Which retry this is (1 for the first).
        attempt: u32,
        /// How long it waits before retrying.
        delay: Duration,
        /// Why.
        reason: String,
    },
    /// The model failed before streaming anything and a [`FallbackModel`] handed the same
    /// request to the next model in its chain.
    Fallback {
        /// The model that failed (`provider:model`).
        from: String,
        /// The model that gets the request now.
        to: String,
        /// Why `from` failed.
        error: ModelError,
    },
    /// Terminal: the assembled assistant message.
    Done(Message),
    /// Terminal: the model failed; `message` is the partial assistant message with
    /// `stop_reason: error` (or `aborted`) and its `error_message`.
    Error {
        /// The partial message.
        message: Message,
        /// What went wrong.
        error: ModelError,
    },
}

/// The stream a model returns.
pub type ModelStream = Pin<Box<dyn Stream<Item = ModelEvent> + Send>>;

/// A language model the agent loop can call.
///
/// Implementations build everything they need from the request synchronously (e.g. serialize the
/// HTTP body) and return a `'static` stream, so a request never has to outlive the call. Dropping
/// the stream cancels the call.
pub trait Model: Send + Sync {
    /// Starts a call.
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream;

    /// Provider name recorded on assistant messages (e.g. `"openai_chat"`).
    fn provider(&self) -> &str {
        "unknown"
    }

    /// The provider endpoint's base URL, when the model talks to one over HTTP (telemetry
    /// reports its host and port as `server.address`/`server.port`).
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// The model id this model uses when a request names none (e.g. `"gpt-5"`), if configured.
    fn model_id(&self) -> Option<&str> {
        None
    }

    /// What this model can do beyond the common request (default: nothing more). The agent
    /// loop reads it to decide how to offer features only some providers have natively.
    fn capabilities(&self) -> ModelCapabilities {
        ModelCapabilities::default()
    }
}

/// What a [`Model`] can do beyond the common request ([`Model::capabilities`]). Everything is
/// off by default; a model that leaves it so still gets every feature, emulated by the loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct ModelCapabilities {
    /// The provider runs client-executed tool search natively (the OpenAI Responses API's
    /// `tool_search` with client execution). Then the agent loop fills
    /// [`ModelRequest::deferred_tools`] and [`ModelRequest::tool_search`] and leaves the search
    /// tool out of [`ModelRequest::tools`]; otherwise it offers the registry's
    /// `local_tool_search` tool as a plain function tool, with the same effect, and those two
    /// fields stay empty.
    pub native_tool_search: bool,
}

impl ModelCapabilities {
    /// Sets [`native_tool_search`](Self::native_tool_search).
    pub fn with_native_tool_search(mut self, on: bool) -> Self {
        self.native_tool_search = on;
        self
    }

    /// What both `self` and `other` can do (a fallback chain offers only what every model in
    /// it supports, since any of them may get the request).
    pub fn intersect(self, other: ModelCapabilities) -> ModelCapabilities {
        ModelCapabilities {
            native_tool_search: self.native_tool_search && other.native_tool_search,
        }
    }
}

impl<M: Model + ?Sized> Model for std::sync::Arc<M> {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        (**self).stream(request)
    }
    fn provider(&self) -> &str {
        (**self).provider()
    }
    fn base_url(&self) -> Option<&str> {
        (**self).base_url()
    }
    fn model_id(&self) -> Option<&str> {
        (**self).model_id()
    }
    fn capabilities(&self) -> ModelCapabilities {
        (**self).capabilities()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_keys_never_print() {
        let key = ApiKey::new("sk-secret-123");
        assert!(!format!("{key:?}").contains("sk-secret"));
        assert!(!format!("{key}").contains("sk-secret"));
        let mut req = ModelRequest::new(vec![]);
        req.api_key = Some(key);
        assert!(!format!("{req:?}").contains("sk-secret"));
    }

    #[test]
    fn custom_messages_become_user_messages_only_when_present() {
        let plain = vec![Message::user("a")];
        assert!(matches!(messages_for_model(&plain), Cow::Borrowed(_)));
        let mixed = vec![
            Message::user("a"),
            Message::custom("note", vec![crate::transcript::Part::text("b")]),
        ];
        let converted = messages_for_model(&mixed);
        assert_eq!(converted[1].role, Role::User);
        assert_eq!(converted[1].text(), "b");
        assert_eq!(mixed[1].role, Role::Custom, "the original is untouched");
    }

    #[test]
    fn reasoning_levels_parse() {
        assert_eq!("xhigh".parse::<ReasoningLevel>(), Ok(ReasoningLevel::Xhigh));
        assert_eq!("OFF".parse::<ReasoningLevel>(), Ok(ReasoningLevel::Off));
        assert!("extreme".parse::<ReasoningLevel>().is_err());
    }
}
