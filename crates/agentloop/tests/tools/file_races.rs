//! Confinement that cannot be raced: while another thread keeps swapping a
//! workspace directory for a symbolic link to a directory outside, the file tools write, edit,
//! read, list and search through it hundreds of times; nothing lands outside and nothing from
//! outside is read.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(unix)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::tooling::{Registry, run_tools};
use agentloop::transcript::ToolCallPart;
use serde_json::json;

const SECRET: &str = "OUTSIDE-SECRET";

/// Replaces `ws/d` with a real directory, then with a link to `outside`, again and again.
fn swapper(ws: &Path, outside: &Path, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    let d = ws.join("d");
    let outside = outside.to_path_buf();
    std::thread::spawn(move || {
        let mut swaps = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let _ = std::fs::remove_dir_all(&d);
            let _ = std::fs::remove_file(&d);
            let _ = std::fs::create_dir(&d);
            let _ = std::fs::write(d.join("f.txt"), "inside\n");
            std::thread::yield_now();
            let _ = std::fs::remove_dir_all(&d);
            let _ = std::os::unix::fs::symlink(&outside, &d);
            std::thread::yield_now();
            swaps += 1;
        }
        swaps
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_never_lets_a_tool_escape() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    let outside = dir.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("f.txt"), format!("{SECRET}\n")).unwrap();
    std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();

    let workspace = Workspace::new(&ws).unwrap();
    let registry = Registry::new(builtin::tools::<WorkspaceDeps>(&workspace)).unwrap();
    let deps = Arc::new(WorkspaceDeps::new(workspace, ApprovalPolicy::Always));

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = swapper(&ws, &outside, stop.clone());
    let mut writes_ok = 0;
    for i in 0..300 {
        let calls = [
            ToolCallPart::new(
                "w",
                "write_file",
                json!({"path": "d/new.txt", "content": format!("written {i}\n")}),
            ),
            ToolCallPart::new(
                "e",
                "edit_file",
                json!({"path": "d/f.txt", "old_text": "inside", "new_text": "edited"}),
            ),
            ToolCallPart::new("r", "read_file", json!({"path": "d/f.txt"})),
            ToolCallPart::new("r2", "read_file", json!({"path": "d/secret.txt"})),
            ToolCallPart::new("l", "list_dir", json!({"path": "d"})),
            ToolCallPart::new("g", "grep", json!({"pattern": SECRET})),
            ToolCallPart::new("g2", "grep", json!({"pattern": SECRET, "path": "d"})),
        ];
        let results = run_tools(&calls, &registry, &deps, None).await;
        if !results[0].is_error {
            writes_ok += 1;
        }
        for r in &results {
            // grep's "No matches for `…`" quotes the pattern; a leaked line would be `path:1: …`.
            let leaked = if r.tool_name == "grep" {
                r.content.contains(&format!(": {SECRET}"))
            } else {
                r.content.contains(SECRET)
            };
            assert!(!leaked, "{} read outside: {}", r.tool_name, r.content);
            if r.tool_name == "list_dir" {
                assert!(
                    !r.content.contains("secret.txt"),
                    "list_dir listed outside: {}",
                    r.content
                );
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = swaps.join().unwrap();

    let mut landed: Vec<_> = std::fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    landed.sort();
    assert_eq!(
        landed,
        ["f.txt", "secret.txt"],
        "a tool wrote outside the workspace"
    );
    assert_eq!(
        std::fs::read_to_string(outside.join("f.txt")).unwrap(),
        format!("{SECRET}\n"),
        "edit_file changed a file outside the workspace"
    );
    assert!(swaps > 10, "the race hardly ran ({swaps} swaps)");
    // Not a vacuous pass: some writes did go through while `d` was a real directory.
    assert!(writes_ok > 0, "no write ever succeeded");
}
