//! A listing tool's result built one line at a time (`grep`'s matches, `find_files`' paths,
//! `list_dir`'s entries): the model gets the first lines up to the tool's cap, a last line
//! saying how many were left out, all within [`OUTPUT_LIMIT`]; when a retention store is given,
//! every line goes to it in full, and a result that was cut (lines left out, a line shortened,
//! or bytes dropped) names the kept output, as the shell's does.

use super::output::{OUTPUT_LIMIT, thousands, truncate_output};
use super::retention::{Spill, keep_if_cut};

/// The lines of one result (see the module docs).
pub(crate) struct Listing {
    cap: usize,
    shown: Vec<String>,
    total: usize,
    /// Whether a shown line is shorter than the line kept.
    shortened: bool,
    spill: Option<Spill>,
}

impl Listing {
    /// A listing showing the model at most `cap` lines; every line goes to `spill` as well.
    pub(crate) fn new(cap: usize, spill: Option<Spill>) -> Self {
        Listing {
            cap,
            shown: Vec::new(),
            total: 0,
            shortened: false,
            spill,
        }
    }

    /// The result for whole `lines` (paths, directory entries), shown sorted: [`new`](Self::new),
    /// [`add`](Self::add) each, [`finish`](Self::finish) with `note`.
    pub(crate) fn sorted(
        mut lines: Vec<String>,
        cap: usize,
        spill: Option<Spill>,
        note: impl FnOnce(String, String) -> String,
    ) -> String {
        lines.sort();
        let mut listing = Listing::new(cap, spill);
        for line in &lines {
            listing.add(line, None);
        }
        listing.finish(note)
    }

    /// Whether the next line is wanted whole ([`add`](Self::add)); when not, it is only
    /// counted ([`count`](Self::count)), so that building it can be skipped.
    pub(crate) fn wants_line(&self) -> bool {
        self.shown.len() < self.cap || self.spill.is_some()
    }

    /// Adds a line: `line` is kept, the model sees `shown` instead when there is one (a
    /// shortened form).
    pub(crate) fn add(&mut self, line: &str, shown: Option<String>) {
        self.total += 1;
        if let Some(spill) = &mut self.spill {
            spill.write(line.as_bytes());
            spill.write(b"\n");
        }
        if self.shown.len() < self.cap {
            self.shortened |= shown.is_some();
            self.shown.push(shown.unwrap_or_else(|| line.to_owned()));
        }
    }

    /// Counts a line that is not built (only when [`wants_line`](Self::wants_line) is false).
    pub(crate) fn count(&mut self) {
        self.total += 1;
    }

    /// How many lines were added or counted.
    pub(crate) fn total(&self) -> usize {
        self.total
    }

    /// The text for the model: the shown lines and, when lines were left out, `note` (given
    /// the number left out and the total, both with thousands separators) as a last line; cut
    /// to [`OUTPUT_LIMIT`]. When anything was cut, the whole is kept and a line says so.
    pub(crate) fn finish(mut self, note: impl FnOnce(String, String) -> String) -> String {
        let mut out = self.shown.join("\n");
        out.push('\n');
        let left_out = self.total > self.shown.len();
        if left_out {
            out.push_str(&note(
                thousands(self.total - self.shown.len()),
                thousands(self.total),
            ));
            out.push('\n');
        }
        let mut text = truncate_output(&out, OUTPUT_LIMIT);
        let cut = left_out || self.shortened || text.len() != out.len();
        keep_if_cut(self.spill.take(), cut, &mut text);
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::builtin::OutputStore;
    use crate::builtin::retention::retained_number;

    fn note(left: String, total: String) -> String {
        format!("[{left} of {total} not shown]")
    }

    #[test]
    fn lines_past_the_cap_are_counted_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path()).unwrap();
        let mut listing = Listing::new(3, Some(store.spill("c")));
        for i in 0..10 {
            assert!(listing.wants_line());
            listing.add(&format!("line {i}"), None);
        }
        let text = listing.finish(note);
        // The note naming the kept output comes first when nothing was cut by bytes.
        let (note_line, rest) = text.split_once('\n').unwrap();
        assert!(
            note_line.starts_with("[full output kept: call c "),
            "{text}"
        );
        assert_eq!(rest, "line 0\nline 1\nline 2\n[7 of 10 not shown]\n");
        let kept = store
            .read_output(retained_number(&text).unwrap(), "c")
            .unwrap();
        let all: String = (0..10).map(|i| format!("line {i}\n")).collect();
        assert_eq!(String::from_utf8(kept.unwrap()).unwrap(), all);
    }

    #[test]
    fn a_shortened_line_keeps_the_whole_and_nothing_cut_keeps_nothing() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path()).unwrap();
        let mut listing = Listing::new(3, Some(store.spill("c")));
        listing.add("a long line", Some("a l [...]".to_owned()));
        let text = listing.finish(note);
        assert!(text.ends_with("a l [...]\n"), "{text}");
        assert_eq!(store.read("c").unwrap().unwrap(), b"a long line\n");

        let mut listing = Listing::new(3, Some(store.spill("d")));
        listing.add("short", None);
        assert_eq!(listing.finish(note), "short\n");
        assert!(store.read("d").unwrap().is_none());

        // Without a store, lines past the cap are only counted.
        let mut listing = Listing::new(1, None);
        listing.add("one", None);
        assert!(!listing.wants_line());
        listing.count();
        assert_eq!(listing.total(), 2);
        assert_eq!(listing.finish(note), "one\n[1 of 2 not shown]\n");
    }
}
