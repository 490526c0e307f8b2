//! The terminal: rendering of events, Markdown, the approval prompt, MCP servers' forms, text
//! made safe to print.

pub mod elicitation;
pub mod markdown;
pub mod mentions;
pub mod picker;
pub mod prompt;
pub mod render;
pub mod safe_text;
