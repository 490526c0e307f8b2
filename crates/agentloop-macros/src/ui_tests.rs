//! Misuse of `#[tool]` and `#[agentloop::schema]` is a compile error with a message pointing at
//! the offending token. Each case is a program in `tests/ui/` with the compiler's report beside
//! it (`.stderr`); these tests run the macro on the program's tokens, as the compiler would, and
//! check the error it emits against that report: the message (`error: …`), the place
//! (`--> tests/ui/FILE.rs:LINE:COLUMN`) and, for a one-line span, the width of the `^^^` marks.
//!
//! The macro runs here on `proc_macro2`'s own tokens, so no program is compiled and nothing the
//! programs use is built. The one case whose error comes from the compiler rather than the macro
//! (a return type that is not a tool output, reported through `#[diagnostic::on_unimplemented]`)
//! is a `compile_fail` doctest on `#[tool]`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use proc_macro2::{Delimiter, Span, TokenStream, TokenTree};
use quote::ToTokens;

/// Cases whose report is the compiler's (`error[E…]`), checked by a doctest instead.
const COMPILER_ERRORS: &[&str] = &["unsupported_return"];

/// The place and text of the report a compiler shows for one case.
#[derive(Debug, PartialEq, Eq)]
struct Report {
    message: String,
    line: usize,
    /// 1-based, in characters, as the compiler counts.
    column: usize,
    /// The number of `^` marks, when the span is on one line.
    width: Option<usize>,
}

/// Which macro an attribute is.
#[derive(Clone, Copy)]
enum Macro {
    Tool,
    Schema,
}

/// The first `#[tool]` / `#[agentloop::schema]` of the program, with the tokens of its
/// arguments and of the item it is on (without the attribute itself).
fn attributed(file: &syn::File) -> (Macro, TokenStream, TokenStream) {
    fn which(attrs: &[syn::Attribute]) -> Option<(usize, Macro, TokenStream)> {
        attrs.iter().enumerate().find_map(|(i, attr)| {
            let last = attr.path().segments.last()?.ident.to_string();
            let kind = match last.as_str() {
                "tool" => Macro::Tool,
                "schema" => Macro::Schema,
                _ => return None,
            };
            let args = match &attr.meta {
                syn::Meta::List(list) => list.tokens.clone(),
                _ => TokenStream::new(),
            };
            Some((i, kind, args))
        })
    }
    for item in &file.items {
        let mut item = item.clone();
        let attrs = match &mut item {
            syn::Item::Fn(f) => &mut f.attrs,
            syn::Item::Struct(s) => &mut s.attrs,
            syn::Item::Enum(e) => &mut e.attrs,
            syn::Item::Union(u) => &mut u.attrs,
            syn::Item::Impl(imp) => {
                for impl_item in &imp.items {
                    if let syn::ImplItem::Fn(f) = impl_item {
                        let mut f = f.clone();
                        if let Some((i, kind, args)) = which(&f.attrs) {
                            f.attrs.remove(i);
                            return (kind, args, f.into_token_stream());
                        }
                    }
                }
                continue;
            }
            _ => continue,
        };
        if let Some((i, kind, args)) = which(attrs) {
            attrs.remove(i);
            return (kind, args, item.into_token_stream());
        }
    }
    panic!("no #[tool] or #[agentloop::schema] in the program");
}

/// The first `compile_error! { "…" }` in `tokens`: its message and its span.
fn compile_error(tokens: TokenStream) -> Option<(String, Span, Span)> {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        let TokenTree::Ident(ident) = token else {
            continue;
        };
        if ident != "compile_error" {
            continue;
        }
        let Some(TokenTree::Group(group)) = tokens.get(i + 2) else {
            continue;
        };
        if group.delimiter() != Delimiter::Brace {
            continue;
        }
        let literal: syn::LitStr = syn::parse2(group.stream()).ok()?;
        // `::core::compile_error! {..}`: the path has the error's start, the braces its end.
        return Some((literal.value(), ident.span(), group.span()));
    }
    None
}

/// What the macro reports for the program `source`.
fn macro_report(source: &str) -> Report {
    let file = syn::parse_file(source).unwrap();
    let (kind, args, item) = attributed(&file);
    let out = match kind {
        Macro::Tool => crate::tool_tokens(args, item),
        Macro::Schema => crate::schema_tokens(args, item),
    };
    let (message, start, end) = compile_error(out).expect("the macro reports an error");
    let (from, to) = (start.start(), end.end());
    Report {
        message,
        line: from.line,
        column: from.column + 1,
        width: (from.line == to.line).then(|| to.column - from.column),
    }
}

/// The report the compiler showed for `case` (from its `.stderr`).
fn expected_report(stderr: &str, case: &Path) -> Report {
    let mut lines = stderr.lines();
    let first = lines.next().unwrap();
    let message = first
        .strip_prefix("error: ")
        .unwrap_or_else(|| panic!("{}: not a macro error: {first}", case.display()))
        .to_owned();
    let place = lines.next().unwrap().trim_start();
    let place = place.strip_prefix("--> ").unwrap();
    let mut parts = place.rsplitn(3, ':');
    let column = parts.next().unwrap().parse().unwrap();
    let line = parts.next().unwrap().parse().unwrap();
    // ` |`, `N | source`, ` |   ^^^^ …`
    let marks = lines.nth(2).unwrap_or_default();
    let width = marks
        .split_once('|')
        .map(|(_, rest)| rest.trim_start().chars().take_while(|c| *c == '^').count())
        .filter(|n| *n > 0);
    Report {
        message,
        line,
        column,
        width,
    }
}

fn cases() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ui");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    cases.sort();
    cases
}

#[test]
fn every_misuse_is_reported_at_the_offending_token() {
    let cases = cases();
    assert!(cases.len() >= 15, "{cases:?}");
    let mut checked = 0;
    for case in &cases {
        let name = case.file_stem().unwrap().to_str().unwrap();
        let stderr = std::fs::read_to_string(case.with_extension("stderr")).unwrap();
        if stderr.starts_with("error[") {
            assert!(
                COMPILER_ERRORS.contains(&name),
                "{name}: a compiler error needs a compile_fail doctest"
            );
            continue;
        }
        let source = std::fs::read_to_string(case).unwrap();
        let expected = expected_report(&stderr, case);
        let mut got = macro_report(&source);
        if expected.width.is_none() {
            got.width = None;
        }
        assert_eq!(got, expected, "{name}");
        checked += 1;
    }
    assert_eq!(checked, cases.len() - COMPILER_ERRORS.len());
}

#[test]
fn correct_use_reports_nothing() {
    let source = "/// Add.\n#[tool(timeout = \"2s\")]\nfn add(a: i64, b: i64) -> i64 { a + b }\n";
    let file = syn::parse_file(source).unwrap();
    let (_, args, item) = attributed(&file);
    assert!(compile_error(crate::tool_tokens(args, item)).is_none());
}
