//! The MCP conformance suite's client under test (`@modelcontextprotocol/conformance client
//! --command "… conformance_client"`), built on the same [`McpToolset`] the `agentloop` CLI
//! uses: the suite starts a test server, sets `MCP_CONFORMANCE_SCENARIO` (and, for the auth
//! scenarios, `MCP_CONFORMANCE_CONTEXT`) and passes the server's URL as the last argument.
//!
//! Like the SDKs' "everything client", it switches on the scenario: it connects over streamable
//! HTTP, lists the tools, and calls the tool the scenario's server checks for. It exits 0 when
//! every step worked and 1 with a one-line reason otherwise; the suite judges the traffic.
//!
//! For the `auth/*` scenarios the server carries OAuth settings as the CLI's do (tokens in a
//! file, here a temporary one), with an authorizer standing in for the person at the browser:
//! the suite's authorization server approves at once, so the authorizer fetches the
//! authorization URL and takes the redirect it answers. Pre-registered client credentials come
//! from `MCP_CONFORMANCE_CONTEXT`, as do the grants without a person: client credentials
//! (secret or signing key) and cross-app access (an identity provider's ID token).
//!
//! ```text
//! cargo run -p agentloop-mcp --example conformance_client -- http://localhost:3000/mcp
//! ```

use std::process::ExitCode;
use std::sync::Arc;

use agentloop::tooling::Deps;
use agentloop_mcp::{
    Authorizer, ClientGrant, ElicitationMode, McpServerConfig, McpToolset, OAuthSettings,
    ServerState,
};
use serde_json::{Value, json};

/// The server name the toolset gives the suite's server (tools are `mcp__conformance__…`).
const SERVER: &str = "conformance";

/// What a scenario asks of the client: the tool to call after listing, with its arguments.
fn tool_for(scenario: &str) -> Result<Option<(&'static str, Value)>, String> {
    Ok(match scenario {
        "initialize" => None,
        "tools_call" => Some(("add_numbers", json!({"a": 5, "b": 3}))),
        "sse-retry" => Some(("test_reconnection", json!({}))),
        "elicitation-sep1034-client-defaults" => {
            Some(("test_client_elicitation_defaults", json!({})))
        }
        s if s.starts_with("auth/") => Some(("test-tool", json!({}))),
        other => return Err(format!("unknown scenario `{other}`")),
    })
}

/// Where the suite's authorization server redirects (nothing listens: the redirect is read
/// from its `Location` header).
const REDIRECT_URI: &str = "http://127.0.0.1:3000/callback";

/// The Client ID Metadata Document URL the suite's CIMD scenario expects.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// Approves by fetching the authorization URL and answering the redirect's target.
fn follow_redirect() -> Authorizer {
    Authorizer::new(REDIRECT_URI, |url| {
        Box::pin(async move {
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| e.to_string())?;
            let response = client.get(&url).send().await.map_err(|e| e.to_string())?;
            response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
                .ok_or_else(|| {
                    format!(
                        "no redirect from the authorization URL ({})",
                        response.status()
                    )
                })
        })
    })
}

/// The grant without a person a scenario's context describes: cross-app access when it
/// carries an ID token from an identity provider, client credentials (with a signing key, or
/// the secret) in the client-credentials scenarios.
fn grant(scenario: &str, context: &Value) -> Option<ClientGrant> {
    let text = |key: &str| context[key].as_str().map(str::to_owned);
    let client_id = text("client_id")?;
    if let Some(id_token) = text("idp_id_token") {
        return Some(ClientGrant::CrossApp {
            idp_issuer: text("idp_issuer")?,
            idp_token_endpoint: text("idp_token_endpoint")?,
            idp_client_id: text("idp_client_id")?,
            id_token,
            client_id,
            client_secret: text("client_secret")?,
        });
    }
    if !scenario.starts_with("auth/client-credentials") {
        return None;
    }
    match text("private_key_pem") {
        Some(key_pem) => Some(ClientGrant::PrivateKeyJwt {
            client_id,
            key_pem,
            algorithm: text("signing_algorithm").unwrap_or_else(|| "ES256".into()),
        }),
        None => Some(ClientGrant::ClientSecret {
            client_id,
            client_secret: text("client_secret")?,
        }),
    }
}

/// OAuth settings for an auth scenario: tokens in `dir`; the context's grant, or its client
/// when it names one.
fn oauth(dir: &std::path::Path, scenario: &str) -> OAuthSettings {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_default();
    let settings = OAuthSettings::new(Some(dir.join("tokens.json")));
    if let Some(grant) = grant(scenario, &context) {
        return settings.with_grant(grant);
    }
    let mut settings = settings
        .with_client_metadata_url(CLIENT_METADATA_URL)
        .with_authorizer(follow_redirect());
    if let Some(id) = context["client_id"].as_str() {
        let secret = context["client_secret"].as_str().map(str::to_owned);
        settings = settings.with_client(id, secret);
    }
    settings
}

async fn run(url: &str, scenario: &str) -> Result<(), String> {
    let call = tool_for(scenario)?;
    // Nobody to ask: requests for input are answered with the form's defaults.
    let mut config = McpServerConfig::http(SERVER, url).with_elicitation(ElicitationMode::Defaults);
    let tokens = tempfile::tempdir().map_err(|e| e.to_string())?;
    if scenario.starts_with("auth/") {
        config = config.with_oauth(oauth(tokens.path(), scenario));
    }
    let toolset = McpToolset::connect([config])
        .await
        .map_err(|e| e.to_string())?;
    let outcome = exercise(&toolset, call).await;
    toolset.shutdown().await;
    outcome
}

async fn exercise(toolset: &McpToolset, call: Option<(&str, Value)>) -> Result<(), String> {
    match toolset.servers().into_iter().next() {
        Some((name, ServerState::Down(why))) => {
            return Err(format!("server `{name}` is down: {why}"));
        }
        Some((name, ServerState::NeedsLogin(why))) => {
            return Err(format!("server `{name}` needs login: {why}"));
        }
        _ => {}
    }
    let tools = toolset.tools::<Deps>().await.map_err(|e| e.to_string())?;
    let Some((tool, args)) = call else {
        return Ok(());
    };
    // The agentloop name of the server's tool, as the toolset maps it.
    let name = toolset
        .report()
        .await
        .into_iter()
        .flat_map(|server| server.tools)
        .find(|t| t.server_name == tool)
        .map(|t| t.name)
        .ok_or_else(|| format!("the server offers no tool `{tool}`"))?;
    let spec = tools
        .iter()
        .find(|t| t.name() == name)
        .ok_or_else(|| format!("the tool `{tool}` was not mapped"))?;
    let out = spec
        .call(Arc::new(Deps::new()), args)
        .await
        .map_err(|e| format!("calling `{tool}` failed: {e}"))?;
    eprintln!("conformance_client: {tool} answered: {}", out.content);
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let Some(url) = std::env::args().nth(1).filter(|a| !a.starts_with('-')) else {
        eprintln!("usage: conformance_client URL (with MCP_CONFORMANCE_SCENARIO set)");
        return ExitCode::from(2);
    };
    let scenario =
        std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_else(|_| "initialize".into());
    match run(&url, &scenario).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance_client: scenario `{scenario}`: {e}");
            ExitCode::FAILURE
        }
    }
}
