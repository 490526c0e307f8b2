//! [`Workspace`]: the directory the built-in tools may touch, and the path confinement that keeps
//! them inside it.
//!
//! Every path a model passes is resolved here, once, before any file is opened. Relative paths are
//! taken from the root; absolute paths are accepted only when they lie inside the root. The
//! existing part of a path is canonicalized (so `..` and symbolic links are resolved the way the
//! operating system would) and must stay inside the canonical root; the part that does not exist
//! yet (a file `write_file` is about to create) may not contain `..` and may not start with a
//! dangling symbolic link. This module decides *where* a path points; it never reads or writes
//! file contents.
//!
//! Resolving gives good error messages, but a check followed by a use can be raced (another
//! process swaps a directory for a symbolic link in between). So every file operation then goes
//! through an open handle on the root directory ([`cap_std::fs::Dir`]): the path, relative to
//! the root, is opened beneath that handle, which on Linux is `openat2(RESOLVE_BENEATH)` and
//! elsewhere a component-by-component walk that refuses to leave the root. A symbolic link
//! swapped in at any moment can make the operation fail, never land outside. `cap-std` was
//! chosen over calling `openat2` through `rustix` directly because it covers every operation
//! the tools need (open, create, `mkdir -p`, list, stat) with the same guarantee, and keeps a
//! safe fallback on kernels and systems without `openat2`.

use std::fmt;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};

use super::text_files::TextFiles;
use crate::tooling::ToolError;

/// A root directory that confines every path the built-in tools use.
///
/// Cheap to clone (the root is shared).
///
/// ```
/// use agentloop::builtin::Workspace;
///
/// let dir = std::env::temp_dir();
/// let workspace = Workspace::new(&dir).unwrap();
/// assert!(workspace.resolve("notes/todo.txt").is_ok());
/// assert!(workspace.resolve("../elsewhere").is_err());
/// ```
#[derive(Clone)]
pub struct Workspace {
    root: Arc<PathBuf>,
    /// The root, opened once: every file operation resolves beneath this handle.
    dir: Arc<Dir>,
    /// Where the text-file tools read and write text instead of the disk, if anywhere.
    text_files: Option<Arc<dyn TextFiles>>,
}

impl PartialEq for Workspace {
    fn eq(&self, other: &Self) -> bool {
        self.root == other.root
    }
}

impl Eq for Workspace {}

impl fmt::Debug for Workspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Workspace")
            .field("root", &self.root)
            .finish()
    }
}

impl Workspace {
    /// A workspace rooted at `root`, which is canonicalized now.
    ///
    /// Fails if `root` does not exist or is not a directory.
    pub fn new(root: impl AsRef<Path>) -> io::Result<Self> {
        let given = root.as_ref();
        let root = std::fs::canonicalize(given).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("workspace root {} cannot be used: {e}", given.display()),
            )
        })?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("workspace root {} is not a directory", given.display()),
            ));
        }
        let dir = Dir::open_ambient_dir(&root, ambient_authority()).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("workspace root {} cannot be opened: {e}", given.display()),
            )
        })?;
        Ok(Workspace {
            root: Arc::new(root),
            dir: Arc::new(dir),
            text_files: None,
        })
    }

    /// This workspace with `read_file`, `write_file` and `edit_file` reading and writing text
    /// through `files` (an editor's buffers) after their paths are checked here; see
    /// [`TextFiles`] for what stays on the disk.
    pub fn with_text_files(mut self, files: Arc<dyn TextFiles>) -> Self {
        self.text_files = Some(files);
        self
    }

    /// Where the text-file tools read and write text instead of the disk (`None`: the disk).
    pub fn text_files(&self) -> Option<&Arc<dyn TextFiles>> {
        self.text_files.as_ref()
    }

    /// `resolved` (a path [`resolve`](Self::resolve) returned) relative to the root, as the
    /// root handle takes it (`.` for the root itself).
    fn beneath<'p>(&self, resolved: &'p Path) -> io::Result<&'p Path> {
        match resolved.strip_prefix(self.root.as_path()) {
            Ok(rel) if rel.as_os_str().is_empty() => Ok(Path::new(".")),
            Ok(rel) => Ok(rel),
            Err(_) => Err(escape_error()),
        }
    }

    /// Opens a resolved path for reading beneath the root handle, without blocking (a FIFO
    /// with no writer opens at once; the caller refuses anything but a regular file).
    pub(crate) fn open_read(&self, resolved: &Path) -> io::Result<std::fs::File> {
        let mut options = OpenOptions::new();
        options.read(true);
        nonblocking(&mut options);
        Ok(self
            .dir
            .open_with(self.beneath(resolved)?, &options)?
            .into_std())
    }

    /// Replaces (or creates) a resolved path beneath the root handle with `contents`, creating
    /// missing parent directories (also beneath the handle). Refuses anything that exists and
    /// is not a regular file.
    ///
    /// The file is never written in place: the contents go to a new file in the same directory,
    /// which then takes the old one's name (`rename`), with the old file's permission bits (and,
    /// where allowed, its owner). So a hard link inside the workspace to a file outside it
    /// cannot carry a write out of the workspace: the other name keeps the old contents. A
    /// reader sees the old or the new contents, never a mix.
    pub(crate) fn write(&self, resolved: &Path, contents: &[u8]) -> io::Result<()> {
        let rel = self.beneath(resolved)?;
        let Some(name) = rel.file_name() else {
            return Err(io::Error::other("it is not a regular file"));
        };
        let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
        if let Some(parent) = parent {
            self.dir.create_dir_all(parent)?;
        }
        let existing = match self.dir.symlink_metadata(rel) {
            Ok(meta) if meta.is_file() => Some(meta),
            Ok(_) => return Err(io::Error::other("it is not a regular file")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let temp = parent
            .unwrap_or(Path::new(""))
            .join(temp_name(name, std::process::id()));
        let written = self.write_new(&temp, contents, existing.as_ref());
        let renamed = written.and_then(|()| self.dir.rename(&temp, &self.dir, rel));
        if renamed.is_err() {
            let _ = self.dir.remove_file(&temp);
        }
        renamed
    }

    /// Writes `contents` to the new file `rel` (which must not exist), with `like`'s
    /// permissions and owner when given.
    fn write_new(
        &self,
        rel: &Path,
        contents: &[u8],
        like: Option<&cap_std::fs::Metadata>,
    ) -> io::Result<()> {
        use std::io::Write;
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let mut file = self.dir.open_with(rel, &options)?.into_std();
        file.write_all(contents)?;
        file.flush()?;
        if let Some(like) = like {
            copy_owner_and_mode(&file, like)?;
        }
        Ok(())
    }
    /// Lists a resolved directory beneath the root handle.
    pub(crate) fn read_dir(&self, resolved: &Path) -> io::Result<cap_std::fs::ReadDir> {
        self.dir.read_dir(self.beneath(resolved)?)
    }

    /// Metadata of a resolved path (links inside the workspace followed) beneath the root
    /// handle.
    pub(crate) fn metadata(&self, resolved: &Path) -> io::Result<cap_std::fs::Metadata> {
        self.dir.metadata(self.beneath(resolved)?)
    }

    /// The file a tool is about to write at `path`: resolved, as shown to the model, and its
    /// metadata when it exists. A directory there is refused.
    pub(crate) fn file_to_write(
        &self,
        path: &str,
    ) -> Result<(PathBuf, String, Option<cap_std::fs::Metadata>), ToolError> {
        let path = self.resolve(path)?;
        let shown = self.display(&path);
        let existing = self.metadata(&path).ok();
        if existing.as_ref().is_some_and(|m| m.is_dir()) {
            return Err(ToolError::new(format!(
                "`{shown}` is a directory; give the path of a file"
            )));
        }
        Ok((path, shown, existing))
    }

    /// Whether the root path still names the directory that was opened (same device and
    /// inode). After `mv ws ws.orig && ln -s / ws` it does not, and the shell tool refuses to
    /// run rather than use `/` (or whatever now sits there) as the working directory and
    /// writable root.
    pub(crate) fn check_identity(&self) -> Result<(), ToolError> {
        let now = std::fs::metadata(self.root.as_path());
        let same = match (&now, self.dir.dir_metadata()) {
            (Ok(now), Ok(opened)) => same_file(now, &opened),
            _ => false,
        };
        if same {
            return Ok(());
        }
        Err(ToolError::new(format!(
            "the workspace {} is no longer the directory the agent started with (it was moved, \
             removed or replaced, possibly by a symbolic link); refusing to run commands. \
             Restart the agent on the intended directory.",
            self.root.display()
        )))
    }

    /// A path naming the opened root directory itself, whatever happens to the root path:
    /// `/proc/self/fd/N` of the root handle (valid in a child after `fork`, which inherits the
    /// descriptor until `exec`), or the root path where `/proc` is not mounted.
    pub(crate) fn handle_path(&self) -> PathBuf {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::{AsFd, AsRawFd};
            let path = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_fd().as_raw_fd()));
            if path.is_dir() {
                return path;
            }
        }
        self.root.to_path_buf()
    }

    /// A new descriptor of the opened root directory (close-on-exec), for rules that must name
    /// the directory rather than its path (the sandbox's writable root).
    #[cfg(unix)]
    pub(crate) fn dup_handle(&self) -> io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::AsFd;
        self.dir.as_fd().try_clone_to_owned()
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves a model-supplied path to an absolute path inside the workspace.
    ///
    /// The path need not exist (so `write_file` can create it), but whatever part of it exists
    /// must resolve, symbolic links included, to a place inside the root. Errors are written for
    /// the model: they name the path and say what to do instead.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, ToolError> {
        if path.trim().is_empty() {
            return Err(ToolError::new(
                "the path is empty; give a path relative to the workspace root (\".\" is the root)",
            ));
        }
        let given = Path::new(path);
        let candidate = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        let components: Vec<Component<'_>> = candidate.components().collect();

        // The longest prefix of the path that exists, canonicalized.
        let mut existing = None;
        for split in (1..=components.len()).rev() {
            let prefix: PathBuf = components[..split].iter().collect();
            if let Ok(canonical) = std::fs::canonicalize(&prefix) {
                existing = Some((canonical, split));
                break;
            }
        }
        let Some((mut resolved, split)) = existing else {
            return Err(self.outside(path, &candidate));
        };
        if !resolved.starts_with(self.root.as_path()) {
            return Err(self.outside(path, &candidate));
        }

        let rest = &components[split..];
        if let Some(first) = rest.first() {
            // The first missing component exists as a directory entry only if it is a symbolic
            // link whose target is missing: following it could create files anywhere.
            if std::fs::symlink_metadata(resolved.join(first.as_os_str())).is_ok() {
                return Err(ToolError::new(format!(
                    "`{path}` goes through a symbolic link whose target does not exist; \
                     refusing to follow it. Use a path inside the workspace that does not \
                     involve that link."
                )));
            }
        }
        for component in rest {
            match component {
                Component::Normal(name) => resolved.push(name),
                Component::CurDir => {}
                Component::ParentDir => {
                    return Err(ToolError::new(format!(
                        "`{path}` uses `..` after a directory that does not exist; \
                         write the path without `..`, relative to the workspace root"
                    )));
                }
                Component::RootDir | Component::Prefix(_) => {
                    return Err(self.outside(path, &candidate));
                }
            }
        }
        Ok(resolved)
    }

    /// `path` relative to the root, with `/` separators (`.` for the root itself); paths outside
    /// the root are shown in full.
    pub fn display(&self, path: &Path) -> String {
        match path.strip_prefix(self.root.as_path()) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
            Ok(rel) => {
                let parts: Vec<String> = rel
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                parts.join("/")
            }
            Err(_) => path.display().to_string(),
        }
    }

    fn outside(&self, path: &str, candidate: &Path) -> ToolError {
        let root = self.root.display();
        if lexically_inside(candidate, &self.root) {
            ToolError::new(format!(
                "`{path}` leads outside the workspace ({root}) through a symbolic link; \
                 only files inside the workspace can be used"
            ))
        } else {
            ToolError::new(format!(
                "`{path}` is outside the workspace ({root}); use a path inside it \
                 (relative paths are resolved from the workspace root)"
            ))
        }
    }
}

/// The error for a path that (now) leads outside the root.
fn escape_error() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, ESCAPE_MESSAGE)
}

/// What cap-std says when a path would leave the root handle (also used by [`escape_error`]).
pub(crate) const ESCAPE_MESSAGE: &str = "a path led outside of the filesystem";

/// Whether an I/O error means the path led outside the workspace (for example because a
/// directory was swapped for a symbolic link while the tool ran).
pub(crate) fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.to_string().contains(ESCAPE_MESSAGE)
}

#[cfg(unix)]
fn nonblocking(options: &mut OpenOptions) {
    use cap_std::fs::OpenOptionsExt;
    // O_NONBLOCK has no effect on regular files; on a FIFO it keeps the open from waiting for
    // the other end.
    options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
}

#[cfg(not(unix))]
fn nonblocking(_options: &mut OpenOptions) {}

/// A name for the temporary file that replaces `name`: hidden, in the same directory, unique
/// to this process and write.
fn temp_name(name: &std::ffi::OsStr, pid: u32) -> std::ffi::OsString {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut temp = std::ffi::OsString::from(".");
    temp.push(name);
    temp.push(format!(
        ".agentloop-{pid}-{}.tmp",
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    temp
}

/// Whether two metadata describe the same file (device and inode; off Unix, always true).
fn same_file(a: &std::fs::Metadata, b: &cap_std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt as _;
        use std::os::unix::fs::MetadataExt as _;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (a, b);
        true
    }
}

/// Gives `file` the permission bits of `like` and, where this process may (as root, or the
/// same owner), its owner and group; a failed change of owner is not an error.
fn copy_owner_and_mode(file: &std::fs::File, like: &cap_std::fs::Metadata) -> io::Result<()> {
    #[cfg(unix)]
    {
        use cap_std::fs::MetadataExt as _;
        use rustix::fs::{Gid, Uid, fchown};
        let _ = fchown(
            file,
            Some(Uid::from_raw(like.uid())),
            Some(Gid::from_raw(like.gid())),
        );
        // After the owner: chown clears the set-id bits.
        rustix::fs::fchmod(file, rustix::fs::Mode::from_raw_mode(like.mode() & 0o7777))?;
    }
    #[cfg(not(unix))]
    file.set_permissions(like.permissions().into_std())?;
    Ok(())
}

/// Whether `path`, with `.` and `..` applied textually, stays under `root`.
fn lexically_inside(path: &Path, root: &Path) -> bool {
    normalize(path).starts_with(root)
}

/// `.` and `..` resolved without touching the file system.
pub(super) fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_missing_root_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Workspace::new(dir.path().join("nope")).unwrap_err();
        assert!(err.to_string().contains("cannot be used"), "{err}");
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert!(Workspace::new(dir.path().join("f")).is_err());
    }

    #[test]
    fn paths_resolve_inside_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        std::fs::create_dir(dir.path().join("src")).unwrap();
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
        assert_eq!(
            ws.resolve("src/../src/new/file.rs").unwrap(),
            ws.root().join("src/new/file.rs")
        );
        let absolute = ws.root().join("src/x.rs");
        assert_eq!(ws.resolve(absolute.to_str().unwrap()).unwrap(), absolute);
        assert_eq!(ws.display(&ws.root().join("src/x.rs")), "src/x.rs");
        assert_eq!(ws.display(ws.root()), ".");
    }

    #[test]
    fn escapes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("ws")).unwrap();
        let ws = Workspace::new(dir.path().join("ws")).unwrap();
        for bad in ["..", "../x", "a/../../x", "new/../../x", "/etc/passwd", ""] {
            assert!(ws.resolve(bad).is_err(), "{bad}");
        }
        let msg = ws.resolve("../x").unwrap_err().to_string();
        assert!(msg.contains("outside the workspace"), "{msg}");
    }
}
