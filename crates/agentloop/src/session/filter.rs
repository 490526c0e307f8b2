//! [`SessionFilter`]: which sessions [`SessionStore::list_where`](super::SessionStore::list_where)
//! returns (a workspace, an id prefix, only sessions with a reply, top-level sessions or one
//! session's children, at most N).

use super::SessionInfo;

/// Which sessions to list. Every condition set must hold; the default matches every session.
///
/// ```
/// use agentloop::session::{NewSession, SessionFilter, SessionSettings, SessionStore, SqliteStore};
///
/// # fn main() -> Result<(), agentloop::session::SessionError> {
/// let store = SqliteStore::open_in_memory()?;
/// let here = SessionSettings::new().workspace("/home/me/proj");
/// store.create(NewSession::new().id("abc-1").settings(here))?;
/// store.create(NewSession::new().id("abd-2"))?;
/// let found = store.list_where(&SessionFilter::new().id_prefix("ab").workspace("/home/me/proj"))?;
/// assert_eq!(found.len(), 1);
/// assert_eq!(found[0].id, "abc-1");
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SessionFilter {
    /// Only sessions whose recorded workspace is exactly this text
    /// ([`SessionSettings::workspace`](super::SessionSettings::workspace)); sessions without a
    /// recorded workspace never match.
    pub workspace: Option<String>,
    /// Only sessions whose id starts with this text (an empty prefix matches nothing).
    pub id_prefix: Option<String>,
    /// Only sessions in which the model replied at least once
    /// ([`SessionStats::has_reply`](super::SessionStats::has_reply)).
    pub with_reply: bool,
    /// Only top-level sessions: none that is a sub-agent's child session
    /// ([`SessionInfo::parent`](super::SessionInfo::parent)).
    pub top_level: bool,
    /// Only the child sessions of this session.
    pub parent: Option<String>,
    /// At most this many (the most recently updated).
    pub limit: Option<usize>,
}

impl SessionFilter {
    /// Every session.
    pub fn new() -> Self {
        SessionFilter::default()
    }

    crate::setters! {
        /// Sets [`workspace`](Self::workspace) (the text of a canonical path).
        pub fn workspace(workspace: impl Into<String>) => workspace = Some(workspace.into());
        /// Sets [`id_prefix`](Self::id_prefix).
        pub fn id_prefix(prefix: impl Into<String>) => id_prefix = Some(prefix.into());
        /// Sets [`with_reply`](Self::with_reply).
        pub fn with_reply(yes: bool) => with_reply = yes;
        /// Sets [`top_level`](Self::top_level).
        pub fn top_level(yes: bool) => top_level = yes;
        /// Sets [`parent`](Self::parent).
        pub fn parent(id: impl Into<String>) => parent = Some(id.into());
        /// Sets [`limit`](Self::limit).
        pub fn limit(n: usize) => limit = Some(n);
    }

    /// Whether `info` satisfies the conditions (all but [`limit`](Self::limit)). The reference
    /// meaning of a filter: a store that filters in its query must agree with it.
    pub fn matches(&self, info: &SessionInfo) -> bool {
        if let Some(workspace) = &self.workspace {
            if info.settings.workspace.as_deref() != Some(workspace.as_str()) {
                return false;
            }
        }
        if let Some(prefix) = &self.id_prefix {
            if prefix.is_empty() || !info.id.starts_with(prefix.as_str()) {
                return false;
            }
        }
        if self.top_level && info.parent.is_some() {
            return false;
        }
        if let Some(parent) = &self.parent {
            if info.parent.as_ref().map(|p| p.session_id.as_str()) != Some(parent.as_str()) {
                return false;
            }
        }
        !self.with_reply || info.stats.has_reply()
    }
}
