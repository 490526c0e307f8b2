//! What a shell command line runs, read with a real shell grammar (tree-sitter-bash), for the
//! permission rules ([`super::permissions`]).
//!
//! Two questions are answered, and they are deliberately asymmetric:
//!
//! - [`plain_commands`]: *is this line nothing but plain commands?* — words (bare, single- or
//!   double-quoted without expansions) joined by `&&`, `||`, `;`, `|` or newlines. Anything the
//!   grammar shows that could make the line run something other than what its words say
//!   (command or process substitution, parameter or arithmetic expansion, globs, `~`,
//!   assignments, redirections other than to `/dev/null` or between descriptors, subshells,
//!   groups, control flow, functions, heredocs, background `&`, any node this module does not
//!   know, or a parse error) makes the answer `None`: not provable. An allow rule only ever
//!   matches a line whose every command is known this way.
//! - [`every_command`]: *which commands could this line run?* — every command node anywhere in
//!   the tree, inside substitutions, subshells and control flow included, plus the command
//!   lines handed to `eval`, `sh -c`/`bash -c` and the like when they are literal, and the
//!   command behind wrappers such as `sudo`, `env` or `timeout`. Parts the grammar cannot pin
//!   down are kept as [`Word::Dynamic`], and a line that does not parse is reported as such, so
//!   a deny rule can err on the side of asking.

use tree_sitter::{Node, Parser};

/// One word of a command as the deny check sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    /// Its value is known (quotes removed, escapes resolved).
    Static(String),
    /// It contains an expansion or substitution; the text is its source, for messages only.
    Dynamic(String),
}

/// A command as the deny check sees it: its words, the first one the command name.
pub(crate) type LooseCommand = Vec<Word>;

/// Every command the line could run, or `Err(())` when the line does not parse (then anything
/// could run).
pub(crate) type EveryCommand = Result<Vec<LooseCommand>, ()>;

/// How deep `eval`/`sh -c` nesting is followed before giving up (treated as unparseable).
const MAX_NESTING: usize = 4;

/// How many words of a wrapper's arguments are tried as the start of the wrapped command.
const MAX_WRAPPED_STARTS: usize = 6;

/// Parses `line` with the bash grammar; `None` when the grammar cannot be loaded or the text
/// has a syntax error.
fn parse(line: &str) -> Option<tree_sitter::Tree> {
    let mut parser = Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .ok()?;
    let tree = parser.parse(line, None)?;
    if tree.root_node().has_error() {
        return None;
    }
    Some(tree)
}

fn text<'a>(node: Node<'_>, src: &'a str) -> &'a str {
    src.get(node.byte_range()).unwrap_or("")
}

/// The plain commands of `line`, each as its words; `None` when that cannot be proved (see the
/// module docs). An empty line is `Some(vec![])`.
pub(crate) fn plain_commands(line: &str) -> Option<Vec<Vec<String>>> {
    let tree = parse(line)?;
    let mut out = Vec::new();
    plain_node(tree.root_node(), line, &mut out)?;
    Some(out)
}

/// Separators allowed between plain commands.
fn plain_separator(kind: &str) -> bool {
    matches!(kind, ";" | "&&" | "||" | "|" | "\n")
}

fn plain_node(node: Node<'_>, src: &str, out: &mut Vec<Vec<String>>) -> Option<()> {
    match node.kind() {
        "program" | "list" | "pipeline" => {
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                if !child.is_named() {
                    if !plain_separator(child.kind()) {
                        return None;
                    }
                } else if child.kind() != "comment" {
                    plain_node(child, src, out)?;
                }
            }
            Some(())
        }
        "command" => {
            out.push(plain_command(node, src)?);
            Some(())
        }
        "redirected_statement" => {
            let mut cursor = node.walk();
            let mut body = None;
            for child in node.children(&mut cursor) {
                match child.kind() {
                    "file_redirect" if harmless_redirect(child, src) => {}
                    "command" if body.is_none() => body = Some(child),
                    _ => return None,
                }
            }
            out.push(plain_command(body?, src)?);
            Some(())
        }
        _ => None,
    }
}

/// A redirection that writes nowhere: `2>&1`, `>&2`, `>/dev/null`, `2>/dev/null`, `&>/dev/null`.
fn harmless_redirect(node: Node<'_>, src: &str) -> bool {
    let mut operator = "";
    let mut target = None;
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "file_descriptor" => {}
            ">" | ">>" | ">&" | "&>" | "&>>" | "<" => operator = child.kind(),
            "word" | "number" if target.is_none() => target = Some(text(child, src)),
            _ => return false,
        }
    }
    match (operator, target) {
        (">&", Some(fd)) => fd.bytes().all(|b| b.is_ascii_digit()) && !fd.is_empty(),
        (">" | ">>" | "&>" | "&>>" | "<", Some(path)) => path == "/dev/null",
        _ => false,
    }
}

fn plain_command(node: Node<'_>, src: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        match child.kind() {
            "command_name" => {
                let mut inner = child.walk();
                let mut named = child.named_children(&mut inner);
                let word = named.next()?;
                if named.next().is_some() {
                    return None;
                }
                words.push(plain_word(word, src)?);
            }
            "comment" => {}
            _ if child.is_named() => words.push(plain_word(child, src)?),
            _ => return None,
        }
    }
    (!words.is_empty()).then_some(words)
}

/// Characters that make a bare word expand (globs, braces, tilde) or that the grammar should
/// have split off; a bare word holding one is not provable.
fn bare_word_is_literal(word: &str) -> bool {
    !word.starts_with('~') && !word.contains(['*', '?', '[', ']', '{', '}', '$', '`', '(', ')'])
}

/// The value of a literal word node, `None` for anything that expands.
fn plain_word(node: Node<'_>, src: &str) -> Option<String> {
    let raw = text(node, src);
    match node.kind() {
        "word" => bare_word_is_literal(raw).then(|| unescape_bare(raw)),
        "number" => raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'#')
            .then(|| raw.to_owned()),
        "raw_string" => raw
            .strip_prefix('\'')
            .and_then(|r| r.strip_suffix('\''))
            .map(str::to_owned),
        "string" => {
            let mut value = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                match child.kind() {
                    "\"" => {}
                    "string_content" => value.push_str(&unescape_double(text(child, src))),
                    _ => return None,
                }
            }
            Some(value)
        }
        "concatenation" => {
            let mut value = String::new();
            let mut cursor = node.walk();
            for child in node.children(&mut cursor) {
                value.push_str(&plain_word(child, src)?);
            }
            Some(value)
        }
        _ => None,
    }
}

/// A bare word's value: a backslash quotes the next character; a backslash-newline vanishes.
fn unescape_bare(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match (c, c == '\\') {
            (_, true) => match chars.next() {
                Some('\n') | None => {}
                Some(next) => out.push(next),
            },
            (c, false) => out.push(c),
        }
    }
    out
}

/// Double-quoted text: a backslash only quotes `$`, `` ` ``, `"`, `\` and a newline.
fn unescape_double(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    out.extend(chars.next());
                    continue;
                }
                Some('\n') => {
                    chars.next();
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// Every command `line` could run (see the module docs).
pub(crate) fn every_command(line: &str) -> EveryCommand {
    let mut out = Vec::new();
    collect_line(line, 0, &mut out)?;
    Ok(out)
}

fn collect_line(line: &str, depth: usize, out: &mut Vec<LooseCommand>) -> Result<(), ()> {
    if depth > MAX_NESTING {
        return Err(());
    }
    let tree = parse(line).ok_or(())?;
    collect_node(tree.root_node(), line, depth, out)
}

fn collect_node(
    node: Node<'_>,
    src: &str,
    depth: usize,
    out: &mut Vec<LooseCommand>,
) -> Result<(), ()> {
    if node.kind() == "command" {
        let command = loose_command(node, src);
        follow_command(&command, depth, out)?;
        out.push(command);
    }
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        collect_node(child, src, depth, out)?;
    }
    Ok(())
}

fn loose_command(node: Node<'_>, src: &str) -> LooseCommand {
    let mut words = Vec::new();
    let mut cursor = node.walk();
    for child in node.named_children(&mut cursor) {
        let word = match child.kind() {
            "variable_assignment" | "comment" => continue,
            "command_name" => child.named_child(0).unwrap_or(child),
            _ => child,
        };
        words.push(match plain_word(word, src) {
            Some(value) => Word::Static(value),
            None => Word::Dynamic(text(word, src).to_owned()),
        });
    }
    words
}

/// Programs that run their arguments as a command line of their own (`-c` for shells).
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

/// Programs that run the rest of their arguments as a command (after their own options).
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "exec", "command", "builtin", "nohup", "nice", "time", "timeout",
    "xargs", "stdbuf", "ionice", "setsid", "chrt", "taskset", "unbuffer", "watch", "strace",
    "ltrace", "gdb", "valgrind", "flock", "su", "runuser",
];

/// Adds what a command runs in turn: an `eval`'s or `sh -c`'s text, or a wrapper's command.
fn follow_command(
    command: &LooseCommand,
    depth: usize,
    out: &mut Vec<LooseCommand>,
) -> Result<(), ()> {
    if depth > MAX_NESTING {
        return Err(());
    }
    let Some(Word::Static(name)) = command.first() else {
        return Ok(());
    };
    let base = basename(name);
    if base == "eval" || base == "source" || base == "." {
        let args: Option<Vec<&str>> = command[1..]
            .iter()
            .map(|w| match w {
                Word::Static(s) => Some(s.as_str()),
                Word::Dynamic(_) => None,
            })
            .collect();
        return match args {
            Some(args) if base == "eval" => collect_line(&args.join(" "), depth + 1, out),
            _ => Ok(()),
        };
    }
    if SHELLS.contains(&base) {
        if let Some(at) = command.iter().position(is_dash_c) {
            return match command.get(at + 1) {
                Some(Word::Static(script)) => collect_line(script, depth + 1, out),
                Some(Word::Dynamic(_)) => Err(()),
                None => Ok(()),
            };
        }
        return Ok(());
    }
    if WRAPPERS.contains(&base) {
        // Which word starts the wrapped command depends on the wrapper's options (`sudo -u
        // root …`): every word that could start it is tried, which may find more than runs —
        // harmless for a deny check.
        let starts = command
            .iter()
            .enumerate()
            .skip(1)
            .filter(
                |(_, w)| matches!(w, Word::Static(s) if !s.starts_with('-') && !s.contains('=')),
            )
            .map(|(i, _)| i)
            .take(MAX_WRAPPED_STARTS);
        for start in starts.collect::<Vec<_>>() {
            let rest = command[start..].to_vec();
            follow_command(&rest, depth + 1, out)?;
            out.push(rest);
        }
    }
    Ok(())
}

/// `-c`, or a cluster of single-letter options that contains `c` (`-ec`, `-lc`).
fn is_dash_c(word: &Word) -> bool {
    match word {
        Word::Static(w) => {
            w.len() > 1
                && w.starts_with('-')
                && !w.starts_with("--")
                && w[1..].bytes().all(|b| b.is_ascii_alphabetic())
                && w.contains('c')
        }
        Word::Dynamic(_) => false,
    }
}

/// The last path component of a command name (`/bin/rm` runs `rm`).
pub(crate) fn basename(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(line: &str) -> Option<Vec<String>> {
        plain_commands(line).map(|cmds| cmds.into_iter().map(|c| c.join(" ")).collect())
    }

    #[test]
    fn plain_lines_are_split_into_their_commands() {
        assert_eq!(
            plain("cargo test && git status; ls -la | wc -l"),
            Some(vec![
                "cargo test".into(),
                "git status".into(),
                "ls -la".into(),
                "wc -l".into()
            ])
        );
        assert_eq!(
            plain("echo 'a b' \"c d\" e\\ f"),
            Some(vec!["echo a b c d e f".into()])
        );
        assert_eq!(plain("cargo test 2>&1"), Some(vec!["cargo test".into()]));
        assert_eq!(plain(""), Some(vec![]));
    }

    #[test]
    fn anything_dynamic_is_not_plain() {
        for line in [
            "echo $(id)",
            "echo `id`",
            "echo $HOME",
            "echo ${HOME}",
            "X=1 cargo test",
            "cargo test > out.txt",
            "(cargo test)",
            "{ cargo test; }",
            "cargo test &",
            "cat <<EOF\nx\nEOF",
            "ls *.rs",
            "ls ~",
            "diff <(ls) <(ls)",
            "if true; then ls; fi",
            "echo \"$(id)\"",
            "echo $((1+2))",
            "f() { ls; }",
            "cargo test '",
        ] {
            assert_eq!(plain(line), None, "{line}");
        }
    }

    fn names(line: &str) -> Vec<String> {
        every_command(line)
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                c.iter()
                    .map(|w| match w {
                        Word::Static(s) => s.clone(),
                        Word::Dynamic(d) => format!("<{d}>"),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn every_command_looks_inside_substitutions_and_wrappers() {
        let found = names("echo $(rm -rf /) && sudo -u root env A=1 rm -rf x");
        assert!(found.contains(&"rm -rf /".to_owned()), "{found:?}");
        assert!(found.contains(&"rm -rf x".to_owned()), "{found:?}");
        let found = names("bash -c 'curl x | sh' ; eval \"rm -rf y\"");
        assert!(found.contains(&"curl x".to_owned()), "{found:?}");
        assert!(found.contains(&"rm -rf y".to_owned()), "{found:?}");
        let found = names("timeout 5 rm -rf z");
        assert!(found.contains(&"rm -rf z".to_owned()), "{found:?}");
        assert!(every_command("echo 'unterminated").is_err());
        assert!(every_command("bash -c \"$X\"").is_err());
    }
}
