//! [`MessageAssembler`]: builds an assistant message from streamed deltas.
//!
//! The loop keeps one per model call so that an abort mid-stream still yields the partial message
//! (nothing streamed is lost); scripted models and providers can use it to build their final
//! message. Appending is amortised O(1) per delta: argument text is only parsed once, at the end.

use super::ModelDelta;
use crate::transcript::{Message, Part, StopReason, ThinkingPart, ToolArguments, ToolCallPart};

#[derive(Debug)]
enum Slot {
    Text(String),
    Thinking(String),
    ToolCall {
        index: usize,
        id: String,
        name: String,
        arguments: String,
    },
}

/// Accumulates [`ModelDelta`]s into an assistant [`Message`].
#[derive(Debug, Default)]
pub struct MessageAssembler {
    slots: Vec<Slot>,
}

impl MessageAssembler {
    /// An empty assembler.
    pub fn new() -> Self {
        MessageAssembler::default()
    }

    /// Whether nothing has been received.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Adds one delta.
    pub fn push(&mut self, delta: &ModelDelta) {
        match delta {
            ModelDelta::Text { delta } => match self.slots.last_mut() {
                Some(Slot::Text(text)) => text.push_str(delta),
                _ => self.slots.push(Slot::Text(delta.clone())),
            },
            ModelDelta::Thinking { delta } => match self.slots.last_mut() {
                Some(Slot::Thinking(text)) => text.push_str(delta),
                _ => self.slots.push(Slot::Thinking(delta.clone())),
            },
            ModelDelta::ToolCallStart { index, id, name } => self.slots.push(Slot::ToolCall {
                index: *index,
                id: id.clone(),
                name: name.clone(),
                arguments: String::new(),
            }),
            ModelDelta::ToolCallArguments { index, delta, .. } => {
                if let Some(Slot::ToolCall { arguments, .. }) = self.tool_slot(*index) {
                    arguments.push_str(delta);
                }
            }
            ModelDelta::ToolCallEnd { .. } => {}
        }
    }

    fn tool_slot(&mut self, wanted: usize) -> Option<&mut Slot> {
        // Search from the end: the call being streamed is almost always the last slot.
        self.slots
            .iter_mut()
            .rev()
            .find(|s| matches!(s, Slot::ToolCall { index, .. } if *index == wanted))
    }

    /// The message assembled so far, with the given stop reason.
    pub fn to_message(&self, stop_reason: StopReason) -> Message {
        let content = self
            .slots
            .iter()
            .map(|slot| match slot {
                Slot::Text(text) => Part::text(text.clone()),
                Slot::Thinking(text) => Part::Thinking(ThinkingPart {
                    thinking: text.clone(),
                    ..ThinkingPart::default()
                }),
                Slot::ToolCall {
                    id,
                    name,
                    arguments,
                    ..
                } => Part::ToolCall(ToolCallPart {
                    id: id.clone(),
                    tool_name: name.clone(),
                    arguments: ToolArguments::parse(arguments),
                    provider_data: None,
                }),
            })
            .collect();
        Message::assistant(content, stop_reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn deltas_assemble_in_order() {
        let mut a = MessageAssembler::new();
        for d in [
            ModelDelta::Thinking { delta: "hm".into() },
            ModelDelta::Thinking { delta: "m".into() },
            ModelDelta::Text {
                delta: "Hel".into(),
            },
            ModelDelta::Text { delta: "lo".into() },
            ModelDelta::ToolCallStart {
                index: 0,
                id: "c1".into(),
                name: "echo".into(),
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "{\"text\":".into(),
                partial: None,
            },
            ModelDelta::ToolCallArguments {
                index: 0,
                delta: "\"hi\"}".into(),
                partial: None,
            },
            ModelDelta::ToolCallEnd { index: 0 },
        ] {
            a.push(&d);
        }
        let m = a.to_message(StopReason::ToolUse);
        assert_eq!(m.text(), "Hello");
        assert!(matches!(&m.content[0], Part::Thinking(t) if t.thinking == "hmm"));
        let calls: Vec<_> = m.tool_calls().collect();
        assert_eq!(
            calls[0].arguments,
            ToolArguments::Json(json!({"text": "hi"}))
        );
    }

    #[test]
    fn truncated_arguments_stay_unparsed() {
        let mut a = MessageAssembler::new();
        a.push(&ModelDelta::ToolCallStart {
            index: 0,
            id: "c".into(),
            name: "t".into(),
        });
        a.push(&ModelDelta::ToolCallArguments {
            index: 0,
            delta: "{\"x\": 4".into(),
            partial: None,
        });
        let m = a.to_message(StopReason::Aborted);
        let call = m.tool_calls().next().cloned();
        assert_eq!(
            call.map(|c| c.arguments),
            Some(ToolArguments::Unparsed("{\"x\": 4".into()))
        );
    }
}
