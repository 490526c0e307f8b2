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

use std::sync::Arc;

use agentloop::session::{
    Durability, NewSession, PostgresOptions, PostgresStore, SessionStore, SqliteOptions,
    SqliteStore,
};
mod common;

use common::{TempDir, assistant, conversation};
use criterion::{Criterion, criterion_group, criterion_main};

/// The stores to compare: name, store.
fn stores(dir: &TempDir, schema: Option<(&str, &str)>) -> Vec<(String, Arc<dyn SessionStore>)> {
    let mut out: Vec<(String, Arc<dyn SessionStore>)> = Vec::new();
    for (name, durability) in [
        ("sqlite_normal", Durability::ProcessCrash),
        ("sqlite_full", Durability::PowerLoss),
    ] {
        let store = SqliteStore::open_with(
            dir.path().join(format!("{name}.db")),
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
    let dir = TempDir::new("session-stores");
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

    let messages = conversation(1000);
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
