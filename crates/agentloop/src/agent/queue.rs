//! Steering and follow-up queues (the loop contract's `steer_queue`).
//!
//! Steering messages are delivered after the current tool batch completes — never skipping a call
//! the model already made — and before the next model call. Follow-up messages are delivered only
//! when the agent would otherwise stop. Queues belong to the [`AgentLoop`](crate::agent::AgentLoop),
//! not to a run, so messages still queued when a run stops or is aborted wait for the next run.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::transcript::Message;

/// How many queued messages one delivery takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// One message per delivery (the rest wait for the next turn).
    #[default]
    OneAtATime,
    /// Every queued message at once.
    All,
}

/// A cloneable, thread-safe message queue.
#[derive(Clone, Debug, Default)]
pub struct MessageQueue {
    inner: Arc<Mutex<VecDeque<Message>>>,
}

impl MessageQueue {
    /// An empty queue.
    pub fn new() -> Self {
        MessageQueue::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, VecDeque<Message>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a message.
    pub fn push(&self, message: Message) {
        self.lock().push_back(message);
    }

    /// Number of queued messages.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// A copy of every queued message, in order (the queue is unchanged).
    pub fn snapshot(&self) -> Vec<Message> {
        self.lock().iter().cloned().collect()
    }

    /// Drops every queued message.
    pub fn clear(&self) {
        self.lock().clear();
    }

    /// Takes the next delivery according to `mode`.
    pub fn take(&self, mode: QueueMode) -> Vec<Message> {
        let mut queue = self.lock();
        match mode {
            QueueMode::All => queue.drain(..).collect(),
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_take_one_or_all() {
        let q = MessageQueue::new();
        for t in ["a", "b", "c"] {
            q.push(Message::user(t));
        }
        let one = q.take(QueueMode::OneAtATime);
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].text(), "a");
        let rest = q.take(QueueMode::All);
        assert_eq!(
            rest.iter().map(Message::text).collect::<Vec<_>>(),
            ["b", "c"]
        );
        assert!(q.is_empty());
    }
}
