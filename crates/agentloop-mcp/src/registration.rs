//! Dynamic client registration (RFC 7591) done here rather than inside rmcp, so that what the
//! authorization server answers is kept: a confidential client's `client_secret`, when it
//! expires (`client_secret_expires_at`) and how the token endpoint wants it presented
//! (`token_endpoint_auth_method`). The registration is stored next to the tokens, so a refresh
//! in a later process and later logins authenticate as the same client; an expired secret
//! means registering again.
//!
//! agentloop asks to be a public client (`none`), as a native application should, unless the
//! authorization server does not offer that; the server may still issue a secret, which is
//! then used.

use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::transport::auth::{AuthorizationMetadata, OAuthClientConfig};
use serde::{Deserialize, Serialize};

/// How long before its stated expiry a secret is treated as expired already (a request made
/// with it must still reach the server in time).
const EXPIRY_MARGIN_SECS: u64 = 60;

/// A client created by dynamic registration.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct RegisteredClient {
    /// The client id the server assigned.
    pub(crate) client_id: String,
    /// The secret of a confidential client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// When the secret expires, in seconds since the Unix epoch; 0 means never (RFC 7591).
    #[serde(default)]
    pub(crate) client_secret_expires_at: u64,
    /// `none`, `client_secret_basic` or `client_secret_post`.
    pub(crate) token_endpoint_auth_method: String,
    /// The redirect URIs it was registered with.
    #[serde(default)]
    pub(crate) redirect_uris: Vec<String>,
}

/// The server's answer to a registration (the fields agentloop uses).
#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    client_secret_expires_at: Option<u64>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
    #[serde(default)]
    redirect_uris: Option<Vec<String>>,
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

impl RegisteredClient {
    /// Whether its secret has expired (or is about to).
    pub(crate) fn is_expired(&self) -> bool {
        self.expired_at(now())
    }

    fn expired_at(&self, now: u64) -> bool {
        self.client_secret.is_some()
            && self.client_secret_expires_at != 0
            && self.client_secret_expires_at <= now.saturating_add(EXPIRY_MARGIN_SECS)
    }

    /// Whether a login redirecting to `redirect_uri` can use this client: its secret is
    /// valid and the URI is one it was registered with — for a loopback URI any port, as
    /// authorization servers must allow for native applications (RFC 8252, section 7.3).
    pub(crate) fn fits(&self, redirect_uri: &str) -> bool {
        !self.is_expired()
            && self
                .redirect_uris
                .iter()
                .any(|uri| same_redirect(uri, redirect_uri))
    }

    /// rmcp's client configuration for this client (the method is applied to the metadata
    /// with [`presenting`]).
    pub(crate) fn config(&self, redirect_uri: &str) -> OAuthClientConfig {
        let config = OAuthClientConfig::new(&self.client_id, redirect_uri);
        match &self.client_secret {
            Some(secret) => config.with_client_secret(secret),
            None => config,
        }
    }
}

fn same_redirect(registered: &str, wanted: &str) -> bool {
    if registered == wanted {
        return true;
    }
    let (Ok(a), Ok(b)) = (url::Url::parse(registered), url::Url::parse(wanted)) else {
        return false;
    };
    let loopback = |u: &url::Url| match u.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        _ => false,
    };
    loopback(&a)
        && a.scheme() == "http"
        && a.scheme() == b.scheme()
        && a.host() == b.host()
        && a.path() == b.path()
        && a.query() == b.query()
}

/// `metadata` narrowed so rmcp presents the client's secret the way its registration said:
/// rmcp picks `client_secret_post` only when the server lists it and not
/// `client_secret_basic`, so the list becomes the registered method alone.
pub(crate) fn presenting(
    metadata: &AuthorizationMetadata,
    client: &RegisteredClient,
) -> AuthorizationMetadata {
    let mut metadata = metadata.clone();
    metadata.additional_fields.insert(
        "token_endpoint_auth_methods_supported".into(),
        serde_json::json!([client.token_endpoint_auth_method]),
    );
    metadata
}

/// The authentication method to ask for: `none` (a public client) when the server offers it
/// or says nothing, else the secret method it offers.
fn wanted_method(metadata: &AuthorizationMetadata) -> &'static str {
    let offered: Vec<&str> = metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|m| m.as_str()).collect())
        .unwrap_or_default();
    if offered.is_empty() || offered.contains(&"none") {
        "none"
    } else if offered.contains(&"client_secret_basic") || !offered.contains(&"client_secret_post") {
        "client_secret_basic"
    } else {
        "client_secret_post"
    }
}

/// Registers a client named `name` redirecting to `redirect_uri` at the server's
/// registration endpoint.
pub(crate) async fn register(
    metadata: &AuthorizationMetadata,
    name: &str,
    redirect_uri: &str,
    scopes: &[String],
) -> Result<RegisteredClient, String> {
    let endpoint = metadata
        .registration_endpoint
        .as_deref()
        .ok_or("the authorization server offers no dynamic client registration")?;
    let mut body = serde_json::json!({
        "client_name": name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted_method(metadata),
        "application_type": "native",
    });
    if !scopes.is_empty() {
        body["scope"] = scopes.join(" ").into();
    }
    let response = reqwest::Client::new()
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("dynamic registration failed: {e}"))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        let text: String = text.chars().take(200).filter(|c| !c.is_control()).collect();
        return Err(format!(
            "dynamic registration failed: HTTP {status}: {text}"
        ));
    }
    let answer: RegistrationResponse = serde_json::from_str(&text)
        .map_err(|e| format!("dynamic registration answered something unreadable: {e}"))?;
    Ok(from_response(answer, redirect_uri))
}

fn from_response(answer: RegistrationResponse, redirect_uri: &str) -> RegisteredClient {
    // An empty secret is no secret (some servers answer public clients that way).
    let client_secret = answer.client_secret.filter(|s| !s.is_empty());
    let token_endpoint_auth_method = answer.token_endpoint_auth_method.unwrap_or_else(|| {
        // RFC 7591's default is client_secret_basic; a client without a secret has none.
        if client_secret.is_some() {
            "client_secret_basic".into()
        } else {
            "none".into()
        }
    });
    RegisteredClient {
        client_id: answer.client_id,
        client_secret,
        client_secret_expires_at: answer.client_secret_expires_at.unwrap_or(0),
        token_endpoint_auth_method,
        redirect_uris: answer
            .redirect_uris
            .filter(|uris| !uris.is_empty())
            .unwrap_or_else(|| vec![redirect_uri.to_owned()]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn client(secret: Option<&str>, expires_at: u64) -> RegisteredClient {
        RegisteredClient {
            client_id: "c".into(),
            client_secret: secret.map(str::to_owned),
            client_secret_expires_at: expires_at,
            token_endpoint_auth_method: "client_secret_basic".into(),
            redirect_uris: vec!["http://127.0.0.1:4000/callback".into()],
        }
    }

    #[test]
    fn a_secret_expires_at_its_time_or_never_when_zero() {
        assert!(!client(Some("s"), 0).expired_at(1_000_000));
        assert!(!client(Some("s"), 2_000_000).expired_at(1_000_000));
        assert!(client(Some("s"), 1_000_030).expired_at(1_000_000));
        assert!(client(Some("s"), 10).expired_at(1_000_000));
        assert!(
            !client(None, 10).expired_at(1_000_000),
            "no secret, nothing expires"
        );
    }

    #[test]
    fn a_loopback_redirect_fits_on_any_port_other_uris_exactly() {
        let c = client(Some("s"), 0);
        assert!(c.fits("http://127.0.0.1:4000/callback"));
        assert!(c.fits("http://127.0.0.1:5123/callback"));
        assert!(!c.fits("http://127.0.0.1:5123/other"));
        assert!(!c.fits("http://localhost:4000/callback"));
        let mut web = c.clone();
        web.redirect_uris = vec!["https://app.example/cb".into()];
        assert!(web.fits("https://app.example/cb"));
        assert!(!web.fits("https://app.example:8443/cb"));
    }

    #[test]
    fn the_answer_decides_the_method_and_an_empty_secret_is_none() {
        let answer = |json: serde_json::Value| {
            from_response(
                serde_json::from_value(json).unwrap(),
                "http://127.0.0.1:1/cb",
            )
        };
        let c = answer(serde_json::json!({"client_id": "a", "client_secret": "s",
            "client_secret_expires_at": 99, "token_endpoint_auth_method": "client_secret_post"}));
        assert_eq!(c.token_endpoint_auth_method, "client_secret_post");
        assert_eq!(c.client_secret_expires_at, 99);
        assert_eq!(c.redirect_uris, ["http://127.0.0.1:1/cb"]);
        let c = answer(serde_json::json!({"client_id": "a", "client_secret": "s"}));
        assert_eq!(c.token_endpoint_auth_method, "client_secret_basic");
        let c = answer(serde_json::json!({"client_id": "a", "client_secret": ""}));
        assert_eq!(
            (c.client_secret, c.token_endpoint_auth_method.as_str()),
            (None, "none")
        );
    }
}
