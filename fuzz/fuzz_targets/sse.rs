//! Fuzz target: see `agentloop::fuzzing::sse` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::sse(data));
