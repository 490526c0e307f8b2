//! Entry points for the fuzz targets in `fuzz/` (run with `fuzz/run` on nightly), kept in the
//! library so that the same code replays every input the fuzzer ever flagged as an ordinary
//! stable `cargo test` (`tests/providers/fuzz_regressions.rs`). Not a public API: hidden from the docs and
//! free to change.
//!
//! Each function takes arbitrary bytes, must not panic, must return, and checks an invariant of
//! the component it drives — stronger than "does not crash":
//! - the SSE decoder yields the same events however the bytes are split;
//! - partial JSON offers a snapshot that agrees with the complete text once it is valid JSON;
//! - each provider's stream parser turns any event sequence into a terminal or a partial
//!   message whose tool calls all have ids and names;
//! - a session import that succeeds exports and re-imports to the same messages;
//! - pattern checks refuse or compile any glob and regex without overflowing the stack;
//! - the workspace path resolver never resolves a path outside the workspace root;
//! - front matter splits into parts of the text, and parsing it ends in a value or a one-line
//!   error, whatever its YAML.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::json::partial_json::PartialJson;
use crate::model::ModelEvent;
use crate::providers::core::StreamParser;
use crate::providers::sse::{SseDecoder, SseEvent};
use crate::session::{ImportOptions, SessionStore, SqliteStore};
use crate::transcript::{Message, Part, Role};

/// Splits `data` into pieces whose sizes come from the data itself (so the fuzzer explores
/// boundaries): the first byte seeds a cycle of piece lengths 1..=16.
fn pieces(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let seed = data.first().copied().unwrap_or(0) as usize;
    let mut at = 0;
    let mut n = 0;
    std::iter::from_fn(move || {
        if at >= data.len() {
            return None;
        }
        let len = 1 + (seed.wrapping_mul(31).wrapping_add(n * 7)) % 16;
        n += 1;
        let end = (at + len).min(data.len());
        let piece = &data[at..end];
        at = end;
        Some(piece)
    })
}

fn decode(data: &[u8], split: bool) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    if split {
        for piece in pieces(data) {
            if decoder.push(piece, &mut events).is_err() {
                break;
            }
        }
    } else {
        // An oversized event ends both decodes at the same event.
        let _too_large = decoder.push(data, &mut events);
    }
    events
}

/// The SSE decoder: the events of the whole input equal the events of the input fed in pieces.
pub fn sse(data: &[u8]) {
    let whole = decode(data, false);
    let split = decode(data, true);
    assert_eq!(
        whole, split,
        "SSE events depend on how the bytes were split"
    );
}

/// Partial JSON: pushing the text in pieces never panics, and once the whole text is a valid
/// JSON object or array, the snapshot equals it.
pub fn partial_json(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut parser = PartialJson::new();
    let mut rest: &str = &text;
    let mut n = 0usize;
    while !rest.is_empty() {
        let mut cut = (1 + (n * 5) % 13).min(rest.len());
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        let (piece, tail) = rest.split_at(cut);
        let _ = parser.push_and_snapshot(piece);
        rest = tail;
        n += 1;
    }
    assert_eq!(parser.text(), text, "partial JSON lost or reordered text");
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) {
        if value.is_object() || value.is_array() {
            assert!(
                !parser.is_broken(),
                "valid JSON was declared broken: {text}"
            );
            assert_eq!(
                parser.snapshot(),
                Some(value),
                "snapshot of complete JSON differs"
            );
        }
    }
}

/// Drives one provider's stream parser with the SSE events in `data`, as the transport does:
/// events until the terminal one or an error, then the finished or partial message.
fn drive(mut parser: impl StreamParser, data: &[u8]) {
    let mut out: Vec<ModelEvent> = Vec::new();
    let mut message = None;
    for event in decode(data, true) {
        match parser.on_event(event, &mut out) {
            Ok(false) => {}
            Ok(true) => {
                message = Some(parser.finish().unwrap_or_else(|_| parser.partial()));
                break;
            }
            Err(_) => break,
        }
    }
    let message = message.unwrap_or_else(|| parser.partial());
    check_assistant(&message);
}

/// What every assembled reply must satisfy, whatever the provider sent.
fn check_assistant(message: &Message) {
    assert_eq!(message.role, Role::Assistant);
    for part in &message.content {
        if let Part::ToolCall(call) = part {
            assert!(!call.id.is_empty(), "a tool call without an id: {call:?}");
        }
    }
    // The message must serialize and read back (it goes to the session store next).
    let json = serde_json::to_string(message).unwrap_or_default();
    let back: Result<Message, _> = serde_json::from_str(&json);
    assert!(
        back.is_ok(),
        "an assembled message does not round-trip: {json}"
    );
}

/// The OpenAI Chat Completions stream parser.
pub fn openai_chat_stream(data: &[u8]) {
    drive(
        crate::providers::openai_chat::ChatParser::new("fuzz".into()),
        data,
    );
}

/// The OpenAI Responses stream parser.
pub fn openai_responses_stream(data: &[u8]) {
    drive(
        crate::providers::openai_responses::ResponsesParser::new(
            "fuzz".into(),
            "tool_search".into(),
        ),
        data,
    );
}

/// The Anthropic Messages stream parser.
pub fn anthropic_stream(data: &[u8]) {
    drive(
        crate::providers::anthropic::MessagesParser::new("fuzz".into()),
        data,
    );
}

/// Session JSON Lines import: whatever imports, exports and re-imports to the same messages.
pub fn session_jsonl(data: &[u8]) {
    let Ok(store) = SqliteStore::open_in_memory() else {
        return;
    };
    let Ok(info) = store.import_jsonl(&mut Cursor::new(data), ImportOptions::new()) else {
        return;
    };
    let first = store.entries(&info.id).unwrap_or_default();
    let mut exported = Vec::new();
    if let Err(e) = store.export_jsonl(&info.id, &mut exported) {
        panic!("an imported session cannot be exported: {e}");
    }
    let again = match store.import_jsonl(&mut Cursor::new(&exported), ImportOptions::new()) {
        Ok(again) => again,
        Err(e) => panic!("an exported session cannot be imported: {e}"),
    };
    let second = store.entries(&again.id).unwrap_or_default();
    let messages = |entries: &[crate::session::StoredMessage]| -> Vec<Message> {
        entries.iter().map(|e| e.message.clone()).collect()
    };
    assert_eq!(
        messages(&first),
        messages(&second),
        "export/import changed messages"
    );
}

/// Glob and regex checks: any pattern is refused or compiled, and a compiled one can match.
pub fn patterns(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(glob) = crate::builtin::patterns::compile_glob(&text) {
        let _ = glob.is_match("src/main.rs");
        let _ = glob.is_match(text.as_ref());
    }
    if let Ok(regex) = crate::builtin::patterns::compile_regex(&text) {
        let _ = regex.is_match("fn main() { println!(\"hello\"); }");
        let _ = regex.find(text.as_ref());
    }
}

/// A workspace with a nested directory, a file, and symbolic links that point out of it, made
/// once per process in a fixed place under the temp directory (reused by later runs, so replays
/// leave nothing behind).
fn fuzz_workspace() -> Option<&'static crate::builtin::Workspace> {
    static WORKSPACE: OnceLock<Option<crate::builtin::Workspace>> = OnceLock::new();
    WORKSPACE
        .get_or_init(|| {
            let base = std::env::temp_dir().join("agentloop-fuzz-workspace");
            let root = base.join("ws");
            std::fs::create_dir_all(root.join("src/nested")).ok()?;
            std::fs::write(root.join("src/lib.rs"), "").ok()?;
            #[cfg(unix)]
            for (target, link) in [
                (base.as_path(), root.join("up")),
                (Path::new("/"), root.join("src/root")),
                (Path::new("nested"), root.join("src/inside")),
            ] {
                if std::fs::symlink_metadata(&link).is_err() {
                    std::os::unix::fs::symlink(target, &link).ok()?;
                }
            }
            crate::builtin::Workspace::new(&root).ok()
        })
        .as_ref()
}

/// The workspace path resolver: a resolved path always lies inside the root.
pub fn workspace_path(data: &[u8]) {
    let Some(workspace) = fuzz_workspace() else {
        return;
    };
    let text = String::from_utf8_lossy(data);
    if let Ok(resolved) = workspace.resolve(&text) {
        assert!(
            inside(&resolved, workspace.root()),
            "{text:?} resolved to {} outside {}",
            resolved.display(),
            workspace.root().display()
        );
    }
}

/// Whether `path`, with whatever part of it exists canonicalized, lies under `root`.
fn inside(path: &Path, root: &Path) -> bool {
    let mut existing: PathBuf = path.to_path_buf();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_owned());
                existing = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let Ok(mut real) = existing.canonicalize() else {
        return false;
    };
    for name in rest.into_iter().rev() {
        real.push(name);
    }
    real.starts_with(root)
}

/// Front matter: the split gives parts of the text; parsing (typed, and typeless, which follows
/// every node and alias) returns a value or an error of one short line, within the budget.
pub fn front_matter(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let (front, rest) = crate::builtin::split_front_matter(&text);
    assert!(text.ends_with(rest), "the rest is not the end of the text");
    if let Some(front) = front {
        assert!(
            text.contains(front),
            "the front matter is not part of the text"
        );
    }
    let yaml = front.unwrap_or(&text);
    let errors = [
        crate::builtin::parse_front_matter(yaml).err(),
        crate::builtin::parse_front_matter_as::<serde_json::Value>(yaml).err(),
    ];
    for error in errors.into_iter().flatten() {
        assert!(
            !error.contains('\n') && error.chars().count() <= crate::builtin::MAX_ERROR_CHARS + 1,
            "not one short line: {error:?}"
        );
    }
}
