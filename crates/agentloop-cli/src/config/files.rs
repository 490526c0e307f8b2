//! The configuration files: `~/.config/agentloop/config.toml` (or `$XDG_CONFIG_HOME/agentloop/`)
//! and `<workspace>/.agentloop/config.toml`, the workspace file winning key by key at the top
//! level and server by server under `[mcp_servers]` — in a trusted workspace. An untrusted
//! workspace's file may only narrow the user's settings (see [`crate::config::trust`]).
//!
//! Top-level keys are the run settings ([`Settings`]: `model`, `base_url`, `reasoning`,
//! `approve`, `sandbox`, `max_turns` and the usage limits — see `crate::config::layers` for how they
//! combine with flags), `profile` (the default profile) and two tables: `[profiles.NAME]` (the
//! same settings, chosen with `--profile NAME`) and `[mcp_servers.NAME]`, with codex's key names
//! so blocks can be copied over (`command`, `args`, `env`, `cwd`, `url`, `headers`,
//! `startup_timeout_sec`, `tool_timeout_sec`, `enabled_tools`, `disabled_tools`, plus `approval`,
//! `enabled`, `prefix`, `deferred`). Unknown keys are an error that lists the valid ones; to add
//! a run setting, add a field to [`Settings`] and a row to `crate::config::layers::KEYS`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use agentloop_mcp::{ApprovalMode, HttpServer, McpServerConfig, McpTransport, StdioServer};
use serde::Deserialize;

use crate::config::trust::Trust;
use crate::error::Failure;

/// One config file (every key optional).
#[derive(Clone, Debug, Default)]
pub struct ConfigFile {
    /// The top-level run settings.
    pub settings: Settings,
    /// `profile = "NAME"`: the profile used when `--profile` is not given.
    pub profile: Option<String>,
    /// `[profiles.NAME]` tables.
    pub profiles: BTreeMap<String, Settings>,
    /// `[mcp_servers.NAME]` tables.
    pub mcp_servers: BTreeMap<String, McpServerEntry>,
    /// `[permissions]`: allow and deny rules (see `crate::config::permissions`).
    pub permissions: crate::config::permissions::PermissionsTable,
    /// `[[hooks.EVENT]]`: command hooks (see `crate::config::hooks`).
    pub hooks: crate::config::hooks::HooksTable,
    /// `[worktrees]`: what happens to the isolated workspaces of sub-agents.
    pub worktrees: WorktreesTable,
}

/// `[worktrees]`: `prune_after = "7d"` removes, when a run or chat starts, the isolated
/// worktrees (and copies) of sub-agents that ended longer ago than that, as
/// `agentloop worktrees prune --older-than 7d` does (their branches stay).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorktreesTable {
    /// The age past which a finished sub-agent's worktree is removed (`None`: kept until
    /// `agentloop worktrees prune`).
    pub prune_after: Option<std::time::Duration>,
}

impl WorktreesTable {
    fn from_toml(value: toml::Value, origin: &str) -> Result<Self, Failure> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            prune_after: Option<String>,
        }
        let invalid = |message: String| {
            Failure::usage(format!(
                "invalid config file {origin}: [worktrees]: {message}"
            ))
        };
        let raw: Raw = value
            .try_into()
            .map_err(|e: toml::de::Error| invalid(e.message().to_owned()))?;
        let prune_after = match raw.prune_after {
            Some(age) => Some(
                crate::commands::worktrees::parse_age(&age)
                    .map_err(|e| invalid(format!("prune_after: {e}")))?,
            ),
            None => None,
        };
        Ok(WorktreesTable { prune_after })
    }
}

/// The run settings a config file (top level or a profile) may set. Values are checked by the
/// same parser as the matching `agentloop run` flag, so the rules (and error messages) are
/// the flags'. `approval_policy` and `sandbox_mode` are accepted as codex's names for `approve`
/// and `sandbox`.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// `--model PROVIDER:NAME`.
    pub model: Option<String>,
    /// `--base-url URL`.
    pub base_url: Option<String>,
    /// `--reasoning LEVEL`.
    pub reasoning: Option<String>,
    /// `--approve POLICY`.
    #[serde(alias = "approval_policy")]
    pub approve: Option<String>,
    /// `--sandbox MODE`.
    #[serde(alias = "sandbox_mode")]
    pub sandbox: Option<String>,
    /// `--max-turns N` (a number, or `"none"`).
    pub max_turns: Option<toml::Value>,
    /// `--max-requests N`.
    pub max_requests: Option<u64>,
    /// `--max-input-tokens N`.
    pub max_input_tokens: Option<u64>,
    /// `--max-output-tokens N`.
    pub max_output_tokens: Option<u64>,
    /// `--max-total-tokens N`.
    pub max_total_tokens: Option<u64>,
    /// `--max-cost USD`.
    pub max_cost: Option<f64>,
}

impl Settings {
    /// `other` (more specific) over `self`, key by key.
    fn merge(self, other: Settings) -> Settings {
        Settings {
            model: other.model.or(self.model),
            base_url: other.base_url.or(self.base_url),
            reasoning: other.reasoning.or(self.reasoning),
            approve: other.approve.or(self.approve),
            sandbox: other.sandbox.or(self.sandbox),
            max_turns: other.max_turns.or(self.max_turns),
            max_requests: other.max_requests.or(self.max_requests),
            max_input_tokens: other.max_input_tokens.or(self.max_input_tokens),
            max_output_tokens: other.max_output_tokens.or(self.max_output_tokens),
            max_total_tokens: other.max_total_tokens.or(self.max_total_tokens),
            max_cost: other.max_cost.or(self.max_cost),
        }
    }

    /// Unsets the setting named `key` (as `crate::config::layers::KEYS` names them).
    pub fn clear(&mut self, key: &str) {
        match key {
            "model" => self.model = None,
            "base_url" => self.base_url = None,
            "reasoning" => self.reasoning = None,
            "approve" => self.approve = None,
            "sandbox" => self.sandbox = None,
            "max_turns" => self.max_turns = None,
            "max_requests" => self.max_requests = None,
            "max_input_tokens" => self.max_input_tokens = None,
            "max_output_tokens" => self.max_output_tokens = None,
            "max_total_tokens" => self.max_total_tokens = None,
            "max_cost" => self.max_cost = None,
            _ => {}
        }
    }

    /// The value of the setting named `key` (as `crate::config::layers::KEYS` names them), as the
    /// text its flag takes.
    pub fn get(&self, key: &str) -> Option<String> {
        fn text(v: &toml::Value) -> String {
            match v {
                toml::Value::String(s) => s.clone(),
                other => other.to_string(),
            }
        }
        match key {
            "model" => self.model.clone(),
            "base_url" => self.base_url.clone(),
            "reasoning" => self.reasoning.clone(),
            "approve" => self.approve.clone(),
            "sandbox" => self.sandbox.clone(),
            "max_turns" => self.max_turns.as_ref().map(text),
            "max_requests" => self.max_requests.map(|v| v.to_string()),
            "max_input_tokens" => self.max_input_tokens.map(|v| v.to_string()),
            "max_output_tokens" => self.max_output_tokens.map(|v| v.to_string()),
            "max_total_tokens" => self.max_total_tokens.map(|v| v.to_string()),
            "max_cost" => self.max_cost.map(|v| v.to_string()),
            _ => None,
        }
    }
}

/// One `[mcp_servers.NAME]` table.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerEntry {
    /// stdio: the program.
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory (relative to the workspace).
    pub cwd: Option<PathBuf>,
    /// HTTP: the endpoint.
    pub url: Option<String>,
    /// HTTP: headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Startup timeout in seconds (default 30).
    pub startup_timeout_sec: Option<f64>,
    /// Per-call timeout in seconds, restarted by progress (default 60).
    pub tool_timeout_sec: Option<f64>,
    /// Only these tools.
    pub enabled_tools: Option<Vec<String>>,
    /// Never these tools.
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    /// `always`, `mutating` (default) or `never-ask`.
    pub approval: Option<String>,
    /// `false` skips the server.
    pub enabled: Option<bool>,
    /// Tool-name prefix (default `mcp__NAME__`; `""` for none).
    pub prefix: Option<String>,
    /// Load the tools through tool search instead of sending them every turn.
    #[serde(default)]
    pub deferred: bool,
    /// HTTP OAuth: a client id registered with the authorization server beforehand (dynamic
    /// registration when unset).
    pub oauth_client_id: Option<String>,
    /// HTTP OAuth: the environment variable holding that client's secret.
    pub oauth_client_secret_env: Option<String>,
    /// HTTP OAuth: the scopes to ask for (from the server's challenge or metadata when unset).
    pub oauth_scopes: Option<Vec<String>>,
    /// HTTP OAuth: `authorization_code` (the default: a person logs in) or
    /// `client_credentials` (no person: the client authenticates with its secret or key).
    pub oauth_grant: Option<String>,
    /// HTTP OAuth, client credentials: a PEM private key signing the client's JWT assertion
    /// (`private_key_jwt`) instead of a secret; absolute, or relative to the workspace.
    pub oauth_private_key_file: Option<PathBuf>,
    /// HTTP OAuth, client credentials with a key: its algorithm (default `ES256`).
    pub oauth_jwt_algorithm: Option<String>,
}

impl ConfigFile {
    /// Parses one file's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Self, Failure> {
        let invalid =
            |message: String| Failure::usage(format!("invalid config file {origin}: {message}"));
        let mut table: toml::Table =
            toml::from_str(text).map_err(|e| invalid(e.message().to_owned()))?;
        let mut take = |key: &str| table.remove(key);
        let mcp_servers = match take("mcp_servers") {
            Some(v) => v
                .try_into()
                .map_err(|e: toml::de::Error| invalid(format!("[mcp_servers]: {}", e.message())))?,
            None => BTreeMap::new(),
        };
        let profiles = match take("profiles") {
            Some(v) => v
                .try_into()
                .map_err(|e: toml::de::Error| invalid(format!("[profiles]: {}", e.message())))?,
            None => BTreeMap::new(),
        };
        let permissions = match take("permissions") {
            Some(v) => crate::config::permissions::PermissionsTable::from_toml(v, origin)?,
            None => Default::default(),
        };
        let hooks = match take("hooks") {
            Some(v) => crate::config::hooks::HooksTable::from_toml(v, origin)?,
            None => Default::default(),
        };
        let worktrees = match take("worktrees") {
            Some(v) => WorktreesTable::from_toml(v, origin)?,
            None => WorktreesTable::default(),
        };
        let profile = match take("profile") {
            Some(toml::Value::String(name)) => Some(name),
            Some(other) => {
                return Err(invalid(format!(
                    "`profile` must be a profile name (a string), not {other}"
                )));
            }
            None => None,
        };
        let settings: Settings =
            toml::Value::Table(table)
                .try_into()
                .map_err(|e: toml::de::Error| {
                    invalid(format!(
                        "{} (besides these, a config file may have `profile`, [profiles.NAME], \
                 [mcp_servers.NAME], [permissions], [[hooks.EVENT]] and [worktrees])",
                        e.message()
                    ))
                })?;
        Ok(ConfigFile {
            settings,
            profile,
            profiles,
            mcp_servers,
            permissions,
            hooks,
            worktrees,
        })
    }

    /// Reads a file; a missing file is an empty config.
    pub fn read(path: &Path) -> Result<Self, Failure> {
        match std::fs::read_to_string(path) {
            Ok(text) => ConfigFile::parse(&text, &path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConfigFile::default()),
            Err(e) => Err(Failure::new(format!(
                "cannot read config file {}: {e}",
                path.display()
            ))),
        }
    }

    /// `other` (the more specific file) over `self`: key by key for settings and within each
    /// profile, server by server for MCP.
    pub fn merge(mut self, other: ConfigFile) -> ConfigFile {
        self.mcp_servers.extend(other.mcp_servers);
        for (name, settings) in other.profiles {
            let merged = match self.profiles.remove(&name) {
                Some(base) => base.merge(settings),
                None => settings,
            };
            self.profiles.insert(name, merged);
        }
        ConfigFile {
            settings: self.settings.merge(other.settings),
            profile: other.profile.or(self.profile),
            profiles: self.profiles,
            mcp_servers: self.mcp_servers,
            permissions: self.permissions.concat(other.permissions),
            hooks: self.hooks.concat(other.hooks),
            worktrees: WorktreesTable {
                prune_after: other.worktrees.prune_after.or(self.worktrees.prune_after),
            },
        }
    }

    /// The user file then the workspace file, merged — the workspace file whole only when
    /// `trust` applies to `workspace`. Otherwise the result has the user's settings and
    /// profiles (the run settings an untrusted file may narrow are resolved by
    /// `crate::config::layers`) and the user's MCP servers as the workspace file may narrow them
    /// (see [`crate::config::trust::narrow`]).
    pub fn load(workspace: &Path, trust: &Trust) -> Result<Self, Failure> {
        let user = match user_config_path() {
            Some(path) => ConfigFile::read(&path)?,
            None => ConfigFile::default(),
        };
        let local = ConfigFile::read(&project_config_path(workspace))?;
        if trust.applies_to(workspace) {
            return Ok(user.merge(local));
        }
        let (mcp_servers, _) =
            crate::config::trust::narrow::mcp_servers(&user.mcp_servers, &local.mcp_servers);
        Ok(ConfigFile {
            mcp_servers,
            ..user
        })
    }

    /// The enabled MCP servers, in name order, with `--mcp` values added (they win).
    pub fn mcp_servers(
        &self,
        workspace: &Path,
        cli: &[String],
    ) -> Result<Vec<McpServerConfig>, Failure> {
        let mut entries = self.mcp_servers.clone();
        for value in cli {
            let (name, entry) = parse_cli_server(value)?;
            entries.insert(name, entry);
        }
        let mut out = Vec::new();
        for (name, entry) in entries {
            if entry.enabled == Some(false) {
                continue;
            }
            out.push(entry.into_config(&name, workspace)?);
        }
        Ok(out)
    }
}

/// `<workspace>/.agentloop/config.toml`.
pub fn project_config_path(workspace: &Path) -> PathBuf {
    workspace.join(".agentloop").join("config.toml")
}

/// `$XDG_CONFIG_HOME/agentloop/config.toml`, else `~/.config/agentloop/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("agentloop").join("config.toml"))
}

/// The directories of one kind of extension file (`agents`, `skills`, `commands`) for
/// `workspace`, most specific first: the workspace's `.agentloop/KIND` and Claude Code's
/// `.claude/KIND` when it is trusted, then the user's `KIND` beside the user config file.
pub fn extension_dirs(workspace: &Path, trusted: bool, kind: &str) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if trusted {
        dirs.push(workspace.join(".agentloop").join(kind));
        dirs.push(workspace.join(".claude").join(kind));
    }
    if let Some(config) = user_config_path() {
        dirs.push(config.with_file_name(kind));
    }
    dirs
}

/// The Markdown files (`*.md`) directly in `dir`, sorted; none when it cannot be read.
pub fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files
}

/// The definitions read from the Markdown files of `roots` (most specific first), keeping the
/// first of each name so a workspace file hides a user file of the same name, and one line per
/// file `read` could not use.
pub fn load_markdown_defs<T>(
    roots: Vec<PathBuf>,
    read: impl Fn(&Path) -> Result<T, String>,
    name: impl Fn(&T) -> &str,
) -> (Vec<T>, Vec<String>) {
    let mut defs: Vec<T> = Vec::new();
    let mut problems = Vec::new();
    for file in roots.iter().flat_map(|root| markdown_files(root)) {
        match read(&file) {
            Ok(def) if defs.iter().any(|d| name(d) == name(&def)) => {}
            Ok(def) => defs.push(def),
            Err(why) => problems.push(why),
        }
    }
    (defs, problems)
}

/// `NAME=COMMAND ARGS…` or `NAME=URL`.
fn parse_cli_server(value: &str) -> Result<(String, McpServerEntry), Failure> {
    let usage = || {
        Failure::usage(format!(
            "--mcp expects NAME=COMMAND [ARGS…] or NAME=URL, got \"{value}\""
        ))
    };
    let (name, rest) = value.split_once('=').ok_or_else(usage)?;
    let (name, rest) = (name.trim(), rest.trim());
    if name.is_empty() || rest.is_empty() {
        return Err(usage());
    }
    let mut entry = McpServerEntry::default();
    if rest.starts_with("http://") || rest.starts_with("https://") {
        entry.url = Some(rest.to_owned());
    } else {
        let mut words = rest.split_whitespace().map(str::to_owned);
        entry.command = words.next();
        entry.args = words.collect();
    }
    Ok((name.to_owned(), entry))
}

fn seconds(name: &str, key: &str, v: Option<f64>, default: Duration) -> Result<Duration, Failure> {
    match v {
        None => Ok(default),
        Some(s) if s.is_finite() && s > 0.0 => Ok(Duration::from_secs_f64(s)),
        Some(s) => Err(Failure::usage(format!(
            "mcp_servers.{name}.{key} must be a positive number of seconds, got {s}"
        ))),
    }
}

impl McpServerEntry {
    fn into_config(mut self, name: &str, workspace: &Path) -> Result<McpServerConfig, Failure> {
        // Taken, not moved: the HTTP arm reads the `oauth_*` keys from the whole entry.
        let transport = match (self.command.take(), self.url.take()) {
            (Some(command), None) => McpTransport::Stdio(StdioServer {
                command,
                args: self.args,
                env: self.env,
                cwd: self.cwd.map(|c| workspace.join(c)),
            }),
            (None, Some(url)) => {
                let oauth = crate::mcp_auth::oauth_settings(name, &self, workspace)?;
                // A configured `Authorization` header is the server's credential; OAuth
                // tokens would compete with it.
                let own_token = self
                    .headers
                    .keys()
                    .any(|k| k.eq_ignore_ascii_case("authorization"));
                McpTransport::Http(HttpServer {
                    url,
                    headers: self.headers,
                    oauth: (!own_token).then_some(oauth),
                })
            }
            (Some(_), Some(_)) => {
                return Err(Failure::usage(format!(
                    "mcp_servers.{name} has both `command` and `url`; use one"
                )));
            }
            (None, None) => {
                return Err(Failure::usage(format!(
                    "mcp_servers.{name} needs `command` (stdio) or `url` (streamable HTTP)"
                )));
            }
        };
        let mut config = McpServerConfig::new(name, transport);
        config.startup_timeout = seconds(
            name,
            "startup_timeout_sec",
            self.startup_timeout_sec,
            agentloop_mcp::DEFAULT_STARTUP_TIMEOUT,
        )?;
        config.tool_timeout = seconds(
            name,
            "tool_timeout_sec",
            self.tool_timeout_sec,
            agentloop_mcp::DEFAULT_TOOL_TIMEOUT,
        )?;
        config.enabled_tools = self.enabled_tools;
        config.disabled_tools = self.disabled_tools;
        if let Some(a) = self.approval {
            config.approval = a
                .parse::<ApprovalMode>()
                .map_err(|e| Failure::usage(format!("mcp_servers.{name}.approval: {e}")))?;
        }
        config.prefix = self.prefix;
        config.deferred = self.deferred;
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn worktrees_prune_after_is_an_age_and_the_more_specific_file_wins() {
        let user = ConfigFile::parse("[worktrees]\nprune_after = \"7d\"\n", "user").unwrap();
        assert_eq!(
            user.worktrees.prune_after,
            Some(std::time::Duration::from_secs(7 * 86_400))
        );
        let local = ConfigFile::parse("[worktrees]\nprune_after = \"12h\"\n", "local").unwrap();
        let merged = user.clone().merge(local);
        assert_eq!(
            merged.worktrees.prune_after,
            Some(std::time::Duration::from_secs(12 * 3600))
        );
        assert_eq!(
            user.merge(ConfigFile::default()).worktrees.prune_after,
            Some(std::time::Duration::from_secs(7 * 86_400))
        );
        for bad in [
            "[worktrees]\nprune_after = \"soon\"\n",
            "[worktrees]\nkeep = 1\n",
        ] {
            let err = ConfigFile::parse(bad, "f").unwrap_err().to_string();
            assert!(err.contains("[worktrees]"), "{bad}: {err}");
        }
    }

    #[test]
    fn codex_blocks_parse_and_merge() {
        let user = ConfigFile::parse(
            r#"
            [mcp_servers.docs]
            command = "npx"
            args = ["-y", "docs-server"]
            env = { TOKEN = "x" }
            startup_timeout_sec = 5
            tool_timeout_sec = 1.5
            enabled_tools = ["search"]
            approval = "never-ask"

            [mcp_servers.remote]
            url = "http://127.0.0.1:1/mcp"
            headers = { Authorization = "Bearer t" }
            "#,
            "user",
        )
        .unwrap();
        let local = ConfigFile::parse(
            "[mcp_servers.remote]\nurl = \"http://127.0.0.1:2/mcp\"\ndeferred = true\nprefix = \"r_\"\n\n[mcp_servers.off]\ncommand = \"x\"\nenabled = false\n",
            "local",
        )
        .unwrap();
        let merged = user.merge(local);
        let servers = merged.mcp_servers(Path::new("/ws"), &[]).unwrap();
        assert_eq!(servers.len(), 2);
        let docs = &servers[0];
        assert_eq!(docs.startup_timeout, Duration::from_secs(5));
        assert_eq!(docs.tool_timeout, Duration::from_millis(1500));
        assert_eq!(docs.approval, ApprovalMode::NeverAsk);
        assert!(docs.allows_tool("search") && !docs.allows_tool("other"));
        let McpTransport::Http(h) = &servers[1].transport else {
            panic!()
        };
        assert_eq!(h.url, "http://127.0.0.1:2/mcp");
        assert!(servers[1].deferred);
        assert_eq!(servers[1].effective_prefix(), "r_");

        let cli = merged
            .mcp_servers(
                Path::new("/ws"),
                &["docs=my-server --flag".into(), "web=https://x/mcp".into()],
            )
            .unwrap();
        let McpTransport::Stdio(s) = &cli[0].transport else {
            panic!()
        };
        assert_eq!(
            (s.command.as_str(), s.args.clone()),
            ("my-server", vec!["--flag".to_owned()])
        );
        assert!(matches!(cli[2].transport, McpTransport::Http(_)));
    }

    #[test]
    fn unknown_keys_and_bad_values_are_clear_errors() {
        let err = ConfigFile::parse("[mcp_servers.x]\ncomand = \"a\"\n", "f").unwrap_err();
        assert!(
            err.message.contains("comand") && err.message.contains("command"),
            "{}",
            err.message
        );
        assert!(err.message.contains("tool_timeout_sec"), "{}", err.message);
        let err = ConfigFile::parse("models = 1\n", "f").unwrap_err();
        assert!(err.message.contains("mcp_servers"), "{}", err.message);
        for bad in [
            "[mcp_servers.x]\n",
            "[mcp_servers.x]\ncommand = \"a\"\nurl = \"http://b\"\n",
            "[mcp_servers.x]\ncommand = \"a\"\napproval = \"maybe\"\n",
            "[mcp_servers.x]\ncommand = \"a\"\ntool_timeout_sec = -1\n",
        ] {
            let file = ConfigFile::parse(bad, "f").unwrap();
            assert!(file.mcp_servers(Path::new("/"), &[]).is_err(), "{bad}");
        }
        assert!(
            ConfigFile::default()
                .mcp_servers(Path::new("/"), &["nothing".into()])
                .is_err()
        );
    }
}
