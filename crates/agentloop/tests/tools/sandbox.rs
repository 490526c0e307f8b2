//! The shell tool's sandbox and environment, with real processes: in
//! the default `workspace-write` mode a command cannot write outside the workspace (and the
//! temporary directory) and cannot connect to a loopback port, yet can build and run a small C
//! project inside the workspace; `read-only` refuses writes inside too; `full-access` does
//! neither (which also shows the refusals are the sandbox's doing). Credentials in the agent's
//! environment do not reach the command unless allowed by name.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentloop::builtin::{self, SandboxMode, ShellOptions, Workspace};
use agentloop::tooling::{Deps, Registry, run_tools};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use serde_json::json;

/// A directory outside both the workspace and the temporary directory (which the sandbox lets
/// commands write to): the test target's own scratch area.
fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

fn sandbox_available() -> bool {
    match builtin::sandbox_support(SandboxMode::WorkspaceWrite) {
        Ok(()) => true,
        Err(why) => {
            agentloop_testkit::external::skip_suite(
                "shell sandbox (Landlock)",
                &format!("the kernel cannot enforce the sandbox: {why}"),
                "run on Linux 6.7+ with Landlock enabled (lsm=landlock,...)",
            );
            false
        }
    }
}

async fn shell(ws: &Path, options: ShellOptions, command: &str) -> ToolResultPart {
    let workspace = Workspace::new(ws).unwrap();
    let registry = Registry::new(builtin::tools_with::<Deps>(&workspace, &options)).unwrap();
    let call = ToolCallPart::new(
        "s",
        "shell",
        json!({"command": command, "timeout_secs": 120}),
    );
    run_tools(&[call], &registry, &Arc::new(Deps::new()), None)
        .await
        .remove(0)
}

struct Dirs {
    _root: tempfile::TempDir,
    ws: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let root = scratch();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Dirs {
        ws,
        outside,
        _root: root,
    }
}

#[tokio::test]
async fn writes_outside_the_workspace_are_refused_inside_allowed() {
    if !sandbox_available() {
        return;
    }
    let d = dirs();
    let target = d.outside.join("escaped.txt");
    let command = format!(
        "echo in > inside.txt; echo out > '{}'; t=\"${{TMPDIR:-/tmp}}/agentloop-sbx-$$\"; touch \"$t\" && rm \"$t\" && echo tmp-ok; cat inside.txt",
        target.display()
    );
    let r = shell(&d.ws, ShellOptions::default(), &command).await;
    assert!(!target.exists(), "the command wrote outside: {}", r.content);
    assert!(r.content.contains("Permission denied"), "{}", r.content);
    assert!(r.content.contains("tmp-ok"), "{}", r.content);
    assert_eq!(
        std::fs::read_to_string(d.ws.join("inside.txt")).unwrap(),
        "in\n"
    );

    // read-only: not even the workspace.
    let r = shell(
        &d.ws,
        ShellOptions::default().sandbox(SandboxMode::ReadOnly),
        "echo x > ro.txt; cat inside.txt",
    )
    .await;
    assert!(!d.ws.join("ro.txt").exists(), "{}", r.content);
    assert!(
        r.content.contains("in\n"),
        "reading still works: {}",
        r.content
    );

    // full-access: the same write goes through (so the refusal above is the sandbox's).
    let r = shell(
        &d.ws,
        ShellOptions::default().sandbox(SandboxMode::FullAccess),
        &command,
    )
    .await;
    assert!(target.exists(), "{}", r.content);
}

/// Tries to connect to `port` on 127.0.0.1 from the command and prints the outcome.
fn connect_command(port: u16) -> String {
    format!(
        "if bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port}' 2>/dev/null; then echo CONNECTED; else echo REFUSED; fi"
    )
}

#[tokio::test]
async fn connecting_to_a_loopback_port_is_refused() {
    if !sandbox_available() {
        return;
    }
    let d = dirs();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();

    let r = shell(&d.ws, ShellOptions::default(), &connect_command(port)).await;
    assert!(r.content.contains("REFUSED"), "{}", r.content);
    assert!(
        listener.accept().is_err(),
        "a connection reached the listener"
    );
    let r = shell(
        &d.ws,
        ShellOptions::default().sandbox(SandboxMode::ReadOnly),
        &connect_command(port),
    )
    .await;
    assert!(r.content.contains("REFUSED"), "{}", r.content);

    let r = shell(
        &d.ws,
        ShellOptions::default().sandbox(SandboxMode::FullAccess),
        &connect_command(port),
    )
    .await;
    assert!(r.content.contains("CONNECTED"), "{}", r.content);
}

#[tokio::test]
async fn a_small_c_project_builds_and_its_tests_run_inside_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    if std::process::Command::new("cc")
        .arg("--version")
        .output()
        .is_err()
        || std::process::Command::new("make")
            .arg("--version")
            .output()
            .is_err()
    {
        eprintln!("skipping: cc or make is not installed");
        return;
    }
    let d = dirs();
    std::fs::write(
        d.ws.join("add.c"),
        "int add(int a, int b) { return a + b; }\n",
    )
    .unwrap();
    std::fs::write(
        d.ws.join("test.c"),
        "#include <stdio.h>\nint add(int, int);\nint main(void) { if (add(2, 3) != 5) return 1; puts(\"tests passed\"); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        d.ws.join("Makefile"),
        "test: test_bin\n\t./test_bin\n\ntest_bin: add.o test.o\n\tcc -o $@ add.o test.o\n\n%.o: %.c\n\tcc -c -o $@ $<\n",
    )
    .unwrap();
    let r = shell(&d.ws, ShellOptions::default(), "make test").await;
    assert!(!r.is_error, "{}", r.content);
    assert!(r.content.contains("tests passed"), "{}", r.content);
    assert!(r.content.contains("[exit code: 0]"), "{}", r.content);
    assert!(d.ws.join("test_bin").exists());
}

/// Runs this test binary again with credentials in its environment (setting variables in this
/// process would need `unsafe`), filtered to `inner_env_is_scrubbed`: the command's
/// environment is built from an allow-list, credential-looking names and `user:password@` URL
/// values are dropped even from it, and only names allowed explicitly pass whatever they are.
#[test]
fn credentials_do_not_reach_the_command() {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &crate::test_name(module_path!(), "inner_env_is_scrubbed"),
            "--nocapture",
            "--include-ignored",
        ])
        .env("AGENTLOOP_TEST_INNER", "1")
        .env("OPENAI_API_KEY", "sk-openai-secret")
        .env("GITHUB_TOKEN", "ghp-secret")
        .env("DB_PASSWORD", "pw-secret")
        .env("MY_SERVICE_CODE", "hidden-by-name")
        .env("ALLOWED_TOKEN", "allowed-value")
        .env("HARMLESS_SETTING", "not-on-the-allow-list")
        .env("PGPASSWORD", "pg-secret")
        .env("MYSQL_PWD", "mysql-secret")
        .env("SENTRY_DSN", "dsn-secret")
        .env("SLACK_WEBHOOK_URL", "webhook-secret")
        .env("REGISTRY_AUTH", "auth-secret")
        .env("SESSION_COOKIE", "cookie-secret")
        .env("NPM_CONFIG__AUTH", "npm-secret")
        .env("SSH_AUTH_SOCK", "/run/ssh-agent-secret.sock")
        .env("TZ", "http://user:url-secret@example.com/")
        .env("LC_PAPER", "lc-value")
        .output()
        .unwrap();
    crate::assert_inner_passed(&out);
}

#[tokio::test]
#[ignore = "run by credentials_do_not_reach_the_command with a prepared environment"]
async fn inner_env_is_scrubbed() {
    if std::env::var_os("AGENTLOOP_TEST_INNER").is_none() {
        return;
    }
    let d = dirs();
    let options = ShellOptions::default()
        .allow_env("ALLOWED_TOKEN")
        .hide_env("MY_SERVICE_CODE");
    let r = shell(&d.ws, options, "env; echo \"key=$OPENAI_API_KEY\"").await;
    for secret in [
        "sk-openai-secret",
        "ghp-secret",
        "pw-secret",
        "hidden-by-name",
        "not-on-the-allow-list",
        "pg-secret",
        "mysql-secret",
        "dsn-secret",
        "webhook-secret",
        "auth-secret",
        "cookie-secret",
        "npm-secret",
        "ssh-agent-secret",
        "url-secret",
    ] {
        assert!(
            !r.content.contains(secret),
            "{secret} leaked: {}",
            r.content
        );
    }
    assert!(
        r.content.contains("ALLOWED_TOKEN=allowed-value"),
        "{}",
        r.content
    );
    assert!(r.content.contains("LC_PAPER=lc-value"), "{}", r.content);
    assert!(r.content.contains("PATH="), "{}", r.content);
}

/// The sandbox's cost per shell call (not an assertion: a measurement for docs/BENCHMARKS.md).
/// Run: `cargo test -p agentloop --test tools -- --ignored --nocapture spawn_cost`
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement, run by hand"]
async fn spawn_cost() {
    const CALLS: u32 = 200;
    let d = dirs();
    for mode in [
        SandboxMode::FullAccess,
        SandboxMode::WorkspaceWrite,
        SandboxMode::FullAccess,
        SandboxMode::WorkspaceWrite,
    ] {
        let workspace = Workspace::new(&d.ws).unwrap();
        let options = ShellOptions::default().sandbox(mode);
        let registry = Registry::new(builtin::tools_with::<Deps>(&workspace, &options)).unwrap();
        let deps = Arc::new(Deps::new());
        let call = [ToolCallPart::new("s", "shell", json!({"command": "true"}))];
        let started = std::time::Instant::now();
        for _ in 0..CALLS {
            let out = run_tools(&call, &registry, &deps, None).await;
            assert!(!out[0].is_error, "{}", out[0].content);
        }
        let per_call = started.elapsed() / CALLS;
        println!("shell `true`, {mode}: {per_call:?} per call ({CALLS} calls)");
    }
}
