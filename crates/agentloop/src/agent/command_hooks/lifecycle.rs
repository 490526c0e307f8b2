//! The hook events around the loop rather than inside one turn: `subagent_stop` (a sub-agent
//! is about to give its answer), `pre_compact` (a compactor is about to summarise older turns)
//! and `notification` (the application tells the person something: an approval is needed, a
//! turn finished).
//!
//! Neither is a guard, so a failing hook is a warning. A `pre_compact` block is honoured — that
//! compaction is skipped and the context stays whole — because a person may have reasons to
//! keep the full history (an audit, a debugging session); a `notification` block means nothing.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, json};

use super::{CommandHooks, HookEvent};
use crate::agent::compaction::{CompactionInput, Compactor, Summary};
use crate::model::{ModelError, StreamErrorKind};

/// What started a compaction, as `pre_compact` hooks are told (`trigger`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactionTrigger {
    /// The loop compacts because the context passed its threshold or overflowed.
    Auto,
    /// A person asked for it (the CLI's `agentloop compact`).
    Manual,
}

impl CompactionTrigger {
    /// `"auto"` or `"manual"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            CompactionTrigger::Auto => "auto",
            CompactionTrigger::Manual => "manual",
        }
    }
}

/// A compactor that runs the session's `pre_compact` hooks before the one it wraps.
struct HookedCompactor {
    hooks: CommandHooks,
    inner: Arc<dyn Compactor>,
    trigger: CompactionTrigger,
}

impl Compactor for HookedCompactor {
    fn compact<'a>(
        &'a self,
        input: CompactionInput<'a>,
    ) -> BoxFuture<'a, Result<Summary, ModelError>> {
        let mut fields = Map::new();
        fields.insert("trigger".into(), json!(self.trigger.as_str()));
        fields.insert("message_count".into(), json!(input.messages.len()));
        let outcome = self.hooks.run(HookEvent::PreCompact, None, fields);
        if let Some(reason) = outcome.block {
            let message = format!("compaction was skipped by a pre_compact hook: {reason}");
            return Box::pin(
                async move { Err(ModelError::stream(StreamErrorKind::Other, message)) },
            );
        }
        Box::pin(async move {
            let mut summary = self.inner.compact(input).await?;
            for context in outcome.additional_context {
                summary.text.push_str("\n\n");
                summary.text.push_str(&context);
            }
            Ok(summary)
        })
    }
}

impl CommandHooks {
    /// `inner` with this session's `pre_compact` hooks run before each summary it writes. The
    /// hooks get `trigger` (`"auto"` or `"manual"`) and `message_count` (the messages about to
    /// be summarised). A block skips that compaction (an error, which the loop logs, leaving
    /// the context as it was); `additional_context` is appended to the summary, so a hook can
    /// pin what must survive. Without `pre_compact` hooks, `inner` is returned as it is.
    pub fn compactor(
        &self,
        inner: Arc<dyn Compactor>,
        trigger: CompactionTrigger,
    ) -> Arc<dyn Compactor> {
        if !self.has(HookEvent::PreCompact) {
            return inner;
        }
        Arc::new(HookedCompactor {
            hooks: self.clone(),
            inner,
            trigger,
        })
    }

    /// Runs the `subagent_stop` hooks for the answer `answer` that sub-agent `agent` is about to
    /// give for the parent's call `tool_call_id`; `continued` says it is already redoing its
    /// work because of such a hook. Returns the reason when a hook blocked: the application
    /// then sends the sub-agent back to work with it (a bounded number of times, as for
    /// `stop`: [`MAX_STOP_CONTINUATIONS`](super::MAX_STOP_CONTINUATIONS)).
    pub fn subagent_stop(
        &self,
        agent: &str,
        tool_call_id: &str,
        answer: &str,
        continued: bool,
    ) -> Option<String> {
        if !self.has(HookEvent::SubagentStop) {
            return None;
        }
        let mut fields = Map::new();
        fields.insert("agent".into(), json!(agent));
        fields.insert("tool_call_id".into(), json!(tool_call_id));
        fields.insert("last_assistant_message".into(), json!(answer));
        fields.insert("stop_hook_active".into(), json!(continued));
        self.run(HookEvent::SubagentStop, None, fields).block
    }

    /// Runs the `notification` hooks with `notification_type` (e.g. `"approval_needed"`,
    /// `"turn_finished"`) and `message` (what the person is shown), plus `extra` fields. Their
    /// decisions are ignored: a notification informs, it does not steer.
    pub fn notify(
        &self,
        notification_type: &str,
        message: &str,
        extra: Map<String, serde_json::Value>,
    ) {
        if !self.has(HookEvent::Notification) {
            return;
        }
        let mut fields = extra;
        fields.insert("notification_type".into(), json!(notification_type));
        fields.insert("message".into(), json!(message));
        self.run(HookEvent::Notification, None, fields);
    }
}
