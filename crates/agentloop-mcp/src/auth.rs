//! OAuth 2.1 for streamable-HTTP servers (the MCP authorization spec), on rmcp's `auth`
//! support: [`OAuthSettings`] says how a server's client is identified and where its tokens
//! live, [`login`] runs the authorization-code flow with PKCE, [`logout`] forgets the tokens.
//!
//! rmcp does the protocol work: protected-resource metadata and authorization-server metadata
//! discovery (with the 2025-03-26 fallbacks: metadata at the server's root, then `/authorize`,
//! `/token`, `/register`), dynamic client registration, Client ID Metadata Documents, scope
//! selection from the `WWW-Authenticate` challenge or `scopes_supported`, the RFC 8707
//! `resource` parameter, and refreshing an expired access token. This module adds the parts
//! rmcp leaves to the application: a token file written with owner-only rights, probing a
//! server for its challenge, and the choice of scopes when stepping up after
//! `insufficient_scope`.
//!
//! Who approves the authorization is an [`Authorizer`]: the CLI prints the URL, opens a browser
//! and waits on a loopback listener; a test or an auto-approving server can follow the
//! redirect without a person.

use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;

use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, AuthorizationRequest,
    AuthorizationSession, CredentialStore, OAuthClientConfig, StoredCredentials,
    WWWAuthenticateParams,
};
use serde::{Deserialize, Serialize};

use crate::config::HttpServer;
use crate::error::McpError;
use crate::registration::RegisteredClient;

/// The future an [`Authorizer`] returns: the full redirect URL the authorization server sent
/// the browser to (with `code` and `state`), or why there is none.
pub type AuthorizeFuture = Pin<Box<dyn Future<Output = Result<String, String>> + Send>>;

/// Gets an authorization URL approved: called with the URL, answers the redirect URL that
/// carries the code; its redirect URI is where that redirect lands. Compared by identity.
#[derive(Clone)]
pub struct Authorizer {
    redirect_uri: String,
    approve: Arc<dyn Fn(String) -> AuthorizeFuture + Send + Sync>,
}

impl Authorizer {
    /// An authorizer whose redirects land on `redirect_uri`, approving with `approve` (a
    /// function of the authorization URL).
    pub fn new(
        redirect_uri: impl Into<String>,
        approve: impl Fn(String) -> AuthorizeFuture + Send + Sync + 'static,
    ) -> Self {
        Authorizer {
            redirect_uri: redirect_uri.into(),
            approve: Arc::new(approve),
        }
    }

    /// Where the authorization server's redirect must land.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Asks for approval of `url`.
    pub fn authorize(&self, url: String) -> AuthorizeFuture {
        (self.approve)(url)
    }
}

impl fmt::Debug for Authorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Authorizer(..)")
    }
}

impl PartialEq for Authorizer {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.approve, &other.approve) && self.redirect_uri == other.redirect_uri
    }
}

impl Eq for Authorizer {}

/// How an HTTP server's OAuth client is identified and where its tokens are kept.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OAuthSettings {
    /// A client registered with the authorization server beforehand; dynamic registration
    /// (or a Client ID Metadata Document) when `None`.
    pub client_id: Option<String>,
    /// The pre-registered client's secret (a confidential client).
    pub client_secret: Option<String>,
    /// Scopes to ask for; chosen from the server's challenge or metadata when empty.
    pub scopes: Vec<String>,
    /// The HTTPS URL of this client's metadata document, used as its client id by servers
    /// that support Client ID Metadata Documents.
    pub client_metadata_url: Option<String>,
    /// The file holding the tokens; tokens live only in memory when `None`.
    pub token_file: Option<PathBuf>,
    /// Approves authorizations while connecting or calling (a 401, or a 403 asking for more
    /// scope); without one, such a server is reported as needing login.
    pub authorizer: Option<Authorizer>,
    /// Obtains tokens without a person (client credentials, cross-app access) instead of the
    /// authorization-code flow: such a server never needs a login.
    pub grant: Option<Box<crate::ClientGrant>>,
}

impl OAuthSettings {
    /// Settings keeping tokens in `token_file`.
    pub fn new(token_file: Option<PathBuf>) -> Self {
        OAuthSettings {
            token_file,
            ..OAuthSettings::default()
        }
    }

    /// Uses a pre-registered client.
    pub fn with_client(mut self, client_id: impl Into<String>, secret: Option<String>) -> Self {
        self.client_id = Some(client_id.into());
        self.client_secret = secret;
        self
    }

    agentloop::setters! {
        /// Asks for these scopes.
        pub fn with_scopes(scopes: impl IntoIterator<Item = impl Into<String>>) =>
            scopes = scopes.into_iter().map(Into::into).collect();
        /// Offers a Client ID Metadata Document URL.
        pub fn with_client_metadata_url(url: impl Into<String>) =>
            client_metadata_url = Some(url.into());
        /// Obtains tokens by `grant`, without a person.
        pub fn with_grant(grant: crate::ClientGrant) => grant = Some(Box::new(grant));
        /// Approves authorizations inline with `authorizer`.
        pub fn with_authorizer(authorizer: Authorizer) => authorizer = Some(authorizer);
    }
}

/// What a token file holds: the server it belongs to, rmcp's credentials, the scopes the
/// server asked for beyond them, and the dynamically registered client that obtained them.
#[derive(Default, Serialize, Deserialize)]
struct TokenFileContents {
    server_url: String,
    /// Absent while only a step-up request or a registration is remembered.
    #[serde(default)]
    credentials: Option<StoredCredentials>,
    /// Scopes a server asked for in an `insufficient_scope` refusal and not granted yet: the
    /// next login asks for them together with the granted ones.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    requested_scopes: Vec<String>,
    /// The client dynamic registration created, with its secret when it is confidential.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    registered_client: Option<crate::registration::RegisteredClient>,
}

/// rmcp's credential store on one file, bound to one server URL: tokens of another URL (the
/// config changed) are not used. Written whole through a temporary file with mode 0600.
#[derive(Clone, Debug)]
pub(crate) struct TokenFile {
    path: PathBuf,
    server_url: String,
}

impl TokenFile {
    pub(crate) fn new(path: &Path, server_url: &str) -> Self {
        TokenFile {
            path: path.to_owned(),
            server_url: server_url.to_owned(),
        }
    }

    /// The file's contents for this server; empty contents when there is no file or it
    /// belongs to another URL.
    fn contents(&self) -> Result<TokenFileContents, AuthError> {
        let empty = || TokenFileContents {
            server_url: self.server_url.clone(),
            ..TokenFileContents::default()
        };
        let text = match std::fs::read_to_string(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(empty()),
            Err(e) => return Err(store_error(&self.path, e)),
        };
        let contents: TokenFileContents = serde_json::from_str(&text).map_err(|e| {
            AuthError::CredentialStoreError(format!("{}: {e}", self.path.display()))
        })?;
        Ok(if contents.server_url == self.server_url {
            contents
        } else {
            empty()
        })
    }

    fn store(&self, contents: &TokenFileContents) -> Result<(), AuthError> {
        let text = serde_json::to_vec_pretty(contents)
            .map_err(|e| AuthError::CredentialStoreError(e.to_string()))?;
        write_private(&self.path, &text).map_err(|e| store_error(&self.path, e))
    }

    fn read(&self) -> Result<Option<StoredCredentials>, AuthError> {
        Ok(self.contents()?.credentials)
    }

    /// Saves new credentials; the requested scopes they grant are forgotten, the others and
    /// the registered client kept.
    fn write(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let mut contents = self.contents()?;
        contents
            .requested_scopes
            .retain(|s| !credentials.granted_scopes.contains(s));
        contents.credentials = Some(credentials);
        self.store(&contents)
    }

    /// Remembers scopes a server asked for (added to those remembered before).
    pub(crate) fn remember_requested(&self, scopes: &[String]) -> Result<(), AuthError> {
        let mut contents = self.contents()?;
        let before = contents.requested_scopes.len();
        for scope in scopes {
            if !contents.requested_scopes.contains(scope) {
                contents.requested_scopes.push(scope.clone());
            }
        }
        if contents.requested_scopes.len() == before {
            return Ok(());
        }
        self.store(&contents)
    }

    /// The dynamically registered client remembered for this server.
    pub(crate) fn registered_client(
        &self,
    ) -> Result<Option<crate::registration::RegisteredClient>, AuthError> {
        Ok(self.contents()?.registered_client)
    }

    /// Remembers a dynamically registered client (replacing the one before).
    pub(crate) fn save_registered_client(
        &self,
        client: crate::registration::RegisteredClient,
    ) -> Result<(), AuthError> {
        let mut contents = self.contents()?;
        contents.registered_client = Some(client);
        self.store(&contents)
    }
}

fn store_error(path: &Path, e: std::io::Error) -> AuthError {
    AuthError::CredentialStoreError(format!("{}: {e}", path.display()))
}

/// Writes `bytes` to `path` readable by its owner only: the directory is created 0700, the
/// data goes to a 0600 temporary file renamed over `path`, so no reader sees half a file and
/// no moment exists where the tokens are readable by others.
pub(crate) fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut file = options.open(&tmp)?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[async_trait::async_trait]
impl CredentialStore for TokenFile {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        self.read()
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        self.write(credentials)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(store_error(&self.path, e)),
            _ => Ok(()),
        }
    }
}

fn auth_failed(server: &str, e: impl fmt::Display) -> McpError {
    McpError::Auth {
        server: server.to_owned(),
        message: e.to_string(),
    }
}

/// The `WWW-Authenticate` challenge the server answers an unauthenticated `initialize` with,
/// when it asks for authorization (401, or 403); `None` when it does not.
pub(crate) async fn probe_challenge(url: &str) -> Option<String> {
    let body = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": crate::version::PROPOSED_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "agentloop", "version": env!("CARGO_PKG_VERSION")}
        }
    });
    let response = reqwest::Client::new()
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .json(&body)
        .send()
        .await
        .ok()?;
    if !matches!(response.status().as_u16(), 401 | 403) {
        return None;
    }
    response
        .headers()
        .get(reqwest::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The scopes an `insufficient_scope` challenge asks for; empty for any other challenge.
pub(crate) fn step_up_scopes(challenge: &str) -> Vec<String> {
    let Ok(base) = url::Url::parse("http://localhost/") else {
        return Vec::new();
    };
    let params = WWWAuthenticateParams::parse(challenge, &base);
    if !params.is_insufficient_scope() {
        return Vec::new();
    }
    params
        .scope
        .iter()
        .flat_map(|s| s.split_whitespace().map(str::to_owned))
        .collect()
}

/// Remembers, next to `http`'s tokens, the scopes a refusal with `challenge` asks for, so the
/// next login asks for them (nothing when it is not an `insufficient_scope` refusal or the
/// server keeps no token file).
pub(crate) fn remember_step_up(http: &HttpServer, challenge: &str) -> Result<(), AuthError> {
    let scopes = step_up_scopes(challenge);
    let Some(path) = http.oauth.as_ref().and_then(|o| o.token_file.as_deref()) else {
        return Ok(());
    };
    if scopes.is_empty() {
        return Ok(());
    }
    TokenFile::new(path, &http.url).remember_requested(&scopes)
}

/// The scopes a refusal asked for that no login has granted yet, as remembered next to
/// `http`'s tokens (empty without a token file or when it cannot be read).
pub(crate) fn remembered_step_up(http: &HttpServer) -> Vec<String> {
    let Some(path) = http.oauth.as_ref().and_then(|o| o.token_file.as_deref()) else {
        return Vec::new();
    };
    TokenFile::new(path, &http.url)
        .contents()
        .map(|c| c.requested_scopes)
        .unwrap_or_default()
}

/// The scopes to ask for: the configured ones, and when more scope was asked for (by
/// `challenge`, or by a refusal remembered in the token file) those plus the ones granted
/// before, so the new token still covers them; empty lets rmcp choose (challenge, then
/// `scopes_supported`, else none).
fn scopes_for(
    settings: &OAuthSettings,
    challenge: Option<&str>,
    store: Option<&TokenFile>,
) -> Vec<String> {
    let mut scopes = settings.scopes.clone();
    let stored = store.and_then(|s| s.contents().ok()).unwrap_or_default();
    let mut asked = stored.requested_scopes;
    asked.extend(challenge.map(step_up_scopes).unwrap_or_default());
    if !asked.is_empty() {
        scopes.extend(
            stored
                .credentials
                .map(|c| c.granted_scopes)
                .unwrap_or_default(),
        );
        scopes.extend(asked);
    }
    let mut seen = std::collections::BTreeSet::new();
    scopes.retain(|s| seen.insert(s.clone()));
    scopes
}

/// Discovers the authorization server's metadata into `manager`, seeded with `challenge`.
///
/// A 2025-03-26 server publishes the metadata at its own root, where it may name an issuer
/// under a path of that origin (`http://host/oauth`), which RFC 8414's check rejects; such
/// metadata is accepted from the server's own origin, as that revision of the spec did.
pub(crate) async fn discover(
    name: &str,
    manager: &mut AuthorizationManager,
    url: &url::Url,
    challenge: Option<&str>,
) -> Result<AuthorizationMetadata, McpError> {
    let metadata = match manager.resolve_metadata_from_challenge(challenge).await {
        Ok(resolution) => resolution.metadata,
        Err(AuthError::AuthorizationServerMismatch {
            received_issuer, ..
        }) if same_origin(&received_issuer, url) => root_metadata(url)
            .await
            .map_err(|e| auth_failed(name, format!("discovery failed: {e}")))?,
        Err(e) => return Err(auth_failed(name, format!("discovery failed: {e}"))),
    };
    manager.set_metadata(metadata.clone());
    Ok(metadata)
}

fn same_origin(other: &str, url: &url::Url) -> bool {
    url::Url::parse(other).is_ok_and(|o| o.origin() == url.origin())
}

/// The metadata at `/.well-known/oauth-authorization-server` of the server's origin, when its
/// endpoints are on that origin too.
async fn root_metadata(
    url: &url::Url,
) -> Result<rmcp::transport::auth::AuthorizationMetadata, String> {
    let mut well_known = url.clone();
    well_known.set_path("/.well-known/oauth-authorization-server");
    well_known.set_query(None);
    let response = reqwest::get(well_known.as_str())
        .await
        .and_then(|r| r.error_for_status())
        .map_err(|e| e.to_string())?;
    let metadata: rmcp::transport::auth::AuthorizationMetadata =
        response.json().await.map_err(|e| e.to_string())?;
    let endpoints = [
        Some(&metadata.authorization_endpoint),
        Some(&metadata.token_endpoint),
        metadata.registration_endpoint.as_ref(),
    ];
    if endpoints.into_iter().flatten().all(|e| same_origin(e, url)) {
        Ok(metadata)
    } else {
        Err("the server's metadata names endpoints on another origin".into())
    }
}

/// What a login and a connection to server `name` at `http` both start from: its
/// authorization manager, and its token file when the settings name one.
async fn manager_for(
    name: &str,
    http: &HttpServer,
    settings: &OAuthSettings,
) -> Result<(AuthorizationManager, Option<TokenFile>), McpError> {
    let manager = AuthorizationManager::new(http.url.as_str())
        .await
        .map_err(|e| auth_failed(name, e))?;
    let store = settings
        .token_file
        .as_deref()
        .map(|path| TokenFile::new(path, &http.url));
    Ok((manager, store))
}

/// Runs the authorization-code flow with PKCE for server `name` at `http`: discovery (seeded
/// with `challenge`, else with the server's answer to an unauthenticated request), client
/// registration (pre-registered, metadata document, or dynamic), the authorization URL handed
/// to `authorizer`, and the code exchanged for tokens saved in the settings' token file.
///
/// When more scope was asked for (an `insufficient_scope` challenge, passed in or remembered
/// in the token file) the request covers the scopes granted before and the new ones.
pub async fn login(
    name: &str,
    http: &HttpServer,
    challenge: Option<String>,
    authorizer: &Authorizer,
) -> Result<(), McpError> {
    let settings = http.oauth.clone().unwrap_or_default();
    let challenge = match challenge {
        Some(c) => Some(c),
        None => probe_challenge(&http.url).await,
    };
    let (mut manager, store) = manager_for(name, http, &settings).await?;
    let url = url::Url::parse(&http.url).map_err(|e| auth_failed(name, e))?;
    let scopes = scopes_for(&settings, challenge.as_deref(), store.as_ref());
    if let Some(store) = &store {
        manager.set_credential_store(store.clone());
    }
    let metadata = discover(name, &mut manager, &url, challenge.as_deref()).await?;
    let client = Client {
        name,
        settings: &settings,
        store: store.as_ref(),
        redirect_uri: authorizer.redirect_uri(),
    };
    let request = client.request(&mut manager, &metadata, scopes).await?;
    let session = AuthorizationSession::new(manager, request)
        .await
        .map_err(|(_, e)| auth_failed(name, e))?;
    let callback = authorizer
        .authorize(session.get_authorization_url().to_owned())
        .await
        .map_err(|e| auth_failed(name, format!("authorization not completed: {e}")))?;
    session
        .handle_callback_url(&callback)
        .await
        .map_err(|e| auth_failed(name, e))?;
    Ok(())
}

/// Who a login authenticates as: the pieces the choice of client identity needs.
struct Client<'a> {
    name: &'a str,
    settings: &'a OAuthSettings,
    store: Option<&'a TokenFile>,
    redirect_uri: &'a str,
}

impl Client<'_> {
    /// The authorization request, with the client identity chosen in the spec's order: a
    /// pre-registered client, a Client ID Metadata Document when the server supports them,
    /// else dynamic registration (a remembered registration reused while it fits).
    async fn request(
        &self,
        manager: &mut AuthorizationManager,
        metadata: &AuthorizationMetadata,
        scopes: Vec<String>,
    ) -> Result<AuthorizationRequest, McpError> {
        let request = AuthorizationRequest::new(self.redirect_uri)
            .with_client_name("agentloop")
            .with_scopes(scopes.clone());
        if let Some(id) = &self.settings.client_id {
            let request = request.with_preregistered_client(id);
            return Ok(match &self.settings.client_secret {
                Some(secret) => request.with_client_secret(secret),
                None => request,
            });
        }
        let cimd_supported = metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        if let Some(cimd) = self.settings.client_metadata_url.as_ref()
            && cimd_supported
        {
            return Ok(request.with_client_metadata_url(cimd));
        }
        if metadata.registration_endpoint.is_none() {
            // rmcp reports that no way to identify the client is left.
            return Ok(request);
        }
        let client = self.registered(metadata, &scopes).await?;
        manager.set_metadata(crate::registration::presenting(metadata, &client));
        let request = request.with_preregistered_client(&client.client_id);
        Ok(match &client.client_secret {
            Some(secret) => request.with_client_secret(secret),
            None => request,
        })
    }

    /// The remembered registration when it still fits, else a new one (remembered).
    async fn registered(
        &self,
        metadata: &AuthorizationMetadata,
        scopes: &[String],
    ) -> Result<RegisteredClient, McpError> {
        if let Some(store) = self.store
            && let Ok(Some(client)) = store.registered_client()
            && client.fits(self.redirect_uri)
        {
            return Ok(client);
        }
        let client =
            crate::registration::register(metadata, "agentloop", self.redirect_uri, scopes)
                .await
                .map_err(|e| auth_failed(self.name, e))?;
        if let Some(store) = self.store {
            store
                .save_registered_client(client.clone())
                .map_err(|e| auth_failed(self.name, e))?;
        }
        Ok(client)
    }
}

/// Forgets server `http`'s tokens (deletes its token file). Whether there were any.
pub fn logout(http: &HttpServer) -> Result<bool, std::io::Error> {
    let Some(path) = http.oauth.as_ref().and_then(|o| o.token_file.as_deref()) else {
        return Ok(false);
    };
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The HTTP client a connection to `http` uses: requests carry the stored access token (when
/// there is one), refreshed when it expired or the server rejected it once; without tokens
/// requests go out unauthenticated, so a server that needs none still works.
pub(crate) async fn auth_client(
    name: &str,
    http: &HttpServer,
    settings: &OAuthSettings,
) -> Result<rmcp::transport::AuthClient<reqwest::Client>, McpError> {
    let (mut manager, store) = manager_for(name, http, settings).await?;
    let mut contents = match &store {
        Some(store) => store.contents().map_err(|e| auth_failed(name, e))?,
        None => TokenFileContents::default(),
    };
    let has_token = |c: &TokenFileContents| {
        c.credentials
            .as_ref()
            .is_some_and(|s| s.token_response.is_some())
    };
    if let Some(grant) = settings.grant.as_ref().filter(|_| !has_token(&contents)) {
        match crate::grant::obtain(name, http, grant, None).await? {
            // No token file: this connection's token lives in memory.
            Some(memory) => {
                contents.credentials = memory.load().await.map_err(|e| auth_failed(name, e))?;
                manager.set_credential_store(memory);
            }
            None => {
                if let Some(store) = &store {
                    contents = store.contents().map_err(|e| auth_failed(name, e))?;
                }
            }
        }
    }
    if let Some(store) = store {
        manager.set_credential_store(store);
    }
    if let Some(stored) = contents.credentials.filter(|s| s.token_response.is_some()) {
        let url = url::Url::parse(&http.url).map_err(|e| auth_failed(name, e))?;
        let metadata = discover(name, &mut manager, &url, None).await?;
        let client = StoredClient {
            settings,
            stored: &stored,
            registered: contents.registered_client.as_ref(),
        };
        client
            .configure(&mut manager, &metadata)
            .await
            .map_err(|e| auth_failed(name, e))?;
    }
    Ok(rmcp::transport::AuthClient::new(
        reqwest::Client::new(),
        manager,
    ))
}

/// The client that obtained stored tokens, as far as refreshing them needs it.
struct StoredClient<'a> {
    settings: &'a OAuthSettings,
    stored: &'a StoredCredentials,
    registered: Option<&'a RegisteredClient>,
}

impl StoredClient<'_> {
    /// Readies `manager` to refresh the stored tokens as the client that obtained them: the
    /// pre-registered one with its configured secret, or the dynamically registered one with
    /// the secret and authentication method its registration gave.
    async fn configure(
        &self,
        manager: &mut AuthorizationManager,
        metadata: &AuthorizationMetadata,
    ) -> Result<(), AuthError> {
        if !manager.initialize_from_store().await? {
            return Ok(());
        }
        let id = self.stored.client_id.as_str();
        if self.settings.client_id.as_deref() == Some(id) {
            let mut config = OAuthClientConfig::new(id, http_redirect_placeholder());
            if let Some(secret) = &self.settings.client_secret {
                config = config.with_client_secret(secret);
            }
            return manager.configure_client(config);
        }
        match self.registered.filter(|c| c.client_id == id) {
            Some(client) => {
                manager.set_metadata(crate::registration::presenting(metadata, client));
                manager.configure_client(client.config(http_redirect_placeholder()))
            }
            None => Ok(()),
        }
    }
}

/// A redirect URI for a client configured only to refresh tokens (refresh sends none).
fn http_redirect_placeholder() -> &'static str {
    "http://127.0.0.1/callback"
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn credentials(scopes: &[&str]) -> StoredCredentials {
        let scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        StoredCredentials::new("client".into(), None, scopes, None)
    }

    #[tokio::test]
    async fn the_token_file_is_private_and_bound_to_its_server() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens/srv.json");
        let store = TokenFile::new(&path, "http://a.example/mcp");
        assert!(store.load().await.unwrap().is_none());
        store.save(credentials(&["read"])).await.unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode(&path), 0o600);
            assert_eq!(mode(path.parent().unwrap()), 0o700);
        }
        let loaded = store.load().await.unwrap().unwrap();
        assert_eq!(loaded.client_id, "client");
        // The same file read for another URL holds nothing for it.
        let other = TokenFile::new(&path, "http://b.example/mcp");
        assert!(other.load().await.unwrap().is_none());
        store.clear().await.unwrap();
        assert!(!path.exists());
        store.clear().await.unwrap();
    }

    #[tokio::test]
    async fn stepping_up_keeps_the_granted_scopes_and_adds_the_asked_ones() {
        let dir = tempfile::tempdir().unwrap();
        let url = "http://a.example/mcp";
        let store = TokenFile::new(&dir.path().join("t.json"), url);
        store.save(credentials(&["read"])).await.unwrap();
        let settings = OAuthSettings::default();
        let step_up = r#"Bearer error="insufficient_scope", scope="read write""#;
        let scopes = scopes_for(&settings, Some(step_up), Some(&store));
        assert_eq!(scopes, ["read", "write"]);
        // A plain 401 leaves the choice to discovery (challenge, then scopes_supported).
        let plain = r#"Bearer error="invalid_token", scope="read""#;
        assert!(scopes_for(&settings, Some(plain), Some(&store)).is_empty());
        let configured = OAuthSettings::default().with_scopes(["admin"]);
        assert_eq!(
            scopes_for(&configured, Some(step_up), Some(&store)),
            ["admin", "read", "write"]
        );
    }

    #[tokio::test]
    async fn a_remembered_step_up_is_asked_for_until_it_is_granted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.json");
        let url = "http://a.example/mcp";
        let store = TokenFile::new(&path, url);
        store.save(credentials(&["read"])).await.unwrap();
        let http = HttpServer {
            url: url.into(),
            oauth: Some(OAuthSettings::new(Some(path.clone()))),
            ..HttpServer::default()
        };
        let challenge = r#"Bearer error="insufficient_scope", scope="files:write""#;
        remember_step_up(&http, challenge).unwrap();
        // A later login (whose probe sees a plain 401) still asks for granted + requested.
        let plain = r#"Bearer error="invalid_token""#;
        let settings = OAuthSettings::default();
        assert_eq!(
            scopes_for(&settings, Some(plain), Some(&store)),
            ["read", "files:write"]
        );
        // A refresh granting the same scopes keeps the request; a grant covering it ends it.
        store.save(credentials(&["read"])).await.unwrap();
        assert_eq!(store.contents().unwrap().requested_scopes, ["files:write"]);
        store
            .save(credentials(&["read", "files:write"]))
            .await
            .unwrap();
        assert!(store.contents().unwrap().requested_scopes.is_empty());
        assert!(scopes_for(&settings, Some(plain), Some(&store)).is_empty());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600);
        }
    }
}
