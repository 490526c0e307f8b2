//! The session store: which one (`--store`: a SQLite file, by default in the user's data
//! directory, or a PostgreSQL URL), resolving abbreviated ids, and the `agentloop sessions …`
//! subcommands (list, show, follow, export, import, rm).

use std::io::{BufReader, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::session::{
    Follower, ImportOptions, SessionError, SessionInfo, SessionStore, StoreSpec, StoredMessage,
};
use agentloop::transcript::{Role, Usage};

use crate::cli::SessionsCommand;
use crate::error::Failure;
use crate::render::{Style, format_transcript, one_line, out, stdout_color, thousands};
use crate::safe_text::visible_line;

fn env_dir(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// The default database: `$XDG_DATA_HOME/agentloop/sessions.db`, else
/// `~/.local/share/agentloop/sessions.db` (`%LOCALAPPDATA%\agentloop\sessions.db` on Windows).
pub fn default_db_path() -> Result<PathBuf, Failure> {
    let base = env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|home| home.join(".local").join("share")))
        .or_else(|| env_dir("LOCALAPPDATA"))
        .ok_or_else(|| {
            Failure::usage("cannot find a data directory for the session database; pass --db PATH")
        })?;
    Ok(base.join("agentloop").join("sessions.db"))
}

/// Opens the store `spec` names (a SQLite file path or a `postgres://` URL; `None`: the
/// default SQLite file), creating the file and its directories, or the PostgreSQL schema, as
/// needed. The error shows the spec without its password.
pub fn open_store(spec: Option<&str>) -> Result<Arc<dyn SessionStore>, Failure> {
    let spec = match spec.filter(|s| !s.trim().is_empty()) {
        Some(spec) => StoreSpec::parse(spec),
        None => StoreSpec::Sqlite(default_db_path()?),
    };
    spec.open().map_err(|e| match &spec {
        // Its errors say which server (without the password).
        StoreSpec::Postgres(_) => Failure::new(format!("cannot open the session store: {e}")),
        _ => Failure::new(format!("cannot open the session database {spec}: {e}")),
    })
}

/// The full id of the session `given` names: itself, or the one session whose id starts with it.
pub fn resolve_id(store: &dyn SessionStore, given: &str) -> Result<String, Failure> {
    match store.info(given) {
        Ok(info) => return Ok(info.id),
        Err(SessionError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let matches: Vec<SessionInfo> = store
        .list()?
        .into_iter()
        .filter(|s| !given.is_empty() && s.id.starts_with(given))
        .collect();
    match matches.as_slice() {
        [one] => Ok(one.id.clone()),
        [] => Err(Failure::new(format!("no session with id {given:?}"))),
        many => Err(Failure::new(format!(
            "{given:?} matches {} sessions; give more of the id",
            many.len()
        ))),
    }
}

/// Runs a `sessions` subcommand.
pub fn run(db: Option<&str>, command: SessionsCommand) -> Result<(), Failure> {
    let store = open_store(db)?;
    match command {
        SessionsCommand::List { json } => list(&*store, json),
        SessionsCommand::Follow {
            id,
            json,
            new,
            until_idle,
            until_done,
        } => {
            let id = resolve_id(&*store, &id)?;
            follow(
                store,
                &id,
                FollowOptions {
                    json,
                    new,
                    until_idle,
                    until_done,
                },
            )
        }
        SessionsCommand::Show { id, context } => {
            let id = resolve_id(&*store, &id)?;
            let info = store.info(&id)?;
            let style = Style::new(stdout_color());
            let messages = if context {
                agentloop::agent::compaction::effective_context(&store.load(&id)?)
            } else {
                store.load_raw(&id)?
            };
            out(&format!(
                "{}\n\n{}",
                style.dim(&describe(&info)),
                format_transcript(style, &messages)
            ));
            Ok(())
        }
        SessionsCommand::Export { id } => {
            let id = resolve_id(&*store, &id)?;
            let mut stdout = std::io::stdout().lock();
            store.export_jsonl(&id, &mut stdout)?;
            stdout.flush()?;
            Ok(())
        }
        SessionsCommand::Import { file } => {
            let info = if file.as_os_str() == "-" {
                store.import_jsonl(&mut std::io::stdin().lock(), ImportOptions::new())?
            } else {
                let f = std::fs::File::open(&file)
                    .map_err(|e| Failure::new(format!("cannot read {}: {e}", file.display())))?;
                store.import_jsonl(&mut BufReader::new(f), ImportOptions::new())?
            };
            out(&format!("{}\n", visible_line(&info.id)));
            Ok(())
        }
        SessionsCommand::Rm { id } => {
            let id = resolve_id(&*store, &id)?;
            store.delete(&id)?;
            out(&format!("deleted {}\n", visible_line(&id)));
            Ok(())
        }
    }
}

fn list(store: &dyn SessionStore, json: bool) -> Result<(), Failure> {
    let sessions = store.list()?;
    let mut text = String::new();
    for info in &sessions {
        let usage = session_usage(store, &info.id)?;
        if json {
            let mut value = serde_json::to_value(info)
                .map_err(|e| Failure::new(format!("cannot serialize a session: {e}")))?;
            if let serde_json::Value::Object(map) = &mut value {
                let usage = serde_json::to_value(usage)
                    .map_err(|e| Failure::new(format!("cannot serialize a session: {e}")))?;
                map.insert("usage".into(), usage);
            }
            text.push_str(&value.to_string());
        } else {
            let cost = usage
                .cost_usd
                .map_or_else(|| "-".to_owned(), |c| format!("${c:.4}"));
            text.push_str(&format!(
                "{}  {}  {:>4} msgs  {:>9} tok  {:>9}  {:<20}  {}",
                visible_line(&info.id),
                format_time(info.updated_ms),
                info.message_count,
                thousands(
                    usage.input_tokens
                        + usage.cache_read_tokens
                        + usage.cache_write_tokens
                        + usage.output_tokens
                ),
                cost,
                one_line(info.model.as_deref().unwrap_or("-"), 20),
                one_line(info.title.as_deref().unwrap_or("(untitled)"), 60)
            ));
        }
        text.push('\n');
    }
    if sessions.is_empty() && !json {
        eprintln!("no sessions yet");
    }
    out(&text);
    Ok(())
}

/// The summed usage (tokens and cost) of a session's assistant messages. The store keeps no
/// running total, so this reads the session's messages.
fn session_usage(store: &dyn SessionStore, id: &str) -> Result<Usage, Failure> {
    let mut total = Usage::default();
    for message in store.load(id)? {
        if message.role == Role::Assistant {
            if let Some(usage) = &message.usage {
                total.accumulate(usage);
            }
        }
    }
    Ok(total)
}

/// How `sessions follow` runs.
struct FollowOptions {
    json: bool,
    new: bool,
    until_idle: Option<Duration>,
    until_done: bool,
}

/// How long one wait for new messages lasts before the stop conditions are checked again.
const FOLLOW_TICK: Duration = Duration::from_millis(500);

/// `agentloop sessions follow`: prints the session's messages, then new ones as they come.
fn follow(store: Arc<dyn SessionStore>, id: &str, options: FollowOptions) -> Result<(), Failure> {
    let start = if options.new {
        store.info(id)?.last_seq
    } else {
        0
    };
    let mut follower = Follower::new(store.clone(), id, start)?;
    let style = Style::new(stdout_color());
    if !options.json {
        eprintln!("{}", style.dim(&describe(&store.info(id)?)));
    }
    let mut last_message = Instant::now();
    loop {
        let batch = follower.next_batch(FOLLOW_TICK)?;
        if !batch.is_empty() {
            if !print_follow(style, &batch, options.json) {
                return Ok(()); // stdout closed (`| head`)
            }
            last_message = Instant::now();
            continue;
        }
        if options
            .until_idle
            .is_some_and(|idle| last_message.elapsed() >= idle)
        {
            return Ok(());
        }
        // Nobody holds the writer lock: the run is over; print what it wrote last.
        if options.until_done && store.lock_session(id, Duration::ZERO).is_ok() {
            let rest = follower.next_batch(Duration::ZERO)?;
            print_follow(style, &rest, options.json);
            return Ok(());
        }
    }
}

/// Prints followed messages; `false` when stdout is closed.
fn print_follow(style: Style, batch: &[StoredMessage], json: bool) -> bool {
    let text = if json {
        let mut text = String::new();
        for entry in batch {
            let line = serde_json::json!({
                "seq": entry.seq,
                "created_ms": entry.created_ms,
                "message": entry.message,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        text
    } else {
        let messages: Vec<_> = batch.iter().map(|e| e.message.clone()).collect();
        format_transcript(style, &messages)
    };
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .is_ok()
}

fn describe(info: &SessionInfo) -> String {
    format!(
        "session {} · {} · {} messages · model {} · updated {}",
        visible_line(&info.id),
        visible_line(info.title.as_deref().unwrap_or("(untitled)")),
        info.message_count,
        visible_line(info.model.as_deref().unwrap_or("-")),
        format_time(info.updated_ms)
    )
}

/// `YYYY-MM-DD HH:MM` (UTC) for milliseconds since the epoch.
pub fn format_time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}",
        rem / 3600,
        (rem % 3600) / 60
    )
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian calendar).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop::session::NewSession;

    #[test]
    fn times_format_in_utc() {
        assert_eq!(format_time(0), "1970-01-01 00:00");
        assert_eq!(format_time(1_700_000_000_000), "2023-11-14 22:13");
        assert_eq!(format_time(951_782_400_000), "2000-02-29 00:00");
    }

    #[test]
    fn ids_resolve_by_unique_prefix() {
        let store = agentloop::session::SqliteStore::open_in_memory().unwrap();
        store.create(NewSession::new().id("abc-1")).unwrap();
        store.create(NewSession::new().id("abd-2")).unwrap();
        assert_eq!(resolve_id(&store, "abc-1").unwrap(), "abc-1");
        assert_eq!(resolve_id(&store, "abd").unwrap(), "abd-2");
        assert!(resolve_id(&store, "ab").is_err());
        assert!(resolve_id(&store, "zz").is_err());
        assert!(resolve_id(&store, "").is_err());
    }
}
