//! Isolated workspaces for sub-agents whose file says `isolation: worktree`, and the
//! `agentloop worktrees list|prune` commands.
//!
//! In a git repository, each such `task` call gets a git worktree of its own, on a branch of its
//! own (`agentloop/<agent>-<id>`, from the parent's `HEAD`), created under the data directory
//! (`$XDG_DATA_HOME/agentloop/worktrees/<id>`, else `~/.local/share/agentloop/worktrees/<id>`),
//! never inside the repository. Outside git the child gets a plain copy of the workspace there
//! (without `.git` directories). The child's file tools and its shell sandbox are confined to
//! that directory (see `config/agents.rs`), so it can write neither the parent's checkout nor another
//! child's. When the child ends, its changes are committed on its branch (a copy is compared
//! with the workspace instead), and the `task` result names the branch and the diff stat.
//!
//! Git is always driven through the `git` binary. Next to each worktree a small JSON record
//! (`<id>.json`) keeps what `list` and `prune` need; finished children's worktrees stay until
//! `agentloop worktrees prune` removes them (their branches stay: they hold the work).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::Failure;
use crate::ui::render::out;
use crate::ui::safe_text::visible_line;

/// The directory isolated workspaces are created in.
pub fn root() -> Result<PathBuf, String> {
    let dir = crate::config::data_dir::data_dir()
        .ok_or("no data directory (set XDG_DATA_HOME or HOME) for isolated workspaces")?;
    Ok(dir.join("worktrees"))
}

/// What is kept about one isolated workspace (`<id>.json` beside it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Its id (also its directory's name).
    pub id: String,
    /// The sub-agent it was made for.
    pub agent: String,
    /// The worktree or copy.
    pub path: PathBuf,
    /// The directory the child works in (inside `path`: the parent's workspace may be a
    /// subdirectory of its repository).
    pub workdir: PathBuf,
    /// The parent's workspace.
    pub source: PathBuf,
    /// The repository's top-level directory (`None`: a plain copy).
    pub repo: Option<PathBuf>,
    /// The child's branch (git only).
    pub branch: Option<String>,
    /// The commit the branch started from (git only).
    pub base: Option<String>,
    /// When it was created (milliseconds since the epoch).
    pub created_ms: u64,
    /// The process running the child.
    pub pid: u32,
    /// The child has ended.
    pub finished: bool,
}

impl Record {
    fn file(dir: &Path, id: &str) -> PathBuf {
        dir.join(format!("{id}.json"))
    }

    fn save(&self, dir: &Path) -> Result<(), String> {
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(Record::file(dir, &self.id), text)
            .map_err(|e| format!("cannot write the record of worktree {}: {e}", self.id))
    }

    /// Whether it may be removed: its child ended, or the process that ran it is gone.
    fn idle(&self) -> bool {
        self.finished || !process_alive(self.pid)
    }
}

fn process_alive(pid: u32) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    match rustix::process::Pid::from_raw(pid) {
        Some(pid) => rustix::process::test_kill_process(pid).is_ok(),
        None => false,
    }
}

/// Serializes this process's repository-changing git commands (see [`create`]).
static GIT_TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs `git ARGS` in `dir`; its trimmed stdout, or the first line of its error.
fn git(dir: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("failed");
    Err(format!(
        "git {}: {}",
        args.first().unwrap_or(&""),
        line.trim()
    ))
}

/// A short random id: the agent's name and 8 hex digits.
fn new_id(agent: &str) -> String {
    let mut bytes = [0u8; 4];
    if getrandom(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        bytes = (nanos ^ std::process::id()).to_le_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{agent}-{hex}")
}

fn getrandom(bytes: &mut [u8]) -> std::io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(bytes)
}

/// The isolated workspace whose child works in `workdir`, when it still exists: a call run again
/// after its process died goes on in the worktree the first run left.
pub fn reopen(workdir: &Path) -> Option<Record> {
    let dir = root().ok()?;
    let mut record = records()
        .ok()?
        .into_iter()
        .find(|r| r.workdir == workdir && r.path.is_dir())?;
    record.finished = false;
    record.pid = std::process::id();
    record.save(&dir).ok()?;
    Some(record)
}

/// Creates the isolated workspace of one call of sub-agent `agent`, for the parent's
/// workspace `source`: a git worktree on a new branch, or a plain copy outside git.
pub fn create(source: &Path, agent: &str) -> Result<Record, String> {
    // Parallel calls in one repository: git's own locks (refs, the worktree list) would make
    // one of two simultaneous `worktree add`s fail; take turns instead.
    let _turn = GIT_TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let dir = root()?;
    create_private_dir(&dir)?;
    let source = std::fs::canonicalize(source).map_err(|e| e.to_string())?;
    let id = new_id(agent);
    let path = dir.join(&id);
    let top = git(&source, &["rev-parse", "--show-toplevel"])
        .ok()
        .map(PathBuf::from)
        .and_then(|top| std::fs::canonicalize(top).ok());
    let head = top
        .as_ref()
        .and_then(|top| git(top, &["rev-parse", "--verify", "-q", "HEAD"]).ok());
    let mut record = Record {
        id: id.clone(),
        agent: agent.to_owned(),
        workdir: path.clone(),
        path: path.clone(),
        source: source.clone(),
        repo: None,
        branch: None,
        base: None,
        created_ms: agentloop::transcript::now_ms(),
        pid: std::process::id(),
        finished: false,
    };
    match (top, head) {
        (Some(top), Some(head)) => {
            let branch = format!("agentloop/{id}");
            let path_text = path.to_string_lossy().into_owned();
            git(
                &top,
                &["worktree", "add", "-q", "-b", &branch, &path_text, &head],
            )?;
            let inside = source.strip_prefix(&top).unwrap_or(Path::new(""));
            record.workdir = path.join(inside);
            std::fs::create_dir_all(&record.workdir).map_err(|e| e.to_string())?;
            record.repo = Some(top);
            record.branch = Some(branch);
            record.base = Some(head);
        }
        // Outside git (or in a repository without a commit yet): a plain copy.
        _ => copy_tree(&source, &path)
            .map_err(|e| format!("cannot copy the workspace to {}: {e}", path.display()))?,
    }
    record.save(&dir)?;
    Ok(record)
}

fn create_private_dir(dir: &Path) -> Result<(), String> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

/// Copies `from` into the new directory `to`: files, directories and symbolic links (as links),
/// without `.git` directories.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            if entry.file_name() != ".git" {
                copy_tree(&entry.path(), &target)?;
            }
        } else if kind.is_symlink() {
            #[cfg(unix)]
            std::os::unix::fs::symlink(std::fs::read_link(entry.path())?, &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}

/// The private temporary directory of the child's shell commands.
pub fn temp_dir(record: &Record) -> Result<PathBuf, String> {
    let dir = root()?.join(format!("{}.tmp", record.id));
    create_private_dir(&dir)?;
    Ok(dir)
}

/// Ends the child's use of its workspace: commits its changes on its branch (git) and marks
/// the record finished. Returns the lines the `task` result ends with: where the work is, and
/// its diff stat.
pub fn finish(record: &mut Record, task: &str) -> String {
    record.finished = true;
    if let Ok(dir) = root() {
        let _ = record.save(&dir);
    }
    let _ = std::fs::remove_dir_all(
        root()
            .map(|r| r.join(format!("{}.tmp", record.id)))
            .unwrap_or_default(),
    );
    match (&record.branch, &record.base) {
        (Some(branch), Some(base)) => {
            let stat = commit(&record.path, &record.agent, task)
                .and_then(|()| git(&record.path, &["diff", "--stat", base, "HEAD"]));
            let stat = match stat {
                Ok(stat) if stat.is_empty() => "no changes".to_owned(),
                Ok(stat) => stat,
                Err(e) => format!("(no diff stat: {e})"),
            };
            format!(
                "[isolated worktree] branch {branch} at {} (from {}). Diff stat:\n{stat}",
                record.path.display(),
                &base[..base.len().min(12)]
            )
        }
        _ => {
            let stat = copy_stat(&record.source, &record.workdir);
            format!(
                "[isolated copy] {} (a copy of {}). Diff stat:\n{stat}",
                record.workdir.display(),
                record.source.display()
            )
        }
    }
}

/// Commits everything the child changed in its worktree (no hooks run; a default identity
/// when git has none).
fn commit(path: &Path, agent: &str, task: &str) -> Result<(), String> {
    let _turn = GIT_TURN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    git(path, &["add", "-A"])?;
    if git(path, &["status", "--porcelain"])?.is_empty() {
        return Ok(());
    }
    let first_line: String = task.lines().next().unwrap_or("").chars().take(72).collect();
    let message = format!("agentloop: work of sub-agent {agent}\n\nTask: {first_line}");
    let mut args = Vec::new();
    if git(path, &["var", "GIT_COMMITTER_IDENT"]).is_err()
        || git(path, &["var", "GIT_AUTHOR_IDENT"]).is_err()
    {
        args.extend([
            "-c",
            "user.name=agentloop",
            "-c",
            "user.email=agentloop@localhost",
        ]);
    }
    args.extend(["commit", "-q", "--no-verify", "-m", &message]);
    git(path, &args).map(drop)
}

/// The diff stat between the workspace and its copy (`git diff --no-index --stat`).
fn copy_stat(source: &Path, copy: &Path) -> String {
    let out = Command::new("git")
        .args(["diff", "--no-index", "--stat", "--"])
        .arg(source)
        .arg(copy)
        .output();
    match out {
        // Exit 1: there are differences.
        Ok(out) if out.status.code().is_some_and(|c| c <= 1) => {
            let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            if text.is_empty() {
                "no changes".to_owned()
            } else {
                text
            }
        }
        Ok(out) => format!(
            "(no diff stat: {})",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .next()
                .unwrap_or("git failed")
        ),
        Err(e) => format!("(no diff stat: cannot run git: {e})"),
    }
}

/// Every record, oldest first.
fn records() -> Result<Vec<Record>, Failure> {
    let dir = root().map_err(Failure::new)?;
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Ok(Vec::new());
    };
    let mut found: Vec<Record> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .filter_map(|text| serde_json::from_str(&text).ok())
        .collect();
    found.sort_by_key(|r: &Record| r.created_ms);
    Ok(found)
}

/// `agentloop worktrees list`.
pub fn list(json: bool) -> Result<(), Failure> {
    let mut text = String::new();
    for record in records()? {
        if json {
            let value = serde_json::to_value(&record)
                .map_err(|e| Failure::new(format!("cannot serialize a worktree: {e}")))?;
            text.push_str(&value.to_string());
        } else {
            let state = if record.finished {
                "finished"
            } else if record.idle() {
                "stopped"
            } else {
                "running"
            };
            text.push_str(&format!(
                "{}  {}  {}  {}  {}",
                visible_line(&record.id),
                crate::commands::sessions::format_time(record.created_ms),
                state,
                visible_line(record.branch.as_deref().unwrap_or("(copy)")),
                visible_line(&record.path.to_string_lossy())
            ));
        }
        text.push('\n');
    }
    if text.is_empty() && !json {
        eprintln!("no isolated worktrees");
    }
    out(&text);
    Ok(())
}

/// `agentloop worktrees prune [--older-than DURATION]`: removes the worktrees (and copies) of
/// children that ended — older than the duration, when one is given. Branches are kept.
pub fn prune(older_than: Option<Duration>) -> Result<(), Failure> {
    let removed = prune_finished(older_than)?;
    for line in &removed {
        out(&format!("{line}\n"));
    }
    if removed.is_empty() {
        eprintln!("nothing to prune");
    }
    Ok(())
}

/// Removes the worktrees of children that ended longer ago than `prune_after`, the configured
/// `[worktrees] prune_after` (see [`crate::config::files::WorktreesTable`]), when one is set;
/// says on stderr what it removed. A failure to prune is a warning: the run goes on.
pub fn prune_expired(prune_after: Option<Duration>) {
    let Some(age) = prune_after else {
        return;
    };
    match prune_finished(Some(age)) {
        Ok(removed) => {
            for line in removed {
                eprintln!("agentloop: {line} ([worktrees] prune_after)");
            }
        }
        Err(e) => eprintln!("agentloop: cannot prune old worktrees: {e}"),
    }
}

/// Removes the worktrees of children that ended (older than `older_than`, when given), and
/// returns one line per removal.
fn prune_finished(older_than: Option<Duration>) -> Result<Vec<String>, Failure> {
    let dir = root().map_err(Failure::new)?;
    let now = agentloop::transcript::now_ms();
    let mut removed = Vec::new();
    for record in records()? {
        let age = Duration::from_millis(now.saturating_sub(record.created_ms));
        if !record.idle() || older_than.is_some_and(|min| age < min) {
            continue;
        }
        if let Err(e) = remove(&record) {
            eprintln!(
                "agentloop: cannot remove worktree {}: {e}",
                visible_line(&record.id)
            );
            continue;
        }
        let _ = std::fs::remove_file(Record::file(&dir, &record.id));
        let _ = std::fs::remove_dir_all(dir.join(format!("{}.tmp", record.id)));
        let kept = record
            .branch
            .as_deref()
            .map(|b| format!(" (branch {} kept)", visible_line(b)))
            .unwrap_or_default();
        removed.push(format!(
            "removed {}{kept}",
            visible_line(&record.path.to_string_lossy())
        ));
    }
    Ok(removed)
}

fn remove(record: &Record) -> Result<(), String> {
    if let Some(repo) = record.repo.as_deref().filter(|r| r.exists()) {
        if record.path.exists() {
            let path = record.path.to_string_lossy().into_owned();
            git(repo, &["worktree", "remove", "--force", &path])?;
        }
        // A worktree directory removed by hand leaves git's administrative entry behind.
        let _ = git(repo, &["worktree", "prune"]);
        return Ok(());
    }
    match std::fs::remove_dir_all(&record.path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e.to_string()),
        _ => Ok(()),
    }
}

/// Parses `--older-than`: a number with a unit `s`, `m`, `h`, `d` or `w` (`90m`, `7d`); a bare
/// number is seconds.
pub fn parse_age(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?} (e.g. 90m, 12h, 7d)"))?;
    let secs = match unit.trim() {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        "w" => 604_800,
        _ => return Err(format!("invalid duration {text:?} (units: s, m, h, d, w)")),
    };
    Ok(Duration::from_secs(n.saturating_mul(secs)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn ages_parse_with_units() {
        assert_eq!(parse_age("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_age("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_age("7d").unwrap(), Duration::from_secs(604_800));
        for bad in ["", "d", "3y", "-1d", "1.5h"] {
            assert!(parse_age(bad).is_err(), "{bad}");
        }
    }
}
