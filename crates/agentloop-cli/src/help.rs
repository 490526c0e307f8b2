//! `-h` short, `--help` long: every flag's and subcommand's first sentence is its `-h` line, the
//! whole paragraph its `--help` text. Applied to the clap definition as it is built (see the
//! `#[command(...)]` attributes of [`crate::cli::Cli`]), so a flag added later is covered too.

use clap::builder::StyledStr;
use clap::{Arg, Command};

/// The first sentence of `text`: up to the first `. ` that does not end an abbreviation
/// (`e.g.`, `i.e.`, `etc.`), without a trailing period; the whole text when it has one sentence.
fn first_sentence(text: &str) -> &str {
    let mut from = 0;
    while let Some(at) = text[from..].find(". ") {
        let end = from + at;
        let before = &text[..end];
        if ["e.g", "i.e", "etc", "vs"]
            .iter()
            .any(|abbr| before.ends_with(abbr))
        {
            from = end + 2;
            continue;
        }
        return before;
    }
    text.strip_suffix('.').unwrap_or(text)
}

/// `(short, long)` for a help text whose first sentence is shorter than itself.
fn split(help: &StyledStr) -> Option<(String, String)> {
    let text = help.to_string();
    let short = first_sentence(text.trim()).to_owned();
    (short.len() + 1 < text.trim().len()).then_some((short, text))
}

/// An argument whose help has more than one sentence gets the first for `-h`.
pub fn shorten_arg(arg: Arg) -> Arg {
    if arg.get_long_help().is_some() {
        return arg;
    }
    match arg.get_help().and_then(split) {
        Some((short, long)) => arg.help(short).long_help(long),
        None => arg,
    }
}

/// A subcommand, its arguments and its own subcommands, shortened as [`shorten_arg`] does.
pub fn shorten_command(command: Command) -> Command {
    let has_long = command.get_long_about().is_some();
    let command = match command.get_about().and_then(split) {
        Some((short, long)) if !has_long => command.about(short).long_about(long),
        _ => command,
    };
    command
        .mut_args(shorten_arg)
        .mut_subcommands(shorten_command)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_sentence_skips_abbreviations() {
        assert_eq!(first_sentence("One. Two."), "One");
        assert_eq!(
            first_sentence("Use `a`, e.g. `b`. More here."),
            "Use `a`, e.g. `b`"
        );
        assert_eq!(first_sentence("Only one."), "Only one");
        assert_eq!(first_sentence("No period"), "No period");
    }
}
