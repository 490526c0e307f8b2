//! Fuzz target: see `agentloop::fuzzing::front_matter` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::front_matter(data));
