//! OAuth for the configured streamable-HTTP MCP servers: where their tokens live, and
//! `agentloop mcp login NAME` / `agentloop mcp logout NAME`.
//!
//! Tokens are the user's, not a project's: they live in the data directory
//! (`$XDG_DATA_HOME/agentloop/mcp-tokens/NAME.json`, else `~/.local/share/agentloop/…`), written
//! with mode 0600 in a 0700 directory, never in a workspace or a session. Login is the
//! authorization-code flow with PKCE: the authorization URL is printed (and opened in a browser
//! unless `--no-browser`), and the browser's redirect lands on a one-shot listener on
//! 127.0.0.1. A run never logs in: a server that needs it is reported and its tools are absent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentloop_mcp::{
    Authorizer, ClientGrant, HttpServer, McpServerConfig, McpTransport, OAuthSettings,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::cli::{McpLoginArgs, McpLogoutArgs};
use crate::config::files::{ConfigFile, McpServerEntry};
use crate::error::Failure;

/// How long login waits for the browser to come back.
const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The directory of the token files, when there is a data directory.
fn tokens_dir() -> Option<PathBuf> {
    Some(crate::config::data_dir::data_dir()?.join("mcp-tokens"))
}

/// The token file of server `name` (its name made safe as a file name).
pub fn token_file(name: &str) -> Option<PathBuf> {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(tokens_dir()?.join(format!("{safe}.json")))
}

/// The OAuth settings of HTTP server `name` from the `oauth_*` keys of its config entry (a key
/// file relative to `workspace`). Secrets come from the environment and keys from files, never
/// from the config file itself.
pub fn oauth_settings(
    name: &str,
    entry: &McpServerEntry,
    workspace: &Path,
) -> Result<OAuthSettings, Failure> {
    let usage = |message: String| Failure::usage(format!("mcp_servers.{name}.{message}"));
    let without_person = match entry.oauth_grant.as_deref() {
        None | Some("authorization_code") => false,
        Some("client_credentials") => true,
        Some(other) => {
            return Err(usage(format!(
                "oauth_grant must be \"authorization_code\" or \"client_credentials\", got {other:?}"
            )));
        }
    };
    if !without_person
        && (entry.oauth_private_key_file.is_some() || entry.oauth_jwt_algorithm.is_some())
    {
        return Err(usage(
            "oauth_private_key_file and oauth_jwt_algorithm need oauth_grant = \"client_credentials\"".into(),
        ));
    }
    let secret = match &entry.oauth_client_secret_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            usage(format!(
                "oauth_client_secret_env: the environment variable {var} is not set"
            ))
        })?),
        None => None,
    };
    let settings = OAuthSettings::new(token_file(name))
        .with_scopes(entry.oauth_scopes.clone().unwrap_or_default());
    let Some(client_id) = entry.oauth_client_id.clone() else {
        return match (without_person, secret.is_some()) {
            (true, _) => Err(usage(
                "oauth_grant = \"client_credentials\" needs oauth_client_id".into(),
            )),
            (false, true) => Err(usage(
                "oauth_client_secret_env needs oauth_client_id".into(),
            )),
            (false, false) => Ok(settings),
        };
    };
    if !without_person {
        return Ok(settings.with_client(client_id, secret));
    }
    let grant = client_credentials(
        name,
        client_id,
        secret,
        entry
            .oauth_private_key_file
            .as_ref()
            .map(|f| workspace.join(f)),
        entry.oauth_jwt_algorithm.clone(),
    )?;
    Ok(settings.with_grant(grant))
}

/// The client-credentials grant: the client's secret, or a key signing its JWT assertion
/// (exactly one of them).
fn client_credentials(
    name: &str,
    client_id: String,
    secret: Option<String>,
    key_file: Option<PathBuf>,
    algorithm: Option<String>,
) -> Result<ClientGrant, Failure> {
    let usage = |message: &str| Failure::usage(format!("mcp_servers.{name}: {message}"));
    match (secret, key_file) {
        (Some(client_secret), None) if algorithm.is_none() => Ok(ClientGrant::ClientSecret {
            client_id,
            client_secret,
        }),
        (None, Some(file)) => {
            let key_pem = std::fs::read_to_string(&file).map_err(|e| {
                usage(&format!(
                    "cannot read oauth_private_key_file {}: {e}",
                    file.display()
                ))
            })?;
            Ok(ClientGrant::PrivateKeyJwt {
                client_id,
                key_pem,
                algorithm: algorithm.unwrap_or_else(|| "ES256".into()),
            })
        }
        (Some(_), None) => Err(usage(
            "oauth_jwt_algorithm goes with oauth_private_key_file, not with a secret",
        )),
        (Some(_), Some(_)) => Err(usage(
            "client credentials take oauth_client_secret_env or oauth_private_key_file, not both",
        )),
        (None, None) => Err(usage(
            "oauth_grant = \"client_credentials\" needs oauth_client_secret_env or oauth_private_key_file",
        )),
    }
}

/// The HTTP server `name` of the configuration read from `workspace`.
fn http_server(
    name: &str,
    workspace: &Option<PathBuf>,
    trust: &crate::config::trust::Trust,
) -> Result<HttpServer, Failure> {
    let root = match workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let servers: Vec<McpServerConfig> = ConfigFile::load(&root, trust)?.mcp_servers(&root, &[])?;
    let server = servers
        .into_iter()
        .find(|s| s.name == name)
        .ok_or_else(|| Failure::usage(format!("no MCP server named `{name}` is configured")))?;
    match server.transport {
        McpTransport::Http(http) => Ok(http),
        _ => Err(Failure::usage(format!(
            "MCP server `{name}` is not a streamable-HTTP server; only those log in"
        ))),
    }
}

/// `agentloop mcp login NAME`.
pub async fn login(args: McpLoginArgs) -> Result<(), Failure> {
    let http = http_server(&args.name, &args.workspace, &args.trust)?;
    if http.oauth.as_ref().is_some_and(|o| o.grant.is_some()) {
        println!(
            "MCP server `{}` uses the client-credentials grant: agentloop obtains its token \
             itself when it connects; there is nothing to log in to",
            args.name
        );
        return Ok(());
    }
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| Failure::new(format!("cannot listen on 127.0.0.1 for the redirect: {e}")))?;
    let redirect_uri = format!("http://{}/callback", listener.local_addr()?);
    let listener = std::sync::Arc::new(tokio::sync::Mutex::new(Some(listener)));
    let name = args.name.clone();
    let open_browser = !args.no_browser;
    let authorizer = Authorizer::new(redirect_uri, move |url| {
        let listener = listener.clone();
        let name = name.clone();
        Box::pin(async move {
            println!("Open this URL to authorize agentloop with MCP server `{name}`:\n  {url}");
            if open_browser {
                open_in_browser(&url);
            }
            let listener = listener
                .lock()
                .await
                .take()
                .ok_or("the redirect listener was already used")?;
            tokio::time::timeout(LOGIN_TIMEOUT, receive_redirect(listener))
                .await
                .map_err(|_| format!("no redirect within {} s", LOGIN_TIMEOUT.as_secs()))?
        })
    });
    agentloop_mcp::login(&args.name, &http, None, &authorizer)
        .await
        .map_err(|e| Failure::new(e.to_string()))?;
    let place = http
        .oauth
        .as_ref()
        .and_then(|o| o.token_file.as_ref())
        .map(|p| format!(" (tokens in {})", p.display()))
        .unwrap_or_default();
    println!("logged in to MCP server `{}`{place}", args.name);
    Ok(())
}

/// `agentloop mcp logout NAME`.
pub async fn logout(args: McpLogoutArgs) -> Result<(), Failure> {
    let http = http_server(&args.name, &args.workspace, &args.trust)?;
    match agentloop_mcp::logout(&http) {
        Ok(true) => println!("logged out of MCP server `{}`", args.name),
        Ok(false) => println!("no tokens stored for MCP server `{}`", args.name),
        Err(e) => return Err(Failure::new(format!("cannot remove the tokens: {e}"))),
    }
    Ok(())
}

/// Tries the desktop's URL opener; printing the URL is the fallback, so failures are ignored.
pub(crate) fn open_in_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}

/// Waits for the browser's request to `/callback` and answers it; the full redirect URL.
/// Other requests (a favicon) get a 404 and waiting goes on.
async fn receive_redirect(listener: TcpListener) -> Result<String, String> {
    let base = format!(
        "http://{}",
        listener.local_addr().map_err(|e| e.to_string())?
    );
    loop {
        let (mut stream, _) = listener.accept().await.map_err(|e| e.to_string())?;
        let mut buf = vec![0u8; 8192];
        let mut len = 0;
        while len < buf.len() && !buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf[len..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => len += n,
            }
        }
        let head = String::from_utf8_lossy(&buf[..len]);
        let target = head
            .lines()
            .next()
            .and_then(|line| line.split_whitespace().nth(1))
            .unwrap_or_default()
            .to_owned();
        if !target.starts_with("/callback") {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        }
        let body = "agentloop: authorization received; you can close this tab.";
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let query = target.split_once('?').map(|(_, q)| q).unwrap_or_default();
        if let Some((_, error)) = query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == "error")
        {
            let error = crate::ui::safe_text::visible_line(error);
            return Err(format!("the authorization server refused: {error}"));
        }
        return Ok(format!("{base}{target}"));
    }
}
