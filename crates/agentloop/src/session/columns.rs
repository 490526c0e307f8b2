//! How every store writes a message and a session's JSON columns, and reads them back: one
//! encoding, so the stores agree byte for byte (exports, the conformance suite).

// A build without any store (features `sqlite` and `postgres` off) uses none of it.
#![cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]

use super::{
    ForkOrigin, NewSession, ParentLink, SessionError, SessionInfo, SessionSettings, SessionStats,
    StoredMessage,
};
use crate::transcript::{Message, Part, ToolArguments};

/// The deepest JSON nesting a stored message may have. `serde_json` refuses to read anything
/// nested deeper than 128 levels (its recursion limit), so a message written deeper could never
/// be loaded, shown or exported again; the margin covers the message's own envelope.
pub const MAX_STORED_DEPTH: usize = 120;

/// The nesting depth of JSON text (arrays and objects), counted without parsing it (so it
/// cannot hit the recursion limit itself).
pub(crate) fn json_depth(json: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in json.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `message` as JSON the reader accepts: tool-call arguments nested too deeply are kept as their
/// exact text ([`ToolArguments::Unparsed`], stored as a string) instead of as nested JSON; a
/// message still too deep after that is refused.
pub(crate) fn storable_json(message: &Message) -> Result<String, SessionError> {
    let json = serde_json::to_string(message).map_err(SessionError::Serialize)?;
    if json_depth(&json) <= MAX_STORED_DEPTH {
        return Ok(json);
    }
    let mut flattened = message.clone();
    for part in &mut flattened.content {
        if let Part::ToolCall(call) = part {
            if let ToolArguments::Json(value) = &call.arguments {
                let text = value.to_string();
                if json_depth(&text) > MAX_STORED_DEPTH / 2 {
                    call.arguments = ToolArguments::Unparsed(text);
                }
            }
        }
    }
    let json = serde_json::to_string(&flattened).map_err(SessionError::Serialize)?;
    if json_depth(&json) > MAX_STORED_DEPTH {
        return Err(SessionError::Invalid {
            what: "message",
            reason: format!(
                "its JSON is nested more than {MAX_STORED_DEPTH} levels deep, more than a \
                 stored session can be read back with"
            ),
        });
    }
    Ok(json)
}

/// The `stats` column's JSON.
pub(crate) fn stats_json(stats: &SessionStats) -> Result<String, SessionError> {
    serde_json::to_string(stats).map_err(SessionError::Serialize)
}

/// The `settings` column's JSON (the workspace has its own column) and the workspace.
pub(crate) fn settings_columns(
    settings: &SessionSettings,
) -> Result<(Option<String>, String), SessionError> {
    let mut settings = settings.clone().sanitized();
    let workspace = settings.workspace.take();
    let json = serde_json::to_string(&settings).map_err(SessionError::Serialize)?;
    Ok((workspace, json))
}

/// A JSON column read leniently: unreadable text (an edited database) gives the default rather
/// than making the whole session unlistable.
pub(crate) fn lenient_json<T: serde::de::DeserializeOwned + Default>(text: Option<String>) -> T {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

/// A row of a store's session query, whose columns are, in order: id, title, model, created_ms,
/// updated_ms, message_count, last_seq, forked_from, forked_at_seq, workspace, settings, stats,
/// parent_id, parent_call, parent_agent.
pub(crate) trait SessionRow {
    /// The store's error.
    type Error;
    /// A text column (`None`: NULL).
    fn text(&self, column: usize) -> Result<Option<String>, Self::Error>;
    /// An integer column (`None`: NULL).
    fn number(&self, column: usize) -> Result<Option<i64>, Self::Error>;
}

/// The session a row describes (see [`SessionRow`] for the columns).
pub(crate) fn info_from_row<R: SessionRow>(row: &R) -> Result<SessionInfo, R::Error> {
    let count = |column| -> Result<u64, R::Error> {
        Ok(u64::try_from(row.number(column)?.unwrap_or(0)).unwrap_or(0))
    };
    let forked_at = count(8)?;
    let parent = match row.text(12)? {
        Some(session_id) => Some(ParentLink {
            session_id,
            call_id: row.text(13)?.unwrap_or_default(),
            agent: row.text(14)?.unwrap_or_default(),
        }),
        None => None,
    };
    Ok(SessionInfo {
        id: row.text(0)?.unwrap_or_default(),
        title: row.text(1)?,
        model: row.text(2)?,
        created_ms: count(3)?,
        updated_ms: count(4)?,
        message_count: count(5)?,
        last_seq: count(6)?,
        forked_from: row.text(7)?.map(|session_id| ForkOrigin {
            session_id,
            seq: forked_at,
        }),
        settings: SessionSettings {
            workspace: row.text(9)?,
            ..lenient_json(row.text(10)?)
        },
        stats: lenient_json(row.text(11)?),
        parent,
    })
}

/// A stored message read back from its row; JSON that does not parse is reported as corrupt
/// (naming the session and the sequence number).
pub(crate) fn stored_message(
    id: &str,
    seq: u64,
    created_ms: u64,
    json: &str,
) -> Result<StoredMessage, SessionError> {
    let message = serde_json::from_str(json).map_err(|source| SessionError::Corrupt {
        id: id.to_owned(),
        seq,
        source,
    })?;
    Ok(StoredMessage {
        seq,
        created_ms,
        message,
    })
}

/// A session title as stored: trimmed, and not empty.
pub(crate) fn clean_title(title: &str) -> Result<&str, SessionError> {
    let title = title.trim();
    if title.is_empty() {
        return Err(SessionError::Invalid {
            what: "title",
            reason: "a title must not be empty".into(),
        });
    }
    Ok(title)
}

/// What both stores insert for a new session, before their own text rules: the id (the requested
/// one once `check_id` accepts it, else a fresh UUID), the cleaned title, the model (the
/// explicit one, else the settings'), the workspace and `settings` columns, and the parent link.
pub(crate) struct NewSessionColumns {
    pub(crate) id: String,
    pub(crate) title: Option<String>,
    pub(crate) model: Option<String>,
    pub(crate) workspace: Option<String>,
    pub(crate) settings: String,
    pub(crate) parent: Option<ParentLink>,
}

impl NewSessionColumns {
    /// The columns of `new`, checked in the order the stores report errors: id, title, settings.
    pub(crate) fn of(
        new: NewSession,
        check_id: impl FnOnce(&str) -> Result<(), SessionError>,
    ) -> Result<Self, SessionError> {
        let id = match new.id {
            Some(id) => {
                check_id(&id)?;
                id
            }
            None => uuid::Uuid::new_v4().to_string(),
        };
        let title = new
            .title
            .as_deref()
            .map(clean_title)
            .transpose()?
            .map(str::to_owned);
        let (workspace, settings) = settings_columns(&new.settings)?;
        Ok(NewSessionColumns {
            id,
            title,
            model: new.model.or(new.settings.model),
            workspace,
            settings,
            parent: new.parent,
        })
    }
}
