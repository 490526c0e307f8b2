//! The session store — which one (`--store`: a SQLite file, by default in the user's data
//! directory, or a PostgreSQL URL) — resolving abbreviated ids, and the `agentloop sessions …`
//! subcommands (list, show, follow, export, import, rm).
//!
//! Every command that takes a session id resolves it with [`resolve`]: the exact id, else the
//! one session whose id starts with it; an ambiguous prefix is an error listing the candidates,
//! and an unknown one an error. Only `run`/`chat --session` may create a session, under the
//! rules of [`for_run`].

use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agentloop::session::{
    Follower, ImportOptions, SessionError, SessionFilter, SessionInfo, SessionSettings,
    SessionStore, StoreSpec, StoredMessage,
};

use crate::cli::SessionsCommand;
use crate::error::Failure;
use crate::ui::render::{Style, format_transcript, one_line, out, stdout_color, thousands};
use crate::ui::safe_text::visible_line;

/// How many candidates an ambiguous-prefix error lists.
const MAX_CANDIDATES: usize = 10;

/// The default database: `$XDG_DATA_HOME/agentloop/sessions.db`, else
/// `~/.local/share/agentloop/sessions.db` (`%LOCALAPPDATA%\agentloop\sessions.db` on Windows).
pub fn default_db_path() -> Result<PathBuf, Failure> {
    let dir = crate::config::data_dir::data_dir().ok_or_else(|| {
        Failure::usage("cannot find a data directory for the session database; pass --db PATH")
    })?;
    Ok(dir.join("sessions.db"))
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

/// What a session id given by the user names.
enum Lookup {
    /// This session (exact id, or the only one with that prefix).
    Found(Box<SessionInfo>),
    /// No session has this id or prefix.
    Missing,
    /// Several sessions have this prefix (most recently updated first).
    Ambiguous(Vec<SessionInfo>),
}

fn lookup(store: &dyn SessionStore, given: &str) -> Result<Lookup, Failure> {
    if given.is_empty() {
        return Err(Failure::usage("a session id must not be empty"));
    }
    match store.info(given) {
        Ok(info) => return Ok(Lookup::Found(Box::new(info))),
        Err(SessionError::NotFound { .. }) => {}
        Err(e) => return Err(e.into()),
    }
    let mut matches = store.list_where(&SessionFilter::new().id_prefix(given))?;
    Ok(match matches.len() {
        0 => Lookup::Missing,
        1 => Lookup::Found(Box::new(matches.remove(0))),
        _ => Lookup::Ambiguous(matches),
    })
}

/// The error for an ambiguous prefix, naming each candidate (id, last update, title) — on one
/// line, as every diagnostic.
fn ambiguous(given: &str, candidates: &[SessionInfo]) -> Failure {
    let mut shown: Vec<String> = candidates
        .iter()
        .take(MAX_CANDIDATES)
        .map(|info| {
            format!(
                "{} ({}, \"{}\")",
                visible_line(&info.id),
                format_time(info.updated_ms),
                one_line(info.title.as_deref().unwrap_or("untitled"), 40)
            )
        })
        .collect();
    if candidates.len() > MAX_CANDIDATES {
        shown.push(format!("… and {} more", candidates.len() - MAX_CANDIDATES));
    }
    Failure::new(format!(
        "{} matches {} sessions; give more of the id: {}",
        visible_line(given),
        candidates.len(),
        shown.join("; ")
    ))
}

fn missing(given: &str) -> String {
    format!(
        "no session matches {} (`agentloop sessions list` shows them)",
        visible_line(given)
    )
}

/// The session `given` names: its exact id, or a prefix of exactly one session's id.
pub fn resolve(store: &dyn SessionStore, given: &str) -> Result<SessionInfo, Failure> {
    match lookup(store, given)? {
        Lookup::Found(info) => Ok(*info),
        Lookup::Missing => Err(Failure::new(missing(given))),
        Lookup::Ambiguous(candidates) => Err(ambiguous(given, &candidates)),
    }
}

/// The full id of the session `given` names (see [`resolve`]).
pub fn resolve_id(store: &dyn SessionStore, given: &str) -> Result<String, Failure> {
    resolve(store, given).map(|info| info.id)
}

/// Whether `text` could be (the start of) a generated session id: only hex digits and dashes.
/// Such text that matches nothing is a mistyped or foreign id, not a name for a new session.
fn looks_like_an_id(text: &str) -> bool {
    text.chars().all(|c| c.is_ascii_hexdigit() || c == '-') && text.len() <= 36
}

/// The session `--continue` picks in `workspace` (the text of its canonical path): the most
/// recently updated top-level one recorded there with a model reply, as
/// [`SessionStore::last_in`] — never a sub-agent's child session (its parent is continued),
/// and never an imported session that has not been run on this machine since (its recorded
/// workspace was written elsewhere; resume it by id with `--session`).
pub fn last_local_in(
    store: &dyn SessionStore,
    workspace: &str,
) -> Result<Option<SessionInfo>, Failure> {
    let filter = SessionFilter::new()
        .workspace(workspace)
        .with_reply(true)
        .top_level(true);
    Ok(store
        .list_where(&filter)?
        .into_iter()
        .find(|info| !info.settings.imported))
}

/// The session `run`/`chat --session ID` continues, or `None` when a new session with id
/// `given` is to be created:
///
/// - with `create` (`--create`): the session with exactly this id, else a new one;
/// - otherwise as [`resolve`] (exact id, then a unique prefix — said on stderr when the prefix
///   was expanded — and an error listing the candidates when ambiguous); with no match, a
///   name creates a new session but text that looks like an abbreviated id (only hex digits
///   and dashes) is an error, and nothing is created.
pub fn for_run(
    store: &dyn SessionStore,
    given: &str,
    create: bool,
) -> Result<Option<SessionInfo>, Failure> {
    if create {
        return match store.info(given) {
            Ok(info) => Ok(Some(info)),
            Err(SessionError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        };
    }
    match lookup(store, given)? {
        Lookup::Found(info) => {
            if info.id != given {
                eprintln!("agentloop: resuming session {}", visible_line(&info.id));
            }
            Ok(Some(*info))
        }
        Lookup::Ambiguous(candidates) => Err(ambiguous(given, &candidates)),
        Lookup::Missing if looks_like_an_id(given) => Err(Failure::new(format!(
            "{}; nothing was created (to start a new session with this id, add --create)",
            missing(given)
        ))),
        Lookup::Missing => Ok(None),
    }
}

/// The text a session stores as its workspace for directory `dir`: its canonical path.
pub fn workspace_key(dir: &Path) -> Result<String, Failure> {
    let canonical = std::fs::canonicalize(dir)
        .map_err(|e| Failure::usage(format!("cannot use {}: {e}", dir.display())))?;
    Ok(canonical.to_string_lossy().into_owned())
}

/// Runs a `sessions` subcommand.
pub fn run(db: Option<&str>, command: SessionsCommand) -> Result<(), Failure> {
    let store = open_store(db)?;
    match command {
        SessionsCommand::List {
            workspace,
            json,
            all,
        } => {
            let workspace = workspace.as_deref().map(workspace_key).transpose()?;
            list(&*store, workspace.as_deref(), json, all)
        }
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
        SessionsCommand::Show { id, context, full } => show(&*store, &id, context, full),
        SessionsCommand::Export { id } => {
            let id = resolve_id(&*store, &id)?;
            let mut stdout = std::io::stdout().lock();
            store.export_jsonl(&id, &mut stdout)?;
            stdout.flush()?;
            Ok(())
        }
        SessionsCommand::Import { file } => import(&*store, &file),
        SessionsCommand::Rm { id } => remove(&*store, &id),
    }
}

/// `sessions show ID [--context] [--full]`.
fn show(store: &dyn SessionStore, id: &str, context: bool, full: bool) -> Result<(), Failure> {
    let id = resolve_id(store, id)?;
    let info = store.info(&id)?;
    let style = Style::new(stdout_color());
    let messages = if context {
        agentloop::agent::compaction::effective_context(&store.load(&id)?)
    } else {
        store.load_raw(&id)?
    };
    let transcript = if full {
        crate::outputs::full_transcript(style, &id, &messages)
    } else {
        format_transcript(style, &messages)
    };
    out(&format!(
        "{}{}\n\n{}",
        style.dim(&describe(&info)),
        style.dim(&family(store, &info)?),
        transcript
    ));
    if let Some(plan) = agentloop::builtin::Plan::latest(&messages) {
        out(&format!("\n{}", crate::plan::shown(style, &plan)));
    }
    Ok(())
}

/// `sessions import FILE|-`.
fn import(store: &dyn SessionStore, file: &Path) -> Result<(), Failure> {
    let info = if file.as_os_str() == "-" {
        store.import_jsonl(&mut std::io::stdin().lock(), ImportOptions::new())?
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| Failure::new(format!("cannot read {}: {e}", file.display())))?;
        store.import_jsonl(&mut BufReader::new(f), ImportOptions::new())?
    };
    out(&format!("{}\n", visible_line(&info.id)));
    // The store marked it imported: its settings were recorded elsewhere.
    if !info.settings.is_empty() && info.settings != SessionSettings::new().imported(true) {
        eprintln!(
            "agentloop: the settings recorded with it (workspace, provider, base URL) \
             apply only when given again; `--continue` will not pick it until it has \
             been resumed here with --session"
        );
    }
    Ok(())
}

/// `sessions rm ID`: the session, its child sessions (a sub-agent's run belongs to its
/// parent), their kept tool outputs and checkpoint logs, then the checkpoint blobs no
/// remaining log refers to.
fn remove(store: &dyn SessionStore, id: &str) -> Result<(), Failure> {
    let id = resolve_id(store, id)?;
    let children = descendants(store, &id)?;
    store.delete(&id)?;
    for child in &children {
        store.delete(child)?;
    }
    for session in std::iter::once(&id).chain(&children) {
        forget_files(session);
    }
    crate::commands::checkpoints::collect_garbage();
    match children.len() {
        0 => out(&format!("deleted {}\n", visible_line(&id))),
        n => out(&format!(
            "deleted {} and its {n} child session(s)\n",
            visible_line(&id)
        )),
    }
    Ok(())
}

/// Deletes what a deleted session kept outside the database: its full tool outputs and its
/// checkpoint log (warnings only: the session itself is gone either way).
pub fn forget_files(session: &str) {
    if default_db_path().is_err() {
        return; // no data directory: nothing was kept there
    }
    if let Err(e) = crate::outputs::remove(session) {
        eprintln!("agentloop: warning: {e}");
    }
    if let Err(e) = crate::commands::checkpoints::forget(session) {
        eprintln!("agentloop: warning: {e}");
    }
}

/// The ids of `id`'s child sessions, their children, and so on.
fn descendants(store: &dyn SessionStore, id: &str) -> Result<Vec<String>, Failure> {
    let mut found = Vec::new();
    let mut next = vec![id.to_owned()];
    while let Some(parent) = next.pop() {
        for child in store.children(&parent)? {
            // A link cycle (an edited database) must not loop forever.
            if child.id != id && !found.contains(&child.id) {
                next.push(child.id.clone());
                found.push(child.id);
            }
        }
    }
    Ok(found)
}

/// The lines of `sessions show` that link a session to its family: its parent (for a
/// sub-agent's child session) and each of its child sessions (id, agent, the call that ran it).
fn family(store: &dyn SessionStore, info: &SessionInfo) -> Result<String, Failure> {
    let mut text = String::new();
    if let Some(parent) = &info.parent {
        text.push_str(&format!(
            "\nchild session of {} · agent {} · call {}",
            visible_line(&parent.session_id),
            visible_line(&parent.agent),
            visible_line(&parent.call_id)
        ));
    }
    let mut children = store.children(&info.id)?;
    children.sort_by_key(|c| c.created_ms);
    for child in children {
        let (agent, call) = child
            .parent
            .as_ref()
            .map_or(("-", "-"), |p| (p.agent.as_str(), p.call_id.as_str()));
        text.push_str(&format!(
            "\nchild session {} · agent {} · call {} · {} messages",
            visible_line(&child.id),
            visible_line(agent),
            visible_line(call),
            child.message_count
        ));
    }
    Ok(text)
}

/// The sessions in listing order with their nesting depth: every session flat (`all`), or the
/// top-level ones, each followed by its child sessions (and theirs), indented. A child whose
/// parent is not in the store any more is listed as top-level, so nothing is hidden.
fn in_list_order(sessions: Vec<SessionInfo>, all: bool) -> Vec<(usize, SessionInfo)> {
    if all {
        return sessions.into_iter().map(|s| (0, s)).collect();
    }
    let ids: std::collections::HashSet<String> = sessions.iter().map(|s| s.id.clone()).collect();
    let mut children: std::collections::HashMap<String, Vec<SessionInfo>> = Default::default();
    let mut top = Vec::new();
    for info in sessions {
        match info.parent.as_ref().map(|p| p.session_id.clone()) {
            Some(parent) if ids.contains(&parent) && parent != info.id => {
                children.entry(parent).or_default().push(info);
            }
            _ => top.push(info),
        }
    }
    let mut ordered = Vec::new();
    let mut stack: Vec<(usize, SessionInfo)> = top.into_iter().rev().map(|s| (0, s)).collect();
    while let Some((depth, info)) = stack.pop() {
        if let Some(mut kids) = children.remove(&info.id) {
            // Children in the order they were started, under their parent.
            kids.sort_by_key(|k| std::cmp::Reverse(k.created_ms));
            stack.extend(kids.into_iter().map(|k| (depth + 1, k)));
        }
        ordered.push((depth, info));
    }
    ordered
}

fn list(
    store: &dyn SessionStore,
    workspace: Option<&str>,
    json: bool,
    all: bool,
) -> Result<(), Failure> {
    let mut filter = SessionFilter::new();
    if let Some(workspace) = workspace {
        filter = filter.workspace(workspace);
    }
    let sessions = if workspace.is_some() && !all {
        // A child session recorded in another directory (its own worktree) is still listed
        // under its parent.
        with_children(store, store.list_where(&filter)?)?
    } else {
        store.list_where(&filter)?
    };
    let ordered = in_list_order(sessions, all);
    if json {
        let sessions: Vec<SessionInfo> = ordered.iter().map(|(_, s)| s.clone()).collect();
        return list_json(&sessions);
    }
    list_table(store, workspace, &ordered)
}

/// `sessions` and the descendants of each that are not among them.
fn with_children(
    store: &dyn SessionStore,
    mut sessions: Vec<SessionInfo>,
) -> Result<Vec<SessionInfo>, Failure> {
    let mut i = 0;
    while i < sessions.len() {
        for child in store.children(&sessions[i].id)? {
            if !sessions.iter().any(|s| s.id == child.id) {
                sessions.push(child);
            }
        }
        i += 1;
    }
    Ok(sessions)
}

/// `sessions list --json`: one object per session, in listing order.
fn list_json(sessions: &[SessionInfo]) -> Result<(), Failure> {
    let mut text = String::new();
    for info in sessions {
        let mut value = serde_json::to_value(info)
            .map_err(|e| Failure::new(format!("cannot serialize a session: {e}")))?;
        if let serde_json::Value::Object(map) = &mut value {
            // Kept from before `stats` existed: the summed usage.
            let usage = serde_json::to_value(info.stats.usage)
                .map_err(|e| Failure::new(format!("cannot serialize a session: {e}")))?;
            map.insert("usage".into(), usage);
        }
        text.push_str(&value.to_string());
        text.push('\n');
    }
    out(&text);
    Ok(())
}

/// The `sessions list` table; a child session's id is indented under its parent.
fn list_table(
    store: &dyn SessionStore,
    workspace: Option<&str>,
    ordered: &[(usize, SessionInfo)],
) -> Result<(), Failure> {
    if ordered.is_empty() {
        match workspace {
            Some(dir) => eprintln!("no sessions in {}", visible_line(dir)),
            None => eprintln!("no sessions yet"),
        }
        return Ok(());
    }
    // Ids abbreviated to a prefix unique among all sessions (not only the listed ones), so any
    // id shown works as an argument.
    let all_ids: Vec<String> = match workspace {
        Some(_) => store.list()?.into_iter().map(|s| s.id).collect(),
        None => ordered.iter().map(|(_, s)| s.id.clone()).collect(),
    };
    let short = unique_prefixes(&all_ids, SHORT_ID);
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let rows: Vec<[String; 8]> = ordered
        .iter()
        .map(|(depth, info)| table_row(*depth, info, &short, home.as_deref()))
        .collect();
    out(&aligned(rows));
    Ok(())
}

/// One session's row of the `sessions list` table (`depth`: how far it is nested).
fn table_row(
    depth: usize,
    info: &SessionInfo,
    short: &std::collections::HashMap<&str, &str>,
    home: Option<&Path>,
) -> [String; 8] {
    let id = short
        .get(info.id.as_str())
        .copied()
        .unwrap_or(info.id.as_str());
    let model = info.settings.model.as_deref().or(info.model.as_deref());
    let title = match &info.parent {
        Some(parent) => format!(
            "[{}] {}",
            parent.agent,
            info.title.as_deref().unwrap_or("(untitled)")
        ),
        None => info.title.as_deref().unwrap_or("(untitled)").to_owned(),
    };
    [
        format!("{}{}", "  ".repeat(depth), visible_line(id)),
        format_time(info.updated_ms),
        info.settings
            .workspace
            .as_deref()
            .map_or_else(|| "-".to_owned(), |w| short_workspace(w, home)),
        one_line(model.unwrap_or("-"), 24),
        info.stats.turns.to_string(),
        thousands(info.stats.total_tokens()),
        info.stats
            .usage
            .cost_usd
            .map_or_else(|| "-".to_owned(), |c| format!("${c:.4}")),
        one_line(&title, 60),
    ]
}

/// The table's text: the header, then `rows`, in columns as wide as their widest cell.
fn aligned(rows: Vec<[String; 8]>) -> String {
    let header = [
        "ID",
        "UPDATED (UTC)",
        "WORKSPACE",
        "MODEL",
        "TURNS",
        "TOKENS",
        "COST",
        "TITLE",
    ]
    .map(str::to_owned);
    let mut widths = [0usize; 8];
    for row in std::iter::once(&header).chain(&rows) {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut text = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            let pad = width.saturating_sub(cell.chars().count());
            match i {
                // Numbers are right-aligned; the title (last) is not padded.
                4..=6 => line.push_str(&format!("{}{cell}  ", " ".repeat(pad))),
                7 => line.push_str(cell),
                _ => line.push_str(&format!("{cell}{}  ", " ".repeat(pad))),
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// The shortest id prefix shown by `sessions list`.
const SHORT_ID: usize = 8;

/// For each id, its shortest prefix of at least `min` characters that no other id starts
/// with (the whole id when none is shorter).
fn unique_prefixes(ids: &[String], min: usize) -> std::collections::HashMap<&str, &str> {
    let mut sorted: Vec<&str> = ids.iter().map(String::as_str).collect();
    sorted.sort_unstable();
    sorted.dedup();
    let common = |a: &str, b: &str| a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let mut out = std::collections::HashMap::new();
    for (i, id) in sorted.iter().enumerate() {
        let before = i.checked_sub(1).map_or(0, |j| common(sorted[j], id));
        let after = sorted.get(i + 1).map_or(0, |next| common(next, id));
        let chars = min.max(before.max(after) + 1);
        let end = id.char_indices().nth(chars).map_or(id.len(), |(at, _)| at);
        out.insert(*id, &id[..end]);
    }
    out
}

/// The longest workspace shown by `sessions list`, in characters.
const WORKSPACE_WIDTH: usize = 32;

/// A workspace path for the list: the home directory as `~`, and a long path cut to its last
/// components after `…/`.
fn short_workspace(path: &str, home: Option<&Path>) -> String {
    let home = home.map(|h| h.to_string_lossy().into_owned());
    let path = match home.as_deref() {
        Some(home) if !home.is_empty() && home != "/" && path == home => "~".to_owned(),
        Some(home) if !home.is_empty() && home != "/" => match path.strip_prefix(home) {
            Some(rest) if rest.starts_with('/') => format!("~{rest}"),
            _ => path.to_owned(),
        },
        _ => path.to_owned(),
    };
    let path = visible_line(&path);
    if path.chars().count() <= WORKSPACE_WIDTH {
        return path;
    }
    let mut kept = String::new();
    for part in path.rsplit('/') {
        let grown = if kept.is_empty() {
            part.to_owned()
        } else {
            format!("{part}/{kept}")
        };
        if grown.chars().count() + 2 > WORKSPACE_WIDTH && !kept.is_empty() {
            break;
        }
        kept = grown;
    }
    if kept.chars().count() + 2 > WORKSPACE_WIDTH {
        let tail: Vec<char> = kept.chars().collect();
        kept = tail[tail.len().saturating_sub(WORKSPACE_WIDTH - 1)..]
            .iter()
            .collect();
        return format!("…{kept}");
    }
    format!("…/{kept}")
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
        "session {} · {} · {} messages · model {} · workspace {} · updated {}",
        visible_line(&info.id),
        visible_line(info.title.as_deref().unwrap_or("(untitled)")),
        info.message_count,
        visible_line(info.model.as_deref().unwrap_or("-")),
        visible_line(info.settings.workspace.as_deref().unwrap_or("-")),
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
    use agentloop::session::{NewSession, SqliteStore};

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
        store.create(NewSession::new().id("ab")).unwrap();
        assert_eq!(resolve_id(&store, "abc-1").unwrap(), "abc-1");
        assert_eq!(resolve_id(&store, "abd").unwrap(), "abd-2");
        // The exact id wins over the sessions it is a prefix of.
        assert_eq!(resolve_id(&store, "ab").unwrap(), "ab");
        let ambiguous = resolve_id(&store, "a").unwrap_err().to_string();
        assert!(ambiguous.contains("3 sessions"), "{ambiguous}");
        assert!(ambiguous.contains("abc-1") && ambiguous.contains("abd-2"));
        assert!(resolve_id(&store, "zz").is_err());
        assert!(resolve_id(&store, "").is_err());
    }

    #[test]
    fn only_names_create_sessions_on_a_miss() {
        let store = SqliteStore::open_in_memory().unwrap();
        store.create(NewSession::new().id("3f2a-1")).unwrap();
        assert_eq!(for_run(&store, "3f2", false).unwrap().unwrap().id, "3f2a-1");
        assert!(for_run(&store, "fix-login", false).unwrap().is_none());
        assert!(for_run(&store, "0e4b-77", false).is_err());
        assert!(for_run(&store, "0e4b-77", true).unwrap().is_none());
        assert!(for_run(&store, "3f2", true).unwrap().is_none());
    }

    #[test]
    fn ids_are_shortened_to_unique_prefixes() {
        let ids: Vec<String> = ["0123456789ab", "0123456789cd", "fffffffffff0", "s"]
            .map(str::to_owned)
            .into();
        let short = unique_prefixes(&ids, 8);
        assert_eq!(short["0123456789ab"], "0123456789a");
        assert_eq!(short["0123456789cd"], "0123456789c");
        assert_eq!(short["fffffffffff0"], "ffffffff");
        assert_eq!(short["s"], "s");
    }

    #[test]
    fn workspaces_are_shortened() {
        let home = Path::new("/home/me");
        assert_eq!(short_workspace("/home/me/proj", Some(home)), "~/proj");
        assert_eq!(short_workspace("/home/me", Some(home)), "~");
        assert_eq!(short_workspace("/home/meow/x", Some(home)), "/home/meow/x");
        let long = "/srv/builds/very/long/path/to/the/project-name";
        let shown = short_workspace(long, None);
        assert!(
            shown.starts_with("…/") && shown.ends_with("/the/project-name"),
            "{shown}"
        );
        assert!(shown.chars().count() <= WORKSPACE_WIDTH);
        let one = format!("/{}", "x".repeat(50));
        assert!(short_workspace(&one, None).chars().count() <= WORKSPACE_WIDTH);
    }
}
