//! The session tests in one binary: the SQLite session store, the store conformance suite on
//! SQLite and on PostgreSQL (`store_conformance/`), and crash safety (a child process killed
//! mid-batch). One module per former test file (`cargo test -p agentloop --test sessions --
//! store_sqlite::` runs one of them).

#[path = "../store_conformance/mod.rs"]
mod store_conformance;

/// The name the test harness gives test `name` of the module whose `module_path!()` is
/// `module_path`: that path without this binary's crate name, then `name`. A test that starts this
/// binary again to run one of its tests alone passes it with `--exact`.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

mod session_crash;
mod sessions;
mod store_postgres;
mod store_sqlite;
