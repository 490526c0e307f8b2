//! Fuzz target: see `agentloop::fuzzing::openai_responses_stream` for the invariant it checks.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| agentloop::fuzzing::openai_responses_stream(data));
