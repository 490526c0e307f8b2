//! Fixtures the providers' unit tests share. Transcripts: assistant turns recorded by a given
//! provider and model, thinking parts and text with provider data; the replay rules and every
//! adapter's request tests are about exactly these (what goes back to the same provider and
//! model, what another one gets), so they are built one way everywhere. Settings: a stand-in
//! for the environment, so that reading it is tested without touching the process's own.

use crate::transcript::{Message, Part, ProviderData, StopReason, ThinkingPart};

/// An assistant message with `parts`, recorded by `provider` and `model`.
pub(crate) fn recorded(provider: &str, model: &str, parts: Vec<Part>, stop: StopReason) -> Message {
    let mut message = Message::assistant(parts, stop);
    message.provider = Some(provider.into());
    message.model = Some(model.into());
    message
}

/// A thinking part with readable `text` and, when given, the provider's `signature`.
pub(crate) fn thinking(text: &str, signature: Option<&str>) -> Part {
    Part::Thinking(ThinkingPart {
        thinking: text.into(),
        signature: signature.map(Into::into),
        redacted: false,
    })
}

/// Redacted thinking: no readable text, only the provider's opaque `payload` when it has one.
pub(crate) fn redacted_thinking(payload: Option<&str>) -> Part {
    Part::Thinking(ThinkingPart {
        thinking: String::new(),
        signature: payload.map(Into::into),
        redacted: true,
    })
}

/// A text part carrying `data` (a signature or an item id) for its provider.
pub(crate) fn text_with_data(text: &str, data: ProviderData) -> Part {
    Part::Text {
        text: text.into(),
        provider_data: Some(data),
    }
}

#[cfg(feature = "http")]
/// A lookup of variables in `vars` (an environment without the process's own), empty values
/// counting as unset as the adapters treat them.
pub(crate) fn lookup<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<String> + 'a {
    |name| {
        vars.iter()
            .find(|(n, v)| *n == name && !v.trim().is_empty())
            .map(|(_, v)| (*v).to_owned())
    }
}

/// The API key of `config`, readable.
#[cfg(feature = "http")]
pub(crate) fn api_key_of(config: &super::ProviderConfig) -> Option<String> {
    config.api_key.as_ref().map(|key| key.expose().to_owned())
}
