//! Bounds on the patterns a model hands to `find_files` and `grep`: every glob and regular
//! expression is checked for length and nesting *before* it is compiled, so a pathological
//! pattern is an error result instead of a stack overflow or a huge automaton.
//!
//! The glob compiler recurses once per nested `{…}` group and the regex compiler's work grows
//! with nesting and repetition, so both are bounded here by cheap linear scans; the compiled
//! regex is additionally held to a size limit.

use globset::{GlobBuilder, GlobMatcher};
use regex::{Regex, RegexBuilder};

use crate::tooling::ToolError;

/// The longest glob pattern accepted, in bytes.
pub const MAX_GLOB_LEN: usize = 1_024;
/// How deeply `{…}` alternation groups may nest in a glob.
pub const MAX_GLOB_NESTING: usize = 8;
/// The most `{…}` groups and `,` alternatives one glob may hold in total.
pub const MAX_GLOB_ALTERNATIVES: usize = 256;
/// The longest regular expression accepted, in bytes.
pub const MAX_REGEX_LEN: usize = 4_096;
/// How deeply groups, repetitions and classes may nest in a regular expression.
pub const MAX_REGEX_NESTING: u32 = 64;
/// Upper bound on the compiled program of one regular expression.
const REGEX_SIZE_LIMIT: usize = 10 * (1 << 20);

/// Checks a glob's length and `{}` nesting, then compiles it with `*` not crossing `/`.
pub(crate) fn compile_glob(pattern: &str) -> Result<GlobMatcher, ToolError> {
    check_glob(pattern)?;
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .map_err(|e| ToolError::new(format!("invalid glob pattern `{}`: {e}", shown(pattern))))?;
    Ok(glob.compile_matcher())
}

/// The length and nesting rules of [`compile_glob`], without compiling.
pub(super) fn check_glob(pattern: &str) -> Result<(), ToolError> {
    if pattern.len() > MAX_GLOB_LEN {
        return Err(ToolError::new(format!(
            "the glob pattern is {} bytes long; at most {MAX_GLOB_LEN} are accepted. \
             Use a shorter pattern (e.g. `*.rs` or `src/**/*.toml`)",
            pattern.len()
        )));
    }
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut alternatives = 0usize;
    let mut in_class = false;
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '[' if !in_class => in_class = true,
            ']' if in_class => in_class = false,
            '{' if !in_class => {
                depth += 1;
                alternatives += 1;
                deepest = deepest.max(depth);
            }
            '}' if !in_class => depth = depth.saturating_sub(1),
            ',' if !in_class && depth > 0 => alternatives += 1,
            _ => {}
        }
    }
    if deepest > MAX_GLOB_NESTING {
        return Err(ToolError::new(format!(
            "the glob pattern nests `{{...}}` groups {deepest} deep; at most \
             {MAX_GLOB_NESTING} levels are accepted. Flatten the alternatives or run several \
             searches"
        )));
    }
    if alternatives > MAX_GLOB_ALTERNATIVES {
        return Err(ToolError::new(format!(
            "the glob pattern has {alternatives} `{{...}}` groups and alternatives; at most \
             {MAX_GLOB_ALTERNATIVES} are accepted. Use a simpler pattern or several searches"
        )));
    }
    Ok(())
}

/// Checks a regular expression's length, then compiles it with bounded nesting and size.
pub(crate) fn compile_regex(pattern: &str) -> Result<Regex, ToolError> {
    if pattern.len() > MAX_REGEX_LEN {
        return Err(ToolError::new(format!(
            "the regular expression is {} bytes long; at most {MAX_REGEX_LEN} are accepted. \
             Search for a shorter, more specific pattern",
            pattern.len()
        )));
    }
    RegexBuilder::new(pattern)
        // The parser refuses deeper nesting with an error instead of recursing into it.
        .nest_limit(MAX_REGEX_NESTING)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            ToolError::new(format!(
                "invalid regular expression `{}`: {e}",
                shown(pattern)
            ))
        })
}

/// A pattern as quoted in an error: long ones are cut so the error itself stays small.
fn shown(pattern: &str) -> String {
    const SHOWN: usize = 200;
    if pattern.len() <= SHOWN {
        return pattern.to_owned();
    }
    let mut end = SHOWN;
    while !pattern.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &pattern[..end])
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn ordinary_patterns_compile() {
        for glob in [
            "*.rs",
            "src/**/*.{rs,toml}",
            "{a,{b,c}}",
            "[{]x",
            "\\{{a,b}",
        ] {
            assert!(compile_glob(glob).is_ok(), "{glob}");
        }
        assert!(compile_regex("(?i)fn\\s+main\\(").is_ok());
    }

    #[test]
    fn deep_or_long_globs_are_refused_before_compiling() {
        let deep = format!("{}a{}", "{".repeat(100_000), "}".repeat(100_000));
        let err = compile_glob(&deep).unwrap_err().to_string();
        assert!(
            err.contains("too long") || err.contains("bytes long"),
            "{err}"
        );
        let deep = format!("{}a{}", "{x,".repeat(20), "}".repeat(20));
        let err = compile_glob(&deep).unwrap_err().to_string();
        assert!(err.contains("nests"), "{err}");
        let wide = format!("{{{}}}", vec!["a"; 400].join(","));
        assert!(
            compile_glob(&wide)
                .unwrap_err()
                .to_string()
                .contains("alternatives")
        );
        // Braces inside a class are literal and do not count.
        assert!(check_glob(&format!("[{}]", "{".repeat(50))).is_ok());
    }

    #[test]
    fn deep_or_long_regexes_are_refused() {
        let deep = format!("{}a{}", "(".repeat(1_000), ")".repeat(1_000));
        assert!(compile_regex(&deep).is_err());
        assert!(compile_regex(&"a".repeat(MAX_REGEX_LEN + 1)).is_err());
        let huge = "\\w{1000}\\w{1000}\\w{1000}";
        assert!(compile_regex(huge).is_err());
    }
}
