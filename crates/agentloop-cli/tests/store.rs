//! `--store` and `agentloop sessions follow`, run for real: a SQLite file given as a path, a
//! PostgreSQL database given as a URL (when `AGENTLOOP_TEST_POSTGRES_URL` is set; otherwise one
//! `SKIPPED suite` line), and a follower printing what another writer appends while it runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use agentloop::session::{NewSession, SessionStore, SqliteStore};
use agentloop::transcript::Message;
use serde_json::Value;

mod support;

use support::{Scratch, assert_ok, stdout_lines};

/// The binary with a clean environment and `--store SPEC`.
fn agentloop(scratch: &Scratch, spec: &str) -> Command {
    let mut cmd = scratch.env_cmd();
    cmd.arg("--store").arg(spec).stdin(Stdio::null());
    cmd
}

fn next_json(rx: &mpsc::Receiver<String>) -> Value {
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a line from `sessions follow`");
    serde_json::from_str(&line).unwrap()
}

/// Checks `sessions follow --json --until-done` on the store `spec`, which `store` also opens:
/// the stored message first, then each append while we hold the writer lock, then the exit
/// once we let go of it.
fn follow_until_done(store: Arc<dyn SessionStore>, spec: &str, scratch: &Scratch) {
    let session = store
        .create_with(NewSession::new(), &[Message::user("first")])
        .unwrap();
    let lock = store.lock_session(&session.id, Duration::ZERO).unwrap();
    let prefix = &session.id[..8];
    let mut child = agentloop(scratch, spec)
        .args(["sessions", "follow", prefix, "--json", "--until-done"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = stdout_lines(&mut child);
    let first = next_json(&rx);
    assert_eq!(first["seq"], 1);
    assert_eq!(first["message"]["content"][0]["text"], "first");
    for i in 0..3 {
        let appended = Instant::now();
        store
            .append(&session.id, &Message::user(format!("live {i}")))
            .unwrap();
        let line = next_json(&rx);
        assert_eq!(line["seq"], 2 + i);
        assert_eq!(line["message"]["content"][0]["text"], format!("live {i}"));
        eprintln!(
            "follow via the CLI: {:?} from append to line",
            appended.elapsed()
        );
    }
    drop(lock);
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "follow did not stop after the writer let go"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
}

#[test]
fn follow_prints_what_a_sqlite_writer_appends_until_it_lets_go() {
    let dir = Scratch::new();
    let db = dir.path("s.db");
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).unwrap());
    follow_until_done(store, &db.display().to_string(), &dir);
}

#[test]
fn follow_in_text_stops_after_the_idle_time_and_a_bad_store_is_one_line() {
    let dir = Scratch::new();
    let db = dir.path("s.db");
    let store = SqliteStore::open(&db).unwrap();
    let session = store
        .create_with(NewSession::new(), &[Message::user("hello \u{1b}[31mthere")])
        .unwrap();
    let out = agentloop(&dir, &db.display().to_string())
        .args(["sessions", "follow", &session.id, "--until-idle", "0.3"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("> hello"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "control characters are made visible: {text}"
    );

    let out = agentloop(&dir, "postgres://me:Secret-77@127.0.0.1:1/none")
        .args(["sessions", "list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("me:***@127.0.0.1:1"), "{err}");
    assert!(!err.contains("Secret-77"), "{err}");
}

#[test]
fn help_never_shows_the_store_url() {
    let dir = Scratch::new();
    // `--store` is described once, in the top-level help; no help shows the value.
    for args in [
        &["--help"][..],
        &["sessions", "list", "--help"],
        &["run", "-h"],
    ] {
        let out = agentloop(&dir, "x.db")
            .env("AGENTLOOP_STORE", "postgres://me:Secret-78@db/app")
            .args(args)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(!text.contains("Secret-78"), "{text}");
        if args == ["--help"] {
            assert!(text.contains("AGENTLOOP_STORE"), "{text}");
        }
    }
}

#[test]
fn a_postgres_url_is_a_store_for_every_command() {
    let Some(url) = std::env::var("AGENTLOOP_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())
    else {
        agentloop_testkit::external::skip_suite(
            "agentloop CLI on PostgreSQL",
            "AGENTLOOP_TEST_POSTGRES_URL is not set",
            "run .ci/setup-postgres and export the URL it prints",
        );
        return;
    };
    // A schema of its own, created by the library and named in the URL's `options`.
    let schema = format!("cli_{}", std::process::id());
    let store = agentloop::session::PostgresStore::open_with(
        &url,
        agentloop::session::PostgresOptions::default().schema(&schema),
    )
    .unwrap();
    let cleanup = DropSchema(url.clone(), schema.clone());
    let spec = format!("{url}?options=-c%20search_path%3D{schema}");
    let dir = Scratch::new();

    let out = agentloop(&dir, &spec)
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(out.stdout.is_empty());
    let store: Arc<dyn SessionStore> = Arc::new(store);
    follow_until_done(store.clone(), &spec, &dir);
    let out = agentloop(&dir, &spec)
        .args(["sessions", "list", "--json"])
        .output()
        .unwrap();
    let listed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed["message_count"], 4);
    let id = listed["id"].as_str().unwrap().to_owned();
    let out = agentloop(&dir, &spec)
        .args(["sessions", "rm", &id])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(store.list().unwrap().is_empty());
    drop(cleanup);
}

/// Drops a schema when dropped.
struct DropSchema(String, String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        let (url, schema) = (self.0.clone(), self.1.clone());
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap();
                let driver = tokio::spawn(connection);
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
                    .await;
                drop(client);
                let _ = driver.await;
            });
        })
        .join();
    }
}
