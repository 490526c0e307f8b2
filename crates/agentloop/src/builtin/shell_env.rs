//! The environment a shell command inherits: the agent's own, minus every variable that looks
//! like a credential, unless the application allowed it by name.
//!
//! Without this, `echo $OPENAI_API_KEY` puts the key into the model's context, the JSON output
//! and the session database. A name is treated as a credential when, split at `_`, it has a
//! segment `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASSPHRASE`, `CREDENTIAL(S)`, `APIKEY` or
//! `PRIVATE`…`KEY`, ends in `API_KEY`/`ACCESS_KEY`/`AUTH_KEY`, or is a `*_KEY` of a known
//! provider (OpenAI, Anthropic, AWS, Google, …). Variables the application names explicitly (for
//! example the key the CLI read) are dropped whatever they are called.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// Name segments that mark a credential wherever they appear.
const SECRET_SEGMENTS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "PAT",
];

/// Prefixes of providers whose `*_KEY` variables are credentials.
const PROVIDER_PREFIXES: &[&str] = &[
    "OPENAI",
    "ANTHROPIC",
    "AZURE",
    "AWS",
    "GOOGLE",
    "GEMINI",
    "VERTEX",
    "MISTRAL",
    "GROQ",
    "COHERE",
    "DEEPSEEK",
    "XAI",
    "OPENROUTER",
    "TOGETHER",
    "FIREWORKS",
    "PERPLEXITY",
    "HF",
    "HUGGINGFACE",
    "REPLICATE",
    "GITHUB",
    "GITLAB",
    "STRIPE",
    "SLACK",
    "NPM",
    "CARGO",
    "DOCKER",
];

/// Whether an environment variable name looks like it holds a credential.
///
/// ```
/// use agentloop::builtin::looks_like_credential;
///
/// assert!(looks_like_credential("OPENAI_API_KEY"));
/// assert!(looks_like_credential("GITHUB_TOKEN"));
/// assert!(looks_like_credential("AWS_SECRET_ACCESS_KEY"));
/// assert!(looks_like_credential("db_password"));
/// assert!(!looks_like_credential("PATH"));
/// assert!(!looks_like_credential("TOKENIZERS_PARALLELISM"));
/// ```
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let segments: Vec<&str> = upper.split('_').filter(|s| !s.is_empty()).collect();
    if segments.iter().any(|s| SECRET_SEGMENTS.contains(s)) {
        return true;
    }
    if [
        "API_KEY",
        "ACCESS_KEY",
        "AUTH_KEY",
        "PRIVATE_KEY",
        "_APIKEY",
    ]
    .iter()
    .any(|suffix| upper.ends_with(suffix))
    {
        return true;
    }
    if segments.last() == Some(&"KEY") || segments.last() == Some(&"KEYS") {
        return segments
            .first()
            .is_some_and(|first| PROVIDER_PREFIXES.contains(first));
    }
    false
}

/// The environment for one command: the current process's variables minus credentials (by
/// [`looks_like_credential`] and by the `hidden` names), except those named in `allow`.
pub(crate) fn filtered_env(allow: &[String], hidden: &[String]) -> BTreeMap<OsString, OsString> {
    std::env::vars_os()
        .filter(|(name, _)| {
            let Some(name) = name.to_str() else {
                return true;
            };
            if allow.iter().any(|a| a == name) {
                return true;
            }
            !(looks_like_credential(name) || hidden.iter().any(|h| h == name))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_recognised() {
        for name in [
            "ANTHROPIC_API_KEY",
            "openai_api_key",
            "GH_TOKEN",
            "NPM_TOKEN",
            "AWS_SESSION_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "CLIENT_SECRET",
            "MYSQL_PASSWORD",
            "GOOGLE_KEY",
            "SSH_PRIVATE_KEY",
            "GITHUB_PAT",
            "X_APIKEY",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "CARGO_HOME",
            "RUST_LOG",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD_LAYOUT",
            "MONKEY",
            "SSH_AUTH_SOCK",
            "LANG",
        ] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }
}
