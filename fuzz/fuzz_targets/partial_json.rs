//! Fuzz target: see `agentloop::fuzzing::partial_json` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::partial_json(data));
