//! Checkpoint cost in a 20,000-file workspace (200 directories of 100 files of ~200 bytes):
//! one snapshot when nothing changed, and one after 10 files changed (reading and hashing 10
//! files, 10 new blobs). A mutating tool call takes two such snapshots (before and after it).
//! After the run's first snapshot the tree is watched (inotify on Linux), so these snapshots
//! look only at what changed; `no_change_walked` is the same snapshot with watching off (a
//! watch cap of 0), the cost of the full stat walk that the first and the last snapshot of a
//! run, and every snapshot where change notification is unavailable, pay.
//!
//! The workspace and the store live in the system temp directory (check `df $TMPDIR`: tmpfs
//! and disk differ).
//!
//! Run: `cargo bench -p agentloop --bench checkpoints -- --warm-up-time 2 --measurement-time 5`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, SystemTime};

use agentloop::checkpoint::{CheckpointOptions, CheckpointStore, Recorder};
mod common;

use common::TempDir;
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const DIRS: usize = 200;
const FILES_PER_DIR: usize = 100;

/// 20,000 files with mtimes an hour ago (outside the stat cache's racy window, as files of a
/// real checkout are).
fn workspace(root: &std::path::Path) {
    let old = SystemTime::now() - Duration::from_secs(3600);
    for d in 0..DIRS {
        let dir = root.join(format!("dir{d:03}"));
        std::fs::create_dir_all(&dir).unwrap();
        for f in 0..FILES_PER_DIR {
            let path = dir.join(format!("file{f:03}.rs"));
            let body = format!("// file {d}/{f}\n{}\n", "fn body() {}\n".repeat(14));
            std::fs::write(&path, body).unwrap();
            let file = std::fs::File::options().write(true).open(&path).unwrap();
            file.set_modified(old).unwrap();
        }
    }
}

/// A recorder that has taken its first snapshot (the whole tree walked, and watched when
/// `options` allow).
fn recorder(store: &CheckpointStore, ws: &TempDir, options: CheckpointOptions) -> Recorder {
    let recorder = store.recorder(ws.path(), "bench", options).unwrap();
    let baseline = recorder.snapshot().unwrap();
    assert_eq!(baseline.entries, DIRS * FILES_PER_DIR + DIRS);
    recorder
}

fn bench(c: &mut Criterion) {
    let ws = TempDir::new("checkpoints-ws");
    let store_dir = TempDir::new("checkpoints-store");
    workspace(ws.path());
    let store = CheckpointStore::open(store_dir.path()).unwrap();
    let watched = recorder(&store, &ws, CheckpointOptions::default());
    let mut group = c.benchmark_group("checkpoint_20000_files");
    group.sample_size(30);
    group.bench_function("no_change", |b| {
        b.iter(|| {
            let report = watched.snapshot().unwrap();
            assert!(report.changes.is_empty());
            assert!(!report.full_walk, "change notification is unavailable");
        })
    });
    let mut round = 0u64;
    group.bench_function("ten_changed", |b| {
        b.iter_batched(
            || {
                round += 1;
                for i in 0..10 {
                    let path = ws.path().join(format!("dir{:03}/file{i:03}.rs", i * 17));
                    std::fs::write(path, format!("// changed in round {round}\n")).unwrap();
                }
            },
            |()| {
                let report = watched.snapshot().unwrap();
                assert_eq!(report.changes.len(), 10);
                assert_eq!(report.files_read, 10);
            },
            BatchSize::PerIteration,
        )
    });
    drop(watched);
    let walked = recorder(&store, &ws, CheckpointOptions::default().max_watches(0));
    group.bench_function("no_change_walked", |b| {
        b.iter(|| {
            let report = walked.snapshot().unwrap();
            assert!(report.changes.is_empty());
            assert!(report.full_walk);
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
