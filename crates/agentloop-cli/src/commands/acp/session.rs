//! What `agentloop acp` serves with ([`Server`]: the model, store and flags, shared by every
//! session) and one ACP session ([`Session`]): an ordinary stored session of the CLI, in the
//! client's working directory, with the trust decision, config files, MCP servers, permission
//! rules and hooks that `agentloop run` would use there.

use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::McpServer;
use agentloop::agent::AbortSignal;
use agentloop::builtin::Workspace;
use agentloop::model::Model;
use agentloop::session::{NewSession, SessionStore};
use agentloop_mcp::McpServerConfig;

use super::modes::Mode;
use super::permission::Asker;
use crate::cli::RunArgs;
use crate::config::extensions::Extensions;
use crate::config::session::{Choice, recorded};
use crate::config::trust::Trust;
use crate::error::Failure;
use crate::provider::ModelSpec;

/// The model, store and flags every session of this process uses.
pub struct Server {
    /// The `run` flags (with the config files applied).
    pub args: RunArgs,
    /// The session store.
    pub store: Arc<dyn SessionStore>,
    /// The model adapter and its description.
    pub model: Arc<dyn Model>,
    /// The model id and provider.
    pub spec: ModelSpec,
    /// The model, base URL and reasoning effort as chosen.
    pub choice: Choice,
}

impl Server {
    /// Opens the store and builds the model (a bad flag fails here, before any request).
    pub fn open(db: Option<&str>, args: RunArgs) -> Result<Server, Failure> {
        let store = crate::commands::sessions::open_store(db)?;
        let choice = Choice {
            model: args.target.model.clone(),
            base_url: args.base_url.clone(),
            reasoning: args.reasoning,
        };
        let (spec, model) = choice.build(&args)?;
        if let Some(note) = args.approve.deprecation() {
            eprintln!("agentloop: note: {note}");
        }
        Ok(Server {
            args,
            store,
            model,
            spec,
            choice,
        })
    }
}

/// One ACP session.
pub struct Session {
    /// The stored session's id (also the ACP session id).
    pub id: String,
    /// The client's working directory.
    pub workspace: Workspace,
    /// Whether the workspace's own files take full effect.
    pub trusted: bool,
    /// The MCP servers of the config files and of the client.
    pub mcp: Vec<McpServerConfig>,
    /// The system prompt (`--system` or the default, with the project instructions).
    pub system_prompt: Option<String>,
    /// Permission rules, hooks and skills of the config files.
    pub extensions: Arc<Extensions>,
    /// `ask` or `auto`.
    pub mode: Mode,
    /// The approval asker (remembers "allow always").
    pub asker: Asker,
    /// The running turn's abort signal.
    pub running: RefCell<Option<AbortSignal>>,
    /// Whether shell commands run in the client's terminals.
    pub terminals: bool,
}

impl Session {
    /// Creates a stored session in `cwd`.
    pub fn create(server: &Server, cwd: &Path, client: &[McpServer]) -> Result<Session, Failure> {
        let workspace = workspace(cwd)?;
        let settings = recorded(
            &server.spec,
            server.choice.base_url.as_deref(),
            server.choice.reasoning,
            workspace.root(),
        );
        let mut new = NewSession::new()
            .model(&server.spec.name)
            .settings(settings);
        if let Some(title) = &server.args.title {
            new = new.title(title);
        }
        let info = server.store.create(new)?;
        Session::open(server, info.id, workspace, client)
    }

    /// Opens the stored session `id` to continue it in `cwd`.
    pub fn load(
        server: &Server,
        id: &str,
        cwd: &Path,
        client: &[McpServer],
    ) -> Result<Session, Failure> {
        let info = server.store.info(id)?;
        Session::open(server, info.id, workspace(cwd)?, client)
    }

    fn open(
        server: &Server,
        id: String,
        workspace: Workspace,
        client: &[McpServer],
    ) -> Result<Session, Failure> {
        let args = &server.args;
        let root = workspace.root().to_path_buf();
        // The decision `run` would make in this directory (`--trust-project` covers only the
        // directory the process started in).
        let trust = if args.trust.applies_to(&root) {
            args.trust.clone()
        } else {
            Trust::evaluate(&root, false)?
        };
        let trusted = trust.applies_to(&root);
        let mut mcp =
            crate::config::files::ConfigFile::load(&root, &trust)?.mcp_servers(&root, &args.mcp)?;
        mcp.extend(client.iter().filter_map(client_server));
        let mcp = crate::mcp::with_elicitation(mcp, args.elicitation_defaults);
        let system_prompt = crate::commands::run::system_prompt_for(args, &workspace);
        let extensions = Arc::new(Extensions::load(&root, trusted)?);
        let mode = Mode::from_flag(args.approve);
        Ok(Session {
            asker: Asker::new(&id, root, mode.clone()),
            id,
            workspace,
            trusted,
            mcp,
            system_prompt,
            extensions,
            mode,
            running: RefCell::new(None),
            terminals: false,
        })
    }
}

fn workspace(cwd: &Path) -> Result<Workspace, Failure> {
    Workspace::new(cwd).map_err(|e| Failure::usage(e.to_string()))
}

/// A client-provided MCP server (stdio or streamable HTTP; SSE is not advertised).
fn client_server(server: &McpServer) -> Option<McpServerConfig> {
    match server {
        McpServer::Stdio(stdio) => {
            let mut config = McpServerConfig::stdio(
                stdio.name.clone(),
                stdio.command.to_string_lossy(),
                stdio.args.clone(),
            );
            for var in &stdio.env {
                config = config.with_env(var.name.clone(), var.value.clone());
            }
            Some(config)
        }
        McpServer::Http(http) => {
            let mut config = McpServerConfig::http(http.name.clone(), http.url.clone());
            for header in &http.headers {
                config = config.with_header(header.name.clone(), header.value.clone());
            }
            Some(config)
        }
        _ => {
            eprintln!("agentloop: acp: ignored an MCP server of a transport not supported here");
            None
        }
    }
}
