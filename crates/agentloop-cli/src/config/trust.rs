//! The workspace trust boundary: whether a directory's own files may configure the agent.
//!
//! Running `agentloop` in a repository one just cloned must be as safe as running `cat` on it.
//! So a workspace's own files — `.agentloop/config.toml` and every other project-level
//! extension point listed in [`AUTHORITY_PATHS`](record::AUTHORITY_PATHS) — take full effect only in a directory the
//! user trusted. Until then they may only *narrow* what the user's own configuration and flags
//! allow (see [`narrow`] for the precise orders); whatever would widen authority, start a
//! program, add a server or move a credential is ignored, and one stderr line says so.
//!
//! The decision is a [`Trust`] value computed once, where the configuration is loaded
//! (`crate::config::layers::parse`), and handed down with the command's arguments: a feature that
//! reads a project-level file asks [`Trust::applies_to`] instead of deciding for itself.
//!
//! A directory becomes trusted by the user only: at the terminal prompt on first use
//! ([`ask`]), with `agentloop trust [DIR]` (recorded; see [`record`]), or with
//! `--trust-project` (this invocation only, nothing recorded). Trust is keyed by the canonical
//! path (a symlinked path resolves to its target) and the SHA-256 of the authority paths, so
//! when they change the directory is untrusted again until the user looks at it anew.

pub mod narrow;
pub mod record;

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::Args;

use crate::error::Failure;
use crate::ui::safe_text::visible_line;

/// Where a workspace stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum State {
    /// Never trusted (or revoked): its files may only narrow.
    #[default]
    Untrusted,
    /// Trusted once, but its authority paths changed since: untrusted until trusted again.
    Changed,
    /// Trusted, with the authority paths as they are now.
    Trusted,
    /// Trusted for this invocation by `--trust-project`; nothing recorded.
    ForThisRun,
}

/// The trust decision for one workspace, computed once per invocation.
#[derive(Clone, Debug, Default)]
pub struct Trust {
    /// The workspace's canonical path (empty when it could not be resolved).
    pub dir: PathBuf,
    /// The hex SHA-256 of its authority paths now.
    pub digest: String,
    /// The decision.
    pub state: State,
}

/// One thing an untrusted workspace asked for and did not get: the key (`approve`,
/// `mcp_servers.NAME`, …) and its value as the file gives it.
#[derive(Clone, Debug, PartialEq)]
pub struct Ignored {
    /// The key, as written in the file.
    pub key: String,
    /// Its value, shown at the trust prompt (empty when there is nothing useful to show).
    pub value: String,
}

/// How to trust, for messages.
pub const HOW_TO_TRUST: &str =
    "trust the directory with `agentloop trust` (or pass --trust-project for one invocation)";

impl Trust {
    /// The decision for `workspace`: `--trust-project` (`flag`) trusts it for this invocation;
    /// otherwise the record decides. A directory that does not exist is untrusted.
    pub fn evaluate(workspace: &Path, flag: bool) -> Result<Trust, Failure> {
        let Ok(dir) = std::fs::canonicalize(workspace) else {
            return Ok(Trust::default());
        };
        let digest = record::digest(&dir)?;
        let state = if flag {
            State::ForThisRun
        } else {
            // No data directory at all (no HOME): nothing can have been recorded.
            let recorded = match record::path() {
                Ok(path) => record::Record::read(&path)?,
                Err(_) => record::Record::default(),
            };
            match recorded.workspaces.get(&key(&dir)) {
                Some(entry) if entry.sha256 == digest => State::Trusted,
                Some(_) => State::Changed,
                None => State::Untrusted,
            }
        };
        Ok(Trust { dir, digest, state })
    }

    /// Whether the workspace's own files take full effect.
    pub fn is_trusted(&self) -> bool {
        matches!(self.state, State::Trusted | State::ForThisRun)
    }

    /// Whether `workspace`'s own files take full effect: this decision is for that directory
    /// and says trusted. Features that read project-level files ask this.
    pub fn applies_to(&self, workspace: &Path) -> bool {
        self.is_trusted() && std::fs::canonicalize(workspace).is_ok_and(|dir| dir == self.dir)
    }

    /// Records the workspace as trusted with its current digest.
    pub fn record(&mut self) -> Result<PathBuf, Failure> {
        if self.dir.as_os_str().is_empty() {
            return Err(Failure::usage("the directory to trust does not exist"));
        }
        let path = record::path()?;
        let mut recorded = record::Record::read(&path)?;
        recorded.workspaces.insert(
            key(&self.dir),
            record::Entry {
                sha256: self.digest.clone(),
                trusted_ms: now_ms(),
            },
        );
        recorded.write(&path)?;
        self.state = State::Trusted;
        Ok(path)
    }

    /// The decision in words, for `config show`.
    pub fn describe(&self) -> String {
        match self.state {
            State::Trusted => "trusted".to_owned(),
            State::ForThisRun => "trusted for this invocation (--trust-project)".to_owned(),
            State::Untrusted => "not trusted: its config may only narrow yours".to_owned(),
            State::Changed => "not trusted: its project files changed since it was trusted, \
                               so its config may only narrow yours"
                .to_owned(),
        }
    }

    /// The one stderr line about what the untrusted workspace file `file` did not get.
    pub fn ignored_line(&self, file: &Path, ignored: &[Ignored]) -> String {
        let keys: Vec<&str> = ignored.iter().map(|i| i.key.as_str()).collect();
        let why = match self.state {
            State::Changed => "its project files changed since you trusted it",
            _ => "the directory is not trusted",
        };
        visible_line(&format!(
            "ignoring {} in {} ({why}; only settings that narrow yours apply); {HOW_TO_TRUST}",
            keys.join(", "),
            file.display()
        ))
    }
}

/// The record's key for a canonical directory.
fn key(dir: &Path) -> String {
    dir.to_string_lossy().into_owned()
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Asks at the terminal whether to trust `trust`'s directory, showing what its file `file`
/// would change (`ignored`). Only when stdin and stderr are terminals; `Ok(false)` otherwise,
/// and for any answer but yes. A yes is recorded.
pub fn ask(trust: &mut Trust, file: &Path, ignored: &[Ignored]) -> Result<bool, Failure> {
    if !std::io::stdin().is_terminal() || !std::io::stderr().is_terminal() {
        return Ok(false);
    }
    let mut text = String::new();
    if trust.state == State::Changed {
        text.push_str(&format!(
            "The project files of {} changed since you trusted it.\n",
            visible_line(&trust.dir.display().to_string())
        ));
    } else {
        text.push_str(&format!(
            "{} is not a trusted directory.\n",
            visible_line(&trust.dir.display().to_string())
        ));
    }
    text.push_str(&format!(
        "Its {} would change these settings, which only a trusted directory may:\n",
        visible_line(&file.display().to_string())
    ));
    for item in ignored {
        match item.value.is_empty() {
            true => text.push_str(&format!("  {}\n", visible_line(&item.key))),
            false => text.push_str(&format!(
                "  {} = {}\n",
                visible_line(&item.key),
                visible_line(&item.value)
            )),
        }
    }
    text.push_str(
        "Trust this directory? Its files may then run programs and change what the agent may \
         do. [y/N] ",
    );
    let mut stderr = std::io::stderr().lock();
    let _ = stderr.write_all(text.as_bytes());
    let _ = stderr.flush();
    drop(stderr);
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| Failure::new(format!("cannot read the answer: {e}")))?;
    if !matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        eprintln!("agentloop: not trusted; running with your own settings");
        return Ok(false);
    }
    let path = trust.record()?;
    eprintln!(
        "agentloop: trusted {} (recorded in {})",
        visible_line(&trust.dir.display().to_string()),
        visible_line(&path.display().to_string())
    );
    Ok(true)
}

/// `agentloop trust`.
#[derive(Args, Debug)]
pub struct TrustArgs {
    /// The directory (default: `--workspace`, else the current directory).
    #[arg(value_name = "DIR", conflicts_with = "workspace")]
    pub dir: Option<PathBuf>,
    /// The directory, as other commands name it.
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,
    /// Withdraw the trust instead.
    #[arg(long, conflicts_with = "list")]
    pub revoke: bool,
    /// List the trusted directories and whether their project files changed since.
    #[arg(long, conflicts_with_all = ["dir", "workspace"])]
    pub list: bool,
}

/// `agentloop trust [DIR]`, `--revoke [DIR]`, `--list`.
pub fn command(args: TrustArgs) -> Result<(), Failure> {
    if args.list {
        return list();
    }
    let given = match args.dir.or(args.workspace) {
        Some(dir) => dir,
        None => std::env::current_dir()
            .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))?,
    };
    let dir = std::fs::canonicalize(&given).map_err(|e| {
        Failure::usage(format!(
            "cannot trust {}: {e}",
            visible_line(&given.display().to_string())
        ))
    })?;
    if !dir.is_dir() {
        return Err(Failure::usage(format!(
            "{} is not a directory",
            visible_line(&dir.display().to_string())
        )));
    }
    let shown = visible_line(&dir.display().to_string());
    if args.revoke {
        let path = record::path()?;
        let mut recorded = record::Record::read(&path)?;
        if recorded.workspaces.remove(&key(&dir)).is_none() {
            crate::ui::render::out(&format!("{shown} was not trusted\n"));
            return Ok(());
        }
        recorded.write(&path)?;
        crate::ui::render::out(&format!("no longer trusted: {shown}\n"));
        return Ok(());
    }
    let mut trust = Trust {
        digest: record::digest(&dir)?,
        dir,
        state: State::Untrusted,
    };
    trust.record()?;
    crate::ui::render::out(&format!(
        "trusted: {shown} (sha256 {})\n",
        &trust.digest[..12]
    ));
    Ok(())
}

/// `agentloop trust --list`: each trusted directory and whether it still matches.
fn list() -> Result<(), Failure> {
    let recorded = record::Record::read(&record::path()?)?;
    let mut out = String::new();
    for (dir, entry) in &recorded.workspaces {
        let state = match record::digest(Path::new(dir)) {
            _ if !Path::new(dir).is_dir() => "missing",
            Ok(now) if now == entry.sha256 => "trusted",
            Ok(_) => "changed since trusted (untrusted until trusted again)",
            Err(_) => "unreadable",
        };
        out.push_str(&format!("{}  # {state}\n", visible_line(dir)));
    }
    crate::ui::render::out(&out);
    Ok(())
}
