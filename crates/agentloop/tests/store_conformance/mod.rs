//! The session store conformance suite: the behaviour every [`SessionStore`] owes, written once
//! and run against each store.
//!
//! A store's test file implements [`Backend`] (how to make a fresh, isolated, empty store and
//! how another process opens the same one) and expands [`conformance_suite!`] with it, which
//! generates one `#[test]` per behaviour below plus the `conformance_child` entry point that
//! the cross-process tests start the test binary again with. `tests/sessions/store_sqlite.rs`
//! runs it on SQLite files, `tests/sessions/store_postgres.rs` on PostgreSQL (one schema per
//! test).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::any::Any;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use agentloop::agent::{
    AgentEvent, AgentLoop, AgentLoopConfig, ParkedRun, PendingApproval, PendingStatus, RunStop,
};
use agentloop::model::{ReasoningLevel, ScriptedModel, ScriptedTurn};
use agentloop::session::{
    Follower, ImportOptions, NewSession, SessionError, SessionFilter, SessionInfo, SessionRecorder,
    SessionSettings, SessionStats, SessionStore, interrupted_result_text, load_parked,
};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{
    ImagePart, Message, Part, Role, StopReason, ThinkingPart, ToolArguments, ToolCallPart,
    ToolResultPart, Usage,
};
use serde_json::{Value, json};

/// A kind of store under test (its [`Expanded`] half comes from [`conformance_suite!`]).
pub trait Backend: Expanded + 'static {
    /// A spec (what [`open`](Backend::open) reads) of a new, empty, isolated store that nothing
    /// has opened yet, and what removes it when dropped; `None` when this backend cannot run
    /// here (the backend has reported the skip).
    fn fresh_spec() -> Option<(String, Box<dyn Any>)>;

    /// Opens the store `spec` names, as any process would (creating or migrating it).
    fn open(spec: &str) -> Result<Arc<dyn SessionStore>, SessionError>;

    /// A fresh store, opened.
    fn fresh() -> Option<Fixture> {
        let (spec, cleanup) = Self::fresh_spec()?;
        let store = Self::open(&spec).unwrap();
        Some(Fixture {
            store,
            spec,
            _cleanup: cleanup,
        })
    }
}

/// What [`conformance_suite!`] implements for its backend, from where it was expanded.
pub trait Expanded {
    /// The harness's full name of the suite's `conformance_child` test (`module::conformance_child`),
    /// which the cross-process behaviours start the test binary again with, under `--exact`: two
    /// suites in one binary each have a `conformance_child`.
    fn child_test() -> String;
}

/// A store under test, removed when dropped.
pub struct Fixture {
    /// The store.
    pub store: Arc<dyn SessionStore>,
    /// How another process opens the same store ([`Backend::open`]).
    pub spec: String,
    _cleanup: Box<dyn Any>,
}

/// One `#[test]` per behaviour for backend `$backend`, and the child-process entry point.
macro_rules! conformance_suite {
    ($backend:ty) => {
        $crate::store_conformance::conformance_suite!(@tests $backend;
            create_append_load_list_and_delete,
            the_exact_context_round_trips,
            sequence_numbers_are_per_session_and_monotonic,
            titles_are_derived_once_unless_set_and_rename_moves_a_session_to_the_top,
            last_and_list_follow_the_most_recent_update,
            a_chosen_id_must_be_unused_and_not_empty,
            create_with_is_atomic_and_an_existing_id_keeps_its_session,
            fork_copies_messages_up_to_and_including_a_seq,
            deeply_nested_tool_arguments_are_kept_as_their_text,
            texts_with_nul_and_controls_round_trip,
            an_unanswered_call_gets_an_interrupted_result_inside_its_batch,
            a_complete_transcript_gets_nothing_added,
            repair_goes_before_the_next_message_and_skips_error_messages,
            export_then_import_round_trips_line_by_line,
            import_accepts_a_bare_transcript_and_refuses_damaged_files,
            the_recorder_stores_a_run_and_each_result_as_its_call_finishes,
            the_recorder_dedupes_results_by_call_id_and_keeps_those_without_an_execution,
            a_failing_store_never_stops_the_run_and_the_error_is_kept,
            pending_approvals_persist_their_decisions_and_started_calls_cannot_be_decided_again,
            load_parked_leaves_pending_calls_unanswered,
            awaiting_approval_lists_the_most_recently_parked_first,
            delete_removes_messages_and_pending_approvals,
            concurrent_appends_from_two_processes,
            threads_sharing_one_store_append_safely,
            one_writer_per_session_across_processes,
            opening_a_new_store_from_many_processes_at_once_migrates_it_once,
            a_follower_sees_messages_as_another_writer_appends_them,
            settings_round_trip_without_credentials_and_follow_forks_and_exports,
            running_totals_follow_every_append_as_the_shared_function_counts_them,
            last_in_picks_this_workspace_and_skips_sessions_without_a_reply,
            the_stores_filters_agree_with_the_reference_filter,
            child_sessions_link_to_their_parent_and_are_never_the_last_session,
        );

        /// Child side of the cross-process behaviours; a no-op in a normal test run.
        #[test]
        fn conformance_child() {
            $crate::store_conformance::child::<$backend>();
        }

        impl $crate::store_conformance::Expanded for $backend {
            fn child_test() -> String {
                $crate::test_name(module_path!(), "conformance_child")
            }
        }
    };
    (@tests $backend:ty; $($name:ident),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                $crate::store_conformance::$name::<$backend>();
            }
        )*
    };
}
pub(crate) use conformance_suite;

// ---------------------------------------------------------------------------------------------
// helpers

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "agentloop-conformance-{tag}-{}-{nanos}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    /// `sessions.db` in the directory.
    pub fn db(&self) -> PathBuf {
        self.0.join("sessions.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
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
pub fn rich_conversation() -> Vec<Message> {
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

fn ids(sessions: &[agentloop::session::SessionInfo]) -> Vec<String> {
    sessions.iter().map(|s| s.id.clone()).collect()
}

fn export(store: &dyn SessionStore, id: &str) -> String {
    let mut out = Vec::new();
    store.export_jsonl(id, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn pending(id: &str) -> PendingApproval {
    PendingApproval {
        call_id: id.into(),
        tool_name: "write_file".into(),
        arguments: json!({"path": "a.txt", "content": id}),
        reason: "needs approval".into(),
        status: PendingStatus::Awaiting,
    }
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

// ---------------------------------------------------------------------------------------------
// child processes

const CHILD_ENV: &str = "AGENTLOOP_CONFORMANCE_CHILD";
const PER_WRITER: usize = 200;

fn payload(writer: &str, i: usize) -> String {
    format!("{writer}:{i}:{}", "x".repeat(64 + i % 7))
}

/// Starts the test binary again as a child doing `role` with `args` on the store `spec`.
fn spawn_child<B: Backend>(role: &str, spec: &str, args: &[&str]) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut fields = vec![role, spec];
    fields.extend_from_slice(args);
    Command::new(exe)
        .args([
            "--exact",
            &B::child_test(),
            "--nocapture",
            "--test-threads=1",
        ])
        .stdout(Stdio::null())
        .env(CHILD_ENV, fields.join("\u{1f}"))
        .spawn()
        .unwrap()
}

/// The child side: `writer` appends [`PER_WRITER`] messages once `<dir>/go` exists; `locker`
/// takes a session's writer lock, says so in `<dir>/locked` and holds it until killed (or 60
/// s); `opener` opens the store once `<dir>/go` exists and creates a session.
pub fn child<B: Backend>() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let fields: Vec<&str> = spec.split('\u{1f}').collect();
    let (role, spec) = (fields[0], fields[1]);
    match role {
        "writer" => {
            let (writer, session, dir) = (fields[2], fields[3], PathBuf::from(fields[4]));
            let store = B::open(spec).unwrap();
            std::fs::write(dir.join(format!("ready-{writer}")), b"").unwrap();
            assert!(wait_for(&dir.join("go"), Duration::from_secs(30)));
            for i in 0..PER_WRITER {
                store
                    .append(session, &Message::user(payload(writer, i)))
                    .unwrap();
            }
        }
        "locker" => {
            let (session, dir) = (fields[2], PathBuf::from(fields[3]));
            let store = B::open(spec).unwrap();
            let _lock = store.lock_session(session, Duration::ZERO).unwrap();
            std::fs::write(dir.join("locked"), b"").unwrap();
            std::thread::sleep(Duration::from_secs(60));
        }
        "opener" => {
            let (name, dir) = (fields[2], PathBuf::from(fields[3]));
            assert!(wait_for(&dir.join("go"), Duration::from_secs(30)));
            let store = B::open(spec).unwrap();
            store.create(NewSession::new().id(name)).unwrap();
        }
        other => panic!("unknown child role {other}"),
    }
}

// ---------------------------------------------------------------------------------------------
// create / append / list / load / delete / fork / rename

pub fn create_append_load_list_and_delete<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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
    assert!(entries.iter().all(|e| e.created_ms >= info.created_ms));
    let after: Vec<u64> = store
        .entries_after(&info.id, 5)
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(after, (6..=messages.len() as u64).collect::<Vec<_>>());
    assert!(store.entries_after(&info.id, 99).unwrap().is_empty());

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

    // Opening the store again (a new process would) sees the same.
    let reopened = B::open(&fx.spec).unwrap();
    assert_eq!(reopened.load_raw(&info.id).unwrap(), messages);
    assert_eq!(reopened.info(&info.id).unwrap(), after);

    let other = store.create(NewSession::new()).unwrap();
    assert_eq!(
        ids(&reopened.list().unwrap()),
        [other.id.clone(), info.id.clone()]
    );
    store.delete(&info.id).unwrap();
    assert!(matches!(
        store.load(&info.id),
        Err(SessionError::NotFound { .. })
    ));
    assert!(store.delete(&info.id).unwrap_err().is_not_found());
    assert!(store.info(&info.id).unwrap_err().is_not_found());
    assert!(store.entries_after(&info.id, 0).unwrap_err().is_not_found());
    assert!(matches!(
        store.append(&info.id, &Message::user("late")),
        Err(SessionError::NotFound { .. })
    ));
    assert!(matches!(
        store.append_all(&info.id, &[]),
        Err(SessionError::NotFound { .. })
    ));
    assert_eq!(store.append_all(&other.id, &[]).unwrap(), Vec::<u64>::new());
    assert_eq!(ids(&store.list().unwrap()), std::slice::from_ref(&other.id));
}

pub fn the_exact_context_round_trips<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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
    assert_eq!(copy.last_seq, messages.len() as u64);
    assert_eq!(copy.title.as_deref(), Some("Look at this"));
    assert_eq!(copy.model.as_deref(), Some("model-x"));
    assert_eq!(store.load(&copy.id).unwrap(), messages);
    let batch = store.create(NewSession::new()).unwrap();
    assert_eq!(
        store.append_all(&batch.id, &messages).unwrap(),
        (1..=messages.len() as u64).collect::<Vec<_>>()
    );
    assert_eq!(store.load_raw(&batch.id).unwrap(), messages);
    assert_eq!(
        store.info(&batch.id).unwrap().model.as_deref(),
        Some("model-x")
    );
}

pub fn sequence_numbers_are_per_session_and_monotonic<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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

pub fn titles_are_derived_once_unless_set_and_rename_moves_a_session_to_the_top<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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

    // In one batch: the first user prompt with text gives the title.
    let batch = store.create(NewSession::new()).unwrap();
    store
        .append_all(
            &batch.id,
            &[
                Message::user_parts(vec![]),
                Message::user("first words"),
                Message::user("second words"),
            ],
        )
        .unwrap();
    assert_eq!(
        store.info(&batch.id).unwrap().title.as_deref(),
        Some("first words")
    );

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
    assert!(matches!(
        store.create(NewSession::new().title(" ")),
        Err(SessionError::Invalid { what: "title", .. })
    ));
}

pub fn last_and_list_follow_the_most_recent_update<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    assert!(store.last().unwrap().is_none());
    assert!(store.list().unwrap().is_empty());
    let ids: Vec<String> = (0..3)
        .map(|_| store.create(NewSession::new()).unwrap().id)
        .collect();
    assert_eq!(store.last().unwrap().unwrap().id, ids[2]);
    store.append(&ids[0], &Message::user("hi")).unwrap();
    assert_eq!(store.last().unwrap().unwrap().id, ids[0]);
    let order: Vec<String> = store.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(order, [ids[0].clone(), ids[2].clone(), ids[1].clone()]);
    // Another connection's update counts too.
    let other = B::open(&fx.spec).unwrap();
    other.append(&ids[1], &Message::user("there")).unwrap();
    assert_eq!(store.last().unwrap().unwrap().id, ids[1]);
}

pub fn a_chosen_id_must_be_unused_and_not_empty<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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
    let odd = "spaces, ünïcødé / and 'quotes'; DROP TABLE sessions; --";
    store.create(NewSession::new().id(odd)).unwrap();
    assert_eq!(store.info(odd).unwrap().id, odd);
}

pub fn create_with_is_atomic_and_an_existing_id_keeps_its_session<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let original = Message::user("original");
    let first = store
        .create_with(
            NewSession::new().id("taken").title("Original"),
            std::slice::from_ref(&original),
        )
        .unwrap();
    assert_eq!(first.message_count, 1);
    assert!(matches!(
        store.create_with(
            NewSession::new().id("taken").title("Intruder"),
            &[Message::user("a"), Message::user("b")]
        ),
        Err(SessionError::AlreadyExists { .. })
    ));
    let info = store.info("taken").unwrap();
    assert_eq!(info.title.as_deref(), Some("Original"));
    assert_eq!(info.message_count, 1);
    assert_eq!(store.load_raw("taken").unwrap(), [original]);
    assert_eq!(store.list().unwrap().len(), 1);
}

pub fn fork_copies_messages_up_to_and_including_a_seq<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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
    assert_eq!(store.last().unwrap().unwrap().id, fork.id);

    // The fork goes its own way; the source is unchanged.
    assert_eq!(store.append(&fork.id, &Message::user("fork")).unwrap(), 4);
    assert_eq!(store.load(&source.id).unwrap(), messages);
    assert_eq!(store.append(&source.id, &Message::user("src")).unwrap(), 6);

    assert!(matches!(
        store.fork(&source.id, 99),
        Err(SessionError::SeqNotFound { seq: 99, .. })
    ));
    assert!(store.fork("missing", 1).unwrap_err().is_not_found());
    // Deleting the source leaves the fork whole.
    store.delete(&source.id).unwrap();
    assert_eq!(store.load_raw(&fork.id).unwrap().len(), 4);
}

pub fn deeply_nested_tool_arguments_are_kept_as_their_text<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store.create(NewSession::new()).unwrap();
    let mut deep = json!("leaf");
    for _ in 0..200 {
        deep = json!([deep]);
    }
    let message = Message::assistant(
        vec![Part::ToolCall(ToolCallPart::new("c", "t", deep.clone()))],
        StopReason::ToolUse,
    );
    store.append(&s.id, &message).unwrap();
    let loaded = store.load_raw(&s.id).unwrap();
    let calls: Vec<&ToolCallPart> = loaded[0].tool_calls().collect();
    assert_eq!(
        calls[0].arguments,
        ToolArguments::Unparsed(deep.to_string())
    );
}

pub fn texts_with_nul_and_controls_round_trip<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store.create(NewSession::new()).unwrap();
    let odd = "nul \0 bell \u{7} escape \u{1b}[31m rtl \u{202e} emoji 🦀";
    let mut assistant = Message::assistant(vec![Part::text(odd)], StopReason::Stop);
    assistant.model = Some("model \0 x".into());
    let messages = vec![
        Message::user(odd),
        assistant,
        Message::tool_result(ToolResultPart::success("c\0", "tool\0", odd)),
    ];
    store.append_all(&s.id, &messages).unwrap();
    assert_eq!(store.load_raw(&s.id).unwrap(), messages);
    let info = store.info(&s.id).unwrap();
    assert!(info.title.unwrap().starts_with("nul "));
    assert!(info.model.unwrap().starts_with("model "));
    // The export carries the exact messages.
    let text = export(&**store, &s.id);
    let imported = store
        .import_jsonl(&mut text.as_bytes(), ImportOptions::new())
        .unwrap();
    assert_eq!(store.load_raw(&imported.id).unwrap(), messages);
}

// ---------------------------------------------------------------------------------------------
// interrupted tool batches

pub fn an_unanswered_call_gets_an_interrupted_result_inside_its_batch<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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

pub fn a_complete_transcript_gets_nothing_added<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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

pub fn repair_goes_before_the_next_message_and_skips_error_messages<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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

pub fn export_then_import_round_trips_line_by_line<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store
        .create(NewSession::new().title("Exported").model("m1"))
        .unwrap();
    let messages = rich_conversation();
    store.append_all(&s.id, &messages).unwrap();

    let first = export(&**store, &s.id);
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
    let second = export(&**store, &imported.id);
    let second_lines: Vec<&str> = second.lines().collect();
    assert_eq!(second_lines[1..], lines[1..], "identical message lines");

    // keep_id: refused where the id exists, kept in another store.
    assert!(matches!(
        store.import_jsonl(&mut first.as_bytes(), ImportOptions::new().keep_id(true)),
        Err(SessionError::AlreadyExists { .. })
    ));
    let Some(elsewhere) = B::fresh() else { return };
    let kept = elsewhere
        .store
        .import_jsonl(&mut first.as_bytes(), ImportOptions::new().keep_id(true))
        .unwrap();
    assert_eq!(kept.id, s.id);
    let copy = export(&*elsewhere.store, &kept.id);
    let copy_lines: Vec<&str> = copy.lines().collect();
    assert_eq!(copy_lines[1..], lines[1..], "identical message lines");
    let header_of = |line: &str| {
        let mut value: Value = serde_json::from_str(line).unwrap();
        let map = value.as_object_mut().unwrap();
        map.remove("created_ms");
        map.remove("updated_ms");
        value
    };
    // The copy is marked as imported (its settings were recorded elsewhere); nothing else
    // differs.
    let mut copy_header = header_of(copy_lines[0]);
    assert_eq!(copy_header["settings"]["imported"], true, "{copy_header}");
    copy_header["settings"]
        .as_object_mut()
        .unwrap()
        .remove("imported");
    assert_eq!(
        copy_header,
        header_of(lines[0]),
        "the same header, times aside"
    );
}

pub fn import_accepts_a_bare_transcript_and_refuses_damaged_files<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
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
    let full = export(&**store, &s.id);
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

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn the_recorder_stores_a_run_and_each_result_as_its_call_finishes<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = fx.store.clone();
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
    let outcome = runtime().block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            agent.run(vec![Message::user("Do both")], vec![]),
        )
        .await
        .unwrap()
        .unwrap()
    });
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

pub fn the_recorder_dedupes_results_by_call_id_and_keeps_those_without_an_execution<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = fx.store.clone();
    let session = store.create(NewSession::new()).unwrap();
    let recorder = SessionRecorder::new(store.clone(), &session.id);
    let calls = assistant_calls(&[("a", "t"), ("b", "t"), ("a2", "t")], StopReason::ToolUse);
    let a = ToolResultPart::success("a", "t", "A");
    let b = ToolResultPart::error("b", "t", "aborted before it ran");
    let a2 = ToolResultPart::success("a2", "t", "A2");
    let end = |r: &ToolResultPart| AgentEvent::ToolExecutionEnd {
        call: ToolCallPart::new(&r.call_id, "t", json!({})),
        result: r.clone(),
        blocked: false,
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

pub fn a_failing_store_never_stops_the_run_and_the_error_is_kept<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let recorder = SessionRecorder::new(fx.store.clone(), "no-such-session");
    let agent = AgentLoop::new(
        AgentLoopConfig::default(),
        ScriptedModel::new([ScriptedTurn::text("hi")]),
    )
    .with_emit(recorder.emit_fn());
    let outcome = runtime()
        .block_on(agent.run(vec![Message::user("x")], vec![]))
        .unwrap();
    assert_eq!(outcome.stop, RunStop::Done);
    assert_eq!(recorder.failures(), 2);
    assert_eq!(recorder.appended(), 0);
    assert!(recorder.take_error().unwrap().is_not_found());
    assert!(recorder.take_error().is_none(), "taking clears it");
}

// ---------------------------------------------------------------------------------------------
// pending approvals

pub fn pending_approvals_persist_their_decisions_and_started_calls_cannot_be_decided_again<
    B: Backend,
>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store.create(NewSession::new()).unwrap();
    assert_eq!(store.parked(&s.id).unwrap(), None);
    assert!(store.parked("missing").unwrap_err().is_not_found());
    assert!(
        store
            .save_parked("missing", &ParkedRun::default())
            .unwrap_err()
            .is_not_found()
    );
    let parked = ParkedRun {
        pending: vec![pending("c1"), pending("c2")],
        steering: vec![Message::user("steer")],
        follow_ups: vec![Message::user("later")],
    };
    store.save_parked(&s.id, &parked).unwrap();
    // Another process sees the same parked state.
    let other = B::open(&fx.spec).unwrap();
    assert_eq!(other.parked(&s.id).unwrap(), Some(parked.clone()));

    store.decide(&s.id, "c1", &PendingStatus::Approved).unwrap();
    other
        .decide(
            &s.id,
            "c2",
            &PendingStatus::Denied {
                reason: "no".into(),
            },
        )
        .unwrap();
    assert!(matches!(
        store.decide(&s.id, "zz", &PendingStatus::Approved),
        Err(SessionError::Invalid {
            what: "call id",
            ..
        })
    ));
    assert!(
        store
            .decide("missing", "c1", &PendingStatus::Approved)
            .unwrap_err()
            .is_not_found()
    );
    // Saving again (a re-park) keeps the decisions, adds new calls after the old ones and
    // replaces the queues.
    let again = ParkedRun {
        pending: vec![pending("c3"), pending("c1"), pending("c2")],
        steering: vec![],
        follow_ups: vec![],
    };
    store.save_parked(&s.id, &again).unwrap();
    let got = store.parked(&s.id).unwrap().unwrap();
    let order: Vec<&str> = got.pending.iter().map(|p| p.call_id.as_str()).collect();
    assert_eq!(order, ["c1", "c2", "c3"]);
    assert_eq!(got.pending[0].status, PendingStatus::Approved);
    assert_eq!(
        got.pending[1].status,
        PendingStatus::Denied {
            reason: "no".into()
        }
    );
    assert_eq!(got.pending[2].status, PendingStatus::Awaiting);
    assert_eq!(
        got.pending[0].arguments,
        json!({"path": "a.txt", "content": "c1"})
    );
    assert!(got.steering.is_empty() && got.follow_ups.is_empty());

    store.decide(&s.id, "c1", &PendingStatus::Started).unwrap();
    assert!(matches!(
        store.decide(&s.id, "c1", &PendingStatus::Approved),
        Err(SessionError::Invalid {
            what: "decision",
            ..
        })
    ));
    store.decide(&s.id, "c1", &PendingStatus::Started).unwrap();
    assert_eq!(store.awaiting_approval().unwrap().len(), 1);
    store.resolve_pending(&s.id, "c1").unwrap();
    assert_eq!(store.parked(&s.id).unwrap().unwrap().pending.len(), 2);
    store.clear_parked(&s.id).unwrap();
    assert_eq!(store.parked(&s.id).unwrap(), None);
    assert!(store.awaiting_approval().unwrap().is_empty());
}

pub fn load_parked_leaves_pending_calls_unanswered<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let assistant = Message::assistant(
        vec![
            Part::ToolCall(ToolCallPart::new("c1", "write_file", json!({}))),
            Part::ToolCall(ToolCallPart::new("r", "read_file", json!({}))),
            Part::ToolCall(ToolCallPart::new("lost", "read_file", json!({}))),
        ],
        StopReason::ToolUse,
    );
    let s = store
        .create_with(
            NewSession::new(),
            &[
                Message::user("go"),
                assistant,
                Message::tool_result(ToolResultPart::success("r", "read_file", "x")),
            ],
        )
        .unwrap();
    store
        .save_parked(
            &s.id,
            &ParkedRun {
                pending: vec![pending("c1")],
                ..ParkedRun::default()
            },
        )
        .unwrap();
    let (context, parked) = load_parked(&**store, &s.id).unwrap();
    let ids: Vec<_> = context
        .iter()
        .filter_map(Message::tool_result_part)
        .map(|r| (r.call_id.as_str(), r.is_error))
        .collect();
    assert_eq!(ids, [("r", false), ("lost", true)]);
    assert_eq!(parked.unwrap().pending.len(), 1);
}

pub fn awaiting_approval_lists_the_most_recently_parked_first<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let park = |id: &str, calls: &[&str]| {
        store.create(NewSession::new().id(id)).unwrap();
        store
            .save_parked(
                id,
                &ParkedRun {
                    pending: calls.iter().map(|c| pending(c)).collect(),
                    ..ParkedRun::default()
                },
            )
            .unwrap();
        // Parking times are in milliseconds.
        std::thread::sleep(Duration::from_millis(3));
    };
    park("old", &["o1"]);
    park("new", &["n2", "n1"]);
    let listed: Vec<(String, Vec<String>)> = store
        .awaiting_approval()
        .unwrap()
        .into_iter()
        .map(|(id, calls)| (id, calls.into_iter().map(|c| c.call_id).collect()))
        .collect();
    assert_eq!(
        listed,
        [
            ("new".to_owned(), vec!["n2".to_owned(), "n1".to_owned()]),
            ("old".to_owned(), vec!["o1".to_owned()]),
        ]
    );
}

pub fn delete_removes_messages_and_pending_approvals<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    store
        .create_with(NewSession::new().id("gone"), &[Message::user("hi")])
        .unwrap();
    store
        .save_parked(
            "gone",
            &ParkedRun {
                pending: vec![pending("c1")],
                steering: vec![Message::user("queued")],
                follow_ups: vec![],
            },
        )
        .unwrap();
    let fork = store.fork("gone", 1).unwrap();
    store.delete("gone").unwrap();
    assert!(store.awaiting_approval().unwrap().is_empty());
    // A new session with the same id starts empty: nothing of the old one is left.
    store.create(NewSession::new().id("gone")).unwrap();
    assert!(store.load_raw("gone").unwrap().is_empty());
    assert_eq!(store.parked("gone").unwrap(), None);
    store
        .save_parked(
            "gone",
            &ParkedRun {
                pending: vec![pending("c9")],
                ..ParkedRun::default()
            },
        )
        .unwrap();
    let parked = store.parked("gone").unwrap().unwrap();
    assert!(parked.steering.is_empty(), "the old queue went with it");
    assert_eq!(parked.pending.len(), 1);
    assert_eq!(store.load_raw(&fork.id).unwrap().len(), 1);
}

// ---------------------------------------------------------------------------------------------
// several writers

pub fn concurrent_appends_from_two_processes<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let dir = TempDir::new("concurrent");
    let session = store.create(NewSession::new()).unwrap();
    let writers = ["A", "B"];
    let dir_text = dir.0.display().to_string();
    let children: Vec<_> = writers
        .iter()
        .map(|w| spawn_child::<B>("writer", &fx.spec, &[w, &session.id, &dir_text]))
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

pub fn threads_sharing_one_store_append_safely<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = fx.store.clone();
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

pub fn one_writer_per_session_across_processes<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store.create(NewSession::new()).unwrap();

    // Two openings of the store (as two processes would): the second is refused, naming us.
    let other = B::open(&fx.spec).unwrap();
    let first = store.lock_session(&s.id, Duration::ZERO).unwrap();
    // That it waits is shown by the waiting writer below; here, that it gives up in the end.
    let err = other
        .lock_session(&s.id, Duration::from_millis(300))
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, SessionError::InUse { .. }), "{text}");
    assert!(
        text.contains(&format!("in use by process {}", std::process::id())),
        "{text}"
    );
    // Other sessions, and sessions that do not exist yet, are independent.
    let _unrelated = other
        .lock_session("not-created-yet", Duration::ZERO)
        .unwrap();
    drop(first);
    let second = other.lock_session(&s.id, Duration::ZERO).unwrap();
    drop(second);

    // A waiting writer gets the lock as soon as the holder lets go.
    let held = store.lock_session(&s.id, Duration::ZERO).unwrap();
    let waiter = {
        let other = other.clone();
        let id = s.id.clone();
        std::thread::spawn(move || other.lock_session(&id, Duration::from_secs(10)).map(drop))
    };
    std::thread::sleep(Duration::from_millis(200));
    drop(held);
    waiter.join().unwrap().unwrap();

    // Another process: it holds the lock; we are refused with its pid; killed, it lets go.
    let dir = TempDir::new("locker");
    let mut child = spawn_child::<B>("locker", &fx.spec, &[&s.id, &dir.0.display().to_string()]);
    assert!(
        wait_for(&dir.0.join("locked"), Duration::from_secs(30)),
        "the child did not take the lock"
    );
    let text = store
        .lock_session(&s.id, Duration::from_millis(100))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains(&format!("in use by process {}", child.id())),
        "{text}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    store
        .lock_session(&s.id, Duration::from_secs(10))
        .expect("a killed holder releases the lock");
}

pub fn opening_a_new_store_from_many_processes_at_once_migrates_it_once<B: Backend>() {
    let Some((spec, _cleanup)) = B::fresh_spec() else {
        return;
    };
    let dir = TempDir::new("openers");
    let dir_text = dir.0.display().to_string();
    let children: Vec<_> = ["p1", "p2", "p3"]
        .iter()
        .map(|name| spawn_child::<B>("opener", &spec, &[name, &dir_text]))
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(dir.0.join("go"), b"").unwrap();
    // Threads of this process open it at the same moment.
    std::thread::scope(|scope| {
        for t in 0..3 {
            let spec = spec.clone();
            scope.spawn(move || {
                let store = B::open(&spec).unwrap();
                store.create(NewSession::new().id(format!("t{t}"))).unwrap();
            });
        }
    });
    for mut child in children {
        assert!(child.wait().unwrap().success(), "an opener failed");
    }
    let store = B::open(&spec).unwrap();
    let mut names = ids(&store.list().unwrap());
    names.sort();
    assert_eq!(names, ["p1", "p2", "p3", "t0", "t1", "t2"]);
    // Opening a migrated store again changes nothing.
    let kept = Message::user("kept");
    store.append("p1", &kept).unwrap();
    drop(store);
    let store = B::open(&spec).unwrap();
    assert_eq!(store.list().unwrap().len(), 6);
    assert_eq!(store.load_raw("p1").unwrap(), [kept]);
}

// ---------------------------------------------------------------------------------------------
// live follow

pub fn a_follower_sees_messages_as_another_writer_appends_them<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &fx.store;
    let s = store
        .create_with(NewSession::new(), &[Message::user("first")])
        .unwrap();
    assert!(
        Follower::new(store.clone(), "missing", 0)
            .unwrap_err()
            .is_not_found()
    );
    let mut follower = Follower::new(store.clone(), &s.id, 0).unwrap();
    let batch = follower.next_batch(Duration::ZERO).unwrap();
    assert_eq!(batch.iter().map(|e| e.seq).collect::<Vec<_>>(), [1]);
    assert_eq!(follower.last_seq(), 1);
    assert!(
        follower
            .next_batch(Duration::from_millis(150))
            .unwrap()
            .is_empty()
    );

    // Another opening of the store (another process, in effect) appends one at a time.
    let writer = {
        let other = B::open(&fx.spec).unwrap();
        let id = s.id.clone();
        std::thread::spawn(move || {
            let mut appended_at = Vec::new();
            for i in 0..3 {
                std::thread::sleep(Duration::from_millis(150));
                other
                    .append(&id, &Message::user(format!("live {i}")))
                    .unwrap();
                appended_at.push(Instant::now());
            }
            appended_at
        })
    };
    let mut seen = Vec::new();
    let mut seen_at = Vec::new();
    while seen.len() < 3 {
        // The writer pauses before each append, so a follower that did not wait for it would
        // come back empty. (The wait's length is a hang guard.)
        let batch = follower.next_batch(Duration::from_secs(20)).unwrap();
        assert!(
            !batch.is_empty(),
            "next_batch returned before the append ({seen:?} so far)"
        );
        for entry in batch {
            seen.push((entry.seq, entry.message.text()));
            seen_at.push(Instant::now());
        }
    }
    let appended_at = writer.join().unwrap();
    assert_eq!(
        seen,
        [
            (2, "live 0".to_owned()),
            (3, "live 1".to_owned()),
            (4, "live 2".to_owned())
        ]
    );
    let worst = seen_at
        .iter()
        .zip(&appended_at)
        .map(|(seen, appended)| seen.saturating_duration_since(*appended))
        .max()
        .unwrap_or_default();
    eprintln!(
        "follow: worst delay from append to follower {worst:?} (signalled: {})",
        follower.is_signalled()
    );

    store.delete(&s.id).unwrap();
    assert!(
        follower
            .next_batch(Duration::from_millis(10))
            .unwrap_err()
            .is_not_found()
    );
}

// ---------------------------------------------------------------------------------------------
// settings, running totals, "the last session of this workspace"

/// An assistant reply with usage (and a cost when given).
pub fn reply(text: &str, input: u64, output: u64, cost: Option<f64>) -> Message {
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
pub fn failed_call() -> Message {
    let mut m = Message::assistant(vec![], StopReason::Error);
    m.error_message = Some("HTTP 401: invalid key".into());
    m
}

/// The stats a store must report: the shared function over exactly what it stores.
fn reference_stats(store: &dyn SessionStore, id: &str) -> SessionStats {
    SessionStats::from_messages(&store.load_raw(id).unwrap())
}

pub fn settings_round_trip_without_credentials_and_follow_forks_and_exports<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &*fx.store;
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
    assert_eq!(fork.stats, reference_stats(store, &fork.id));
    assert_eq!(fork.stats.turns, 1);

    // The export's header carries the settings, and an import restores them.
    let exported = export(store, &info.id);
    let header: Value = serde_json::from_str(exported.lines().next().unwrap()).unwrap();
    assert_eq!(header["settings"]["provider"], "anthropic");
    assert_eq!(header["stats"]["turns"], 1);
    let imported = store
        .import_jsonl(&mut exported.as_bytes(), ImportOptions::new())
        .unwrap();
    // Marked as imported: recorded elsewhere, so not to be acted on unasked.
    assert!(imported.settings.imported);
    assert_eq!(imported.settings, settings.clone().imported(true));
    assert_eq!(imported.stats, store.info(&info.id).unwrap().stats);
}

pub fn running_totals_follow_every_append_as_the_shared_function_counts_them<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &*fx.store;
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
    // What another process opening the same store reads.
    let store = &*B::open(&fx.spec).unwrap();
    for id in [s.id.as_str(), "batch"] {
        let info = store.info(id).unwrap();
        assert_eq!(info.stats, reference_stats(store, id), "{id}");
    }
    let stats = store.info(&s.id).unwrap().stats;
    assert_eq!((stats.turns, stats.failed_turns), (2, 1));
    assert_eq!(stats.usage.input_tokens, 300);
    assert_eq!(stats.usage.output_tokens, 30);
    assert_eq!(stats.usage.cost_usd, Some(0.5));
    assert_eq!(stats.total_tokens(), 330);
}

pub fn last_in_picks_this_workspace_and_skips_sessions_without_a_reply<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &*fx.store;
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
fn filter_fixture(store: &dyn SessionStore) {
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

pub fn the_stores_filters_agree_with_the_reference_filter<B: Backend>() {
    let Some(fx) = B::fresh() else { return };
    let store = &*fx.store;
    filter_fixture(store);
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

pub fn child_sessions_link_to_their_parent_and_are_never_the_last_session<B: Backend>() {
    use agentloop::session::ParentLink;
    let Some(fx) = B::fresh() else { return };
    let store = &*fx.store;
    let here = || NewSession::new().settings(SessionSettings::new().workspace("/w"));
    let talk = [Message::user("q"), reply("r", 1, 1, None)];
    let parent = store.create_with(here().id("parent"), &talk).unwrap();
    let link = ParentLink::new(&parent.id, "call-1", "explore");
    let child = store
        .create_with(here().id("child").parent(link.clone()), &talk)
        .unwrap();
    assert_eq!(child.parent.as_ref(), Some(&link));
    assert_eq!(store.info("child").unwrap().parent, Some(link.clone()));
    assert_eq!(store.info("parent").unwrap().parent, None);
    let grandchild = ParentLink::new("child", "call-2", "helper");
    store
        .create(NewSession::new().id("grandchild").parent(grandchild))
        .unwrap();
    store.create_with(here().id("other"), &talk).unwrap();
    // The child is the most recently updated session of the workspace, and still never the
    // one to continue.
    store.append("child", &reply("more", 1, 1, None)).unwrap();
    assert_eq!(store.list().unwrap()[0].id, "child");
    assert_eq!(store.last_in("/w").unwrap().unwrap().id, "other");
    assert_eq!(store.last().unwrap().unwrap().id, "other");
    assert_eq!(ids(&store.children("parent").unwrap()), ["child"]);
    assert_eq!(ids(&store.children("child").unwrap()), ["grandchild"]);
    assert!(store.children("other").unwrap().is_empty());
    // The filters agree with the reference filter.
    let all = store.list().unwrap();
    for filter in [
        SessionFilter::new().top_level(true),
        SessionFilter::new()
            .top_level(true)
            .workspace("/w")
            .limit(1),
        SessionFilter::new().parent("parent"),
        SessionFilter::new().parent("nobody"),
        SessionFilter::new().parent("child").top_level(true),
        SessionFilter::new().parent("parent").with_reply(true),
    ] {
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
    // A fork of a child is a session of its own; exports carry the link.
    let fork = store.fork("child", 1).unwrap();
    assert_eq!(fork.parent, None);
    assert!(
        export(store, "child")
            .lines()
            .next()
            .unwrap()
            .contains("\"call-1\"")
    );
    assert!(
        !export(store, "parent")
            .lines()
            .next()
            .unwrap()
            .contains("\"parent\":")
    );
}
