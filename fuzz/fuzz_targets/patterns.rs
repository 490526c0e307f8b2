//! Fuzz target: see `agentloop::fuzzing::patterns` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::patterns(data));
