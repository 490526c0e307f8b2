//! Streamed Markdown for the terminal (interactive mode): the model's text arrives in pieces, so
//! it is rendered a whole line at a time — headings bold, list bullets as `•`, quotes with a bar,
//! inline `code` and **bold**, and fenced code blocks syntax-highlighted (`syntect`, with the
//! pure-Rust regex engine).
//!
//! Block parsers such as `pulldown-cmark` need the whole block before they can say what it is;
//! a line-at-a-time renderer can show each line as soon as it is complete, which is what a
//! person watching a stream wants. A line of plain prose (one that starts with no block marker)
//! is shown even before it is complete, up to its last balanced inline marker, so a long
//! paragraph streams word by word. Every line is made safe ([`visible`]) *before* any styling
//! is added, so the model can never smuggle an escape sequence through the renderer.

use std::sync::OnceLock;

use syntect::easy::HighlightLines;
use syntect::highlighting::{Theme, ThemeSet};
use syntect::parsing::SyntaxSet;
use syntect::util::as_24_bit_terminal_escaped;

use crate::ui::safe_text::visible;

const RESET: &str = "\x1b[0m";

/// Syntax definitions and the theme, loaded once on first use (tens of milliseconds).
fn syntaxes() -> &'static (SyntaxSet, Theme) {
    static SETS: OnceLock<(SyntaxSet, Theme)> = OnceLock::new();
    SETS.get_or_init(|| {
        let syntaxes = SyntaxSet::load_defaults_newlines();
        let mut themes = ThemeSet::load_defaults();
        let theme = themes
            .themes
            .remove("base16-ocean.dark")
            .unwrap_or_default();
        (syntaxes, theme)
    })
}

/// An open fenced code block.
struct Fence {
    /// The fence's marker (three or more backticks or tildes) that closes it.
    marker: String,
    /// The highlighter for the block's language (`None`: unknown language or no colour).
    highlighter: Option<HighlightLines<'static>>,
}

/// Renders Markdown text fed in arbitrary pieces; see the module docs.
pub struct MarkdownStream {
    color: bool,
    /// The incomplete last line.
    pending: String,
    /// How much of `pending` was already shown (a prose line streams as it arrives).
    shown: Option<usize>,
    fence: Option<Fence>,
}

impl MarkdownStream {
    /// A renderer with ANSI styling (`color`) or plain text.
    pub fn new(color: bool) -> Self {
        MarkdownStream {
            color,
            pending: String::new(),
            shown: None,
            fence: None,
        }
    }

    /// Takes a piece of text; returns what can be shown now: the lines it completed (each
    /// ending in `\n`) and the settled start of a prose line.
    pub fn push(&mut self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(newline) = rest.find('\n') {
            self.pending.push_str(&rest[..newline]);
            rest = &rest[newline + 1..];
            let line = std::mem::take(&mut self.pending);
            match self.shown.take() {
                Some(shown) => out.push_str(&self.inline(&visible(&line[shown..]))),
                None => self.render_line(&line, &mut out),
            }
            out.push('\n');
        }
        self.pending.push_str(rest);
        self.stream_prose(&mut out);
        out
    }

    /// Shows the settled part of an incomplete prose line: everything up to the last point
    /// where no `code` or **bold** span is open.
    fn stream_prose(&mut self, out: &mut String) {
        if self.fence.is_some() {
            return;
        }
        let shown = match self.shown {
            Some(shown) => shown,
            None => {
                let Some(first) = self.pending.trim_start().chars().next() else {
                    return;
                };
                let block = matches!(first, '#' | '-' | '*' | '+' | '>' | '`' | '~' | '|')
                    || first.is_ascii_digit();
                if block || self.pending.starts_with([' ', '\t']) {
                    return; // wait for the whole line
                }
                0
            }
        };
        let bytes = self.pending.as_bytes();
        let (mut code, mut bold, mut settled, mut pair_end) = (false, false, 0, 0);
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'`' && !bold {
                code = !code;
            } else if !code && bytes[i..].starts_with(b"**") {
                bold = !bold;
                i += 1;
                pair_end = i + 1;
            }
            i += 1;
            if !code && !bold && self.pending.is_char_boundary(i) {
                settled = i;
            }
        }
        // A lone trailing `*` may be the start of `**`.
        if settled == bytes.len() && bytes.last() == Some(&b'*') && pair_end != settled {
            settled -= 1;
        }
        if settled > shown {
            out.push_str(&self.inline(&visible(&self.pending[shown..settled])));
            self.shown = Some(settled);
        } else {
            self.shown = Some(shown);
        }
    }

    /// Renders what is left (a last line without a newline) and ends any open code block.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        let line = std::mem::take(&mut self.pending);
        match self.shown.take() {
            Some(shown) => {
                out.push_str(&self.inline(&visible(&line[shown..])));
                out.push('\n');
            }
            None if !line.is_empty() => {
                self.render_line(&line, &mut out);
                out.push('\n');
            }
            None => {}
        }
        self.fence = None;
        out
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    /// Renders one whole line: inside a code block, a fence, or a block element.
    fn render_line(&mut self, raw: &str, out: &mut String) {
        let line = visible(raw);
        let trimmed = line.trim_start();
        if self.fence.is_some() {
            self.render_code_line(&line, trimmed, out);
            return;
        }
        if let Some((marker, language)) = fence_opening(trimmed) {
            self.open_fence(&line, marker, language, out);
            return;
        }
        self.render_block(&line, trimmed, out);
    }

    /// A line inside a fence: the closing marker (dimmed; it ends the block), or a line of
    /// code, highlighted when the block's language is known.
    fn render_code_line(&mut self, line: &str, trimmed: &str, out: &mut String) {
        let Some(fence) = &mut self.fence else {
            return;
        };
        if trimmed.starts_with(fence.marker.as_str())
            && trimmed.trim_end().chars().all(|c| c == '`' || c == '~')
        {
            let closing = self.paint("2", line);
            out.push_str(&closing);
            self.fence = None;
            return;
        }
        let highlighted = fence.highlighter.as_mut().and_then(|h| {
            let with_newline = format!("{line}\n");
            h.highlight_line(&with_newline, &syntaxes().0)
                .ok()
                .map(|ranges| as_24_bit_terminal_escaped(&ranges, false))
        });
        match highlighted {
            Some(text) => {
                out.push_str(text.trim_end_matches('\n'));
                out.push_str(RESET);
            }
            None => out.push_str(line),
        }
    }

    /// Opens a code block (the fence line dimmed), with a highlighter for its language when
    /// colour is on and the language is known.
    fn open_fence(&mut self, line: &str, marker: String, language: &str, out: &mut String) {
        let highlighter = (self.color && !language.is_empty())
            .then(|| {
                let (set, theme) = syntaxes();
                set.find_syntax_by_token(language)
                    .map(|syntax| HighlightLines::new(syntax, theme))
            })
            .flatten();
        let opening = self.paint("2", line);
        out.push_str(&opening);
        self.fence = Some(Fence {
            marker,
            highlighter,
        });
    }

    /// A line outside code blocks: a heading, quote, bullet, horizontal rule or paragraph.
    fn render_block(&self, line: &str, trimmed: &str, out: &mut String) {
        let indent = &line[..line.len() - trimmed.len()];
        // Headings.
        let hashes = trimmed.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
            let title = self.inline(trimmed[hashes..].trim());
            let code = if hashes == 1 { "1;4" } else { "1" };
            out.push_str(indent);
            out.push_str(&self.paint(code, &title));
            return;
        }
        // Quotes.
        if let Some(rest) = trimmed.strip_prefix('>') {
            let bar = self.paint("2", "│");
            out.push_str(indent);
            out.push_str(&bar);
            out.push(' ');
            let body = self.inline(rest.trim_start());
            out.push_str(&self.paint("2", &body));
            return;
        }
        // Bullets.
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = trimmed.strip_prefix(bullet) {
                out.push_str(indent);
                out.push_str("• ");
                out.push_str(&self.inline(rest));
                return;
            }
        }
        // A horizontal rule.
        if trimmed.len() >= 3
            && (trimmed.chars().all(|c| c == '-') || trimmed.chars().all(|c| c == '*'))
        {
            out.push_str(&self.paint("2", "────────────────────────────────────────"));
            return;
        }
        out.push_str(&self.inline(line));
    }

    /// Inline `code` and **bold** (an unmatched marker stays as typed).
    fn inline(&self, text: &str) -> String {
        if !self.color || !(text.contains('`') || text.contains("**")) {
            return text.to_owned();
        }
        let mut out = String::with_capacity(text.len() + 16);
        let mut rest = text;
        while !rest.is_empty() {
            let tick = rest.find('`');
            let star = rest.find("**");
            let (at, marker) = match (tick, star) {
                (Some(t), Some(s)) if s < t => (s, "**"),
                (Some(t), _) => (t, "`"),
                (None, Some(s)) => (s, "**"),
                (None, None) => break,
            };
            let after = &rest[at + marker.len()..];
            let Some(close) = after.find(marker).filter(|&c| c > 0) else {
                out.push_str(&rest[..at + marker.len()]);
                rest = after;
                continue;
            };
            out.push_str(&rest[..at]);
            let inner = &after[..close];
            if marker == "`" {
                out.push_str(&self.paint("36", inner));
            } else {
                out.push_str(&self.paint("1", inner));
            }
            rest = &after[close + marker.len()..];
        }
        out.push_str(rest);
        out
    }
}

/// An opening fence: three or more of one of ``` ` ``` or `~`, then an optional language.
/// Its marker and language (empty when none).
fn fence_opening(trimmed: &str) -> Option<(String, &str)> {
    let marker_len = trimmed
        .chars()
        .take_while(|&c| c == '`' || c == '~')
        .count();
    if marker_len < 3 {
        return None;
    }
    let marker: String = trimmed.chars().take(marker_len).collect();
    if !marker.chars().all(|c| c == marker.as_bytes()[0] as char) {
        return None;
    }
    let language = trimmed[marker_len..]
        .split_whitespace()
        .next()
        .unwrap_or("");
    Some((marker, language))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn fences_open_with_three_of_one_marker_and_an_optional_language() {
        assert_eq!(fence_opening("```rust"), Some(("```".to_owned(), "rust")));
        assert_eq!(
            fence_opening("~~~~ py extra"),
            Some(("~~~~".to_owned(), "py"))
        );
        assert_eq!(fence_opening("```"), Some(("```".to_owned(), "")));
        assert_eq!(fence_opening("``"), None);
        assert_eq!(fence_opening("`~`"), None);
        assert_eq!(fence_opening("text ```"), None);
    }

    fn render(color: bool, pieces: &[&str]) -> String {
        let mut md = MarkdownStream::new(color);
        let mut out = String::new();
        for piece in pieces {
            out.push_str(&md.push(piece));
        }
        out.push_str(&md.finish());
        out
    }

    #[test]
    fn lines_appear_only_when_complete_and_pieces_do_not_matter() {
        let text = "# Title\nSome `code` and **bold** text.\n- one\n  * two\n> quoted\n";
        let whole = render(true, &[text]);
        let bytes: Vec<String> = text.chars().map(String::from).collect();
        let pieces: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(render(true, &pieces), whole);
        let mut md = MarkdownStream::new(false);
        assert_eq!(md.push("# Tit"), "");
        assert_eq!(md.push("le\n- it"), "Title\n");
        assert_eq!(md.push("em\nnext"), "• item\nnext");
        assert_eq!(md.finish(), "\n");
    }

    #[test]
    fn prose_streams_before_its_line_ends_without_splitting_a_span() {
        let mut md = MarkdownStream::new(true);
        assert_eq!(md.push("Hello wor"), "Hello wor");
        assert_eq!(md.push("ld, see `ma"), "ld, see ");
        assert_eq!(md.push("in` and **b"), "\x1b[36mmain\x1b[0m and ");
        assert_eq!(md.push("old** ok\n"), "\x1b[1mbold\x1b[0m ok\n");
        // Block lines still wait for their end.
        assert_eq!(md.push("- ite"), "");
        assert_eq!(md.push("m\n"), "• item\n");
    }

    /// Renders `text` in colour, in one piece, and checks that the output holds each of
    /// `present` and none of `absent`; returns the output for further checks.
    fn render_checked(text: &str, present: &[&str], absent: &[&str]) -> String {
        let out = render(true, &[text]);
        for wanted in present {
            assert!(out.contains(wanted), "{wanted:?} missing: {out:?}");
        }
        for unwanted in absent {
            assert!(!out.contains(unwanted), "{unwanted:?} shown: {out:?}");
        }
        out
    }

    #[test]
    fn markdown_is_styled() {
        render_checked(
            "# Title\n## Sub\nuse `x` **now**\n- item\n> note\n---\n",
            &[
                "\x1b[1;4mTitle\x1b[0m",
                "\x1b[1mSub\x1b[0m",
                "\x1b[36mx\x1b[0m",
                "\x1b[1mnow\x1b[0m",
                "• item",
                "│",
            ],
            &[],
        );
        let plain = render(false, &["# Title\nuse `x`\n- item\n"]);
        assert_eq!(plain, "Title\nuse `x`\n• item\n");
    }

    #[test]
    fn code_blocks_are_highlighted_and_left_verbatim_inside() {
        // 24-bit colour escapes inside the block, the text intact.
        let out = render_checked(
            "```rust\nfn main() { let x = 1; }\n- not a bullet\n```\nafter\n",
            &["\x1b[38;2;", "main"],
            &["• not a bullet"],
        );
        assert!(out.ends_with("after\n"), "{out:?}");
        // An unknown language is shown plain, never dropped.
        render_checked("```nosuchlang\nkeep me\n```\n", &["keep me"], &[]);
    }

    #[test]
    fn hostile_escapes_stay_visible_inside_styles_and_code() {
        render_checked(
            "# \x1b]0;pwned\x07\n```sh\necho \x1b[2J\n```\n`\x1b]52;c;eA==\x07`\n",
            &["\\e]0;pwned"],
            &["\x1b]0;", "\x1b[2J", "\x1b]52;", "\x07"],
        );
    }
}
