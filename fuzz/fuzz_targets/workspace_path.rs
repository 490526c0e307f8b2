//! Fuzz target: see `agentloop::fuzzing::workspace_path` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::workspace_path(data));
