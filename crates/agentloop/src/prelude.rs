//! The common path in one `use`: an agent with a provider, typed tools, typed output and a
//! session store.
//!
//! ```no_run
//! use agentloop::prelude::*;
//!
//! /// Return the weather for a city.
//! #[tool]
//! async fn get_weather(
//!     /// City name, e.g. "Paris".
//!     city: String,
//! ) -> String {
//!     format!("sunny in {city}")
//! }
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let agent = AgentLoop::new(AgentLoopConfig::default(), OpenAiChat::from_env()?)
//!     .with_tools([get_weather_tool()])?;
//! let outcome = agent.run(vec![Message::user("Weather in Paris?")], vec![]).await?;
//! println!("{}", outcome.final_text());
//! # Ok(()) }
//! ```
//!
//! It holds the types a first program names; everything else stays in its module
//! ([`agent`](crate::agent), [`tooling`](crate::tooling), [`session`](crate::session), …).

pub use crate::agent::output::{Output, OutputError, OutputStrategy, TypedOutcome};
pub use crate::agent::{
    AbortSignal, AgentError, AgentEvent, AgentLoop, AgentLoopConfig, Extension, RunOutcome,
    RunStop, ToolCallDecision, UsageLimits,
};
#[cfg(feature = "blocking")]
pub use crate::blocking::BlockingAgent;
pub use crate::model::{Model, ModelError, ReasoningLevel};
#[cfg(feature = "anthropic")]
pub use crate::providers::Anthropic;
#[cfg(feature = "gemini")]
pub use crate::providers::Gemini;
#[cfg(feature = "openai-chat")]
pub use crate::providers::OpenAiChat;
#[cfg(feature = "openai-responses")]
pub use crate::providers::OpenAiResponses;
#[cfg(feature = "http")]
pub use crate::providers::ProviderConfig;
#[cfg(feature = "sqlite")]
pub use crate::session::SqliteStore;
pub use crate::session::{SessionRecorder, SessionStore};
pub use crate::tool;
pub use crate::tooling::{Approval, Deps, Registry, ToolDeps, ToolError, ToolSpec};
pub use crate::transcript::{Message, StopReason, Usage};
