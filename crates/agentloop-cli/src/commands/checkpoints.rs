//! Workspace checkpoints in the CLI: the recorder a run plugs into its loop (on unless
//! `--no-checkpoints`), and `agentloop checkpoints`, `rewind` and `diff`.
//!
//! The checkpoints live in the data directory (`$XDG_DATA_HOME/agentloop/checkpoints/`, else
//! `~/.local/share/agentloop/checkpoints/`), never in the workspace; the engine is the
//! library's `agentloop::checkpoint`. A rewind puts files back and forks the conversation just
//! before the call's reply, so the fork continues from there.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentloop::checkpoint::{
    Change, Checkpoint, CheckpointOptions, CheckpointStore, Entry, EntryKind, GarbageReport,
    Recorder, RewindOptions, RewindReport,
};
use agentloop::session::{SessionInfo, SessionStore};
use clap::Args;

use crate::commands::sessions::{
    default_db_path, last_local_in, open_store, resolve, workspace_key,
};
use crate::error::Failure;
use crate::ui::render::out;
use crate::ui::safe_text::visible_line;

/// `agentloop checkpoints`.
#[derive(Args, Debug)]
pub struct CheckpointsArgs {
    /// Session id or unique prefix (default: the last session of the workspace).
    pub session: Option<String>,
    /// The workspace whose last session is meant (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// One JSON object per line: `id`, `turn`, `tool`, `call_id`, `files`.
    #[arg(long)]
    pub json: bool,
    /// Instead of listing: delete the stored file contents (blobs) that no session's
    /// checkpoints and no workspace's stat cache refer to any more (`sessions rm` does this
    /// too). Nothing is deleted while a run is recording checkpoints.
    #[arg(long, conflicts_with_all = ["session", "workspace", "json"])]
    pub prune: bool,
}

/// `agentloop rewind`.
#[derive(Args, Debug)]
pub struct RewindArgs {
    /// Session id or unique prefix (default: the last session of the workspace).
    pub session: Option<String>,
    /// The checkpoint to go back to (its id in `agentloop checkpoints`): the state before
    /// that tool call.
    #[arg(long, value_name = "ID")]
    pub to: String,
    /// The workspace whose last session is meant (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Put the files back, but do not fork the conversation.
    #[arg(long, conflicts_with = "conversation_only")]
    pub files_only: bool,
    /// Fork the conversation, but leave the files as they are.
    #[arg(long)]
    pub conversation_only: bool,
    /// Also put back files changed since the agent's last change to them (someone else's
    /// work, otherwise skipped with a warning).
    #[arg(long)]
    pub force: bool,
}

/// `agentloop diff`.
#[derive(Args, Debug)]
pub struct DiffArgs {
    /// Session id or unique prefix (default: the last session of the workspace).
    pub session: Option<String>,
    /// The workspace whose last session is meant (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
}

/// The checkpoint store in the user's data directory.
pub fn store() -> Result<CheckpointStore, Failure> {
    let db = default_db_path()?;
    let dir = db
        .parent()
        .map(|p| p.join("checkpoints"))
        .ok_or_else(|| Failure::new("cannot find a data directory for checkpoints"))?;
    CheckpointStore::open(&dir).map_err(|e| Failure::new(format!("checkpoints: {e}")))
}

/// Whether a call of `tool` may change the workspace: the built-in mutating tools, `task`
/// (its agents have them), and other tools the classifier (MCP annotations) calls mutating.
pub fn is_mutating(
    classifier: agentloop::builtin::ToolClassifier,
) -> impl Fn(&str) -> bool + Send + Sync + 'static {
    move |tool: &str| {
        classifier(tool)
            .unwrap_or_else(|| agentloop::builtin::MUTATING_TOOLS.contains(&tool) || tool == "task")
    }
}

/// The recorder of a run of `session` in `root`, or `None` (said once on stderr) when the
/// store cannot be used — a run is not refused for want of checkpoints.
pub fn recorder(
    sessions: &dyn SessionStore,
    session: &str,
    root: &std::path::Path,
) -> Option<Arc<Recorder>> {
    let made = store().and_then(|s| {
        s.recorder(root, session, CheckpointOptions::default())
            .map_err(|e| Failure::new(e.to_string()))
    });
    match made {
        Ok(recorder) => {
            // Turns are numbered over the whole session: later runs continue the count.
            let replies = sessions
                .info(session)
                .map_or(0, |i| i.stats.turns + i.stats.failed_turns);
            recorder.set_turn(u32::try_from(replies).unwrap_or(u32::MAX).saturating_add(1));
            Some(Arc::new(recorder))
        }
        Err(e) => {
            eprintln!("agentloop: warning: running without checkpoints: {e}");
            None
        }
    }
}

/// Follows the run's turns (the recorder numbers checkpoints with them); `base` is the number
/// of replies the session had before the run.
pub fn on_turn(recorder: &Recorder, base: u32, event: &agentloop::agent::AgentEvent) {
    if let agentloop::agent::AgentEvent::TurnStart { turn } = event {
        recorder.set_turn(base.saturating_add(*turn));
    }
}

/// Ends a run's recording: the last snapshot, then any error met on the way, once, on stderr.
pub fn seal(recorder: &Recorder) {
    recorder.seal();
    let errors = recorder.take_errors();
    if let Some(first) = errors.first() {
        eprintln!(
            "agentloop: warning: checkpoints may be incomplete ({} error(s)): {}",
            errors.len(),
            visible_line(first)
        );
    }
}

/// The session a command means: the one given (id or unique prefix), else the last session
/// of the workspace (as `--continue` picks it).
fn session_of(
    sessions: &dyn SessionStore,
    given: Option<&str>,
    workspace: Option<&PathBuf>,
) -> Result<SessionInfo, Failure> {
    if let Some(given) = given {
        return resolve(sessions, given);
    }
    let dir = match workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let key = workspace_key(&dir)?;
    last_local_in(sessions, &key)?.ok_or_else(|| {
        Failure::new(format!(
            "no session recorded in {}; name one (`agentloop sessions list` shows them)",
            visible_line(&key)
        ))
    })
}

fn store_error(e: agentloop::checkpoint::CheckpointError) -> Failure {
    Failure::new(format!("checkpoints: {}", visible_line(&e.to_string())))
}

/// The checkpoints of `session` as text, one line each (empty when none).
pub fn listing(session: &str) -> Result<String, Failure> {
    let checkpoints = store()?.list(session).map_err(store_error)?;
    Ok(checkpoints
        .iter()
        .map(|c| format!("{}\n", text_line(c)))
        .collect())
}

/// Deletes `session`'s checkpoint log (when the session is deleted); its blobs go with the
/// next [`collect_garbage`].
pub fn forget(session: &str) -> Result<(), Failure> {
    store()?.remove_session(session).map_err(store_error)
}

/// Deletes the blobs no checkpoint log refers to any more (after sessions were deleted); a
/// failure or a running recorder is a warning: the blobs go next time.
pub fn collect_garbage() {
    match store().and_then(|s| s.collect_garbage().map_err(store_error)) {
        Ok(report) if report.busy => eprintln!("agentloop: {}", garbage_line(&report)),
        Ok(_) => {}
        Err(e) => eprintln!("agentloop: warning: checkpoint blobs not collected: {e}"),
    }
}

/// What a collection did, in one line.
fn garbage_line(report: &GarbageReport) -> String {
    if report.busy {
        return "a run is recording checkpoints: no stored contents were deleted (run \
                `agentloop checkpoints --prune` later)"
            .to_owned();
    }
    format!(
        "deleted {} stored file content(s) ({} bytes) no checkpoint refers to; {} kept",
        report.deleted, report.freed_bytes, report.kept
    )
}

/// Rewinds files and conversation of `info` (whose lock the caller holds) to before
/// checkpoint `given`; returns the fork to continue in.
pub fn rewind_session(
    sessions: &dyn SessionStore,
    info: &SessionInfo,
    given: &str,
) -> Result<SessionInfo, Failure> {
    let id = parse_id(given)?;
    let checkpoints = store()?;
    let checkpoint = find(&checkpoints, &info.id, id)?;
    let seq = fork_point(sessions, info, &checkpoint)?;
    let report = checkpoints
        .rewind(&info.id, id, &RewindOptions::default())
        .map_err(store_error)?;
    print_rewind(&report, false);
    let fork = sessions.fork(&info.id, seq)?;
    checkpoints
        .copy_before(&info.id, &fork.id, id)
        .map_err(store_error)?;
    Ok(fork)
}

fn parse_id(given: &str) -> Result<u64, Failure> {
    given.trim().parse().map_err(|_| {
        Failure::usage(format!(
            "{} is not a checkpoint id (`agentloop checkpoints` lists them)",
            visible_line(given)
        ))
    })
}

fn find(checkpoints: &CheckpointStore, session: &str, id: u64) -> Result<Checkpoint, Failure> {
    checkpoints
        .list(session)
        .map_err(store_error)?
        .into_iter()
        .find(|c| c.id == id)
        .ok_or_else(|| {
            Failure::new(format!(
                "session {} has no checkpoint {id} (`agentloop checkpoints` lists them)",
                visible_line(session)
            ))
        })
}

/// `agentloop checkpoints`.
pub fn list(db: Option<&str>, args: CheckpointsArgs) -> Result<(), Failure> {
    if args.prune {
        let report = store()?.collect_garbage().map_err(store_error)?;
        out(&format!("{}\n", garbage_line(&report)));
        return Ok(());
    }
    let sessions = open_store(db)?;
    let info = session_of(&*sessions, args.session.as_deref(), args.workspace.as_ref())?;
    let checkpoints = store()?.list(&info.id).map_err(store_error)?;
    let mut text = String::new();
    for checkpoint in &checkpoints {
        if args.json {
            text.push_str(&json_line(checkpoint));
        } else {
            text.push_str(&text_line(checkpoint));
        }
        text.push('\n');
    }
    if checkpoints.is_empty() && !args.json {
        eprintln!(
            "agentloop: session {} has no checkpoints",
            visible_line(&info.id)
        );
    }
    out(&text);
    Ok(())
}

fn json_line(checkpoint: &Checkpoint) -> String {
    serde_json::json!({
        "id": checkpoint.id,
        "turn": checkpoint.turn,
        "tool": checkpoint.tool,
        "call_id": checkpoint.call_id,
        "files": checkpoint.files(),
    })
    .to_string()
}

/// `  3  turn 2  shell        2 files: src/a.rs, src/b.rs`
fn text_line(checkpoint: &Checkpoint) -> String {
    let files = checkpoint.files();
    const SHOWN: usize = 5;
    let mut names: Vec<String> = files.iter().take(SHOWN).map(|f| visible_line(f)).collect();
    if files.len() > SHOWN {
        names.push(format!("… {} more", files.len() - SHOWN));
    }
    let count = match files.len() {
        1 => "1 file".to_owned(),
        n => format!("{n} files"),
    };
    let listed = if names.is_empty() {
        String::new()
    } else {
        format!(": {}", names.join(", "))
    };
    format!(
        "{:>3}  turn {:<3} {:<12} {count}{listed}",
        checkpoint.id,
        checkpoint.turn,
        visible_line(&checkpoint.tool)
    )
}

/// `agentloop rewind`.
pub fn rewind(db: Option<&str>, args: RewindArgs) -> Result<(), Failure> {
    let sessions = open_store(db)?;
    let info = session_of(&*sessions, args.session.as_deref(), args.workspace.as_ref())?;
    let id = parse_id(&args.to)?;
    let checkpoints = store()?;
    let checkpoint = find(&checkpoints, &info.id, id)?;
    // No run may write the session (or its files) meanwhile.
    let _lock = sessions.lock_session(&info.id, Duration::from_secs(2))?;
    // Checked before any file is touched.
    let seq = match args.files_only {
        true => None,
        false => Some(fork_point(&*sessions, &info, &checkpoint)?),
    };
    if !args.conversation_only {
        let report = checkpoints
            .rewind(&info.id, id, &RewindOptions::default().force(args.force))
            .map_err(store_error)?;
        print_rewind(&report, args.force);
    }
    if let Some(seq) = seq {
        let fork = sessions.fork(&info.id, seq)?;
        checkpoints
            .copy_before(&info.id, &fork.id, id)
            .map_err(store_error)?;
        out(&format!(
            "forked the conversation before checkpoint {id} into session {} (continue it with \
             `agentloop chat --session {}`)\n",
            visible_line(&fork.id),
            visible_line(&fork.id)
        ));
    }
    Ok(())
}

/// Reports a rewind: each restored path on stdout, each skipped one as a warning.
pub fn print_rewind(report: &RewindReport, forced: bool) {
    let mut text = String::new();
    for path in &report.restored {
        text.push_str(&format!("restored {}\n", visible_line(path)));
    }
    for skipped in &report.skipped {
        let hint = if forced {
            ""
        } else {
            " (--force restores it anyway)"
        };
        eprintln!(
            "agentloop: warning: skipped {}: {}{hint}",
            visible_line(&skipped.path),
            skipped.reason
        );
    }
    text.push_str(&format!(
        "{} file(s) restored, {} skipped\n",
        report.restored.len(),
        report.skipped.len()
    ));
    out(&text);
}

/// Where to fork `info` for `checkpoint`: just before the reply that made its call, so the
/// fork ends where the model was about to answer and a new prompt continues it from there.
fn fork_point(
    sessions: &dyn SessionStore,
    info: &SessionInfo,
    checkpoint: &Checkpoint,
) -> Result<u64, Failure> {
    let entries = sessions.entries(&info.id)?;
    let reply = entries
        .iter()
        .find(|e| e.message.tool_calls().any(|c| c.id == checkpoint.call_id))
        .ok_or_else(|| {
            Failure::new(format!(
                "the conversation of session {} has no tool call {}; the files can still be \
                 rewound with --files-only",
                visible_line(&info.id),
                visible_line(&checkpoint.call_id)
            ))
        })?;
    Ok(reply.seq.saturating_sub(1))
}

/// `agentloop diff`.
pub fn diff(db: Option<&str>, args: DiffArgs) -> Result<(), Failure> {
    let sessions = open_store(db)?;
    let info = session_of(&*sessions, args.session.as_deref(), args.workspace.as_ref())?;
    let text = session_diff(&store()?, &info.id)?;
    out(&text);
    Ok(())
}

/// What session `id` changed, as text: a unified diff per text file, one line for each other
/// change (binary or too large to have been copied, symbolic link, directory, mode); empty
/// when nothing.
pub fn session_diff(checkpoints: &CheckpointStore, id: &str) -> Result<String, Failure> {
    let changes = checkpoints.session_changes(id).map_err(store_error)?;
    let mut text = String::new();
    for change in &changes {
        text.push_str(&describe_change(checkpoints, change)?);
    }
    Ok(text)
}

/// The content of a file entry, `None` for anything else.
fn content(
    checkpoints: &CheckpointStore,
    entry: Option<&Entry>,
) -> Result<Option<Vec<u8>>, Failure> {
    match entry {
        Some(e) if e.kind == EntryKind::File => {
            let hash = e.hash.as_deref().unwrap_or_default();
            Ok(Some(checkpoints.read_blob(hash).map_err(store_error)?))
        }
        _ => Ok(None),
    }
}

fn kind_name(entry: Option<&Entry>) -> String {
    match entry {
        None => "absent".into(),
        Some(e) => match e.kind {
            EntryKind::File => format!("file (mode {:o})", e.mode),
            EntryKind::Symlink => format!(
                "symbolic link to {}",
                visible_line(e.target.as_deref().unwrap_or_default())
            ),
            EntryKind::Dir => "directory".into(),
            _ => format!("file of {} bytes, too large to have been copied", e.size),
        },
    }
}

fn describe_change(checkpoints: &CheckpointStore, change: &Change) -> Result<String, Failure> {
    let path = visible_line(&change.path);
    let (before, after) = (change.before.as_ref(), change.after.as_ref());
    let old = content(checkpoints, before)?;
    let new = content(checkpoints, after)?;
    let text_of = |bytes: &Option<Vec<u8>>| match bytes {
        None => Some(String::new()),
        Some(b) if b.contains(&0) => None,
        Some(b) => String::from_utf8(b.clone()).ok(),
    };
    let plain = |e: Option<&Entry>| e.is_none_or(|e| e.kind == EntryKind::File);
    let mut out = String::new();
    if let (true, true, Some(old_text), Some(new_text)) =
        (plain(before), plain(after), text_of(&old), text_of(&new))
    {
        let (a, b) = (
            if before.is_some() {
                format!("a/{path}")
            } else {
                "/dev/null".into()
            },
            if after.is_some() {
                format!("b/{path}")
            } else {
                "/dev/null".into()
            },
        );
        let diff = similar::TextDiff::from_lines(&old_text, &new_text);
        out.push_str(&diff.unified_diff().header(&a, &b).to_string());
        if let (Some(x), Some(y)) = (before, after) {
            if x.mode != y.mode {
                out.push_str(&format!("mode of {path}: {:o} → {:o}\n", x.mode, y.mode));
            }
        }
        return Ok(out);
    }
    let binary = old.is_some() || new.is_some();
    let what = if binary && before.map(|e| e.kind) == after.map(|e| e.kind) {
        "binary file changed".to_owned()
    } else {
        format!("{} → {}", kind_name(before), kind_name(after))
    };
    out.push_str(&format!("{path}: {what}\n"));
    Ok(out)
}
