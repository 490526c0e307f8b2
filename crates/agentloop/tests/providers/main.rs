//! The provider tests in one binary: the request bodies each wire builds (insta snapshots in
//! `snapshots/`), each provider's conformance against the recorded fixture corpus, faults,
//! connection reuse and HTTP versions, provider data across providers, and the replay of the
//! fuzzers' regression inputs. One module per former test file (`cargo test -p agentloop --test
//! providers -- provider_faults::` runs one of them).

#[path = "../support/mod.rs"]
mod support;

/// The name the test harness gives test `name` of the module whose `module_path!()` is
/// `module_path`: that path without this binary's crate name, then `name`. A test that starts this
/// binary again to run one of its tests alone passes it with `--exact`.
pub fn test_name(module_path: &str, name: &str) -> String {
    match module_path.split_once("::") {
        Some((_crate, module)) => format!("{module}::{name}"),
        None => name.to_owned(),
    }
}

mod anthropic_request;
mod conformance_anthropic;
mod conformance_gemini;
mod conformance_openai_chat;
mod conformance_openai_responses;
mod connection_reuse;
mod cross_provider;
mod fuzz_regressions;
mod gemini_request;
mod http_version;
mod openai_chat_request;
mod openai_responses_request;
mod provider_data;
mod provider_faults;
mod reply_limits;
mod transport;
