//! The built-in tools with real files and processes in one binary: the tools themselves, file
//! size limits, races on paths, the confinement holes closed in `hardening`, the shell sandbox, and no orphans after a timeout, an abort or a
//! normal end. (`kill_shell_processes`, which kills every command of the process, has its own
//! binary, `orphans_exit.rs`, so it cannot hit these tests' commands.) One module per former
//! test file (`cargo test -p agentloop --test tools -- sandbox::` runs one of them).

/// The name the test harness gives test `name` of the module whose `module_path!()` is
/// `module_path`: that path without this binary's crate name, then `name`. A test that starts this
/// binary again to run one of its tests alone passes it with `--exact`.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

/// Asserts that a run of this binary filtered to one test (an outer test's inner half) passed
/// that one test.
pub fn assert_inner_passed(out: &std::process::Output) {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}

mod builtin_tools;
mod file_limits;
mod file_races;
mod hardening;
mod jobs;
mod orphans;
mod sandbox;
