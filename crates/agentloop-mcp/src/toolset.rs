//! [`McpToolset`]: a set of MCP servers whose tools become agentloop [`ToolSpec`]s.
//!
//! It owns the naming (`mcp__<server>__<tool>`, provider-safe, collisions rejected), the
//! mapping of annotations onto parallel safety and approval, deferred registration, the
//! `tools/list_changed` refresh (also as an agentloop [`ToolSource`], so a running agent sees
//! the new list before its next model call) and the shutdown of every server.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use agentloop::tooling::{ToolContext, ToolDeps, ToolSource, ToolSourceError, ToolSpec};
use futures::future::BoxFuture;
use rmcp::model::Tool;
use serde_json::Value;

use crate::client::{ServerHandle, ServerState};
use crate::config::{McpServerConfig, sanitize};
use crate::error::McpError;
use crate::events::{EventSink, McpEvent};

/// What one server offers, for listings (`agentloop mcp list`).
#[derive(Clone, Debug)]
pub struct ServerReport {
    /// The server's name.
    pub name: String,
    /// Whether it runs, and if not why.
    pub state: ServerState,
    /// The protocol version negotiated with it (once it started).
    pub protocol_version: Option<String>,
    /// The scopes it asked for when it refused a token for want of scope (403
    /// `insufficient_scope`), in this process or in an earlier one whose refusal was
    /// remembered next to the tokens and not granted by a login since; empty otherwise.
    pub needed_scopes: Vec<String>,
    /// Its tools (after filtering): agentloop name, server-side name, description.
    pub tools: Vec<ToolReport>,
}

/// One tool in a [`ServerReport`].
#[derive(Clone, Debug)]
pub struct ToolReport {
    /// The name the model sees.
    pub name: String,
    /// The server's name for it.
    pub server_name: String,
    /// Its description.
    pub description: String,
    /// The server annotated it read-only.
    pub read_only: bool,
    /// Calls need approval under the server's approval mode.
    pub needs_approval: bool,
}

/// A set of MCP servers and their tools.
///
/// Give it to an agent as a [`ToolSource`] (`AgentLoop::with_tool_source`) rather than adding
/// the result of [`tools`](Self::tools) once: the agent then follows each server's
/// `notifications/tools/list_changed`, asking for the new list before its next model call.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use agentloop::tooling::Deps;
/// use agentloop_mcp::{McpServerConfig, McpToolset};
///
/// let toolset = McpToolset::connect(vec![
///     McpServerConfig::stdio("everything", "node", ["dist/index.js", "stdio"]),
///     McpServerConfig::http("remote", "http://127.0.0.1:3001/mcp"),
/// ])
/// .await?;
/// let tools = toolset.tools::<Deps>().await?; // mcp__everything__echo, …
/// # let _ = tools; Ok(()) }
/// ```
pub struct McpToolset {
    servers: Vec<Arc<ServerHandle>>,
    /// agentloop tool name → needs approval, for the approval classifier.
    approval: Arc<RwLock<HashMap<String, bool>>>,
}

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field(
                "servers",
                &self.servers.iter().map(|s| s.name()).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl McpToolset {
    /// Starts every server (concurrently). A server that fails to start does not make this fail:
    /// it is reported (log, [`servers`](Self::servers)) and its tools are absent. The only error
    /// is two servers with the same name.
    pub async fn connect(
        configs: impl IntoIterator<Item = McpServerConfig>,
    ) -> Result<Self, McpError> {
        McpToolset::connect_with_events(configs, None).await
    }

    /// [`connect`](Self::connect) with a callback receiving every [`McpEvent`].
    pub async fn connect_with_events(
        configs: impl IntoIterator<Item = McpServerConfig>,
        on_event: Option<crate::McpEventFn>,
    ) -> Result<Self, McpError> {
        let events = EventSink(on_event);
        let mut servers: Vec<Arc<ServerHandle>> = Vec::new();
        for config in configs {
            if servers.iter().any(|s| s.name() == config.name) {
                return Err(McpError::DuplicateServer(config.name));
            }
            servers.push(Arc::new(ServerHandle::new(config, events.clone())));
        }
        futures::future::join_all(servers.iter().map(|s| s.start())).await;
        Ok(McpToolset {
            servers,
            approval: Arc::new(RwLock::new(HashMap::new())),
        })
    }

    /// Each server's name and state.
    pub fn servers(&self) -> Vec<(String, ServerState)> {
        self.servers
            .iter()
            .map(|s| (s.name().to_owned(), s.state()))
            .collect()
    }

    /// Every server with its state and tools.
    pub async fn report(&self) -> Vec<ServerReport> {
        let mut out = Vec::new();
        for server in &self.servers {
            let tools = server.tools().await;
            out.push(ServerReport {
                name: server.name().to_owned(),
                state: server.state(),
                protocol_version: server.protocol_version(),
                needed_scopes: server.needed_scopes(),
                tools: tools
                    .iter()
                    .map(|t| ToolReport {
                        name: tool_name(&server.config, &t.name),
                        server_name: t.name.to_string(),
                        description: description(server.name(), t),
                        read_only: read_only(t) == Some(true),
                        needs_approval: server.config.approval.needs_approval(read_only(t)),
                    })
                    .collect(),
            });
        }
        out
    }

    /// The tools of every running server as agentloop tools.
    ///
    /// Errors when two tools map to the same name. A tool whose input schema is not an object
    /// schema is skipped with a warning (agentloop tools always take an object).
    pub async fn tools<D: ToolDeps>(&self) -> Result<Vec<ToolSpec<D>>, McpError> {
        let mut specs = Vec::new();
        let mut owners: HashMap<String, String> = HashMap::new();
        let mut approval = HashMap::new();
        for server in &self.servers {
            for tool in server.tools().await {
                let name = tool_name(&server.config, &tool.name);
                let owner = format!("{}/{}", server.name(), tool.name);
                if let Some(first) = owners.insert(name.clone(), owner.clone()) {
                    return Err(McpError::NameCollision {
                        name,
                        first,
                        second: owner,
                    });
                }
                match build_spec::<D>(server, &tool, &name) {
                    Ok(spec) => {
                        approval.insert(
                            name,
                            server.config.approval.needs_approval(read_only(&tool)),
                        );
                        specs.push(spec);
                    }
                    Err(e) => tracing::warn!(
                        server = %server.name(),
                        "MCP tool `{}` skipped: {e}",
                        tool.name
                    ),
                }
            }
        }
        // Reading resources is read-only: never an approval question.
        match crate::resources::resource_tools::<D>(&self.servers) {
            Ok(extra) => {
                for spec in extra {
                    let name = spec.name().to_owned();
                    if let Some(first) = owners.insert(name.clone(), "agentloop".into()) {
                        return Err(McpError::NameCollision {
                            name,
                            first,
                            second: "agentloop's MCP resource tools".into(),
                        });
                    }
                    approval.insert(name, false);
                    specs.push(spec);
                }
            }
            Err(e) => tracing::warn!("MCP resource tools skipped: {e}"),
        }
        if let Ok(mut map) = self.approval.write() {
            *map = approval;
        }
        Ok(specs)
    }

    /// Whether a call of `tool_name` (an agentloop name from [`tools`](Self::tools)) needs
    /// approval; `None` for names that are not this toolset's.
    pub fn needs_approval(&self, tool_name: &str) -> Option<bool> {
        self.approval.read().ok()?.get(tool_name).copied()
    }

    /// A cheap, shareable form of [`needs_approval`](Self::needs_approval) for an approval hook
    /// (e.g. `WorkspaceDeps::with_tool_classifier`).
    pub fn approval_classifier(&self) -> agentloop::builtin::ToolClassifier {
        let map = self.approval.clone();
        Arc::new(move |name| map.read().ok()?.get(name).copied())
    }

    /// Whether a server announced `tools/list_changed` since the last [`refresh`](Self::refresh).
    pub fn tools_changed(&self) -> bool {
        self.servers
            .iter()
            .any(|s| s.tools_changed.load(std::sync::atomic::Ordering::Acquire))
    }

    /// Re-reads the tool list of each server that announced a change; call [`tools`](Self::tools)
    /// again afterwards. Returns whether any list was re-read.
    pub async fn refresh(&self) -> Result<bool, McpError> {
        let mut any = false;
        for server in &self.servers {
            any |= server.refresh_if_changed().await?;
        }
        Ok(any)
    }

    /// Every prompt of the running servers that offer prompts, as a slash command
    /// (`/mcp__<server>__<prompt>`).
    pub async fn prompt_commands(&self) -> Vec<crate::PromptCommand> {
        let lists =
            futures::future::join_all(self.servers.iter().map(|s| crate::prompts::commands_of(s)))
                .await;
        lists.into_iter().flatten().collect()
    }

    /// Expands a line that starts with a prompt command (`/mcp__<server>__<prompt> args…`, see
    /// [`is_prompt_command`](crate::is_prompt_command)) into the prompt's text from its server;
    /// `Ok(None)` when the line is no such command. Errors name the command and what is
    /// expected (unknown prompt, missing argument, the server's refusal).
    pub async fn expand_prompt_command(&self, line: &str) -> Result<Option<String>, McpError> {
        let line = line.trim_start();
        if !crate::is_prompt_command(line) {
            return Ok(None);
        }
        let body = &line[1..];
        let (name, rest) = body
            .split_once(char::is_whitespace)
            .map_or((body, ""), |(n, r)| (n, r));
        let commands = self.prompt_commands().await;
        let Some(command) = commands.iter().find(|c| c.command == name) else {
            let known: Vec<String> = commands.iter().map(|c| format!("/{}", c.command)).collect();
            return Err(McpError::Prompt {
                command: name.to_owned(),
                message: if known.is_empty() {
                    "no MCP server offers prompts here".into()
                } else {
                    format!("no such MCP prompt; available: {}", known.join(", "))
                },
            });
        };
        let arguments =
            crate::prompts::map_arguments(command, rest).map_err(|message| McpError::Prompt {
                command: name.to_owned(),
                message,
            })?;
        let Some(server) = self.servers.iter().find(|s| s.name() == command.server) else {
            return Ok(None);
        };
        crate::prompts::get(server, command, arguments)
            .await
            .map(Some)
    }

    /// Stops every server (stdio children are killed with their whole process group).
    pub async fn shutdown(&self) {
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}

/// The toolset as a changing set of agent tools: `changed` is
/// [`tools_changed`](McpToolset::tools_changed); `current_tools` re-reads the lists that changed
/// and returns [`tools`](McpToolset::tools). A server whose re-listing fails keeps its previous
/// tools.
impl<D: ToolDeps> ToolSource<D> for McpToolset {
    fn changed(&self) -> bool {
        self.tools_changed()
    }

    fn current_tools(&self) -> BoxFuture<'_, Result<Vec<ToolSpec<D>>, ToolSourceError>> {
        Box::pin(async move {
            for server in &self.servers {
                if let Err(e) = server.refresh_if_changed().await {
                    tracing::warn!(server = %server.name(), "MCP tool list not refreshed: {e}");
                }
            }
            Ok(self.tools::<D>().await?)
        })
    }
}

impl Drop for McpToolset {
    fn drop(&mut self) {
        for server in &self.servers {
            server.kill_now();
        }
    }
}

fn read_only(tool: &Tool) -> Option<bool> {
    tool.annotations.as_ref().and_then(|a| a.read_only_hint)
}

fn description(server: &str, tool: &Tool) -> String {
    match (&tool.description, &tool.title) {
        (Some(d), _) if !d.trim().is_empty() => d.to_string(),
        (_, Some(t)) if !t.trim().is_empty() => t.clone(),
        _ => format!("Tool `{}` of MCP server `{server}`.", tool.name),
    }
}

/// The agentloop name of a server's tool: prefix + tool, provider-safe, at most 64 characters
/// (a long name keeps its start and gets a short hash of the full name so distinct long names
/// stay distinct).
pub(crate) fn tool_name(config: &McpServerConfig, tool: &str) -> String {
    let full = format!("{}{}", sanitize(&config.effective_prefix()), sanitize(tool));
    if full.len() <= 64 {
        return full;
    }
    // FNV-1a over the unsanitized identity, 8 hex digits.
    let mut hash: u32 = 0x811c_9dc5;
    for b in format!("{}\u{0}{}", config.name, tool).bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{}_{hash:08x}", &full[..55])
}

fn build_spec<D: ToolDeps>(
    server: &Arc<ServerHandle>,
    tool: &Tool,
    name: &str,
) -> Result<ToolSpec<D>, agentloop::tooling::SpecError> {
    let schema = Value::Object((*tool.input_schema).clone());
    let handle = server.clone();
    let remote: Arc<str> = Arc::from(tool.name.as_ref());
    let read_only = read_only(tool) == Some(true);
    ToolSpec::<D>::builder(name, description(server.name(), tool))
        .parameters(schema)
        .parallel_safe(read_only)
        .deferred(server.config.deferred)
        .handler(move |ctx: ToolContext<D>, args: Value| {
            let handle = handle.clone();
            let remote = remote.clone();
            // The context itself moves into the progress callback; the call only needs its
            // cancellation token besides.
            let cancel = ctx.cancellation().clone();
            let progress: Arc<dyn Fn(Value) + Send + Sync> =
                Arc::new(move |update| ctx.progress(update));
            async move { handle.call(&remote, args, cancel, Some(progress)).await }
        })
        .build()
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<McpToolset>();
    let _ = McpEvent::Died {
        server: String::new(),
    };
}
