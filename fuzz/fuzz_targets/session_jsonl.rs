//! Fuzz target: see `agentloop::fuzzing::session_jsonl` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::session_jsonl(data));
