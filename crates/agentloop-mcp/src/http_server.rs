//! agentloop's built-in tools served over MCP streamable HTTP (`agentloop mcp-server --listen
//! ADDR`), for clients that cannot start a child process.
//!
//! A local HTTP server can be reached by any web page the user opens, through DNS rebinding
//! (a hostile name resolving to 127.0.0.1) or a cross-origin request. So every request's `Host`
//! must be a loopback name (or one of [`HttpServeOptions::allowed_hosts`]) and an `Origin`, when
//! present, a loopback origin (or one of [`HttpServeOptions::allowed_origins`]): anything else
//! is refused with 403 before it reaches MCP. With a bearer token set, every request must carry
//! `Authorization: Bearer <token>` (compared in constant time) or gets 401.

use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, Workspace};
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::server::BuiltinToolsServer;

/// The path the MCP endpoint is served at.
pub const MCP_PATH: &str = "/mcp";

/// Origins always allowed: pages served from this machine's loopback addresses.
const LOOPBACK_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Host names always allowed (any port).
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Access rules for [`serve_builtin_tools_http`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct HttpServeOptions {
    /// When set, requests must carry `Authorization: Bearer <token>`.
    pub bearer_token: Option<String>,
    /// Browser origins allowed besides the loopback ones, with scheme (`https://app.example`,
    /// `http://host:*` for any port).
    pub allowed_origins: Vec<String>,
    /// `Host` names (or `host:port`) allowed besides the loopback ones, e.g. the machine's name
    /// when listening on a public address.
    pub allowed_hosts: Vec<String>,
}

impl HttpServeOptions {
    /// Requires `Authorization: Bearer <token>` (an empty token means none).
    pub fn with_bearer_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        self.bearer_token = (!token.is_empty()).then_some(token);
        self
    }

    /// Allows these browser origins too.
    pub fn with_allowed_origins(mut self, origins: impl IntoIterator<Item = String>) -> Self {
        self.allowed_origins.extend(origins);
        self
    }

    /// Allows these `Host` names too.
    pub fn with_allowed_hosts(mut self, hosts: impl IntoIterator<Item = String>) -> Self {
        self.allowed_hosts.extend(hosts);
        self
    }
}

/// The axum router serving the built-in tools at [`MCP_PATH`] under `options`.
pub fn builtin_tools_router(
    server: BuiltinToolsServer,
    options: &HttpServeOptions,
) -> axum::Router {
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(
            LOOPBACK_HOSTS
                .iter()
                .map(|h| (*h).to_owned())
                .chain(options.allowed_hosts.iter().cloned()),
        )
        .with_allowed_origins(
            LOOPBACK_ORIGINS
                .iter()
                .map(|o| (*o).to_owned())
                .chain(options.allowed_origins.iter().cloned()),
        )
        .enforce_origin_validation();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(MCP_PATH, service);
    match options.bearer_token.clone() {
        Some(token) => {
            let token: Arc<str> = Arc::from(token);
            router.layer(axum::middleware::from_fn(
                move |req: Request, next: Next| {
                    let token = token.clone();
                    async move { check_bearer(&token, req, next).await }
                },
            ))
        }
        None => router,
    }
}

async fn check_bearer(token: &str, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    if constant_time_eq(given.as_bytes(), token.as_bytes()) {
        return next.run(req).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, "Bearer")],
        "a valid bearer token is required\n",
    )
        .into_response()
}

/// Equality whose time does not depend on where the inputs differ (only on their lengths).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Serves the built-in tools for `workspace` over streamable HTTP on `listener` until the
/// process ends.
pub async fn serve_builtin_tools_http(
    workspace: Workspace,
    policy: ApprovalPolicy,
    listener: tokio::net::TcpListener,
    options: HttpServeOptions,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = BuiltinToolsServer::new(workspace, policy)?;
    let router = builtin_tools_router(server, &options);
    axum::serve(listener, router).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_comparison() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret2"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
