//! The one gate between untrusted text and the terminal: [`visible`] turns every character that
//! could act on a terminal or hide text into a visible escape.
//!
//! Untrusted text is everything the model, the workspace, a tool or a stored/imported session
//! supplies: streamed replies, thinking, tool names and arguments, tool output, file contents
//! and diffs, session titles, error messages. Raw, such text could drive the terminal (ESC, CSI
//! and OSC sequences: clear the screen, set the window title with OSC 0, write the clipboard
//! with OSC 52, move the cursor over what was printed) or hide part of itself (carriage returns,
//! backspaces, bidi overrides and isolates that reorder text, zero-width characters). Every
//! place that prints such text in human mode passes it through [`visible`] first; our own
//! colours are added afterwards by `render::Style`. `--json` output is not filtered here: JSON
//! escapes control characters itself and keeps the exact text.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` must not reach a terminal as it is.
///
/// The class: every C0 control except newline and tab, DEL, every C1 control (U+0080–U+009F,
/// where U+009B is a one-byte CSI and U+009D a one-byte OSC), the Unicode line and paragraph
/// separators, and every *format* character (general category Cf: bidi embeddings, overrides
/// and isolates U+202A–U+202E and U+2066–U+2069, marks U+200E/U+200F/U+061C, zero-width space
/// and joiners U+200B–U+200D, word joiner and invisible operators U+2060–U+2064, the BOM U+FEFF,
/// soft hyphen, interlinear annotations, tag characters U+E0000–U+E007F …), plus the blank
/// Hangul fillers and the combining grapheme joiner, which render as nothing.
pub fn is_unsafe(c: char) -> bool {
    match c {
        '\n' | '\t' => false,
        c if c.is_control() => true, // C0, DEL, C1
        '\u{00AD}'
        | '\u{034F}'
        | '\u{0600}'..='\u{0605}'
        | '\u{061C}'
        | '\u{06DD}'
        | '\u{070F}'
        | '\u{0890}'..='\u{0891}'
        | '\u{08E2}'
        | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{200B}'..='\u{200F}'
        | '\u{2028}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}'
        | '\u{3164}'
        | '\u{FEFF}'
        | '\u{FFA0}'
        | '\u{FFF9}'..='\u{FFFB}'
        | '\u{110BD}'
        | '\u{110CD}'
        | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}'
        | '\u{1D173}'..='\u{1D17A}'
        | '\u{E0000}'..='\u{E007F}' => true,
        _ => false,
    }
}

/// `text` with every [`is_unsafe`] character replaced by a visible escape: `\e` for ESC,
/// `\r`, `\b`, `\xNN` for the other C0 controls and DEL, `\u{NNNN}` for the rest. Newlines and
/// tabs are kept. Borrowed when there is nothing to replace.
///
/// An escape sequence loses its ESC (or its one-byte C1 introducer) and so its meaning: what is
/// left is printable text, e.g. `\e]52;c;…` instead of a clipboard write.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !is_unsafe(c) {
            out.push(c);
            continue;
        }
        match c {
            '\u{1b}' => out.push_str("\\e"),
            '\r' => out.push_str("\\r"),
            '\u{8}' => out.push_str("\\b"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

/// [`visible`] for text that must stay on one line: newlines and tabs are escaped too.
pub fn visible_line(text: &str) -> String {
    visible(text).replace('\n', "\\n").replace('\t', "\\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_controls_become_visible() {
        let hostile = "a\x1b[2J\x1b]0;pwned\x07\x1b]52;c;Y3VybA==\x1b\\b\rc\u{9b}31m\u{7f}";
        let shown = visible(hostile);
        assert!(
            !shown
                .chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t')
        );
        assert_eq!(
            shown,
            "a\\e[2J\\e]0;pwned\\x07\\e]52;c;Y3VybA==\\e\\b\\rc\\u{009b}31m\\x7f"
        );
    }

    #[test]
    fn bidi_and_invisible_characters_become_visible() {
        for c in [
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{E0041}',
            '\u{061C}',
            '\u{2028}',
            '\u{00AD}',
        ] {
            let text = format!("x{c}y");
            let shown = visible(&text);
            assert!(!shown.contains(c), "{c:?} passed through");
            assert!(shown.starts_with("x\\u{"), "{shown}");
        }
    }

    #[test]
    fn ordinary_text_is_untouched() {
        let text = "fn main() {\n\tprintln!(\"héllo → wörld 日本 🎉\");\n}\n";
        assert!(matches!(visible(text), Cow::Borrowed(_)));
        assert_eq!(visible_line("a\nb\tc"), "a\\nb\\tc");
    }
}
