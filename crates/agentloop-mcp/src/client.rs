//! One live MCP server from the client side: starting it (stdio child in its own process group,
//! or streamable HTTP), listing its tools, calling a tool with timeout/progress/cancellation, and
//! mapping the result onto an agentloop [`ToolOutput`] or [`ToolError`].
//!
//! A [`ServerHandle`] owns the connection and restarts it (bounded) when it died; it never
//! panics and never ends a run: every failure becomes an error result naming the server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop::tooling::{ToolError, ToolErrorKind, ToolOutput};
use agentloop::transcript::ImagePart;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotification,
    CancelledNotificationParam, ClientCapabilities, ClientConfig, ClientNotification,
    ClientRequest, ContentBlock, Implementation, ProgressNotificationParam, ProgressToken,
    RequestId, ResourceContents, ServerCapabilities, ServerResult, Tool,
};
use rmcp::service::{
    MaybeSendFuture, NotificationContext, Peer, PeerRequestOptions, RoleClient, RunningService,
    ServiceError,
};
use rmcp::{ClientHandler, ServiceExt};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::{McpServerConfig, McpTransport};
use crate::error::McpError;
use crate::events::{EventSink, McpEvent};

/// How long a server's answer to `logging/setLevel` is waited for at start.
const SET_LEVEL_TIMEOUT: Duration = Duration::from_secs(5);

/// A progress callback registered for one in-flight call.
type ProgressFn = Arc<dyn Fn(Value) + Send + Sync>;

/// The client side handler: notices `tools/list_changed` and forwards progress to the call
/// that asked for it.
#[derive(Clone)]
pub(crate) struct Handler {
    /// The server's name, for log events.
    server: Arc<str>,
    events: EventSink,
    /// The least severe log message passed on.
    log_level: Option<crate::McpLogLevel>,
    /// How requests for user input are answered without an elicitor.
    elicitation: crate::ElicitationMode,
    /// Who answers requests for user input, when a person can.
    elicitor: Option<crate::Elicitor>,
    tools_changed: Arc<AtomicBool>,
    on_tools_changed: Arc<dyn Fn() + Send + Sync>,
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
    /// Signs of life during calls (progress, the end of a question to a person).
    activity: Activity,
}

/// What keeps a call of a server with an elicitor from timing out: signs of life (progress,
/// an answered question) restart its idle time, and none runs while a person is being asked.
#[derive(Clone)]
pub(crate) struct Activity {
    beat: Arc<tokio::sync::watch::Sender<u64>>,
    asking: Arc<std::sync::atomic::AtomicUsize>,
}

impl Activity {
    fn new() -> Self {
        Activity {
            beat: Arc::new(tokio::sync::watch::Sender::new(0)),
            asking: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
        }
    }

    fn beat(&self) {
        self.beat.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Completes once `timeout` passed without a sign of life while nobody was being asked.
    async fn idle_for(&self, timeout: Duration) {
        let mut beats = self.beat.subscribe();
        loop {
            if self.asking.load(Ordering::Acquire) > 0 {
                // The end of the question beats.
                let _ = beats.changed().await;
                continue;
            }
            if tokio::time::timeout(timeout, beats.changed())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Runs `f` (a question to a person) with the idle time stopped.
    async fn asking<R>(&self, f: impl Future<Output = R>) -> R {
        self.asking.fetch_add(1, Ordering::AcqRel);
        self.beat();
        let out = f.await;
        self.asking.fetch_sub(1, Ordering::AcqRel);
        self.beat();
        out
    }
}

impl ClientHandler for Handler {
    fn on_tool_list_changed(
        &self,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.tools_changed.store(true, Ordering::Release);
        (self.on_tools_changed)();
        std::future::ready(())
    }

    fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        self.activity.beat();
        let callback = self
            .progress
            .lock()
            .ok()
            .and_then(|map| map.get(&params.progress_token).cloned());
        if let Some(callback) = callback {
            let mut update = serde_json::json!({"progress": params.progress});
            if let Some(total) = params.total {
                update["total"] = total.into();
            }
            if let Some(message) = params.message {
                update["message"] = message.into();
            }
            callback(update);
        }
        std::future::ready(())
    }

    #[allow(deprecated)] // MCP logging is deprecated in newer revisions, still used by servers.
    fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) -> impl Future<Output = ()> + MaybeSendFuture + '_ {
        let level = crate::logging::from_rmcp(params.level);
        if self.log_level.is_some_and(|min| level >= min) {
            self.events.emit(McpEvent::Log {
                server: self.server.to_string(),
                level,
                logger: params.logger,
                message: crate::logging::message_text(&params.data),
            });
        }
        std::future::ready(())
    }

    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let answer = match &self.elicitor {
            Some(elicitor) => {
                let asked = crate::elicitation::ask(elicitor, &self.server, request);
                self.activity.asking(asked).await
            }
            None => crate::elicitation::answer(self.elicitation, &request),
        };
        tracing::info!(
            server = %self.server,
            "MCP server asked for user input; answered {:?}",
            answer.action
        );
        Ok(answer)
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        if self.elicitor.is_some() {
            capabilities.elicitation = Some(
                rmcp::model::ElicitationCapability::new()
                    .with_form(rmcp::model::FormElicitationCapability::new())
                    .with_url(rmcp::model::UrlElicitationCapability::new()),
            );
        } else if self.elicitation.announced() {
            capabilities.elicitation = Some(
                rmcp::model::ElicitationCapability::new()
                    .with_form(rmcp::model::FormElicitationCapability::new()),
            );
        }
        ClientConfig::new(
            capabilities,
            Implementation::new("agentloop", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(crate::version::PROPOSED_PROTOCOL_VERSION)
    }
}

/// A running connection; dropping it kills a stdio server's whole process group.
pub(crate) struct Live {
    service: RunningService<RoleClient, Handler>,
    /// The stdio child's pid, which is also its process-group id.
    pgid: Option<u32>,
}

impl Live {
    fn peer(&self) -> &Peer<RoleClient> {
        self.service.peer()
    }

    fn is_closed(&self) -> bool {
        self.service.is_transport_closed()
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // rmcp kills the child from a spawned task, which never runs when the runtime is going
        // away (the agent exits); kill the group synchronously so no grandchild survives either.
        kill_group(self.pgid);
    }
}

#[cfg(unix)]
fn kill_group(pgid: Option<u32>) {
    use rustix::process::{Pid, Signal, kill_process_group};
    if let Some(pid) = pgid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(Pid::from_raw)
    {
        let _ = kill_process_group(pid, Signal::KILL);
    }
}

#[cfg(not(unix))]
fn kill_group(_pgid: Option<u32>) {}

/// Where a server stands.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Connected, with this many tools (after filtering).
    Running {
        /// Tools offered (after allow/deny filtering).
        tools: usize,
    },
    /// Not connected; the message says why.
    Down(String),
    /// The server asks for an authorization it was not given (no tokens, tokens revoked and
    /// not refreshable, or more scope needed); the message is its challenge's description.
    NeedsLogin(String),
}

/// One server's connection manager, shared by its tools.
pub(crate) struct ServerHandle {
    pub(crate) config: McpServerConfig,
    live: tokio::sync::Mutex<Option<Arc<Live>>>,
    state: Mutex<ServerState>,
    tools: Mutex<Vec<Tool>>,
    restarts: AtomicU32,
    /// Set when the toolset shut the server down: no more restarts.
    shut_down: AtomicBool,
    pub(crate) tools_changed: Arc<AtomicBool>,
    events: EventSink,
    progress: Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
    /// Signs of life of the server's calls, for servers whose questions a person answers.
    activity: Activity,
    /// The protocol version the server answered in `initialize`.
    protocol_version: Mutex<Option<String>>,
    /// The capabilities the server announced in `initialize`.
    capabilities: Mutex<Option<ServerCapabilities>>,
    /// The scopes the server last asked for in a 403 `insufficient_scope` refusal.
    needed_scopes: Mutex<Vec<String>>,
}

impl ServerHandle {
    pub(crate) fn new(config: McpServerConfig, events: EventSink) -> Self {
        ServerHandle {
            config,
            live: tokio::sync::Mutex::new(None),
            state: Mutex::new(ServerState::Down("not started".into())),
            tools: Mutex::new(Vec::new()),
            restarts: AtomicU32::new(0),
            shut_down: AtomicBool::new(false),
            tools_changed: Arc::new(AtomicBool::new(false)),
            events,
            progress: Arc::new(Mutex::new(HashMap::new())),
            activity: Activity::new(),
            protocol_version: Mutex::new(None),
            capabilities: Mutex::new(None),
            needed_scopes: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.config.name
    }

    pub(crate) fn state(&self) -> ServerState {
        self.state
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|_| ServerState::Down("state unavailable".into()))
    }

    fn set_state(&self, state: ServerState) {
        if let Ok(mut s) = self.state.lock() {
            *s = state;
        }
    }

    /// The tools of the current connection (filtered), empty when down.
    pub(crate) async fn tools(&self) -> Vec<Tool> {
        match &*self.live.lock().await {
            Some(live) if !live.is_closed() => {
                self.tools.lock().map(|t| t.clone()).unwrap_or_default()
            }
            _ => Vec::new(),
        }
    }

    /// Starts the server (first start). Failures are recorded, reported and returned.
    pub(crate) async fn start(&self) -> Result<(), McpError> {
        let mut slot = self.live.lock().await;
        self.start_locked(&mut slot).await.map(|_| ())
    }

    async fn start_locked(&self, slot: &mut Option<Arc<Live>>) -> Result<Arc<Live>, McpError> {
        *slot = None;
        let connected = async {
            match self.connect().await {
                Err(McpError::NeedsLogin { challenge, .. }) if self.can_authorize() => {
                    self.authorize(challenge).await?;
                    self.connect().await
                }
                other => other,
            }
        };
        match tokio::time::timeout(self.config.startup_timeout, connected).await {
            Ok(Ok((live, tools))) => {
                let live = Arc::new(live);
                let count = tools.len();
                if let Ok(mut t) = self.tools.lock() {
                    *t = tools;
                }
                self.set_state(ServerState::Running { tools: count });
                if let Ok(mut needed) = self.needed_scopes.lock() {
                    needed.clear();
                }
                self.events.emit(McpEvent::Started {
                    server: self.name().to_owned(),
                    tools: count,
                });
                *slot = Some(live.clone());
                Ok(live)
            }
            Ok(Err(e)) => Err(self.failed(e)),
            Err(_) => Err(self.failed(McpError::StartupTimeout {
                server: self.name().to_owned(),
                timeout: self.config.startup_timeout,
            })),
        }
    }

    fn failed(&self, e: McpError) -> McpError {
        tracing::warn!(server = %self.name(), "MCP server unavailable: {e}");
        if let McpError::NeedsLogin { challenge, .. } = &e {
            self.login_required(challenge);
            return e;
        }
        self.set_state(ServerState::Down(e.to_string()));
        self.events.emit(McpEvent::Failed {
            server: self.name().to_owned(),
            error: e.to_string(),
        });
        e
    }

    /// Connects: the client handler, the transport's handshake, then the log level and the
    /// tool list.
    async fn connect(&self) -> Result<(Live, Vec<Tool>), McpError> {
        let handler = self.handler();
        let (service, pgid) = match &self.config.transport {
            McpTransport::Stdio(stdio) => self.connect_stdio(handler, stdio).await?,
            McpTransport::Http(http) => (self.connect_http(handler, http).await?, None),
        };
        let live = Live { service, pgid };
        self.ask_log_level(&live).await;
        let tools = self.list(&live).await?;
        Ok((live, tools))
    }

    /// The failure to connect, saying `message`.
    fn connect_error(&self, message: String) -> McpError {
        McpError::Connect {
            server: self.name().to_owned(),
            message,
        }
    }

    /// The client side of a new connection: the server's settings, shared progress routes,
    /// and a `tools/list_changed` that marks the list stale and tells the application.
    fn handler(&self) -> Handler {
        let tools_changed = self.tools_changed.clone();
        let events = self.events.clone();
        let name = self.name().to_owned();
        Handler {
            server: Arc::from(self.name()),
            events: self.events.clone(),
            log_level: self.config.log_level,
            elicitation: self.config.elicitation,
            elicitor: self.config.elicitor.clone(),
            tools_changed: self.tools_changed.clone(),
            on_tools_changed: Arc::new(move || {
                tools_changed.store(true, Ordering::Release);
                events.emit(McpEvent::ToolsChanged {
                    server: name.clone(),
                });
            }),
            progress: self.progress.clone(),
            activity: self.activity.clone(),
        }
    }

    /// Starts a stdio server as the leader of its own process group and initializes it; the
    /// service and the group's id.
    async fn connect_stdio(
        &self,
        handler: Handler,
        stdio: &crate::config::StdioServer,
    ) -> Result<(RunningService<RoleClient, Handler>, Option<u32>), McpError> {
        let mut cmd = tokio::process::Command::new(&stdio.command);
        cmd.args(&stdio.args).envs(&stdio.env).kill_on_drop(true);
        if let Some(cwd) = &stdio.cwd {
            cmd.current_dir(cwd);
        }
        let mut wrapped = process_wrap::tokio::CommandWrap::from(cmd);
        #[cfg(unix)]
        wrapped.wrap(process_wrap::tokio::ProcessGroup::leader());
        let (transport, _stderr) = rmcp::transport::TokioChildProcess::builder(wrapped)
            .spawn()
            .map_err(|e| self.connect_error(format!("cannot start `{}`: {e}", stdio.command)))?;
        let pgid = transport.id();
        // If initialize fails or times out the transport is dropped; kill the group now.
        let guard = GroupGuard(pgid);
        let service = handler
            .serve(transport)
            .await
            .map_err(|e| self.connect_error(format!("initialize failed: {e}")))?;
        self.accept_version(&service)?;
        std::mem::forget(guard);
        Ok((service, pgid))
    }

    /// Connects to a streamable-HTTP server (with its OAuth tokens when it has settings); a
    /// refusal for want of authorization is [`McpError::NeedsLogin`].
    async fn connect_http(
        &self,
        handler: Handler,
        http: &crate::config::HttpServer,
    ) -> Result<RunningService<RoleClient, Handler>, McpError> {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        // A session the server expired (404 on its `Mcp-Session-Id`) is re-initialised and
        // the failed request retried, transparently (explicit: it is our contract).
        let config = StreamableHttpClientTransportConfig::with_uri(http.url.as_str())
            .custom_headers(self.http_headers(http)?)
            .reinit_on_expired_session(true);
        let served = match &http.oauth {
            Some(oauth) => {
                let client = crate::auth::auth_client(self.name(), http, oauth).await?;
                let transport = StreamableHttpClientTransport::with_client(client, config);
                handler.serve(transport).await
            }
            None => {
                handler
                    .serve(StreamableHttpClientTransport::from_config(config))
                    .await
            }
        };
        let service = served.map_err(|e| match e.auth_challenge() {
            Some(challenge) => self.needs_login(challenge),
            None => self.connect_error(format!("initialize failed: {e}")),
        })?;
        self.accept_version(&service)?;
        Ok(service)
    }

    /// The configured headers of an HTTP server, checked.
    fn http_headers(
        &self,
        http: &crate::config::HttpServer,
    ) -> Result<HashMap<reqwest::header::HeaderName, reqwest::header::HeaderValue>, McpError> {
        let mut headers = HashMap::new();
        for (k, v) in &http.headers {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| self.connect_error(format!("bad header name `{k}`: {e}")))?;
            let value = reqwest::header::HeaderValue::from_str(v)
                .map_err(|e| self.connect_error(format!("bad value for header `{k}`: {e}")))?;
            headers.insert(name, value);
        }
        Ok(headers)
    }

    /// Checks the protocol version the server answered and remembers it; an unsupported one
    /// ends the connection (the caller drops `service`).
    fn accept_version(
        &self,
        service: &RunningService<RoleClient, Handler>,
    ) -> Result<(), McpError> {
        let Some(info) = service.peer().peer_info() else {
            return Ok(());
        };
        crate::version::check_answer(self.name(), &info.protocol_version)?;
        if let Ok(mut v) = self.protocol_version.lock() {
            *v = Some(info.protocol_version.to_string());
        }
        if let Ok(mut c) = self.capabilities.lock() {
            *c = Some(info.capabilities.clone());
        }
        Ok(())
    }

    /// The capabilities the running server announced; `None` while it is down.
    pub(crate) fn capabilities(&self) -> Option<ServerCapabilities> {
        if !matches!(self.state(), ServerState::Running { .. }) {
            return None;
        }
        self.capabilities.lock().ok().and_then(|c| c.clone())
    }

    /// The peer for a request other than a tool call (resources, prompts), restarting a dead
    /// server like a tool call would.
    pub(crate) async fn peer(&self) -> Result<Peer<RoleClient>, ToolError> {
        Ok(self.connection().await?.peer().clone())
    }

    /// Describes a failed non-tool request (`what`, e.g. "resources/read of `x`") for the model.
    pub(crate) fn request_failed(&self, what: &str, e: ServiceError) -> ToolError {
        let server = self.name();
        match e {
            ServiceError::McpError(data) => ToolError::new(format!(
                "MCP server `{server}` refused {what}: {} (code {})",
                data.message, data.code.0
            )),
            ServiceError::Timeout { timeout } => ToolError::with_kind(
                ToolErrorKind::Timeout,
                format!(
                    "MCP server `{server}` did not answer {what} within {}",
                    human(timeout)
                ),
            ),
            other => ToolError::new(format!("MCP server `{server}`: {what} failed: {other}")),
        }
    }

    /// Tells a server that logs which messages to send (`logging/setLevel`); a refusal only
    /// means more messages arrive, which the handler filters anyway, and a server that does not
    /// answer within a few seconds is not waited for.
    #[allow(deprecated)] // MCP logging is deprecated in newer revisions, still used by servers.
    async fn ask_log_level(&self, live: &Live) {
        let logs = live
            .peer()
            .peer_info()
            .is_some_and(|i| i.capabilities.logging.is_some());
        let Some(level) = self.config.log_level.filter(|_| logs) else {
            return;
        };
        let params = rmcp::model::SetLevelRequestParams::new(crate::logging::to_rmcp(level));
        let answer = tokio::time::timeout(SET_LEVEL_TIMEOUT, live.peer().set_level(params)).await;
        if !matches!(answer, Ok(Ok(_))) {
            tracing::debug!(server = %self.name(), "MCP logging/setLevel not accepted: {answer:?}");
        }
    }

    /// The protocol version negotiated with the server, once it started.
    pub(crate) fn protocol_version(&self) -> Option<String> {
        self.protocol_version.lock().ok().and_then(|v| v.clone())
    }

    async fn list(&self, live: &Live) -> Result<Vec<Tool>, McpError> {
        let tools = live
            .peer()
            .list_all_tools()
            .await
            .map_err(|e| match e.auth_challenge() {
                Some(challenge) => self.needs_login(challenge),
                None => McpError::Connect {
                    server: self.name().to_owned(),
                    message: format!("tools/list failed: {e}"),
                },
            })?;
        Ok(tools
            .into_iter()
            .filter(|t| self.config.allows_tool(&t.name))
            .collect())
    }

    /// Re-reads the tool list if the server said it changed. Returns whether it did.
    pub(crate) async fn refresh_if_changed(&self) -> Result<bool, McpError> {
        if !self.tools_changed.swap(false, Ordering::AcqRel) {
            return Ok(false);
        }
        let live = match &*self.live.lock().await {
            Some(live) if !live.is_closed() => live.clone(),
            _ => return Ok(false),
        };
        let tools = self.list(&live).await?;
        self.set_state(ServerState::Running { tools: tools.len() });
        if let Ok(mut t) = self.tools.lock() {
            *t = tools;
        }
        Ok(true)
    }

    /// The connection to use for a call, restarting a dead server (bounded).
    async fn connection(&self) -> Result<Arc<Live>, ToolError> {
        let mut slot = self.live.lock().await;
        if let Some(live) = slot.as_ref()
            && !live.is_closed()
        {
            return Ok(live.clone());
        }
        if self.shut_down.load(Ordering::Acquire) {
            return Err(ToolError::new(format!(
                "MCP server `{}` was shut down; its tools are no longer available",
                self.name()
            )));
        }
        let had_connection = slot.is_some();
        if had_connection {
            self.events.emit(McpEvent::Died {
                server: self.name().to_owned(),
            });
        }
        let used = self.restarts.fetch_add(1, Ordering::AcqRel);
        if used >= self.config.max_restarts {
            let reason = match self.state() {
                ServerState::Down(r) => r,
                ServerState::NeedsLogin(r) => format!("needs login: {r}"),
                ServerState::Running { .. } => "it stopped".into(),
            };
            *slot = None;
            self.set_state(ServerState::Down(reason.clone()));
            return Err(ToolError::new(format!(
                "MCP server `{}` is down ({reason}); it was restarted {} times already, so \
                 its tools are unavailable for the rest of this run",
                self.name(),
                self.config.max_restarts
            )));
        }
        match self.start_locked(&mut slot).await {
            Ok(live) => {
                self.events.emit(McpEvent::Restarted {
                    server: self.name().to_owned(),
                });
                Ok(live)
            }
            Err(e) => Err(ToolError::new(format!(
                "MCP server `{}` is down: {e}",
                self.name()
            ))),
        }
    }

    /// Calls `tool` (its server-side name) with `args`. A call the server refuses for want of
    /// authorization (a revoked token, or a 403 asking for more scope) is authorized again
    /// and retried once when the server's OAuth settings carry an authorizer; otherwise the
    /// server is marked as needing login.
    pub(crate) async fn call(
        &self,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<ToolOutput, ToolError> {
        match self
            .call_once(tool, args.clone(), cancel.clone(), progress.clone())
            .await
        {
            Err(CallFailure::NeedsLogin(challenge)) if self.can_authorize() => {
                if let Err(e) = self.authorize(challenge).await {
                    return Err(ToolError::new(e.to_string()));
                }
                self.reconnect().await?;
                match self.call_once(tool, args, cancel, progress).await {
                    Err(CallFailure::NeedsLogin(challenge)) => {
                        Err(self.login_needed(tool, challenge))
                    }
                    Err(CallFailure::Tool(e)) => Err(e),
                    Ok(out) => Ok(out),
                }
            }
            Err(CallFailure::NeedsLogin(challenge)) => Err(self.login_needed(tool, challenge)),
            Err(CallFailure::Tool(e)) => Err(e),
            Ok(out) => Ok(out),
        }
    }

    /// The authorizer of the server's OAuth settings, when it has one.
    fn authorizer(&self) -> Option<crate::Authorizer> {
        match &self.config.transport {
            McpTransport::Http(http) => http.oauth.as_ref()?.authorizer.clone(),
            McpTransport::Stdio(_) => None,
        }
    }

    /// Whether the server's OAuth settings can authorize without stopping the run: a grant
    /// that needs no person, or an authorizer.
    fn can_authorize(&self) -> bool {
        match &self.config.transport {
            McpTransport::Http(http) => http
                .oauth
                .as_ref()
                .is_some_and(|o| o.grant.is_some() || o.authorizer.is_some()),
            McpTransport::Stdio(_) => false,
        }
    }

    /// Authorizes again, answering `challenge`: by the settings' grant (a new token), else by
    /// the login flow through the authorizer.
    async fn authorize(&self, challenge: String) -> Result<(), McpError> {
        let McpTransport::Http(http) = &self.config.transport else {
            return Err(self.needs_login(&challenge));
        };
        if let Some(grant) = http.oauth.as_ref().and_then(|o| o.grant.as_ref()) {
            return crate::grant::obtain(self.name(), http, grant, Some(&challenge))
                .await
                .map(|_| ());
        }
        let Some(authorizer) = self.authorizer() else {
            return Err(self.needs_login(&challenge));
        };
        crate::auth::login(self.name(), http, Some(challenge), &authorizer).await
    }

    /// Drops the connection and starts a new one (which reads the new tokens).
    async fn reconnect(&self) -> Result<(), ToolError> {
        let mut slot = self.live.lock().await;
        self.start_locked(&mut slot)
            .await
            .map(|_| ())
            .map_err(|e| ToolError::new(e.to_string()))
    }

    /// The error for a server that asks for authorization: recorded as its state.
    fn needs_login(&self, challenge: &str) -> McpError {
        McpError::NeedsLogin {
            server: self.name().to_owned(),
            challenge: challenge.to_owned(),
        }
    }

    /// A call to `tool` refused for want of authorization: the server needs login from now
    /// on, and the call's error result says why.
    fn login_needed(&self, tool: &str, challenge: String) -> ToolError {
        let scopes = self.login_required(&challenge);
        let server = self.name();
        if scopes.is_empty() {
            let e = self.needs_login(&challenge);
            return ToolError::new(format!("{e}; its tools are unavailable until then"));
        }
        ToolError::new(format!(
            "MCP server `{server}` refused the call to `{tool}`: the authorization lacks the \
             scope it needs ({}); a new login of the server grants it",
            scopes.join(" ")
        ))
    }

    /// Records that the server asks for authorization with `challenge`: its state, the scopes
    /// a step-up asks for (also remembered next to the tokens, for the next login), and one
    /// `NeedsLogin` event per change. Returns the scopes asked for (empty unless a step-up).
    fn login_required(&self, challenge: &str) -> Vec<String> {
        let scopes = crate::auth::step_up_scopes(challenge);
        if let McpTransport::Http(http) = &self.config.transport
            && let Err(e) = crate::auth::remember_step_up(http, challenge)
        {
            tracing::warn!(server = %self.name(), "cannot remember the scopes asked for: {e}");
        }
        let reason = if scopes.is_empty() {
            challenge_text(challenge)
        } else {
            format!("more scope needed ({})", scopes.join(" "))
        };
        let state = ServerState::NeedsLogin(reason.clone());
        let changed = self.state() != state;
        self.set_state(state);
        if let Ok(mut needed) = self.needed_scopes.lock() {
            needed.clone_from(&scopes);
        }
        if changed {
            self.events.emit(McpEvent::NeedsLogin {
                server: self.name().to_owned(),
                reason,
                scopes: scopes.clone(),
            });
        }
        scopes
    }

    /// The scopes the server asked for when it last refused for want of scope: in this
    /// process, or else in an earlier one (remembered next to the tokens until a login grants
    /// them) — a server that connects fine but refuses calls for want of scope is not shown as
    /// merely running.
    pub(crate) fn needed_scopes(&self) -> Vec<String> {
        let here = self
            .needed_scopes
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        match &self.config.transport {
            McpTransport::Http(http) if here.is_empty() => crate::auth::remembered_step_up(http),
            _ => here,
        }
    }

    async fn call_once(
        &self,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
        progress: Option<ProgressFn>,
    ) -> Result<ToolOutput, CallFailure> {
        let live = self.connection().await?;
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError::with_kind(
                    ToolErrorKind::MalformedArguments,
                    format!("arguments must be a JSON object, got {other}"),
                )
                .into());
            }
        };
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        // A server whose questions a person answers gets the idle time stopped while they are
        // asked (see `Activity`); the others get rmcp's timeout, restarted by progress.
        let timeout = self.config.tool_timeout;
        let person_asked = self.config.elicitor.is_some();
        let options = if person_asked {
            PeerRequestOptions::no_options()
        } else {
            PeerRequestOptions::with_timeout(timeout).reset_timeout_on_progress()
        };
        let idle = async {
            match person_asked {
                true => self.activity.idle_for(timeout).await,
                false => std::future::pending().await,
            }
        };
        // Borrowed, not cloned: `live` outlives the call, and a `Peer` clone is ten reference
        // counts. The cancel guard clones it only in the rare case it has to notify the server.
        let peer = live.peer();
        let handle = match peer.send_request_with_option(request, options).await {
            Ok(handle) => handle,
            Err(e) => return Err(self.call_failure(tool, e)),
        };
        let _progress = progress
            .map(|f| ProgressRegistration::new(&self.progress, handle.progress_token.clone(), f));
        let mut guard = CancelOnDrop {
            peer,
            id: Some(handle.id.clone()),
        };
        let result = tokio::select! {
            r = handle.await_response() => r,
            // The guard sends notifications/cancelled.
            () = idle => return Err(self.timed_out(tool, timeout).into()),
            _ = cancel.cancelled() => {
                // The guard sends notifications/cancelled.
                return Err(ToolError::with_kind(
                    ToolErrorKind::Aborted,
                    format!("the call to `{tool}` was cancelled"),
                )
                .into());
            }
        };
        guard.id = None;
        match result {
            Ok(ServerResult::CallToolResult(result)) => Ok(map_result(result)?),
            Ok(other) => Err(ToolError::new(format!(
                "MCP server `{}` answered tools/call with an unexpected result: {}",
                self.name(),
                serde_json::to_string(&other).unwrap_or_default()
            ))
            .into()),
            Err(e) => Err(self.call_failure(tool, e)),
        }
    }

    /// A failed call's error, telling a refusal for want of authorization apart.
    fn call_failure(&self, tool: &str, e: ServiceError) -> CallFailure {
        match e.auth_challenge() {
            Some(challenge) => CallFailure::NeedsLogin(challenge.to_owned()),
            None => CallFailure::Tool(self.call_failed(tool, e)),
        }
    }

    /// A call to `tool` that went `timeout` without an answer or a sign of life.
    fn timed_out(&self, tool: &str, timeout: Duration) -> ToolError {
        ToolError::with_kind(
            ToolErrorKind::Timeout,
            format!(
                "MCP tool `{tool}` on server `{}` timed out after {} without an answer or \
                 progress; the request was cancelled",
                self.name(),
                human(timeout)
            ),
        )
    }

    fn call_failed(&self, tool: &str, e: ServiceError) -> ToolError {
        let server = self.name();
        match e {
            ServiceError::Timeout { timeout } => self.timed_out(tool, timeout),
            ServiceError::McpError(data) => ToolError::new(format!(
                "MCP server `{server}` rejected the call to `{tool}`: {} (code {})",
                data.message, data.code.0
            )),
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if self.shut_down.load(Ordering::Acquire) =>
            {
                ToolError::new(format!(
                    "MCP server `{server}` was shut down; its tools are no longer available"
                ))
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                self.set_state(ServerState::Down("the connection closed".into()));
                self.events.emit(McpEvent::Died {
                    server: server.to_owned(),
                });
                ToolError::new(format!(
                    "MCP server `{server}` is down: the connection closed during the call to \
                     `{tool}` (the server may have crashed); it will be restarted on the next call"
                ))
            }
            other => ToolError::new(format!(
                "MCP call to `{tool}` on server `{server}` failed: {other}"
            )),
        }
    }

    /// Closes the connection (the child's process group is killed).
    pub(crate) async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        let live = self.live.lock().await.take();
        if let Some(live) = live {
            kill_group(live.pgid);
            drop(live);
        }
        self.set_state(ServerState::Down("shut down".into()));
    }
}

/// Why one call attempt failed.
enum CallFailure {
    /// The server refused it for want of authorization; its `WWW-Authenticate` challenge.
    NeedsLogin(String),
    /// Any other failure, as the model sees it.
    Tool(ToolError),
}

impl From<ToolError> for CallFailure {
    fn from(e: ToolError) -> Self {
        CallFailure::Tool(e)
    }
}

/// A challenge as one line for people: its `error_description`, else its `error`, else
/// "authorization required".
fn challenge_text(challenge: &str) -> String {
    let base = url::Url::parse("http://localhost/").ok();
    let params = base.map(|b| rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &b));
    let text = params
        .and_then(|p| p.error_description.or(p.error))
        .unwrap_or_else(|| "authorization required".into());
    text.chars().filter(|c| !c.is_control()).collect()
}

/// Kills a process group unless forgotten (used while a child is initializing).
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// Sends `notifications/cancelled` for a request that is abandoned (abort, executor timeout).
struct CancelOnDrop<'a> {
    peer: &'a Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let peer = self.peer.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let notification = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by agentloop".into()),
                ));
                let _ = peer
                    .send_notification(ClientNotification::CancelledNotification(notification))
                    .await;
            });
        }
    }
}

/// Routes a call's progress notifications to its callback while the call runs.
struct ProgressRegistration {
    map: Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
    token: ProgressToken,
}

impl ProgressRegistration {
    fn new(
        map: &Arc<Mutex<HashMap<ProgressToken, ProgressFn>>>,
        token: ProgressToken,
        f: ProgressFn,
    ) -> Self {
        if let Ok(mut m) = map.lock() {
            m.insert(token.clone(), f);
        }
        ProgressRegistration {
            map: map.clone(),
            token,
        }
    }
}

impl Drop for ProgressRegistration {
    fn drop(&mut self) {
        if let Ok(mut m) = self.map.lock() {
            m.remove(&self.token);
        }
    }
}

fn human(d: Duration) -> String {
    if d.as_millis().is_multiple_of(1000) {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}

/// Maps an MCP tool result onto agentloop's: text blocks joined by newlines, images as image
/// parts, resources as text with their URI, `structuredContent` as JSON text when there is no
/// text block, `isError` as an error result.
pub fn map_result(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let mut texts: Vec<String> = Vec::new();
    let mut images = Vec::new();
    let mut has_text = false;
    for block in result.content {
        match block {
            ContentBlock::Text(t) => {
                has_text = true;
                texts.push(t.text);
            }
            ContentBlock::Image(i) => images.push(ImagePart {
                media_type: i.mime_type,
                data: i.data,
            }),
            ContentBlock::Audio(a) => texts.push(format!(
                "[audio content ({}), {} bytes of base64 not shown]",
                a.mime_type,
                a.data.len()
            )),
            ContentBlock::Resource(r) => texts.push(match r.resource {
                ResourceContents::TextResourceContents { uri, text, .. } => {
                    format!("[resource {uri}]\n{text}")
                }
                ResourceContents::BlobResourceContents {
                    uri,
                    mime_type,
                    blob,
                    ..
                } => format!(
                    "[resource {uri} ({}), {} bytes of base64 not shown]",
                    mime_type.as_deref().unwrap_or("binary"),
                    blob.len()
                ),
                #[allow(unreachable_patterns)]
                _ => "[resource]".to_owned(),
            }),
            ContentBlock::ResourceLink(link) => {
                let mut line = format!("[resource link {}] {}", link.uri, link.name);
                if let Some(d) = &link.description {
                    line.push_str(": ");
                    line.push_str(d);
                }
                if let Some(m) = &link.mime_type {
                    line.push_str(&format!(" ({m})"));
                }
                texts.push(line);
            }
            #[allow(unreachable_patterns)]
            _ => texts.push("[unsupported content block]".to_owned()),
        }
    }
    if !has_text && let Some(structured) = &result.structured_content {
        texts.insert(0, structured.to_string());
    }
    // The usual answer is one text block: move it rather than copy it through `join`.
    let content = if texts.len() == 1 {
        texts.pop().unwrap_or_default()
    } else {
        texts.join("\n")
    };
    if result.is_error == Some(true) {
        let message = if content.is_empty() {
            "the MCP tool reported an error without a message".to_owned()
        } else {
            content
        };
        return Err(ToolError::new(message));
    }
    Ok(ToolOutput { content, images })
}

impl ServerHandle {
    /// Kills a stdio child's process group right now, without awaiting (used from `Drop`).
    pub(crate) fn kill_now(&self) {
        self.shut_down.store(true, Ordering::Release);
        if let Ok(slot) = self.live.try_lock()
            && let Some(live) = slot.as_ref()
        {
            kill_group(live.pgid);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_idle_time_stops_while_a_person_is_asked_and_restarts_after() {
        let activity = Activity::new();
        let timeout = Duration::from_secs(60);
        let idle = tokio::spawn({
            let activity = activity.clone();
            async move { activity.idle_for(timeout).await }
        });
        tokio::task::yield_now().await;
        // Ten minutes of a question: no timeout meanwhile.
        activity
            .asking(tokio::time::sleep(Duration::from_secs(600)))
            .await;
        assert!(!idle.is_finished());
        // A minute of silence after it: the call times out.
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(!idle.is_finished());
        activity.beat(); // progress restarts the minute
        tokio::time::sleep(Duration::from_secs(59)).await;
        assert!(!idle.is_finished());
        tokio::time::sleep(Duration::from_secs(2)).await;
        tokio::task::yield_now().await;
        assert!(idle.is_finished());
    }
}
