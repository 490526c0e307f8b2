//! Context compaction: when a conversation approaches the model's context
//! window — or the provider rejects it as too long — the older turns are summarised by the model
//! into a structured summary that replaces them in the context, while the last turns stay
//! verbatim.
//!
//! The full history is never lost. The summary travels as a [`Role::Custom`] message whose
//! `custom_type` is `compaction:kept=K` (see [`CompactionEntry`]): a session recorder stores it
//! after every original message, and [`effective_context`] turns a stored history back into
//! what the model sees (the summary, the `K` messages before the entry, everything after it).
//! Readers that do not know about compaction see one more custom message, which they already
//! tolerate.
//!
//! The cut never separates a tool call from its result: [`split_point`] only cuts where every
//! call before the cut has its result before the cut. Applications can replace the summariser
//! with their own [`Compactor`].

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;

use crate::model::{
    Model, ModelError, ModelEvent, ModelRequest, StreamErrorKind, messages_for_model,
};
use crate::transcript::{Message, Part, Role, Usage};

/// `custom_type` prefix of a compaction entry.
pub const COMPACTION_TYPE: &str = "compaction";

/// When and how the loop compacts.
#[derive(Clone, Debug)]
pub struct CompactionConfig {
    /// The model's context window in tokens; `None`: looked up with [`context_window`] from the
    /// model name (no compaction by threshold when the model is unknown).
    pub context_window: Option<u64>,
    /// Fraction of the window at which compaction starts (e.g. 0.8).
    pub threshold: f64,
    /// Turns (assistant messages, with their prompts and tool results) kept verbatim.
    pub keep_recent_turns: usize,
    /// Who writes the summary (`None`: the agent's own model, see [`ModelCompactor`]).
    pub compactor: Option<Arc<dyn Compactor>>,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            context_window: None,
            threshold: 0.8,
            keep_recent_turns: 2,
            compactor: None,
        }
    }
}

/// Context windows (tokens) of well-known model families, by name prefix; the longest
/// matching prefix wins.
const WINDOWS: &[(&str, u64)] = &[
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini", 1_048_576),
    ("llama3", 8_192),
    ("llama-3", 128_000),
    ("qwen", 32_768),
    ("mistral", 32_768),
    ("deepseek", 128_000),
];

/// The context window of `model` from the built-in table (`None` when unknown).
pub fn context_window(model: &str) -> Option<u64> {
    let name = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    WINDOWS
        .iter()
        .filter(|(prefix, _)| name.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map(|(_, window)| *window)
}

/// Whether a model error says the request was longer than the context window (see
/// [`ModelError::is_context_overflow`]).
pub fn is_context_overflow(error: &ModelError) -> bool {
    error.is_context_overflow()
}

fn message_chars(message: &Message) -> usize {
    message
        .content
        .iter()
        .map(|part| match part {
            Part::Text { text, .. } => text.len(),
            Part::Thinking(t) => t.thinking.len(),
            Part::Image(_) => 4_000,
            Part::ToolCall(c) => c.tool_name.len() + c.arguments.to_json_string().len(),
            Part::ToolResult(r) => r.content.len() + 4_000 * r.images.len(),
            #[allow(unreachable_patterns)]
            _ => 0,
        })
        .sum::<usize>()
        + 16
}

/// Estimated tokens of `messages`: the provider's count for everything up to the last
/// assistant message that reported usage, plus about four characters per token after it.
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let last = messages
        .iter()
        .rposition(|m| m.role == Role::Assistant && m.usage.is_some());
    let (base, rest) = match last {
        Some(i) => {
            let usage = messages[i].usage.unwrap_or_default();
            (
                usage.input_tokens + usage.cache_read_tokens + usage.output_tokens,
                &messages[i + 1..],
            )
        }
        None => (0, messages),
    };
    base + rest.iter().map(message_chars).sum::<usize>().div_ceil(4) as u64
}

/// Where to cut `messages` so that the last `keep_turns` turns stay verbatim: an index `i > 0`
/// such that no tool call before `i` has its result at or after `i` (and none after answers
/// one before). `None` when there is nothing worth summarising.
pub fn split_point(messages: &[Message], keep_turns: usize) -> Option<usize> {
    let assistants: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, _)| i)
        .collect();
    let mut candidate = if keep_turns == 0 {
        messages.len()
    } else {
        *assistants.get(assistants.len().checked_sub(keep_turns)?)?
    };
    // Keep the prompt(s) that started the first kept turn with it.
    while candidate > 0
        && matches!(messages[candidate - 1].role, Role::User | Role::Custom)
        && !is_compaction(&messages[candidate - 1])
    {
        candidate -= 1;
    }
    (1..=candidate)
        .rev()
        .find(|&i| valid_cut(messages, i) && !(i == 1 && is_compaction(&messages[0])))
}

/// Whether a message counts towards an entry's `kept` (failed replies do not: the loop never
/// keeps them in its context, while a recorder stores them).
fn counts(message: &Message) -> bool {
    !(message.role == Role::Assistant
        && message.stop_reason == Some(crate::transcript::StopReason::Error))
}

fn is_compaction(message: &Message) -> bool {
    CompactionEntry::parse(message).is_some()
}

/// Every tool call before `at` has its result before `at`, and the kept part does not start
/// with a tool result.
fn valid_cut(messages: &[Message], at: usize) -> bool {
    let (before, after) = messages.split_at(at);
    let calls = crate::transcript::call_ids(before);
    let answered_after = after
        .iter()
        .filter_map(Message::tool_result_part)
        .any(|r| calls.contains(r.call_id.as_str()));
    // A kept part that starts with tool results would send results without their call.
    let starts_with_result = after.first().is_some_and(|m| m.role == Role::ToolResult);
    !answered_after && !starts_with_result
}

/// A compaction entry: the summary and how many messages before it stay verbatim.
#[derive(Clone, Debug, PartialEq)]
pub struct CompactionEntry {
    /// Messages right before the entry (in the stored history) that follow the summary in the
    /// context.
    pub kept: usize,
    /// The summary text.
    pub summary: String,
}

impl CompactionEntry {
    /// Recognises a compaction entry.
    pub fn parse(message: &Message) -> Option<CompactionEntry> {
        if message.role != Role::Custom {
            return None;
        }
        let kind = message.custom_type.as_deref()?;
        let rest = kind.strip_prefix(COMPACTION_TYPE)?;
        let kept = match rest.strip_prefix(":kept=") {
            Some(n) => n.parse().ok()?,
            None if rest.is_empty() => 0,
            None => return None,
        };
        Some(CompactionEntry {
            kept,
            summary: message.text(),
        })
    }

    /// The entry as a message (what is stored and shown to the model).
    pub fn to_message(&self) -> Message {
        Message::custom(
            format!("{COMPACTION_TYPE}:kept={}", self.kept),
            vec![Part::text(self.summary.clone())],
        )
    }
}

/// The context the model sees for a stored history: from the last compaction entry on, the
/// summary, the messages it kept and everything after it; the whole history when there is
/// none.
pub fn effective_context(history: &[Message]) -> Vec<Message> {
    let Some((at, entry)) = history
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| CompactionEntry::parse(m).map(|e| (i, e)))
    else {
        return history.to_vec();
    };
    // Failed replies are stored but never part of the model's context: they do not count.
    let mut kept_from = at;
    let mut counted = 0;
    while kept_from > 0 && counted < entry.kept {
        kept_from -= 1;
        if counts(&history[kept_from]) {
            counted += 1;
        }
    }
    let mut context = Vec::with_capacity(history.len() - kept_from);
    context.push(history[at].clone());
    context.extend_from_slice(&history[kept_from..at]);
    context.extend_from_slice(&history[at + 1..]);
    context
}

/// What a compactor is asked to summarise.
pub struct CompactionInput<'a> {
    /// The messages to replace (a previous summary may be among them).
    pub messages: &'a [Message],
    /// The agent's model.
    pub model: &'a dyn Model,
    /// The model id the agent uses.
    pub model_name: Option<&'a str>,
}

/// A summary written by a [`Compactor`].
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The summary text.
    pub text: String,
    /// What writing it cost (when a model call was made).
    pub usage: Option<Usage>,
}

/// Writes the summary that replaces older turns. Implement it to provide your own compaction
/// (a cheaper model, a template, a retrieval store).
pub trait Compactor: Send + Sync {
    /// Summarises `input.messages`.
    fn compact<'a>(
        &'a self,
        input: CompactionInput<'a>,
    ) -> BoxFuture<'a, Result<Summary, ModelError>>;
}

/// A compactor shows as its trait's name (so [`CompactionConfig`] derives `Debug`).
impl std::fmt::Debug for dyn Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Compactor")
    }
}

/// The instructions of the default summariser.
pub const SUMMARY_PROMPT: &str = "The conversation above is being compacted to save context. \
Write a structured summary that lets you continue the work without it. Use these sections:\n\
## Goal\n## Decisions and constraints\n## Files and code touched (paths, what changed)\n\
## Tool results worth remembering\n## Progress (done / in progress)\n## Next steps\n\
Be specific and concise; keep exact paths, names, numbers and error messages. Do not call tools.";

/// The default compactor: the agent's own model, asked for a structured summary.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModelCompactor;

impl Compactor for ModelCompactor {
    fn compact<'a>(
        &'a self,
        input: CompactionInput<'a>,
    ) -> BoxFuture<'a, Result<Summary, ModelError>> {
        Box::pin(async move {
            let mut messages = messages_for_model(input.messages).into_owned();
            messages.push(Message::user(SUMMARY_PROMPT));
            let mut request = ModelRequest::new(messages);
            request.model = input.model_name.map(str::to_owned);
            request.system_prompt =
                Some("You summarise conversations between a user and a coding agent.".to_owned());
            let mut stream = input.model.stream(request);
            while let Some(event) = stream.next().await {
                match event {
                    ModelEvent::Done(message) => {
                        let text = message.text();
                        if text.trim().is_empty() {
                            return Err(ModelError::stream(
                                StreamErrorKind::Other,
                                "the summary came back empty",
                            ));
                        }
                        return Ok(Summary {
                            text,
                            usage: message.usage,
                        });
                    }
                    ModelEvent::Error { error, .. } => return Err(error),
                    _ => {}
                }
            }
            Err(ModelError::stream(
                StreamErrorKind::Cut,
                "the summary stream ended without a terminal event",
            ))
        })
    }
}

/// The result of [`compact`].
#[derive(Clone, Debug)]
pub struct Compacted {
    /// The compaction entry (store it after the history it summarises).
    pub entry: Message,
    /// The new context: the entry, then the kept messages.
    pub context: Vec<Message>,
    /// How many messages were summarised.
    pub summarized: usize,
    /// What the summary cost.
    pub usage: Option<Usage>,
    /// Estimated tokens before and after.
    pub tokens_before: u64,
    /// Estimated tokens after.
    pub tokens_after: u64,
}

/// Compacts `context` (the model's view, e.g. from [`effective_context`]): `Ok(None)` when
/// there is nothing to summarise.
pub async fn compact(
    context: &[Message],
    keep_recent_turns: usize,
    compactor: &dyn Compactor,
    model: &dyn Model,
    model_name: Option<&str>,
) -> Result<Option<Compacted>, ModelError> {
    let Some(at) = split_point(context, keep_recent_turns) else {
        return Ok(None);
    };
    let summary = compactor
        .compact(CompactionInput {
            messages: &context[..at],
            model,
            model_name,
        })
        .await?;
    let entry = CompactionEntry {
        kept: context[at..].iter().filter(|m| counts(m)).count(),
        summary: format!(
            "[Summary of the earlier conversation, compacted to save context]\n\n{}",
            summary.text.trim()
        ),
    }
    .to_message();
    let mut compacted = Vec::with_capacity(context.len() - at + 1);
    compacted.push(entry.clone());
    compacted.extend_from_slice(&context[at..]);
    let tokens_before = estimate_tokens(context);
    let tokens_after = compacted
        .iter()
        .map(message_chars)
        .sum::<usize>()
        .div_ceil(4) as u64;
    Ok(Some(Compacted {
        entry,
        context: compacted,
        summarized: at,
        usage: summary.usage,
        tokens_before,
        tokens_after,
    }))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::transcript::{StopReason, ToolCallPart, ToolResultPart};
    use serde_json::json;

    fn turn(i: usize) -> Vec<Message> {
        let call = ToolCallPart::new(format!("c{i}"), "read_file", json!({"path": "a"}));
        vec![
            Message::assistant(vec![Part::ToolCall(call)], StopReason::ToolUse),
            Message::tool_result(ToolResultPart::success(format!("c{i}"), "read_file", "x")),
        ]
    }

    #[test]
    fn cuts_never_separate_calls_from_results() {
        let mut history = vec![Message::user("start")];
        for i in 0..5 {
            history.extend(turn(i));
        }
        for keep in 0..6 {
            if let Some(at) = split_point(&history, keep) {
                assert!(valid_cut(&history, at), "keep {keep} cut at {at}");
                assert_ne!(history.get(at).map(|m| m.role), Some(Role::ToolResult));
            }
        }
        assert_eq!(split_point(&history, 2), Some(7));
        assert_eq!(
            split_point(&history, 5),
            None,
            "the prompt alone is not summarised"
        );
    }

    #[test]
    fn the_effective_context_puts_the_summary_first() {
        let mut history = vec![Message::user("start")];
        history.extend(turn(0));
        history.extend(turn(1));
        let entry = CompactionEntry {
            kept: 2,
            summary: "S".into(),
        };
        history.push(entry.to_message());
        history.push(Message::user("next"));
        let context = effective_context(&history);
        assert_eq!(CompactionEntry::parse(&context[0]), Some(entry));
        assert_eq!(context.len(), 4);
        assert_eq!(context[1], history[3]);
        assert_eq!(context[3].text(), "next");
        let no_entry = &history[..5];
        assert_eq!(effective_context(no_entry), no_entry.to_vec());
    }

    #[test]
    fn windows_and_overflow_errors() {
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("anthropic/claude-sonnet-4-5"), Some(200_000));
        assert_eq!(context_window("my-model"), None);
        assert!(is_context_overflow(&ModelError::from_status(
            400,
            "This model's maximum context length is 128000 tokens"
        )));
        assert!(is_context_overflow(&ModelError::from_status(
            400,
            "prompt is too long: 210000 tokens > 200000 maximum"
        )));
        assert!(!is_context_overflow(&ModelError::from_status(
            401,
            "context length"
        )));
    }
}
