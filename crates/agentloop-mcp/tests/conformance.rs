//! The official MCP conformance suite (`@modelcontextprotocol/conformance` 0.1.16, run on the
//! Node 22 that `.ci/setup-mcp-conformance` installs) against the `conformance_client` example,
//! which is built on the same `McpToolset` as the CLI: every client scenario the suite lists is
//! run, one at a time, and any failing scenario not listed with a reason in
//! `conformance-baseline.yml` fails the test, as does a listed one that now passes. The server
//! scenarios that apply to a tools-only server run against the built-in tools served over
//! streamable HTTP (`serve_builtin_tools_http`, behind `agentloop mcp-server --listen`), and
//! must all pass.
//!
//! The suite (or the built example) absent → one `SKIPPED suite` line (a failure in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

const SUITE: &str = "MCP conformance suite (client scenarios)";

/// Where `.ci/setup-mcp-conformance` installed the suite and Node 22, when it did.
fn conformance_dir() -> Option<PathBuf> {
    let dir =
        agentloop_testkit::external::suite_dir("AGENTLOOP_MCP_CONFORMANCE_DIR", "mcp-conformance")?;
    (node(&dir).exists() && suite_js(&dir).exists()).then_some(dir)
}

fn node(dir: &Path) -> PathBuf {
    dir.join("node_modules/node/bin/node")
}

fn suite_js(dir: &Path) -> PathBuf {
    dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js")
}

/// The example binary, built next to this test by `cargo test` (examples are built unless a
/// single test target is selected).
fn example() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let path = profile_dir.join("examples").join(format!(
        "conformance_client{}",
        std::env::consts::EXE_SUFFIX
    ));
    path.exists().then_some(path)
}

/// `scenario → reason` from the baseline; every entry must carry a reason comment.
fn baseline() -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance-baseline.yml");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut entries = BTreeMap::new();
    let mut in_client = false;
    for line in text.lines() {
        if !line.starts_with(' ') && !line.starts_with('#') && !line.trim().is_empty() {
            in_client = line.trim() == "client:";
            continue;
        }
        let Some(entry) = line.trim().strip_prefix("- ") else {
            continue;
        };
        let (name, reason) = entry.split_once('#').unwrap_or((entry, ""));
        let (name, reason) = (name.trim(), reason.trim());
        assert!(
            !reason.is_empty(),
            "baseline entry `{name}` has no reason: add `# why` on its line"
        );
        if in_client {
            entries.insert(name.to_owned(), reason.to_owned());
        } else {
            // A server entry must not name a scenario this test requires to pass.
            assert!(
                !SERVER_SCENARIOS.contains(&name),
                "server scenario `{name}` is required to pass; it cannot be in the baseline"
            );
        }
    }
    entries
}

async fn suite(dir: &Path, args: &[&str], cwd: &Path) -> std::process::Output {
    let run = tokio::process::Command::new(node(dir))
        .arg(suite_js(dir))
        .args(args)
        .current_dir(cwd)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(180), run)
        .await
        .unwrap_or_else(|_| panic!("the conformance suite did not finish: {args:?}"))
        .unwrap()
}

/// The client scenarios `conformance list` names.
async fn client_scenarios(dir: &Path, cwd: &Path) -> Vec<String> {
    let out = suite(dir, &["list"], cwd).await;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut names = Vec::new();
    let mut in_client = false;
    for line in text.lines() {
        if line.starts_with("Client scenarios") {
            in_client = true;
        } else if !line.starts_with(' ') {
            in_client = false;
        } else if in_client && let Some(item) = line.trim().strip_prefix("- ") {
            names.push(
                item.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
    }
    assert!(!names.is_empty(), "no client scenarios in:\n{text}");
    names
}

/// Runs one client scenario; returns (checks passed, failure lines).
async fn run_scenario(dir: &Path, client: &Path, name: &str, cwd: &Path) -> (usize, Vec<String>) {
    let client = client.to_str().unwrap();
    run_suite(
        dir,
        &["client", "--command", client, "--scenario", name],
        cwd,
    )
    .await
}

/// Runs the suite with `args` plus an output directory; returns (checks passed, failure lines).
async fn run_suite(dir: &Path, args: &[&str], cwd: &Path) -> (usize, Vec<String>) {
    let out_dir = tempfile::tempdir_in(cwd).unwrap();
    let out_path = out_dir.path().to_str().unwrap().to_owned();
    let mut args = args.to_vec();
    args.extend(["-o", &out_path]);
    suite(dir, &args, cwd).await;
    let mut passed = 0;
    let mut failed = Vec::new();
    for checks in find_files(out_dir.path(), "checks.json") {
        let checks: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&checks).unwrap()).unwrap();
        for check in checks.as_array().into_iter().flatten() {
            match check["status"].as_str() {
                Some("SUCCESS") => passed += 1,
                Some("FAILURE" | "WARNING") => failed.push(format!(
                    "{} {}: {}",
                    check["status"].as_str().unwrap_or_default(),
                    check["id"].as_str().unwrap_or_default(),
                    check["errorMessage"].as_str().unwrap_or_default()
                )),
                _ => {}
            }
        }
    }
    if passed == 0 && failed.is_empty() {
        failed.push("the suite recorded no result".into());
    }
    (passed, failed)
}

fn find_files(dir: &Path, file: &str) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(find_files(&path, file));
        } else if path.file_name().is_some_and(|n| n == file) {
            found.push(path);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_scenario_passes_or_is_in_the_baseline() {
    let Some(dir) = conformance_dir() else {
        agentloop_testkit::external::skip_suite(
            SUITE,
            "the pinned conformance suite and Node 22 are not installed",
            "run .ci/setup-mcp-conformance (or set AGENTLOOP_MCP_CONFORMANCE_DIR)",
        );
        return;
    };
    let Some(client) = example() else {
        agentloop_testkit::external::skip_suite(
            SUITE,
            "the conformance_client example is not built",
            "run `cargo test -p agentloop-mcp` (which builds the examples), or \
             `cargo build -p agentloop-mcp --example conformance_client` first",
        );
        return;
    };
    let expected = baseline();
    let work = tempfile::tempdir().unwrap();
    let scenarios = client_scenarios(&dir, work.path()).await;
    let mut problems = Vec::new();
    let (mut passed_scenarios, mut passed_checks) = (0, 0);
    for name in &scenarios {
        let (mut passed, mut failed) = run_scenario(&dir, &client, name, work.path()).await;
        if !failed.is_empty() && !expected.contains_key(name) {
            // The suite times reconnections on the wall clock; a loaded machine gets one more try.
            eprintln!("{name} failed once ({failed:?}); trying again");
            (passed, failed) = run_scenario(&dir, &client, name, work.path()).await;
        }
        passed_checks += passed;
        match (failed.is_empty(), expected.get(name)) {
            (true, None) => passed_scenarios += 1,
            (false, Some(_)) => {}
            (true, Some(reason)) => problems.push(format!(
                "{name} now passes: remove it from the baseline (it said: {reason})"
            )),
            (false, None) => problems.push(format!("{name} failed: {}", failed.join("; "))),
        }
    }
    for name in expected.keys().filter(|n| !scenarios.contains(n)) {
        problems.push(format!(
            "baseline entry {name} is not a scenario of the suite"
        ));
    }
    eprintln!(
        "MCP conformance (client): {passed_scenarios} of {} scenarios pass ({passed_checks} checks); \
         {} expected failures in the baseline",
        scenarios.len(),
        expected.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The server scenarios that apply to a server offering only tools (the others test fixture
/// tools, resources, prompts, logging or completions the built-in tools server does not have;
/// the baseline's `server:` list names them with reasons).
const SERVER_SCENARIOS: [&str; 5] = [
    "server-initialize",
    "ping",
    "tools-list",
    "server-sse-multiple-streams",
    "dns-rebinding-protection",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_tools_server_passes_the_server_scenarios_of_a_tools_server() {
    let Some(dir) = conformance_dir() else {
        agentloop_testkit::external::skip_suite(
            "MCP conformance suite (server scenarios)",
            "the pinned conformance suite and Node 22 are not installed",
            "run .ci/setup-mcp-conformance (or set AGENTLOOP_MCP_CONFORMANCE_DIR)",
        );
        return;
    };
    let _ = baseline(); // the baseline must stay well-formed for the suite's own use
    let workspace_dir = tempfile::tempdir().unwrap();
    let workspace = agentloop::builtin::Workspace::new(workspace_dir.path()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    tokio::spawn(agentloop_mcp::serve_builtin_tools_http(
        workspace,
        agentloop::builtin::ApprovalPolicy::Never,
        listener,
        agentloop_mcp::HttpServeOptions::default(),
    ));
    let work = tempfile::tempdir().unwrap();
    let mut problems = Vec::new();
    let mut checks = 0;
    for name in SERVER_SCENARIOS {
        let (passed, failed) = run_suite(
            &dir,
            &["server", "--url", &url, "--scenario", name],
            work.path(),
        )
        .await;
        checks += passed;
        if !failed.is_empty() {
            problems.push(format!("{name} failed: {}", failed.join("; ")));
        }
    }
    eprintln!(
        "MCP conformance (server, built-in tools over HTTP): {} of {} scenarios pass ({checks} checks)",
        SERVER_SCENARIOS.len() - problems.len(),
        SERVER_SCENARIOS.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
