//! [`SessionStats`]: a session's running totals (model replies, tokens, cost), computed from
//! its messages by one function ([`SessionStats::add`]) so that every store counts alike.

use serde::{Deserialize, Serialize};

use crate::transcript::{Message, Role, StopReason, Usage};

/// Running totals of a session, kept by the store as messages are appended (see
/// [`SessionInfo::stats`](super::SessionInfo::stats)).
///
/// Only assistant messages count. Stores must compute these with [`add`](Self::add) (or
/// [`from_messages`](Self::from_messages)) over exactly the stored messages, so every store
/// reports the same numbers.
///
/// ```
/// use agentloop::session::SessionStats;
/// use agentloop::transcript::{Message, Part, StopReason, Usage};
///
/// let mut reply = Message::assistant(vec![Part::text("hi")], StopReason::Stop);
/// reply.usage = Some(Usage { input_tokens: 10, output_tokens: 2, ..Usage::default() });
/// let failed = Message::assistant(vec![], StopReason::Error);
/// let stats = SessionStats::from_messages([&Message::user("hello"), &reply, &failed]);
/// assert_eq!((stats.turns, stats.failed_turns), (1, 1));
/// assert_eq!(stats.usage.input_tokens, 10);
/// assert!(stats.has_reply());
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct SessionStats {
    /// Assistant messages that did not end in an error: the model's replies (an aborted,
    /// cut-off or refused reply counts; it is in the transcript).
    pub turns: u64,
    /// Assistant messages that ended in an error ([`StopReason::Error`]: the provider refused
    /// the key, the connection failed …); they hold no reply.
    pub failed_turns: u64,
    /// Tokens and cost summed over every assistant message, as
    /// [`Usage::accumulate`] sums them: the cost is `None` when no message had a known cost.
    pub usage: Usage,
}

impl SessionStats {
    /// Counts `message` in (anything but an assistant message leaves the totals unchanged).
    pub fn add(&mut self, message: &Message) {
        if let Some(reply) = Counted::of(message) {
            self.add_counted(&reply);
        }
    }

    /// Counts in what [`Counted::of`] kept of a message: the same as [`add`](Self::add) on it.
    pub(crate) fn add_counted(&mut self, reply: &Counted) {
        if reply.failed {
            self.failed_turns += 1;
        } else {
            self.turns += 1;
        }
        if let Some(usage) = &reply.usage {
            self.usage.accumulate(usage);
        }
    }

    /// The totals of `messages`.
    pub fn from_messages<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Self {
        let mut stats = SessionStats::default();
        for message in messages {
            stats.add(message);
        }
        stats
    }

    /// True when the model replied at least once ([`turns`](Self::turns) > 0). A session
    /// without a reply (its only run failed before the model answered) is never picked as
    /// "the last session" by [`SessionStore::last_in`](super::SessionStore::last_in).
    pub fn has_reply(&self) -> bool {
        self.turns > 0
    }

    /// Every token counted: prompt tokens (cached ones included) plus output tokens.
    pub fn total_tokens(&self) -> u64 {
        self.usage.input_tokens
            + self.usage.cache_read_tokens
            + self.usage.cache_write_tokens
            + self.usage.output_tokens
    }
}

/// What [`SessionStats::add`] reads of a message, for a store that counts a batch in after
/// the messages themselves are gone (serialized): `None` for a message that does not count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted {
    failed: bool,
    usage: Option<Usage>,
}

impl Counted {
    /// The counted part of `message`, if it counts (assistant messages only).
    pub(crate) fn of(message: &Message) -> Option<Counted> {
        (message.role == Role::Assistant).then(|| Counted {
            failed: message.stop_reason == Some(StopReason::Error),
            usage: message.usage,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Part;

    fn reply(stop: StopReason, input: u64, cost: Option<f64>) -> Message {
        let mut m = Message::assistant(vec![Part::text("x")], stop);
        m.usage = Some(Usage {
            input_tokens: input,
            output_tokens: 1,
            cache_read_tokens: 2,
            cost_usd: cost,
            ..Usage::default()
        });
        m
    }

    #[test]
    fn only_assistant_messages_count_and_errors_are_not_replies() {
        let messages = [
            Message::user("q"),
            reply(StopReason::Error, 5, None),
            reply(StopReason::ToolUse, 10, Some(0.5)),
            Message::custom("note", vec![]),
            reply(StopReason::Aborted, 20, None),
        ];
        let stats = SessionStats::from_messages(&messages);
        assert_eq!(stats.turns, 2);
        assert_eq!(stats.failed_turns, 1);
        assert_eq!(stats.usage.input_tokens, 35);
        assert_eq!(stats.usage.output_tokens, 3);
        assert_eq!(stats.usage.cost_usd, Some(0.5));
        assert_eq!(stats.total_tokens(), 35 + 3 + 6);
        assert!(stats.has_reply());
        let failed = SessionStats::from_messages(&messages[..2]);
        assert!(!failed.has_reply());
        assert_eq!(failed.usage.cost_usd, None);
    }
}
