//! `@path` mentions in a chat prompt: each names a file of the workspace whose contents are
//! attached to the prompt, so the model needs no `read_file` call to see it.
//!
//! A mention is `@` at the start of the prompt or after whitespace, then a path relative to the
//! workspace (trailing punctuation such as `,` or `.` is not part of it when the path without
//! it names a file). Only files inside the workspace are attached: the path is resolved with
//! every symlink followed and must still be under the workspace root, so `@../x`, `@/etc/passwd`
//! and a link pointing out are refused. Contents are bounded ([`MAX_FILE_BYTES`] per file,
//! [`MAX_TOTAL_BYTES`] per prompt) with a note where cut; a binary file is named with its size,
//! not inlined; a directory is attached as its list of entries. A mention that names nothing is
//! left as typed (it may be a handle or a decorator).

use std::path::{Component, Path, PathBuf};

/// Most bytes of one file attached.
pub const MAX_FILE_BYTES: usize = 64 * 1024;

/// Most bytes attached to one prompt, all files together.
pub const MAX_TOTAL_BYTES: usize = 256 * 1024;

/// Most entries of a mentioned directory listed.
const MAX_DIR_ENTRIES: usize = 200;

/// What became of one mention, for the line shown to the person.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Attached whole (its size in bytes).
    Attached(String, usize),
    /// Attached up to the limit (bytes attached, bytes in the file).
    Truncated(String, usize, u64),
    /// A binary file: named, not inlined.
    Binary(String, u64),
    /// A directory: its entries listed.
    Directory(String),
    /// Refused: the path resolves outside the workspace.
    Outside(String),
    /// Not read (the error), or over the prompt's total.
    Skipped(String, String),
}

impl Outcome {
    /// One line for the person.
    pub fn line(&self) -> String {
        match self {
            Outcome::Attached(path, size) => format!("attached @{path} ({size} bytes)"),
            Outcome::Truncated(path, kept, size) => {
                format!("attached @{path}: its first {kept} of {size} bytes (truncated)")
            }
            Outcome::Binary(path, size) => {
                format!("@{path} is a binary file ({size} bytes): named, not attached")
            }
            Outcome::Directory(path) => format!("attached the list of @{path}"),
            Outcome::Outside(path) => {
                format!("@{path} is outside the workspace: not attached")
            }
            Outcome::Skipped(path, why) => format!("@{path} not attached: {why}"),
        }
    }

    /// Whether the line is a refusal or a failure (shown in red).
    pub fn is_refusal(&self) -> bool {
        matches!(self, Outcome::Outside(_) | Outcome::Skipped(..))
    }
}

/// The paths `@`-mentioned in `prompt`, as typed (without the `@`).
pub fn mentioned(prompt: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut previous = ' ';
    for (i, c) in prompt.char_indices() {
        if c == '@' && previous.is_whitespace() {
            let rest = &prompt[i + 1..];
            let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
            if end > 0 {
                found.push(rest[..end].to_owned());
            }
        }
        previous = c;
    }
    found
}

/// Where `typed` leads inside `root` (canonical): `Ok(Some(path))` an existing path inside,
/// `Ok(None)` nothing there, `Err(())` outside the workspace.
fn resolve(root: &Path, typed: &str) -> Result<Option<PathBuf>, ()> {
    let candidate = Path::new(typed);
    // An absolute path or one through `..` is refused when it names nothing as well.
    let escapes =
        candidate.is_absolute() || candidate.components().any(|c| c == Component::ParentDir);
    match std::fs::canonicalize(root.join(candidate)) {
        Ok(real) if real.starts_with(root) => Ok(Some(real)),
        Ok(_) => Err(()),
        Err(_) if escapes => Err(()),
        Err(_) => Ok(None),
    }
}

/// The typed path of a mention, and where it leads: trailing punctuation is dropped when the
/// path with it names nothing.
fn locate(root: &Path, typed: &str) -> Option<(String, Result<PathBuf, ()>)> {
    let mut text = typed;
    loop {
        match resolve(root, text) {
            Ok(Some(path)) => return Some((text.to_owned(), Ok(path))),
            Err(()) => return Some((text.to_owned(), Err(()))),
            Ok(None) => {}
        }
        let shorter = text.trim_end_matches([',', '.', ';', ':', '!', '?', ')', '\'', '"']);
        if shorter.len() == text.len() || shorter.is_empty() {
            return None;
        }
        text = shorter;
    }
}

/// Whether `bytes` look binary (a NUL byte, or not UTF-8 apart from a cut last character).
fn is_binary(bytes: &[u8]) -> bool {
    if bytes.contains(&0) {
        return true;
    }
    match std::str::from_utf8(bytes) {
        Ok(_) => false,
        Err(e) => e.error_len().is_some(),
    }
}

/// Reads at most `limit` bytes of `path`, and its size.
fn read_head(path: &Path, limit: usize) -> std::io::Result<(Vec<u8>, u64)> {
    use std::io::Read;
    let file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    let mut head = Vec::new();
    file.take(limit as u64).read_to_end(&mut head)?;
    Ok((head, size))
}

/// A directory's entries, one a line (directories with a trailing `/`), sorted.
fn listing(path: &Path) -> std::io::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(path)?
        .filter_map(Result::ok)
        .map(|e| {
            let dir = e.file_type().is_ok_and(|t| t.is_dir());
            format!(
                "{}{}",
                e.file_name().to_string_lossy(),
                if dir { "/" } else { "" }
            )
        })
        .collect();
    names.sort();
    let more = names.len().saturating_sub(MAX_DIR_ENTRIES);
    names.truncate(MAX_DIR_ENTRIES);
    if more > 0 {
        names.push(format!("… and {more} more"));
    }
    Ok(names.join("\n"))
}

/// One mention attached to `out`; what became of it.
fn attach(typed: &str, real: &Path, budget: &mut usize, out: &mut String) -> Outcome {
    let path = typed.to_owned();
    if real.is_dir() {
        return match listing(real) {
            Ok(list) => {
                out.push_str(&format!(
                    "\n\n<directory path=\"{path}\">\n{list}\n</directory>"
                ));
                Outcome::Directory(path)
            }
            Err(e) => Outcome::Skipped(path, e.to_string()),
        };
    }
    if *budget == 0 {
        return Outcome::Skipped(path, "the prompt's attachments are full".to_owned());
    }
    let limit = MAX_FILE_BYTES.min(*budget);
    let (mut head, size) = match read_head(real, limit) {
        Ok(read) => read,
        Err(e) => return Outcome::Skipped(path, e.to_string()),
    };
    if is_binary(&head) {
        out.push_str(&format!(
            "\n\n<file path=\"{path}\">(a binary file of {size} bytes; not shown)</file>"
        ));
        return Outcome::Binary(path, size);
    }
    let cut = (head.len() as u64) < size;
    if cut {
        // Never end inside a character.
        while !head.is_empty() && std::str::from_utf8(&head).is_err() {
            head.pop();
        }
    }
    let text = String::from_utf8_lossy(&head);
    *budget -= head.len();
    let note = if cut {
        format!("\n[truncated: the first {} of {size} bytes]", head.len())
    } else {
        String::new()
    };
    out.push_str(&format!(
        "\n\n<file path=\"{path}\">\n{}{note}\n</file>",
        text.trim_end_matches('\n')
    ));
    if cut {
        Outcome::Truncated(path, head.len(), size)
    } else {
        Outcome::Attached(path, head.len())
    }
}

/// The part of a prompt the person typed: what [`expand`] attached after it left out.
pub fn typed_part(prompt: &str) -> &str {
    ["\n\n<file path=\"", "\n\n<directory path=\""]
        .iter()
        .filter_map(|marker| prompt.find(marker))
        .min()
        .map_or(prompt, |at| &prompt[..at])
}

/// `prompt` with the files it mentions attached after it, and what became of each mention.
/// `root` is the workspace root (canonical).
pub fn expand(prompt: &str, root: &Path) -> (String, Vec<Outcome>) {
    let mut out = prompt.to_owned();
    let mut outcomes = Vec::new();
    let mut budget = MAX_TOTAL_BYTES;
    let mut seen = std::collections::HashSet::new();
    for typed in mentioned(prompt) {
        let Some((typed, place)) = locate(root, &typed) else {
            continue;
        };
        if !seen.insert(typed.clone()) {
            continue;
        }
        outcomes.push(match place {
            Ok(real) => attach(&typed, &real, &mut budget, &mut out),
            Err(()) => Outcome::Outside(typed),
        });
    }
    (out, outcomes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn workspace() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir_all(root.join("src")).unwrap();
        std::fs::write(root.join("src/main.rs"), "fn main() {}\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "the secret\n").unwrap();
        let root = std::fs::canonicalize(root).unwrap();
        (dir, root)
    }

    #[test]
    fn mentions_start_a_word() {
        assert_eq!(
            mentioned("@a.rs see @src/b.rs, mail me@example.com @"),
            ["a.rs", "src/b.rs,"]
        );
    }

    #[test]
    fn a_file_is_attached_and_trailing_punctuation_dropped() {
        let (_dir, root) = workspace();
        let (text, outcomes) = expand("look at @src/main.rs.", &root);
        assert_eq!(outcomes, [Outcome::Attached("src/main.rs".into(), 13)]);
        assert!(
            text.ends_with("<file path=\"src/main.rs\">\nfn main() {}\n</file>"),
            "{text}"
        );
        assert_eq!(typed_part(&text), "look at @src/main.rs.");
        let (text, outcomes) = expand("see @src", &root);
        assert_eq!(outcomes, [Outcome::Directory("src".into())]);
        assert!(text.contains("main.rs"), "{text}");
    }

    #[test]
    fn paths_outside_the_workspace_are_refused_even_through_a_link() {
        let (dir, root) = workspace();
        #[cfg(unix)]
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), root.join("link.txt")).unwrap();
        for typed in ["../secret.txt", "/etc/passwd"] {
            let (text, outcomes) = expand(&format!("read @{typed}"), &root);
            assert_eq!(outcomes, [Outcome::Outside(typed.into())], "{typed}");
            assert!(!text.contains("the secret"));
        }
        #[cfg(unix)]
        {
            let (text, outcomes) = expand("read @link.txt", &root);
            assert_eq!(outcomes, [Outcome::Outside("link.txt".into())]);
            assert!(!text.contains("the secret"));
        }
        // Nothing there: left as typed, nothing attached.
        let (text, outcomes) = expand("ping @nobody", &root);
        assert!(outcomes.is_empty());
        assert_eq!(text, "ping @nobody");
    }

    #[test]
    fn large_files_are_cut_and_binary_ones_named() {
        let (_dir, root) = workspace();
        std::fs::write(root.join("big.txt"), "é".repeat(MAX_FILE_BYTES)).unwrap();
        std::fs::write(root.join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
        let (text, outcomes) = expand("@big.txt @blob.bin", &root);
        assert!(
            matches!(&outcomes[0], Outcome::Truncated(p, kept, size)
                if p == "big.txt" && *kept == MAX_FILE_BYTES && *size == 2 * MAX_FILE_BYTES as u64),
            "{outcomes:?}"
        );
        assert!(text.contains("[truncated: the first"), "truncation note");
        assert_eq!(outcomes[1], Outcome::Binary("blob.bin".into(), 4));
        assert!(text.contains("a binary file of 4 bytes"));
    }
}
