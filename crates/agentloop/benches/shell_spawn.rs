//! The cost of the shell sandbox per call: one `shell` tool call running `true`, end to end
//! through `run_tools`, with the default `workspace-write` sandbox (Landlock, on a fresh
//! spawner thread) and with `full-access` (no sandbox). The difference is the sandbox's price.
//!
//! Run: `cargo bench -p agentloop --bench shell_spawn`
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;

use agentloop::builtin::{self, SandboxMode, ShellOptions, Workspace};
use agentloop::tooling::{Deps, Registry, run_tools};
use agentloop::transcript::ToolCallPart;
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

fn bench_shell_spawn(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    let deps = Arc::new(Deps::new());
    let call = [ToolCallPart::new("b", "shell", json!({"command": "true"}))];
    if let Err(missing) = builtin::sandbox_support(SandboxMode::WorkspaceWrite) {
        eprintln!("note: the sandbox is not fully enforced here: {missing}");
    }
    let mut group = c.benchmark_group("shell_spawn");
    group.sample_size(50);
    for mode in [SandboxMode::FullAccess, SandboxMode::WorkspaceWrite] {
        let options = ShellOptions::default().sandbox(mode);
        let registry = Registry::new(builtin::tools_with::<Deps>(&workspace, &options)).unwrap();
        group.bench_function(mode.as_str(), |b| {
            b.to_async(&rt).iter(|| async {
                let out = run_tools(&call, &registry, &deps, None).await;
                assert!(!out[0].is_error, "{}", out[0].content);
            });
        });
    }
    group.finish();
}

criterion_group!(benches, bench_shell_spawn);
criterion_main!(benches);
