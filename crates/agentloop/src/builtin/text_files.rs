//! [`TextFiles`]: another place the text-file tools (`read_file`, `write_file`, `edit_file`)
//! can read and write text, instead of the disk. An editor hosting the agent plugs one in so
//! the model sees unsaved buffers and its edits land in the editor (and its undo history).
//!
//! Confinement does not move: every path is first resolved and checked by the
//! [`Workspace`](super::Workspace) (symbolic links, `..`, absolute paths outside), and only a
//! path it accepts is handed to a [`TextFiles`]; a refused path never reaches it. What stays on
//! the disk: directories are still refused by looking at the disk, images and binary files are
//! still read from the disk (a text buffer cannot carry them), and a file with more than one
//! hard link is still written on the disk by replacing it (so a write cannot reach another name
//! of the same file outside the workspace). Without a [`TextFiles`] (the default), the tools use
//! only the disk, as they always did.
//!
//! The paths given are absolute and canonical as resolved at the time of the call; the
//! implementation then uses them as it sees fit, so the protection against a symbolic link
//! swapped in *after* the check (which the disk path gets from opening beneath the root handle)
//! is the implementation's to give. Checkpoints of the workspace see what reaches the disk: a
//! write that stays in an unsaved buffer changes no file, so a checkpoint records nothing new.

use std::fmt;
use std::io;
use std::path::Path;

use super::io_error;
use super::workspace::Workspace;
use crate::tooling::ToolError;

/// Reads and writes whole text files somewhere other than the disk (an editor's buffers).
///
/// The methods are called from the file tools' blocking threads (never from an async task), so
/// an implementation may block while it waits for an answer; it should give up with an error
/// after a bounded time. An error is shown to the model as the tool's error.
pub trait TextFiles: Send + Sync {
    /// Whether `read_file` and `edit_file` read text through [`read_text`](Self::read_text)
    /// (otherwise they read the disk).
    fn reads(&self) -> bool {
        true
    }

    /// Whether `write_file` and `edit_file` write through [`write_text`](Self::write_text)
    /// (otherwise they write the disk).
    fn writes(&self) -> bool {
        true
    }

    /// The whole current text of the file at `path` (absolute, inside the workspace).
    fn read_text(&self, path: &Path) -> io::Result<String>;

    /// Replaces (or creates) the file at `path` (absolute, inside the workspace) with `text`.
    fn write_text(&self, path: &Path, text: &str) -> io::Result<()>;
}

impl fmt::Debug for dyn TextFiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextFiles")
            .field("reads", &self.reads())
            .field("writes", &self.writes())
            .finish()
    }
}

/// Whether a file with metadata `existing` (`None`: it does not exist yet) may be written
/// through a [`TextFiles`]: not when it has other hard links, which an in-place write would
/// change too.
pub(super) fn may_write_through(existing: Option<&cap_std::fs::Metadata>) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt as _;
        existing.is_none_or(|meta| meta.nlink() <= 1)
    }
    #[cfg(not(unix))]
    {
        let _ = existing;
        true
    }
}

/// Writes `text` to the resolved `path` of `workspace`, whose metadata is `existing` (`None`:
/// it does not exist yet): through the workspace's [`TextFiles`] when it writes and
/// [`may_write_through`] allows, otherwise on the disk beneath the root handle.
pub(super) fn write(
    workspace: &Workspace,
    path: &Path,
    existing: Option<&cap_std::fs::Metadata>,
    text: &str,
) -> io::Result<()> {
    match workspace.text_files().filter(|f| f.writes()) {
        Some(files) if may_write_through(existing) => files.write_text(path, text),
        _ => workspace.write(path, text.as_bytes()),
    }
}

/// The whole content of the resolved `path` of `workspace`, for an edit: the text the
/// workspace's [`TextFiles`] has when it reads, otherwise the bytes on the disk. Only regular
/// files are read either way; a file missing on the disk is asked for too (an editor may hold
/// an unsaved buffer of it), and is "not found" when the [`TextFiles`] has none either.
pub(super) fn read_for_edit(
    workspace: &Workspace,
    path: &Path,
    shown: &str,
) -> Result<Vec<u8>, ToolError> {
    use std::io::Read;
    let opened = workspace.open_read(path);
    let through = workspace.text_files().filter(|f| f.reads());
    match (opened, through) {
        (Ok(mut file), through) => {
            super::reading::ensure_regular(&file, shown)?;
            if let Some(files) = through {
                return files
                    .read_text(path)
                    .map(String::into_bytes)
                    .map_err(|e| io_error("read", shown, &e));
            }
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)
                .map_err(|e| io_error("read", shown, &e))?;
            Ok(bytes)
        }
        (Err(missing), Some(files)) if missing.kind() == io::ErrorKind::NotFound => files
            .read_text(path)
            .map(String::into_bytes)
            .map_err(|_| io_error("read", shown, &missing)),
        (Err(e), _) => Err(io_error("read", shown, &e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::collections::HashMap;
    use std::path::PathBuf;
    use std::sync::{Arc, Mutex};

    use serde_json::json;

    use super::*;
    use crate::builtin::{ApprovalPolicy, WorkspaceDeps, tools};
    use crate::tooling::{Registry, run_tools};
    use crate::transcript::{ToolCallPart, ToolResultPart};

    /// Buffers by path; records every call.
    #[derive(Default)]
    struct Buffers {
        texts: Mutex<HashMap<PathBuf, String>>,
        calls: Mutex<Vec<String>>,
    }

    impl TextFiles for Buffers {
        fn read_text(&self, path: &Path) -> io::Result<String> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("read {}", path.display()));
            self.texts
                .lock()
                .unwrap()
                .get(path)
                .cloned()
                .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no buffer"))
        }

        fn write_text(&self, path: &Path, text: &str) -> io::Result<()> {
            self.calls
                .lock()
                .unwrap()
                .push(format!("write {}", path.display()));
            self.texts
                .lock()
                .unwrap()
                .insert(path.to_path_buf(), text.to_owned());
            Ok(())
        }
    }

    async fn call(ws: &Workspace, name: &str, args: serde_json::Value) -> ToolResultPart {
        let registry = Registry::new(tools::<WorkspaceDeps>(ws)).unwrap();
        let deps = Arc::new(WorkspaceDeps::new(ws.clone(), ApprovalPolicy::Always));
        let calls = [ToolCallPart::new("1", name, args)];
        run_tools(&calls, &registry, &deps, None).await.remove(0)
    }

    #[tokio::test]
    async fn text_comes_from_the_buffers_and_images_and_hard_links_stay_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let buffers = Arc::new(Buffers::default());
        let ws = Workspace::new(dir.path())
            .unwrap()
            .with_text_files(buffers.clone());
        let root = ws.root().to_path_buf();
        std::fs::write(root.join("a.txt"), "on disk\n").unwrap();
        buffers
            .texts
            .lock()
            .unwrap()
            .insert(root.join("a.txt"), "in buffer\n".into());

        let read = call(&ws, "read_file", json!({"path": "a.txt"})).await;
        assert_eq!(read.content, "     1\tin buffer\n");
        let edit = json!({"path": "a.txt", "old_text": "buffer", "new_text": "editor"});
        assert!(!call(&ws, "edit_file", edit).await.is_error);
        assert_eq!(
            buffers.texts.lock().unwrap()[&root.join("a.txt")],
            "in editor\n"
        );
        assert_eq!(
            std::fs::read_to_string(root.join("a.txt")).unwrap(),
            "on disk\n"
        );

        // An image is read from the disk, whatever the buffers say.
        let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
        png.extend_from_slice(&[0u8; 24]);
        std::fs::write(root.join("i.png"), &png).unwrap();
        let image = call(&ws, "read_file", json!({"path": "i.png"})).await;
        assert!(image.content.contains("image/png"), "{}", image.content);

        // A file with another hard link is replaced on the disk, not written in place.
        let other = tempfile::tempdir().unwrap();
        std::fs::write(other.path().join("out.txt"), "keep\n").unwrap();
        if std::fs::hard_link(other.path().join("out.txt"), root.join("linked.txt")).is_ok() {
            let write = json!({"path": "linked.txt", "content": "new\n"});
            assert!(!call(&ws, "write_file", write).await.is_error);
            assert_eq!(
                std::fs::read_to_string(root.join("linked.txt")).unwrap(),
                "new\n"
            );
            assert_eq!(
                std::fs::read_to_string(other.path().join("out.txt")).unwrap(),
                "keep\n"
            );
        }

        // A path outside never reaches the buffers.
        let outside = call(&ws, "read_file", json!({"path": "../x.txt"})).await;
        assert!(outside.is_error);
        let calls = buffers.calls.lock().unwrap().clone();
        let a = root.join("a.txt").display().to_string();
        assert_eq!(
            calls,
            [
                format!("read {a}"),
                format!("read {a}"),
                format!("write {a}")
            ]
        );
    }

    #[tokio::test]
    async fn a_file_missing_everywhere_is_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path())
            .unwrap()
            .with_text_files(Arc::new(Buffers::default()));
        let read = call(&ws, "read_file", json!({"path": "nope.txt"})).await;
        assert!(read.content.contains("does not exist"), "{}", read.content);
    }
}
