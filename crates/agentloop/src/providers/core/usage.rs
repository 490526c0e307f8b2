//! Token usage mapping shared by the providers.

use crate::transcript::Usage;

/// Usage from counts where the input total *includes* the tokens read from the prompt cache
/// (OpenAI's `prompt_tokens`/`input_tokens` with `cached_tokens`, Gemini's `promptTokenCount`
/// with `cachedContentTokenCount`): the neutral [`Usage::input_tokens`] excludes them, so that
/// input and cache reads add up to what was sent and are priced apart.
///
/// ```
/// use agentloop::providers::core::usage_with_cached_input;
/// let usage = usage_with_cached_input(100, 40, 7);
/// assert_eq!((usage.input_tokens, usage.cache_read_tokens, usage.output_tokens), (60, 40, 7));
/// ```
pub fn usage_with_cached_input(input_total: u64, cached: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input_total.saturating_sub(cached),
        output_tokens: output,
        cache_read_tokens: cached,
        ..Usage::default()
    }
}
