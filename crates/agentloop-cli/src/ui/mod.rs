//! The terminal: rendering of events, Markdown, the approval prompt, text made safe to print.

pub mod markdown;
pub mod mentions;
pub mod picker;
pub mod prompt;
pub mod render;
pub mod safe_text;
