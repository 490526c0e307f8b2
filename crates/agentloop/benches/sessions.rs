//! Session store benchmarks: the latency of one durable append (what the recorder adds to the
//! agent's task per completed message) under both durability settings, the recorder's handling
//! of a `ToolExecutionEnd`, and loading a 10,000-message session.
//!
//! The database lives in the system temp directory (on disk, not tmpfs, for `PowerLoss` to mean
//! anything — check `df $TMPDIR`).
//!
//! Run: `cargo bench -p agentloop --bench sessions -- --warm-up-time 1 --measurement-time 3`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::PathBuf;
use std::sync::Arc;

use agentloop::agent::AgentEvent;
use agentloop::session::{
    Durability, NewSession, SessionRecorder, SessionStore, SqliteOptions, SqliteStore,
};
use agentloop::transcript::{Message, Part, StopReason, ToolCallPart, ToolResultPart, Usage};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use serde_json::json;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "agentloop-bench-sessions-{tag}-{}",
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

/// A typical assistant turn: some text and one tool call (~600 bytes of JSON).
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

/// A tool result of ~1.5 KB.
fn tool_result(i: usize) -> ToolResultPart {
    ToolResultPart::success(
        format!("call-{i}"),
        "read_file",
        format!("fn f{i}() {{}}\n").repeat(100),
    )
}

fn open(dir: &TempDir, durability: Durability) -> SqliteStore {
    SqliteStore::open_with(
        dir.0.join("sessions.db"),
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
        let dir = TempDir::new(name);
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
    let dir = TempDir::new("recorder");
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
    let dir = TempDir::new("load");
    let store = open(&dir, Durability::ProcessCrash);
    let mut messages = Vec::with_capacity(MESSAGES);
    let mut i = 0;
    while messages.len() < MESSAGES {
        match i % 3 {
            0 => messages.push(Message::user(format!("Please continue with step {i}."))),
            1 => messages.push(assistant(i)),
            _ => messages.push(Message::tool_result(tool_result(i - 1))),
        }
        i += 1;
    }
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
