//! The record of trusted workspaces and the digest it is checked against.
//!
//! The record is `trusted-workspaces.json` in the user's data directory (next to the default
//! session database: `$XDG_DATA_HOME/agentloop/`, else `~/.local/share/agentloop/`), never in a
//! workspace: a repository cannot vouch for itself. It maps the canonical path of each trusted
//! directory to the SHA-256 of its [`AUTHORITY_PATHS`] at the moment the user trusted it, so a
//! later change to any of them (a new MCP server, a new hook) needs trusting again. The file is
//! replaced atomically (a temporary file in the same directory, renamed over it) and is
//! readable by its owner only.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::Failure;

/// The workspace paths (files or directories, relative to the workspace) whose contents confer
/// authority: a feature that reads a project-level extension point from a new place adds the
/// place here, so trusting covers it and changing it withdraws the trust.
pub const AUTHORITY_PATHS: &[&str] = &[
    ".agentloop/config.toml",
    ".agentloop/hooks",
    ".agentloop/agents",
    ".agentloop/skills",
    ".agentloop/commands",
    ".claude/agents",
    ".claude/skills",
    ".claude/commands",
];

/// The record's file name in the data directory.
const FILE_NAME: &str = "trusted-workspaces.json";

/// The record's format version.
const VERSION: u32 = 1;

/// The on-disk record: canonical directory path → entry.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Record {
    /// The format version.
    #[serde(default)]
    pub version: u32,
    /// The trusted directories.
    #[serde(default)]
    pub workspaces: BTreeMap<String, Entry>,
}

/// One trusted directory.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The hex SHA-256 of its [`AUTHORITY_PATHS`] when it was trusted.
    pub sha256: String,
    /// When it was trusted (milliseconds since the Unix epoch).
    #[serde(default)]
    pub trusted_ms: u64,
}

/// Where the record lives: the data directory of the session database.
pub fn path() -> Result<PathBuf, Failure> {
    let db = crate::commands::sessions::default_db_path()?;
    let dir = db
        .parent()
        .ok_or_else(|| Failure::new("the data directory has no parent"))?;
    Ok(dir.join(FILE_NAME))
}

impl Record {
    /// Reads the record; a missing file is an empty record. An unreadable one is an error (a
    /// corrupt record must not silently trust or forget anything).
    pub fn read(path: &Path) -> Result<Record, Failure> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Record::default()),
            Err(e) => {
                return Err(Failure::new(format!(
                    "cannot read the trust record {}: {e}",
                    path.display()
                )));
            }
        };
        serde_json::from_str(&text).map_err(|e| {
            Failure::new(format!(
                "the trust record {} is not valid ({e}); fix or delete it",
                path.display()
            ))
        })
    }

    /// Writes the record atomically, owner-only.
    pub fn write(&mut self, path: &Path) -> Result<(), Failure> {
        self.version = VERSION;
        let fail = |what: &str, e: std::io::Error| {
            Failure::new(format!(
                "cannot {what} the trust record {}: {e}",
                path.display()
            ))
        };
        let dir = path
            .parent()
            .ok_or_else(|| Failure::new("the trust record has no directory"))?;
        std::fs::create_dir_all(dir).map_err(|e| fail("create the directory of", e))?;
        let mut text = serde_json::to_string_pretty(self)
            .map_err(|e| Failure::new(format!("cannot encode the trust record: {e}")))?;
        text.push('\n');
        let mut builder = tempfile::Builder::new();
        builder.prefix(".trusted-workspaces");
        #[cfg(unix)]
        builder.permissions(owner_only());
        let mut temp = builder.tempfile_in(dir).map_err(|e| fail("write", e))?;
        temp.write_all(text.as_bytes())
            .and_then(|()| temp.as_file().sync_all())
            .map_err(|e| fail("write", e))?;
        temp.persist(path).map_err(|e| fail("replace", e.error))?;
        Ok(())
    }
}

/// Read and write for the owner only (`0600`).
#[cfg(unix)]
fn owner_only() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o600)
}

/// The hex SHA-256 of the [`AUTHORITY_PATHS`] of `root` (a canonical directory): each file's
/// path relative to `root` and its bytes, directories walked in name order, symbolic links by
/// their target text (plus the bytes of the file a link points to; linked directories are not
/// walked).
pub fn digest(root: &Path) -> Result<String, Failure> {
    let mut hasher = Sha256::new();
    for relative in AUTHORITY_PATHS {
        add(&mut hasher, root, Path::new(relative))?;
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Adds `root/relative` (and, for a directory, everything below it) to `hasher`. Each item is
/// a kind byte, the NUL-terminated relative path and a length-prefixed body, so no two trees
/// hash alike.
fn add(hasher: &mut Sha256, root: &Path, relative: &Path) -> Result<(), Failure> {
    let path = root.join(relative);
    let unreadable =
        |e: std::io::Error| Failure::new(format!("cannot read {}: {e}", path.display()));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(unreadable(e)),
    };
    let mut item = |kind: u8, body: &[u8]| {
        hasher.update([kind]);
        hasher.update(relative.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update((body.len() as u64).to_le_bytes());
        hasher.update(body);
    };
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(&path).map_err(unreadable)?;
        item(b'l', target.to_string_lossy().as_bytes());
        // A link to a file is read through (the config loader does too); a link to a
        // directory is not walked, so a loop cannot hang the hash.
        if std::fs::metadata(&path).is_ok_and(|m| m.is_file()) {
            let bytes = std::fs::read(&path).map_err(unreadable)?;
            item(b'f', &bytes);
        }
    } else if meta.is_dir() {
        item(b'd', b"");
        let mut names: Vec<_> = std::fs::read_dir(&path)
            .map_err(unreadable)?
            .map(|entry| entry.map(|e| e.file_name()))
            .collect::<Result<_, _>>()
            .map_err(unreadable)?;
        names.sort();
        for name in names {
            add(hasher, root, &relative.join(name))?;
        }
    } else {
        let bytes = std::fs::read(&path).map_err(unreadable)?;
        item(b'f', &bytes);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_digest_follows_every_authority_path_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let empty = digest(root).unwrap();
        std::fs::write(root.join("README.md"), "x").unwrap();
        assert_eq!(digest(root).unwrap(), empty, "other files do not count");
        std::fs::create_dir_all(root.join(".agentloop/hooks")).unwrap();
        let with_dir = digest(root).unwrap();
        assert_ne!(with_dir, empty);
        std::fs::write(root.join(".agentloop/hooks/pre.sh"), "echo hi").unwrap();
        let with_hook = digest(root).unwrap();
        assert_ne!(with_hook, with_dir);
        std::fs::write(root.join(".agentloop/hooks/pre.sh"), "echo ho").unwrap();
        assert_ne!(digest(root).unwrap(), with_hook, "contents count");
        std::fs::write(root.join(".agentloop/hooks/pre.sh"), "echo hi").unwrap();
        assert_eq!(digest(root).unwrap(), with_hook, "and only contents");
        std::fs::create_dir_all(root.join(".claude/skills/a")).unwrap();
        std::fs::write(root.join(".claude/skills/a/SKILL.md"), "s").unwrap();
        assert_ne!(digest(root).unwrap(), with_hook);
    }

    #[test]
    fn the_record_is_written_owner_only_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub").join(FILE_NAME);
        assert!(Record::read(&path).unwrap().workspaces.is_empty());
        let mut record = Record::default();
        record.workspaces.insert(
            "/w".into(),
            Entry {
                sha256: "ab".into(),
                trusted_ms: 1,
            },
        );
        record.write(&path).unwrap();
        let back = Record::read(&path).unwrap();
        assert_eq!(back.workspaces["/w"].sha256, "ab");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not json").unwrap();
        assert!(Record::read(&path).is_err());
    }
}
