//! A real Restate server, real `agentloop-worker` processes and the testkit's mock model, all on
//! loopback ports, for the durable-run tests. Processes are killed when their handles drop.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod balancer;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// Where `.ci/setup-restate` installs the pinned server, or `AGENTLOOP_RESTATE_SERVER`.
pub fn restate_server_binary() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("AGENTLOOP_RESTATE_SERVER") {
        return Some(PathBuf::from(path)).filter(|p| p.exists());
    }
    let cache = agentloop_testkit::external::ci_cache_dir()?;
    // The platform package's native binary first: `.bin/restate-server` is a Node shim that
    // starts it as a child, and killing the shim (how a test stops its server) would leave the
    // real server running.
    let packages = cache.join("restate/node_modules/@restatedev");
    let native = std::fs::read_dir(&packages).ok().and_then(|entries| {
        entries
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with("restate-server-")
            })
            .map(|e| e.path().join("bin/restate-server"))
            .find(|p| p.exists())
    });
    native.or_else(|| {
        let shim = cache.join("restate/node_modules/.bin/restate-server");
        shim.exists().then_some(shim)
    })
}

/// The server binary, or `None` after reporting the skipped suite.
pub fn server_or_skip() -> Option<PathBuf> {
    let found = restate_server_binary();
    if found.is_none() {
        agentloop_testkit::external::skip_suite(
            "agentloop-restate against a Restate server",
            "restate-server 1.7.12 not found",
            "run .ci/setup-restate (npm @restatedev/restate-server@1.7.12) or set \
             AGENTLOOP_RESTATE_SERVER",
        );
    }
    found
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A child process killed (SIGKILL) on drop.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub async fn wait_until(what: &str, timeout: Duration, mut ready: impl AsyncFnMut() -> bool) {
    let start = Instant::now();
    while !ready().await {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A Restate server on free loopback ports with its own data directory.
pub struct Restate {
    pub proc: Proc,
    pub ingress: String,
    pub admin: String,
    pub http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Restate {
    pub async fn start(binary: &Path) -> Restate {
        let dir = tempfile::tempdir().unwrap();
        let (ingress, admin, fabric) = (free_port(), free_port(), free_port());
        let log = std::fs::File::create(dir.path().join("server.log")).unwrap();
        let child = Command::new(binary)
            .arg("--base-dir")
            .arg(dir.path().join("data"))
            .args(["--no-logo", "--default-num-partitions", "2"])
            .env("DO_NOT_TRACK", "1")
            .env("RESTATE_LISTEN_MODE", "tcp")
            .env(
                "RESTATE_INGRESS__BIND_ADDRESS",
                format!("127.0.0.1:{ingress}"),
            )
            .env("RESTATE_ADMIN__BIND_ADDRESS", format!("127.0.0.1:{admin}"))
            .env("RESTATE_BIND_ADDRESS", format!("127.0.0.1:{fabric}"))
            .env(
                "RESTATE_ADVERTISED_ADDRESS",
                format!("http://127.0.0.1:{fabric}"),
            )
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start restate-server");
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(180))
            .build()
            .unwrap();
        let restate = Restate {
            proc: Proc {
                child,
                name: "restate-server".into(),
            },
            ingress: format!("http://127.0.0.1:{ingress}"),
            admin: format!("http://127.0.0.1:{admin}"),
            http,
            _dir: dir,
        };
        let (http, admin_url, ingress_url) = (
            restate.http.clone(),
            restate.admin.clone(),
            restate.ingress.clone(),
        );
        wait_until("the Restate server", Duration::from_secs(90), async || {
            let admin_ok = http
                .get(format!("{admin_url}/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            let ingress_ok = http
                .get(format!("{ingress_url}/restate/health"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            admin_ok && ingress_ok
        })
        .await;
        restate
    }

    /// Registers (or re-registers) the deployment at `uri`.
    pub async fn register(&self, uri: &str) {
        let mut last = String::new();
        for _ in 0..50 {
            match self
                .http
                .post(format!("{}/deployments", self.admin))
                .json(&json!({"uri": uri, "force": true}))
                .send()
                .await
            {
                Ok(r) if r.status().is_success() => return,
                Ok(r) => last = format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        panic!("could not register {uri}: {last}");
    }

    /// Calls a handler through the ingress and returns its JSON output (or the error text).
    pub async fn call(&self, path: &str, body: Value) -> Result<Value, String> {
        let request = self.http.post(format!("{}/{path}", self.ingress));
        // Handlers without input take no body at all.
        let request = if body.is_null() {
            request
        } else {
            request.json(&body)
        };
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let text = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{status}: {text}"));
        }
        if text.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))
    }

    /// Starts `AgentSession/{session}/run` with `prompt` on a task of its own (for runs the
    /// caller interferes with, or sends many of at once); the task yields the run's output.
    pub fn spawn_run(&self, session: &str, prompt: &str) -> tokio::task::JoinHandle<Value> {
        let request = self
            .http
            .post(format!("{}/AgentSession/{session}/run", self.ingress))
            .json(&json!({ "prompt": prompt }));
        tokio::spawn(async move { request.send().await.unwrap().json::<Value>().await.unwrap() })
    }

    /// Runs a query on the server's SQL introspection tables (`sys_invocation`, `sys_journal`,
    /// …) and returns its rows.
    pub async fn query(&self, sql: &str) -> Vec<Value> {
        let response = self
            .http
            .post(format!("{}/query", self.admin))
            .header("accept", "application/json")
            .json(&json!({ "query": sql }))
            .send()
            .await
            .unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "query {sql:?}: {status} {text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        value["rows"].as_array().cloned().unwrap_or_default()
    }

    /// Sends a handler call without waiting; returns the invocation id.
    pub async fn send(&self, path: &str, body: Value) -> String {
        let v = self
            .call(&format!("{path}/send"), body)
            .await
            .expect("send");
        v["invocationId"]
            .as_str()
            .expect("invocation id")
            .to_owned()
    }

    /// Waits for an invocation's output.
    pub async fn output(&self, invocation_id: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(format!(
                "{}/restate/invocation/{invocation_id}/attach",
                self.ingress
            ))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let text = response.text().await.map_err(|e| e.to_string())?;
        if !status.is_success() {
            return Err(format!("{status}: {text}"));
        }
        serde_json::from_str(&text).map_err(|e| format!("{e}: {text}"))
    }

    /// Cancels an invocation through the admin API.
    pub async fn cancel(&self, invocation_id: &str) {
        let patch = self
            .http
            .patch(format!("{}/invocations/{invocation_id}/cancel", self.admin))
            .send()
            .await;
        if patch.as_ref().is_ok_and(|r| r.status().is_success()) {
            return;
        }
        let delete = self
            .http
            .delete(format!(
                "{}/invocations/{invocation_id}?mode=cancel",
                self.admin
            ))
            .send()
            .await
            .unwrap();
        assert!(
            delete.status().is_success(),
            "cancel failed: {} {}",
            delete.status(),
            delete.text().await.unwrap_or_default()
        );
    }
}

/// One `agentloop-worker` process.
pub struct WorkerProc {
    pub proc: Proc,
    pub addr: SocketAddr,
}

/// How workers are started in a test.
#[derive(Clone)]
pub struct WorkerSpec {
    pub model_base: String,
    pub workspace: PathBuf,
    /// The worker's `--store` (none: the worker mirrors nothing).
    pub store: Option<PathBuf>,
    pub approve: &'static str,
    pub log_dir: PathBuf,
}

impl WorkerSpec {
    pub async fn start(&self, port: u16, tag: &str) -> WorkerProc {
        self.start_with(port, tag, &[]).await
    }

    /// Starts a worker with `extra` flags after the usual ones.
    pub async fn start_with(&self, port: u16, tag: &str, extra: &[&str]) -> WorkerProc {
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_dir.join(format!("worker-{tag}.log")))
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_agentloop-worker"))
            .arg("--listen")
            .arg(addr.to_string())
            .args(["--model", "openai:mock-model", "--base-url"])
            .arg(&self.model_base)
            .arg("--workspace")
            .arg(&self.workspace)
            .args(
                self.store
                    .iter()
                    .flat_map(|store| [std::ffi::OsStr::new("--store"), store.as_os_str()]),
            )
            .args(["--approve", self.approve])
            .args(extra)
            .env_remove("OPENAI_API_KEY")
            // AGENTLOOP_WORKER_LOG overrides the workers' log filter (e.g. `restate_sdk=debug`).
            .env(
                "RUST_LOG",
                std::env::var("AGENTLOOP_WORKER_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .stdout(Stdio::from(log.try_clone().unwrap()))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("start agentloop-worker");
        let worker = WorkerProc {
            proc: Proc {
                child,
                name: format!("worker-{tag}"),
            },
            addr,
        };
        wait_until("the worker", Duration::from_secs(30), async || {
            tokio::net::TcpStream::connect(addr).await.is_ok()
        })
        .await;
        worker
    }
}

/// Polls `ready` until it holds.
pub async fn eventually(what: &str, timeout: Duration, ready: impl Fn() -> bool) {
    wait_until(what, timeout, async || ready()).await;
}
