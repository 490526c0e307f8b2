//! [`AgentLoopConfig`]: every knob of a loop (the loop contract's fields, plus a few Rust-side ones).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::queue::QueueMode;
pub use crate::cost::{UsageLimit, UsageLimits};
use crate::model::{ApiKey, ReasoningLevel};
pub use crate::telemetry::TelemetryConfig;

/// How the tool calls of one assistant message are executed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolExecutionMode {
    /// One after another, in call order.
    Sequential,
    /// Concurrently (at most [`MAX_PARALLEL_TOOLS`](crate::tooling::MAX_PARALLEL_TOOLS) at a
    /// time), unless a called tool is not parallel-safe.
    #[default]
    Parallel,
}

/// Configuration of an [`AgentLoop`](crate::agent::AgentLoop). Build with `Default` and struct
/// update syntax:
///
/// ```
/// use agentloop::agent::AgentLoopConfig;
///
/// let config = AgentLoopConfig {
///     system_prompt: Some("You are terse.".into()),
///     max_turns: Some(10),
///     ..AgentLoopConfig::default()
/// };
/// assert_eq!(config.repeat_tool_call_limit, Some(3));
/// ```
#[derive(Clone, Debug)]
pub struct AgentLoopConfig {
    /// Model identifier (e.g. `"gpt-4o"`); `None` leaves it to the model object.
    pub model: Option<String>,
    /// System prompt. The tool-guidance section of the registered tools is appended to it.
    pub system_prompt: Option<String>,
    /// Sampling temperature, or `None` to send none.
    pub temperature: Option<f32>,
    /// Requested thinking level, or `None` for the provider's default.
    pub reasoning: Option<ReasoningLevel>,
    /// Maximum model calls per run, or `None` (the default) for no ceiling. Must be at least 1.
    ///
    /// It counts exactly what [`UsageLimits::max_requests`] counts (model calls of the run);
    /// the two differ only in how the stop is reported: reaching `max_turns` ends the run with
    /// [`RunStop::MaxTurns`](crate::agent::RunStop::MaxTurns) ("the agent still had work to
    /// do"), reaching `usage_limits.max_requests` with
    /// [`RunStop::UsageLimit`](crate::agent::RunStop::UsageLimit) of
    /// [`UsageLimit::Requests`] (a spending ceiling, beside tokens and cost). Set one of them;
    /// with both, the smaller stops the run (`max_turns` is checked first on a tie).
    pub max_turns: Option<u32>,
    /// How many times a tool call that failed with a retryable `ToolError` is re-run (with
    /// exponential backoff) before its error goes to the model.
    pub max_retries: u32,
    /// Stop when the same wholly failing batch of tool calls (same names and arguments, every
    /// result an error) repeats this many turns in a row. Default 3; `None` disables the check.
    pub repeat_tool_call_limit: Option<u32>,
    /// Sequential or parallel tool execution.
    pub tool_execution_mode: ToolExecutionMode,
    /// API key forwarded to the provider (`None`: the provider's configured key / environment).
    pub api_key: Option<ApiKey>,
    /// Output-token limit of **each model call** (sent to the provider as its `max_tokens` /
    /// `max_output_tokens`). Not to be confused with
    /// [`UsageLimits::max_output_tokens`], the generated tokens of a whole **run**.
    pub max_output_tokens_per_call: Option<u32>,
    /// The former name of [`max_output_tokens_per_call`](Self::max_output_tokens_per_call),
    /// still honoured when that one is `None`.
    #[deprecated(
        note = "per call, unlike `UsageLimits::max_output_tokens` (per run): use `max_output_tokens_per_call`"
    )]
    pub max_output_tokens: Option<u32>,
    /// A key that groups this conversation's requests for the provider's prompt cache (OpenAI's
    /// `prompt_cache_key`), typically the session id. `None`: the provider decides.
    pub prompt_cache_key: Option<String>,
    /// Time limit for tools that have none of their own (`None`: wait forever).
    pub default_tool_timeout: Option<Duration>,
    /// Delay before the first tool retry; doubled for each further one.
    pub tool_retry_backoff: Duration,
    /// How many steering messages one delivery takes.
    pub steering_mode: QueueMode,
    /// How many follow-up messages one delivery takes.
    pub follow_up_mode: QueueMode,
    /// Ceilings on requests, tokens and cost per run (`Default`: none).
    pub usage_limits: UsageLimits,
    /// What the run's OpenTelemetry GenAI spans carry (agent name, conversation id, contents).
    pub telemetry: TelemetryConfig,
    /// Context compaction (`None`, the default: never compact; an overflow error ends the run).
    pub compaction: Option<super::compaction::CompactionConfig>,
}

impl AgentLoopConfig {
    /// The output-token limit each model call is sent with:
    /// [`max_output_tokens_per_call`](Self::max_output_tokens_per_call), else the deprecated
    /// `max_output_tokens`.
    pub fn output_tokens_per_call(&self) -> Option<u32> {
        #[allow(deprecated)]
        self.max_output_tokens_per_call.or(self.max_output_tokens)
    }
}

// The deprecated field is still part of the struct: its own impls name it.
#[allow(deprecated)]
impl Default for AgentLoopConfig {
    fn default() -> Self {
        AgentLoopConfig {
            model: None,
            system_prompt: None,
            temperature: None,
            reasoning: None,
            max_turns: None,
            max_retries: 0,
            repeat_tool_call_limit: Some(3),
            tool_execution_mode: ToolExecutionMode::Parallel,
            api_key: None,
            max_output_tokens_per_call: None,
            max_output_tokens: None,
            prompt_cache_key: None,
            default_tool_timeout: None,
            tool_retry_backoff: Duration::from_millis(200),
            steering_mode: QueueMode::OneAtATime,
            follow_up_mode: QueueMode::OneAtATime,
            usage_limits: UsageLimits::default(),
            telemetry: TelemetryConfig::default(),
            compaction: None,
        }
    }
}
