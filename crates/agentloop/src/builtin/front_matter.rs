//! YAML front matter: the `---` block at the top of a skill, a command or an agent file.
//!
//! These files may come from a cloned repository, so the YAML is parsed under limits: the block
//! is refused above [`MAX_FRONT_MATTER_BYTES`] before any parsing, and the parser's budget bounds
//! nesting, node counts and alias expansion (a "billion laughs" document is refused after a few
//! thousand replayed events, not expanded). Errors are one line, ready to follow a file's path.

use std::fmt;

use serde::de::{self, DeserializeOwned, Deserializer, SeqAccess, Visitor};

/// The largest front matter parsed (bytes); a larger block is refused unread.
pub const MAX_FRONT_MATTER_BYTES: usize = 64 * 1024;

/// The deepest nesting of mappings and sequences accepted: front matter is a flat mapping of a
/// few keys, and keys we ignore may hold a map or two (`metadata:`), never anything deep. The
/// bound also bounds the recursion of the deserializer.
const MAX_DEPTH: usize = 16;

/// The most events alias references may replay in one document. An alias is expanded each time
/// it is read, so a few lines of anchors can describe an exponential document; real front matter
/// uses aliases rarely and for small values.
const MAX_REPLAYED_EVENTS: usize = 4096;

/// The most parser events (and nodes) in one document: far above what 64 KiB of sensible YAML
/// produces, a bound on the work in any case.
const MAX_EVENTS: usize = 100_000;

/// The longest error message returned (characters, before an ellipsis); YAML errors can quote
/// a long input line.
pub(crate) const MAX_ERROR_CHARS: usize = 300;

/// `(front matter, rest)`: the front matter is the text between a first line `---` and the
/// next line `---`.
pub fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let mut offset = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return (Some(&rest[..offset]), &rest[offset + line.len()..]);
        }
        offset += line.len();
    }
    (None, text)
}

/// Parses front matter (the text between the `---` lines, see [`split_front_matter`]) as YAML
/// into `T`, under the limits of this module: at most [`MAX_FRONT_MATTER_BYTES`], bounded
/// nesting and alias expansion. Empty front matter (or only comments) reads as an empty mapping,
/// so a `T` whose fields all have defaults gets them. Keys `T` does not name are ignored unless
/// `T` denies unknown fields. A duplicated key keeps its last value. Front matter that is not
/// valid YAML but reads as `key: value` lines (as files written for Claude Code often are: a
/// `: ` inside a description, `argument-hint: [a] [b]`) is read again with each top-level value
/// taken as its text, as Claude Code reads it.
///
/// The error is one line that says what is wrong and where: the line and column in the file,
/// counting the opening `---` as line 1. It does not name the file: the caller prefixes it.
///
/// ```
/// # use agentloop::builtin::parse_front_matter_as;
/// #[derive(Debug, serde::Deserialize)]
/// struct Fields {
///     description: String,
///     #[serde(default)]
///     tags: Vec<String>,
/// }
///
/// let fields: Fields =
///     parse_front_matter_as("description: |\n  Two\n  lines.\ntags: [a, b]\nextra: {x: 1}\n")
///         .unwrap();
/// assert_eq!(fields.description, "Two\nlines.\n");
/// assert_eq!(fields.tags, ["a", "b"]);
/// assert!(parse_front_matter_as::<Fields>("tags: []\n").unwrap_err().contains("description"));
/// ```
pub fn parse_front_matter_as<T: DeserializeOwned>(front: &str) -> Result<T, String> {
    if front.len() > MAX_FRONT_MATTER_BYTES {
        return Err(format!(
            "the front matter is {} bytes, more than the {MAX_FRONT_MATTER_BYTES} read",
            front.len()
        ));
    }
    // One empty line first, so that the line numbers in errors are the file's: its line 1 is
    // the opening `---`.
    let parsed: Option<T> = match parse_yaml(&format!("\n{front}")) {
        Ok(parsed) => parsed,
        // Files written for Claude Code are often not valid YAML (`description: Use it when:
        // …`, `argument-hint: [pr] [priority]`), and it reads them: so does this, taking each
        // top-level value as the text it is. The error reported is the YAML one.
        Err(error) => match lenient(front) {
            Some(text) => parse_yaml(&text).map_err(|_| error)?,
            None => return Err(error),
        },
    };
    match parsed {
        Some(value) => Ok(value),
        // An empty document is YAML's null; read it as the empty mapping it stands for.
        None => serde_saphyr::from_str_with_options("{}", options()).map_err(|e| one_line(&e)),
    }
}

fn parse_yaml<T: DeserializeOwned>(yaml: &str) -> Result<Option<T>, String> {
    serde_saphyr::from_str_with_options(yaml, options()).map_err(|e| one_line(&e))
}

/// `front` with every top-level value written as plain text quoted, so that it reads as that
/// text: `key: text` lines at the left margin whose value is not already quoted, a block scalar
/// (`|`, `>`), a flow mapping or an anchor, alias or tag, with any more-indented lines that continue it (not
/// `- item` lines) joined to it by spaces, as a YAML plain scalar would be. `None` when there is
/// no such line (nothing would change).
fn lenient(front: &str) -> Option<String> {
    let mut out = String::with_capacity(front.len() + 64);
    let mut changed = false;
    let mut lines = front.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((key, value)) = plain_top_level_value(line) else {
            out.push_str(line);
            out.push('\n');
            continue;
        };
        let mut text = value.to_owned();
        while let Some(next) = lines.peek() {
            let continues = next.starts_with([' ', '\t']) && !next.trim_start().starts_with("- ");
            if !continues || next.trim().is_empty() {
                break;
            }
            text.push(' ');
            text.push_str(next.trim());
            lines.next();
        }
        out.push_str(&format!("{key}: '{}'\n", text.replace('\'', "''")));
        changed = true;
    }
    changed.then_some(out)
}

/// `(key, value)` of a `key: value` line at the left margin whose value is plain text (see
/// [`lenient`]).
fn plain_top_level_value(line: &str) -> Option<(&str, &str)> {
    let (key, value) = line.split_once(':')?;
    let key_chars = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if key.is_empty() || !key.chars().all(key_chars) {
        return None;
    }
    let value = value.trim();
    let structural = ['"', '\'', '|', '>', '&', '*', '!', '#', '{'];
    (!value.is_empty() && !value.starts_with(structural)).then_some((key, value))
}

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_events = MAX_EVENTS;
    budget.max_nodes = MAX_EVENTS;
    budget.max_documents = 1;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    options.alias_limits.max_total_replayed_events = MAX_REPLAYED_EVENTS;
    options.alias_limits.max_replay_stack_depth = MAX_DEPTH;
    // A repeated key keeps its last value (as PyYAML does) rather than making the file unusable.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    // No source snippet: it spans several lines, and errors here must be one.
    options.with_snippet = false;
    options
}

/// `error` as one line of at most [`MAX_ERROR_CHARS`] characters.
fn one_line(error: &dyn fmt::Display) -> String {
    let text = error.to_string();
    let mut line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = line.char_indices().nth(MAX_ERROR_CHARS) {
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// Deserializes a list of names given as a YAML sequence (`[a, b]`, or `- a` lines) or as one
/// string of names separated by commas (`a, b`, the form Claude Code's files use); names are
/// trimmed and empty ones dropped, and a null value (the key with nothing after it) is the empty
/// list. For `#[serde(deserialize_with = "…")]` on a `Vec<String>` field of a type read with
/// [`parse_front_matter_as`].
///
/// ```
/// # use agentloop::builtin::{deserialize_name_list, parse_front_matter_as};
/// #[derive(serde::Deserialize)]
/// struct Fields {
///     #[serde(default, deserialize_with = "deserialize_name_list")]
///     tools: Vec<String>,
/// }
///
/// let read = |yaml| parse_front_matter_as::<Fields>(yaml).unwrap().tools;
/// assert_eq!(read("tools: Read, Grep"), ["Read", "Grep"]);
/// assert_eq!(read("tools:\n  - Read\n  - Grep\n"), ["Read", "Grep"]);
/// assert_eq!(read("tools:"), Vec::<String>::new());
/// ```
pub fn deserialize_name_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<String>, D::Error> {
    deserializer.deserialize_any(NameList)
}

struct NameList;

impl<'de> Visitor<'de> for NameList {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of names, or names separated by commas")
    }

    fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
        // `[a, b]` as text: a flow list in a file read leniently (see `lenient`).
        let text = text
            .trim()
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .unwrap_or(text);
        Ok(text
            .split(',')
            .map(str::trim)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .collect())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut names = Vec::new();
        while let Some(name) = seq.next_element::<String>()? {
            let name = name.trim();
            if !name.is_empty() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeMap;
    use std::fmt::Write as _;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Deserialize, Default)]
    struct Fields {
        description: Option<String>,
        #[serde(default, deserialize_with = "deserialize_name_list")]
        tools: Vec<String>,
    }

    /// Nine levels of ten aliases each: 10^9 strings once expanded.
    fn billion_laughs(under: &str) -> String {
        let mut yaml = String::from("a0: &a0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n");
        for level in 1..=9 {
            let refs = vec![format!("*a{}", level - 1); 10].join(", ");
            writeln!(yaml, "a{level}: &a{level} [{refs}]").unwrap();
        }
        writeln!(yaml, "{under}: *a9").unwrap();
        yaml
    }

    #[test]
    fn an_alias_bomb_is_refused_whether_its_key_is_read_or_ignored() {
        for under in ["tools", "ignored"] {
            let err = parse_front_matter_as::<Fields>(&billion_laughs(under)).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            // Not expanded: refused once the replays reach the budget.
            assert!(err.contains("alias replay limit"), "{under}: {err}");
        }
        // The same refusal, in a typeless target that would hold the whole expansion.
        let err =
            parse_front_matter_as::<BTreeMap<String, serde_json::Value>>(&billion_laughs("root"))
                .unwrap_err();
        assert!(err.contains("alias replay limit"), "{err}");
    }

    #[test]
    fn a_few_aliases_of_small_values_are_fine() {
        let fields: Fields =
            parse_front_matter_as("x: &t [read_file, grep]\ntools: *t\ndescription: d\n").unwrap();
        assert_eq!(fields.tools, ["read_file", "grep"]);
    }

    #[test]
    fn deep_nesting_is_refused_in_block_and_flow_style() {
        // (Under a nested key: a top-level value that is not YAML is read as its text.)
        let flow = format!(
            "ignored:\n  k: {}{}\n",
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        let mut block = String::new();
        for depth in 0..200 {
            writeln!(block, "{}k{depth}:", "  ".repeat(depth)).unwrap();
        }
        for yaml in [flow, block] {
            let err = parse_front_matter_as::<Fields>(&yaml).unwrap_err();
            assert!(!err.contains('\n'), "{err}");
            // The budget's depth, or the parser's own bound on flow nesting.
            assert!(
                err.contains("Depth") || err.contains("recursion limit"),
                "{}: {err}",
                &yaml[..40]
            );
        }
        // Nesting within the bound, under a key that is ignored, is fine.
        let fields: Fields =
            parse_front_matter_as("metadata:\n  a:\n    b: [1, {c: d}]\ndescription: d\n").unwrap();
        assert_eq!(fields.description.as_deref(), Some("d"));
    }

    #[test]
    fn front_matter_over_the_limit_is_refused_before_parsing() {
        // Valid YAML, but too long: refused on its size.
        let yaml = format!("description: {}\n", "x".repeat(MAX_FRONT_MATTER_BYTES));
        let err = parse_front_matter_as::<Fields>(&yaml).unwrap_err();
        assert!(err.contains("bytes"), "{err}");
        let yaml = format!(
            "description: {}\n",
            "x".repeat(MAX_FRONT_MATTER_BYTES - 100)
        );
        assert!(parse_front_matter_as::<Fields>(&yaml).is_ok());
    }

    #[test]
    fn errors_are_one_short_line() {
        for yaml in [
            "description: \"unterminated\n",
            "description:\n  a: 1\n",
            "just text",
            "tools:\n  a: b\n",
            "description: *nowhere\n",
            &format!("description: \"{}\n", "x, ".repeat(5000)),
        ] {
            let err = parse_front_matter_as::<Fields>(yaml).unwrap_err();
            assert!(
                !err.is_empty() && !err.contains('\n') && err.chars().count() <= 301,
                "{yaml:?}: {err}"
            );
        }
    }

    #[test]
    fn error_lines_are_the_files() {
        // Line 1 is the opening `---`; the bad value is on the file's line 3.
        let err = parse_front_matter_as::<Fields>("description: d\ntools: *nowhere\n").unwrap_err();
        assert!(err.contains("line 3"), "{err}");
    }

    /// Claude Code reads front matter that is not valid YAML (a `: ` inside a plain value, an
    /// argument hint of several `[…]`), and files written for it are read here too: each
    /// top-level value is the text it is, lists keep working.
    #[test]
    fn files_written_for_claude_code_that_are_not_yaml_read_as_their_text() {
        #[derive(Debug, Deserialize)]
        struct Command {
            description: String,
            #[serde(rename = "argument-hint")]
            argument_hint: String,
            #[serde(default, deserialize_with = "deserialize_name_list")]
            tools: Vec<String>,
        }
        let description = "Use this agent when: the user asks. Examples: <example>Context: \
                           a review user: \"check it\" assistant: 'I will'</example>";
        for tools in [
            "tools: [Read, Grep]",
            "tools: Read, Grep",
            "tools:\n  - Read\n  - Grep",
        ] {
            let yaml = format!(
                "description: {description}\nargument-hint: [pr-number] [priority]\n{tools}\n"
            );
            let read: Command = parse_front_matter_as(&yaml).unwrap();
            assert_eq!(read.description, description, "{yaml}");
            assert_eq!(read.argument_hint, "[pr-number] [priority]");
            assert_eq!(read.tools, ["Read", "Grep"], "{yaml}");
        }
        // A plain value continued on more-indented lines is one line of text, as in YAML.
        let read: Fields =
            parse_front_matter_as("description: Reviews: code\n  and tests\ntools: Read\n")
                .unwrap();
        assert_eq!(read.description.as_deref(), Some("Reviews: code and tests"));
        assert_eq!(read.tools, ["Read"]);
    }

    #[test]
    fn empty_front_matter_is_an_empty_mapping() {
        for yaml in ["", "\n", "# only a comment\n", "~\n"] {
            let fields: Fields = parse_front_matter_as(yaml).unwrap();
            assert_eq!(fields.description, None, "{yaml:?}");
            assert!(fields.tools.is_empty());
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 500,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Text made of YAML's indicators, quotes, escapes and line breaks: a value or a one-line
        /// error, never a panic, typed or typeless.
        #[test]
        fn any_yaml_ish_text_is_a_value_or_a_one_line_error(
            yaml in "([-a-z0-9:&*!|>%@`#,?'\"\\{}\\[\\] \t\n]|\n  |\n- ){0,120}"
        ) {
            let typed = parse_front_matter_as::<Fields>(&yaml).err();
            let typeless = parse_front_matter_as::<serde_json::Value>(&yaml).err();
            for error in [typed, typeless].into_iter().flatten() {
                proptest::prop_assert!(
                    !error.contains('\n') && error.chars().count() <= MAX_ERROR_CHARS + 1,
                    "{:?}",
                    error
                );
            }
        }
    }

    #[test]
    fn split_front_matter_finds_the_block_between_the_marker_lines() {
        let (front, body) = split_front_matter("\u{feff}---\r\nname: x\r\n---\r\nbody\n");
        assert_eq!(front, Some("name: x\r\n"));
        assert_eq!(body, "body\n");
        assert_eq!(split_front_matter("---\nname: x\n").0, None);
        assert_eq!(split_front_matter("text\n---\n").0, None);
    }
}
