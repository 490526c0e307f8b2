//! Misuse of `#[tool]`, `#[agentloop::schema]` and their options fails at compile time with a
//! message pointing at the offending token. Each case is a file in `tests/ui/` with the expected
//! compiler output beside it (`.stderr`); regenerate them with
//! `TRYBUILD=overwrite cargo test -p agentloop-macros --test compile_fail`.
//!
//! `tests/pass/` holds programs that must compile and run with only this crate's dev-dependencies
//! (agentloop, serde, serde_json, tokio — no schemars): the proof that a crate needs no schemars
//! dependency of its own for tool arguments, typed output and deps bundles.

#[test]
fn misuse_is_a_compile_error_and_correct_use_needs_no_schemars() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}
