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

/// An environment and what an adapter reads from it: the variables set (empty values count as
/// unset), the base URL, the API key.
#[cfg(feature = "http")]
pub(crate) type EnvCase<'a> = (&'a [(&'a str, &'a str)], &'a str, Option<&'a str>);

/// Checks that `env` reads each case's base URL and API key from its variables, without the
/// process's own environment.
#[cfg(feature = "http")]
pub(crate) fn assert_reads(env: &super::config::EnvSettings<'_>, cases: &[EnvCase<'_>]) {
    for (vars, base_url, api_key) in cases {
        let config = env.config_with(|name| {
            vars.iter()
                .find(|(n, v)| *n == name && !v.trim().is_empty())
                .map(|(_, v)| (*v).to_owned())
        });
        assert_eq!(config.base_url, *base_url, "{vars:?}");
        let key = config.api_key.as_ref().map(|key| key.expose());
        assert_eq!(key, *api_key, "{vars:?}");
    }
}
