//! The one-line error of a failed model call, saying what to do about it: a connection refused
//! names the URL it tried and `--base-url`; a refused key (HTTP 401/403) names the environment
//! variable the key came from; a 404 on a URL that doubles its version segment (`/v1/v1/…`)
//! says which suffix to drop.
//!
//! The library's [`ModelError`] knows what failed but not where the CLI got its settings; this
//! module joins the two. It decides on the error's variants and status, never on its text.

use agentloop::model::ModelError;

use crate::provider::Provider;
use crate::ui::safe_text::visible_line;

/// Where a model's requests went, as the flags and the environment chose it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The base URL (`--base-url`, else `{PROVIDER}_BASE_URL`, else the official one), without
    /// any `user:password@`.
    pub base_url: String,
    /// Where the base URL came from, for the advice (`--base-url`, `OPENAI_BASE_URL`, …).
    pub base_url_source: String,
    /// The environment variable the key was read from; `None` when no key was sent.
    pub key_variable: Option<&'static str>,
    /// The variable a key would be read from (the first one looked at).
    pub key_wanted: &'static str,
    /// What the adapter appends to the base URL (`v1/messages`, `chat/completions`).
    pub path: &'static str,
}

fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

impl Endpoint {
    /// The endpoint of `provider` with `base_url` from `--base-url` (if given), read the way
    /// [`crate::provider`] reads it.
    pub fn of(provider: Provider, base_url: Option<&str>) -> Endpoint {
        let (prefix, keys, path): (&str, &[&'static str], &'static str) = match provider {
            Provider::OpenAi => ("OPENAI", &["OPENAI_API_KEY"], "chat/completions"),
            Provider::OpenAiResponses => ("OPENAI", &["OPENAI_API_KEY"], "responses"),
            Provider::Anthropic => ("ANTHROPIC", &["ANTHROPIC_API_KEY"], "v1/messages"),
            Provider::Gemini => (
                "GEMINI",
                &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
                "v1beta/models",
            ),
        };
        let variable = format!("{prefix}_BASE_URL");
        let base_url_source = if base_url.is_some() {
            "--base-url".to_owned()
        } else if env_set(&variable) {
            variable
        } else {
            "the official endpoint".to_owned()
        };
        Endpoint {
            base_url: without_userinfo(&provider.base_url(base_url)),
            base_url_source,
            key_variable: keys.iter().copied().find(|k| env_set(k)),
            key_wanted: keys[0],
            path,
        }
    }

    /// The URL a request goes to (the base URL and the adapter's path).
    fn request_url(&self) -> String {
        format!("{}/{}", self.base_url.trim_end_matches('/'), self.path)
    }
}

/// `url` without a `user:password@` part.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    format!("{scheme}://{host}{path}")
}

/// The base URL with a version segment repeated by the adapter's path removed: `…/v1` when the
/// request went to `…/v1/v1/messages`. `None` when nothing is doubled.
fn undoubled(endpoint: &Endpoint) -> Option<String> {
    let base = endpoint.base_url.trim_end_matches('/');
    let last = base.rsplit('/').next()?;
    let is_version = last.len() > 1
        && last.starts_with('v')
        && last[1..].starts_with(|c: char| c.is_ascii_digit());
    let first_of_path = endpoint.path.split('/').next()?;
    let doubled_by_path = is_version && first_of_path == last;
    let prev = base.rsplit('/').nth(1);
    let doubled_in_base = is_version && prev == Some(last);
    (doubled_by_path || doubled_in_base).then(|| base[..base.len() - last.len() - 1].to_owned())
}

/// The error line for a model call that failed (without the `agentloop: ` prefix).
pub fn explain(error: &ModelError, endpoint: &Endpoint) -> String {
    let base = visible_line(&endpoint.base_url);
    match error {
        ModelError::Connection { message, .. } => format!(
            "cannot reach the model provider at {base} ({}): is the server running? The URL \
             came from {}; give another with --base-url",
            last_cause(message),
            endpoint.base_url_source
        ),
        ModelError::Status {
            status: status @ (401 | 403),
            message,
            ..
        } => {
            let said = short(message);
            match endpoint.key_variable {
                Some(variable) => format!(
                    "the model provider at {base} refused the key in {variable} (HTTP \
                     {status}{said}): check or replace {variable}"
                ),
                None => format!(
                    "the model provider at {base} wants a key (HTTP {status}{said}): set \
                     {}",
                    endpoint.key_wanted
                ),
            }
        }
        ModelError::Status {
            status: 404,
            message,
            ..
        } => match undoubled(endpoint) {
            Some(fixed) => format!(
                "the model provider answered HTTP 404{} for {}: the version segment is \
                 doubled; drop it from the base URL (--base-url {})",
                short(message),
                visible_line(&endpoint.request_url()),
                visible_line(&fixed)
            ),
            None => format!(
                "the model provider at {base} answered HTTP 404{}: check the model name and \
                 the base URL (it came from {})",
                short(message),
                endpoint.base_url_source
            ),
        },
        other => other.to_string(),
    }
}

/// `": MESSAGE"` for a provider's message worth quoting (empty for none), cut to one short line.
fn short(message: &str) -> String {
    let line = crate::ui::render::one_line(message, 160);
    if line.trim().is_empty() {
        String::new()
    } else {
        format!(": {line}")
    }
}

/// The innermost cause of a connection error chain (`Connection refused (os error 111)`).
fn last_cause(message: &str) -> String {
    let last = message.rsplit(": ").next().unwrap_or(message);
    crate::ui::render::one_line(last, 120)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(base: &str, path: &'static str) -> Endpoint {
        Endpoint {
            base_url: base.to_owned(),
            base_url_source: "--base-url".to_owned(),
            key_variable: Some("OPENAI_API_KEY"),
            key_wanted: "OPENAI_API_KEY",
            path,
        }
    }

    #[test]
    fn a_doubled_version_segment_is_found_whoever_doubled_it() {
        assert_eq!(
            undoubled(&endpoint("http://h/v1", "v1/messages")).as_deref(),
            Some("http://h")
        );
        assert_eq!(
            undoubled(&endpoint("http://h/v1/v1/", "chat/completions")).as_deref(),
            Some("http://h/v1")
        );
        assert_eq!(
            undoubled(&endpoint("http://h/v1", "chat/completions")),
            None
        );
        assert_eq!(undoubled(&endpoint("http://h", "v1/messages")), None);
    }

    #[test]
    fn credentials_never_reach_the_message() {
        assert_eq!(
            without_userinfo("https://u:secret@host:8080/v1"),
            "https://host:8080/v1"
        );
    }
}
