//! A small web service that runs agents, parks them when a tool call needs a person's approval,
//! and resumes them when the decision comes in — how a web app uses durable approval.
//!
//! - `POST /runs` with a prompt as the body: runs an agent (against the testkit mock model) until
//!   it finishes or parks; answers `{"session_id", "stop"}`.
//! - `GET /approvals`: every pending call of every session, with its full arguments.
//! - `POST /approvals/{call_id}` with `{"approve": true}` or `{"deny": "reason"}`: records the
//!   decision; when no call of that session is left undecided, resumes the run and answers with
//!   how it ended.
//!
//! State lives in the session store (SQLite), not in the process: a restarted service (or
//! another one on the same database) can decide and resume what this one parked.
//!
//! `cargo run -p agentloop --example approval_service` serves until Ctrl-C; with `--demo` it
//! drives itself once over HTTP and exits. `cargo test -p agentloop --example approval_service`
//! runs the same drive as a test.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentloop::agent::{AgentLoop, AgentLoopConfig, PendingStatus, RunOutcome};
use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop::session::{NewSession, SessionRecorder, SessionStore, SqliteStore, load_parked};
use agentloop::tooling::{Approval, Deps, ToolContext, ToolSpec};
use agentloop::transcript::Message;
use agentloop_testkit::{MockServer, Script};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

/// What the handlers share.
#[derive(Clone)]
struct App {
    store: Arc<SqliteStore>,
    model_url: String,
    /// How many emails were really sent (to show nothing runs twice).
    sent: Arc<AtomicUsize>,
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

impl App {
    /// An agent recording into `session`: `send_email` is deferred to a person, the rest runs.
    fn agent(&self, session: &str) -> Result<AgentLoop, String> {
        let sent = self.sent.clone();
        let send = ToolSpec::<Deps>::builder("send_email", "Send an email.")
            .handler(move |ctx: ToolContext<Deps>, args: Value| {
                let sent = sent.clone();
                async move {
                    // A real tool passes the key to the mail API so a retry cannot send twice.
                    sent.fetch_add(1, Ordering::SeqCst);
                    format!("sent to {} (key {})", args["to"], ctx.idempotency_key())
                }
            })
            .build()
            .map_err(|e| e.to_string())?;
        let deps = Deps::with_approval(|call| match call.tool_name.as_str() {
            "send_email" => Approval::defer("emails leave the building: a person must approve"),
            _ => Approval::Allow,
        });
        let model = OpenAiChat::new(
            ProviderConfig::new(self.model_url.clone())
                .api_key("mock")
                .model("mock")
                .retry(RetryPolicy::none()),
        );
        let recorder = SessionRecorder::new(self.store.clone(), session);
        Ok(
            AgentLoop::with_deps(AgentLoopConfig::default(), model, Arc::new(deps))
                .with_tools([send])
                .map_err(|e| e.to_string())?
                .with_session_label(session)
                .with_emit(recorder.emit_fn()),
        )
    }
}

fn ended(session: &str, outcome: Result<RunOutcome, impl std::fmt::Display>) -> Response {
    match outcome {
        Ok(o) => json_response(
            StatusCode::OK,
            json!({"session_id": session, "stop": o.stop, "text": o.final_text()}),
        ),
        Err(e) => json_response(
            StatusCode::BAD_GATEWAY,
            json!({"session_id": session, "error": e.to_string()}),
        ),
    }
}

async fn start_run(State(app): State<App>, prompt: String) -> Response {
    let session = match app.store.create(NewSession::new()) {
        Ok(s) => s.id,
        Err(e) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"error": e.to_string()}),
            );
        }
    };
    let agent = match app.agent(&session) {
        Ok(a) => a,
        Err(e) => return json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": e})),
    };
    ended(
        &session,
        agent.run(vec![Message::user(prompt)], vec![]).await,
    )
}

async fn list_approvals(State(app): State<App>) -> Response {
    match app.store.awaiting_approval() {
        Ok(all) => {
            let items: Vec<Value> = all
                .into_iter()
                .flat_map(|(session, pending)| {
                    pending
                        .into_iter()
                        .map(move |p| json!({"session_id": session, "approval": p}))
                })
                .collect();
            json_response(StatusCode::OK, Value::Array(items))
        }
        Err(e) => json_response(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"error": e.to_string()}),
        ),
    }
}

async fn decide(State(app): State<App>, Path(call_id): Path<String>, body: String) -> Response {
    let decision: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    let status = match (&decision["approve"], &decision["deny"]) {
        (Value::Bool(true), _) => PendingStatus::Approved,
        (_, Value::String(reason)) => PendingStatus::Denied {
            reason: reason.clone(),
        },
        _ => {
            return json_response(
                StatusCode::BAD_REQUEST,
                json!({"error": "send {\"approve\": true} or {\"deny\": \"reason\"}"}),
            );
        }
    };
    let session = match app.store.awaiting_approval() {
        Ok(all) => all
            .into_iter()
            .find(|(_, pending)| pending.iter().any(|p| p.call_id == call_id))
            .map(|(s, _)| s),
        Err(e) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"error": e.to_string()}),
            );
        }
    };
    let Some(session) = session else {
        return json_response(
            StatusCode::NOT_FOUND,
            json!({"error": "no such pending call"}),
        );
    };
    if let Err(e) = app.store.decide(&session, &call_id, &status) {
        return json_response(StatusCode::CONFLICT, json!({"error": e.to_string()}));
    }
    let (context, parked) = match load_parked(&*app.store, &session) {
        Ok((c, Some(p))) => (c, p),
        Ok((_, None)) => return json_response(StatusCode::OK, json!({"session_id": session})),
        Err(e) => {
            return json_response(
                StatusCode::INTERNAL_SERVER_ERROR,
                json!({"error": e.to_string()}),
            );
        }
    };
    if parked.undecided().next().is_some() {
        return json_response(
            StatusCode::ACCEPTED,
            json!({"session_id": session, "waiting_for": parked.undecided().map(|p| p.call_id.clone()).collect::<Vec<_>>()}),
        );
    }
    let agent = match app.agent(&session) {
        Ok(a) => a,
        Err(e) => return json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"error": e})),
    };
    ended(&session, agent.resume_parked(context, parked).await)
}

fn router(app: App) -> Router {
    Router::new()
        .route("/runs", post(start_run))
        .route("/approvals", get(list_approvals))
        .route("/approvals/{call_id}", post(decide))
        .with_state(app)
}

/// The mock model: asks to send an email, then confirms.
fn mock_model() -> MockServer {
    let script = Script::from_value(json!({"turns": [
        {"text": "I'll send it.", "tool_calls": [{"id": "call_email", "name": "send_email",
            "arguments": {"to": "ops@example.com", "body": "The deploy is done."}}]},
        {"text": "The email was sent."}
    ], "mode": "sequential"}));
    match script {
        Ok(script) => MockServer::start(script),
        Err(e) => panic!("the example's script is invalid: {e}"),
    }
}

/// Serves on a free local port; returns the address and the app (for its counters).
async fn serve(model: &MockServer) -> std::io::Result<(SocketAddr, App)> {
    let app = App {
        store: Arc::new(SqliteStore::open_in_memory().map_err(std::io::Error::other)?),
        model_url: model.openai_base_url(),
        sent: Arc::new(AtomicUsize::new(0)),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let service = router(app.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, service).await {
            eprintln!("the service stopped: {e}");
        }
    });
    Ok((addr, app))
}

/// One round trip over HTTP: start a run, see it parked, approve, see it finish.
async fn drive(addr: SocketAddr) -> Result<Vec<Value>, Box<dyn std::error::Error>> {
    let http = reqwest::Client::new();
    let base = format!("http://{addr}");
    let mut seen = Vec::new();
    let run: Value = serde_json::from_str(
        &http
            .post(format!("{base}/runs"))
            .body("Tell ops the deploy is done")
            .send()
            .await?
            .text()
            .await?,
    )?;
    seen.push(run);
    let pending: Value = serde_json::from_str(
        &http
            .get(format!("{base}/approvals"))
            .send()
            .await?
            .text()
            .await?,
    )?;
    seen.push(pending.clone());
    let call_id = pending[0]["approval"]["call_id"]
        .as_str()
        .ok_or("nothing pending")?
        .to_owned();
    let done: Value = serde_json::from_str(
        &http
            .post(format!("{base}/approvals/{call_id}"))
            .body(r#"{"approve": true}"#)
            .send()
            .await?
            .text()
            .await?,
    )?;
    seen.push(done);
    Ok(seen)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let model = mock_model();
    let (addr, _app) = serve(&model).await?;
    if std::env::args().any(|a| a == "--demo") {
        for step in drive(addr).await? {
            println!("{step}");
        }
        return Ok(());
    }
    println!(
        "approval service on http://{addr} (POST /runs, GET /approvals, POST /approvals/{{call_id}})"
    );
    tokio::signal::ctrl_c().await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_service_parks_lists_approves_and_resumes() {
        let model = mock_model();
        let (addr, app) = serve(&model).await.unwrap();
        let steps = drive(addr).await.unwrap();
        assert_eq!(steps[0]["stop"]["reason"], "awaiting_approval", "{steps:?}");
        assert_eq!(steps[1].as_array().unwrap().len(), 1);
        assert_eq!(
            steps[1][0]["approval"]["arguments"]["to"],
            "ops@example.com"
        );
        assert_eq!(steps[2]["stop"]["reason"], "done", "{steps:?}");
        assert_eq!(steps[2]["text"], "The email was sent.");
        assert_eq!(app.sent.load(Ordering::SeqCst), 1);
        assert!(model.violations().is_empty(), "{:?}", model.violations());
        // Nothing is left pending.
        assert_eq!(app.store.awaiting_approval().unwrap().len(), 0);
    }
}
