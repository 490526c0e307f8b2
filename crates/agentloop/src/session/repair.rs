//! Load-time repair of a transcript whose process stopped in the middle of a tool batch.
//!
//! Pure functions over `&[Message]`: no storage, no I/O. The store's
//! [`load`](super::SessionStore::load) applies [`repair_interrupted`] to what it read.

use std::collections::HashSet;

use crate::transcript::{Message, Role, StopReason, ToolCallPart, interrupted_result};
#[cfg(test)]
use crate::transcript::{ToolResultPart, interrupted_result_text};

/// Makes a stored transcript valid to resume.
///
/// For each assistant message with tool calls (except those whose stop reason is
/// [`StopReason::Error`], which are never replayed), the run of tool-result messages right after
/// it is its batch. Every call without a result in its batch gets a synthetic error result
/// ([`interrupted_result`]) inside the batch, before the next message that is not a tool result,
/// and the batch is put in call order: a [`SessionRecorder`](super::SessionRecorder) stores
/// results in completion order (each as its call finishes), while the agent's own context holds
/// them in call order, so this gives back the exact context the agent had (and the same prompt
/// prefix, which keeps a provider's prompt cache warm on resume). Results that answer none of the
/// message's calls keep their order after the others.
///
/// Everything else is returned unchanged; a complete transcript whose batches are in call order
/// comes back identical. Synthetic results carry the timestamp of the message before them, so
/// repairing is deterministic, and idempotent: repairing a repaired transcript changes nothing.
pub fn repair_interrupted(messages: Vec<Message>) -> Vec<Message> {
    repair_interrupted_except(messages, &HashSet::new())
}

/// [`repair_interrupted`], except that the calls in `keep` stay unanswered (calls parked for
/// approval, which a resume answers).
pub(crate) fn repair_interrupted_except(
    messages: Vec<Message>,
    keep: &HashSet<&str>,
) -> Vec<Message> {
    let mut out = Vec::with_capacity(messages.len());
    let mut iter = messages.into_iter().peekable();
    while let Some(message) = iter.next() {
        let replayed_calls = message.role == Role::Assistant
            && message.stop_reason != Some(StopReason::Error)
            && message.tool_calls().next().is_some();
        if !replayed_calls {
            out.push(message);
            continue;
        }
        let calls: Vec<ToolCallPart> = message.tool_calls().cloned().collect();
        let mut batch = Vec::new();
        while let Some(next) = iter.next_if(|m| m.role == Role::ToolResult) {
            batch.push(next);
        }
        // Synthetic results take the timestamp of the message they follow: deterministic.
        let timestamp = batch
            .last()
            .map_or(message.timestamp_ms, |m| m.timestamp_ms);
        out.push(message);

        let answered: HashSet<&str> = batch
            .iter()
            .filter_map(|m| m.tool_result_part().map(|r| r.call_id.as_str()))
            .collect();
        let mut seen = HashSet::new();
        let missing: Vec<Message> = calls
            .iter()
            .filter(|call| {
                !answered.contains(call.id.as_str())
                    && !keep.contains(call.id.as_str())
                    && seen.insert(call.id.as_str())
            })
            .map(|call| {
                let mut result = Message::tool_result(interrupted_result(call));
                result.timestamp_ms = timestamp;
                result
            })
            .collect();
        batch.extend(missing);
        // Stable sort by the position of the answered call; unknown ids go last, in order.
        batch.sort_by_key(|m: &Message| {
            m.tool_result_part()
                .and_then(|r| calls.iter().position(|c| c.id == r.call_id))
                .unwrap_or(usize::MAX)
        });
        out.extend(batch);
    }
    out
}

/// The calls in `messages` that have no result in the batch after them (what
/// [`repair_interrupted`] would answer), as `(index of the assistant message, call)`.
pub fn unanswered_calls(messages: &[Message]) -> Vec<(usize, &ToolCallPart)> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        i += 1;
        if message.role != Role::Assistant || message.stop_reason == Some(StopReason::Error) {
            continue;
        }
        let start = i;
        while messages.get(i).is_some_and(|m| m.role == Role::ToolResult) {
            i += 1;
        }
        let answered: HashSet<&str> = messages
            .get(start..i)
            .unwrap_or_default()
            .iter()
            .filter_map(|m| m.tool_result_part().map(|r| r.call_id.as_str()))
            .collect();
        let mut seen = HashSet::new();
        for call in message.tool_calls() {
            if !answered.contains(call.id.as_str()) && seen.insert(call.id.as_str()) {
                out.push((start - 1, call));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Part;
    use serde_json::json;

    fn calls(ids: &[&str], stop: StopReason) -> Message {
        Message::assistant(
            ids.iter()
                .map(|id| Part::ToolCall(ToolCallPart::new(*id, format!("tool_{id}"), json!({}))))
                .collect(),
            stop,
        )
    }

    fn result(id: &str) -> Message {
        Message::tool_result(ToolResultPart::success(id, format!("tool_{id}"), "ok"))
    }

    fn ids(messages: &[Message]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m.role {
                Role::ToolResult => m
                    .tool_result_part()
                    .map(|r| {
                        let tag = if r.is_error { "!" } else { "" };
                        format!("r:{}{tag}", r.call_id)
                    })
                    .unwrap_or_default(),
                Role::Assistant => "a".into(),
                _ => "u".into(),
            })
            .collect()
    }

    #[test]
    fn complete_transcript_is_unchanged() {
        let context = vec![
            Message::user("go"),
            calls(&["1", "2"], StopReason::ToolUse),
            result("1"),
            result("2"),
            Message::assistant(vec![Part::text("done")], StopReason::Stop),
        ];
        assert_eq!(repair_interrupted(context.clone()), context);
        assert!(unanswered_calls(&context).is_empty());
    }

    #[test]
    fn missing_results_are_added_and_the_batch_is_put_in_call_order() {
        let context = vec![
            Message::user("go"),
            calls(&["1", "2", "3"], StopReason::ToolUse),
            result("3"),
            result("1"),
        ];
        let repaired = repair_interrupted(context.clone());
        assert_eq!(ids(&repaired), ["u", "a", "r:1", "r:2!", "r:3"]);
        let synthetic = repaired[3].tool_result_part().cloned();
        assert_eq!(
            synthetic.map(|r| r.content),
            Some(interrupted_result_text("tool_2"))
        );
        assert_eq!(repaired[3].timestamp_ms, context[3].timestamp_ms);
        assert_eq!(
            unanswered_calls(&context)
                .iter()
                .map(|(i, c)| (*i, c.id.as_str()))
                .collect::<Vec<_>>(),
            [(1, "2")]
        );
    }

    #[test]
    fn repair_goes_before_the_next_message_and_is_idempotent() {
        let context = vec![
            calls(&["1", "2"], StopReason::ToolUse),
            result("2"),
            Message::user("next"),
            calls(&["3"], StopReason::Aborted),
        ];
        let repaired = repair_interrupted(context);
        assert_eq!(ids(&repaired), ["a", "r:1!", "r:2", "u", "a", "r:3!"]);
        assert_eq!(repair_interrupted(repaired.clone()), repaired);
    }

    #[test]
    fn error_messages_are_not_repaired() {
        let context = vec![Message::user("go"), calls(&["1"], StopReason::Error)];
        assert_eq!(repair_interrupted(context.clone()), context);
        assert!(unanswered_calls(&context).is_empty());
    }

    #[test]
    fn repeated_call_ids_get_one_result() {
        let context = vec![calls(&["1", "1"], StopReason::ToolUse)];
        assert_eq!(ids(&repair_interrupted(context)), ["a", "r:1!"]);
    }
}
