//! Tokens a client obtains without a person: the OAuth client-credentials grant (the MCP
//! extension SEP-1046), the client authenticating with its secret (`client_secret_basic` or
//! `client_secret_post`, as the authorization server offers) or with a signed JWT assertion
//! (`private_key_jwt`, RFC 7523); and enterprise-managed authorization ("cross-app access",
//! SEP-990), where an ID token from the enterprise's identity provider is exchanged there for
//! an identity assertion grant (ID-JAG, RFC 8693 token exchange) and that, at the MCP
//! server's authorization server, for an access token (RFC 7523 JWT bearer grant).
//!
//! A server configured with a [`ClientGrant`] never needs a login: its token is obtained at
//! connect when there is none, and again when the server refuses it (client credentials come
//! without a refresh token). rmcp does the protocol work; this module discovers the servers,
//! picks the flow and stores the token like a login's.

use std::fmt;

use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::auth::{
    AuthorizationManager, AuthorizationMetadata, ClientCredentialsConfig, CredentialStore,
    InMemoryCredentialStore, JwtSigningAlgorithm, StoredCredentials,
};

use crate::config::HttpServer;
use crate::error::McpError;

/// How a client obtains tokens without a person.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientGrant {
    /// Client credentials, the client authenticating with its secret.
    ClientSecret {
        /// The client's id at the authorization server.
        client_id: String,
        /// Its secret.
        client_secret: String,
    },
    /// Client credentials, the client authenticating with a JWT it signs (`private_key_jwt`).
    PrivateKeyJwt {
        /// The client's id (the assertion's `iss` and `sub`).
        client_id: String,
        /// The signing key, PEM (PKCS#8 EC or RSA).
        key_pem: String,
        /// `ES256`, `ES384`, `RS256`, `RS384` or `RS512`.
        algorithm: String,
    },
    /// Enterprise-managed authorization: an ID token exchanged at the identity provider for
    /// an ID-JAG, redeemed at the server's authorization server.
    CrossApp {
        /// The identity provider's issuer.
        idp_issuer: String,
        /// Its token endpoint.
        idp_token_endpoint: String,
        /// This client's id at the identity provider.
        idp_client_id: String,
        /// The person's ID token from the identity provider.
        id_token: String,
        /// This client's id at the MCP server's authorization server.
        client_id: String,
        /// Its secret there (`client_secret_basic`).
        client_secret: String,
    },
}

impl fmt::Debug for ClientGrant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, client_id) = match self {
            ClientGrant::ClientSecret { client_id, .. } => ("ClientSecret", client_id),
            ClientGrant::PrivateKeyJwt { client_id, .. } => ("PrivateKeyJwt", client_id),
            ClientGrant::CrossApp { client_id, .. } => ("CrossApp", client_id),
        };
        // Secrets, keys and tokens never reach a log.
        write!(f, "ClientGrant::{kind} {{ client_id: {client_id:?}, .. }}")
    }
}

fn failed(server: &str, e: impl fmt::Display) -> McpError {
    McpError::Auth {
        server: server.to_owned(),
        message: e.to_string(),
    }
}

fn algorithm(name: &str) -> Result<JwtSigningAlgorithm, String> {
    Ok(match name.to_ascii_uppercase().as_str() {
        "ES256" => JwtSigningAlgorithm::ES256,
        "ES384" => JwtSigningAlgorithm::ES384,
        "RS256" => JwtSigningAlgorithm::RS256,
        "RS384" => JwtSigningAlgorithm::RS384,
        "RS512" => JwtSigningAlgorithm::RS512,
        other => return Err(format!("unsupported signing algorithm `{other}`")),
    })
}

/// Obtains a token for server `name` at `http` by `grant` (discovery seeded with
/// `challenge`), saved in the settings' token file, else returned in an in-memory store.
///
/// rmcp's token requests hold values that are not `Send` across their awaits, while a tool
/// call's future must be: the exchange runs on a runtime of its own on the blocking pool.
pub(crate) async fn obtain(
    name: &str,
    http: &HttpServer,
    grant: &ClientGrant,
    challenge: Option<&str>,
) -> Result<Option<InMemoryCredentialStore>, McpError> {
    let (owned_name, http, grant) = (name.to_owned(), http.clone(), grant.clone());
    let challenge = challenge.map(str::to_owned);
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| failed(&owned_name, e))?;
        runtime.block_on(obtain_here(
            &owned_name,
            &http,
            &grant,
            challenge.as_deref(),
        ))
    })
    .await
    .map_err(|e| failed(name, e))?
}

async fn obtain_here(
    name: &str,
    http: &HttpServer,
    grant: &ClientGrant,
    challenge: Option<&str>,
) -> Result<Option<InMemoryCredentialStore>, McpError> {
    let url = url::Url::parse(&http.url).map_err(|e| failed(name, e))?;
    let mut manager = AuthorizationManager::new(http.url.as_str())
        .await
        .map_err(|e| failed(name, e))?;
    let token_file = http.oauth.as_ref().and_then(|o| o.token_file.as_deref());
    let memory = InMemoryCredentialStore::new();
    match token_file {
        Some(path) => manager.set_credential_store(crate::auth::TokenFile::new(path, &http.url)),
        None => manager.set_credential_store(memory.clone()),
    }
    let challenge = match challenge {
        Some(c) => Some(c.to_owned()),
        None => crate::auth::probe_challenge(&http.url).await,
    };
    let metadata = crate::auth::discover(name, &mut manager, &url, challenge.as_deref()).await?;
    let resource = http.url.clone();
    let scopes = http
        .oauth
        .as_ref()
        .map(|o| o.scopes.clone())
        .unwrap_or_default();
    match grant {
        ClientGrant::CrossApp { .. } => {
            let stored = cross_app(name, grant, &metadata, &resource, scopes).await?;
            let issuer = metadata.issuer.clone();
            let store: Box<dyn CredentialStore> = match token_file {
                Some(path) => Box::new(crate::auth::TokenFile::new(path, &http.url)),
                None => Box::new(memory.clone()),
            };
            store
                .save(stored.with_issuer(issuer))
                .await
                .map_err(|e| failed(name, e))?;
        }
        _ => {
            let config =
                client_credentials(grant, resource, scopes).map_err(|e| failed(name, e))?;
            manager
                .validate_client_credentials_metadata(&config)
                .and_then(|()| manager.configure_client_credentials(&config))
                .map_err(|e| failed(name, e))?;
            manager
                .exchange_client_credentials(&config)
                .await
                .map_err(|e| failed(name, e))?;
        }
    }
    Ok(token_file.is_none().then_some(memory))
}

/// rmcp's client-credentials configuration of a client-credentials grant.
fn client_credentials(
    grant: &ClientGrant,
    resource: String,
    scopes: Vec<String>,
) -> Result<ClientCredentialsConfig, String> {
    Ok(match grant {
        ClientGrant::ClientSecret {
            client_id,
            client_secret,
        } => ClientCredentialsConfig::ClientSecret {
            client_id: client_id.clone(),
            client_secret: client_secret.clone(),
            scopes,
            resource: Some(resource),
        },
        ClientGrant::PrivateKeyJwt {
            client_id,
            key_pem,
            algorithm: name,
        } => ClientCredentialsConfig::PrivateKeyJwt {
            client_id: client_id.clone(),
            signing_key: key_pem.as_bytes().to_vec(),
            signing_algorithm: algorithm(name)?,
            token_endpoint_audience: None,
            scopes,
            resource: Some(resource),
        },
        ClientGrant::CrossApp { .. } => return Err("not a client-credentials grant".into()),
    })
}

/// The enterprise-managed exchange: ID token → ID-JAG at the identity provider → access token
/// at the server's authorization server; the credentials to store.
async fn cross_app(
    name: &str,
    grant: &ClientGrant,
    metadata: &AuthorizationMetadata,
    resource: &str,
    scopes: Vec<String>,
) -> Result<StoredCredentials, McpError> {
    let ClientGrant::CrossApp {
        idp_issuer,
        idp_token_endpoint,
        idp_client_id,
        id_token,
        client_id,
        client_secret,
    } = grant
    else {
        return Err(failed(name, "not a cross-app access grant"));
    };
    let issuer = metadata
        .issuer
        .clone()
        .ok_or_else(|| failed(name, "the authorization server's metadata names no issuer"))?;
    let idp = EmaAuthorizationServer::new(idp_issuer, idp_token_endpoint, idp_client_id);
    let resource_as = EmaAuthorizationServer::new(issuer, &metadata.token_endpoint, client_id)
        .with_client_authentication(EmaClientAuthentication::ClientSecretBasic(
            oauth2::ClientSecret::new(client_secret.clone()),
        ));
    let http = rmcp::transport::auth::default_oauth_http_client().map_err(|e| failed(name, e))?;
    let token = EmaExchangeRequest::new_with_id_token(idp, resource_as, resource, id_token)
        .with_scopes(scopes)
        .exchange(&http, &http)
        .await
        .map_err(|e| failed(name, format!("cross-app access: {e}")))?;
    let mut response = serde_json::json!({
        "access_token": token.access_token.secret(),
        "token_type": "Bearer",
    });
    if let Some(expires_in) = token.expires_in {
        response["expires_in"] = expires_in.as_secs().into();
    }
    let granted: Vec<String> = token.scopes.iter().cloned().collect();
    if !granted.is_empty() {
        response["scope"] = granted.join(" ").into();
    }
    let response = serde_json::from_value(response).map_err(|e| failed(name, e))?;
    let received = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .ok();
    Ok(StoredCredentials::new(
        client_id.clone(),
        Some(response),
        granted,
        received,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_never_shows_its_secrets() {
        let grant = ClientGrant::CrossApp {
            idp_issuer: "https://idp.example".into(),
            idp_token_endpoint: "https://idp.example/token".into(),
            idp_client_id: "idp-client".into(),
            id_token: "the-id-token".into(),
            client_id: "mcp-client".into(),
            client_secret: "the-secret".into(),
        };
        let shown = format!("{grant:?}");
        assert!(shown.contains("mcp-client"), "{shown}");
        assert!(!shown.contains("the-secret") && !shown.contains("the-id-token"));
    }

    #[test]
    fn signing_algorithms_are_named_as_jose_names_them() {
        assert!(matches!(algorithm("es256"), Ok(JwtSigningAlgorithm::ES256)));
        assert!(matches!(algorithm("RS512"), Ok(JwtSigningAlgorithm::RS512)));
        assert!(algorithm("HS256").unwrap_err().contains("HS256"));
        let cross_app = ClientGrant::CrossApp {
            idp_issuer: String::new(),
            idp_token_endpoint: String::new(),
            idp_client_id: String::new(),
            id_token: String::new(),
            client_id: String::new(),
            client_secret: String::new(),
        };
        assert!(client_credentials(&cross_app, "http://x/mcp".into(), vec![]).is_err());
    }
}
