//! Hostile files and patterns against the file tools: a file that is
//! one huge line is read and searched in bounded memory (peak RSS from `/proc`, not time);
//! FIFOs and other special files are refused at once instead of blocking; binary files get a
//! clear result; pathological globs and regexes are error results, never a crash.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::tooling::{ExecOptions, Registry, run_tools_with};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use serde_json::{Value, json};

struct Ws {
    _dir: tempfile::TempDir,
    root: PathBuf,
    registry: Registry<WorkspaceDeps>,
    deps: Arc<WorkspaceDeps>,
}

impl Ws {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let workspace = Workspace::new(&root).unwrap();
        let registry = Registry::new(builtin::tools::<WorkspaceDeps>(&workspace)).unwrap();
        let deps = Arc::new(WorkspaceDeps::new(workspace, ApprovalPolicy::Always));
        Ws {
            _dir: dir,
            root,
            registry,
            deps,
        }
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResultPart {
        // A time limit only so that a regression (a blocking open) fails instead of hanging.
        let options = ExecOptions {
            default_timeout: Some(std::time::Duration::from_secs(60)),
            ..ExecOptions::default()
        };
        let call = ToolCallPart::new("c", tool, args);
        let mut out = run_tools_with(&[call], &self.registry, &self.deps, &options).await;
        out.remove(0).result
    }
}

/// Peak resident set size of this process so far, in KiB.
fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// One test for everything that measures memory, so no other test in this binary runs beside
/// it and inflates the peak.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "current_thread")]
async fn a_huge_single_line_file_is_read_and_searched_in_bounded_memory() {
    const LINE_MB: usize = 96;
    let ws = Ws::new();
    {
        // Written in chunks so the fixture itself does not raise the peak.
        let mut file = std::fs::File::create(ws.root.join("huge.txt")).unwrap();
        let chunk = vec![b'a'; 1 << 20];
        for _ in 0..LINE_MB {
            file.write_all(&chunk).unwrap();
        }
        file.write_all(b"NEEDLE\nsecond line NEEDLE\n").unwrap();
    }
    let before = peak_rss_kib();

    let read = ws.call("read_file", json!({"path": "huge.txt"})).await;
    assert!(!read.is_error, "{}", read.content);
    assert!(
        read.content.contains("line cut"),
        "{}",
        &read.content[..200]
    );
    // The note gives the full length of the line: 96 MiB of `a` plus `NEEDLE`.
    assert!(
        read.content.contains("of 100,663,302 bytes shown"),
        "{}",
        &read.content[read.content.len() - 200..]
    );
    assert!(read.content.contains("     2\tsecond line NEEDLE"));

    let grep = ws.call("grep", json!({"pattern": "NEEDLE"})).await;
    assert!(!grep.is_error, "{}", grep.content);
    assert!(
        grep.content.contains("huge.txt:2: second line NEEDLE"),
        "{}",
        grep.content
    );

    let grown_mib = (peak_rss_kib() - before) / 1024;
    assert!(
        grown_mib < (LINE_MB as u64) / 4,
        "reading a {LINE_MB} MiB line raised peak memory by {grown_mib} MiB"
    );
}

#[cfg(unix)]
#[tokio::test]
async fn fifos_and_devices_are_refused_at_once() {
    let ws = Ws::new();
    let status = std::process::Command::new("mkfifo")
        .arg(ws.root.join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    // Nobody ever opens the other end: a blocking open would hang until the time limit.
    let read = ws.call("read_file", json!({"path": "pipe"})).await;
    assert!(read.is_error);
    assert!(read.content.contains("named pipe"), "{}", read.content);
    assert!(
        read.content.contains("not a regular file"),
        "{}",
        read.content
    );
    let edit = ws
        .call(
            "edit_file",
            json!({"path": "pipe", "old_text": "a", "new_text": "b"}),
        )
        .await;
    assert!(
        edit.is_error && edit.content.contains("not a regular file"),
        "{}",
        edit.content
    );
    let write = ws
        .call("write_file", json!({"path": "pipe", "content": "x"}))
        .await;
    assert!(write.is_error, "{}", write.content);
    // grep walks past it (it is not a regular file) and still searches the rest.
    std::fs::write(ws.root.join("a.txt"), "hello\n").unwrap();
    let grep = ws.call("grep", json!({"pattern": "hello"})).await;
    assert_eq!(grep.content, "a.txt:1: hello\n");
    let grep = ws
        .call("grep", json!({"pattern": "hello", "path": "pipe"}))
        .await;
    assert!(
        !grep.content.contains("hello\n") || grep.is_error,
        "{}",
        grep.content
    );

    // A link to a character device inside the workspace is refused too.
    std::os::unix::fs::symlink("/dev/zero", ws.root.join("zero")).unwrap();
    let read = ws.call("read_file", json!({"path": "zero"})).await;
    assert!(read.is_error, "{}", read.content);
}

#[tokio::test]
async fn binary_files_get_a_clear_result() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("blob.bin"), b"\x7fELF\x00\x01\x02binary").unwrap();
    let read = ws.call("read_file", json!({"path": "blob.bin"})).await;
    assert!(read.is_error);
    assert!(read.content.contains("binary file"), "{}", read.content);
    let grep = ws
        .call("grep", json!({"pattern": "ELF", "path": "blob.bin"}))
        .await;
    assert!(
        grep.is_error && grep.content.contains("binary file"),
        "{}",
        grep.content
    );
    let grep = ws.call("grep", json!({"pattern": "ELF"})).await;
    assert!(
        grep.content.contains("1 binary file was skipped"),
        "{}",
        grep.content
    );
}

#[tokio::test]
async fn pathological_patterns_are_error_results() {
    let ws = Ws::new();
    std::fs::write(ws.root.join("a.rs"), "fn main() {}\n").unwrap();
    let nested = format!("{}a{}", "{".repeat(50_000), "}".repeat(50_000));
    let shallow_but_deep = format!("{}a{}", "{b,".repeat(30), "}".repeat(30));
    let wide = format!(
        "*.{{{}}}",
        (0..2_000)
            .map(|i| format!("e{i}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    for glob in [&nested, &shallow_but_deep, &wide] {
        let find = ws.call("find_files", json!({"pattern": glob})).await;
        assert!(find.is_error, "{}", find.content);
        assert!(find.content.contains("glob pattern"), "{}", find.content);
        assert!(
            find.content.len() < 2_000,
            "the error quotes a bounded part of the pattern"
        );
        let grep = ws
            .call("grep", json!({"pattern": "main", "glob": glob}))
            .await;
        assert!(
            grep.is_error && grep.content.contains("glob pattern"),
            "{}",
            grep.content
        );
    }
    let deep_regex = format!("{}a{}", "(".repeat(20_000), ")".repeat(20_000));
    let deep_classes = format!("{}a{}", "[".repeat(5_000), "]".repeat(5_000));
    let repeated = "(\\w{100}){100}".to_owned();
    for regex in [&deep_regex, &deep_classes, &repeated] {
        let grep = ws.call("grep", json!({"pattern": regex})).await;
        assert!(grep.is_error, "{}", grep.content);
        assert!(grep.content.len() < 2_000);
    }
    // Ordinary patterns still work.
    let ok = ws
        .call(
            "grep",
            json!({"pattern": "fn ma(i)n", "glob": "*.{rs,toml}"}),
        )
        .await;
    assert_eq!(ok.content, "a.rs:1: fn main() {}\n");
}
