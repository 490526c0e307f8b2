//! Fitting an approval question on one screen: a payload longer than the room left under the
//! terminal's height is shown as its head and its tail with the count of the lines hidden
//! between them, so nothing scrolls out of view unnoticed; the whole text stays one key away
//! (`[v]iew all`, in a pager).

/// Rows assumed when the terminal does not say how tall it is.
pub const DEFAULT_ROWS: usize = 24;

/// Rows the question needs besides the payload: the question line (which may wrap once) and a
/// spare row so the payload's first line stays on screen.
pub const QUESTION_ROWS: usize = 3;

/// A payload as shown under the question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fitted {
    /// What is printed (every line ending in a newline).
    pub text: String,
    /// Lines not shown (0: the payload is shown whole).
    pub hidden: usize,
}

/// `body` fitted into `rows` terminal rows (the whole height; the question's own rows are
/// taken off here): whole when it fits, else its head and tail around a line counting what is
/// hidden.
pub fn fit(body: &str, rows: usize) -> Fitted {
    let lines: Vec<&str> = body.lines().collect();
    let room = rows.saturating_sub(QUESTION_ROWS).max(5);
    if lines.len() <= room {
        return Fitted {
            text: body.to_owned(),
            hidden: 0,
        };
    }
    // One row for the line that counts the hidden ones; the head gets the larger half (it says
    // what the call is), the tail the rest (where a long command hides what it really does).
    let shown = room - 1;
    let head = shown.div_ceil(2);
    let tail = shown - head;
    let hidden = lines.len() - head - tail;
    let mut text = String::new();
    for line in &lines[..head] {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str(&format!(
        "  ┄┄ {hidden} lines hidden here ┄┄ press v to view all ┄┄\n"
    ));
    for line in &lines[lines.len() - tail..] {
        text.push_str(line);
        text.push('\n');
    }
    Fitted { text, hidden }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_body_is_shown_whole() {
        let body = "a\nb\nc\n";
        assert_eq!(
            fit(body, 24),
            Fitted {
                text: body.into(),
                hidden: 0
            }
        );
    }

    #[test]
    fn a_long_body_shows_its_head_and_tail_and_counts_the_rest() {
        let body: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let fitted = fit(&body, 24);
        assert_eq!(fitted.text.lines().count(), 24 - QUESTION_ROWS);
        assert!(fitted.text.starts_with("line 0\n"));
        assert!(fitted.text.ends_with("line 99\n"));
        assert_eq!(fitted.hidden, 100 - (24 - QUESTION_ROWS - 1));
        assert!(
            fitted
                .text
                .contains(&format!("{} lines hidden here", fitted.hidden))
        );
        assert!(!fitted.text.contains("line 50\n"));
    }

    #[test]
    fn a_tiny_terminal_still_shows_head_and_tail() {
        let body: String = (0..100).map(|i| format!("line {i}\n")).collect();
        let fitted = fit(&body, 2);
        assert!(fitted.text.contains("line 0\n") && fitted.text.contains("line 99\n"));
    }
}
