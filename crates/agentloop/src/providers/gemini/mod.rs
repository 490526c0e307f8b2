//! Google Gemini, native (`POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`,
//! key in `x-goog-api-key`): the adapter, its settings and the thought-signature contract. The
//! request body is built in `request`, the stream parsed in `stream`; retries, timeouts, the
//! event cap and message assembly come from the shared [`core`](super::core), the
//! cross-provider rules from [`replay`].
//!
//! # Request
//!
//! | neutral | Gemini |
//! |---|---|
//! | system prompt | `systemInstruction: {parts: [{text}]}` (omitted when blank) |
//! | user text / image | `{role: "user", parts: [{text}, {inlineData: {mimeType, data}}]}` |
//! | assistant text | `{text}` in a `{role: "model"}` content, with its `thoughtSignature` when it has one |
//! | thinking, same provider and model | `{text, thought: true, thoughtSignature?}` |
//! | thinking from another provider or model | plain text ([`replay::prepare`]) |
//! | tool call | `{functionCall: {name, args, id?}, thoughtSignature?}`; arguments that are not a JSON object are sent as `{}` ([`replay`]) |
//! | tool results | `{functionResponse: {name, response: {output} or {error}, id?}}` parts, all results of one turn in **one** user content, in call order, then any images as `inlineData` parts |
//! | tools | `tools: [{functionDeclarations: [{name, description, parametersJsonSchema}]}]` (full JSON Schema, not the OpenAPI subset of `parameters`) |
//! | temperature, max output tokens | `generationConfig.temperature`, `generationConfig.maxOutputTokens` |
//! | reasoning level | `generationConfig.thinkingConfig` — see [`thinking_config`] |
//! | native structured output | `generationConfig.responseMimeType: "application/json"`, `responseJsonSchema` |
//!
//! Gemini has no tool-call ids: a call is answered by a `functionResponse` with the same name,
//! in order. Calls get unique ids here (`{responseId}-{n}`, or a random prefix when the response
//! has no id); when Gemini does send `functionCall.id` (Gemini 3 does), that id is used and sent
//! back on the call and its response.
//!
//! # Thought signatures
//!
//! Thinking models attach an encrypted `thoughtSignature` to parts of their reply: to the first
//! function call of each step, and to a text part (in a stream often an empty text part in the
//! last chunk). They must be sent back on the same parts, to the same model: Gemini 3 answers
//! HTTP 400 ("Function call is missing a thought_signature") when the first function call of a
//! step in the current turn comes back without one. The parser keeps each signature in the part
//! it came with — [`ProviderData`] `{"thoughtSignature"}` on text and tool calls (a signature on
//! an empty text part joins the text before it), [`ThinkingPart::signature`] on thoughts — so the
//! session store keeps them too. On replay to the same provider and model they go back where
//! they came from. A function call without a signature (a transcript from another provider or
//! model, an old session, a model that sent none) gets the sentinel [`SKIP_SIGNATURE`], the value
//! Google documents for history the model did not produce — except after a signed call of the
//! same turn: Gemini signs only the first of parallel calls, and the others go back unsigned, as
//! they came.
//!
//! # Response
//!
//! Each SSE event is a `GenerateContentResponse`; only candidate 0 is assembled.
//!
//! | wire | neutral |
//! |---|---|
//! | `{text}` | text, [`ModelDelta::Text`] |
//! | `{text, thought: true}` | thinking, [`ModelDelta::Thinking`] |
//! | `{functionCall: {name, args, id?}}` (whole, in one part) | a tool call: `ToolCallStart`, one `ToolCallArguments` with the arguments, `ToolCallEnd` |
//! | `thoughtSignature` on any part | kept on that part (see above) |
//! | `executableCode`, `codeExecutionResult`, `inlineData` and other parts | ignored |
//! | `usageMetadata` (cumulative; the last one wins) | `input_tokens` = `promptTokenCount` − `cachedContentTokenCount` + `toolUsePromptTokenCount`; `cache_read_tokens` = `cachedContentTokenCount`; `output_tokens` = `candidatesTokenCount` + `thoughtsTokenCount` (thoughts are billed as output) |
//! | `responseId`, `modelVersion` | `Message::response_id`; the model when the request named none |
//! | `{"error": {code, message, status}}` event | [`ModelError::Provider`] with the status as code |
//!
//! Gemini sends no terminal event: the body ends after the chunk carrying `finishReason`. A
//! `finishReason` may also arrive mid-stream (Gemini 2.5 with code execution sends `STOP` and
//! goes on), so the stream ends at the end of the body, once a `finishReason` (or a
//! `promptFeedback.blockReason`) has been seen; a body that ends before that is the usual
//! "stream ended before its terminal event" error.
//!
//! | `finishReason` | [`StopReason`](crate::transcript::StopReason) |
//! |---|---|
//! | `STOP` | `ToolUse` when the reply has function calls (Gemini says `STOP` for them), else `Stop` |
//! | `MAX_TOKENS` | `Length` |
//! | `SAFETY`, `RECITATION`, `BLOCKLIST`, `PROHIBITED_CONTENT`, `SPII`, `IMAGE_SAFETY`, `IMAGE_PROHIBITED_CONTENT`, `IMAGE_RECITATION` | `Refusal` (text streamed before it is kept) |
//! | `MALFORMED_FUNCTION_CALL`, `UNEXPECTED_TOOL_CALL`, `TOO_MANY_TOOL_CALLS`, `MISSING_THOUGHT_SIGNATURE` | an error ([`ModelError::Provider`] with the reason as code and `finishMessage`) |
//! | `promptFeedback.blockReason` without candidates | `Refusal`, empty message |
//! | `OTHER`, unknown, missing | `ToolUse` with function calls, else `Stop` |
//!
//! [`ProviderData`]: crate::transcript::ProviderData
//! [`ThinkingPart::signature`]: crate::transcript::ThinkingPart::signature
//! [`ModelDelta::Text`]: crate::model::ModelDelta::Text
//! [`ModelDelta::Thinking`]: crate::model::ModelDelta::Thinking
//! [`replay::prepare`]: super::replay::prepare
//! [`replay`]: super::replay

mod request;
mod stream;

#[cfg(test)]
mod tests;

pub use request::thinking_config;
pub use stream::GeminiParser;

use super::core::{Adapter, Protocol, WireBody, WireRequest};
use super::{EnvSettings, ProviderConfig};
use crate::model::{ApiKey, ModelError, ModelRequest};

/// The provider name recorded on messages.
pub const PROVIDER: &str = "gemini";

/// The default base URL (without the API version, as in the official SDKs).
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com";

/// The API version the adapter speaks (added to the base URL unless it already ends with a
/// version).
pub const API_VERSION: &str = "v1beta";

/// The `thoughtSignature` Google documents for function calls the model did not produce itself
/// (history from another provider or model): it tells the API to skip signature validation.
pub const SKIP_SIGNATURE: &str = "skip_thought_signature_validator";

/// Where Google's SDKs read the settings (`GOOGLE_API_KEY` wins over `GEMINI_API_KEY`).
const ENV: EnvSettings<'static> = EnvSettings {
    base_url_vars: &["GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"],
    api_key_vars: &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
    default_base_url: DEFAULT_BASE_URL,
};

/// Google Gemini adapter (Gemini Developer API). See the module docs for the wire mapping and
/// the thought-signature contract. The base URL has no version
/// (`https://generativelanguage.googleapis.com`); one ending in `/v1beta` or `/v1` is used as
/// is.
///
/// ```no_run
/// use agentloop::providers::{Gemini, ProviderConfig};
///
/// // generativelanguage.googleapis.com with GOOGLE_API_KEY or GEMINI_API_KEY:
/// let gemini = Gemini::from_env().unwrap();
/// // Explicit settings (the base URL has no version, as in the official SDKs):
/// let custom = Gemini::new(
///     ProviderConfig::new("https://generativelanguage.googleapis.com")
///         .api_key("AIza…")
///         .model("gemini-2.5-flash"),
/// );
/// # let _ = (gemini, custom);
/// ```
pub type Gemini = Adapter<GenerateContent>;

/// The Gemini `streamGenerateContent` protocol (see the module docs); [`Gemini`] is its
/// adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct GenerateContent;

/// `{version}/models?alt=sse` for a base URL, unless the base already names a version.
fn models_path(base_url: &str) -> String {
    let base = base_url.trim_end_matches('/');
    let versioned = ["/v1beta", "/v1", "/v1alpha"]
        .iter()
        .any(|v| base.ends_with(v));
    if versioned {
        "models?alt=sse".to_owned()
    } else {
        format!("{API_VERSION}/models?alt=sse")
    }
}

/// The model id as it goes in the path: without a `models/` prefix.
fn model_id(model: &str) -> &str {
    model.strip_prefix("models/").unwrap_or(model)
}

impl Adapter<GenerateContent> {
    /// `GEMINI_BASE_URL` or `GOOGLE_GEMINI_BASE_URL` (default
    /// `https://generativelanguage.googleapis.com`) and `GOOGLE_API_KEY` or `GEMINI_API_KEY`
    /// (`GOOGLE_API_KEY` wins when both are set, as in Google's SDKs).
    pub fn from_env() -> Result<Self, ModelError> {
        Gemini::try_new(ENV.config())
    }
}

impl Protocol for GenerateContent {
    type Parser = GeminiParser;

    fn provider(&self) -> &'static str {
        PROVIDER
    }

    fn path(&self, config: &ProviderConfig) -> String {
        models_path(&config.base_url)
    }

    fn headers(
        &self,
        _config: &ProviderConfig,
        key: Option<&ApiKey>,
    ) -> Vec<(&'static str, String)> {
        key.map(|key| ("x-goog-api-key", key.expose().to_owned()))
            .into_iter()
            .collect()
    }

    fn encode(
        &self,
        config: &ProviderConfig,
        request: &ModelRequest<'_>,
    ) -> WireRequest<GeminiParser> {
        let (model, body) = request::build_body(config, request);
        let segment = format!("{}:streamGenerateContent", model_id(&model));
        WireRequest::new(WireBody::Json(body), GeminiParser::new(model)).segment(segment)
    }
}
