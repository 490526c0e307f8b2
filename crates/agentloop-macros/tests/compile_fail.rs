//! Misuse of `#[tool]` fails at compile time with a message pointing at the offending token.
//! Each case is a file in `tests/ui/` with the expected compiler output beside it (`.stderr`);
//! regenerate them with `TRYBUILD=overwrite cargo test -p agentloop-macros --test compile_fail`.

#[test]
fn misuse_is_a_compile_error() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
