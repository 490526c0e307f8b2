//! Test suites that need something outside the Rust toolchain (a PostgreSQL server, the Restate
//! server, Node.js MCP servers, a llama.cpp server) ask here whether to run.
//!
//! The rule: `cargo test --workspace` on a machine without the service still passes, and says in
//! one line per suite what it skipped and what to install; CI (`.ci/run`) sets
//! `AGENTLOOP_REQUIRE_SUITES=1`, and then a missing service fails the test instead of skipping it,
//! so a suite can never be skipped silently where it must run.
//!
//! The line is written straight to the process's standard error (not through `eprintln!`, which
//! the test harness captures), so it shows in the plain `cargo test` output.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// The environment variable that turns a skipped external suite into a failure.
pub const REQUIRE_SUITES_ENV: &str = "AGENTLOOP_REQUIRE_SUITES";

/// Whether skipped external suites must fail (`AGENTLOOP_REQUIRE_SUITES` is set to anything but
/// `0` or the empty string).
pub fn suites_required() -> bool {
    std::env::var(REQUIRE_SUITES_ENV).is_ok_and(|v| !v.is_empty() && v != "0")
}

/// Reports that `suite` cannot run because `missing` is absent, with `hint` saying how to get it.
///
/// Returns normally (the caller then returns early from its test) unless external suites are
/// required, in which case it panics with the same text.
///
/// ```no_run
/// # fn postgres_url() -> Option<String> { None }
/// let Some(url) = postgres_url() else {
///     agentloop_testkit::external::skip_suite(
///         "session store on PostgreSQL",
///         "AGENTLOOP_TEST_POSTGRES_URL is not set",
///         "run .ci/run, or start PostgreSQL and set AGENTLOOP_TEST_POSTGRES_URL",
///     );
///     return;
/// };
/// # let _ = url;
/// ```
pub fn skip_suite(suite: &str, missing: &str, hint: &str) {
    let line = format!("SKIPPED suite '{suite}': {missing} ({hint})");
    if suites_required() {
        panic!("{line}, but {REQUIRE_SUITES_ENV} is set: this suite must run here");
    }
    // One line, straight to fd 2, so the harness's capture does not swallow it.
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
}

/// The cache the `.ci/setup-*` scripts install external suites in: `AGENTLOOP_CI_CACHE`, else
/// `$HOME/.cache/agentloop-ci`; `None` when neither variable is set.
pub fn ci_cache_dir() -> Option<PathBuf> {
    std::env::var_os("AGENTLOOP_CI_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/agentloop-ci")))
}

/// Where a suite's `.ci/setup-*` script installed it: the directory `env_var` names when it is
/// set (a developer's own install), else `subdir` of [`ci_cache_dir`]. Whether anything is
/// there is the caller's to check.
pub fn suite_dir(env_var: &str, subdir: &str) -> Option<PathBuf> {
    std::env::var_os(env_var)
        .map(PathBuf::from)
        .or_else(|| Some(ci_cache_dir()?.join(subdir)))
}

/// Whether `node --version` runs (Node.js is on the `PATH`).
pub fn node_runs() -> bool {
    Command::new("node")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The directory the pinned Node MCP packages are installed in (`node_modules/…` below it):
/// `AGENTLOOP_MCP_SERVERS_DIR`, else `${AGENTLOOP_CI_CACHE:-$HOME/.cache/agentloop-ci}/mcp`
/// (where `.ci/setup-mcp-servers` puts them) — returned only when `node` runs and `package`
/// (a path below the directory, e.g.
/// `node_modules/@modelcontextprotocol/sdk/package.json`) exists.
pub fn node_package_dir(package: &str) -> Option<PathBuf> {
    let dir = suite_dir("AGENTLOOP_MCP_SERVERS_DIR", "mcp")?;
    (node_runs() && dir.join(package).exists()).then_some(dir)
}

/// [`node_package_dir`], or `None` after reporting `suite` skipped ([`skip_suite`]): the suites
/// that need the pinned Node MCP packages start with it.
pub fn node_package_dir_or_skip(package: &str, suite: &str) -> Option<PathBuf> {
    let dir = node_package_dir(package);
    if dir.is_none() {
        skip_suite(
            suite,
            &format!("node or {package} is not installed"),
            "run .ci/setup-mcp-servers (or set AGENTLOOP_MCP_SERVERS_DIR)",
        );
    }
    dir
}
