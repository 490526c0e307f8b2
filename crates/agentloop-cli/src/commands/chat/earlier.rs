//! The earlier conversation of a resumed chat: before the first prompt, the last few exchanges
//! of the session (a person's prompt and what the model did about it) are shown the way they
//! looked live — the answer's Markdown rendered, each tool call on one line — under a dim
//! "… N earlier messages" line when the start is cut.

use std::collections::HashMap;

use agentloop::transcript::{Message, Part, Role, ToolResultPart};

use crate::ui::markdown::MarkdownStream;
use crate::ui::render::{Style, format_tool, results_by_call};
use crate::ui::safe_text::visible_line;

/// How many exchanges (a prompt and its replies) a resumed chat shows.
pub const EXCHANGES: usize = 3;

/// The last `exchanges` exchanges of `messages`, rendered ("" when there are none).
pub fn render(style: Style, messages: &[Message], exchanges: usize) -> String {
    // The first message shown: the prompt that opens the `exchanges`-th last exchange.
    let start = (0..messages.len())
        .rev()
        .filter(|&i| messages[i].role == Role::User)
        .nth(exchanges.max(1) - 1)
        .unwrap_or(0);
    let results = results_by_call(messages);
    let mut out = String::new();
    if start > 0 {
        let line = format!(
            "… {start} earlier message{}",
            if start == 1 { "" } else { "s" }
        );
        out.push_str(&style.dim(&line));
        out.push('\n');
    }
    for message in &messages[start..] {
        match message.role {
            Role::User => prompt(style, message, &mut out),
            Role::Assistant => reply(style, message, &results, &mut out),
            // Results are shown on their call's line; extensions' messages are not the
            // conversation a person had.
            _ => {}
        }
    }
    out
}

/// A prompt as it was typed after `› `: the files its `@path` mentions attached are left out
/// (see `crate::ui::mentions`), an attached image is named.
fn prompt(style: Style, message: &Message, out: &mut String) {
    let text = message.text();
    let typed = crate::ui::mentions::typed_part(&text);
    for (i, line) in typed.trim_end().lines().enumerate() {
        let lead = if i == 0 { "› " } else { "  " };
        out.push_str(&style.bold(&format!("{lead}{}", visible_line(line))));
        out.push('\n');
    }
    let images = message
        .content
        .iter()
        .filter(|p| matches!(p, Part::Image(_)))
        .count();
    if images > 0 {
        let line = format!("  [{images} image{}]", if images == 1 { "" } else { "s" });
        out.push_str(&style.dim(&line));
        out.push('\n');
    }
}

/// A reply: its text through the Markdown renderer, then one line per tool call.
fn reply(
    style: Style,
    message: &Message,
    results: &HashMap<&str, &ToolResultPart>,
    out: &mut String,
) {
    let text = message.text();
    if !text.trim().is_empty() {
        let mut markdown = MarkdownStream::new(style.is_color());
        out.push_str(&markdown.push(text.trim_end()));
        out.push_str(&markdown.finish());
    }
    for call in message.tool_calls() {
        let result = results.get(call.id.as_str()).copied();
        let shown = format_tool(style, call, result);
        out.push_str(shown.lines().next().unwrap_or_default());
        out.push('\n');
    }
    if let Some(error) = &message.error_message {
        out.push_str(&style.red(&format!(
            "(error: {})",
            crate::ui::render::one_line(error, 200)
        )));
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentloop::transcript::{StopReason, ToolCallPart};
    use serde_json::json;

    fn answer(text: &str) -> Message {
        Message::assistant(vec![Part::text(text)], StopReason::Stop)
    }

    #[test]
    fn the_last_exchanges_with_tool_calls_on_one_line_each() {
        let call = ToolCallPart::new("c1", "read_file", json!({"path": "a.txt"}));
        let messages = vec![
            Message::user("first question"),
            answer("first answer"),
            Message::user("second question"),
            Message::assistant(vec![Part::ToolCall(call)], StopReason::ToolUse),
            Message::tool_result(ToolResultPart::success("c1", "read_file", "1\n2\n3\n4\n5")),
            answer("The **file** has\n\n- five lines"),
        ];
        let shown = render(Style::new(false), &messages, 1);
        assert_eq!(
            shown,
            "… 2 earlier messages\n› second question\n→ read_file path=a.txt\nThe **file** has\n\n• five lines\n"
        );
        let all = render(Style::new(false), &messages, 3);
        assert!(all.starts_with("› first question\nfirst answer\n"), "{all}");
        assert!(!all.contains("earlier"), "{all}");
    }
}
