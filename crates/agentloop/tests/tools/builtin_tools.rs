//! The built-in coding tools, called the way a model calls them: through `run_tools`, with
//! `ToolCallPart`s carrying the exact argument names. Each test uses its own temporary directory
//! holding a workspace (`ws/`) and, beside it, a directory the tools must never reach
//! (`outside/`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agentloop::builtin::{
    self, ApprovalPolicy, MUTATING_TOOLS, NO_ASKER_REASON, PolicyDecision, Workspace, WorkspaceDeps,
};
use agentloop::tooling::{
    Approval, Deps, ExecOptions, Registry, ToolErrorKind, run_tools, run_tools_with,
};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use serde_json::{Value, json};
use tempfile::TempDir;

const SECRET: &str = "TOP SECRET outside the workspace";

struct Fixture {
    _dir: TempDir,
    ws: PathBuf,
    outside: PathBuf,
    registry: Registry<WorkspaceDeps>,
    deps: Arc<WorkspaceDeps>,
}

impl Fixture {
    fn new() -> Self {
        Fixture::with_deps(|ws| WorkspaceDeps::new(ws, ApprovalPolicy::Always))
    }

    fn with_deps(make: impl FnOnce(Workspace) -> WorkspaceDeps) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
        std::fs::write(outside.join("sub/deep.txt"), format!("{SECRET}\n")).unwrap();
        let workspace = Workspace::new(&ws).unwrap();
        let registry = Registry::new(builtin::tools::<WorkspaceDeps>(&workspace)).unwrap();
        let deps = Arc::new(make(workspace));
        // Canonical forms, so assertions compare like with like (e.g. /tmp may be a link).
        let ws = std::fs::canonicalize(ws).unwrap();
        let outside = std::fs::canonicalize(outside).unwrap();
        Fixture {
            _dir: dir,
            ws,
            outside,
            registry,
            deps,
        }
    }

    fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let path = self.ws.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap()
    }

    #[cfg(unix)]
    fn symlink(&self, target: &Path, rel: &str) {
        std::os::unix::fs::symlink(target, self.ws.join(rel)).unwrap();
    }

    async fn call(&self, tool: &str, args: Value) -> ToolResultPart {
        let call = ToolCallPart::new("call-1", tool, args);
        let mut results = run_tools(&[call], &self.registry, &self.deps, None).await;
        assert_eq!(results.len(), 1);
        results.remove(0)
    }

    async fn ok(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args.clone()).await;
        assert!(!result.is_error, "{tool} {args} failed: {}", result.content);
        result.content
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let result = self.call(tool, args.clone()).await;
        assert!(
            result.is_error,
            "{tool} {args} should fail, got: {}",
            result.content
        );
        result.content
    }
}

fn numbered(lines: std::ops::RangeInclusive<usize>) -> String {
    lines.map(|n| format!("{n:>6}\tline {n}\n")).collect()
}

fn lines_file(n: usize) -> String {
    (1..=n).map(|i| format!("line {i}\n")).collect()
}

// ---------------------------------------------------------------------------------------------
// Definitions

#[test]
fn the_built_in_tools_have_the_documented_argument_names() {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    let specs = builtin::tools::<Deps>(&ws);
    let expected: &[(&str, &[&str], &[&str])] = &[
        ("read_file", &["limit", "offset", "path"], &["path"]),
        ("write_file", &["content", "path"], &["path", "content"]),
        (
            "edit_file",
            &["new_text", "old_text", "path"],
            &["path", "old_text", "new_text"],
        ),
        ("list_dir", &["path"], &[]),
        ("find_files", &["path", "pattern"], &["pattern"]),
        ("grep", &["glob", "path", "pattern"], &["pattern"]),
        (
            "shell",
            &["background", "command", "timeout_secs"],
            &["command"],
        ),
        ("job_output", &["job", "tail_lines"], &["job"]),
        ("job_kill", &["job"], &["job"]),
    ];
    assert_eq!(specs.len(), expected.len());
    for (spec, (name, props, required)) in specs.iter().zip(expected) {
        assert_eq!(spec.name(), *name);
        let schema = spec.parameters();
        let mut keys: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort();
        assert_eq!(&keys, props, "{name}");
        for key in &keys {
            let description = schema["properties"][key]["description"].as_str();
            assert!(description.is_some_and(|d| !d.is_empty()), "{name}.{key}");
        }
        let req: Vec<&str> = schema["required"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(&req, required, "{name}");
        assert_eq!(schema["additionalProperties"], false, "{name}");
        assert_eq!(spec.parallel_safe(), !builtin::is_mutating(name), "{name}");
    }
    assert_eq!(MUTATING_TOOLS, &["write_file", "edit_file", "shell"]);
    // The shell tool's own timeout (at most 600 s) must fire before the executor's.
    let shell = specs.iter().find(|s| s.name() == "shell").unwrap();
    assert!(shell.timeout().unwrap() > Duration::from_secs(600));
}

#[tokio::test]
async fn unknown_or_misspelled_arguments_are_rejected() {
    let fx = Fixture::new();
    fx.write("a.txt", "x\n");
    let msg = fx.err("read_file", json!({"file": "a.txt"})).await;
    assert!(msg.contains("path"), "{msg}");
    fx.err("read_file", json!({"path": "a.txt", "offset": 0}))
        .await;
    fx.err("shell", json!({"command": "true", "timeout_secs": 601}))
        .await;
}

#[test]
fn a_missing_workspace_root_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Workspace::new(dir.path().join("missing")).is_err());
}

// ---------------------------------------------------------------------------------------------
// read_file

#[tokio::test]
async fn read_file_numbers_lines() {
    let fx = Fixture::new();
    fx.write("src/notes.txt", lines_file(3));
    let out = fx.ok("read_file", json!({"path": "src/notes.txt"})).await;
    assert_eq!(out, numbered(1..=3));
}

#[tokio::test]
async fn read_file_reads_a_range_and_says_how_to_continue() {
    let fx = Fixture::new();
    fx.write("ten.txt", lines_file(10));
    let out = fx
        .ok(
            "read_file",
            json!({"path": "ten.txt", "offset": 3, "limit": 4}),
        )
        .await;
    assert_eq!(
        out,
        format!(
            "{}[... 4 more lines; use offset=7 to continue]\n",
            numbered(3..=6)
        )
    );
    // The tail of the file: no note.
    let out = fx
        .ok("read_file", json!({"path": "ten.txt", "offset": 7}))
        .await;
    assert_eq!(out, numbered(7..=10));
    // Past the end.
    let msg = fx
        .err("read_file", json!({"path": "ten.txt", "offset": 11}))
        .await;
    assert!(
        msg.contains("past the end") && msg.contains("10 lines"),
        "{msg}"
    );
}

#[tokio::test]
async fn read_file_caps_a_long_file_at_2000_lines() {
    let fx = Fixture::new();
    fx.write("long.txt", lines_file(2500));
    let out = fx.ok("read_file", json!({"path": "long.txt"})).await;
    assert!(out.starts_with(&numbered(1..=3)));
    assert!(out.contains("  2000\tline 2000\n"));
    assert!(!out.contains("line 2001"));
    assert!(
        out.ends_with("[... 500 more lines; use offset=2001 to continue]\n"),
        "{}",
        &out[out.len() - 200..]
    );
}

#[tokio::test]
async fn read_file_stops_at_its_byte_budget_and_clips_long_lines() {
    let fx = Fixture::new();
    // 1,500 lines of 99 bytes: more than READ_FILE_MAX_BYTES (100 KB) once numbered.
    let body: String = (1..=1500).map(|i| format!("{i:<98}\n")).collect();
    fx.write("wide.txt", body);
    let out = fx.ok("read_file", json!({"path": "wide.txt"})).await;
    assert!(
        out.len() <= builtin::READ_FILE_MAX_BYTES + 100,
        "{}",
        out.len()
    );
    let shown = out.lines().filter(|l| l.contains('\t')).count();
    assert!((900..1000).contains(&shown), "{shown}");
    assert!(
        out.ends_with(&format!(
            "[... {} more lines; use offset={} to continue]\n",
            1500 - shown,
            shown + 1
        )),
        "{}",
        &out[out.len() - 100..]
    );

    fx.write("minified.js", format!("{}\nshort\n", "x".repeat(5000)));
    let out = fx.ok("read_file", json!({"path": "minified.js"})).await;
    assert!(
        out.contains("[... line cut: 2,000 of 5,000 bytes shown]"),
        "{out}"
    );
    assert!(out.ends_with("     2\tshort\n"), "{out}");
}

#[tokio::test]
async fn read_file_refuses_binary_files_directories_and_missing_files() {
    let fx = Fixture::new();
    fx.write("blob.dat", b"\x7fELF\x02\x01\x01\x00\x00\x00\x00");
    let msg = fx.err("read_file", json!({"path": "blob.dat"})).await;
    assert!(msg.contains("binary"), "{msg}");
    std::fs::create_dir(fx.ws.join("dir")).unwrap();
    let msg = fx.err("read_file", json!({"path": "dir"})).await;
    assert!(
        msg.contains("directory") && msg.contains("list_dir"),
        "{msg}"
    );
    let msg = fx.err("read_file", json!({"path": "nope.txt"})).await;
    assert!(msg.contains("does not exist"), "{msg}");
}

#[tokio::test]
async fn read_file_returns_images_as_image_parts_by_their_content() {
    use base64::Engine as _;
    let fx = Fixture::new();
    let png: Vec<u8> = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"
        .iter()
        .copied()
        .chain(std::iter::repeat_n(7u8, 20_000))
        .collect();
    let cases: [(&str, Vec<u8>, &str); 4] = [
        // The type comes from the bytes, not the name.
        ("shots/screen.dat", png.clone(), "image/png"),
        (
            "photo.jpg",
            b"\xff\xd8\xff\xe0\x00\x10JFIF\x00".to_vec(),
            "image/jpeg",
        ),
        (
            "anim.gif",
            b"GIF89a\x01\x00\x01\x00\x00\x00\x00;".to_vec(),
            "image/gif",
        ),
        (
            "pic.webp",
            b"RIFF\x1a\x00\x00\x00WEBPVP8 ".to_vec(),
            "image/webp",
        ),
    ];
    for (path, bytes, media_type) in cases {
        fx.write(path, &bytes);
        let result = fx.call("read_file", json!({"path": path})).await;
        assert!(!result.is_error, "{path}: {}", result.content);
        assert!(result.content.contains(media_type), "{}", result.content);
        assert_eq!(result.images.len(), 1, "{path}");
        assert_eq!(result.images[0].media_type, media_type);
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(&result.images[0].data)
            .unwrap();
        assert_eq!(
            decoded, bytes,
            "{path}: the image must arrive byte for byte"
        );
    }
    // A text file named like an image is text.
    fx.write("fake.png", "just text\n");
    let result = fx.call("read_file", json!({"path": "fake.png"})).await;
    assert!(result.images.is_empty());
    assert_eq!(result.content, "     1\tjust text\n");
    // Too large: an error result that says how to proceed, nothing attached.
    let big: Vec<u8> = png
        .iter()
        .copied()
        .chain(std::iter::repeat_n(0u8, 5 * 1024 * 1024))
        .collect();
    fx.write("big.png", &big);
    let result = fx.call("read_file", json!({"path": "big.png"})).await;
    assert!(result.is_error && result.images.is_empty());
    assert!(result.content.contains("larger than"), "{}", result.content);
}

#[tokio::test]
async fn absolute_paths_inside_the_workspace_are_allowed() {
    let fx = Fixture::new();
    fx.write("a.txt", "hello\n");
    let abs = fx.ws.join("a.txt");
    let out = fx
        .ok("read_file", json!({"path": abs.to_str().unwrap()}))
        .await;
    assert_eq!(out, "     1\thello\n");
}

// ---------------------------------------------------------------------------------------------
// write_file and edit_file

#[tokio::test]
async fn write_file_creates_parent_directories_and_reports_bytes() {
    let fx = Fixture::new();
    let out = fx
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "héllo\n"}),
        )
        .await;
    assert!(
        out.contains("7 bytes") && out.contains("a/b/c.txt"),
        "{out}"
    );
    assert_eq!(fx.read("a/b/c.txt"), "héllo\n");
    let out = fx
        .ok("write_file", json!({"path": "a/b/c.txt", "content": ""}))
        .await;
    assert!(out.contains("0 bytes"), "{out}");
    assert_eq!(fx.read("a/b/c.txt"), "");
}

#[tokio::test]
async fn edit_file_replaces_a_unique_match_and_reports_the_line() {
    let fx = Fixture::new();
    fx.write("lib.rs", "fn a() {}\nfn b() {\n    1\n}\n");
    let out = fx
        .ok(
            "edit_file",
            json!({"path": "lib.rs", "old_text": "    1\n", "new_text": "    2\n"}),
        )
        .await;
    assert!(out.contains("line 3"), "{out}");
    assert_eq!(fx.read("lib.rs"), "fn a() {}\nfn b() {\n    2\n}\n");
}

#[tokio::test]
async fn edit_file_reports_text_not_found() {
    let fx = Fixture::new();
    fx.write("lib.rs", "fn a() {}\n");
    let msg = fx
        .err(
            "edit_file",
            json!({"path": "lib.rs", "old_text": "fn z()", "new_text": "x"}),
        )
        .await;
    assert!(
        msg.contains("old_text was not found in `lib.rs`; read the file and copy the exact text"),
        "{msg}"
    );
    assert_eq!(fx.read("lib.rs"), "fn a() {}\n");
}

#[tokio::test]
async fn edit_file_reports_text_that_is_not_unique() {
    let fx = Fixture::new();
    fx.write("lib.rs", "x = 1\ny = 1\nz = 1\n");
    let msg = fx
        .err(
            "edit_file",
            json!({"path": "lib.rs", "old_text": "= 1", "new_text": "= 2"}),
        )
        .await;
    assert!(
        msg.contains(
            "old_text occurs 3 times in `lib.rs`; include more surrounding context so it is unique"
        ),
        "{msg}"
    );
    assert_eq!(fx.read("lib.rs"), "x = 1\ny = 1\nz = 1\n");
}

// ---------------------------------------------------------------------------------------------
// list_dir, find_files, grep

#[tokio::test]
async fn list_dir_sorts_entries_and_marks_directories() {
    let fx = Fixture::new();
    fx.write("b.txt", "");
    fx.write("a.txt", "");
    fx.write("src/main.rs", "");
    fx.write(".hidden", "");
    assert_eq!(
        fx.ok("list_dir", json!({})).await,
        ".hidden\na.txt\nb.txt\nsrc/\n"
    );
    assert_eq!(fx.ok("list_dir", json!({"path": "src"})).await, "main.rs\n");
    let msg = fx.err("list_dir", json!({"path": "a.txt"})).await;
    assert!(msg.contains("not a directory"), "{msg}");
}

#[tokio::test]
async fn list_dir_caps_long_listings() {
    let fx = Fixture::new();
    for i in 0..1005 {
        fx.write(&format!("many/f{i:04}"), "");
    }
    let out = fx.ok("list_dir", json!({"path": "many"})).await;
    assert!(out.starts_with("f0000\nf0001\n"));
    assert!(
        out.ends_with("[... 5 more entries not shown (1,005 in total); use find_files with a pattern to narrow down]\n"),
        "{out}"
    );
}

#[tokio::test]
async fn find_files_matches_globs_respecting_gitignore() {
    let fx = Fixture::new();
    fx.write("src/main.rs", "");
    fx.write("src/util/mod.rs", "");
    fx.write("README.md", "");
    fx.write("target/debug/build.rs", "");
    fx.write(".gitignore", "target/\n");
    fx.write(".git/hooks/x.rs", "");
    fx.write(".hidden/y.rs", "");
    assert_eq!(
        fx.ok("find_files", json!({"pattern": "*.rs"})).await,
        "src/main.rs\nsrc/util/mod.rs\n"
    );
    assert_eq!(
        fx.ok("find_files", json!({"pattern": "util/*.rs", "path": "src"}))
            .await,
        "src/util/mod.rs\n"
    );
    assert_eq!(
        fx.ok("find_files", json!({"pattern": "*.{md,toml}"})).await,
        "README.md\n"
    );
    let none = fx.ok("find_files", json!({"pattern": "*.py"})).await;
    assert!(none.contains("No files match"), "{none}");
    let msg = fx.err("find_files", json!({"pattern": "a[b"})).await;
    assert!(msg.contains("invalid glob"), "{msg}");
}

#[tokio::test]
async fn find_files_caps_results() {
    let fx = Fixture::new();
    for i in 0..510 {
        fx.write(&format!("d/f{i:03}.txt"), "");
    }
    let out = fx.ok("find_files", json!({"pattern": "*.txt"})).await;
    assert!(out.starts_with("d/f000.txt\n"));
    assert!(!out.contains("d/f500.txt"));
    assert!(
        out.contains("[... 10 more files not shown (510 matched)"),
        "{out}"
    );
}

#[tokio::test]
async fn grep_prints_path_line_and_text() {
    let fx = Fixture::new();
    fx.write("src/a.rs", "fn main() {\n    todo!()\n}\n");
    fx.write("src/b.txt", "a TODO here\n");
    fx.write("blob.bin", b"todo\x00\x01binary");
    assert_eq!(
        fx.ok("grep", json!({"pattern": "(?i)todo"})).await,
        "src/a.rs:2:     todo!()\nsrc/b.txt:1: a TODO here\n"
    );
    assert_eq!(
        fx.ok("grep", json!({"pattern": "(?i)todo", "glob": "*.txt"}))
            .await,
        "src/b.txt:1: a TODO here\n"
    );
    assert_eq!(
        fx.ok("grep", json!({"pattern": "main", "path": "src/a.rs"}))
            .await,
        "src/a.rs:1: fn main() {\n"
    );
    let none = fx.ok("grep", json!({"pattern": "absent"})).await;
    assert!(none.contains("No matches"), "{none}");
    let msg = fx.err("grep", json!({"pattern": "("})).await;
    assert!(msg.contains("invalid regular expression"), "{msg}");
}

#[tokio::test]
async fn grep_caps_matches_and_says_how_many_were_cut() {
    let fx = Fixture::new();
    fx.write("big.txt", "match\n".repeat(250));
    let out = fx.ok("grep", json!({"pattern": "match"})).await;
    assert_eq!(
        out.lines().filter(|l| l.starts_with("big.txt:")).count(),
        200
    );
    assert!(out.contains("big.txt:200: match\n"));
    assert!(!out.contains("big.txt:201:"));
    assert!(
        out.ends_with(
            "[... 50 more matches not shown (250 in total); narrow the pattern, path or glob]\n"
        ),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// shell

#[tokio::test]
async fn shell_reports_output_and_exit_code_from_the_workspace_root() {
    let fx = Fixture::new();
    let out = fx
        .ok("shell", json!({"command": "pwd; echo oops >&2; exit 3"}))
        .await;
    assert_eq!(out, format!("{}\noops\n[exit code: 3]", fx.ws.display()));
    let out = fx.ok("shell", json!({"command": "true"})).await;
    assert_eq!(out, "(no output)\n[exit code: 0]");
}

/// Whether a process is gone (or a zombie nobody reaped yet).
#[cfg(target_os = "linux")]
fn process_is_dead(pid: &str) -> bool {
    match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit(')')
            .next()
            .is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

#[cfg(target_os = "linux")]
async fn wait_until_dead(pid: &str) -> bool {
    // A hang guard of a minute: a killed process is gone far sooner.
    for _ in 0..600 {
        if process_is_dead(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

/// A hang guard: `f`'s output, or a failure naming the hang after a minute.
async fn within_a_minute<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the shell call did not end within a minute")
}

#[tokio::test]
async fn shell_timeout_kills_the_command_and_says_so() {
    let fx = Fixture::new();
    // The background sleep would outlive any test: only the timeout's kill ends the call.
    let msg = within_a_minute(fx.err(
        "shell",
        json!({"command": "echo started; sleep 3600 & echo $! > sleep.pid; wait", "timeout_secs": 1}),
    ))
    .await;
    assert!(msg.starts_with("started\n"), "{msg}");
    assert!(msg.contains("timed out after 1s and was killed"), "{msg}");
    #[cfg(target_os = "linux")]
    {
        let pid = fx.read("sleep.pid");
        assert!(
            wait_until_dead(&pid).await,
            "sleep {pid} survived the timeout"
        );
    }
}

#[tokio::test]
async fn aborting_a_shell_call_kills_its_process_group() {
    let fx = Fixture::new();
    let options = ExecOptions::default();
    let cancel = options.cancel.clone();
    let call = ToolCallPart::new(
        "c",
        "shell",
        json!({"command": "sleep 3600 & echo $! > sleep.pid; wait"}),
    );
    let ws = fx.ws.clone();
    tokio::spawn(async move {
        for _ in 0..100 {
            if ws.join("sleep.pid").exists() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    // The background sleep would outlive any test: only the abort's kill ends the call.
    let outcomes = within_a_minute(run_tools_with(&[call], &fx.registry, &fx.deps, &options)).await;
    assert!(outcomes[0].result.is_error);
    assert_eq!(
        outcomes[0].error.as_ref().map(|e| e.kind()),
        Some(ToolErrorKind::Aborted)
    );
    #[cfg(target_os = "linux")]
    {
        let pid = fx.read("sleep.pid");
        assert!(
            wait_until_dead(&pid).await,
            "sleep {pid} survived the abort"
        );
    }
}

#[tokio::test]
async fn shell_output_is_truncated_with_a_note() {
    let fx = Fixture::new();
    // 20,000 lines of "line\n" = 100,000 bytes.
    let out = fx
        .ok(
            "shell",
            json!({"command": "yes line | head -n 20000; echo last"}),
        )
        .await;
    assert!(out.starts_with("line\nline\n"));
    assert!(
        out.contains(
            "[output truncated: 14,001 lines (70,005 bytes) omitted; 30,000 of 100,005 bytes shown]"
        ),
        "{}",
        &out[..200.min(out.len())]
    );
    assert!(
        out.ends_with("last\n[exit code: 0]"),
        "{}",
        &out[out.len() - 100..]
    );
    assert!(out.len() < 31_000);
}

// ---------------------------------------------------------------------------------------------
// Workspace confinement

/// Every way of naming a file outside the workspace, for tools that take a file path.
#[cfg(unix)]
fn outside_file_paths(fx: &Fixture) -> Vec<String> {
    fx.symlink(&fx.outside.join("secret.txt"), "link_to_secret");
    fx.symlink(&fx.outside, "link_to_outside");
    vec![
        "../outside/secret.txt".to_owned(),
        fx.outside.join("secret.txt").to_str().unwrap().to_owned(),
        "link_to_secret".to_owned(),
        "link_to_outside/secret.txt".to_owned(),
        "link_to_outside/sub/deep.txt".to_owned(),
        "sub/../../outside/secret.txt".to_owned(),
    ]
}

#[cfg(unix)]
fn assert_refused(msg: &str, path: &str) {
    assert!(msg.contains("outside the workspace"), "{path}: {msg}");
    assert!(!msg.contains(SECRET), "{path} leaked: {msg}");
}

#[cfg(unix)]
#[tokio::test]
async fn escapes_are_refused_for_reading_files() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("sub")).unwrap();
    for path in outside_file_paths(&fx) {
        let msg = fx.err("read_file", json!({"path": path})).await;
        assert_refused(&msg, &path);
        let msg = fx
            .err("grep", json!({"pattern": "SECRET", "path": path}))
            .await;
        assert_refused(&msg, &path);
    }
    let msg = fx.err("read_file", json!({"path": "link_to_secret"})).await;
    assert!(msg.contains("symbolic link"), "{msg}");
}

#[cfg(unix)]
#[tokio::test]
async fn escapes_are_refused_for_writing_and_editing() {
    let fx = Fixture::new();
    std::fs::create_dir(fx.ws.join("sub")).unwrap();
    let mut paths = outside_file_paths(&fx);
    // Files that do not exist yet, through a link or outside.
    fx.symlink(&fx.outside.join("created.txt"), "dangling_link");
    paths.extend([
        "link_to_outside/new.txt".to_owned(),
        "link_to_outside/newdir/new.txt".to_owned(),
        "../outside/new.txt".to_owned(),
        fx.outside.join("new.txt").to_str().unwrap().to_owned(),
        "dangling_link".to_owned(),
        "dangling_link/x.txt".to_owned(),
        "newdir/../../outside/new.txt".to_owned(),
    ]);
    for path in &paths {
        let result = fx
            .call("write_file", json!({"path": path, "content": "pwned"}))
            .await;
        assert!(result.is_error, "write {path}: {}", result.content);
        assert!(
            result.content.contains("outside the workspace")
                || result.content.contains("symbolic link")
                || result.content.contains("`..`"),
            "{path}: {}",
            result.content
        );
        let result = fx
            .call(
                "edit_file",
                json!({"path": path, "old_text": "TOP", "new_text": "pwned"}),
            )
            .await;
        assert!(result.is_error, "edit {path}: {}", result.content);
        assert!(!result.content.contains(SECRET));
    }
    // Nothing outside changed or appeared.
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("secret.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("sub/deep.txt")).unwrap(),
        format!("{SECRET}\n")
    );
    let mut names: Vec<String> = std::fs::read_dir(&fx.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["secret.txt", "sub"]);
}

#[cfg(unix)]
#[tokio::test]
async fn escapes_are_refused_for_directory_tools() {
    let fx = Fixture::new();
    fx.symlink(&fx.outside, "link_to_outside");
    fx.write("inside.txt", "TOP SECRET inside is fine\n");
    let dirs = [
        "..".to_owned(),
        "../outside".to_owned(),
        fx.outside.to_str().unwrap().to_owned(),
        "/".to_owned(),
        "link_to_outside".to_owned(),
        "link_to_outside/sub".to_owned(),
    ];
    for dir in &dirs {
        let msg = fx.err("list_dir", json!({"path": dir})).await;
        assert_refused(&msg, dir);
        let msg = fx
            .err("find_files", json!({"pattern": "*.txt", "path": dir}))
            .await;
        assert_refused(&msg, dir);
        let msg = fx
            .err("grep", json!({"pattern": "SECRET", "path": dir}))
            .await;
        assert_refused(&msg, dir);
    }
    // Walking the whole workspace does not follow the link out of it.
    let found = fx.ok("find_files", json!({"pattern": "*.txt"})).await;
    assert_eq!(found, "inside.txt\n");
    let grep = fx.ok("grep", json!({"pattern": "SECRET"})).await;
    assert_eq!(grep, "inside.txt:1: TOP SECRET inside is fine\n");
}

#[cfg(unix)]
#[tokio::test]
async fn links_that_stay_inside_the_workspace_work() {
    let fx = Fixture::new();
    fx.write("real/file.txt", "inside\n");
    fx.symlink(&fx.ws.join("real"), "alias");
    let out = fx.ok("read_file", json!({"path": "alias/file.txt"})).await;
    assert_eq!(out, "     1\tinside\n");
    fx.ok(
        "write_file",
        json!({"path": "alias/new.txt", "content": "x"}),
    )
    .await;
    assert_eq!(fx.read("real/new.txt"), "x");
}

// ---------------------------------------------------------------------------------------------
// Approval

#[test]
fn policies_parse_and_decide() {
    assert_eq!("never".parse::<ApprovalPolicy>(), Ok(ApprovalPolicy::Never));
    assert_eq!(
        "Mutating".parse::<ApprovalPolicy>(),
        Ok(ApprovalPolicy::Mutating)
    );
    assert_eq!(
        "always".parse::<ApprovalPolicy>(),
        Ok(ApprovalPolicy::Always)
    );
    assert!("sometimes".parse::<ApprovalPolicy>().is_err());
    // The unambiguous names, which are also what the policies print as.
    assert_eq!("deny".parse::<ApprovalPolicy>(), Ok(ApprovalPolicy::Never));
    assert_eq!(
        "ask".parse::<ApprovalPolicy>(),
        Ok(ApprovalPolicy::Mutating)
    );
    assert_eq!(
        "allow".parse::<ApprovalPolicy>(),
        Ok(ApprovalPolicy::Always)
    );
    assert_eq!(ApprovalPolicy::Never.to_string(), "deny");
    assert_eq!(ApprovalPolicy::default(), ApprovalPolicy::Mutating);
    for policy in [
        ApprovalPolicy::Never,
        ApprovalPolicy::Mutating,
        ApprovalPolicy::Always,
    ] {
        assert_eq!(policy.to_string().parse::<ApprovalPolicy>(), Ok(policy));
        for read_only in ["read_file", "list_dir", "find_files", "grep"] {
            assert_eq!(policy.decide(read_only), PolicyDecision::Allow);
        }
    }
    assert_eq!(
        ApprovalPolicy::Always.decide("shell"),
        PolicyDecision::Allow
    );
    assert_eq!(
        ApprovalPolicy::Mutating.decide("shell"),
        PolicyDecision::Ask
    );
    assert!(matches!(
        ApprovalPolicy::Never.decide("write_file"),
        PolicyDecision::Deny(_)
    ));
}

fn counting_asker(
    counter: &Arc<AtomicUsize>,
    verdict: Approval,
) -> impl Fn(&ToolCallPart) -> Approval + Send + Sync + 'static {
    let counter = counter.clone();
    move |call: &ToolCallPart| {
        assert!(
            builtin::is_mutating(&call.tool_name),
            "asked about {}",
            call.tool_name
        );
        counter.fetch_add(1, Ordering::SeqCst);
        verdict.clone()
    }
}

#[tokio::test]
async fn policy_always_runs_everything_without_asking() {
    let asked = Arc::new(AtomicUsize::new(0));
    let fx = Fixture::with_deps(|ws| {
        WorkspaceDeps::new(ws, ApprovalPolicy::Always)
            .with_asker(counting_asker(&asked, Approval::deny("no")))
    });
    fx.ok("write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    fx.ok("shell", json!({"command": "true"})).await;
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    assert_eq!(asked.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn policy_mutating_without_an_asker_denies_mutating_calls() {
    let fx = Fixture::with_deps(|ws| WorkspaceDeps::new(ws, ApprovalPolicy::Mutating));
    let msg = fx
        .err("write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert!(msg.contains(NO_ASKER_REASON), "{msg}");
    assert!(!fx.ws.join("a.txt").exists());
    let msg = fx.err("shell", json!({"command": "touch b.txt"})).await;
    assert!(msg.contains(NO_ASKER_REASON), "{msg}");
    assert!(!fx.ws.join("b.txt").exists());
    fx.write("c.txt", "c\n");
    fx.ok("read_file", json!({"path": "c.txt"})).await;
    fx.ok("grep", json!({"pattern": "c"})).await;
}

#[tokio::test]
async fn policy_mutating_asks_only_about_mutating_calls() {
    let asked = Arc::new(AtomicUsize::new(0));
    let fx = Fixture::with_deps(|ws| {
        let counter = asked.clone();
        WorkspaceDeps::new(ws, ApprovalPolicy::Mutating).with_asker(move |call| {
            assert!(builtin::is_mutating(&call.tool_name));
            counter.fetch_add(1, Ordering::SeqCst);
            if call.tool_name == "shell" {
                Approval::deny("the user said no")
            } else {
                Approval::Allow
            }
        })
    });
    fx.ok("write_file", json!({"path": "a.txt", "content": "one\n"}))
        .await;
    fx.ok("read_file", json!({"path": "a.txt"})).await;
    fx.ok("list_dir", json!({})).await;
    let msg = fx.err("shell", json!({"command": "touch b.txt"})).await;
    assert!(msg.contains("the user said no"), "{msg}");
    assert!(!fx.ws.join("b.txt").exists());
    assert_eq!(asked.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn policy_mutating_with_an_async_asker() {
    let fx = Fixture::with_deps(|ws| {
        WorkspaceDeps::new(ws, ApprovalPolicy::Mutating).with_async_asker(|call| async move {
            tokio::task::yield_now().await;
            if call.tool_name == "edit_file" {
                Approval::Allow
            } else {
                Approval::deny("async no")
            }
        })
    });
    fx.write("a.txt", "old\n");
    fx.ok(
        "edit_file",
        json!({"path": "a.txt", "old_text": "old", "new_text": "new"}),
    )
    .await;
    assert_eq!(fx.read("a.txt"), "new\n");
    let msg = fx
        .err("write_file", json!({"path": "a.txt", "content": "x"}))
        .await;
    assert!(msg.contains("async no"), "{msg}");
}

#[tokio::test]
async fn policy_never_denies_mutating_calls_even_with_an_asker() {
    let asked = Arc::new(AtomicUsize::new(0));
    let fx = Fixture::with_deps(|ws| {
        WorkspaceDeps::new(ws, ApprovalPolicy::Never)
            .with_asker(counting_asker(&asked, Approval::Allow))
    });
    for (tool, args) in [
        ("write_file", json!({"path": "a.txt", "content": "x"})),
        (
            "edit_file",
            json!({"path": "a.txt", "old_text": "x", "new_text": "y"}),
        ),
        ("shell", json!({"command": "touch b.txt"})),
    ] {
        let msg = fx.err(tool, args).await;
        assert!(msg.contains("approval policy \"deny\""), "{msg}");
    }
    assert!(!fx.ws.join("a.txt").exists());
    assert!(!fx.ws.join("b.txt").exists());
    assert_eq!(asked.load(Ordering::SeqCst), 0);
    fx.ok("list_dir", json!({})).await;
    fx.ok("find_files", json!({"pattern": "*"})).await;
}

#[tokio::test]
async fn a_panicking_asker_fails_the_approval_check() {
    let fx = Fixture::with_deps(|ws| {
        WorkspaceDeps::new(ws, ApprovalPolicy::Mutating)
            .with_asker(|_call| panic!("terminal went away"))
    });
    let call = ToolCallPart::new("c", "write_file", json!({"path": "a.txt", "content": "x"}));
    let outcomes = run_tools_with(&[call], &fx.registry, &fx.deps, &ExecOptions::default()).await;
    assert!(outcomes[0].result.is_error);
    assert_eq!(
        outcomes[0].error.as_ref().map(|e| e.kind()),
        Some(ToolErrorKind::ApprovalFailed)
    );
    assert!(!fx.ws.join("a.txt").exists());
}
