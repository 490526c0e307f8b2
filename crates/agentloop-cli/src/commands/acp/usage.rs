//! Token usage for the editor: after each model reply a `usage_update` (tokens now in the
//! context, the model's context window, the session's cumulative cost in USD when a price is
//! known), and the turn's token counts in the `session/prompt` response (`usage`). Both are
//! marked unstable in the protocol; a client that does not know them ignores them. No
//! `usage_update` is sent when the context window is unknown (neither `--context-window` nor
//! the built-in table of model families names it), since the update requires one.

use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::{Cost, SessionUpdate, Usage as AcpUsage, UsageUpdate};
use agentloop::agent::AgentEvent;
use agentloop::transcript::{Message, Role, Usage};

/// Counts one turn's usage on top of the session's earlier usage. Cheap to clone (shared).
#[derive(Clone)]
pub struct Meter {
    window: Option<u64>,
    /// The session's usage before this turn (from the store).
    before: Usage,
    turn: Arc<Mutex<Usage>>,
}

impl Meter {
    /// A meter for a model whose context window is `window`, in a session that used `before`.
    pub fn new(window: Option<u64>, before: Usage) -> Meter {
        Meter {
            window,
            before,
            turn: Arc::default(),
        }
    }

    /// Counts `event` in; the `usage_update` to send after a reply of the session's own model.
    pub fn on_event(&self, event: &AgentEvent) -> Option<SessionUpdate> {
        match event {
            AgentEvent::MessageEnd { message } => {
                let usage = reply_usage(message)?;
                self.add(usage);
                self.update(usage)
            }
            // A sub-agent's tokens cost the session too, but are not in its context.
            AgentEvent::Child { event, .. } => {
                if let AgentEvent::MessageEnd { message } = event.as_ref() {
                    if let Some(usage) = reply_usage(message) {
                        self.add(usage);
                    }
                }
                None
            }
            _ => None,
        }
    }

    fn add(&self, usage: &Usage) {
        self.turn
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .accumulate(usage);
    }

    fn update(&self, last: &Usage) -> Option<SessionUpdate> {
        let window = self.window?;
        let used = last.input_tokens
            + last.cache_read_tokens
            + last.cache_write_tokens
            + last.output_tokens;
        let mut total = self.before;
        total.accumulate(&self.turn.lock().unwrap_or_else(PoisonError::into_inner));
        let update =
            UsageUpdate::new(used, window).cost(total.cost_usd.map(|c| Cost::new(c, "USD")));
        Some(SessionUpdate::UsageUpdate(update))
    }

    /// This turn's token counts, for the prompt response.
    pub fn turn_usage(&self) -> AcpUsage {
        let turn = self.turn.lock().unwrap_or_else(PoisonError::into_inner);
        let input = turn.input_tokens + turn.cache_read_tokens + turn.cache_write_tokens;
        AcpUsage::new(input + turn.output_tokens, input, turn.output_tokens)
            .cached_read_tokens(turn.cache_read_tokens)
            .cached_write_tokens(turn.cache_write_tokens)
    }
}

/// The usage of an assistant message (a model reply), if it reported any.
fn reply_usage(message: &Message) -> Option<&Usage> {
    (message.role == Role::Assistant)
        .then_some(message.usage.as_ref())
        .flatten()
}
