//! What an untrusted workspace's config file may still change: only what *narrows* the
//! authority the user's own configuration grants.
//!
//! The orders, strictest last:
//!
//! - `approve`: `allow` < `ask` < `defer` < `deny` (the deprecated names rank as their new ones:
//!   `always` = `allow`, `mutating` = `ask`, `never` = `deny`). `defer` ranks above `ask`
//!   because it runs no mutating call in this process at all; `deny` runs none ever.
//! - `sandbox`: `full-access` < `workspace-write` < `read-only`.
//! - `max_turns`: a number below the user's (no limit — `0`/`none` — is the loosest);
//!   `max_requests`, `max_input_tokens`, `max_output_tokens`, `max_total_tokens`, `max_cost`:
//!   a value at or below the user's, or any value when the user set none.
//! - `model`: another model id of the *same provider* (the same key goes to the same host);
//!   `reasoning`: any level (it changes neither the host nor the key).
//! - `base_url`, and a `profile` key choosing a profile: never (a base URL moves the user's
//!   key; a profile could be one of the user's own wider ones).
//! - `[mcp_servers.NAME]`: only for a server the user's own file defines, and only to switch it
//!   off (`enabled = false`), drop tools (`disabled_tools`, a narrower `enabled_tools`), ask
//!   more (`approval`: `never-ask` < `mutating` < `always`) or time out sooner. A new server,
//!   another program, URL, argument, environment, header, working directory, prefix or
//!   loading mode is ignored.
//!
//! "The user's" value is what applies without the workspace file: the user's file (its chosen
//! profile, then its top level), else the built-in default. Flags win over every file anyway.

use std::collections::BTreeMap;
use std::str::FromStr;

use agentloop::builtin::SandboxMode;
use clap::ValueEnum;

use crate::cli::ApproveArg;
use crate::config::files::McpServerEntry;
use crate::config::trust::Ignored;
use crate::provider::ModelSpec;

/// `approve` values by strictness (higher is stricter); `None` for an unknown name.
fn approve_rank(value: &str) -> Option<u8> {
    Some(match ApproveArg::from_str(value, true).ok()? {
        ApproveArg::Allow | ApproveArg::Always => 0,
        ApproveArg::Ask | ApproveArg::Mutating => 1,
        ApproveArg::Defer => 2,
        ApproveArg::Deny | ApproveArg::Never => 3,
    })
}

/// `sandbox` modes by strictness (higher is stricter).
fn sandbox_rank(value: &str) -> Option<u8> {
    Some(match SandboxMode::from_str(value).ok()? {
        SandboxMode::FullAccess => 0,
        SandboxMode::WorkspaceWrite => 1,
        SandboxMode::ReadOnly => 2,
        // A mode added later is not known to be stricter than anything.
        _ => return None,
    })
}

/// A `max_turns` text as a ceiling (`None`: no limit); `Err` when it is not one.
fn turns(value: &str) -> Result<Option<u64>, ()> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("none") || value.eq_ignore_ascii_case("unlimited") {
        return Ok(None);
    }
    match value.parse::<u64>() {
        Ok(0) => Ok(None),
        Ok(n) => Ok(Some(n)),
        Err(_) => Err(()),
    }
}

/// Whether `candidate` (a workspace file's value of run setting `key`) is at least as strict as
/// `base` (the value that applies without the workspace file; `None`: not set, i.e. the flag's
/// default or no limit).
pub fn narrows(key: &str, candidate: &str, base: Option<&str>) -> bool {
    let number = |v: &str| v.trim().trim_start_matches('$').parse::<f64>().ok();
    match key {
        "approve" => match (approve_rank(candidate), base.map(approve_rank)) {
            (Some(c), Some(Some(b))) => c >= b,
            (Some(c), None) => c >= 1, // the default, `ask`
            _ => false,
        },
        "sandbox" => match (sandbox_rank(candidate), base.map(sandbox_rank)) {
            (Some(c), Some(Some(b))) => c >= b,
            (Some(c), None) => c >= 1, // the default, `workspace-write`
            _ => false,
        },
        "max_turns" => match (turns(candidate), base.map(turns)) {
            (Ok(_), None) => false, // the default is a ceiling only a flag or the user lifts
            (Ok(c), Some(Ok(b))) => match (c, b) {
                (_, None) => true,
                (None, Some(_)) => false,
                (Some(c), Some(b)) => c <= b,
            },
            _ => false,
        },
        "max_requests" | "max_input_tokens" | "max_output_tokens" | "max_total_tokens"
        | "max_cost" => match (number(candidate), base.map(number)) {
            (Some(_), None) => true,
            (Some(c), Some(Some(b))) => c <= b,
            _ => false,
        },
        "model" => match (ModelSpec::parse(candidate), base.map(ModelSpec::parse)) {
            (Ok(c), Some(Ok(b))) => c.provider == b.provider,
            _ => false,
        },
        "reasoning" => true,
        _ => false,
    }
}

/// `mcp_servers.NAME.approval` values by strictness (higher asks more).
fn mcp_approval_rank(value: Option<&str>) -> Option<u8> {
    Some(match value.unwrap_or("mutating") {
        "never-ask" => 0,
        "mutating" => 1,
        "always" => 2,
        _ => return None,
    })
}

/// The user's `servers` with what the untrusted `project` entries may change applied (see the
/// module docs), and what was ignored (`mcp_servers.NAME` for a whole server, with its program
/// or URL; `mcp_servers.NAME.KEY` for one key).
pub fn mcp_servers(
    user: &BTreeMap<String, McpServerEntry>,
    project: &BTreeMap<String, McpServerEntry>,
) -> (BTreeMap<String, McpServerEntry>, Vec<Ignored>) {
    let mut out = user.clone();
    let mut ignored = Vec::new();
    for (name, wanted) in project {
        let Some(server) = out.get_mut(name) else {
            if wanted.enabled != Some(false) {
                let value = match (&wanted.command, &wanted.url) {
                    (Some(command), _) => std::iter::once(command)
                        .chain(&wanted.args)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" "),
                    (None, Some(url)) => url.clone(),
                    (None, None) => String::new(),
                };
                ignored.push(Ignored {
                    key: format!("mcp_servers.{name}"),
                    value,
                });
            }
            continue;
        };
        ignored.extend(
            narrow_server(server, wanted)
                .into_iter()
                .map(|key| Ignored {
                    key: format!("mcp_servers.{name}.{key}"),
                    value: String::new(),
                }),
        );
    }
    (out, ignored)
}

/// Applies to the user's `server` what `wanted` may narrow; returns the keys it ignored.
fn narrow_server(server: &mut McpServerEntry, wanted: &McpServerEntry) -> Vec<&'static str> {
    let mut ignored = Vec::new();
    if wanted.enabled == Some(false) {
        server.enabled = Some(false);
    }
    server.disabled_tools.extend(wanted.disabled_tools.clone());
    if let Some(only) = &wanted.enabled_tools {
        server.enabled_tools = Some(match &server.enabled_tools {
            Some(mine) => only.iter().filter(|t| mine.contains(t)).cloned().collect(),
            None => only.clone(),
        });
    }
    match (
        mcp_approval_rank(wanted.approval.as_deref()),
        mcp_approval_rank(server.approval.as_deref()),
    ) {
        _ if wanted.approval.is_none() => {}
        (Some(w), Some(s)) if w >= s => server.approval = wanted.approval.clone(),
        _ => ignored.push("approval"),
    }
    for (key, wanted, mine) in [
        (
            "startup_timeout_sec",
            wanted.startup_timeout_sec,
            &mut server.startup_timeout_sec,
        ),
        (
            "tool_timeout_sec",
            wanted.tool_timeout_sec,
            &mut server.tool_timeout_sec,
        ),
    ] {
        match (wanted, *mine) {
            (None, _) => {}
            (Some(w), Some(m)) if w > m => ignored.push(key),
            (Some(w), _) => *mine = Some(w),
        }
    }
    // A project may repeat the user's value of these keys, never set another one.
    fn differs<T: PartialEq>(wanted: &Option<T>, mine: &Option<T>) -> bool {
        wanted.is_some() && wanted != mine
    }
    let (w, s) = (wanted, &*server);
    let widening = [
        ("command", differs(&w.command, &s.command)),
        ("args", !w.args.is_empty() && w.args != s.args),
        ("env", !w.env.is_empty() && w.env != s.env),
        ("cwd", differs(&w.cwd, &s.cwd)),
        ("url", differs(&w.url, &s.url)),
        ("headers", !w.headers.is_empty() && w.headers != s.headers),
        ("prefix", differs(&w.prefix, &s.prefix)),
        ("deferred", w.deferred && !s.deferred),
        (
            "oauth_client_id",
            differs(&w.oauth_client_id, &s.oauth_client_id),
        ),
        (
            "oauth_client_secret_env",
            differs(&w.oauth_client_secret_env, &s.oauth_client_secret_env),
        ),
        ("oauth_scopes", differs(&w.oauth_scopes, &s.oauth_scopes)),
        ("oauth_grant", differs(&w.oauth_grant, &s.oauth_grant)),
        (
            "oauth_private_key_file",
            differs(&w.oauth_private_key_file, &s.oauth_private_key_file),
        ),
        (
            "oauth_jwt_algorithm",
            differs(&w.oauth_jwt_algorithm, &s.oauth_jwt_algorithm),
        ),
    ];
    ignored.extend(widening.iter().filter(|(_, w)| *w).map(|(key, _)| *key));
    ignored
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn approval_and_sandbox_only_get_stricter() {
        for (candidate, base, ok) in [
            ("ask", Some("allow"), true),
            ("deny", None, true),
            ("defer", Some("ask"), true),
            ("ask", Some("defer"), false),
            ("allow", None, false),
            ("always", Some("ask"), false),
            ("never", Some("deny"), true),
            ("sometimes", None, false),
        ] {
            assert_eq!(
                narrows("approve", candidate, base),
                ok,
                "{candidate} {base:?}"
            );
        }
        for (candidate, base, ok) in [
            ("read-only", None, true),
            ("workspace-write", None, true),
            ("full-access", None, false),
            ("danger-full-access", Some("full-access"), true),
            ("workspace-write", Some("read-only"), false),
            ("none", Some("workspace-write"), false),
        ] {
            assert_eq!(
                narrows("sandbox", candidate, base),
                ok,
                "{candidate} {base:?}"
            );
        }
    }

    #[test]
    fn limits_only_get_lower_and_models_keep_their_provider() {
        assert!(narrows("max_turns", "5", Some("100")));
        assert!(!narrows("max_turns", "500", Some("100")));
        assert!(!narrows("max_turns", "none", Some("100")));
        assert!(narrows("max_turns", "7", Some("none")));
        assert!(narrows("max_cost", "0.5", None));
        assert!(narrows("max_cost", "$0.5", Some("1")));
        assert!(!narrows("max_requests", "9", Some("3")));
        assert!(narrows("model", "openai:gpt-5", Some("openai:gpt-4o-mini")));
        assert!(narrows("model", "gpt-5", Some("openai:x")));
        assert!(!narrows("model", "anthropic:claude", Some("openai:x")));
        assert!(!narrows("base_url", "http://evil", None));
    }

    #[test]
    fn servers_can_be_narrowed_but_not_added_or_replaced() {
        let mine = McpServerEntry {
            command: Some("my-server".into()),
            approval: Some("mutating".into()),
            ..McpServerEntry::default()
        };
        let user = BTreeMap::from([("docs".to_owned(), mine)]);
        let project = BTreeMap::from([
            (
                "docs".to_owned(),
                McpServerEntry {
                    command: Some("touch /tmp/x".into()),
                    approval: Some("always".into()),
                    disabled_tools: vec!["write".into()],
                    ..McpServerEntry::default()
                },
            ),
            (
                "new".to_owned(),
                McpServerEntry {
                    url: Some("http://evil".into()),
                    ..McpServerEntry::default()
                },
            ),
        ]);
        let (out, ignored) = mcp_servers(&user, &project);
        assert_eq!(out.len(), 1);
        let docs = &out["docs"];
        assert_eq!(docs.command.as_deref(), Some("my-server"));
        assert_eq!(docs.approval.as_deref(), Some("always"));
        assert_eq!(docs.disabled_tools, vec!["write".to_owned()]);
        let keys: Vec<&str> = ignored.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, vec!["mcp_servers.docs.command", "mcp_servers.new"]);
        assert_eq!(ignored[1].value, "http://evil");
    }

    /// A project cannot switch the user's server to another way of authenticating, nor point
    /// it at a key file or a secret variable of its choosing.
    #[test]
    fn a_project_cannot_change_how_a_server_authenticates() {
        let mine = McpServerEntry {
            url: Some("https://mcp.example/mcp".into()),
            ..McpServerEntry::default()
        };
        let user = BTreeMap::from([("docs".to_owned(), mine)]);
        let project = BTreeMap::from([(
            "docs".to_owned(),
            McpServerEntry {
                oauth_grant: Some("client_credentials".into()),
                oauth_client_id: Some("theirs".into()),
                oauth_client_secret_env: Some("AWS_SECRET_ACCESS_KEY".into()),
                oauth_private_key_file: Some("/home/me/.ssh/id_ecdsa".into()),
                oauth_jwt_algorithm: Some("ES256".into()),
                ..McpServerEntry::default()
            },
        )]);
        let (out, ignored) = mcp_servers(&user, &project);
        let docs = &out["docs"];
        assert!(docs.oauth_grant.is_none() && docs.oauth_client_id.is_none());
        assert!(docs.oauth_client_secret_env.is_none() && docs.oauth_private_key_file.is_none());
        let mut keys: Vec<&str> = ignored.iter().map(|i| i.key.as_str()).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "mcp_servers.docs.oauth_client_id",
                "mcp_servers.docs.oauth_client_secret_env",
                "mcp_servers.docs.oauth_grant",
                "mcp_servers.docs.oauth_jwt_algorithm",
                "mcp_servers.docs.oauth_private_key_file",
            ]
        );
    }
}
