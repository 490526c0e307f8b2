//! `session/load`: a stored session's history sent back as the updates that would have shown
//! it live — user and agent message chunks, thoughts, and each tool call with its result.

use std::path::Path;

use agent_client_protocol::{SessionUpdate, ToolCallStatus};
use agentloop::transcript::{Message, Part, Role};

use super::updates::{Updates, chunk, describe, finished};

/// Sends `messages` as updates.
pub fn replay(messages: &[Message], root: &Path, updates: &Updates) {
    for message in messages {
        for part in &message.content {
            match (message.role, part) {
                (Role::User, Part::Text { text, .. }) => {
                    updates.send(SessionUpdate::UserMessageChunk(chunk(text)));
                }
                (Role::Assistant, Part::Text { text, .. }) => {
                    updates.send(SessionUpdate::AgentMessageChunk(chunk(text)));
                }
                (Role::Assistant, Part::Thinking(thinking)) if !thinking.thinking.is_empty() => {
                    updates.send(SessionUpdate::AgentThoughtChunk(chunk(&thinking.thinking)));
                }
                (_, Part::ToolCall(call)) => {
                    // No diff: an old edit's would be computed against today's file.
                    let tool = describe(call, root).status(ToolCallStatus::Pending);
                    updates.send(SessionUpdate::ToolCall(tool));
                }
                (_, Part::ToolResult(result)) => {
                    updates.send(SessionUpdate::ToolCallUpdate(finished(result)));
                }
                _ => {}
            }
        }
    }
}
