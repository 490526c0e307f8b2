//! The command line as people type it, rewritten into the form the parser defines, before
//! anything is parsed: `agentloop "fix the tests"` (a prompt first: `chat` starting with it on a
//! terminal, `run` otherwise), `agentloop -m openai:x` (the flags of `run` with no subcommand:
//! `chat` on a terminal, `run` otherwise) and `agentloop -m openai:x run …` (flags of `run`
//! before their subcommand: moved after it).
//!
//! The rewrite knows the flags from the clap definition itself, so a flag added to `run` is
//! understood here without a change. Anything it does not recognise (an unknown flag, help,
//! `--version`) is left exactly as typed, so clap reports it as it would have.

use std::ffi::OsString;

/// What the terminal looks like to the rewrite: whether a bare prompt opens a chat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal {
    /// Standard input and output are both a terminal: a conversation.
    Interactive,
    /// Anything else (a pipe, a file, a script): one run.
    Script,
}

impl Terminal {
    /// The process's own standard input and output.
    pub fn detect() -> Terminal {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            Terminal::Interactive
        } else {
            Terminal::Script
        }
    }

    fn subcommand(self) -> &'static str {
        match self {
            Terminal::Interactive => "chat",
            Terminal::Script => "run",
        }
    }
}

/// How one option token is spelled in the definition.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flag {
    /// Global (`--store`): valid anywhere, before or after a subcommand.
    Global { takes_value: bool },
    /// An option of `run` / `chat`.
    Run { takes_value: bool },
    /// Help, version, or anything the definition does not know: leave the line alone.
    Other,
}

/// The option named by `token` (`--name`, `--name=value`, `-x`, `-xVALUE`), and whether its
/// value is inside the token already.
fn classify(cli: &clap::Command, token: &str) -> (Flag, bool) {
    let run = cli.find_subcommand("run");
    // Whether the flag takes the next token as its value (`--json[=FORM]` never does).
    let takes_value = |arg: &clap::Arg| {
        arg.get_action().takes_values()
            && !arg.is_require_equals_set()
            && arg.get_num_args().is_none_or(|n| n.min_values() > 0)
    };
    let (long, short, inline) = if let Some(name) = token.strip_prefix("--") {
        match name.split_once('=') {
            Some((name, _)) => (Some(name.to_owned()), None, true),
            None => (Some(name.to_owned()), None, false),
        }
    } else {
        let mut chars = token.chars().skip(1);
        let short = chars.next();
        (None, short, chars.next().is_some())
    };
    let matches = |arg: &clap::Arg| match (&long, short) {
        (Some(long), _) => {
            arg.get_long() == Some(long.as_str())
                || arg
                    .get_all_aliases()
                    .is_some_and(|aliases| aliases.contains(&long.as_str()))
        }
        (None, Some(short)) => arg.get_short() == Some(short),
        _ => false,
    };
    if let Some(arg) = cli.get_arguments().find(|a| matches(a)) {
        if arg.is_global_set() {
            return (
                Flag::Global {
                    takes_value: takes_value(arg),
                },
                inline,
            );
        }
        return (Flag::Other, inline);
    }
    match run.and_then(|run| run.get_arguments().find(|a| matches(a))) {
        Some(arg) if !arg.is_positional() => (
            Flag::Run {
                takes_value: takes_value(arg),
            },
            inline,
        ),
        _ => (Flag::Other, inline),
    }
}

/// Whether `word` names a subcommand (or its alias), `help` included.
fn is_subcommand(cli: &clap::Command, word: &str) -> bool {
    word == "help"
        || cli
            .get_subcommands()
            .any(|s| s.get_name() == word || s.get_all_aliases().any(|a| a == word))
}

/// `argv` in the form the parser defines (see the module docs); unchanged when it already is,
/// or when it holds something only clap should judge.
pub fn rewrite(argv: Vec<OsString>, terminal: Terminal) -> Vec<OsString> {
    if argv.len() < 2 {
        return argv; // bare `agentloop`: nothing to rewrite (and no definition to build)
    }
    crate::cli::with_definition(|cli| rewrite_with(cli, argv, terminal))
}

/// [`rewrite`] of a command line with at least one argument, against the definition `cli`.
fn rewrite_with(cli: &clap::Command, argv: Vec<OsString>, terminal: Terminal) -> Vec<OsString> {
    let mut run_flags = false;
    let mut i = 1;
    let first_word = loop {
        let Some(token) = argv.get(i) else {
            break None;
        };
        let Some(token) = token.to_str() else {
            // Not UTF-8: only a prompt (or a path) can be.
            break Some(i);
        };
        if token == "--" || token == "-" || !token.starts_with('-') {
            break Some(i);
        }
        match classify(cli, token) {
            (Flag::Other, _) => return argv,
            (Flag::Global { takes_value }, inline) => {
                i += if takes_value && !inline { 2 } else { 1 };
            }
            (Flag::Run { takes_value }, inline) => {
                run_flags = true;
                i += if takes_value && !inline { 2 } else { 1 };
            }
        }
    };
    let word = first_word.and_then(|at| argv[at].to_str().map(|w| (at, w.to_owned())));
    match word {
        // `agentloop [--store S] run …`: already in shape.
        Some((at, word)) if is_subcommand(cli, &word) => {
            if !run_flags {
                return argv;
            }
            // `agentloop -m x run …`: the subcommand first, its flags after it.
            let mut out = vec![argv[0].clone(), argv[at].clone()];
            out.extend_from_slice(&argv[1..at]);
            out.extend_from_slice(&argv[at + 1..]);
            out
        }
        // `agentloop [flags] "a prompt"` or `agentloop -m x`: run or chat.
        Some(_) | None if first_word.is_some() || run_flags => {
            let mut out = vec![argv[0].clone(), OsString::from(terminal.subcommand())];
            out.extend_from_slice(&argv[1..]);
            out
        }
        _ => argv,
    }
}

/// The arguments [`rewrite`] makes of `agentloop ARGS…` (without the program name).
#[cfg(test)]
pub(crate) fn rewritten(args: &[&str], terminal: Terminal) -> Vec<String> {
    let mut argv = vec![OsString::from("agentloop")];
    argv.extend(args.iter().map(OsString::from));
    rewrite(argv, terminal)
        .into_iter()
        .skip(1)
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_prompt_first_runs_it_or_opens_a_chat() {
        assert_eq!(
            rewritten(&["fix the tests"], Terminal::Script),
            ["run", "fix the tests"]
        );
        assert_eq!(
            rewritten(&["fix the tests"], Terminal::Interactive),
            ["chat", "fix the tests"]
        );
        assert_eq!(
            rewritten(
                &["--store", "s.db", "-m", "openai:x", "hi"],
                Terminal::Script
            ),
            ["run", "--store", "s.db", "-m", "openai:x", "hi"]
        );
        assert_eq!(
            rewritten(&["--model=openai:x", "-q", "hi"], Terminal::Script),
            ["run", "--model=openai:x", "-q", "hi"]
        );
    }

    #[test]
    fn run_flags_alone_or_before_their_subcommand() {
        assert_eq!(
            rewritten(&["-m", "openai:x"], Terminal::Interactive),
            ["chat", "-m", "openai:x"]
        );
        assert_eq!(
            rewritten(&["-m", "openai:x", "run", "hi"], Terminal::Interactive),
            ["run", "-m", "openai:x", "hi"]
        );
        assert_eq!(
            rewritten(&["-w", "ws", "--json", "run", "hi"], Terminal::Script),
            ["run", "-w", "ws", "--json", "hi"]
        );
    }

    #[test]
    fn what_is_already_in_shape_or_only_clap_can_judge_is_left_alone() {
        for args in [
            &["run", "hi"][..],
            &["--store", "s.db", "sessions", "list"],
            &["--version"],
            &["-h"],
            &["--bogus", "hi"],
            &[],
            &["--store", "s.db"],
            &["sessions", "-m", "x"],
        ] {
            assert_eq!(rewritten(args, Terminal::Script), args, "{args:?}");
        }
    }
}
