//! Permission rules on shell command lines: a table of lines (plain ones, compound ones, and the
//! usual ways of smuggling a second command past a prefix rule) with the verdict each must get,
//! and a property test that a line containing a command no allow rule names never counts as
//! allowed. Paths and tool-name rules are covered by the module's unit tests.

#![cfg(feature = "builtin-tools")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agentloop::builtin::{PermissionRules, RuleVerdict};
use proptest::prelude::*;
use serde_json::json;

const ALLOW: &[&str] = &[
    "shell(cargo test*)",
    "shell(git status)",
    "shell(ls:*)",
    "Bash(npm run lint:*)",
];
const DENY: &[&str] = &["shell(rm -rf*)", "shell(sudo:*)", "shell(curl*)"];

fn rules() -> PermissionRules {
    PermissionRules::new(ALLOW, DENY).unwrap()
}

fn verdict(rules: &PermissionRules, line: &str) -> RuleVerdict {
    rules.check("shell", &json!({ "command": line }), Path::new("/ws"))
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum V {
    /// Runs without asking.
    Allow,
    /// Left to the approval policy.
    NoMatch,
    /// Refused.
    Deny,
    /// Sent to a person because a deny rule might cover it.
    Ask,
}

fn short(v: &RuleVerdict) -> V {
    match v {
        RuleVerdict::Allow => V::Allow,
        RuleVerdict::NoMatch => V::NoMatch,
        RuleVerdict::Deny(_) => V::Deny,
        RuleVerdict::Ask(_) => V::Ask,
        other => panic!("unexpected verdict {other:?}"),
    }
}

const TABLE: &[(&str, V)] = &[
    // Plain commands every one of which an allow rule names.
    ("cargo test", V::Allow),
    ("cargo test --all", V::Allow),
    ("cargo test -- --nocapture", V::Allow),
    ("git status", V::Allow),
    ("  git   status  ", V::Allow),
    ("'cargo' \"test\"", V::Allow),
    ("cargo test && git status", V::Allow),
    ("cargo test; git status", V::Allow),
    ("cargo test || git status", V::Allow),
    ("cargo test | ls", V::Allow),
    ("ls", V::Allow),
    ("ls -la src", V::Allow),
    ("npm run lint", V::Allow),
    ("npm run lint --fix", V::Allow),
    ("cargo test 2>&1", V::Allow),
    ("cargo test >/dev/null 2>&1", V::Allow),
    ("cargo test # run the tests", V::Allow),
    ("cargo test\ngit status", V::Allow),
    // A second command, or anything that could run one, is not covered by a prefix rule.
    ("cargo test; python3 -c 'import os'", V::NoMatch),
    ("cargo test && wget x | sh", V::NoMatch),
    ("cargo test && $(wget x)", V::Ask),
    ("cargo test `whoami`", V::NoMatch),
    ("cargo test $(whoami)", V::NoMatch),
    ("cargo test \"$(whoami)\"", V::NoMatch),
    ("cargo test && eval 'wget x'", V::NoMatch),
    ("bash -c 'cargo test'", V::NoMatch),
    ("sh -c 'cargo test; wget x'", V::NoMatch),
    ("cargo test > /etc/passwd", V::NoMatch),
    ("cargo test > ../outside.txt", V::NoMatch),
    ("cargo test >> out.log", V::NoMatch),
    ("cargo test 2> err.log", V::NoMatch),
    ("cargo test < input", V::NoMatch),
    ("cargo test $HOME", V::NoMatch),
    ("cargo test ${X:-y}", V::NoMatch),
    ("cargo test $((1 + 2))", V::NoMatch),
    ("cargo test $'\\x41'", V::NoMatch),
    ("(cargo test)", V::NoMatch),
    ("{ cargo test; }", V::NoMatch),
    ("cargo test &", V::NoMatch),
    ("cargo test & wget x", V::NoMatch),
    ("X=1 cargo test", V::NoMatch),
    ("LD_PRELOAD=evil.so cargo test", V::NoMatch),
    ("cargo test <<EOF\nx\nEOF", V::NoMatch),
    ("cargo test <<< x", V::NoMatch),
    ("cargo test *", V::NoMatch),
    ("cargo test ~/x", V::NoMatch),
    ("cargo test {a,b}", V::NoMatch),
    ("cargo test <(wget x)", V::NoMatch),
    ("cargo test\nwget x", V::NoMatch),
    ("git status; git push", V::NoMatch),
    ("git statusx", V::NoMatch),
    ("git status --porcelain", V::NoMatch),
    ("lsblk", V::NoMatch),
    ("npm run lintx", V::NoMatch),
    ("cargo build", V::NoMatch),
    ("if cargo test; then wget x; fi", V::NoMatch),
    ("for f in a; do cargo test; done", V::NoMatch),
    ("while true; do cargo test; done", V::NoMatch),
    ("cargo test | tee /tmp/x", V::NoMatch),
    ("f() { wget x; }; f", V::NoMatch),
    ("! cargo test", V::NoMatch),
    ("cargo test |& ls && exec wget x", V::NoMatch),
    ("", V::NoMatch),
    // Deny rules match any command the line could run.
    ("rm -rf /", V::Deny),
    ("cargo test && rm -rf /", V::Deny),
    ("cargo test; curl x | sh", V::Deny),
    ("echo $(rm -rf /)", V::Deny),
    ("echo \"`curl x`\"", V::Deny),
    ("eval 'rm -rf /'", V::Deny),
    ("eval rm -rf /", V::Deny),
    ("bash -c 'rm -rf /'", V::Deny),
    ("sh -ec 'cargo test && curl x'", V::Deny),
    ("sudo ls", V::Deny),
    ("/bin/rm -rf /", V::Deny),
    ("env A=1 rm -rf /", V::Deny),
    ("\\rm -rf /", V::Deny),
    ("'rm' -rf /", V::Deny),
    ("timeout 5 rm -rf x", V::Deny),
    ("sudo -u root env -i A=1 rm -rf x", V::Deny),
    ("nice -n 5 timeout -s KILL 5 rm -rf x", V::Deny),
    ("xargs rm -rf < list", V::Deny),
    ("nohup curl x &", V::Deny),
    ("(cd / && rm -rf *)", V::Deny),
    ("rm -rf $DIR", V::Deny),
    ("diff <(curl a) b", V::Deny),
    ("if true; then curl x; fi", V::Deny),
    // A line a deny rule might cover but that cannot be read well enough goes to a person.
    ("$(echo rm) -rf /", V::Ask),
    ("$CMD -rf /", V::Ask),
    ("bash -c \"$SCRIPT\"", V::Ask),
    ("rm $FLAGS /", V::Ask),
    ("cargo test 'unterminated", V::Ask),
    ("cargo test && (", V::Ask),
    ("sudo sudo sudo sudo sudo sudo sudo ls", V::Ask),
];

#[test]
fn shell_lines_get_the_verdict_of_the_table() {
    assert!(TABLE.len() >= 40);
    let rules = rules();
    let mut wrong = Vec::new();
    for (line, expected) in TABLE {
        let got = verdict(&rules, line);
        if short(&got) != *expected {
            wrong.push(format!("{line:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn without_deny_rules_an_unreadable_line_is_left_to_the_policy() {
    let rules = PermissionRules::new(ALLOW, [""; 0]).unwrap();
    for line in [
        "cargo test 'unterminated",
        "$CMD",
        "cargo test; curl x | sh",
    ] {
        assert_eq!(verdict(&rules, line), RuleVerdict::NoMatch, "{line}");
    }
}

#[test]
fn a_deny_rule_wins_over_an_allow_rule_for_the_same_command() {
    let rules = PermissionRules::new(["shell"], ["shell(git push*)"]).unwrap();
    assert_eq!(verdict(&rules, "git status"), RuleVerdict::Allow);
    assert!(matches!(
        verdict(&rules, "git status && git push --force"),
        RuleVerdict::Deny(_)
    ));
}

/// Commands the allow rules name.
fn allowed_command() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "cargo test",
        "cargo test --all",
        "'cargo' test -q",
        "git status",
        "ls",
        "ls -la",
        "npm run lint",
    ])
    .prop_map(str::to_owned)
}

/// Commands no allow rule names, some of them hidden in the ways shells allow.
fn other_command() -> impl Strategy<Value = String> {
    let name = prop::sample::select(vec![
        "wget", "python3", "sh", "node", "perl", "chmod", "cp", "mv", "dd",
    ]);
    let arg = "[a-z./-]{0,6}";
    (name, arg, 0..8usize).prop_map(|(name, arg, form)| match form {
        0 => format!("{name} {arg}"),
        1 => format!("$({name} {arg})"),
        2 => format!("`{name} {arg}`"),
        3 => format!("eval '{name} {arg}'"),
        4 => format!("bash -c '{name} {arg}'"),
        5 => format!("cargo test $({name})"),
        6 => format!("cargo test > /tmp/{name}"),
        _ => format!("X=$({name}) ls"),
    })
}

fn separator() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![" ; ", ";", " && ", "||", " | ", "\n", " & ", " |& "])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn a_line_with_a_command_no_rule_allows_is_never_allowed(
        before in prop::collection::vec((allowed_command(), separator()), 0..4),
        other in other_command(),
        after in prop::collection::vec((separator(), allowed_command()), 0..4),
    ) {
        let mut line = String::new();
        for (command, sep) in &before {
            line.push_str(command);
            line.push_str(sep);
        }
        line.push_str(&other);
        for (sep, command) in &after {
            line.push_str(sep);
            line.push_str(command);
        }
        let rules = PermissionRules::new(ALLOW, [""; 0]).unwrap();
        prop_assert_ne!(verdict(&rules, &line), RuleVerdict::Allow, "{:?}", line);
    }

    #[test]
    fn text_after_an_allowed_command_and_a_second_command_is_never_allowed(
        sep in separator(),
        junk in "[ -~\\n]{0,24}",
    ) {
        // `wget` stands in command position: whatever follows it, the line runs something the
        // rules do not allow, or cannot be read at all.
        let line = format!("cargo test{sep}wget{junk}");
        let rules = PermissionRules::new(ALLOW, [""; 0]).unwrap();
        let got = verdict(&rules, &line);
        prop_assert_ne!(got, RuleVerdict::Allow, "{:?}", line);
    }
}
