//! Output retention: the full output of recent tool calls whose result the model got truncated,
//! kept in a directory of the application's (never the workspace), so that a person can read
//! what the model only saw the head and tail of.
//!
//! An [`OutputStore`] is one session's directory: one file per call (`<call id>.out`, mode 0600
//! in a 0700 directory), bounded to the most recent [`MAX_RETAINED_CALLS`] calls and
//! [`MAX_RETAINED_BYTES`] bytes, whichever bound is reached first (the oldest files go first).
//! Two paths fill it: the `shell` tool streams a command's whole output into a file while it
//! keeps only the head and tail in memory ([`ShellOptions::retain_outputs`]), and
//! [`OutputStore::extension`] (an extension of the loop) truncates any other tool's over-long result (an MCP server's, an
//! application's) and keeps the whole of it. Either way the truncation note is followed by a
//! line naming the call whose full output is kept ([`retained_note`]).
//!
//! [`ShellOptions::retain_outputs`]: super::ShellOptions::retain_outputs

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use super::output::{OUTPUT_LIMIT, OutputBuffer, truncate_output};

/// The most calls whose full output one session keeps.
pub const MAX_RETAINED_CALLS: usize = 50;

/// The most bytes of full outputs one session keeps (64 MiB); a single output longer than
/// this is kept up to this size.
pub const MAX_RETAINED_BYTES: u64 = 64 * 1024 * 1024;

/// The line after a truncation note saying the full output of call `call_id` is kept.
pub fn retained_note(call_id: &str) -> String {
    format!(
        "[full output kept: call {call_id} (`/output {call_id}` in chat, \
         `agentloop sessions show --full`)]"
    )
}

/// The call id named by a [`retained_note`] line in `text`, if any.
pub fn retained_call(text: &str) -> Option<&str> {
    let start = text.find("[full output kept: call ")? + "[full output kept: call ".len();
    let rest = &text[start..];
    rest.split(' ').next().filter(|id| !id.is_empty())
}

/// One session's retained outputs (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct OutputStore {
    dir: PathBuf,
    max_calls: usize,
    max_bytes: u64,
    /// Serialises pruning within the process.
    prune: Arc<Mutex<()>>,
}

/// A file name for any call id: kept when it is plain, else hex-encoded.
fn file_name(call_id: &str) -> String {
    let plain = !call_id.is_empty()
        && call_id.len() <= 100
        && !call_id.starts_with('.')
        && call_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if plain {
        format!("{call_id}.out")
    } else {
        let hex: String = call_id.bytes().map(|b| format!("{b:02x}")).collect();
        format!("x-{}.out", &hex[..hex.len().min(200)])
    }
}

fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

impl OutputStore {
    /// The store in `dir`, created (mode 0700 on Unix) when missing.
    pub fn open(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        let dir = dir.into();
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir)?;
        Ok(OutputStore {
            dir,
            max_calls: MAX_RETAINED_CALLS,
            max_bytes: MAX_RETAINED_BYTES,
            prune: Arc::default(),
        })
    }

    /// Other bounds than [`MAX_RETAINED_CALLS`] and [`MAX_RETAINED_BYTES`] (at least one call).
    pub fn with_limits(mut self, calls: usize, bytes: u64) -> Self {
        self.max_calls = calls.max(1);
        self.max_bytes = bytes.max(1);
        self
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, call_id: &str) -> PathBuf {
        self.dir.join(file_name(call_id))
    }

    /// The full output of `call_id`, `None` when it is not kept (never truncated, or pruned).
    pub fn read(&self, call_id: &str) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.path_of(call_id)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Keeps `bytes` as the full output of `call_id` (up to the byte bound), then prunes.
    pub fn save(&self, call_id: &str, bytes: &[u8]) -> std::io::Result<()> {
        let mut spill = self.spill(call_id);
        spill.write(bytes);
        spill.keep()
    }

    /// A file the output of `call_id` streams into, kept by [`Spill::keep`].
    pub(crate) fn spill(&self, call_id: &str) -> Spill {
        let path = self.path_of(call_id);
        let mut tmp = path.clone().into_os_string();
        tmp.push(format!(".tmp-{}", std::process::id()));
        let tmp = PathBuf::from(tmp);
        let file = create_private(&tmp);
        let error = file.as_ref().err().map(|e| e.to_string());
        Spill {
            store: self.clone(),
            file: file.ok(),
            tmp,
            path,
            written: 0,
            error,
        }
    }

    /// Deletes the oldest outputs beyond the bounds (the newest one always stays).
    fn prune(&self) -> std::io::Result<()> {
        let _one = self.prune.lock().unwrap_or_else(PoisonError::into_inner);
        let mut files = Vec::new();
        for item in std::fs::read_dir(&self.dir)? {
            let item = item?;
            let name = item.file_name();
            if !name.to_string_lossy().ends_with(".out") {
                continue;
            }
            let meta = item.metadata()?;
            let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            files.push((modified, name, meta.len()));
        }
        files.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| b.1.cmp(&a.1)));
        let mut total = 0u64;
        for (n, (_, name, len)) in files.into_iter().enumerate() {
            total = total.saturating_add(len);
            if n > 0 && (n >= self.max_calls || total > self.max_bytes) {
                std::fs::remove_file(self.dir.join(name))?;
            }
        }
        Ok(())
    }

    /// `content` cut to [`OUTPUT_LIMIT`] (head and tail kept, with the note) with its full text
    /// kept here as call `call_id`'s; `None` when it is within the limit or a tool already cut
    /// it (the shell keeps its own output). The result-rewriting extension is
    /// [`OutputStore::extension`], in the loop's layer.
    pub(crate) fn cut_and_keep(&self, call_id: &str, content: &str) -> Option<String> {
        if content.len() <= OUTPUT_LIMIT || content.contains("[output truncated: ") {
            return None;
        }
        let mut shown = truncate_output(content, OUTPUT_LIMIT);
        if let Err(e) = self.save(call_id, content.as_bytes()) {
            tracing::warn!(error = %e, "could not keep the full output of call {call_id}");
        } else {
            insert_note(&mut shown, call_id);
        }
        Some(shown)
    }

    /// Deletes the store with every output in it.
    pub fn remove(self) -> std::io::Result<()> {
        match std::fs::remove_dir_all(&self.dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }
}

/// Puts the [`retained_note`] line right after the truncation note of `text`.
fn insert_note(text: &mut String, call_id: &str) {
    let note = format!("{}\n", retained_note(call_id));
    let at = text
        .find("[output truncated: ")
        .and_then(|start| text[start..].find('\n').map(|end| start + end + 1));
    match at {
        Some(at) => text.insert_str(at, &note),
        None => text.insert_str(0, &note),
    }
}

/// A file an output streams into; removed unless [`keep`](Self::keep) is called.
#[derive(Debug)]
pub(crate) struct Spill {
    store: OutputStore,
    file: Option<std::fs::File>,
    tmp: PathBuf,
    path: PathBuf,
    written: u64,
    error: Option<String>,
}

impl Spill {
    /// Appends `bytes` (what goes past the store's byte bound is dropped).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        let room = self.store.max_bytes.saturating_sub(self.written);
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let Some(file) = &mut self.file else {
            return;
        };
        if take > 0 {
            if let Err(e) = file.write_all(&bytes[..take]) {
                self.error = Some(e.to_string());
                self.file = None;
                return;
            }
            self.written += take as u64;
        }
    }

    /// Moves the output into place under its call id and prunes the store.
    pub(crate) fn keep(mut self) -> std::io::Result<()> {
        if let Some(error) = self.error.take() {
            return Err(std::io::Error::other(error));
        }
        if let Some(file) = self.file.take() {
            drop(file);
            if let Err(e) = std::fs::rename(&self.tmp, &self.path) {
                let _ = std::fs::remove_file(&self.tmp);
                return Err(e);
            }
        }
        self.store.prune()
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        if self.file.take().is_some() || self.error.is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// A command's output as it streams: the head and tail for the model, and the whole of it
/// into the retention store when there is one.
#[derive(Debug)]
pub(crate) struct Capture {
    buffer: OutputBuffer,
    spill: Option<Spill>,
}

impl Capture {
    /// Keeps at most `limit` bytes in memory; everything goes to `spill` as well.
    pub(crate) fn new(limit: usize, spill: Option<Spill>) -> Self {
        Capture {
            buffer: OutputBuffer::new(limit),
            spill,
        }
    }

    /// Appends bytes.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buffer.push(bytes);
        if let Some(spill) = &mut self.spill {
            spill.write(bytes);
        }
    }

    /// Whether nothing was pushed.
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer.is_empty()
    }

    /// The text for the model; when it was truncated, the full output is kept under `call_id`
    /// and the note says so.
    pub(crate) fn finish(&mut self, call_id: &str) -> String {
        let mut text = self.buffer.render();
        let spill = self.spill.take();
        if let (true, Some(spill)) = (self.buffer.is_truncated(), spill) {
            match spill.keep() {
                Ok(()) => insert_note(&mut text, call_id),
                Err(e) => tracing::warn!(error = %e, "could not keep the full output of {call_id}"),
            }
        }
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_oldest_outputs_go_first_past_either_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path().join("s"))
            .unwrap()
            .with_limits(3, 25);
        for (i, size) in [5usize, 5, 5, 5].into_iter().enumerate() {
            store.save(&format!("c{i}"), &vec![b'x'; size]).unwrap();
            // Distinct modification times order the files.
            let file = std::fs::File::options()
                .write(true)
                .open(store.path_of(&format!("c{i}")))
                .unwrap();
            let age = std::time::Duration::from_secs(100 - i as u64);
            file.set_modified(std::time::SystemTime::now() - age)
                .unwrap();
        }
        store.prune().unwrap();
        assert!(store.read("c0").unwrap().is_none(), "over the call bound");
        assert_eq!(store.read("c3").unwrap().unwrap().len(), 5);
        store.save("big", &[b'y'; 20]).unwrap();
        // 20 + 5 = 25 fits; the next older one would not.
        assert!(store.read("c3").unwrap().is_some());
        assert!(store.read("c2").unwrap().is_none(), "over the byte bound");
    }

    #[test]
    fn a_long_result_is_cut_and_kept_whole_and_the_note_names_the_call() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path().join("s")).unwrap();
        let text: String = (0..20_000).map(|i| format!("{i}\n")).collect();
        let mut capture = Capture::new(OUTPUT_LIMIT, Some(store.spill("call_9")));
        for chunk in text.as_bytes().chunks(777) {
            capture.push(chunk);
        }
        let shown = capture.finish("call_9");
        assert_eq!(retained_call(&shown), Some("call_9"));
        assert!(shown.starts_with("0\n1\n"));
        assert!(shown.ends_with("19999\n"));
        assert_eq!(store.read("call_9").unwrap().unwrap(), text.as_bytes());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(store.path_of("call_9"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A short output is not kept.
        let mut capture = Capture::new(OUTPUT_LIMIT, Some(store.spill("short")));
        capture.push(b"hi\n");
        assert_eq!(capture.finish("short"), "hi\n");
        assert!(store.read("short").unwrap().is_none());
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
    }
}
