//! JSON Lines export and import of one session (format described in the
//! [module docs](super#json-lines-export)). Works over any [`SessionStore`].

use std::io::{BufRead, Write};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{NewSession, SessionError, SessionInfo, SessionSettings, SessionStore};
use crate::transcript::Message;

/// The export format version written in the header's `format` field. Import refuses newer
/// formats.
pub const EXPORT_FORMAT: u32 = 1;

/// How [`import_jsonl`](SessionStore::import_jsonl) creates the session.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ImportOptions {
    /// Reuse the header's id instead of generating a new one (fails with
    /// [`SessionError::AlreadyExists`] when it is taken; ignored without a header).
    pub keep_id: bool,
}

impl ImportOptions {
    /// Defaults: a new id.
    pub fn new() -> Self {
        ImportOptions::default()
    }

    /// Sets [`keep_id`](Self::keep_id).
    pub fn keep_id(mut self, keep: bool) -> Self {
        self.keep_id = keep;
        self
    }
}

#[derive(Serialize)]
struct HeaderOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    format: u32,
    #[serde(flatten)]
    info: &'a SessionInfo,
}

/// Lenient on purpose: only what import uses is read, everything else is ignored.
#[derive(Deserialize)]
struct HeaderIn {
    #[serde(default = "default_format")]
    format: u32,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    message_count: Option<u64>,
    /// Unreadable settings (from a newer or edited export) are dropped, not fatal.
    #[serde(default, deserialize_with = "lenient_settings")]
    settings: SessionSettings,
}

fn lenient_settings<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SessionSettings, D::Error> {
    let value = Value::deserialize(d)?;
    Ok(serde_json::from_value(value).unwrap_or_default())
}

fn default_format() -> u32 {
    1
}

const HEADER_TYPE: &str = "session";

pub(super) fn export<S: SessionStore + ?Sized>(
    store: &S,
    id: &str,
    out: &mut dyn Write,
) -> Result<(), SessionError> {
    let info = store.info(id)?;
    let entries = store.entries(id)?;
    // The header's count must match the lines that follow, even if a writer appended between
    // the two reads above.
    let info = SessionInfo {
        message_count: entries.len() as u64,
        last_seq: entries.last().map_or(0, |e| e.seq),
        ..info
    };
    let header = HeaderOut {
        kind: HEADER_TYPE,
        format: EXPORT_FORMAT,
        info: &info,
    };
    serde_json::to_writer(&mut *out, &header).map_err(SessionError::Serialize)?;
    out.write_all(b"\n")?;
    for entry in &entries {
        serde_json::to_writer(&mut *out, &entry.message).map_err(SessionError::Serialize)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

fn import_error(line: usize, reason: impl Into<String>) -> SessionError {
    SessionError::Import {
        line,
        reason: reason.into(),
    }
}

pub(super) fn import<S: SessionStore + ?Sized>(
    store: &S,
    input: &mut dyn BufRead,
    options: ImportOptions,
) -> Result<SessionInfo, SessionError> {
    let mut header: Option<HeaderIn> = None;
    let mut messages: Vec<Message> = Vec::new();
    let mut seen_content = false;
    let mut last_line = 0;
    for (index, line) in input.lines().enumerate() {
        let number = index + 1;
        last_line = number;
        let line = line?;
        let text = line.trim();
        if text.is_empty() {
            continue;
        }
        if !seen_content {
            seen_content = true;
            let value: Value = serde_json::from_str(text)
                .map_err(|e| import_error(number, format!("not JSON: {e}")))?;
            if value.get("type").and_then(Value::as_str) == Some(HEADER_TYPE) {
                let parsed: HeaderIn = serde_json::from_value(value)
                    .map_err(|e| import_error(number, format!("invalid session header: {e}")))?;
                if parsed.format > EXPORT_FORMAT {
                    return Err(import_error(
                        number,
                        format!(
                            "export format {} is newer than this build reads ({EXPORT_FORMAT})",
                            parsed.format
                        ),
                    ));
                }
                header = Some(parsed);
                continue;
            }
            let message = serde_json::from_value(value)
                .map_err(|e| import_error(number, format!("not a message: {e}")))?;
            messages.push(message);
            continue;
        }
        let message = serde_json::from_str(text)
            .map_err(|e| import_error(number, format!("not a message: {e}")))?;
        messages.push(message);
    }
    let mut new = NewSession::new();
    if let Some(header) = header {
        if let Some(expected) = header.message_count {
            if expected != messages.len() as u64 {
                return Err(import_error(
                    last_line,
                    format!(
                        "the header announces {expected} messages but {} were read (truncated \
                         export?)",
                        messages.len()
                    ),
                ));
            }
        }
        new.title = header.title.filter(|t| !t.trim().is_empty());
        new.model = header.model;
        new.settings = header.settings;
        if options.keep_id {
            new.id = header.id;
        }
    }
    // Whatever the export says, its settings were recorded elsewhere.
    new.settings.imported = true;
    store.create_with(new, &messages)
}
