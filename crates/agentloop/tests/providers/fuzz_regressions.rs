//! Replays, on stable, every input the fuzz targets were seeded with or ever flagged
//! (`fuzz/seeds/<target>/`, `fuzz/regressions/<target>/`, and the recorded provider streams),
//! through the same entry points the targets call (`agentloop::fuzzing`). A fix for a fuzzer
//! finding stays fixed without nightly in CI. See `fuzz/run` to fuzz.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of `dir` (none when it does not exist), sorted for stable output.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

/// Runs `target` on every seed and regression input of `name` plus `extra` files; fails with
/// the names of the inputs that panicked. Returns how many inputs ran.
fn replay(name: &str, target: fn(&[u8]), extra: &[PathBuf]) -> usize {
    let fuzz = repo().join("fuzz");
    let mut inputs = files(&fuzz.join("seeds").join(name));
    inputs.extend(files(&fuzz.join("regressions").join(name)));
    inputs.extend(extra.iter().cloned());
    let mut failed = Vec::new();
    for input in &inputs {
        let data = std::fs::read(input).unwrap();
        if std::panic::catch_unwind(|| target(&data)).is_err() {
            failed.push(input.display().to_string());
        }
    }
    assert!(failed.is_empty(), "{name}: inputs that fail: {failed:#?}");
    inputs.len()
}

fn recorded(provider: &str) -> Vec<PathBuf> {
    files(
        &Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/providers")
            .join(provider),
    )
    .into_iter()
    .filter(|p| p.extension().is_some_and(|e| e == "sse"))
    .collect()
}

#[test]
fn sse_decoder_inputs() {
    let mut all = recorded("openai-chat");
    all.extend(recorded("openai-responses"));
    all.extend(recorded("anthropic"));
    assert!(replay("sse", agentloop::fuzzing::sse, &all) > 20);
}

#[test]
fn stream_parser_inputs() {
    assert!(
        replay(
            "openai_chat_stream",
            agentloop::fuzzing::openai_chat_stream,
            &recorded("openai-chat"),
        ) > 5
    );
    assert!(
        replay(
            "openai_responses_stream",
            agentloop::fuzzing::openai_responses_stream,
            &recorded("openai-responses"),
        ) > 5
    );
    assert!(
        replay(
            "anthropic_stream",
            agentloop::fuzzing::anthropic_stream,
            &recorded("anthropic"),
        ) > 5
    );
}

#[test]
fn partial_json_inputs() {
    assert!(replay("partial_json", agentloop::fuzzing::partial_json, &[]) > 0);
}

#[test]
fn session_import_inputs() {
    assert!(replay("session_jsonl", agentloop::fuzzing::session_jsonl, &[]) > 0);
}

#[test]
fn pattern_inputs() {
    assert!(replay("patterns", agentloop::fuzzing::patterns, &[]) > 0);
}

#[test]
fn workspace_path_inputs() {
    assert!(replay("workspace_path", agentloop::fuzzing::workspace_path, &[]) > 0);
}

#[test]
fn front_matter_inputs() {
    assert!(replay("front_matter", agentloop::fuzzing::front_matter, &[]) > 2);
}
