//! Durable sessions: every completed message of a conversation, appended as it completes, so a
//! run that stops for any reason (a crash, `SIGKILL`, a closed laptop) can be resumed from
//! exactly where it was.
//!
//! This module owns the [`SessionStore`] trait, its embedded SQLite implementation
//! ([`SqliteStore`]), its PostgreSQL implementation (`PostgresStore`, behind the default
//! `postgres` feature), choosing one from a string ([`open_store`]: a file path or a
//! `postgres://` URL), following a session live ([`Follower`]), the [`SessionRecorder`] that connects a running
//! [`AgentLoop`](crate::agent::AgentLoop) to a store through its events, load-time repair of
//! interrupted tool batches ([`repair_interrupted`]) and the JSON Lines export format. It stores
//! [`Message`]s in the transcript's documented JSON shape and nothing else; it must not know about
//! models, providers, HTTP or tools' handlers, and it never changes what the agent loop does —
//! it only listens.
//!
//! # Guarantees
//!
//! - Each [`append`](SessionStore::append) is its own transaction and gets the session's next
//!   sequence number (1, 2, 3, … with no gaps); once it returns, the message survives the
//!   process being killed. With [`Durability::PowerLoss`] it also survives power loss and OS
//!   crashes; see [`Durability`] for the trade-off.
//! - Several processes may write to one database at once (SQLite: WAL journal, a busy timeout
//!   and `BEGIN IMMEDIATE` around the sequence allocation; PostgreSQL: the session row's lock).
//!   [`lock_session`](SessionStore::lock_session) keeps a session to one writer at a time.
//! - [`load`](SessionStore::load) rebuilds the context the agent had, and repairs a tool batch
//!   that a stopped process left unfinished: each call without a result gets a synthetic error
//!   result ([`interrupted_result_text`]), so the context is valid to resume with
//!   [`AgentLoop::run_continue`](crate::agent::AgentLoop::run_continue).
//!   [`load_raw`](SessionStore::load_raw) returns exactly what was stored, in sequence order.
//!
//! # Settings, statistics and "the last session"
//!
//! A session carries the [`SessionSettings`] it runs with (workspace, provider, model, base URL
//! without credentials, reasoning): given at creation ([`NewSession::settings`]), replaced with
//! [`set_settings`](SessionStore::set_settings), returned in [`SessionInfo::settings`]. Its
//! [`SessionStats`] (model replies, failed model calls, tokens, cost) are running totals a store
//! keeps with [`SessionStats::add`] over exactly the messages it stores, so every store reports
//! the same numbers and listing sessions never reads their messages.
//! [`last_in`](SessionStore::last_in) picks the session to continue in a workspace: the most
//! recently updated one recorded there in which the model replied at least once.
//!
//! # Recording and resuming
//!
//! ```
//! use std::sync::Arc;
//! use agentloop::agent::{AgentLoop, AgentLoopConfig};
//! use agentloop::model::{ScriptedModel, ScriptedTurn};
//! use agentloop::session::{NewSession, SessionRecorder, SessionSettings, SessionStore, SqliteStore};
//! use agentloop::transcript::Message;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(SqliteStore::open_in_memory()?); // `SqliteStore::open(path)` on disk
//! let settings = SessionSettings::new().workspace("/home/me/proj").model("scripted");
//! let session = store.create(NewSession::new().settings(settings))?;
//! let recorder = SessionRecorder::new(store.clone(), &session.id);
//!
//! let model = ScriptedModel::new([ScriptedTurn::text("Hello!")]);
//! let agent = AgentLoop::new(AgentLoopConfig::default(), model).with_emit(recorder.emit_fn());
//! agent.run(vec![Message::user("Say hello")], vec![]).await?;
//! assert!(recorder.take_error().is_none());
//!
//! // Later, perhaps in another process (`--continue` in the same workspace):
//! let last = store.last_in("/home/me/proj")?.ok_or("no session")?;
//! let context = store.load(&last.id)?;
//! assert_eq!(context.len(), 2);
//! assert_eq!(last.title.as_deref(), Some("Say hello"));
//! assert_eq!(last.settings.model.as_deref(), Some("scripted"));
//! assert_eq!(last.stats.turns, 1);
//! # Ok(()) }
//! ```
//!
//! # JSON Lines export
//!
//! [`export_jsonl`](SessionStore::export_jsonl) writes one JSON object per line. The first line
//! is a header, `{"type":"session","format":1, …}` followed by the session's [`SessionInfo`]
//! fields (`id`, `title`, `model`, `created_ms`, `updated_ms`, `message_count`, `last_seq`,
//! `forked_from`, `settings`, `stats`). Every following line is one message in the transcript's JSON shape (see
//! [`crate::transcript`]), in sequence order, exactly as [`load_raw`](SessionStore::load_raw)
//! returns them. Messages never have a top-level `type` key, so the header is unambiguous.
//! [`import_jsonl`](SessionStore::import_jsonl) accepts a file with or without the header
//! (without it, a plain transcript of message lines imports too), checks the header's
//! `message_count` against the lines it read (a truncated file is refused), and creates a new
//! session atomically, with the header's title, model and settings (its stats are recomputed
//! from the imported messages). Exporting an imported session gives the same message lines, byte for byte.

mod approvals;
// `AgentLoop::with_session` and `run_in_session`: a store attached to an agent in one call.
mod attach;
mod child_records;
mod columns;
mod durability;
mod error;
mod filter;
mod follow;
mod jsonl;
mod lock;
#[cfg(feature = "postgres")]
mod postgres;
mod recorder;
mod repair;
mod settings;
mod spec;
#[cfg(feature = "sqlite")]
mod sqlite;
mod stats;

use std::io::{BufRead, Write};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::agent::{ParkedRun, PendingApproval, PendingStatus};
use crate::transcript::Message;

/// The synthetic result of a call that never finished (defined with the transcript, which the
/// loop shares with the stores).
pub use crate::transcript::{interrupted_result, interrupted_result_text};
pub use approvals::load_parked;
pub use columns::MAX_STORED_DEPTH;
pub use durability::Durability;
pub use error::SessionError;
pub use filter::SessionFilter;
pub use follow::{ChangeSignal, Follower, POLL_INTERVAL, RECHECK_INTERVAL};
pub use jsonl::{EXPORT_FORMAT, ImportOptions};
pub use lock::SessionLock;
#[cfg(feature = "postgres")]
pub use postgres::{PostgresOptions, PostgresStore};
pub use recorder::SessionRecorder;
pub use repair::{repair_interrupted, unanswered_calls};
pub use settings::{SessionSettings, without_credentials};
pub use spec::{StoreSpec, is_postgres_url, open_store, redact};
#[cfg(feature = "sqlite")]
pub use sqlite::{SqliteOptions, SqliteStore};
pub use stats::SessionStats;

/// Longest derived title, in characters (longer first prompts are cut and end with `…`).
pub const TITLE_MAX_CHARS: usize = 60;

/// A session's metadata.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SessionInfo {
    /// Unique id (a random UUID v4 unless chosen at creation).
    pub id: String,
    /// Title: set explicitly, or derived from the first user prompt ([`TITLE_MAX_CHARS`]).
    #[serde(default)]
    pub title: Option<String>,
    /// Model of the latest assistant message (or the one given at creation).
    #[serde(default)]
    pub model: Option<String>,
    /// Milliseconds since the Unix epoch when the session was created.
    pub created_ms: u64,
    /// Milliseconds since the Unix epoch of the last append or rename.
    pub updated_ms: u64,
    /// Number of stored messages.
    #[serde(default)]
    pub message_count: u64,
    /// Sequence number of the last stored message (0 when there is none).
    #[serde(default)]
    pub last_seq: u64,
    /// The session and message this one was forked from.
    #[serde(default)]
    pub forked_from: Option<ForkOrigin>,
    /// What the session runs with (workspace, provider, model, base URL, reasoning), as given
    /// at creation or last set with [`SessionStore::set_settings`]; empty for sessions recorded
    /// before settings existed.
    #[serde(default)]
    pub settings: SessionSettings,
    /// Running totals over the stored messages (replies, tokens, cost).
    #[serde(default)]
    pub stats: SessionStats,
    /// The session and call that ran this one, when it is a sub-agent's run (a *child*
    /// session); `None` for a top-level session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ParentLink>,
}

/// What links a child session (a sub-agent's run) to the run that started it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParentLink {
    /// The parent session.
    pub session_id: String,
    /// The parent's tool call that ran the child.
    pub call_id: String,
    /// The sub-agent's name.
    pub agent: String,
}

impl ParentLink {
    /// A link to call `call_id` of session `session_id`, which ran sub-agent `agent`.
    pub fn new(
        session_id: impl Into<String>,
        call_id: impl Into<String>,
        agent: impl Into<String>,
    ) -> Self {
        ParentLink {
            session_id: session_id.into(),
            call_id: call_id.into(),
            agent: agent.into(),
        }
    }
}

/// Where a forked session came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The source session.
    pub session_id: String,
    /// The last message copied from it.
    pub seq: u64,
}

/// What to create: all optional. `NewSession::new().model("gpt-5")`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NewSession {
    /// A chosen id (must be unused); `None` generates one.
    pub id: Option<String>,
    /// A title; `None` derives one from the first user prompt.
    pub title: Option<String>,
    /// The model the session uses (default: [`settings`](Self::settings)' model).
    pub model: Option<String>,
    /// What the session runs with (stored as given, less any credentials in the base URL).
    pub settings: SessionSettings,
    /// The parent session and call, for a sub-agent's run (`None`: a top-level session).
    pub parent: Option<ParentLink>,
}

impl NewSession {
    /// Nothing chosen: generated id, derived title, no model yet.
    pub fn new() -> Self {
        NewSession::default()
    }

    crate::setters! {
        /// Uses `id` instead of a generated one.
        pub fn id(id: impl Into<String>) => id = Some(id.into());
        /// Sets the title (it is then never derived).
        pub fn title(title: impl Into<String>) => title = Some(title.into());
        /// Records the model used.
        pub fn model(model: impl Into<String>) => model = Some(model.into());
        /// Records what the session runs with (workspace, provider, model, base URL, reasoning).
        pub fn settings(settings: SessionSettings) => settings = settings;
        /// Makes it a child session of `link`'s session (a sub-agent's run).
        pub fn parent(link: ParentLink) => parent = Some(link);
    }
}

/// A message as stored, with its sequence number.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StoredMessage {
    /// Position in the session: 1 for the first message, then +1 per append.
    pub seq: u64,
    /// Milliseconds since the Unix epoch when it was appended.
    pub created_ms: u64,
    /// The message.
    pub message: Message,
}

/// A durable store of sessions. Implementations must be safe to share between threads; the
/// methods block (SQLite is fast enough to call from an async task for appends — see
/// `docs/BENCHMARKS.md` — but load large sessions with `spawn_blocking` if latency matters).
///
/// # Implementing a store
///
/// Besides the messages, a store keeps per session:
///
/// - its [`SessionSettings`]: those of [`NewSession::settings`] at creation (copied by
///   [`fork`](Self::fork), taken from the header by [`import_jsonl`](Self::import_jsonl)),
///   replaced by [`set_settings`](Self::set_settings); stored
///   [`sanitized`](SessionSettings::sanitized);
/// - its [`SessionStats`]: [`SessionStats::add`] applied to every message it stores, in order
///   (appends, `create_with`, the copied part of a fork), inside the same transaction as the
///   message, so [`info`](Self::info) and [`list`](Self::list) return them without reading
///   messages and agree with [`SessionStats::from_messages`] over [`load_raw`](Self::load_raw).
///
/// [`list_where`](Self::list_where) and [`last_in`](Self::last_in) work on any store through
/// [`list`](Self::list); override `list_where` to filter in the store's query (it must agree
/// with [`SessionFilter::matches`]).
///
/// Both stores of this crate pass one conformance suite (`crates/agentloop/tests/
/// store_conformance`), which is the precise statement of the behaviour an implementation owes.
pub trait SessionStore: Send + Sync {
    /// Creates a session holding `messages` (appended in order from seq 1), atomically: either
    /// the session exists with all of them, or nothing was written.
    fn create_with(
        &self,
        new: NewSession,
        messages: &[Message],
    ) -> Result<SessionInfo, SessionError>;

    /// One session's metadata.
    fn info(&self, id: &str) -> Result<SessionInfo, SessionError>;

    /// Every session, most recently updated first.
    fn list(&self) -> Result<Vec<SessionInfo>, SessionError>;

    /// Replaces the settings stored with session `id` (the base URL is stored without
    /// credentials: [`SessionSettings::sanitized`]). Does not count as an update: the session
    /// keeps its place in "most recently updated" order.
    fn set_settings(&self, id: &str, settings: &SessionSettings) -> Result<(), SessionError>;

    /// Appends messages in order, in one transaction; returns their sequence numbers. Durable
    /// when it returns (see [`Durability`]).
    fn append_all(&self, id: &str, messages: &[Message]) -> Result<Vec<u64>, SessionError>;

    /// The stored messages with their sequence numbers, in sequence order.
    fn entries(&self, id: &str) -> Result<Vec<StoredMessage>, SessionError>;

    /// Sets the title (trimmed; must not be empty).
    fn set_title(&self, id: &str, title: &str) -> Result<(), SessionError>;

    /// Deletes a session and its messages.
    fn delete(&self, id: &str) -> Result<(), SessionError>;

    /// A new session holding this one's messages up to and including `seq` (same sequence
    /// numbers, title, model and settings; its stats count the copied messages), recording
    /// where it came from.
    fn fork(&self, id: &str, seq: u64) -> Result<SessionInfo, SessionError>;

    /// The stored messages with a sequence number above `after`, in sequence order (what a
    /// [`Follower`] reads). Fails with [`SessionError::NotFound`] when the session does not exist.
    fn entries_after(&self, id: &str, after: u64) -> Result<Vec<StoredMessage>, SessionError> {
        let mut entries = self.entries(id)?;
        entries.retain(|e| e.seq > after);
        Ok(entries)
    }

    /// A signal that wakes a [`Follower`] when session `id` may have new messages; `None` (the
    /// default) makes followers poll the store every [`POLL_INTERVAL`].
    fn subscribe(&self, id: &str) -> Result<Option<Box<dyn ChangeSignal>>, SessionError> {
        let _ = id;
        Ok(None)
    }

    /// Takes the writer lock of session `id` — one writer per session across processes —
    /// waiting up to `wait` while another process holds it, then failing with
    /// [`SessionError::InUse`] naming that process. Hold the returned [`SessionLock`] for as
    /// long as you append to the session (load its context *after* taking the lock). A process
    /// that dies releases its locks, however it dies. The session need not exist yet. The
    /// default returns a lock that excludes nothing (in-memory stores).
    fn lock_session(&self, id: &str, wait: Duration) -> Result<SessionLock, SessionError> {
        let _ = (id, wait);
        Ok(SessionLock::none())
    }

    /// The child sessions of session `id` (its sub-agents' runs), most recently updated first.
    fn children(&self, id: &str) -> Result<Vec<SessionInfo>, SessionError> {
        self.list_where(&SessionFilter::new().parent(id))
    }

    /// Creates an empty session.
    fn create(&self, new: NewSession) -> Result<SessionInfo, SessionError> {
        self.create_with(new, &[])
    }

    /// The most recently updated top-level session of any workspace (never a sub-agent's child
    /// session), if any — including one in which the model never replied. To continue a
    /// conversation use [`last_in`](Self::last_in).
    fn last(&self) -> Result<Option<SessionInfo>, SessionError> {
        Ok(self.list()?.into_iter().find(|s| s.parent.is_none()))
    }

    /// The sessions `filter` selects, most recently updated first. The default filters
    /// [`list`](Self::list) with [`SessionFilter::matches`]; a store may filter in its query
    /// instead, with the same result.
    fn list_where(&self, filter: &SessionFilter) -> Result<Vec<SessionInfo>, SessionError> {
        Ok(self
            .list()?
            .into_iter()
            .filter(|info| filter.matches(info))
            .take(filter.limit.unwrap_or(usize::MAX))
            .collect())
    }

    /// The session to continue in `workspace` (`--continue`): the most recently updated
    /// top-level one (never a sub-agent's child session) whose recorded workspace is exactly
    /// `workspace` and in which the model replied at least once. A session whose runs all failed
    /// before a reply (a rejected key, an unreachable server) is skipped, and so is one without a
    /// recorded workspace.
    fn last_in(&self, workspace: &str) -> Result<Option<SessionInfo>, SessionError> {
        let filter = SessionFilter::new()
            .workspace(workspace)
            .with_reply(true)
            .top_level(true)
            .limit(1);
        Ok(self.list_where(&filter)?.into_iter().next())
    }

    /// Appends one message in its own transaction; returns its sequence number. Durable when it
    /// returns (see [`Durability`]).
    fn append(&self, id: &str, message: &Message) -> Result<u64, SessionError> {
        self.append_all(id, std::slice::from_ref(message))?
            .first()
            .copied()
            .ok_or_else(|| SessionError::NotFound { id: id.to_owned() })
    }

    /// Renames a session (same as [`set_title`](Self::set_title)).
    fn rename(&self, id: &str, title: &str) -> Result<(), SessionError> {
        self.set_title(id, title)
    }

    /// Exactly the stored messages, in sequence order.
    fn load_raw(&self, id: &str) -> Result<Vec<Message>, SessionError> {
        Ok(self.entries(id)?.into_iter().map(|e| e.message).collect())
    }

    /// The context to resume from: the stored messages with interrupted tool batches repaired
    /// ([`repair_interrupted`]).
    fn load(&self, id: &str) -> Result<Vec<Message>, SessionError> {
        Ok(repair_interrupted(self.load_raw(id)?))
    }

    /// Writes the session as JSON Lines (see the [module docs](self#json-lines-export)).
    fn export_jsonl(&self, id: &str, out: &mut dyn Write) -> Result<(), SessionError> {
        jsonl::export(self, id, out)
    }

    /// Keeps the state of a run parked for approval with session `id`: adds its pending calls
    /// (calls already stored keep their decisions) and replaces the stored queued messages.
    /// The default refuses (a store without approval support).
    fn save_parked(&self, id: &str, parked: &ParkedRun) -> Result<(), SessionError> {
        let _ = (id, parked);
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// The parked state of session `id`: its pending calls in call order and the messages
    /// queued when it stopped; `None` when no call is pending.
    fn parked(&self, id: &str) -> Result<Option<ParkedRun>, SessionError> {
        let _ = id;
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// Records a decision on pending call `call_id` (approve, deny with a reason, or `Started`
    /// when a resume is about to run it). Fails when no such call is pending, or when the call
    /// already started (it can no longer be approved or denied).
    fn decide(&self, id: &str, call_id: &str, status: &PendingStatus) -> Result<(), SessionError> {
        let _ = (id, call_id, status);
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// Forgets pending call `call_id` (it has its result now).
    fn resolve_pending(&self, id: &str, call_id: &str) -> Result<(), SessionError> {
        let _ = (id, call_id);
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// Forgets every pending call and the queued messages of session `id`.
    fn clear_parked(&self, id: &str) -> Result<(), SessionError> {
        let _ = id;
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// Every session with pending calls (most recently parked first), with those calls.
    fn awaiting_approval(&self) -> Result<Vec<(String, Vec<PendingApproval>)>, SessionError> {
        Err(SessionError::Unsupported("pending approvals"))
    }

    /// Reads a JSON Lines export (header optional) into a new session.
    fn import_jsonl(
        &self,
        input: &mut dyn BufRead,
        options: ImportOptions,
    ) -> Result<SessionInfo, SessionError> {
        jsonl::import(self, input, options)
    }
}

/// The title derived from a user prompt: its text with whitespace collapsed, cut to
/// [`TITLE_MAX_CHARS`] characters (ending with `…` when cut); `None` when it has no text.
pub fn derive_title(message: &Message) -> Option<String> {
    let text = message.text();
    let mut collapsed = String::new();
    for word in text.split_whitespace() {
        if !collapsed.is_empty() {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
        // At most 4 bytes per char: past this it is certainly too long.
        if collapsed.len() > 4 * TITLE_MAX_CHARS {
            break;
        }
    }
    if collapsed.is_empty() {
        return None;
    }
    if collapsed.chars().count() <= TITLE_MAX_CHARS {
        return Some(collapsed);
    }
    let mut title: String = collapsed.chars().take(TITLE_MAX_CHARS - 1).collect();
    title.truncate(title.trim_end().len());
    title.push('…');
    Some(title)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::Part;

    #[test]
    fn titles_collapse_whitespace_and_are_cut_on_char_boundaries() {
        assert_eq!(
            derive_title(&Message::user("  Fix\n the   build  ")).as_deref(),
            Some("Fix the build")
        );
        assert_eq!(derive_title(&Message::user(" \n ")), None);
        assert_eq!(derive_title(&Message::user_parts(vec![])), None);
        let long = "é".repeat(100);
        let title = derive_title(&Message::user(long)).unwrap_or_default();
        assert_eq!(title.chars().count(), TITLE_MAX_CHARS);
        assert!(title.ends_with('…'));
        let exact = "a".repeat(TITLE_MAX_CHARS);
        assert_eq!(
            derive_title(&Message::user(exact.clone())).as_deref(),
            Some(exact.as_str())
        );
        let words = "word ".repeat(30);
        let title = derive_title(&Message::user_parts(vec![Part::text(words)])).unwrap_or_default();
        assert!(title.chars().count() <= TITLE_MAX_CHARS, "{title}");
        assert!(!title.contains(" …"), "{title}");
    }
}
