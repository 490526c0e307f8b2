//! The agent-loop tests in one binary: events, abort, steering, limits, spend, hooks, guidance,
//! compaction, deferred tools and tool search, approval and its resumption in another process,
//! the tool executor, typed tools and typed output, the blocking view and the transcript's JSON
//! (insta snapshots in `snapshots/`). One module per former test file (`cargo test -p agentloop
//! --test agent -- steering::` runs one of them).
//!
//! Tests about the order of in-process events (scripted models, tools that sleep, aborts after a
//! delay; no sockets, child processes or blocking threads) run on Tokio's paused clock
//! (`start_paused = true`): their timers fire in order at once instead of in real time.

#[path = "../common/mod.rs"]
mod common;

/// The name the test harness gives test `name` of the module whose `module_path!()` is
/// `module_path`: that path without this binary's crate name, then `name`. A test that starts this
/// binary again to run one of its tests alone passes it with `--exact`.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

mod abort;
mod agent_events;
mod approval_resume;
mod blocking_view;
mod compaction;
mod deferred_tools;
mod guidance;
mod hooks;
mod library_api;
mod limits;
mod spend;
mod steering;
mod subagents;
mod tool_executor;
mod tool_search_loop;
mod transcript_json;
mod typed_output;
mod typed_tools;
mod typed_tools_schemas;
