//! Instructions: the user's own `~/.config/agentloop/AGENTS.md` (or
//! `$XDG_CONFIG_HOME/agentloop/AGENTS.md`) first, then the project's `AGENTS.md` files —
//! `CLAUDE.md` in a directory without one — from the repository root (the nearest ancestor
//! holding `.git`) down to the workspace root, added to the system prompt with the nearest file
//! last so it has the final word, as codex does.
//!
//! These files come from whatever repository the agent is pointed at, so they are read
//! defensively: a symlink is followed only when its target is a regular file inside the
//! repository (or the workspace when there is no repository), special files (FIFOs, devices)
//! are never opened, each file is cut at [`MAX_FILE_BYTES`] and all of them together at
//! [`MAX_TOTAL_BYTES`], and a file that is not text (a NUL byte) is skipped with a note.

use std::io::Read;
use std::path::{Path, PathBuf};

/// The file names looked for in each directory, in order of preference (one per directory).
pub const FILE_NAMES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// Longest part of one file that is used (bytes).
pub const MAX_FILE_BYTES: u64 = 64 * 1024;
/// Longest total of all files (bytes).
pub const MAX_TOTAL_BYTES: usize = 128 * 1024;

/// One loaded file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instructions {
    /// Where it was found (the path as seen in the directory, not the symlink's target).
    pub path: PathBuf,
    /// Its text (possibly cut).
    pub text: String,
    /// It was longer than the limit and was cut.
    pub truncated: bool,
}

/// What discovery found: the files in prompt order (root first, nearest last) and notes about
/// files that were skipped.
#[derive(Clone, Debug, Default)]
pub struct Discovery {
    /// The loaded files.
    pub files: Vec<Instructions>,
    /// Why candidate files were not used.
    pub skipped: Vec<String>,
}

/// The user-wide instruction file: `AGENTS.md` beside the user's config file.
pub fn user_file() -> Option<PathBuf> {
    crate::config::files::user_config_path().map(|config| config.with_file_name("AGENTS.md"))
}

/// Finds and reads the instruction files for a workspace (see the module docs).
pub fn discover(workspace: &Path) -> Discovery {
    discover_with(user_file().as_deref(), workspace)
}

/// [`discover`] with the user-wide file at `user` (`None`: there is none).
fn discover_with(user: Option<&Path>, workspace: &Path) -> Discovery {
    let mut found = Discovery::default();
    let mut total = 0usize;
    // The user's own file: a symlink to anywhere is theirs to make.
    if let Some(path) = user {
        match read_one(path, Path::new("/")) {
            Ok(None) => {}
            Ok(Some(file)) => {
                total += file.text.len();
                found.files.push(file);
            }
            Err(why) => found.skipped.push(format!("{}: {why}", path.display())),
        }
    }
    let Ok(workspace) = workspace.canonicalize() else {
        return found;
    };
    let mut dirs: Vec<PathBuf> = Vec::new();
    let mut boundary = None;
    for dir in workspace.ancestors() {
        dirs.push(dir.to_path_buf());
        if dir.join(".git").exists() {
            boundary = Some(dir.to_path_buf());
            break;
        }
    }
    // Outside a repository only the workspace itself is searched: its parents belong to
    // someone else (a home directory, /tmp).
    let boundary = match boundary {
        Some(root) => root,
        None => {
            dirs.truncate(1);
            workspace.clone()
        }
    };
    dirs.reverse();

    for dir in dirs {
        for name in FILE_NAMES {
            let path = dir.join(name);
            match read_one(&path, &boundary) {
                Ok(None) => continue,
                Ok(Some(mut file)) => {
                    let room = MAX_TOTAL_BYTES.saturating_sub(total);
                    if room == 0 {
                        found.skipped.push(format!(
                            "{}: the instruction files exceed {} KiB together",
                            path.display(),
                            MAX_TOTAL_BYTES / 1024
                        ));
                        break;
                    }
                    if file.text.len() > room {
                        file.text = cut(&file.text, room).to_owned();
                        file.truncated = true;
                    }
                    total += file.text.len();
                    found.files.push(file);
                    break;
                }
                Err(why) => {
                    found.skipped.push(format!("{}: {why}", path.display()));
                    break;
                }
            }
        }
    }
    found
}

/// Reads one candidate: `Ok(None)` when there is no such file.
fn read_one(path: &Path, boundary: &Path) -> Result<Option<Instructions>, String> {
    let Ok(link_meta) = std::fs::symlink_metadata(path) else {
        return Ok(None);
    };
    let resolved = if link_meta.file_type().is_symlink() {
        let target = path
            .canonicalize()
            .map_err(|e| format!("a symlink that cannot be resolved ({e})"))?;
        if !target.starts_with(boundary) {
            return Err(format!(
                "a symlink to {} outside {}",
                target.display(),
                boundary.display()
            ));
        }
        target
    } else {
        path.to_path_buf()
    };
    let meta = std::fs::metadata(&resolved).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        // A directory, FIFO or device named AGENTS.md: opening a FIFO would block forever.
        return Err("not a regular file".into());
    }
    let file = std::fs::File::open(&resolved).map_err(|e| e.to_string())?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.contains(&0) {
        return Err("not a text file".into());
    }
    let truncated = bytes.len() as u64 > MAX_FILE_BYTES;
    bytes.truncate(MAX_FILE_BYTES as usize);
    let text = String::from_utf8_lossy(&bytes).into_owned();
    // A cut in the middle of a multi-byte character leaves one replacement character at the
    // end; harmless.
    Ok(Some(Instructions {
        path: path.to_path_buf(),
        text,
        truncated,
    }))
}

/// The longest prefix of `text` of at most `max` bytes ending on a character boundary.
fn cut(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `system` with the instruction files appended, nearest last.
pub fn with_instructions(system: &str, files: &[Instructions]) -> String {
    if files.is_empty() {
        return system.to_owned();
    }
    let mut prompt = system.to_owned();
    prompt.push_str(
        "\n\n# Project instructions\n\nThe user and the repository provide these instructions; \
         when they disagree, the later (more specific) file wins.",
    );
    for file in files {
        prompt.push_str(&format!(
            "\n\n## {}\n\n{}",
            file.path.display(),
            file.text.trim_end()
        ));
        if file.truncated {
            prompt.push_str("\n\n(this file was cut at the size limit)");
        }
    }
    prompt
}

/// The run-header line naming the loaded files (`None` when there are none).
pub fn header(discovery: &Discovery) -> Option<String> {
    let mut lines = Vec::new();
    if !discovery.files.is_empty() {
        let names: Vec<String> = discovery
            .files
            .iter()
            .map(|f| {
                let mut name = f.path.display().to_string();
                if f.truncated {
                    name.push_str(" (cut)");
                }
                name
            })
            .collect();
        lines.push(format!("project instructions: {}", names.join(", ")));
    }
    for skipped in &discovery.skipped {
        lines.push(format!("project instructions skipped: {skipped}"));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    /// A temporary directory holding a git repository (a `.git` directory) at `repo/`.
    fn temp_repo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        (dir, repo)
    }

    #[test]
    fn files_from_the_repository_root_down_nearest_last() {
        let (dir, repo) = temp_repo();
        write(&dir.path().join("AGENTS.md"), "outside the repository");
        write(&repo.join("AGENTS.md"), "root rules");
        write(&repo.join("CLAUDE.md"), "ignored: AGENTS.md wins");
        write(&repo.join("crates/CLAUDE.md"), "crate rules");
        write(&repo.join("crates/cli/AGENTS.md"), "cli rules");
        let found = discover(&repo.join("crates/cli"));
        let texts: Vec<&str> = found.files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["root rules", "crate rules", "cli rules"]);
        let prompt = with_instructions("base", &found.files);
        let root = prompt.find("root rules").unwrap();
        let cli = prompt.find("cli rules").unwrap();
        assert!(prompt.starts_with("base") && root < cli, "{prompt}");
        assert!(header(&found).unwrap().contains("crates/cli/AGENTS.md"));
    }

    #[test]
    fn without_a_repository_only_the_workspace_counts() {
        let dir = tempfile::tempdir().unwrap();
        write(&dir.path().join("AGENTS.md"), "parent");
        write(&dir.path().join("ws/AGENTS.md"), "workspace");
        let found = discover(&dir.path().join("ws"));
        assert_eq!(found.files.len(), 1);
        assert_eq!(found.files[0].text, "workspace");
        assert!(discover(&dir.path().join("missing")).files.is_empty());
    }

    #[test]
    fn large_binary_and_special_files_are_handled() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path();
        std::fs::create_dir(repo.join(".git")).unwrap();
        write(
            &repo.join("AGENTS.md"),
            &"é".repeat(MAX_FILE_BYTES as usize),
        );
        write(&repo.join("bin/AGENTS.md"), "a\0b");
        let found = discover(&repo.join("bin"));
        assert_eq!(found.files.len(), 1);
        assert!(found.files[0].truncated);
        assert!(found.files[0].text.len() as u64 <= MAX_FILE_BYTES + 3);
        assert!(
            found.skipped[0].contains("not a text file"),
            "{:?}",
            found.skipped
        );

        std::fs::create_dir_all(repo.join("d/AGENTS.md")).unwrap();
        let found = discover(&repo.join("d"));
        assert!(
            found
                .skipped
                .iter()
                .any(|s| s.contains("not a regular file"))
        );
    }

    #[test]
    fn the_user_file_comes_before_the_project_files() {
        let (dir, repo) = temp_repo();
        write(&repo.join("AGENTS.md"), "project rules");
        let user = dir.path().join("config/agentloop/AGENTS.md");
        write(&user, "user rules");
        let found = discover_with(Some(&user), &repo);
        let texts: Vec<&str> = found.files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["user rules", "project rules"]);
        // Without a project file, and for a workspace that does not exist, the user's still counts.
        let found = discover_with(Some(&user), &dir.path().join("missing"));
        assert_eq!(found.files.len(), 1);
        assert!(
            discover_with(Some(&dir.path().join("none.md")), &repo)
                .files
                .len()
                == 1
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_must_stay_inside_the_repository() {
        let (dir, repo) = temp_repo();
        write(&dir.path().join("secret.txt"), "SECRET");
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), repo.join("AGENTS.md")).unwrap();
        write(&repo.join("docs/rules.md"), "linked rules");
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::os::unix::fs::symlink(repo.join("docs/rules.md"), repo.join("sub/AGENTS.md")).unwrap();
        let found = discover(&repo.join("sub"));
        let texts: Vec<&str> = found.files.iter().map(|f| f.text.as_str()).collect();
        assert_eq!(texts, ["linked rules"]);
        assert!(found.skipped[0].contains("outside"), "{:?}", found.skipped);
    }
}
