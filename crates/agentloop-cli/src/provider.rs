//! `--model PROVIDER:NAME` → a provider adapter, with its base URL and key from the flags and
//! the environment. Keys are read here and handed to the adapter; they are never printed.

use std::sync::Arc;

use agentloop::model::Model;
use agentloop::providers::{
    Anthropic, Gemini, OpenAiChat, OpenAiResponses, ProviderConfig, anthropic, gemini,
};

use crate::error::Failure;

/// The providers `--model` accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI Chat Completions and compatible servers.
    OpenAi,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (Gemini Developer API).
    Gemini,
}

impl Provider {
    /// The provider named `name` (`openai`, `openai-responses`, `anthropic`, `gemini`), if any.
    pub fn parse(name: &str) -> Option<Provider> {
        match name.to_ascii_lowercase().as_str() {
            "openai" | "openai-chat" | "openai_chat" => Some(Provider::OpenAi),
            "openai-responses" | "openai_responses" => Some(Provider::OpenAiResponses),
            "anthropic" => Some(Provider::Anthropic),
            "gemini" | "google" => Some(Provider::Gemini),
            _ => None,
        }
    }

    /// The name `--model` spells it with (`openai`, `openai-responses`, `anthropic`); it is
    /// what a session stores as its provider.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
        }
    }

    /// The environment-variable prefix, official endpoint and its host name.
    fn endpoint(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses => {
                ("OPENAI", OPENAI_DEFAULT_BASE, "api.openai.com")
            }
            Provider::Anthropic => (
                "ANTHROPIC",
                anthropic::DEFAULT_BASE_URL,
                "api.anthropic.com",
            ),
            Provider::Gemini => (
                "GEMINI",
                gemini::DEFAULT_BASE_URL,
                "generativelanguage.googleapis.com",
            ),
        }
    }

    /// The base URL requests go to: `base_url` (from `--base-url`), else `{PREFIX}_BASE_URL`,
    /// else the official endpoint.
    pub fn base_url(self, base_url: Option<&str>) -> String {
        let (prefix, official, _) = self.endpoint();
        base_url
            .map(str::to_owned)
            .or_else(|| env_var(&format!("{prefix}_BASE_URL")))
            .unwrap_or_else(|| official.to_owned())
    }
}

impl Provider {
    /// Whether an API key for this provider is set in the environment (the variables
    /// [`connection`] reads): requests then carry it, wherever the base URL points.
    pub fn key_in_environment(self) -> bool {
        match self {
            Provider::Gemini => env_var("GOOGLE_API_KEY").or_else(|| env_var("GEMINI_API_KEY")),
            other => env_var(&format!("{}_API_KEY", other.endpoint().0)),
        }
        .is_some()
    }
}

/// A parsed `--model` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    /// Which adapter.
    pub provider: Provider,
    /// The model id sent to the provider.
    pub name: String,
}

impl ModelSpec {
    /// Parses `PROVIDER:NAME`. The provider is everything before the first `:` (model names may
    /// contain colons, e.g. `openai:llama3.2:3b` for Ollama); a bare name means `openai`.
    pub fn parse(text: &str) -> Result<ModelSpec, Failure> {
        let (provider, name) = match text.split_once(':') {
            Some((provider, name)) => match Provider::parse(provider) {
                Some(p) => (p, name),
                None => {
                    return Err(Failure::usage(format!(
                        "unknown provider {provider:?} in --model {text:?}: use openai:NAME, \
                         openai-responses:NAME, anthropic:NAME or gemini:NAME"
                    )));
                }
            },
            None => (Provider::OpenAi, text),
        };
        let name = name.trim();
        if name.is_empty() {
            return Err(Failure::usage(format!(
                "--model {text:?} names no model (expected PROVIDER:NAME)"
            )));
        }
        Ok(ModelSpec {
            provider,
            name: name.to_owned(),
        })
    }

    /// The `--model` value that names this spec.
    pub fn flag(&self) -> String {
        format!("{}:{}", self.provider.name(), self.name)
    }
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

const OPENAI_DEFAULT_BASE: &str = "https://api.openai.com/v1";

/// The base URL and key for a provider family: `--base-url` wins over `{PREFIX}_BASE_URL`,
/// which wins over the official endpoint; the key comes from `{PREFIX}_API_KEY`.
///
/// The official endpoints always need a key, so a missing one is reported here, before any
/// request; a custom base URL (a local compatible server) may need none.
fn connection(provider: Provider, base_url: Option<&str>) -> Result<ProviderConfig, Failure> {
    if provider == Provider::Gemini {
        // Two key variables and two base-URL variables, as Google's SDKs read them.
        return gemini_connection(base_url);
    }
    let (prefix, official, hint) = provider.endpoint();
    let base = provider.base_url(base_url);
    let config = ProviderConfig::new(base.clone());
    match env_var(&format!("{prefix}_API_KEY")) {
        Some(key) => Ok(config.api_key(key)),
        None if base.trim_end_matches('/') == official => Err(Failure::usage(format!(
            "{prefix}_API_KEY is not set (needed for {hint}; use --base-url for a compatible \
             server, or try `agentloop demo`, which needs no key)"
        ))),
        None => Ok(config),
    }
}

/// Gemini's connection: `--base-url`, else `GEMINI_BASE_URL` or `GOOGLE_GEMINI_BASE_URL`, else
/// the official endpoint; the key from `GOOGLE_API_KEY`, else `GEMINI_API_KEY` (Google's SDKs
/// prefer `GOOGLE_API_KEY` too).
fn gemini_connection(base_url: Option<&str>) -> Result<ProviderConfig, Failure> {
    let official = gemini::DEFAULT_BASE_URL;
    let base = base_url
        .map(str::to_owned)
        .or_else(|| env_var("GEMINI_BASE_URL"))
        .or_else(|| env_var("GOOGLE_GEMINI_BASE_URL"))
        .unwrap_or_else(|| official.to_owned());
    let config = ProviderConfig::new(base.clone());
    match env_var("GOOGLE_API_KEY").or_else(|| env_var("GEMINI_API_KEY")) {
        Some(key) => Ok(config.api_key(key)),
        None if base.trim_end_matches('/') == official => Err(Failure::usage(
            "GEMINI_API_KEY (or GOOGLE_API_KEY) is not set (needed for \
             generativelanguage.googleapis.com; use --base-url for another server, or try \
             `agentloop demo`, which needs no key)",
        )),
        None => Ok(config),
    }
}

/// The connection (base URL and key, no model) for a provider, as [`build_model`] makes it.
pub fn provider_connection(
    provider: Provider,
    base_url: Option<&str>,
) -> Result<ProviderConfig, Failure> {
    connection(provider, base_url)
}

/// Builds the adapter for `spec`. `base_url` (from `--base-url`) wins over the environment.
/// A configuration that cannot work (a base URL that does not parse) is an error here, before
/// any session is created.
pub fn build_model(spec: &ModelSpec, base_url: Option<&str>) -> Result<Arc<dyn Model>, Failure> {
    build_model_with(spec, base_url, true)
}

/// [`build_model`] with the prompt cache on or off.
fn build_model_with(
    spec: &ModelSpec,
    base_url: Option<&str>,
    prompt_cache: bool,
) -> Result<Arc<dyn Model>, Failure> {
    let unusable = |e: agentloop::model::ModelError| Failure::usage(e.to_string());
    let config = connection(spec.provider, base_url)?
        .model(&spec.name)
        .prompt_cache(prompt_cache);
    Ok(match spec.provider {
        Provider::OpenAi => Arc::new(OpenAiChat::try_new(config).map_err(unusable)?),
        Provider::OpenAiResponses => Arc::new(OpenAiResponses::try_new(config).map_err(unusable)?),
        Provider::Anthropic => Arc::new(Anthropic::try_new(config).map_err(unusable)?),
        Provider::Gemini => Arc::new(Gemini::try_new(config).map_err(unusable)?),
    })
}

/// Which environment variables (and so which `--base-url`) a provider reads.
fn family(provider: Provider) -> &'static str {
    match provider {
        Provider::OpenAi | Provider::OpenAiResponses => "OPENAI",
        Provider::Anthropic => "ANTHROPIC",
        Provider::Gemini => "GEMINI",
    }
}

/// The model of a run: `spec`, then each `--fallback-model` in order (a
/// [`FallbackModel`](agentloop::model::FallbackModel) when there are any). A fallback of the
/// primary's provider family uses `base_url` too; the others their own environment.
pub fn build_model_chain(
    spec: &ModelSpec,
    fallbacks: &[String],
    base_url: Option<&str>,
    prompt_cache: bool,
) -> Result<Arc<dyn Model>, Failure> {
    let primary = build_model_with(spec, base_url, prompt_cache)?;
    if fallbacks.is_empty() {
        return Ok(primary);
    }
    let mut chain = agentloop::model::FallbackModel::new(primary);
    for text in fallbacks {
        let fallback = ModelSpec::parse(text)?;
        let url = (family(fallback.provider) == family(spec.provider))
            .then_some(base_url)
            .flatten();
        chain = chain.with_fallback(build_model_with(&fallback, url, prompt_cache)?);
    }
    Ok(Arc::new(chain))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn specs_parse() {
        let spec = ModelSpec::parse("openai:gpt-4o-mini").unwrap();
        assert_eq!(spec.provider, Provider::OpenAi);
        assert_eq!(spec.name, "gpt-4o-mini");
        let spec = ModelSpec::parse("openai:llama3.2:3b").unwrap();
        assert_eq!(spec.name, "llama3.2:3b");
        let spec = ModelSpec::parse("anthropic:claude-sonnet-4-5").unwrap();
        assert_eq!(spec.provider, Provider::Anthropic);
        let spec = ModelSpec::parse("openai-responses:gpt-5").unwrap();
        assert_eq!(spec.provider, Provider::OpenAiResponses);
        let spec = ModelSpec::parse("gemini:gemini-2.5-flash").unwrap();
        assert_eq!(
            (spec.provider, spec.name.as_str()),
            (Provider::Gemini, "gemini-2.5-flash")
        );
        assert_eq!(
            ModelSpec::parse("google:gemini-3-pro-preview")
                .unwrap()
                .provider,
            Provider::Gemini
        );
        assert_eq!(
            ModelSpec::parse("gpt-4o").unwrap().provider,
            Provider::OpenAi
        );
        // Any id string after the provider: paths (llama.cpp reports the model file's path),
        // slashes and colons.
        for id in [
            "/models/smollm2.gguf",
            "org/model:q4",
            "hf.co/org/repo:Q4_K_M",
            "a:b:c",
        ] {
            let spec = ModelSpec::parse(&format!("openai:{id}")).unwrap();
            assert_eq!((spec.provider, spec.name.as_str()), (Provider::OpenAi, id));
        }
        assert!(ModelSpec::parse("bogus:x").is_err());
        assert!(ModelSpec::parse("openai:").is_err());
    }
}
