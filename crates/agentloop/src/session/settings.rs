//! [`SessionSettings`]: what a session ran with (workspace, provider, model, base URL,
//! reasoning), stored with it so a resumed session talks to the same model the same way.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::model::ReasoningLevel;

/// The settings a session runs with, stored with it (see [`NewSession::settings`] and
/// [`SessionStore::set_settings`]) and returned in [`SessionInfo::settings`].
///
/// Every field is optional: sessions recorded before settings existed have none, and a library
/// user records only what applies. The serde shape is an object with the set fields only
/// (`{"workspace": "/home/me/proj", "provider": "anthropic", "model": "claude-sonnet-4-5", …}`);
/// unknown keys are ignored on read, so newer writers stay readable.
///
/// ```
/// use agentloop::session::SessionSettings;
/// use agentloop::model::ReasoningLevel;
///
/// let settings = SessionSettings::new()
///     .provider("openai")
///     .model("gpt-5")
///     .base_url("https://user:secret@llm.example.com/v1")
///     .reasoning(ReasoningLevel::Low);
/// // Credentials never reach the store.
/// assert_eq!(settings.base_url.as_deref(), Some("https://llm.example.com/v1"));
/// ```
///
/// [`NewSession::settings`]: super::NewSession::settings
/// [`SessionStore::set_settings`]: super::SessionStore::set_settings
/// [`SessionInfo::settings`]: super::SessionInfo::settings
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SessionSettings {
    /// The workspace directory the session ran in, as the text of its canonical absolute path
    /// (what `std::fs::canonicalize` returns). "The last session of this workspace" compares
    /// this text exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// The provider, as the application names it (the agentloop CLI: `openai`,
    /// `openai-responses`, `anthropic`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The model id sent to the provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The provider's base URL, without credentials (see [`without_credentials`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The reasoning effort asked for (`None`: the provider's default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<ReasoningLevel>,
    /// The session was created by an import ([`SessionStore::import_jsonl`]): the values above
    /// were recorded elsewhere, possibly by someone else, so an application should not act on
    /// them (send a key to that base URL, switch to that provider, treat that workspace as
    /// this machine's) without the user's say-so. Cleared once the application stores settings
    /// it chose itself.
    ///
    /// [`SessionStore::import_jsonl`]: super::SessionStore::import_jsonl
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
}

impl SessionSettings {
    /// Nothing recorded.
    pub fn new() -> Self {
        SessionSettings::default()
    }

    crate::setters! {
        /// Sets [`workspace`](Self::workspace) to `dir` as given; pass a canonical absolute path
        /// (`std::fs::canonicalize`), or sessions of one directory will not match each other. A
        /// path that is not valid UTF-8 is stored lossily.
        pub fn workspace(dir: impl AsRef<Path>) =>
            workspace = Some(dir.as_ref().to_string_lossy().into_owned());
        /// Sets [`provider`](Self::provider).
        pub fn provider(provider: impl Into<String>) => provider = Some(provider.into());
        /// Sets [`model`](Self::model).
        pub fn model(model: impl Into<String>) => model = Some(model.into());
        /// Sets [`base_url`](Self::base_url), with any `user:password@` removed
        /// ([`without_credentials`]).
        pub fn base_url(url: impl AsRef<str>) => base_url = Some(without_credentials(url.as_ref()));
        /// Sets [`reasoning`](Self::reasoning): a level, or `None` for the provider's default.
        pub fn reasoning(level: impl Into<Option<ReasoningLevel>>) => reasoning = level.into();
        /// Sets [`imported`](Self::imported).
        pub fn imported(imported: bool) => imported = imported;
    }

    /// True when nothing is recorded (a session from before settings existed).
    pub fn is_empty(&self) -> bool {
        *self == SessionSettings::default()
    }

    /// These settings as a store must keep them: the base URL without credentials, whatever
    /// was assigned to the public field. Stores call this before writing.
    pub fn sanitized(mut self) -> Self {
        self.base_url = self.base_url.as_deref().map(without_credentials);
        self
    }
}

/// `url` without the `user:password@` (or `token@`) part of its authority, so a credential
/// written into a base URL is never stored or shown. Everything else is kept as it is.
///
/// ```
/// use agentloop::session::without_credentials;
/// assert_eq!(without_credentials("http://u:p@host:8080/v1?x=1"), "http://host:8080/v1?x=1");
/// assert_eq!(without_credentials("https://api.openai.com/v1"), "https://api.openai.com/v1");
/// ```
pub fn without_credentials(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}{}", &url[..start], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_are_removed_from_every_shape_of_url() {
        for (given, kept) in [
            ("http://u:p@h/v1", "http://h/v1"),
            ("https://token@h:1/v1", "https://h:1/v1"),
            ("https://a:b@c@h/v1", "https://h/v1"),
            ("u:p@h/v1", "h/v1"),
            ("http://h/v1?user=a@b", "http://h/v1?user=a@b"),
            ("http://h/p@x", "http://h/p@x"),
            ("http://h", "http://h"),
            ("", ""),
        ] {
            assert_eq!(without_credentials(given), kept, "{given}");
        }
    }

    #[test]
    fn the_serde_shape_has_only_the_set_fields() {
        let settings = SessionSettings::new()
            .model("m")
            .reasoning(Some(ReasoningLevel::High));
        let json = serde_json::to_string(&settings).unwrap_or_default();
        assert_eq!(json, r#"{"model":"m","reasoning":"high"}"#);
        let back: SessionSettings =
            serde_json::from_str(r#"{"model":"m","reasoning":"high","later":1}"#)
                .unwrap_or_default();
        assert_eq!(back, settings);
        assert!(SessionSettings::new().is_empty());
        let mut raw = SessionSettings::new();
        raw.base_url = Some("http://k@h".into());
        assert_eq!(raw.sanitized().base_url.as_deref(), Some("http://h"));
    }
}
