//! Where agentloop keeps what it records for the user — the session database, the trust
//! record, checkpoints, isolated worktrees, MCP tokens: `$XDG_DATA_HOME/agentloop/`, else
//! `~/.local/share/agentloop/` (`%LOCALAPPDATA%\agentloop\` on Windows). Never a workspace.

use std::path::PathBuf;

/// The data directory, or `None` when none of the variables names an absolute directory.
pub fn data_dir() -> Option<PathBuf> {
    let env_dir = |name: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = env_dir("XDG_DATA_HOME")
        .or_else(|| env_dir("HOME").map(|home| home.join(".local").join("share")))
        .or_else(|| env_dir("LOCALAPPDATA"))?;
    Some(base.join("agentloop"))
}
