//! OAuth for a streamable-HTTP MCP server through the `agentloop` binary, against a local
//! OAuth-protected server written here (protected-resource and authorization-server metadata,
//! dynamic registration, an authorization endpoint that approves at once, a token endpoint
//! with refresh, and the built-in tools behind a bearer check): before login the server
//! "needs login" in `mcp list` and in a run's warning (the run still succeeds); `mcp login
//! --no-browser` prints the URL, the redirect reaches its loopback listener, the tokens land in
//! the data directory with mode 0600; an access token the server declares expired is
//! refreshed; a revoked grant makes the server "need login" again; `mcp logout` removes them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};

use agentloop_testkit::{MockServer, Script};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, Uri, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use support::{Scratch, assert_stdout_has, output_text};

/// What the authorization server knows: live access and refresh tokens (with the scope they
/// grant), what it demands, and what happened.
#[derive(Default)]
struct AuthState {
    base: String,
    access: BTreeSet<String>,
    refresh: BTreeSet<String>,
    /// The scope each access or refresh token grants.
    scope_of: BTreeMap<String, String>,
    issued: u32,
    /// Grant types the token endpoint was asked for, in order.
    grants: Vec<String>,
    /// The `resource` parameter of each token request.
    resources: Vec<String>,
    /// The `scope` parameter of each authorization request (`tools` when it had none).
    authorized: Vec<String>,
    /// A scope every request needs (403 `insufficient_scope` without it).
    needed_always: Option<String>,
    /// A scope `tools/call` needs.
    needed_for_calls: Option<String>,
    /// Dynamic registration makes a confidential client presenting its secret this way
    /// (`client_secret_basic` or `client_secret_post`), its secret expiring at this time.
    confidential: Option<(&'static str, u64)>,
    /// Clients registered.
    registrations: u32,
    /// How each token request authenticated the client: `basic ID:SECRET`, `post ID:SECRET`
    /// or `none`.
    client_auth: Vec<String>,
}

type Shared = Arc<Mutex<AuthState>>;

/// A JSON answer.
fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// `a=1&b=2` (form body or query), decoded.
fn pairs(text: &str) -> BTreeMap<String, String> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        let bytes = s.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'%'
                && i + 2 < bytes.len()
                && let Ok(b) = u8::from_str_radix(&s[i + 1..i + 3], 16)
            {
                out.push(b);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    text.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn issue(state: &mut AuthState, scope: &str) -> Value {
    state.issued += 1;
    let (access, refresh) = (
        format!("access-{}", state.issued),
        format!("refresh-{}", state.issued),
    );
    state.access.insert(access.clone());
    state.refresh.insert(refresh.clone());
    state.scope_of.insert(access.clone(), scope.to_owned());
    state.scope_of.insert(refresh.clone(), scope.to_owned());
    json!({"access_token": access, "token_type": "Bearer", "expires_in": 3600,
           "refresh_token": refresh, "scope": scope})
}

/// The client of the registration (the id it assigned and the secret), as the token
/// endpoint expects it presented.
const CLIENT_ID: &str = "agentloop-test";
const CLIENT_SECRET: &str = "s3cret/+&";

/// How a token request authenticated its client.
fn client_auth(headers: &axum::http::HeaderMap, form: &BTreeMap<String, String>) -> String {
    use base64::Engine;
    let basic = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
    if let Some(decoded) = basic {
        // RFC 6749 section 2.3.1: id and secret are form-encoded before joining.
        let text = String::from_utf8_lossy(&decoded).into_owned();
        let (id, secret) = text.split_once(':').unwrap_or_default();
        let decoded = pairs(&format!("i={id}&s={secret}"));
        return format!("basic {}:{}", decoded["i"], decoded["s"]);
    }
    match form.get("client_secret") {
        Some(secret) => format!(
            "post {}:{secret}",
            form.get("client_id").cloned().unwrap_or_default()
        ),
        None => "none".into(),
    }
}

async fn token(State(s): State<Shared>, headers: axum::http::HeaderMap, body: String) -> Response {
    let form = pairs(&body);
    let mut state = s.lock().unwrap();
    let grant = form.get("grant_type").cloned().unwrap_or_default();
    state.grants.push(grant.clone());
    state
        .resources
        .push(form.get("resource").cloned().unwrap_or_default());
    let auth = client_auth(&headers, &form);
    state.client_auth.push(auth.clone());
    if let Some((method, _)) = state.confidential {
        let expected = match method {
            "client_secret_post" => format!("post {CLIENT_ID}:{CLIENT_SECRET}"),
            _ => format!("basic {CLIENT_ID}:{CLIENT_SECRET}"),
        };
        if auth != expected {
            return json_response(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "invalid_client"}),
            );
        }
    }
    let scope = match grant.as_str() {
        "authorization_code" => form
            .get("code")
            .and_then(|c| c.strip_prefix("code:"))
            .map(str::to_owned),
        "refresh_token" => form
            .get("refresh_token")
            .filter(|r| state.refresh.remove(*r))
            .and_then(|r| state.scope_of.get(r).cloned()),
        // No person: only the pre-registered client with its secret gets a token.
        "client_credentials" if auth.ends_with(&format!(" {CLIENT_ID}:{CLIENT_SECRET}")) => {
            Some(form.get("scope").cloned().unwrap_or_else(|| "tools".into()))
        }
        "client_credentials" => {
            return json_response(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "invalid_client"}),
            );
        }
        _ => None,
    };
    let Some(scope) = scope else {
        return json_response(StatusCode::BAD_REQUEST, &json!({"error": "invalid_grant"}));
    };
    json_response(StatusCode::OK, &issue(&mut state, &scope))
}

/// Approves at once; the code carries the scope asked for (`tools` when none was).
async fn authorize(State(s): State<Shared>, uri: Uri) -> Response {
    let q = pairs(uri.query().unwrap_or_default());
    assert_eq!(
        q.get("code_challenge_method").map(String::as_str),
        Some("S256")
    );
    let scope = q
        .get("scope")
        .cloned()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "tools".into());
    s.lock().unwrap().authorized.push(scope.clone());
    let code = format!("code:{scope}").replace(' ', "+");
    let redirect = format!(
        "{}?code={code}&state={}",
        q["redirect_uri"],
        q.get("state").cloned().unwrap_or_default()
    );
    (StatusCode::FOUND, [(header::LOCATION, redirect)]).into_response()
}

/// Whether a token granting `granted` covers every scope of `needed`.
fn covers(granted: &str, needed: &str) -> bool {
    let granted: BTreeSet<&str> = granted.split_whitespace().collect();
    needed.split_whitespace().all(|n| granted.contains(n))
}

async fn bearer(State(s): State<Shared>, req: Request, next: Next) -> Response {
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let is_call = String::from_utf8_lossy(&body).contains("\"tools/call\"");
    let req = Request::from_parts(parts, axum::body::Body::from(body));
    let (known, base, missing) = {
        let state = s.lock().unwrap();
        let granted = state.scope_of.get(&given).cloned().unwrap_or_default();
        let needed = [
            state.needed_always.clone(),
            state.needed_for_calls.clone().filter(|_| is_call),
        ];
        let missing = needed.into_iter().flatten().find(|n| !covers(&granted, n));
        (state.access.contains(&given), state.base.clone(), missing)
    };
    if known && let Some(needed) = missing {
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"tools {needed}\", \
             error_description=\"needs {needed}\", \
             resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
        );
        return (
            StatusCode::FORBIDDEN,
            [(header::WWW_AUTHENTICATE, challenge)],
        )
            .into_response();
    }
    if known {
        return next.run(req).await;
    }
    let challenge = format!(
        "Bearer error=\"invalid_token\", error_description=\"token expired or revoked\", \
         resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\""
    );
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
    )
        .into_response()
}

/// Registers the client: public, or confidential with a secret when the test says so.
async fn register(State(s): State<Shared>, body: String) -> Response {
    let body: Value = serde_json::from_str(&body).unwrap_or_default();
    let uris = body["redirect_uris"].clone();
    let mut state = s.lock().unwrap();
    state.registrations += 1;
    let answer = match state.confidential {
        Some((method, expires_at)) => json!({"client_id": CLIENT_ID, "redirect_uris": uris,
            "client_secret": CLIENT_SECRET, "client_secret_expires_at": expires_at,
            "token_endpoint_auth_method": method}),
        None => json!({"client_id": CLIENT_ID, "redirect_uris": uris,
            "token_endpoint_auth_method": "none"}),
    };
    json_response(StatusCode::CREATED, &answer)
}

/// Starts the OAuth-protected MCP server on its own runtime thread; its base URL and state.
fn start_server(served: &std::path::Path) -> (String, Shared) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state: Shared = Arc::new(Mutex::new(AuthState {
        base: base.clone(),
        ..AuthState::default()
    }));
    let workspace = agentloop::builtin::Workspace::new(served).unwrap();
    let tools = agentloop_mcp::BuiltinToolsServer::new(
        workspace,
        agentloop::builtin::ApprovalPolicy::Never,
    )
    .unwrap();
    let mcp =
        agentloop_mcp::builtin_tools_router(tools, &agentloop_mcp::HttpServeOptions::default())
            .layer(axum::middleware::from_fn_with_state(state.clone(), bearer));
    let b = base.clone();
    let prm = json!({"resource": format!("{b}/mcp"), "authorization_servers": [b.clone()]});
    let asm = json!({
        "issuer": b, "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"), "registration_endpoint": format!("{b}/register"),
        "response_types_supported": ["code"], "code_challenge_methods_supported": ["S256"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "token_endpoint_auth_methods_supported":
            ["none", "client_secret_basic", "client_secret_post"]
    });
    let oauth = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(move || async move { json_response(StatusCode::OK, &prm) }),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(move || async move { json_response(StatusCode::OK, &asm) }),
        )
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .with_state(state.clone());
    let app = mcp.merge(oauth);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (base, state)
}

fn setup() -> (Scratch, String, Shared) {
    let s = Scratch::new();
    std::fs::create_dir_all(s.path("served")).unwrap();
    std::fs::write(s.path("served/remote.txt"), "served file\n").unwrap();
    let (base, state) = start_server(&s.path("served"));
    s.user_config(&format!("[mcp_servers.remote]\nurl = \"{base}/mcp\"\n"));
    (s, base, state)
}

/// `agentloop mcp list` in `s`'s workspace, not started yet.
fn mcp_list_command(s: &Scratch) -> std::process::Command {
    let mut cmd = s.cmd();
    cmd.args(["mcp", "list", "--workspace"]).arg(s.ws());
    cmd
}

fn mcp_list(s: &Scratch) -> String {
    let out = mcp_list_command(s).output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `mcp login remote --no-browser`, with the test as the browser: reads the printed URL and
/// follows the authorization server's redirect to the login's loopback listener.
fn login(s: &Scratch) -> String {
    let mut child = s
        .cmd()
        .args(["mcp", "login", "remote", "--no-browser", "--workspace"])
        .arg(s.ws())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    let url = loop {
        let Some(Ok(line)) = lines.next() else {
            let out = child.wait_with_output().unwrap();
            panic!("no authorization URL in:\n{printed}\n{}", output_text(&out));
        };
        printed.push_str(&line);
        printed.push('\n');
        if let Some(url) = line.trim().strip_prefix("http") {
            break format!("http{url}");
        }
    };
    let answer = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async { reqwest::get(&url).await?.text().await });
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().unwrap();
    let page = answer.unwrap();
    assert!(page.contains("authorization received"), "{page}");
    assert!(
        out.status.success(),
        "{printed}{}\n{}",
        rest.join("\n"),
        output_text(&out)
    );
    printed + &rest.join("\n")
}

#[test]
fn login_refresh_revocation_and_logout_of_an_oauth_server() {
    let (s, base, state) = setup();

    // No tokens: the server needs login, and a run warns in one line and still succeeds.
    let listed = mcp_list(&s);
    assert!(
        listed.contains("remote: needs login: agentloop mcp login remote"),
        "{listed}"
    );
    let model =
        MockServer::start(Script::from_value(json!({"turns": [{"text": "done"}]})).unwrap());
    let out = s.run_cmd(&model).arg("hello").output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("remote")).collect();
    assert_eq!(
        warnings,
        ["agentloop: warning: MCP server `remote` needs login: agentloop mcp login remote"],
        "{}",
        output_text(&out)
    );

    // Login: URL printed, code received on the loopback listener, tokens stored 0600.
    let printed = login(&s);
    assert!(
        printed.contains("logged in to MCP server `remote`"),
        "{printed}"
    );
    let file = s.path("data/agentloop/mcp-tokens/remote.json");
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(
        stored.contains("access-1") && stored.contains(&base),
        "{stored}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "token file mode {mode:o}");
        let dir = std::fs::metadata(file.parent().unwrap()).unwrap();
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
    }
    assert!(
        !s.ws().join(".agentloop").exists(),
        "nothing written to the workspace"
    );
    {
        let st = state.lock().unwrap();
        assert_eq!(st.grants, ["authorization_code"]);
        assert_eq!(
            st.resources,
            [format!("{base}/mcp")],
            "the resource parameter"
        );
    }
    let listed = mcp_list(&s);
    assert!(listed.contains("remote: running,"), "{listed}");

    // The server declares the access token expired: the client refreshes and goes on.
    state.lock().unwrap().access.clear();
    let listed = mcp_list(&s);
    assert!(listed.contains("remote: running,"), "{listed}");
    assert_eq!(
        state.lock().unwrap().grants,
        ["authorization_code", "refresh_token"]
    );
    let stored = std::fs::read_to_string(&file).unwrap();
    assert!(
        stored.contains("access-2") && !stored.contains("access-1"),
        "{stored}"
    );

    // Revoked (access and refresh): needs login again, in the list and as the run's warning.
    {
        let mut st = state.lock().unwrap();
        st.access.clear();
        st.refresh.clear();
    }
    let listed = mcp_list(&s);
    assert!(
        listed.contains("remote: needs login: agentloop mcp login remote"),
        "{listed}"
    );
    let out = s.run_cmd(&model).arg("hello").output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("MCP server `remote` needs login: agentloop mcp login remote"),
        "{}",
        output_text(&out)
    );

    // Logout removes the tokens; a second logout has nothing to remove.
    let out = s.in_workspace(&["mcp", "logout", "remote"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_stdout_has(&out, "logged out");
    assert!(!file.exists());
    let out = s.in_workspace(&["mcp", "logout", "remote"]);
    assert_stdout_has(&out, "no tokens");
}

#[test]
fn login_names_an_unknown_or_stdio_server_in_one_line() {
    let s = Scratch::new();
    s.user_config("[mcp_servers.local]\ncommand = \"true\"\n");
    for (name, expected) in [
        ("nope", "no MCP server named `nope`"),
        ("local", "not a streamable-HTTP server"),
    ] {
        let out = s.in_workspace(&["mcp", "login", name, "--no-browser"]);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{}", output_text(&out));
        assert_eq!(stderr.trim().lines().count(), 1, "{}", output_text(&out));
    }
}

/// A run whose model reads `remote.txt` through the server (call `c1`), with `--json`; the
/// output, and the call's result (`is_error`, content).
fn run_reading_remotely(s: &Scratch) -> (Output, bool, String) {
    let model = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [
                {"id": "c1", "name": "mcp__remote__read_file", "arguments": {"path": "remote.txt"}}
            ]},
            {"text": "done"}
        ]}))
        .unwrap(),
    );
    let out = s
        .run_cmd(&model)
        .args(["--json", "read it"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    let ends: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "tool_execution_end" && e["call"]["id"] == "c1")
        .collect();
    assert_eq!(
        ends.len(),
        1,
        "one result for the call: {}",
        output_text(&out)
    );
    let result = &ends[0]["result"];
    let content = result["content"].as_str().unwrap_or_default().to_owned();
    (out, result["is_error"] == true, content)
}

/// The stderr lines of `out` naming the server.
fn remote_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("remote"))
        .map(str::to_owned)
        .collect()
}

/// Asserts that the run warned once about `remote`, with a line naming its login and `scope`.
fn assert_one_login_warning(out: &Output, scope: &str) {
    let warnings = remote_lines(out);
    assert_eq!(warnings.len(), 1, "{}", output_text(out));
    assert!(
        warnings[0].contains("needs login: agentloop mcp login remote")
            && warnings[0].contains(scope),
        "{}",
        output_text(out)
    );
}

#[test]
fn a_server_asking_for_more_scope_needs_a_login_that_asks_for_the_union() {
    let (s, _base, state) = setup();
    login(&s);
    assert_eq!(state.lock().unwrap().authorized, ["tools"]);
    let (_, is_error, content) = run_reading_remotely(&s);
    assert!(!is_error && content.contains("served file"), "{content}");

    // Mid-run: the call is refused for want of scope. One error result, the run goes on, one
    // warning naming the login and the scope.
    state.lock().unwrap().needed_for_calls = Some("files:write".into());
    let (out, is_error, content) = run_reading_remotely(&s);
    assert!(is_error, "{content}");
    assert!(
        content.contains("read_file") && content.contains("files:write"),
        "{content}"
    );
    assert_one_login_warning(&out, "more scope needed: tools files:write");
    // The scope asked for is remembered next to the tokens, still owner-only.
    let file = s.path("data/agentloop/mcp-tokens/remote.json");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(stored["requested_scopes"], json!(["tools", "files:write"]));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "token file mode {mode:o}");
    }

    // Another process connects fine (the token still opens the session) but knows the calls
    // were refused: the list says so and names the login, not merely "running".
    let listed = mcp_list(&s);
    assert!(
        listed.contains("remote: running,")
            && listed.contains(
                "calls were refused for want of scope: agentloop mcp login remote \
                 (more scope needed: tools files:write"
            ),
        "{listed}"
    );

    // At connect: every request wants the scope. The list and the run say "needs login".
    state.lock().unwrap().needed_always = Some("files:write".into());
    let listed = mcp_list(&s);
    assert!(
        listed.contains(
            "remote: needs login: agentloop mcp login remote (more scope needed: tools files:write"
        ),
        "{listed}"
    );
    let model =
        MockServer::start(Script::from_value(json!({"turns": [{"text": "done"}]})).unwrap());
    let out = s.run_cmd(&model).arg("hello").output().unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert_one_login_warning(&out, "files:write");

    // The login asks for the scopes granted before and the ones asked for, together.
    login(&s);
    assert_eq!(
        state.lock().unwrap().authorized.last().map(String::as_str),
        Some("tools files:write")
    );
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert!(stored.get("requested_scopes").is_none(), "{stored}");
    let listed = mcp_list(&s);
    assert!(
        listed.contains("remote: running,") && !listed.contains("want of scope"),
        "{listed}"
    );
    let (out, is_error, content) = run_reading_remotely(&s);
    assert!(!is_error && content.contains("served file"), "{content}");
    assert!(remote_lines(&out).is_empty(), "{}", output_text(&out));
}

/// Login with a confidential dynamically registered client presenting its secret by
/// `method`, whose secret expires at `expires_at`; then a refresh in another process.
fn confidential_client(method: &'static str, expires_at: u64) -> (Scratch, Shared) {
    let (s, _base, state) = setup();
    state.lock().unwrap().confidential = Some((method, expires_at));
    login(&s);
    let file = s.path("data/agentloop/mcp-tokens/remote.json");
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let client = &stored["registered_client"];
    assert_eq!(client["client_id"], CLIENT_ID, "{stored}");
    assert_eq!(client["client_secret"], CLIENT_SECRET, "{stored}");
    assert_eq!(client["token_endpoint_auth_method"], method, "{stored}");
    // The access token expires: `mcp list` (another process) refreshes as the same client.
    state.lock().unwrap().access.clear();
    let listed = mcp_list(&s);
    assert!(listed.contains("remote: running,"), "{listed}");
    let expected = match method {
        "client_secret_post" => format!("post {CLIENT_ID}:{CLIENT_SECRET}"),
        _ => format!("basic {CLIENT_ID}:{CLIENT_SECRET}"),
    };
    let st = state.lock().unwrap();
    assert_eq!(st.grants, ["authorization_code", "refresh_token"]);
    assert_eq!(st.client_auth, [expected.clone(), expected]);
    drop(st);
    (s, state)
}

#[test]
fn a_confidential_registered_client_keeps_its_secret_for_refresh_and_later_logins() {
    // Basic authentication, a secret that never expires: the second login reuses the
    // registration (the redirect listener's port differs; loopback ports may).
    let (s, state) = confidential_client("client_secret_basic", 0);
    login(&s);
    assert_eq!(state.lock().unwrap().registrations, 1);

    // Post authentication, a secret about to expire: the next login registers again.
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        + 5;
    let (s, state) = confidential_client("client_secret_post", soon);
    login(&s);
    assert_eq!(state.lock().unwrap().registrations, 2);
}

/// `mcp list` with the client-credentials config of `setup`'s server and `secret` (if any) in
/// the environment variable it names.
fn list_with_secret(s: &Scratch, secret: Option<&str>) -> Output {
    let mut cmd = mcp_list_command(s);
    match secret {
        Some(secret) => cmd.env("REMOTE_SECRET", secret),
        None => cmd.env_remove("REMOTE_SECRET"),
    };
    cmd.output().unwrap()
}

#[test]
fn client_credentials_from_the_config_need_no_login() {
    let (s, base, state) = setup();
    s.user_config(&format!(
        "[mcp_servers.remote]\nurl = \"{base}/mcp\"\noauth_grant = \"client_credentials\"\n\
             oauth_client_id = \"{CLIENT_ID}\"\noauth_client_secret_env = \"REMOTE_SECRET\"\n"
    ));

    // The secret's variable unset: one clear line naming it, nothing started.
    let out = list_with_secret(&s, None);
    assert!(!out.status.success(), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .contains("oauth_client_secret_env: the environment variable REMOTE_SECRET is not set"),
        "{}",
        output_text(&out)
    );
    assert!(state.lock().unwrap().grants.is_empty());

    // A wrong secret: the server is not running and says why; no login was attempted.
    let out = list_with_secret(&s, Some("wrong"));
    let listed = output_text(&out);
    assert!(!listed.contains("remote: running"), "{listed}");
    assert!(state.lock().unwrap().authorized.is_empty());

    // The right one: the token comes from the client-credentials grant, no login, no person.
    let out = list_with_secret(&s, Some(CLIENT_SECRET));
    assert!(out.status.success(), "{}", output_text(&out));
    assert_stdout_has(&out, "remote: running,");
    let st = state.lock().unwrap();
    assert_eq!(
        st.grants.last().map(String::as_str),
        Some("client_credentials")
    );
    assert!(
        st.authorized.is_empty(),
        "a person was asked: {:?}",
        st.authorized
    );
    assert!(
        st.client_auth
            .last()
            .unwrap()
            .ends_with(&format!("{CLIENT_ID}:{CLIENT_SECRET}"))
    );
    drop(st);

    // `mcp login` has nothing to do for such a server and says so.
    let out = s
        .cmd()
        .args(["mcp", "login", "remote", "--no-browser", "--workspace"])
        .arg(s.ws())
        .env("REMOTE_SECRET", CLIENT_SECRET)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    assert_stdout_has(&out, "uses the client-credentials grant");
}

#[test]
fn oauth_grant_keys_that_do_not_fit_together_are_refused_in_one_line() {
    let (s, base, _state) = setup();
    for (keys, expected) in [
        ("oauth_grant = \"password\"", "oauth_grant must be"),
        (
            "oauth_grant = \"client_credentials\"",
            "needs oauth_client_id",
        ),
        (
            "oauth_grant = \"client_credentials\"\noauth_client_id = \"x\"",
            "needs oauth_client_secret_env or oauth_private_key_file",
        ),
        (
            "oauth_grant = \"client_credentials\"\noauth_client_id = \"x\"\n\
             oauth_client_secret_env = \"REMOTE_SECRET\"\noauth_private_key_file = \"key.pem\"",
            "not both",
        ),
        (
            "oauth_grant = \"client_credentials\"\noauth_client_id = \"x\"\n\
             oauth_private_key_file = \"missing.pem\"",
            "cannot read oauth_private_key_file",
        ),
        (
            "oauth_client_id = \"x\"\noauth_private_key_file = \"key.pem\"",
            "need oauth_grant = \"client_credentials\"",
        ),
    ] {
        s.user_config(&format!(
            "[mcp_servers.remote]\nurl = \"{base}/mcp\"\n{keys}\n"
        ));
        let out = list_with_secret(&s, Some(CLIENT_SECRET));
        assert!(!out.status.success(), "{keys}: {}", output_text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(expected) && stderr.trim().lines().count() == 1,
            "{keys}: {}",
            output_text(&out)
        );
    }
}
