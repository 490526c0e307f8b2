//! Behaviour of the durable session store: create / append / list / load / delete / fork /
//! rename, exact round-trips, load-time repair of interrupted tool batches, JSON Lines export and
//! import, the recorder attached to a real agent run, concurrent writers in two processes, and
//! the settings and running totals stored with a session (with the migration that adds them).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::ReasoningLevel;
use agentloop::model::{ScriptedModel, ScriptedTurn};
use agentloop::session::{
    Durability, ImportOptions, NewSession, SessionError, SessionFilter, SessionInfo,
    SessionRecorder, SessionSettings, SessionStats, SessionStore, SqliteOptions, SqliteStore,
    interrupted_result_text,
};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{
    ImagePart, Message, Part, Role, StopReason, ThinkingPart, ToolArguments, ToolCallPart,
    ToolResultPart, Usage,
};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// helpers

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "agentloop-sessions-{tag}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn db(&self) -> PathBuf {
        self.0.join("sessions.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(dir: &TempDir) -> SqliteStore {
    SqliteStore::open(dir.db()).unwrap()
}

fn call(id: &str, tool: &str) -> Part {
    Part::ToolCall(ToolCallPart::new(id, tool, json!({"n": 1})))
}

fn assistant_calls(calls: &[(&str, &str)], stop: StopReason) -> Message {
    Message::assistant(calls.iter().map(|(id, t)| call(id, t)).collect(), stop)
}

fn result(id: &str, tool: &str, text: &str) -> Message {
    Message::tool_result(ToolResultPart::success(id, tool, text))
}

/// Every part and metadata field the transcript can hold.
fn rich_conversation() -> Vec<Message> {
    let mut assistant = Message::assistant(
        vec![
            Part::Thinking(ThinkingPart {
                thinking: "Let me think…".into(),
                signature: Some("sig==".into()),
                redacted: false,
            }),
            Part::Thinking(ThinkingPart {
                thinking: String::new(),
                signature: Some("opaque".into()),
                redacted: true,
            }),
            Part::text("Calling tools: ünïcødé ✓ \"quoted\"\n"),
            Part::ToolCall(ToolCallPart::new("c1", "read", json!({"path": "a.txt"}))),
            Part::ToolCall(ToolCallPart {
                id: "c2".into(),
                tool_name: "write".into(),
                arguments: ToolArguments::Unparsed("{\"path\": \"b".into()),
                provider_data: None,
            }),
            Part::ToolCall(ToolCallPart::new("c3", "noop", Value::Null)),
        ],
        StopReason::ToolUse,
    );
    assistant.model = Some("model-x".into());
    assistant.provider = Some("scripted".into());
    assistant.usage = Some(Usage {
        input_tokens: 1234,
        output_tokens: 56,
        cache_read_tokens: 7,
        cache_write_tokens: 0,
        cost_usd: Some(0.1 + 0.2), // 0.30000000000000004: needs an exact float round-trip
    });
    let mut image_result =
        ToolResultPart::success("c1", "read", "{\"lines\":[1,2,3]}\nwith a newline");
    image_result.images.push(ImagePart {
        media_type: "image/png".into(),
        data: "iVBORw0KGgo=".into(),
    });
    let mut failed = Message::assistant(vec![Part::text("partial")], StopReason::Error);
    failed.error_message = Some("HTTP 500 from provider".into());
    vec![
        Message::user_parts(vec![
            Part::text("Look at this"),
            Part::Image(ImagePart {
                media_type: "image/jpeg".into(),
                data: "/9j/4AAQ".into(),
            }),
        ]),
        assistant,
        Message::tool_result(image_result),
        Message::tool_result(ToolResultPart::error("c2", "write", "malformed arguments")),
        result("c3", "noop", ""),
        Message::custom("note", vec![Part::text("an extension's note")]),
        failed,
        Message::assistant(vec![Part::text("I refuse.")], StopReason::Refusal),
    ]
}

fn without_timestamps(messages: &[Message]) -> Vec<Message> {
    messages
        .iter()
        .cloned()
        .map(|mut m| {
            m.timestamp_ms = 0;
            m
        })
        .collect()
}

fn result_ids(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| m.tool_result_part().map(|r| r.call_id.clone()))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// create / append / list / load / delete / fork / rename

#[test]
fn create_append_load_list_and_delete() {
    let dir = TempDir::new("crud");
    let store = open(&dir);
    let info = store.create(NewSession::new().model("model-a")).unwrap();
    assert_eq!(info.message_count, 0);
    assert_eq!(info.last_seq, 0);
    assert_eq!(info.title, None);
    assert_eq!(info.model.as_deref(), Some("model-a"));
    assert!(!info.id.is_empty());
    assert!(store.load(&info.id).unwrap().is_empty());

    let messages = rich_conversation();
    let seqs: Vec<u64> = messages
        .iter()
        .map(|m| store.append(&info.id, m).unwrap())
        .collect();
    assert_eq!(seqs, (1..=messages.len() as u64).collect::<Vec<_>>());

    let loaded = store.load_raw(&info.id).unwrap();
    assert_eq!(loaded, messages);
    let entries = store.entries(&info.id).unwrap();
    assert_eq!(
        entries.iter().map(|e| e.seq).collect::<Vec<_>>(),
        seqs,
        "entries come in sequence order"
    );

    let after = store.info(&info.id).unwrap();
    assert_eq!(after.message_count, messages.len() as u64);
    assert_eq!(after.last_seq, messages.len() as u64);
    assert_eq!(after.title.as_deref(), Some("Look at this"));
    assert_eq!(
        after.model.as_deref(),
        Some("model-x"),
        "the model follows the assistant messages"
    );
    assert!(after.updated_ms >= info.created_ms);

    // Reopening the file (a new process would) sees the same.
    drop(store);
    let store = open(&dir);
    assert_eq!(store.load_raw(&info.id).unwrap(), messages);

    let other = store.create(NewSession::new()).unwrap();
    assert_eq!(
        store
            .list()
            .unwrap()
            .iter()
            .map(|s| s.id.clone())
            .collect::<Vec<_>>(),
        [other.id.clone(), info.id.clone()]
    );
    store.delete(&info.id).unwrap();
    assert!(matches!(
        store.load(&info.id),
        Err(SessionError::NotFound { .. })
    ));
    assert!(store.delete(&info.id).unwrap_err().is_not_found());
    assert!(matches!(
        store.append(&info.id, &Message::user("late")),
        Err(SessionError::NotFound { .. })
    ));
    assert_eq!(store.list().unwrap().len(), 1);
}

#[test]
fn the_exact_context_round_trips() {
    let store = SqliteStore::open_in_memory().unwrap();
    let session = store.create(NewSession::new()).unwrap();
    let messages = rich_conversation();
    for m in &messages {
        store.append(&session.id, m).unwrap();
    }
    // Complete batches in call order: the repaired load is the exact context too.
    assert_eq!(store.load(&session.id).unwrap(), messages);
    assert_eq!(store.load_raw(&session.id).unwrap(), messages);

    // A batch appended at once gives the same.
    let copy = store.create_with(NewSession::new(), &messages).unwrap();
    assert_eq!(copy.message_count, messages.len() as u64);
    assert_eq!(store.load(&copy.id).unwrap(), messages);
}

#[test]
fn sequence_numbers_are_per_session_and_monotonic() {
    let store = SqliteStore::open_in_memory().unwrap();
    let a = store.create(NewSession::new()).unwrap();
    let b = store.create(NewSession::new()).unwrap();
    let mut seqs_a = Vec::new();
    let mut seqs_b = Vec::new();
    for i in 0..10 {
        seqs_a.push(
            store
                .append(&a.id, &Message::user(format!("a{i}")))
                .unwrap(),
        );
        if i % 2 == 0 {
            seqs_b.push(
                store
                    .append(&b.id, &Message::user(format!("b{i}")))
                    .unwrap(),
            );
        }
    }
    assert_eq!(seqs_a, (1..=10).collect::<Vec<u64>>());
    assert_eq!(seqs_b, (1..=5).collect::<Vec<u64>>());
    let batch = store
        .append_all(&a.id, &[Message::user("x"), Message::user("y")])
        .unwrap();
    assert_eq!(batch, [11, 12]);
}

#[test]
fn titles_are_derived_once_unless_set_and_rename_moves_a_session_to_the_top() {
    let store = SqliteStore::open_in_memory().unwrap();
    let derived = store.create(NewSession::new()).unwrap();
    store
        .append(
            &derived.id,
            &Message::custom("note", vec![Part::text("not a prompt")]),
        )
        .unwrap();
    assert_eq!(store.info(&derived.id).unwrap().title, None);
    let long = format!("Please   refactor\nthe {} module", "very ".repeat(30));
    store.append(&derived.id, &Message::user(long)).unwrap();
    store
        .append(&derived.id, &Message::user("second prompt"))
        .unwrap();
    let title = store.info(&derived.id).unwrap().title.unwrap();
    assert!(
        title.starts_with("Please refactor the very very"),
        "{title}"
    );
    assert!(title.ends_with('…'), "{title}");
    assert!(title.chars().count() <= agentloop::session::TITLE_MAX_CHARS);

    let chosen = store.create(NewSession::new().title("My task")).unwrap();
    store.append(&chosen.id, &Message::user("prompt")).unwrap();
    assert_eq!(
        store.info(&chosen.id).unwrap().title.as_deref(),
        Some("My task")
    );
    assert_eq!(store.last().unwrap().unwrap().id, chosen.id);

    store.rename(&derived.id, "  Renamed  ").unwrap();
    let info = store.info(&derived.id).unwrap();
    assert_eq!(info.title.as_deref(), Some("Renamed"));
    assert_eq!(
        store.last().unwrap().unwrap().id,
        derived.id,
        "renaming counts as an update"
    );
    assert!(matches!(
        store.rename(&derived.id, "  "),
        Err(SessionError::Invalid { what: "title", .. })
    ));
    assert!(store.rename("nope", "x").unwrap_err().is_not_found());
}

#[test]
fn last_and_list_follow_the_most_recent_update() {
    let store = SqliteStore::open_in_memory().unwrap();
    assert!(store.last().unwrap().is_none());
    let ids: Vec<String> = (0..3)
        .map(|_| store.create(NewSession::new()).unwrap().id)
        .collect();
    assert_eq!(store.last().unwrap().unwrap().id, ids[2]);
    store.append(&ids[0], &Message::user("hi")).unwrap();
    assert_eq!(store.last().unwrap().unwrap().id, ids[0]);
    let order: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(order, [ids[0].clone(), ids[2].clone(), ids[1].clone()]);
}

#[test]
fn a_chosen_id_must_be_unused_and_not_empty() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = store.create(NewSession::new().id("fixed")).unwrap();
    assert_eq!(s.id, "fixed");
    assert!(matches!(
        store.create(NewSession::new().id("fixed")),
        Err(SessionError::AlreadyExists { .. })
    ));
    assert!(matches!(
        store.create(NewSession::new().id(" ")),
        Err(SessionError::Invalid { what: "id", .. })
    ));
}

#[test]
fn fork_copies_messages_up_to_and_including_a_seq() {
    let store = SqliteStore::open_in_memory().unwrap();
    let source = store
        .create(NewSession::new().title("Source").model("m"))
        .unwrap();
    let messages: Vec<Message> = (0..5).map(|i| Message::user(format!("m{i}"))).collect();
    store.append_all(&source.id, &messages).unwrap();

    let fork = store.fork(&source.id, 3).unwrap();
    assert_ne!(fork.id, source.id);
    assert_eq!(fork.message_count, 3);
    assert_eq!(fork.last_seq, 3);
    assert_eq!(fork.title.as_deref(), Some("Source"));
    assert_eq!(fork.model.as_deref(), Some("m"));
    let origin = fork.forked_from.clone().unwrap();
    assert_eq!(
        (origin.session_id.as_str(), origin.seq),
        (source.id.as_str(), 3)
    );
    assert_eq!(store.load(&fork.id).unwrap(), messages[..3].to_vec());
    assert_eq!(
        store
            .entries(&fork.id)
            .unwrap()
            .iter()
            .map(|e| e.seq)
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );

    // The fork goes its own way; the source is unchanged.
    assert_eq!(store.append(&fork.id, &Message::user("fork")).unwrap(), 4);
    assert_eq!(store.load(&source.id).unwrap(), messages);
    assert_eq!(store.append(&source.id, &Message::user("src")).unwrap(), 6);

    assert!(matches!(
        store.fork(&source.id, 99),
        Err(SessionError::SeqNotFound { seq: 99, .. })
    ));
    assert!(store.fork("missing", 1).unwrap_err().is_not_found());
}

#[test]
fn the_database_uses_wal_and_the_chosen_synchronous_level() {
    let dir = TempDir::new("pragmas");
    for durability in [Durability::ProcessCrash, Durability::PowerLoss] {
        let store = SqliteStore::open_with(
            dir.db(),
            SqliteOptions::default()
                .durability(durability)
                .busy_timeout(Duration::from_secs(2)),
        )
        .unwrap();
        let s = store.create(NewSession::new()).unwrap();
        store.append(&s.id, &Message::user("x")).unwrap();
        // `synchronous` is per connection (not observable from outside); the journal mode is
        // the file's.
        assert_eq!(store.options().durability, durability);
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        let mode: String = conn
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

#[test]
fn a_database_from_a_newer_version_is_refused() {
    let dir = TempDir::new("schema");
    drop(open(&dir));
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    assert!(matches!(
        SqliteStore::open(dir.db()),
        Err(SessionError::SchemaTooNew { found: 99, .. })
    ));
}

#[test]
fn a_damaged_message_is_reported_not_skipped() {
    let dir = TempDir::new("corrupt");
    let store = open(&dir);
    let s = store.create(NewSession::new()).unwrap();
    store.append(&s.id, &Message::user("fine")).unwrap();
    store.append(&s.id, &Message::user("damaged")).unwrap();
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    conn.execute("UPDATE messages SET json = '{not json' WHERE seq = 2", [])
        .unwrap();
    assert!(matches!(
        store.load(&s.id),
        Err(SessionError::Corrupt { seq: 2, .. })
    ));
}

// ---------------------------------------------------------------------------------------------
// interrupted tool batches

#[test]
fn an_unanswered_call_gets_an_interrupted_result_inside_its_batch() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = store.create(NewSession::new()).unwrap();
    let stored = vec![
        Message::user("go"),
        assistant_calls(
            &[("c1", "fast"), ("c2", "slow"), ("c3", "fast")],
            StopReason::ToolUse,
        ),
        // Completion order, as the recorder stores them; "c2" never finished.
        result("c3", "fast", "three"),
        result("c1", "fast", "one"),
    ];
    store.append_all(&s.id, &stored).unwrap();

    assert_eq!(store.load_raw(&s.id).unwrap(), stored, "raw is untouched");
    let loaded = store.load(&s.id).unwrap();
    assert_eq!(loaded.len(), 5);
    assert_eq!(loaded[..2], stored[..2]);
    assert_eq!(result_ids(&loaded), ["c1", "c2", "c3"], "call order");
    let synthetic = loaded[3].tool_result_part().unwrap();
    assert_eq!(synthetic.tool_name, "slow");
    assert!(synthetic.is_error);
    assert_eq!(
        synthetic.content,
        "Tool call \"slow\" was interrupted before it finished (the process stopped); it did \
         not complete."
    );
    assert_eq!(synthetic.content, interrupted_result_text("slow"));
    assert_eq!(loaded[2], stored[3]);
    assert_eq!(loaded[4], stored[2]);
    assert_eq!(
        store.load(&s.id).unwrap(),
        loaded,
        "repair is deterministic"
    );

    // A resumed run appends after the stored messages; the repair stays before them.
    store
        .append(
            &s.id,
            &Message::assistant(vec![Part::text("ok")], StopReason::Stop),
        )
        .unwrap();
    let resumed = store.load(&s.id).unwrap();
    assert_eq!(resumed[..5], loaded[..]);
    assert_eq!(resumed[5].text(), "ok");
}

#[test]
fn a_complete_transcript_gets_nothing_added() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = store.create(NewSession::new()).unwrap();
    let stored = vec![
        Message::user("go"),
        assistant_calls(&[("c1", "a"), ("c2", "b")], StopReason::ToolUse),
        result("c1", "a", "1"),
        result("c2", "b", "2"),
        Message::assistant(vec![Part::text("done")], StopReason::Stop),
    ];
    store.append_all(&s.id, &stored).unwrap();
    assert_eq!(store.load(&s.id).unwrap(), stored);
}

#[test]
fn repair_goes_before_the_next_message_and_skips_error_messages() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = store.create(NewSession::new()).unwrap();
    let stored = vec![
        Message::user("go"),
        assistant_calls(&[("c1", "a"), ("c2", "b")], StopReason::ToolUse),
        result("c1", "a", "1"),
        Message::user("steering"),
        // Never replayed: no result added.
        assistant_calls(&[("e1", "a")], StopReason::Error),
        Message::user("again"),
        // Aborted mid-stream before its results were written: repaired.
        assistant_calls(&[("x1", "a")], StopReason::Aborted),
    ];
    store.append_all(&s.id, &stored).unwrap();
    let loaded = store.load(&s.id).unwrap();
    let shape: Vec<String> = loaded
        .iter()
        .map(|m| match m.role {
            Role::ToolResult => {
                let r = m.tool_result_part().unwrap();
                format!("{}{}", r.call_id, if r.is_error { "!" } else { "" })
            }
            Role::User => m.text(),
            _ => "assistant".into(),
        })
        .collect();
    assert_eq!(
        shape,
        [
            "go",
            "assistant",
            "c1",
            "c2!",
            "steering",
            "assistant",
            "again",
            "assistant",
            "x1!"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// JSON Lines export / import

fn export(store: &dyn SessionStore, id: &str) -> String {
    let mut out = Vec::new();
    store.export_jsonl(id, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn export_then_import_round_trips_line_by_line() {
    let store = SqliteStore::open_in_memory().unwrap();
    let s = store
        .create(NewSession::new().title("Exported").model("m1"))
        .unwrap();
    let messages = rich_conversation();
    store.append_all(&s.id, &messages).unwrap();

    let first = export(&store, &s.id);
    let lines: Vec<&str> = first.lines().collect();
    assert_eq!(lines.len(), messages.len() + 1);
    let header: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(header["type"], "session");
    assert_eq!(header["format"], 1);
    assert_eq!(header["id"], s.id.as_str());
    assert_eq!(header["title"], "Exported");
    assert_eq!(header["message_count"], messages.len());
    for (line, message) in lines[1..].iter().zip(&messages) {
        assert_eq!(*line, serde_json::to_string(message).unwrap());
    }

    let imported = store
        .import_jsonl(&mut first.as_bytes(), ImportOptions::new())
        .unwrap();
    assert_ne!(imported.id, s.id, "a new id by default");
    assert_eq!(imported.title.as_deref(), Some("Exported"));
    assert_eq!(imported.model.as_deref(), Some("model-x"));
    assert_eq!(store.load_raw(&imported.id).unwrap(), messages);
    let second = export(&store, &imported.id);
    let second_lines: Vec<&str> = second.lines().collect();
    assert_eq!(second_lines[1..], lines[1..], "identical message lines");

    // keep_id: refused where the id exists, kept in another store.
    assert!(matches!(
        store.import_jsonl(&mut first.as_bytes(), ImportOptions::new().keep_id(true)),
        Err(SessionError::AlreadyExists { .. })
    ));
    let elsewhere = SqliteStore::open_in_memory().unwrap();
    let kept = elsewhere
        .import_jsonl(&mut first.as_bytes(), ImportOptions::new().keep_id(true))
        .unwrap();
    assert_eq!(kept.id, s.id);
    assert_eq!(
        export(&elsewhere, &kept.id).lines().nth(1),
        lines.get(1).copied()
    );
}

#[test]
fn import_accepts_a_bare_transcript_and_refuses_damaged_files() {
    let store = SqliteStore::open_in_memory().unwrap();
    let messages = vec![
        Message::user("bare prompt"),
        Message::assistant(vec![Part::text("answer")], StopReason::Stop),
    ];
    let bare: String = messages
        .iter()
        .map(|m| serde_json::to_string(m).unwrap() + "\n")
        .collect();
    let imported = store
        .import_jsonl(&mut bare.as_bytes(), ImportOptions::new())
        .unwrap();
    assert_eq!(store.load_raw(&imported.id).unwrap(), messages);
    assert_eq!(imported.title.as_deref(), Some("bare prompt"));

    let count_before = store.list().unwrap().len();
    let s = store.create(NewSession::new()).unwrap();
    store.append_all(&s.id, &messages).unwrap();
    let full = export(&store, &s.id);
    let truncated: String = full.lines().take(2).map(|l| format!("{l}\n")).collect();
    assert!(matches!(
        store.import_jsonl(&mut truncated.as_bytes(), ImportOptions::new()),
        Err(SessionError::Import { .. })
    ));
    let garbage = format!(
        "{}\n{{\"role\": \"nobody\"}}\n",
        full.lines().next().unwrap()
    );
    match store.import_jsonl(&mut garbage.as_bytes(), ImportOptions::new()) {
        Err(SessionError::Import { line, .. }) => assert_eq!(line, 2),
        other => panic!("expected an import error, got {other:?}"),
    }
    let newer = "{\"type\":\"session\",\"format\":2}\n";
    assert!(matches!(
        store.import_jsonl(&mut newer.as_bytes(), ImportOptions::new()),
        Err(SessionError::Import { line: 1, .. })
    ));
    assert_eq!(
        store.list().unwrap().len(),
        count_before + 1,
        "failed imports create nothing"
    );
}

// ---------------------------------------------------------------------------------------------
// the recorder

fn shared_store(dir: &TempDir) -> Arc<SqliteStore> {
    Arc::new(open(dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recorder_stores_a_run_and_each_result_as_its_call_finishes() {
    let dir = TempDir::new("recorder");
    let store = shared_store(&dir);
    let session = store.create(NewSession::new()).unwrap();
    let recorder = SessionRecorder::new(store.clone(), &session.id);

    let fast = ToolSpec::<Deps>::builder("fast", "Returns at once.")
        .handler(|_c: ToolContext<Deps>, _a: Value| async { "fast done" })
        .build()
        .unwrap();
    // The slow tool waits until the fast result is in the store: it only answers "saw it"
    // if the fast call's result was made durable while the slow call was still running.
    let watched = store.clone();
    let session_id = session.id.clone();
    let slow = ToolSpec::<Deps>::builder("slow", "Waits for its sibling's durable result.")
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let store = watched.clone();
            let id = session_id.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(10);
                while Instant::now() < deadline {
                    let stored = store.load_raw(&id).unwrap_or_default();
                    if result_ids(&stored).contains(&"call-fast".to_owned()) {
                        return "saw the fast result in the store";
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                "the fast result was not stored while I ran"
            }
        })
        .build()
        .unwrap();

    let model = ScriptedModel::new([
        ScriptedTurn::new()
            .with_text("Working.")
            .tool_call("call-slow", "slow", json!({}))
            .tool_call("call-fast", "fast", json!({})),
        ScriptedTurn::text("All done."),
    ]);
    let config = AgentLoopConfig {
        model: Some("scripted-1".into()),
        ..AgentLoopConfig::default()
    };
    let agent = AgentLoop::new(config, model)
        .with_tools([slow, fast])
        .unwrap()
        .with_emit(recorder.emit_fn());
    let outcome = tokio::time::timeout(
        Duration::from_secs(20),
        agent.run(vec![Message::user("Do both")], vec![]),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(outcome.stop, RunStop::Done);
    assert!(recorder.take_error().is_none());
    assert_eq!(recorder.failures(), 0);
    assert_eq!(recorder.appended(), 5);

    let raw = store.load_raw(&session.id).unwrap();
    assert_eq!(
        result_ids(&raw),
        ["call-fast", "call-slow"],
        "stored in completion order"
    );
    let slow_result = raw
        .iter()
        .filter_map(|m| m.tool_result_part())
        .find(|r| r.call_id == "call-slow")
        .unwrap();
    assert_eq!(slow_result.content, "saw the fast result in the store");

    // The repaired load is the agent's own context (timestamps aside: the recorder stamps a
    // result when its call finishes).
    let loaded = store.load(&session.id).unwrap();
    assert_eq!(
        without_timestamps(&loaded),
        without_timestamps(&outcome.context)
    );
    let info = store.info(&session.id).unwrap();
    assert_eq!(info.title.as_deref(), Some("Do both"));
    assert_eq!(info.model.as_deref(), Some("scripted-1"));
    assert_eq!(info.message_count, 5);
}

#[test]
fn the_recorder_dedupes_results_by_call_id_and_keeps_those_without_an_execution() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let session = store.create(NewSession::new()).unwrap();
    let recorder = SessionRecorder::new(store.clone(), &session.id);
    let calls = assistant_calls(&[("a", "t"), ("b", "t"), ("a2", "t")], StopReason::ToolUse);
    let a = ToolResultPart::success("a", "t", "A");
    let b = ToolResultPart::error("b", "t", "aborted before it ran");
    let a2 = ToolResultPart::success("a2", "t", "A2");
    let end = |r: &ToolResultPart| AgentEvent::ToolExecutionEnd {
        call: ToolCallPart::new(&r.call_id, "t", json!({})),
        result: r.clone(),
    };
    let message_end = |m: Message| AgentEvent::MessageEnd { message: m };

    recorder.on_event(&AgentEvent::AgentStart);
    recorder.on_event(&message_end(Message::user("go")));
    recorder.on_event(&AgentEvent::MessageStart {
        message: calls.clone(),
    });
    recorder.on_event(&message_end(calls.clone()));
    recorder.on_event(&end(&a2));
    recorder.on_event(&end(&a));
    // Later, the loop's own tool-result messages, in call order: "b" never had an execution.
    recorder.on_event(&message_end(Message::tool_result(a.clone())));
    recorder.on_event(&message_end(Message::tool_result(b.clone())));
    recorder.on_event(&message_end(Message::tool_result(a2.clone())));
    // A second batch reusing an id is recorded again (the dedupe is per pending result).
    recorder.on_event(&end(&a));
    recorder.on_event(&message_end(Message::tool_result(a.clone())));

    let raw = store.load_raw(&session.id).unwrap();
    assert_eq!(result_ids(&raw), ["a2", "a", "b", "a"]);
    assert_eq!(raw.len(), 6);
    assert_eq!(recorder.appended(), 6);
}

#[tokio::test]
async fn a_failing_store_never_stops_the_run_and_the_error_is_kept() {
    let store = Arc::new(SqliteStore::open_in_memory().unwrap());
    let recorder = SessionRecorder::new(store.clone(), "no-such-session");
    let agent = AgentLoop::new(
        AgentLoopConfig::default(),
        ScriptedModel::new([ScriptedTurn::text("hi")]),
    )
    .with_emit(recorder.emit_fn());
    let outcome = agent.run(vec![Message::user("x")], vec![]).await.unwrap();
    assert_eq!(outcome.stop, RunStop::Done);
    assert_eq!(recorder.failures(), 2);
    assert_eq!(recorder.appended(), 0);
    assert!(recorder.take_error().unwrap().is_not_found());
    assert!(recorder.take_error().is_none(), "taking clears it");
}

// ---------------------------------------------------------------------------------------------
// concurrent writers

const WRITER_ENV: &str = "AGENTLOOP_SESSIONS_TEST_WRITER";
const PER_WRITER: usize = 200;

fn payload(writer: &str, i: usize) -> String {
    format!("{writer}:{i}:{}", "x".repeat(64 + i % 7))
}

fn wait_for(path: &Path, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    false
}

/// Child side of `concurrent_appends_from_two_processes`; a no-op in a normal test run.
#[test]
fn concurrent_writer_child() {
    let Ok(spec) = std::env::var(WRITER_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, '|');
    let (writer, session, dir) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        PathBuf::from(parts.next().unwrap()),
    );
    let store = SqliteStore::open(dir.join("sessions.db")).unwrap();
    std::fs::write(dir.join(format!("ready-{writer}")), b"").unwrap();
    assert!(wait_for(&dir.join("go"), Duration::from_secs(30)));
    for i in 0..PER_WRITER {
        store
            .append(session, &Message::user(payload(writer, i)))
            .unwrap();
    }
}

#[test]
fn concurrent_appends_from_two_processes() {
    let dir = TempDir::new("concurrent");
    let store = open(&dir);
    let session = store.create(NewSession::new()).unwrap();
    let exe = std::env::current_exe().unwrap();
    let writers = ["A", "B"];
    let children: Vec<_> = writers
        .iter()
        .map(|w| {
            Command::new(&exe)
                .args(["--exact", "concurrent_writer_child", "--nocapture"])
                .stdout(Stdio::null())
                .env(
                    WRITER_ENV,
                    format!("{w}|{}|{}", session.id, dir.0.display()),
                )
                .spawn()
                .unwrap()
        })
        .collect();
    for w in writers {
        assert!(
            wait_for(&dir.0.join(format!("ready-{w}")), Duration::from_secs(30)),
            "writer {w} did not start"
        );
    }
    std::fs::write(dir.0.join("go"), b"").unwrap();
    for mut child in children {
        assert!(child.wait().unwrap().success(), "a writer failed");
    }

    let entries = store.entries(&session.id).unwrap();
    assert_eq!(entries.len(), 2 * PER_WRITER);
    let seqs: Vec<u64> = entries.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=2 * PER_WRITER as u64).collect::<Vec<_>>());
    let unique: HashSet<u64> = seqs.iter().copied().collect();
    assert_eq!(unique.len(), seqs.len());
    for w in writers {
        let texts: Vec<String> = entries
            .iter()
            .map(|e| e.message.text())
            .filter(|t| t.starts_with(&format!("{w}:")))
            .collect();
        let expected: Vec<String> = (0..PER_WRITER).map(|i| payload(w, i)).collect();
        assert_eq!(
            texts, expected,
            "writer {w}'s messages, intact and in order"
        );
    }
    let info = store.info(&session.id).unwrap();
    assert_eq!(info.message_count, 2 * PER_WRITER as u64);
    assert_eq!(info.last_seq, 2 * PER_WRITER as u64);
}

#[test]
fn threads_sharing_one_store_append_safely() {
    let dir = TempDir::new("threads");
    let store = shared_store(&dir);
    let session = store.create(NewSession::new()).unwrap();
    std::thread::scope(|scope| {
        for t in 0..4 {
            let store = store.clone();
            let id = session.id.clone();
            scope.spawn(move || {
                for i in 0..50 {
                    store
                        .append(&id, &Message::user(format!("t{t}-{i}")))
                        .unwrap();
                }
            });
        }
    });
    let seqs: Vec<u64> = store
        .entries(&session.id)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// settings, running totals, "the last session of this workspace", schema version 3

/// An assistant reply with usage (and a cost when given).
fn reply(text: &str, input: u64, output: u64, cost: Option<f64>) -> Message {
    let mut m = Message::assistant(vec![Part::text(text)], StopReason::Stop);
    m.model = Some("model-x".into());
    m.usage = Some(Usage {
        input_tokens: input,
        output_tokens: output,
        cost_usd: cost,
        ..Usage::default()
    });
    m
}

/// What a run that failed before any reply stores: the prompt and an error message.
fn failed_call() -> Message {
    let mut m = Message::assistant(vec![], StopReason::Error);
    m.error_message = Some("HTTP 401: invalid key".into());
    m
}

/// The stats a store must report: the shared function over exactly what it stores.
fn reference_stats(store: &dyn SessionStore, id: &str) -> SessionStats {
    SessionStats::from_messages(&store.load_raw(id).unwrap())
}

#[test]
fn settings_round_trip_without_credentials_and_follow_forks_and_exports() {
    let store = SqliteStore::open_in_memory().unwrap();
    let settings = SessionSettings::new()
        .workspace("/home/me/proj")
        .provider("anthropic")
        .model("claude-x")
        .base_url("http://me:s3cret@localhost:8080/v1")
        .reasoning(Some(ReasoningLevel::High));
    assert_eq!(
        settings.base_url.as_deref(),
        Some("http://localhost:8080/v1")
    );
    let info = store
        .create(NewSession::new().settings(settings.clone()))
        .unwrap();
    assert_eq!(info.settings, settings);
    assert_eq!(
        info.model.as_deref(),
        Some("claude-x"),
        "the model defaults to the settings' one"
    );
    // A credential assigned to the public field directly is still never stored.
    let mut raw = settings.clone();
    raw.base_url = Some("https://key@llm.example/v1".into());
    raw.reasoning = None;
    store.set_settings(&info.id, &raw).unwrap();
    let stored = store.info(&info.id).unwrap().settings;
    assert_eq!(stored.base_url.as_deref(), Some("https://llm.example/v1"));
    assert_eq!(stored.reasoning, None);
    assert_eq!(stored.workspace.as_deref(), Some("/home/me/proj"));
    assert!(
        store
            .set_settings("nope", &settings)
            .unwrap_err()
            .is_not_found()
    );

    store.set_settings(&info.id, &settings).unwrap();
    store
        .append_all(
            &info.id,
            &[Message::user("hi"), reply("hello", 10, 2, Some(0.25))],
        )
        .unwrap();
    let fork = store.fork(&info.id, 2).unwrap();
    assert_eq!(fork.settings, settings);
    assert_eq!(fork.stats, reference_stats(&store, &fork.id));
    assert_eq!(fork.stats.turns, 1);

    // The export's header carries the settings, and an import restores them.
    let exported = export(&store, &info.id);
    let header: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    assert_eq!(header["settings"]["provider"], "anthropic");
    assert_eq!(header["stats"]["turns"], 1);
    let imported = store
        .import_jsonl(&mut exported.as_bytes(), ImportOptions::new())
        .unwrap();
    assert_eq!(imported.settings, settings);
    assert_eq!(imported.stats, store.info(&info.id).unwrap().stats);
}

#[test]
fn running_totals_follow_every_append_as_the_shared_function_counts_them() {
    let dir = TempDir::new("stats");
    let store = open(&dir);
    let s = store.create(NewSession::new()).unwrap();
    assert_eq!(s.stats, SessionStats::default());
    store.append(&s.id, &Message::user("first")).unwrap();
    store.append(&s.id, &failed_call()).unwrap();
    let failed = store.info(&s.id).unwrap().stats;
    assert_eq!((failed.turns, failed.failed_turns), (0, 1));
    assert!(!failed.has_reply());
    store
        .append_all(
            &s.id,
            &[
                reply("a", 100, 10, None),
                result("c1", "read_file", "x"),
                reply("b", 200, 20, Some(0.5)),
            ],
        )
        .unwrap();
    store
        .create_with(NewSession::new().id("batch"), &rich_conversation())
        .unwrap();
    drop(store);
    let store = open(&dir);
    for id in [s.id.as_str(), "batch"] {
        let info = store.info(id).unwrap();
        assert_eq!(info.stats, reference_stats(&store, id), "{id}");
    }
    let stats = store.info(&s.id).unwrap().stats;
    assert_eq!((stats.turns, stats.failed_turns), (2, 1));
    assert_eq!(stats.usage.input_tokens, 300);
    assert_eq!(stats.usage.output_tokens, 30);
    assert_eq!(stats.usage.cost_usd, Some(0.5));
    assert_eq!(stats.total_tokens(), 330);
}

#[test]
fn last_in_picks_this_workspace_and_skips_sessions_without_a_reply() {
    let store = SqliteStore::open_in_memory().unwrap();
    let in_ws = |ws: &str| NewSession::new().settings(SessionSettings::new().workspace(ws));
    assert!(store.last_in("/a").unwrap().is_none());
    let a = store
        .create_with(in_ws("/a"), &[Message::user("q"), reply("r", 1, 1, None)])
        .unwrap();
    let b = store
        .create_with(in_ws("/b"), &[Message::user("q"), reply("r", 1, 1, None)])
        .unwrap();
    // Newer, but failed before any reply (a rejected key): not "the last session".
    let failed = store
        .create_with(in_ws("/a"), &[Message::user("q"), failed_call()])
        .unwrap();
    // Newest, but recorded without a workspace (an old database): never picked.
    let old = store
        .create_with(
            NewSession::new(),
            &[Message::user("q"), reply("r", 1, 1, None)],
        )
        .unwrap();
    assert_eq!(store.last_in("/a").unwrap().unwrap().id, a.id);
    assert_eq!(store.last_in("/b").unwrap().unwrap().id, b.id);
    assert!(store.last_in("/c").unwrap().is_none());
    assert!(store.last_in("").unwrap().is_none());
    // Still listed and reachable by id.
    assert_eq!(store.list().unwrap().len(), 4);
    assert_eq!(store.info(&failed.id).unwrap().stats.failed_turns, 1);
    assert_eq!(store.last().unwrap().unwrap().id, old.id);
    // Once the model replies, the failed session becomes the last one.
    store.append(&failed.id, &reply("r", 1, 1, None)).unwrap();
    assert_eq!(store.last_in("/a").unwrap().unwrap().id, failed.id);
}

/// Sessions for the filter checks: two workspaces, ids with LIKE wildcards and a shared prefix.
fn filter_fixture(store: &SqliteStore) {
    for (id, ws, replied) in [
        ("abc-1", Some("/a"), true),
        ("abd-2", Some("/a"), false),
        ("ab%_3", Some("/b"), true),
        ("zz", None, true),
        ("ab", Some("/b"), false),
    ] {
        let mut settings = SessionSettings::new();
        if let Some(ws) = ws {
            settings = settings.workspace(ws);
        }
        let mut messages = vec![Message::user("q")];
        if replied {
            messages.push(reply("r", 1, 1, None));
        }
        store
            .create_with(NewSession::new().id(id).settings(settings), &messages)
            .unwrap();
    }
}

#[test]
fn the_stores_filters_agree_with_the_reference_filter() {
    let store = SqliteStore::open_in_memory().unwrap();
    filter_fixture(&store);
    let all = store.list().unwrap();
    let ids = |v: &[SessionInfo]| v.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
    let mut filters = Vec::new();
    for workspace in [None, Some("/a"), Some("/b"), Some("/nowhere")] {
        for prefix in [
            None,
            Some("ab"),
            Some("ab%"),
            Some("a_"),
            Some(""),
            Some("zz"),
        ] {
            for with_reply in [false, true] {
                for limit in [None, Some(1)] {
                    let mut f = SessionFilter::new().with_reply(with_reply);
                    if let Some(w) = workspace {
                        f = f.workspace(w);
                    }
                    if let Some(p) = prefix {
                        f = f.id_prefix(p);
                    }
                    if let Some(n) = limit {
                        f = f.limit(n);
                    }
                    filters.push(f);
                }
            }
        }
    }
    for filter in filters {
        let expected: Vec<SessionInfo> = all
            .iter()
            .filter(|s| filter.matches(s))
            .take(filter.limit.unwrap_or(usize::MAX))
            .cloned()
            .collect();
        assert_eq!(
            ids(&store.list_where(&filter).unwrap()),
            ids(&expected),
            "{filter:?}"
        );
    }
    let found = store
        .list_where(&SessionFilter::new().id_prefix("ab%"))
        .unwrap();
    assert_eq!(ids(&found), ["ab%_3"], "wildcards are literal");
}

/// The schema exactly as version 2 created it (sessions, messages, pending approvals).
const SCHEMA_V2: &str = "
CREATE TABLE sessions (
    id            TEXT PRIMARY KEY NOT NULL,
    title         TEXT,
    model         TEXT,
    created_ms    INTEGER NOT NULL,
    updated_ms    INTEGER NOT NULL,
    touched       INTEGER NOT NULL,
    last_seq      INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    forked_from   TEXT,
    forked_at_seq INTEGER
);
CREATE INDEX sessions_by_touched ON sessions (touched);
CREATE TABLE messages (
    session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    role       TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    json       TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
CREATE TABLE pending_approvals (
    session_id  TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    call_id     TEXT NOT NULL,
    position    INTEGER NOT NULL,
    tool_name   TEXT NOT NULL,
    arguments   TEXT NOT NULL,
    reason      TEXT NOT NULL,
    status      TEXT NOT NULL,
    deny_reason TEXT,
    created_ms  INTEGER NOT NULL,
    decided_ms  INTEGER,
    PRIMARY KEY (session_id, call_id)
);
CREATE TABLE parked_queues (
    session_id TEXT PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    steering   TEXT NOT NULL,
    follow_ups TEXT NOT NULL
);
PRAGMA user_version = 2;
";

#[test]
fn a_version_2_database_upgrades_with_totals_computed_and_no_settings() {
    let dir = TempDir::new("v2");
    let messages = [
        Message::user("old prompt"),
        failed_call(),
        reply("old answer", 40, 4, Some(0.125)),
        Message::user("more"),
        reply("again", 60, 6, None),
    ];
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute_batch(SCHEMA_V2).unwrap();
        conn.execute(
            "INSERT INTO sessions (id, title, model, created_ms, updated_ms, touched, last_seq, \
             message_count) VALUES ('old', 'old prompt', 'model-x', 1, 1, 1, 5, 5)",
            [],
        )
        .unwrap();
        for (i, m) in messages.iter().enumerate() {
            let role = serde_json::to_value(m.role).unwrap();
            conn.execute(
                "INSERT INTO messages VALUES ('old', ?1, ?2, 1, ?3)",
                rusqlite::params![
                    i as i64 + 1,
                    role.as_str().unwrap(),
                    serde_json::to_string(m).unwrap()
                ],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO sessions (id, created_ms, updated_ms, touched) VALUES ('empty', 2, 2, 2)",
            [],
        )
        .unwrap();
    }
    let store = open(&dir);
    let old = store.info("old").unwrap();
    assert_eq!(old.stats, SessionStats::from_messages(&messages));
    assert_eq!((old.stats.turns, old.stats.failed_turns), (2, 1));
    assert_eq!(old.stats.usage.cost_usd, Some(0.125));
    assert!(old.settings.is_empty(), "{:?}", old.settings);
    assert_eq!(store.info("empty").unwrap().stats, SessionStats::default());
    assert_eq!(store.load_raw("old").unwrap(), messages);
    // Listed and reachable, never "the last session" of a workspace.
    assert_eq!(store.list().unwrap().len(), 2);
    assert!(store.last_in("/anywhere").unwrap().is_none());
    // Appends keep counting from the migrated totals; settings can be recorded now.
    store.append("old", &reply("new", 1, 1, None)).unwrap();
    assert_eq!(store.info("old").unwrap().stats.turns, 3);
    store
        .set_settings("old", &SessionSettings::new().workspace("/w"))
        .unwrap();
    assert_eq!(store.last_in("/w").unwrap().unwrap().id, "old");
    drop(store);
    let conn = rusqlite::Connection::open(dir.db()).unwrap();
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, 3);
    drop(conn);
    // Reopening a migrated database changes nothing.
    let store = open(&dir);
    assert_eq!(store.info("old").unwrap().stats.turns, 3);
}

/// `sessions list` on 200 sessions of 200 messages: reading the kept totals against computing
/// them from the messages on every list. Prints the figures; asserts nothing about time.
/// `cargo test --release -p agentloop --test sessions -- --ignored --nocapture list_speed`
#[test]
#[ignore = "a measurement; run by hand"]
fn list_speed_with_kept_totals_against_computing_them() {
    let dir = TempDir::new("list-speed");
    let store = open(&dir);
    let mut conversation = Vec::new();
    for i in 0..100 {
        conversation.push(Message::user(format!(
            "question {i} {}",
            "words ".repeat(40)
        )));
        conversation.push(reply(
            &"answer words ".repeat(60),
            1000 + i,
            200,
            Some(0.001),
        ));
    }
    let build = Instant::now();
    for i in 0..200 {
        store
            .create_with(
                NewSession::new()
                    .settings(SessionSettings::new().workspace(format!("/w/{}", i % 4))),
                &conversation,
            )
            .unwrap();
    }
    println!("built 200 x 200 messages in {:?}", build.elapsed());
    let time = |label: &str, f: &mut dyn FnMut()| {
        let mut runs: Vec<Duration> = (0..5)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect();
        runs.sort();
        println!("{label}: median {:?} (min {:?})", runs[2], runs[0]);
    };
    time("list() with kept totals", &mut || {
        assert_eq!(store.list().unwrap().len(), 200);
    });
    time("list_where(workspace) with kept totals", &mut || {
        let f = SessionFilter::new().workspace("/w/1");
        assert_eq!(store.list_where(&f).unwrap().len(), 50);
    });
    time("last_in(workspace)", &mut || {
        assert!(store.last_in("/w/1").unwrap().is_some());
    });
    time("list() + totals computed from every message", &mut || {
        for info in store.list().unwrap() {
            let stats = SessionStats::from_messages(&store.load_raw(&info.id).unwrap());
            assert_eq!(stats.turns, 100);
        }
    });
    let appends = 2000;
    let s = store.create(NewSession::new()).unwrap();
    let t = Instant::now();
    for i in 0..appends / 2 {
        store
            .append(&s.id, &Message::user(format!("q{i}")))
            .unwrap();
        store.append(&s.id, &reply("a", 1, 1, None)).unwrap();
    }
    println!(
        "append (half of them assistant replies): {:?} each",
        t.elapsed() / appends
    );
}
