//! The ACP agent: `initialize`, `authenticate`, `session/new`, `session/load`,
//! `session/prompt`, `session/cancel` and `session/set_mode`, each answered from the sessions
//! this process has open.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use agent_client_protocol::{
    Agent, AgentCapabilities, AuthenticateRequest, AuthenticateResponse, AvailableCommand,
    AvailableCommandsUpdate, CancelNotification, ClientCapabilities, CurrentModeUpdate, Error,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, ProtocolVersion, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse,
};
use agentloop::agent::AbortSignal;

use super::content::Prompt;
use super::outbound::Queue;
use super::session::{Server, Session};
use super::updates::Updates;
use crate::error::Failure;

/// The agent side of the connection.
pub struct AcpAgent {
    server: Server,
    queue: Queue,
    sessions: RefCell<HashMap<String, Rc<Session>>>,
    /// What the client said it can do (`initialize`): its files, its terminals.
    client: RefCell<ClientCapabilities>,
    /// Sessions this process created, deleted at exit when nothing was ever answered in them.
    created: RefCell<Vec<String>>,
}

impl AcpAgent {
    /// An agent serving with `server`, sending through `queue`.
    pub fn new(server: Server, queue: Queue) -> AcpAgent {
        AcpAgent {
            server,
            queue,
            sessions: RefCell::default(),
            client: RefCell::default(),
            created: RefCell::default(),
        }
    }

    fn session(&self, id: &str) -> Result<Rc<Session>, Error> {
        self.sessions
            .borrow()
            .get(id)
            .cloned()
            .ok_or_else(|| Error::invalid_params().data(format!("no open session {id}")))
    }

    /// Registers `session` (its files read and written through the client where the client
    /// offers that) and tells the client its slash commands.
    fn add(&self, mut session: Session) -> Rc<Session> {
        session.workspace = super::client_files::attach(
            session.workspace,
            &self.client.borrow(),
            &session.id,
            &self.queue,
        );
        session.terminals = self.client.borrow().terminal;
        let session = Rc::new(session);
        let (commands, _) =
            crate::config::custom_commands::load(session.workspace.root(), session.trusted);
        let available = commands
            .iter()
            .map(|c| AvailableCommand::new(c.name.clone(), c.description.clone()))
            .collect();
        self.queue.update(
            &session.id,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(available)),
        );
        self.sessions
            .borrow_mut()
            .insert(session.id.clone(), session.clone());
        session
    }
}

impl Drop for AcpAgent {
    fn drop(&mut self) {
        for id in self.created.borrow().iter() {
            crate::commands::run::discard_if_unanswered(&*self.server.store, id);
        }
    }
}

fn failed(failure: Failure) -> Error {
    Error::internal_error().data(failure.message)
}

#[async_trait::async_trait(?Send)]
impl Agent for AcpAgent {
    async fn initialize(&self, args: InitializeRequest) -> Result<InitializeResponse, Error> {
        let version = args.protocol_version.min(ProtocolVersion::LATEST);
        *self.client.borrow_mut() = args.client_capabilities;
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true));
        Ok(InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .agent_info(Implementation::new("agentloop", env!("CARGO_PKG_VERSION"))))
    }

    async fn authenticate(
        &self,
        _args: AuthenticateRequest,
    ) -> Result<AuthenticateResponse, Error> {
        // Keys come from the environment and config files, as for `run`.
        Ok(AuthenticateResponse::new())
    }

    async fn new_session(&self, args: NewSessionRequest) -> Result<NewSessionResponse, Error> {
        let session =
            Session::create(&self.server, &args.cwd, &args.mcp_servers).map_err(failed)?;
        self.created.borrow_mut().push(session.id.clone());
        let session = self.add(session);
        Ok(NewSessionResponse::new(session.id.clone()).modes(session.mode.state()))
    }

    async fn load_session(&self, args: LoadSessionRequest) -> Result<LoadSessionResponse, Error> {
        let id = args.session_id.0.to_string();
        let session = Session::load(&self.server, &id, &args.cwd, &args.mcp_servers)
            .map_err(|f| Error::invalid_params().data(f.message))?;
        let (messages, _) = agentloop::session::load_parked(&*self.server.store, &session.id)
            .map_err(|e| failed(e.into()))?;
        let root = session.workspace.root().to_path_buf();
        let session = self.add(session);
        super::replay::replay(
            &messages,
            &root,
            &Updates::new(&id, &root, self.queue.clone()),
        );
        self.queue.flush().await;
        Ok(LoadSessionResponse::new().modes(session.mode.state()))
    }

    async fn prompt(&self, args: PromptRequest) -> Result<PromptResponse, Error> {
        let session = self.session(&args.session_id.0)?;
        let prompt =
            Prompt::from_blocks(args.prompt).map_err(|m| Error::invalid_params().data(m))?;
        if session.running.borrow().is_some() {
            return Err(
                Error::invalid_request().data("a prompt is already running in this session")
            );
        }
        let abort = AbortSignal::new();
        *session.running.borrow_mut() = Some(abort.clone());
        let outcome =
            super::turn::run(&self.server, &session, prompt, abort, self.queue.clone()).await;
        *session.running.borrow_mut() = None;
        // Every update of the turn reaches the client before the response.
        self.queue.flush().await;
        let ended = outcome.map_err(failed)?;
        Ok(PromptResponse::new(ended.stop).usage(ended.usage))
    }

    async fn cancel(&self, args: CancelNotification) -> Result<(), Error> {
        if let Ok(session) = self.session(&args.session_id.0) {
            if let Some(abort) = session.running.borrow().as_ref() {
                abort.abort();
            }
        }
        Ok(())
    }

    async fn set_session_mode(
        &self,
        args: SetSessionModeRequest,
    ) -> Result<SetSessionModeResponse, Error> {
        let session = self.session(&args.session_id.0)?;
        if !session.mode.set(&args.mode_id.0) {
            return Err(Error::invalid_params().data(format!("no mode {}", args.mode_id.0)));
        }
        self.queue.update(
            &session.id,
            SessionUpdate::CurrentModeUpdate(CurrentModeUpdate::new(session.mode.id())),
        );
        Ok(SetSessionModeResponse::new())
    }
}
