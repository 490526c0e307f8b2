//! Test support: the fixture server shared with the stdio test binary, and the model an agent
//! run in the tests talks to (chat completions on the testkit mock server).
pub mod fixture;

use std::time::Duration;

use agentloop::providers::{OpenAiChat, ProviderConfig, RetryPolicy};
use agentloop_testkit::MockServer;

/// A chat-completions model on the mock `server`: no retries, a 10 s idle timeout.
pub fn mock_model(server: &MockServer) -> OpenAiChat {
    OpenAiChat::new(
        ProviderConfig::new(server.openai_base_url())
            .api_key("test")
            .model("mock")
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10)),
    )
}
