//! Session store benchmarks: the latency of one durable append (what the recorder adds to the
//! agent's task per completed message) under both durability settings, the recorder's handling
//! of a `ToolExecutionEnd`, and loading a 10,000-message session.
//!
//! The database lives in the system temp directory (on disk, not tmpfs, for `PowerLoss` to mean
//! anything — check `df $TMPDIR`).
//!
//! Run: `cargo bench -p agentloop --bench sessions -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use agentloop::agent::AgentEvent;
use agentloop::session::{
    Durability, NewSession, SessionRecorder, SessionStore, SqliteOptions, SqliteStore,
};
mod common;

use agentloop::transcript::ToolCallPart;
use common::{TempDir, assistant, conversation, tool_result};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;

fn open(dir: &TempDir, durability: Durability) -> SqliteStore {
    SqliteStore::open_with(
        dir.path().join("sessions.db"),
        SqliteOptions::default().durability(durability),
    )
    .unwrap()
}

fn bench_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("session_append");
    for (name, durability) in [
        ("process_crash_normal", Durability::ProcessCrash),
        ("power_loss_full", Durability::PowerLoss),
    ] {
        let dir = TempDir::new(&format!("sessions-{name}"));
        let store = open(&dir, durability);
        let session = store.create(NewSession::new()).unwrap();
        let message = assistant(1);
        group.bench_function(name, |b| {
            b.iter(|| store.append(&session.id, &message).unwrap())
        });
    }
    group.finish();
}

fn bench_recorder(c: &mut Criterion) {
    let dir = TempDir::new("sessions-recorder");
    let store = Arc::new(open(&dir, Durability::ProcessCrash));
    let session = store.create(NewSession::new()).unwrap();
    let recorder = SessionRecorder::new(store.clone(), &session.id);
    let result = tool_result(1);
    let call = ToolCallPart::new("call-1", "read_file", json!({"path": "a"}));
    c.bench_function("session_recorder_tool_execution_end", |b| {
        b.iter_batched(
            || AgentEvent::ToolExecutionEnd {
                call: call.clone(),
                result: result.clone(),
                blocked: false,
            },
            |event| recorder.on_event(&event),
            BatchSize::SmallInput,
        )
    });
    assert_eq!(recorder.failures(), 0);
}

fn bench_load(c: &mut Criterion) {
    const MESSAGES: usize = 10_000;
    let dir = TempDir::new("sessions-load");
    let store = open(&dir, Durability::ProcessCrash);
    let messages = conversation(MESSAGES);
    let session = store.create_with(NewSession::new(), &messages).unwrap();
    assert_eq!(store.load(&session.id).unwrap().len(), MESSAGES);

    let mut group = c.benchmark_group("session_load_10k");
    group.sample_size(20);
    group.bench_function("load", |b| b.iter(|| store.load(&session.id).unwrap()));
    group.bench_function("load_raw", |b| {
        b.iter(|| store.load_raw(&session.id).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_append, bench_recorder, bench_load);
criterion_main!(benches);
