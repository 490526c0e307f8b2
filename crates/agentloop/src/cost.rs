//! Spend: the cost in US dollars of each assistant message (from the `genai-prices` crate, which
//! carries pydantic's maintained price table) and the per-run [`UsageLimits`] the agent loop
//! checks before every model call.
//!
//! Token counting follows our [`Usage`] shape: `input_tokens` are the prompt tokens *not* served
//! from the cache, and cache reads/writes are counted separately. Prices and limits therefore add
//! them back up where a total prompt size is meant (the price table, like the OpenTelemetry GenAI
//! conventions, counts cached tokens inside the input tokens).

use std::collections::HashSet;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::transcript::{Message, Usage};

/// The provider id of the price table for one of our provider names (`openai_chat` and
/// `openai_responses` are both OpenAI), or the name itself for anything else.
pub fn price_provider_id(provider: &str) -> &str {
    match provider {
        "openai_chat" | "openai_responses" => "openai",
        "gemini" => "google",
        other => other,
    }
}

/// The cost in USD of `usage` on `model` served by `provider` (one of our provider names, e.g.
/// `"anthropic"`, `"openai_chat"`), priced at the rates in effect at `timestamp_ms` (0: now).
/// `None` when the price table does not know the model.
///
/// ```
/// use agentloop::cost::price;
/// use agentloop::transcript::Usage;
///
/// let usage = Usage { input_tokens: 1_000_000, ..Usage::default() };
/// let cost = price("gpt-4o", "openai_chat", &usage, 0).unwrap();
/// assert!((cost - 2.5).abs() < 1e-9);
/// ```
pub fn price(model: &str, provider: &str, usage: &Usage, timestamp_ms: u64) -> Option<f64> {
    use genai_prices::{PriceRequest, UsageKey};
    // A model the table does not know stays unknown for the life of the process (the table is
    // compiled in): remember it, so a local or mock model costs one failed lookup, not one per
    // message.
    static UNPRICED: Mutex<Option<HashSet<(String, String)>>> = Mutex::new(None);
    let unpriced = || UNPRICED.lock().unwrap_or_else(PoisonError::into_inner);
    if unpriced()
        .as_ref()
        .is_some_and(|set| set.contains(&(provider.to_owned(), model.to_owned())))
    {
        return None;
    }
    let mut table = genai_prices::Usage::new();
    let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
    table.insert(UsageKey::INPUT_TOKENS, input as f64);
    table.insert(UsageKey::OUTPUT_TOKENS, usage.output_tokens as f64);
    if usage.cache_read_tokens > 0 {
        table.insert(UsageKey::CACHE_READ_TOKENS, usage.cache_read_tokens as f64);
    }
    if usage.cache_write_tokens > 0 {
        table.insert(
            UsageKey::CACHE_WRITE_TOKENS,
            usage.cache_write_tokens as f64,
        );
    }
    let mut request = PriceRequest::new(model, &table);
    if !provider.is_empty() {
        request = request.with_provider_id(price_provider_id(provider));
    }
    if timestamp_ms > 0 {
        request = request.with_timestamp(UNIX_EPOCH + Duration::from_millis(timestamp_ms));
    }
    match genai_prices::calculate(&request) {
        Ok(calculation) if calculation.total_price.is_finite() => Some(calculation.total_price),
        Ok(_) => None,
        Err(error) => {
            tracing::debug!(%model, %provider, %error, "no price for this model");
            unpriced()
                .get_or_insert_with(HashSet::new)
                .insert((provider.to_owned(), model.to_owned()));
            None
        }
    }
}

/// Gives an assistant message's usage its cost when the provider did not report one (a cost the
/// provider reports wins). Messages without usage, model or provider are left alone.
pub fn fill_cost(message: &mut Message) {
    let (Some(usage), Some(model)) = (&message.usage, &message.model) else {
        return;
    };
    if usage.cost_usd.is_some() {
        return;
    }
    let provider = message.provider.as_deref().unwrap_or_default();
    // Scripted and test models have no price; skip the table lookup for them.
    if matches!(provider, "scripted" | "fn" | "unknown") {
        return;
    }
    let cost = price(model, provider, usage, message.timestamp_ms);
    if let Some(usage) = &mut message.usage {
        usage.cost_usd = cost;
    }
}

/// Which ceiling of [`UsageLimits`] a run reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum UsageLimit {
    /// Model calls ([`UsageLimits::max_requests`]).
    Requests,
    /// Prompt tokens, cached ones included ([`UsageLimits::max_input_tokens`]).
    InputTokens,
    /// Generated tokens ([`UsageLimits::max_output_tokens`]).
    OutputTokens,
    /// Prompt plus generated tokens ([`UsageLimits::max_total_tokens`]).
    TotalTokens,
    /// Cost in US dollars ([`UsageLimits::max_cost_usd`]).
    CostUsd,
}

impl UsageLimit {
    /// The snake_case name (`"requests"`, `"input_tokens"`, …, `"cost_usd"`).
    pub fn as_str(self) -> &'static str {
        match self {
            UsageLimit::Requests => "requests",
            UsageLimit::InputTokens => "input_tokens",
            UsageLimit::OutputTokens => "output_tokens",
            UsageLimit::TotalTokens => "total_tokens",
            UsageLimit::CostUsd => "cost_usd",
        }
    }
}

impl UsageLimit {
    /// Whether the ceiling counts whole things (requests, tokens) rather than US dollars: its
    /// amounts are whole numbers, shown and serialized without a fraction.
    pub fn is_count(self) -> bool {
        self != UsageLimit::CostUsd
    }
}

impl std::fmt::Display for UsageLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Ceilings on what one run may spend. `Default` sets none.
///
/// The loop checks them before every model call: a run that has made `max_requests` calls, or
/// has already used at least the token or cost ceiling, ends with
/// [`RunStop::UsageLimit`](crate::agent::RunStop::UsageLimit) instead of making the next call —
/// everything completed so far is kept. A single call can still take a run past a token or cost
/// ceiling (its size is only known once it is answered); the limit then stops the call after it.
/// Messages without a known price count as free towards `max_cost_usd`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UsageLimits {
    /// Model calls per run — the same count as
    /// [`AgentLoopConfig::max_turns`](crate::agent::AgentLoopConfig::max_turns), reported as a
    /// spending ceiling ([`UsageLimit::Requests`]) instead of
    /// [`RunStop::MaxTurns`](crate::agent::RunStop::MaxTurns).
    pub max_requests: Option<u32>,
    /// Prompt tokens per run (uncached, cache reads and cache writes together).
    pub max_input_tokens: Option<u64>,
    /// Generated tokens per run (every model call of the run together; the cap on each single
    /// call is [`AgentLoopConfig::max_output_tokens_per_call`](crate::agent::AgentLoopConfig::max_output_tokens_per_call)).
    pub max_output_tokens: Option<u64>,
    /// Prompt plus generated tokens per run.
    pub max_total_tokens: Option<u64>,
    /// Cost per run in US dollars.
    pub max_cost_usd: Option<f64>,
}

impl UsageLimits {
    /// True when no ceiling is set.
    pub fn is_none(&self) -> bool {
        *self == UsageLimits::default()
    }

    /// A description of the first invalid ceiling, if any: every ceiling must be above zero (a
    /// zero ceiling would forbid the run's first model call) and a cost must be finite.
    pub fn validate(&self) -> Result<(), String> {
        let zero = [
            ("max_requests", self.max_requests == Some(0)),
            ("max_input_tokens", self.max_input_tokens == Some(0)),
            ("max_output_tokens", self.max_output_tokens == Some(0)),
            ("max_total_tokens", self.max_total_tokens == Some(0)),
        ];
        if let Some((name, _)) = zero.iter().find(|(_, is_zero)| *is_zero) {
            return Err(format!(
                "usage limit {name} must be at least 1 (use None for no ceiling)"
            ));
        }
        match self.max_cost_usd {
            Some(cost) if !cost.is_finite() || cost <= 0.0 => Err(format!(
                "usage limit max_cost_usd must be a finite amount above zero (got {cost})"
            )),
            _ => Ok(()),
        }
    }

    /// The ceiling a run with `requests` model calls made and `usage` used so far has reached,
    /// with the amount used and the limit; `None` when the next model call may go ahead.
    pub fn reached(&self, requests: u32, usage: &Usage) -> Option<(UsageLimit, f64, f64)> {
        let input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens;
        let counts = [
            (
                UsageLimit::Requests,
                self.max_requests.map(u64::from),
                u64::from(requests),
            ),
            (UsageLimit::InputTokens, self.max_input_tokens, input),
            (
                UsageLimit::OutputTokens,
                self.max_output_tokens,
                usage.output_tokens,
            ),
            (
                UsageLimit::TotalTokens,
                self.max_total_tokens,
                input + usage.output_tokens,
            ),
        ];
        for (which, limit, used) in counts {
            if let Some(limit) = limit {
                if used >= limit {
                    return Some((which, used as f64, limit as f64));
                }
            }
        }
        if let Some(limit) = self.max_cost_usd {
            let used = usage.cost_usd.unwrap_or(0.0);
            if used >= limit {
                return Some((UsageLimit::CostUsd, used, limit));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reached_names_the_first_ceiling_hit() {
        let limits = UsageLimits {
            max_requests: Some(3),
            max_total_tokens: Some(100),
            ..UsageLimits::default()
        };
        let usage = Usage {
            input_tokens: 40,
            cache_read_tokens: 50,
            output_tokens: 9,
            ..Usage::default()
        };
        assert_eq!(limits.reached(2, &usage), None);
        assert_eq!(
            limits.reached(3, &usage),
            Some((UsageLimit::Requests, 3.0, 3.0))
        );
        let more = Usage {
            output_tokens: 10,
            ..usage
        };
        assert_eq!(
            limits.reached(1, &more),
            Some((UsageLimit::TotalTokens, 100.0, 100.0))
        );
        assert!(UsageLimits::default().reached(u32::MAX, &more).is_none());
    }

    #[test]
    fn invalid_cost_ceilings_are_refused() {
        let zero = UsageLimits {
            max_output_tokens: Some(0),
            ..UsageLimits::default()
        };
        assert!(zero.validate().unwrap_err().contains("max_output_tokens"));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let limits = UsageLimits {
                max_cost_usd: Some(bad),
                ..UsageLimits::default()
            };
            assert!(limits.validate().is_err());
        }
    }
}
