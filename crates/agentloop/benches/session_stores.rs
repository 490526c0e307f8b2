//! SQLite against PostgreSQL: the latency of one durable append (what the recorder adds to the
//! agent's task per completed message) and of loading a 1,000-message session, on each store.
//!
//! The PostgreSQL half runs when `AGENTLOOP_TEST_POSTGRES_URL` is set (`.ci/setup-postgres`
//! starts a local server and prints it), in a schema of its own that is dropped at the end;
//! without it only SQLite is measured. The SQLite file lives in the system temp directory.
//!
//! Run (from the repository root):
//! `AGENTLOOP_TEST_POSTGRES_URL=… cargo bench -p agentloop --bench session_stores -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;

use agentloop::session::{
    Durability, NewSession, PostgresOptions, PostgresStore, SessionStore, SqliteOptions,
    SqliteStore,
};
use agentloop::transcript::{Message, Part, StopReason, ToolCallPart, ToolResultPart, Usage};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "agentloop-bench-session-stores-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A typical assistant turn: some text and one tool call (~600 bytes of JSON), as in the
/// `sessions` benchmark.
fn assistant(i: usize) -> Message {
    let mut m = Message::assistant(
        vec![
            Part::text(format!(
                "Step {i}: I will read the file and then summarise what it says. {}",
                "Lorem ipsum dolor sit amet. ".repeat(12)
            )),
            Part::ToolCall(ToolCallPart::new(
                format!("call-{i}"),
                "read_file",
                json!({"path": format!("src/module_{i}.rs"), "offset": 0, "limit": 200}),
            )),
        ],
        StopReason::ToolUse,
    );
    m.model = Some("gpt-bench".into());
    m.provider = Some("openai_chat".into());
    m.usage = Some(Usage {
        input_tokens: 12_000 + i as u64,
        output_tokens: 180,
        cache_read_tokens: 11_000,
        cache_write_tokens: 0,
        cost_usd: Some(0.0123),
    });
    m
}

/// A 1,000-message conversation: prompts, assistant turns and ~1.5 KB tool results.
fn conversation() -> Vec<Message> {
    let mut messages = Vec::with_capacity(1000);
    let mut i = 0;
    while messages.len() < 1000 {
        match i % 3 {
            0 => messages.push(Message::user(format!("Please continue with step {i}."))),
            1 => messages.push(assistant(i)),
            _ => messages.push(Message::tool_result(ToolResultPart::success(
                format!("call-{}", i - 1),
                "read_file",
                format!("fn f{i}() {{}}\n").repeat(100),
            ))),
        }
        i += 1;
    }
    messages
}

/// The stores to compare: name, store.
fn stores(dir: &TempDir, schema: Option<(&str, &str)>) -> Vec<(String, Arc<dyn SessionStore>)> {
    let mut out: Vec<(String, Arc<dyn SessionStore>)> = Vec::new();
    for (name, durability) in [
        ("sqlite_normal", Durability::ProcessCrash),
        ("sqlite_full", Durability::PowerLoss),
    ] {
        let store = SqliteStore::open_with(
            dir.0.join(format!("{name}.db")),
            SqliteOptions::default().durability(durability),
        )
        .unwrap();
        out.push((name.into(), Arc::new(store)));
    }
    if let Some((url, schema)) = schema {
        for (name, durability) in [
            ("postgres_sync_commit", Durability::PowerLoss),
            ("postgres_async_commit", Durability::ProcessCrash),
        ] {
            let store = PostgresStore::open_with(
                url,
                PostgresOptions::default()
                    .schema(schema)
                    .durability(durability),
            )
            .unwrap();
            out.push((name.into(), Arc::new(store)));
        }
    }
    out
}

fn drop_schema(url: &str, schema: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        let driver = tokio::spawn(connection);
        client
            .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .await
            .unwrap();
        drop(client);
        let _ = driver.await;
    });
}

fn bench(c: &mut Criterion) {
    let url = std::env::var("AGENTLOOP_TEST_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty());
    if url.is_none() {
        eprintln!("AGENTLOOP_TEST_POSTGRES_URL is not set: measuring SQLite only");
    }
    let schema = format!("bench_{}", std::process::id());
    let dir = TempDir::new();
    let stores = stores(&dir, url.as_deref().map(|u| (u, schema.as_str())));

    let message = assistant(1);
    let mut group = c.benchmark_group("store_append");
    for (name, store) in &stores {
        let session = store.create(NewSession::new()).unwrap();
        group.bench_function(name.as_str(), |b| {
            b.iter(|| store.append(&session.id, &message).unwrap())
        });
    }
    group.finish();

    let messages = conversation();
    let mut group = c.benchmark_group("store_load_1k");
    group.sample_size(20);
    for (name, store) in &stores {
        let session = store.create_with(NewSession::new(), &messages).unwrap();
        assert_eq!(store.load(&session.id).unwrap().len(), messages.len());
        group.bench_function(name.as_str(), |b| {
            b.iter(|| store.load(&session.id).unwrap())
        });
    }
    group.finish();

    drop(stores);
    if let Some(url) = &url {
        drop_schema(url, &schema);
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
