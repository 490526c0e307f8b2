//! Permission rules: `allow` and `deny` lists of `tool` or `tool(pattern)` that decide a call
//! before the [`ApprovalPolicy`](super::ApprovalPolicy) is consulted.
//!
//! A deny rule that matches wins over everything; an allow rule that matches turns the policy's
//! "ask" (or "defer") into "run"; anything else is left to the policy. Rules are plain values
//! ([`PermissionRules`]); the CLI reads them from its config files, a library user builds them
//! in code and hands them to [`WorkspaceDeps::with_permissions`](super::WorkspaceDeps::with_permissions).
//!
//! | rule | matches |
//! |---|---|
//! | `shell` | every `shell` call |
//! | `shell(cargo test*)` | a command line **every** command of which matches `cargo test*` (`*` is any text) |
//! | `shell(npm run test:*)` | `npm run test`, alone or followed by arguments |
//! | `write_file(src/**)` | a path inside the workspace matching the glob (`*` stays within a directory) |
//! | `read_file(.env*)` | a pattern without `/` matches the file name in any directory |
//! | `mcp__github__*` | every tool whose name matches (`*` is any text) |
//!
//! Claude Code's tool names `Bash`, `Read`, `Write`, `Edit`, `MultiEdit`, `Glob`, `Grep` and
//! `LS` are accepted for the built-in tools. A `read_file(…)` rule also covers the `path` of
//! `list_dir`, `find_files` and `grep`, and a `write_file(…)` rule covers `edit_file` (so
//! `deny = ["read_file(.env*)"]` stops `grep` from being pointed at `.env`; it cannot see which
//! files a search of a whole directory opens).
//!
//! Shell lines are read with a real shell grammar ([`super::shell_line`]): an allow rule only
//! matches a line made of plain commands (no substitutions, expansions, redirections into
//! files, subshells…), each of which matches an allow rule; a deny rule matches when **any**
//! command the line could run matches it, inside substitutions, `eval`, `sh -c` and wrappers
//! like `sudo` or `env` included, and a line whose commands cannot all be known while a shell
//! deny rule exists is sent to a person ([`RuleVerdict::Ask`]) rather than run.

use std::fmt;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobBuilder, GlobMatcher};
use regex::Regex;
use serde_json::Value;

use super::shell_line::{self, Word, basename};
use super::workspace::normalize;

/// A rule that could not be parsed; the text says which and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid permission rule {rule:?}: {reason}")]
#[non_exhaustive]
pub struct RuleError {
    /// The rule as written.
    pub rule: String,
    /// What is wrong with it.
    pub reason: String,
}

impl RuleError {
    fn new(rule: &str, reason: impl Into<String>) -> Self {
        RuleError {
            rule: rule.to_owned(),
            reason: reason.into(),
        }
    }
}

/// What a pattern inside the parentheses is matched against.
#[derive(Clone, Debug)]
enum Pattern {
    /// No parentheses: the tool name alone decides.
    Any,
    /// A shell command pattern.
    Command(Regex),
    /// A path glob; `anchored` is false for a pattern without `/` (it then matches the last
    /// path component).
    Path { glob: GlobMatcher, anchored: bool },
    /// A pattern on a tool with no known argument to match: never matches.
    Unsupported,
}

/// One `tool` or `tool(pattern)` rule.
#[derive(Clone, Debug)]
pub struct PermissionRule {
    text: String,
    tool: Regex,
    /// The canonical tool name when it has no `*` (for the path-tool families).
    tool_name: Option<String>,
    pattern: Pattern,
    /// For a shell rule: the program the pattern names, and whether exactly (`rm` for
    /// `rm -rf*`) or as a prefix (`curl` for `curl*`); `None` when it starts with `*`.
    first_word: Option<(String, bool)>,
}

impl fmt::Display for PermissionRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A rule's tool name as the built-in tool's name when it names one in Claude Code's spelling
/// (`Bash`, `Read`, …; see [`super::builtin_tool_name`]), else as written.
fn canonical_tool(name: &str) -> &str {
    super::builtin_tool_name(name).unwrap_or(name)
}

/// `*` as "any text", everything else literal, anchored at both ends.
fn wildcard_regex(pattern: &str, rule: &str) -> Result<Regex, RuleError> {
    let body: Vec<String> = pattern.split('*').map(regex::escape).collect();
    Regex::new(&format!("^(?s:{})$", body.join(".*")))
        .map_err(|e| RuleError::new(rule, e.to_string()))
}

/// A shell pattern: `*` is any text; a trailing `:*` is "these words, then optionally more".
fn command_regex(pattern: &str, rule: &str) -> Result<Regex, RuleError> {
    let normalized = pattern.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(prefix) = normalized.strip_suffix(":*") {
        let prefix = prefix.trim_end();
        let body: Vec<String> = prefix.split('*').map(regex::escape).collect();
        return Regex::new(&format!("^(?s:{}(?: .*)?)$", body.join(".*")))
            .map_err(|e| RuleError::new(rule, e.to_string()));
    }
    wildcard_regex(&normalized, rule)
}

impl PermissionRule {
    /// Parses `tool` or `tool(pattern)`.
    pub fn parse(text: &str) -> Result<Self, RuleError> {
        let trimmed = text.trim();
        let (tool, pattern) = match trimmed.split_once('(') {
            Some((tool, rest)) => {
                let inner = rest.strip_suffix(')').ok_or_else(|| {
                    RuleError::new(
                        text,
                        "a pattern must end with `)`, as in shell(cargo test*)",
                    )
                })?;
                (tool.trim(), Some(inner))
            }
            None => (trimmed, None),
        };
        if tool.is_empty()
            || !tool
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'))
        {
            return Err(RuleError::new(
                text,
                "expected a tool name (letters, digits, `_`, `-`, `.`, `*`), optionally followed \
                 by (pattern)",
            ));
        }
        let tool = canonical_tool(tool);
        let tool_name = (!tool.contains('*')).then(|| tool.to_owned());
        let mut first_word = None;
        let pattern = match (pattern.map(str::trim), tool_name.as_deref()) {
            (None, _) | (Some("*"), _) => Pattern::Any,
            (Some(""), _) => return Err(RuleError::new(text, "the pattern is empty")),
            (Some(p), Some("shell")) => {
                first_word = p.split_whitespace().next().and_then(|w| {
                    let w = w.strip_suffix(":*").unwrap_or(w);
                    match w.split_once('*') {
                        None => Some((w.to_owned(), true)),
                        Some(("", _)) => None,
                        Some((prefix, _)) => Some((prefix.to_owned(), false)),
                    }
                });
                Pattern::Command(command_regex(p, text)?)
            }
            (Some(p), Some(name)) if path_family(name).is_some() => path_pattern(p, text)?,
            (Some(_), _) => Pattern::Unsupported,
        };
        Ok(PermissionRule {
            text: trimmed.to_owned(),
            tool: wildcard_regex(tool, text)?,
            tool_name,
            pattern,
            first_word,
        })
    }

    /// The rule as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the rule names `tool` (directly, by a wildcard, or as its path family).
    fn names_tool(&self, tool: &str) -> bool {
        if self.tool.is_match(tool) {
            return true;
        }
        // A pattern rule on read_file/write_file also covers the tools of its family.
        matches!(self.pattern, Pattern::Path { .. })
            && self.tool_name.as_deref().is_some_and(|name| {
                path_family(tool).is_some_and(|family| family == name) && name != tool
            })
    }
}

/// The rule family of a tool that takes a `path`: `read_file` or `write_file`.
fn path_family(tool: &str) -> Option<&'static str> {
    match tool {
        "read_file" | "list_dir" | "find_files" | "grep" => Some("read_file"),
        "write_file" | "edit_file" => Some("write_file"),
        _ => None,
    }
}

fn path_pattern(pattern: &str, rule: &str) -> Result<Pattern, RuleError> {
    let anchored = pattern.contains('/');
    let pattern = pattern.strip_prefix("./").unwrap_or(pattern);
    let glob: Glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| RuleError::new(rule, e.kind().to_string()))?;
    Ok(Pattern::Path {
        glob: glob.compile_matcher(),
        anchored,
    })
}

/// A rule set's verdict on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RuleVerdict {
    /// A deny rule matched; the text is the reason the model sees.
    Deny(String),
    /// An allow rule covers the whole call.
    Allow,
    /// No rule decides; the approval policy does.
    NoMatch,
    /// A shell line a deny rule might cover but that cannot be read well enough to tell: a
    /// person must decide (denied when no one can be asked).
    Ask(String),
}

/// The `allow` and `deny` lists. The empty set decides nothing.
///
/// ```
/// use agentloop::builtin::{PermissionRules, RuleVerdict};
/// use serde_json::json;
///
/// let rules = PermissionRules::new(["shell(cargo test*)"], ["shell(rm -rf*)"]).unwrap();
/// let root = std::path::Path::new("/ws");
/// let check = |cmd: &str| rules.check("shell", &json!({"command": cmd}), root);
/// assert_eq!(check("cargo test --all"), RuleVerdict::Allow);
/// assert_eq!(check("cargo test; curl x | sh"), RuleVerdict::NoMatch);
/// assert!(matches!(check("cargo test && rm -rf /"), RuleVerdict::Deny(_)));
/// ```
#[derive(Clone, Debug, Default)]
pub struct PermissionRules {
    allow: Vec<PermissionRule>,
    deny: Vec<PermissionRule>,
}

impl PermissionRules {
    /// Parses both lists; the first bad rule is the error.
    pub fn new<A, D>(allow: A, deny: D) -> Result<Self, RuleError>
    where
        A: IntoIterator,
        A::Item: AsRef<str>,
        D: IntoIterator,
        D::Item: AsRef<str>,
    {
        let parse = |r: A::Item| PermissionRule::parse(r.as_ref());
        let allow = allow.into_iter().map(parse).collect::<Result<_, _>>()?;
        let deny = deny
            .into_iter()
            .map(|r| PermissionRule::parse(r.as_ref()))
            .collect::<Result<_, _>>()?;
        Ok(PermissionRules { allow, deny })
    }

    /// Adds `other`'s rules after this set's.
    pub fn extend(&mut self, other: PermissionRules) {
        self.allow.extend(other.allow);
        self.deny.extend(other.deny);
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.allow.is_empty() && self.deny.is_empty()
    }

    /// The allow rules.
    pub fn allow(&self) -> &[PermissionRule] {
        &self.allow
    }

    /// The deny rules.
    pub fn deny(&self) -> &[PermissionRule] {
        &self.deny
    }

    /// The verdict on a call of `tool` with `arguments`, paths relative to the workspace `root`.
    pub fn check(&self, tool: &str, arguments: &Value, root: &Path) -> RuleVerdict {
        let target = Target::of(tool, arguments, root);
        let mut unsure = None;
        for rule in self.deny.iter().filter(|r| r.names_tool(tool)) {
            match deny_match(rule, &target) {
                Match::Yes => {
                    return RuleVerdict::Deny(format!(
                        "`{tool}` call denied by the permission rule `{rule}`"
                    ));
                }
                Match::Maybe(why) => unsure = unsure.or(Some((rule, why))),
                Match::No => {}
            }
        }
        if let Some((rule, why)) = unsure {
            return RuleVerdict::Ask(format!(
                "this command line may run something the permission rule `{rule}` denies ({why})"
            ));
        }
        if self.allows(tool, &target) {
            RuleVerdict::Allow
        } else {
            RuleVerdict::NoMatch
        }
    }

    /// The allow rules that would let this very call run without asking, and as little else as
    /// the rule language allows: the tool alone for `write_file` and `edit_file` (a person's
    /// "always" at the prompt covers every path of them), one exact `shell(…)` rule per
    /// command of a line made only of plain commands, `None` for anything a rule cannot say
    /// exactly (a line with substitutions or redirections, a `*` in a command — it would
    /// become a wildcard —, other tools' arguments). The rules are checked to allow the call.
    pub fn exact_allow_rules(tool: &str, arguments: &Value, root: &Path) -> Option<Vec<String>> {
        let rules: Vec<String> = match tool {
            "write_file" | "edit_file" => vec![tool.to_owned()],
            "shell" => {
                let line = arguments.get("command")?.as_str()?;
                let commands = shell_line::plain_commands(line)?;
                let mut rules = Vec::new();
                for words in commands {
                    let joined = words.join(" ");
                    if joined.is_empty() || joined.contains('*') || joined.contains('\n') {
                        return None;
                    }
                    let rule = format!("shell({joined})");
                    if !rules.contains(&rule) {
                        rules.push(rule);
                    }
                }
                rules
            }
            _ => return None,
        };
        let check = PermissionRules::new(&rules, &[] as &[String]).ok()?;
        (!rules.is_empty() && check.check(tool, arguments, root) == RuleVerdict::Allow)
            .then_some(rules)
    }

    fn allows(&self, tool: &str, target: &Target) -> bool {
        let rules: Vec<&PermissionRule> =
            self.allow.iter().filter(|r| r.names_tool(tool)).collect();
        if rules.is_empty() {
            return false;
        }
        if rules.iter().any(|r| matches!(r.pattern, Pattern::Any)) {
            return true;
        }
        match target {
            Target::Shell(line) => {
                let Some(commands) = shell_line::plain_commands(line) else {
                    return false;
                };
                !commands.is_empty()
                    && commands.iter().all(|words| {
                        let joined = words.join(" ");
                        rules.iter().any(|r| match &r.pattern {
                            Pattern::Command(re) => re.is_match(&joined),
                            _ => false,
                        })
                    })
            }
            Target::Path { relative, .. } => relative.as_deref().is_some_and(|rel| {
                rules.iter().any(|r| match &r.pattern {
                    Pattern::Path { glob, anchored } => path_matches(glob, *anchored, rel),
                    _ => false,
                })
            }),
            Target::Other => false,
        }
    }
}

/// What a call's arguments say for the rules.
enum Target {
    /// The `command` of a shell call.
    Shell(String),
    /// The path of a file tool: relative to the workspace when it lies inside it (lexically),
    /// and its absolute forms (lexical and, when it exists, with symbolic links resolved).
    Path {
        relative: Option<PathBuf>,
        absolute: Vec<PathBuf>,
        root_relative: Vec<PathBuf>,
    },
    /// Any other tool.
    Other,
}

impl Target {
    fn of(tool: &str, arguments: &Value, root: &Path) -> Target {
        if tool == "shell" {
            let line = arguments["command"].as_str().unwrap_or_default();
            return Target::Shell(line.to_owned());
        }
        if path_family(tool).is_none() {
            return Target::Other;
        }
        let given = arguments["path"].as_str().unwrap_or(".");
        let lexical = normalize(&root.join(given));
        let mut absolute = vec![lexical.clone()];
        if let Ok(real) = std::fs::canonicalize(&lexical) {
            absolute.push(real);
        }
        let root_real = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        let root_relative: Vec<PathBuf> = absolute
            .iter()
            .filter_map(|p| {
                p.strip_prefix(root)
                    .or_else(|_| p.strip_prefix(&root_real))
                    .ok()
                    .map(Path::to_path_buf)
            })
            .collect();
        Target::Path {
            relative: lexical.strip_prefix(root).ok().map(Path::to_path_buf),
            absolute,
            root_relative,
        }
    }
}

fn path_matches(glob: &GlobMatcher, anchored: bool, relative: &Path) -> bool {
    if anchored {
        glob.is_match(relative)
    } else {
        relative
            .components()
            .any(|c| glob.is_match(Path::new(c.as_os_str())))
    }
}

enum Match {
    Yes,
    No,
    /// It cannot be ruled out; the text says why.
    Maybe(String),
}

fn deny_match(rule: &PermissionRule, target: &Target) -> Match {
    match (&rule.pattern, target) {
        (Pattern::Any, _) => Match::Yes,
        (Pattern::Command(re), Target::Shell(line)) => deny_shell(rule, re, line),
        (
            Pattern::Path { glob, anchored },
            Target::Path {
                absolute,
                root_relative,
                ..
            },
        ) => {
            // Relative forms against the pattern, absolute forms against an absolute pattern.
            let hit = root_relative
                .iter()
                .any(|rel| path_matches(glob, *anchored, rel))
                || absolute.iter().any(|abs| {
                    glob.is_match(abs) || (!*anchored && path_matches(glob, false, abs))
                });
            if hit { Match::Yes } else { Match::No }
        }
        _ => Match::No,
    }
}

fn deny_shell(rule: &PermissionRule, re: &Regex, line: &str) -> Match {
    let Ok(commands) = shell_line::every_command(line) else {
        return Match::Maybe("it could not be parsed".into());
    };
    for command in &commands {
        let name = match command.first() {
            Some(Word::Static(name)) => name,
            Some(Word::Dynamic(text)) => {
                return Match::Maybe(format!("the command name `{text}` is computed"));
            }
            None => continue,
        };
        // The words as written (a computed one as its source text): `rm -rf $DIR` matches
        // `rm -rf*` already.
        let written: Vec<&str> = command
            .iter()
            .map(|w| match w {
                Word::Static(s) | Word::Dynamic(s) => s.as_str(),
            })
            .collect();
        let joined = written.join(" ");
        let short = std::iter::once(basename(name))
            .chain(written[1..].iter().copied())
            .collect::<Vec<_>>()
            .join(" ");
        if re.is_match(&joined) || re.is_match(&short) {
            return Match::Yes;
        }
        let computed = command.iter().any(|w| matches!(w, Word::Dynamic(_)));
        let same_program = match &rule.first_word {
            None => true,
            Some((first, true)) => first == name || first == basename(name),
            Some((prefix, false)) => {
                name.starts_with(prefix.as_str()) || basename(name).starts_with(prefix.as_str())
            }
        };
        if computed && same_program {
            return Match::Maybe(format!("`{name}` has computed arguments"));
        }
    }
    Match::No
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn exact_allow_rules_say_exactly_what_was_approved_or_nothing() {
        let root = Path::new("/ws");
        let rules = |tool: &str, args: Value| PermissionRules::exact_allow_rules(tool, &args, root);
        let shell = |cmd: &str| rules("shell", json!({ "command": cmd }));
        assert_eq!(
            shell("cargo test"),
            Some(vec!["shell(cargo test)".to_owned()])
        );
        assert_eq!(
            shell("cargo build && cargo test --all | tail -n 5"),
            Some(vec![
                "shell(cargo build)".to_owned(),
                "shell(cargo test --all)".to_owned(),
                "shell(tail -n 5)".to_owned()
            ])
        );
        assert_eq!(shell("ls; ls"), Some(vec!["shell(ls)".to_owned()]));
        for unsayable in [
            "rm *.txt",
            "echo $(id)",
            "echo x > out.txt",
            "eval \"$X\"",
            "echo 'a  b'",
            "",
            "(cd a && make)",
        ] {
            assert_eq!(shell(unsayable), None, "{unsayable}");
        }
        assert_eq!(
            rules("write_file", json!({"path": "a", "content": ""})),
            Some(vec!["write_file".to_owned()])
        );
        assert_eq!(rules("mcp__github__create_issue", json!({})), None);
        assert_eq!(rules("shell", json!({"cmd": "ls"})), None);
    }

    #[test]
    fn bad_rules_are_errors_naming_the_rule() {
        for bad in ["", "shell(cargo", "she ll", "shell()", "write_file([)"] {
            let err = PermissionRule::parse(bad).unwrap_err();
            assert_eq!(err.rule, bad, "{err}");
        }
    }

    #[test]
    fn path_rules_match_inside_the_workspace_only() {
        let rules = PermissionRules::new(["write_file(src/**)"], ["read_file(.env*)"]).unwrap();
        let root = Path::new("/ws");
        let check = |tool: &str, path: &str| rules.check(tool, &json!({ "path": path }), root);
        assert_eq!(check("write_file", "src/a/b.rs"), RuleVerdict::Allow);
        assert_eq!(check("edit_file", "./src/lib.rs"), RuleVerdict::Allow);
        assert_eq!(check("write_file", "src/../../etc/x"), RuleVerdict::NoMatch);
        assert_eq!(check("write_file", "/ws/src/x.rs"), RuleVerdict::Allow);
        assert_eq!(check("write_file", "README.md"), RuleVerdict::NoMatch);
        assert!(matches!(check("read_file", ".env"), RuleVerdict::Deny(_)));
        assert!(matches!(
            check("read_file", "sub/.env.local"),
            RuleVerdict::Deny(_)
        ));
        assert!(matches!(check("grep", "a/.env"), RuleVerdict::Deny(_)));
        assert_eq!(check("read_file", "env.md"), RuleVerdict::NoMatch);
    }

    #[test]
    fn tool_name_wildcards_and_claude_names() {
        let rules = PermissionRules::new(["mcp__github__*", "Bash(git status)"], [""; 0]).unwrap();
        let root = Path::new("/ws");
        assert_eq!(
            rules.check("mcp__github__create_issue", &json!({}), root),
            RuleVerdict::Allow
        );
        assert_eq!(
            rules.check("mcp__gitlab__x", &json!({}), root),
            RuleVerdict::NoMatch
        );
        assert_eq!(
            rules.check("shell", &json!({"command": "git  status"}), root),
            RuleVerdict::Allow
        );
    }
}
