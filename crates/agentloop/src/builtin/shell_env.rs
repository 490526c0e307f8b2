//! The environment a shell command gets: a fresh one, built from an allow-list of harmless
//! variables of the agent's environment (`PATH`, `HOME`, `LANG`, `LC_*`, `TERM`, …) plus the
//! names the application allowed, never the agent's environment minus a deny-list.
//!
//! Without this, `echo $OPENAI_API_KEY` puts the key into the model's context, the JSON output
//! and the session database; and a deny-list always misses a form (`PGPASSWORD`, `MYSQL_PWD`,
//! `SENTRY_DSN`, a `DATABASE_URL` with a password in it). Even an allow-listed name is dropped
//! when it or its value looks like a credential ([`looks_like_credential`],
//! [`looks_like_credential_value`]): a name is a credential when, split at `_`, it has a
//! segment `TOKEN`, `SECRET`, `PASSWORD`, `PASSWD`, `PASSPHRASE`, `CREDENTIAL(S)`, `APIKEY`,
//! `COOKIE(S)` or `PAT`, ends in `API_KEY`/`ACCESS_KEY`/`AUTH_KEY`/`_PWD`/`_AUTH`/`_DSN`/
//! `WEBHOOK_URL`, is `PGPASSWORD`, `SSH_AUTH_SOCK` or `NPM_CONFIG__AUTH…`, or is a `*_KEY` of a
//! known provider (OpenAI, Anthropic, AWS, Google, …); a value is a credential when it holds a
//! URL with a `user:password@` part. Names the application allows explicitly
//! ([`ShellOptions::allow_env`](super::ShellOptions::allow_env), the CLI's `--shell-env-allow`)
//! pass whatever they look like (that is the user's decision); names it hides
//! ([`ShellOptions::hide_env`](super::ShellOptions::hide_env)) never pass.

use std::collections::BTreeMap;
use std::ffi::OsString;

/// The variables every shell command gets from the agent's environment when they are set (and
/// pass the credential checks), besides every `LC_*` locale variable. Anything else reaches a
/// command only when the application allows it by name.
pub const SHELL_ENV_BASE: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TMPDIR",
    "TZ",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "GOCACHE",
    "GOMODCACHE",
    "JAVA_HOME",
    "VIRTUAL_ENV",
    "NODE_PATH",
];

/// Whether `name` is on the base allow-list ([`SHELL_ENV_BASE`] or `LC_*`).
fn on_base_list(name: &str) -> bool {
    SHELL_ENV_BASE.contains(&name) || name.starts_with("LC_")
}

/// Name segments that mark a credential wherever they appear.
const SECRET_SEGMENTS: &[&str] = &[
    "TOKEN",
    "TOKENS",
    "SECRET",
    "SECRETS",
    "PASSWORD",
    "PASSWD",
    "PGPASSWORD",
    "PASSPHRASE",
    "CREDENTIAL",
    "CREDENTIALS",
    "APIKEY",
    "PAT",
    "COOKIE",
    "COOKIES",
];

/// Last name segments that mark a credential (`MYSQL_PWD`, `SENTRY_DSN`, `BASIC_AUTH`, …);
/// only after at least one other segment, so `PWD` itself (the working directory) is not one.
const SECRET_LAST_SEGMENTS: &[&str] = &["PWD", "DSN", "AUTH"];

/// Whole names that are credentials or grant one (`SSH_AUTH_SOCK` lets a command use every key
/// the user's SSH agent holds).
const SECRET_NAMES: &[&str] = &["SSH_AUTH_SOCK"];

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
/// assert!(looks_like_credential("MYSQL_PWD"));
/// assert!(looks_like_credential("SENTRY_DSN"));
/// assert!(looks_like_credential("SSH_AUTH_SOCK"));
/// assert!(!looks_like_credential("PATH"));
/// assert!(!looks_like_credential("PWD"));
/// assert!(!looks_like_credential("TOKENIZERS_PARALLELISM"));
/// ```
pub fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if SECRET_NAMES.contains(&upper.as_str()) || upper.starts_with("NPM_CONFIG__AUTH") {
        return true;
    }
    let segments: Vec<&str> = upper.split('_').filter(|s| !s.is_empty()).collect();
    if segments.iter().any(|s| SECRET_SEGMENTS.contains(s)) {
        return true;
    }
    if segments.len() > 1
        && segments
            .last()
            .is_some_and(|s| SECRET_LAST_SEGMENTS.contains(s))
    {
        return true;
    }
    if [
        "API_KEY",
        "ACCESS_KEY",
        "AUTH_KEY",
        "PRIVATE_KEY",
        "_APIKEY",
        "WEBHOOK_URL",
        "WEBHOOK",
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

/// Whether an environment variable's value looks like it holds a credential: a URL with a
/// `user:password@` part anywhere in it (`postgres://app:hunter2@db/app`,
/// `https://me:tok@proxy:3128`).
///
/// ```
/// use agentloop::builtin::looks_like_credential_value;
///
/// assert!(looks_like_credential_value("postgres://app:hunter2@db.internal/app"));
/// assert!(!looks_like_credential_value("https://example.com/a@b"));
/// assert!(!looks_like_credential_value("/usr/local/bin:/usr/bin"));
/// ```
pub fn looks_like_credential_value(value: &str) -> bool {
    let mut rest = value;
    while let Some(at) = rest.find("://") {
        let after = &rest[at + 3..];
        // The authority ends at the first `/`, `?`, `#` or whitespace.
        let end = after
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(after.len());
        if let Some(userinfo) = after[..end].rsplit_once('@').map(|(user, _)| user) {
            if userinfo.contains(':') {
                return true;
            }
        }
        rest = after;
    }
    false
}

/// Whether a variable must not reach a command unless the application allowed it by name: its
/// name or its value looks like a credential.
fn is_credential(name: &str, value: &std::ffi::OsStr) -> bool {
    looks_like_credential(name) || value.to_str().is_some_and(looks_like_credential_value)
}

/// The environment for one command, built fresh: the agent's variables on the base allow-list
/// ([`SHELL_ENV_BASE`], `LC_*`) that do not look like credentials, plus those named in `allow`
/// (whatever they look like), minus those named in `hidden`. Names that are not UTF-8 are
/// dropped.
pub(crate) fn filtered_env(allow: &[String], hidden: &[String]) -> BTreeMap<OsString, OsString> {
    std::env::vars_os()
        .filter(|(name, value)| {
            let Some(name) = name.to_str() else {
                return false;
            };
            if hidden.iter().any(|h| h == name) {
                return false;
            }
            if allow.iter().any(|a| a == name) {
                return true;
            }
            on_base_list(name) && !is_credential(name, value)
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
            "PGPASSWORD",
            "MYSQL_PWD",
            "SENTRY_DSN",
            "SLACK_WEBHOOK_URL",
            "DISCORD_WEBHOOK",
            "REGISTRY_AUTH",
            "SESSION_COOKIE",
            "NPM_CONFIG__AUTH",
            "npm_config__authToken",
            "NPM_CONFIG__AUTHTOKEN",
            "SSH_AUTH_SOCK",
        ] {
            assert!(looks_like_credential(name), "{name}");
        }
        for name in [
            "PATH",
            "HOME",
            "PWD",
            "OLDPWD",
            "CARGO_HOME",
            "RUST_LOG",
            "TOKENIZERS_PARALLELISM",
            "KEYBOARD_LAYOUT",
            "MONKEY",
            "LANG",
            "AUTHOR",
            "LC_ALL",
        ] {
            assert!(!looks_like_credential(name), "{name}");
        }
    }

    #[test]
    fn credential_values_are_recognised() {
        for value in [
            "postgres://app:hunter2@db/app",
            "https://user:tok@proxy.example:3128",
            "a mirror at http://x:y@h and more",
            "redis://:pw@cache:6379/0",
        ] {
            assert!(looks_like_credential_value(value), "{value}");
        }
        for value in [
            "https://example.com/path@x",
            "ssh://git@github.com/o/r",
            "/usr/bin:/bin",
            "en_US.UTF-8",
            "mailto:a@b",
        ] {
            assert!(!looks_like_credential_value(value), "{value}");
        }
    }

    #[test]
    fn only_allow_listed_names_pass() {
        assert!(on_base_list("PATH"));
        assert!(on_base_list("LC_CTYPE"));
        assert!(!on_base_list("HARMLESS_SETTING"));
        assert!(!on_base_list("LD_PRELOAD"));
        assert!(is_credential("HOME", std::ffi::OsStr::new("https://u:p@h")));
    }
}
