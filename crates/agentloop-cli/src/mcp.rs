//! The CLI's MCP commands: connecting the configured servers for `agentloop run`, listing them
//! (`agentloop mcp list`) and serving the built-in tools (`agentloop mcp-server`).
//!
//! Server lifecycle notices (started, failed, died, restarted) go to stderr as one line each;
//! a server that fails to start never stops a run, its tools are just absent. A server that
//! asks for OAuth it was not given says "needs login: agentloop mcp login NAME" (see
//! `mcp_auth`). The toolset is
//! the agent's tool source, so a server's `tools/list_changed` reaches the next model call.

use std::sync::Arc;

use agentloop::agent::AgentLoop;
use agentloop::builtin::{Workspace, WorkspaceDeps};
use agentloop::tooling::{Registry, ToolSpec, bm25_tool_search};
use agentloop_mcp::{McpEvent, McpLogLevel, McpServerConfig, McpToolset, ServerState};

use crate::cli::{McpCommand, McpListArgs, McpServerArgs};
use crate::config::files::ConfigFile;
use crate::error::Failure;

/// Tools a tool search returns per query.
const TOOL_SEARCH_TOP_K: usize = 5;

/// The environment variable setting the least severe MCP server log message shown on stderr
/// (`debug` … `emergency`, or `off`; `warning` when unset).
pub const LOG_LEVEL_ENV: &str = "AGENTLOOP_MCP_LOG_LEVEL";

/// The log level [`LOG_LEVEL_ENV`] asks for: `None` when unset (each server's default),
/// `Some(None)` for `off`.
fn log_level_from_env() -> Result<Option<Option<McpLogLevel>>, Failure> {
    let Ok(value) = std::env::var(LOG_LEVEL_ENV) else {
        return Ok(None);
    };
    if value.trim().eq_ignore_ascii_case("off") {
        return Ok(Some(None));
    }
    value
        .parse::<McpLogLevel>()
        .map(|level| Some(Some(level)))
        .map_err(|e| Failure::usage(format!("{LOG_LEVEL_ENV}: {e} (or off)")))
}

/// The servers with their requests for user input answered from the form's defaults
/// (`--elicitation-defaults`) or declined at once: a run never waits for an answer.
pub fn with_elicitation(servers: Vec<McpServerConfig>, defaults: bool) -> Vec<McpServerConfig> {
    let mode = if defaults {
        agentloop_mcp::ElicitationMode::Defaults
    } else {
        agentloop_mcp::ElicitationMode::Decline
    };
    servers
        .into_iter()
        .map(|s| s.with_elicitation(mode))
        .collect()
}

/// A progress update of a running call as a short text (`3/6 copying`), when it is one.
pub fn progress_text(update: &serde_json::Value) -> Option<String> {
    let progress = update.get("progress")?.as_f64()?;
    let mut text = match update.get("total").and_then(serde_json::Value::as_f64) {
        Some(total) => format!("{progress}/{total}"),
        None => progress.to_string(),
    };
    if let Some(message) = update.get("message").and_then(serde_json::Value::as_str) {
        text.push(' ');
        text.push_str(&crate::ui::safe_text::visible_line(message));
    }
    Some(text)
}

/// Starts the servers; their tools (empty when none are configured). Server log messages at
/// or above [`LOG_LEVEL_ENV`] go to stderr, never to the model.
pub async fn connect(
    mut servers: Vec<McpServerConfig>,
) -> Result<(McpToolset, Vec<ToolSpec<WorkspaceDeps>>), Failure> {
    if let Some(level) = log_level_from_env()? {
        for server in &mut servers {
            server.log_level = level;
        }
    }
    let on_event: agentloop_mcp::McpEventFn = Arc::new(|event: &McpEvent| match event {
        McpEvent::Started { .. } => {}
        McpEvent::NeedsLogin { server, scopes, .. } => eprintln!(
            "agentloop: warning: MCP server `{server}` needs login: agentloop mcp login {server}{}",
            more_scope(scopes)
        ),
        _ => eprintln!("agentloop: {event}"),
    });
    let toolset = McpToolset::connect_with_events(servers, Some(on_event))
        .await
        .map_err(|e| Failure::usage(e.to_string()))?;
    let tools = toolset
        .tools::<WorkspaceDeps>()
        .await
        .map_err(|e| Failure::usage(e.to_string()))?;
    Ok((toolset, tools))
}

/// A run's prompt with a leading MCP prompt command (`/mcp__<server>__<prompt> args…`) expanded
/// into the prompt's text from its server; any other prompt unchanged. A command that cannot be
/// expanded (unknown prompt, missing argument, server error) is a usage error naming it.
pub async fn expand_prompt(toolset: &McpToolset, prompt: String) -> Result<String, Failure> {
    match toolset.expand_prompt_command(&prompt).await {
        Ok(Some(text)) => Ok(text),
        Ok(None) => Ok(prompt),
        Err(e) => Err(Failure::usage(e.to_string())),
    }
}

/// Makes the toolset the agent's tool source. Its tools as listed at start (`mcp_tools`) must
/// not collide with the agent's own (a usage error, as at registration); when some tools are
/// deferred (deferred MCP servers) the local tool search is added, indexing them.
pub fn attach(
    agent: AgentLoop<WorkspaceDeps>,
    toolset: Arc<McpToolset>,
    mcp_tools: Vec<ToolSpec<WorkspaceDeps>>,
) -> Result<AgentLoop<WorkspaceDeps>, Failure> {
    let all = Registry::new(agent.registry().specs().cloned().chain(mcp_tools))
        .map_err(|e| Failure::usage(format!("cannot register the MCP tools: {e}")))?;
    let mut agent = agent.with_tool_source(toolset);
    if all.deferred_names().is_empty() || all.tool_search().is_some() {
        return Ok(agent);
    }
    let search = bm25_tool_search(&all, TOOL_SEARCH_TOP_K);
    agent
        .add_tool(search)
        .map_err(|e| Failure::new(format!("cannot register the tool search: {e}")))?;
    Ok(agent)
}

/// What a server that refused a token for want of scope asks for, as the end of its "needs
/// login" or "calls were refused" line (empty when it wants a login at all).
fn more_scope(scopes: &[String]) -> String {
    if scopes.is_empty() {
        return String::new();
    }
    let scopes: Vec<String> = scopes
        .iter()
        .map(|s| crate::ui::safe_text::visible_line(s))
        .collect();
    format!(
        " (more scope needed: {}; the login asks for it)",
        scopes.join(" ")
    )
}

/// `agentloop mcp …`.
pub async fn run(command: McpCommand) -> Result<(), Failure> {
    match command {
        McpCommand::List(args) => list(args).await,
        McpCommand::Login(args) => crate::mcp_auth::login(args).await,
        McpCommand::Logout(args) => crate::mcp_auth::logout(args).await,
    }
}

async fn list(args: McpListArgs) -> Result<(), Failure> {
    let root = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let servers = ConfigFile::load(&root, &args.trust)?.mcp_servers(&root, &args.mcp)?;
    if servers.is_empty() {
        println!(
            "no MCP servers configured (add [mcp_servers.NAME] to {} or .agentloop/config.toml, or pass --mcp)",
            crate::config::files::user_config_path()
                .map(|p| p.display().to_string())
                .unwrap_or_else(|| "~/.config/agentloop/config.toml".into())
        );
        return Ok(());
    }
    let toolset = McpToolset::connect(servers)
        .await
        .map_err(|e| Failure::usage(e.to_string()))?;
    // Surface name collisions the way a run would.
    if let Err(e) = toolset.tools::<WorkspaceDeps>().await {
        eprintln!("agentloop: warning: {e}");
    }
    for server in toolset.report().await {
        match &server.state {
            ServerState::Running { tools } => {
                let protocol = server
                    .protocol_version
                    .as_deref()
                    .map(|v| format!(", protocol {v}"))
                    .unwrap_or_default();
                let refused = if server.needed_scopes.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; calls were refused for want of scope: agentloop mcp login {}{}",
                        server.name,
                        more_scope(&server.needed_scopes)
                    )
                };
                println!(
                    "{}: running, {tools} tool(s){protocol}{refused}",
                    server.name
                );
            }
            ServerState::Down(why) => println!("{}: failed to start: {why}", server.name),
            ServerState::NeedsLogin(_) => println!(
                "{}: needs login: agentloop mcp login {}{}",
                server.name,
                server.name,
                more_scope(&server.needed_scopes)
            ),
            _ => println!("{}: unknown state", server.name),
        }
        for tool in &server.tools {
            let mut flags = Vec::new();
            if tool.read_only {
                flags.push("read-only");
            }
            if tool.needs_approval {
                flags.push("needs approval");
            }
            let first_line = tool.description.lines().next().unwrap_or_default();
            let flags = if flags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", flags.join(", "))
            };
            println!("  {}{flags}  {first_line}", tool.name);
        }
    }
    for prompt in toolset.prompt_commands().await {
        let first_line = prompt.description.lines().next().unwrap_or_default();
        println!("prompt {}  {first_line}", prompt.usage());
    }
    toolset.shutdown().await;
    Ok(())
}

/// The environment variable holding the bearer token `agentloop mcp-server --listen` requires
/// (none when unset or empty). An environment variable, not a flag: flags show in `ps`.
pub const SERVER_TOKEN_ENV: &str = "AGENTLOOP_MCP_SERVER_TOKEN";

/// `agentloop mcp-server`: over stdio, or over streamable HTTP with `--listen`.
pub async fn serve(args: McpServerArgs) -> Result<(), Failure> {
    let workspace = Workspace::new(&args.workspace).map_err(|e| Failure::usage(e.to_string()))?;
    let Some(addr) = &args.listen else {
        return agentloop_mcp::serve_builtin_tools(workspace, args.approve.into())
            .await
            .map_err(|e| Failure::new(format!("MCP server: {e}")));
    };
    let listener = tokio::net::TcpListener::bind(addr.as_str())
        .await
        .map_err(|e| Failure::usage(format!("--listen {addr}: cannot listen there: {e}")))?;
    let local = listener.local_addr()?;
    let token = std::env::var(SERVER_TOKEN_ENV).unwrap_or_default();
    if token.is_empty() && !local.ip().is_loopback() {
        eprintln!(
            "agentloop: warning: serving on {local} without a bearer token: anyone who can reach \
             it runs tools in {}; set {SERVER_TOKEN_ENV}",
            workspace.root().display()
        );
    }
    let options = agentloop_mcp::HttpServeOptions::default()
        .with_bearer_token(token)
        .with_allowed_origins(args.allow_origin.clone())
        .with_allowed_hosts(args.allow_host.clone());
    eprintln!(
        "agentloop: MCP server listening on http://{local}{}",
        agentloop_mcp::MCP_PATH
    );
    agentloop_mcp::serve_builtin_tools_http(workspace, args.approve.into(), listener, options)
        .await
        .map_err(|e| Failure::new(format!("MCP server: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_reads_as_steps_of_a_total() {
        let update = serde_json::json!({"progress": 3.0, "total": 6.0, "message": "copy\u{1b}[2J"});
        let text = progress_text(&update).unwrap_or_default();
        assert!(text.starts_with("3/6 copy"), "{text}");
        assert!(!text.contains('\u{1b}'), "{text}");
        assert_eq!(
            progress_text(&serde_json::json!({"progress": 2})).as_deref(),
            Some("2")
        );
        assert_eq!(progress_text(&serde_json::json!({"lines": 2})), None);
    }
}
