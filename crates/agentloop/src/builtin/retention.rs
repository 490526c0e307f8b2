//! Output retention: the full output of recent tool calls whose result the model got truncated,
//! kept in a directory of the application's (never the workspace), so that a person can read
//! what the model only saw the head and tail of.
//!
//! An [`OutputStore`] is one session's directory: one file per kept output (mode 0600 in a 0700
//! directory), bounded to the most recent [`MAX_RETAINED_CALLS`] outputs and
//! [`MAX_RETAINED_BYTES`] bytes, whichever bound is reached first (the oldest files go first).
//! Each kept output gets the next number of the store (`<number>-<call id>.out`), so a call id
//! a model uses again (some servers call every turn's first call `call_0`) never overwrites an
//! earlier call's output, and a pruned number is never handed out again.
//!
//! Every path that cuts a result fills it: the `shell` tool and `job_output` stream a
//! command's whole output into a file while they keep only the head and tail in memory, the
//! listing tools (`grep`, `find_files`, `list_dir`) write every line they found while the model
//! gets the first ones (see the `listing` module), all through the store given to
//! [`ShellOptions::retain_outputs`]; and [`OutputStore::extension`] (an extension of the loop)
//! truncates any other tool's over-long result (an MCP server's, an application's) and keeps
//! the whole of it. Either way the cut result carries a line naming the call and the output's
//! number ([`retained_note`]).
//!
//! [`ShellOptions::retain_outputs`]: super::ShellOptions::retain_outputs

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use super::output::{OUTPUT_LIMIT, OutputBuffer, truncate_output};

/// The most outputs one session keeps.
pub const MAX_RETAINED_CALLS: usize = 50;

/// The most bytes of full outputs one session keeps (64 MiB); a single output longer than
/// this is kept up to this size.
pub const MAX_RETAINED_BYTES: u64 = 64 * 1024 * 1024;

/// How much longer than [`OUTPUT_LIMIT`] a result a tool already cut may be (its truncation
/// note, the [`retained_note`], a status line): the extension leaves such results alone.
const NOTES_ROOM: usize = 4 * 1024;

const NOTE_START: &str = "[full output kept: call ";
const NUMBER_START: &str = " (output #";

/// The line after a truncation note saying the full output of call `call_id` is kept as the
/// store's output number `number`.
///
/// ```
/// use agentloop::builtin::{retained_call, retained_note, retained_number};
///
/// let note = retained_note("call_0", 7);
/// assert_eq!(retained_call(&note), Some("call_0"));
/// assert_eq!(retained_number(&note), Some(7));
/// ```
pub fn retained_note(call_id: &str, number: u64) -> String {
    format!(
        "{NOTE_START}{call_id}{NUMBER_START}{number}; `/output {call_id}` in chat, \
         `agentloop sessions show --full`)]"
    )
}

/// The call id named by a [`retained_note`] line in `text`, if any.
pub fn retained_call(text: &str) -> Option<&str> {
    let start = text.find(NOTE_START)? + NOTE_START.len();
    let rest = &text[start..];
    rest.split(' ').next().filter(|id| !id.is_empty())
}

/// The output number named by a [`retained_note`] line in `text`, if any.
pub fn retained_number(text: &str) -> Option<u64> {
    let start = text.find(NOTE_START)? + NOTE_START.len();
    let line = text[start..].lines().next()?;
    let after = &line[line.find(NUMBER_START)? + NUMBER_START.len()..];
    let digits = after.split(';').next()?;
    digits.parse().ok()
}

/// One session's retained outputs (see the module docs). Cheap to clone.
#[derive(Clone, Debug)]
pub struct OutputStore {
    dir: PathBuf,
    max_calls: usize,
    max_bytes: u64,
    /// Serialises numbering and pruning within the process.
    lock: Arc<Mutex<()>>,
}

/// A file or directory name for any id (a session's, a call's): the id itself when it is plain
/// (ASCII letters, digits, `-`, `_` and `.`, not starting with a dot, at most 100 bytes), else
/// `x-` and its bytes in hex (the first 100 of them), so that no id can name a path elsewhere.
///
/// ```
/// use agentloop::builtin::safe_file_name;
///
/// assert_eq!(safe_file_name("call_0"), "call_0");
/// assert_eq!(safe_file_name("../up"), "x-2e2e2f7570");
/// ```
pub fn safe_file_name(id: &str) -> String {
    let plain = !id.is_empty()
        && id.len() <= 100
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if plain {
        id.to_owned()
    } else {
        let hex: String = id.bytes().map(|b| format!("{b:02x}")).collect();
        format!("x-{}", &hex[..hex.len().min(200)])
    }
}

/// The part of a kept output's file name after its number.
fn file_name(call_id: &str) -> String {
    format!("{}.out", safe_file_name(call_id))
}

/// A kept output file's number and the rest of its name (`None` for other files).
fn split_name(name: &str) -> Option<(u64, &str)> {
    let (number, rest) = name.split_once('-')?;
    let number = number.parse().ok()?;
    rest.ends_with(".out").then_some((number, rest))
}

/// Temporary files of outputs still streaming, distinct within the process.
static SPILLS: AtomicU64 = AtomicU64::new(0);

fn create_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// A kept output on disk.
struct Kept {
    number: u64,
    name: String,
    len: u64,
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
            lock: Arc::default(),
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

    /// The kept outputs, newest (highest number) first.
    fn list(&self) -> std::io::Result<Vec<Kept>> {
        let mut kept = Vec::new();
        for item in std::fs::read_dir(&self.dir)? {
            let item = item?;
            let name = item.file_name().to_string_lossy().into_owned();
            let Some((number, _)) = split_name(&name) else {
                continue;
            };
            let len = item.metadata()?.len();
            kept.push(Kept { number, name, len });
        }
        kept.sort_by(|a, b| b.number.cmp(&a.number).then_with(|| b.name.cmp(&a.name)));
        Ok(kept)
    }

    fn read_file(&self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        match std::fs::read(self.dir.join(name)) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The most recent full output kept for `call_id`, `None` when there is none (never
    /// truncated, or pruned).
    pub fn read(&self, call_id: &str) -> std::io::Result<Option<Vec<u8>>> {
        let wanted = file_name(call_id);
        let latest = self
            .list()?
            .into_iter()
            .find(|k| split_name(&k.name).is_some_and(|(_, rest)| rest == wanted));
        match latest {
            Some(kept) => self.read_file(&kept.name),
            None => Ok(None),
        }
    }

    /// Output number `number` (as a [`retained_note`] names it) if it is `call_id`'s; `None`
    /// when it was pruned or belongs to another call.
    pub fn read_output(&self, number: u64, call_id: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.read_file(&format!("{number}-{}", file_name(call_id)))
    }

    /// Keeps `bytes` as a full output of `call_id` (up to the byte bound), then prunes; returns
    /// the output's number.
    pub fn save(&self, call_id: &str, bytes: &[u8]) -> std::io::Result<u64> {
        let mut spill = self.spill(call_id);
        spill.write(bytes);
        spill.keep()
    }

    /// A file the output of `call_id` streams into, kept by [`Spill::keep`] (the file is
    /// created by the first write). A tool that may cut its result is given one.
    pub(crate) fn spill(&self, call_id: &str) -> Spill {
        let n = SPILLS.fetch_add(1, Ordering::Relaxed);
        let tmp = self
            .dir
            .join(format!(".tmp-{}-{n}.part", std::process::id()));
        Spill {
            store: self.clone(),
            call_id: call_id.to_owned(),
            file: None,
            tmp,
            written: 0,
            error: None,
        }
    }

    /// Moves the streamed file `tmp` into place under the next number (another process using
    /// the store at the same time takes another), prunes, and returns the number.
    fn place(&self, tmp: &Path, call_id: &str) -> std::io::Result<u64> {
        let _one = self.lock.lock().unwrap_or_else(PoisonError::into_inner);
        let mut kept = self.list()?;
        let mut number = kept.first().map_or(1, |k| k.number + 1);
        let name = loop {
            let name = format!("{number}-{}", file_name(call_id));
            // The name is claimed before the rename so that two writers cannot both take it.
            match std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(self.dir.join(&name))
            {
                Ok(_) => break name,
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => number += 1,
                Err(e) => return Err(e),
            }
        };
        std::fs::rename(tmp, self.dir.join(&name))?;
        let len = std::fs::metadata(self.dir.join(&name))?.len();
        kept.insert(0, Kept { number, name, len });
        self.prune(kept)?;
        Ok(number)
    }

    /// Deletes the oldest of `kept` (newest first) beyond the bounds; the newest always stays.
    fn prune(&self, kept: Vec<Kept>) -> std::io::Result<()> {
        let mut total = 0u64;
        for (n, kept) in kept.into_iter().enumerate() {
            total = total.saturating_add(kept.len);
            if n > 0 && (n >= self.max_calls || total > self.max_bytes) {
                match std::fs::remove_file(self.dir.join(&kept.name)) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// `content` cut to [`OUTPUT_LIMIT`] (head and tail kept, with the note) with its full text
    /// kept here as call `call_id`'s; `None` when it is within the limit, or a tool already
    /// cut it (it is at most a few notes longer than the limit and says so, or it names its
    /// kept output already). The result-rewriting extension is [`OutputStore::extension`], in
    /// the loop's layer.
    pub(crate) fn cut_and_keep(&self, call_id: &str, content: &str) -> Option<String> {
        let already_cut = content.contains(&format!("{NOTE_START}{call_id}{NUMBER_START}"))
            || (content.len() <= OUTPUT_LIMIT + NOTES_ROOM
                && content.contains("[output truncated: "));
        if content.len() <= OUTPUT_LIMIT || already_cut {
            return None;
        }
        let mut shown = truncate_output(content, OUTPUT_LIMIT);
        match self.save(call_id, content.as_bytes()) {
            Ok(number) => insert_note(&mut shown, call_id, number),
            Err(e) => {
                tracing::warn!(error = %e, "could not keep the full output of call {call_id}")
            }
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

/// Puts the [`retained_note`] line right after the truncation note of `text` (or first, when
/// the cut is announced otherwise).
fn insert_note(text: &mut String, call_id: &str, number: u64) {
    let note = format!("{}\n", retained_note(call_id, number));
    let at = text
        .find("[output truncated: ")
        .and_then(|start| text[start..].find('\n').map(|end| start + end + 1));
    match at {
        Some(at) => text.insert_str(at, &note),
        None => text.insert_str(0, &note),
    }
}

/// Keeps `spill` (if any) as its call's full output when `cut`, and names it in `text`;
/// otherwise the streamed file goes.
pub(crate) fn keep_if_cut(spill: Option<Spill>, cut: bool, text: &mut String) {
    let (Some(spill), true) = (spill, cut) else {
        return;
    };
    let call_id = spill.call_id.clone();
    match spill.keep() {
        Ok(number) => insert_note(text, &call_id, number),
        Err(e) => tracing::warn!(error = %e, "could not keep the full output of call {call_id}"),
    }
}

/// A file an output streams into; removed unless [`keep`](Self::keep) is called.
#[derive(Debug)]
pub(crate) struct Spill {
    store: OutputStore,
    call_id: String,
    file: Option<BufWriter<std::fs::File>>,
    tmp: PathBuf,
    written: u64,
    error: Option<String>,
}

impl Spill {
    /// Appends `bytes` (what goes past the store's byte bound is dropped).
    pub(crate) fn write(&mut self, bytes: &[u8]) {
        if self.error.is_some() {
            return;
        }
        let room = self.store.max_bytes.saturating_sub(self.written);
        let take = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if self.file.is_none() {
            match create_private(&self.tmp) {
                Ok(file) => self.file = Some(BufWriter::with_capacity(64 * 1024, file)),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
        let Some(file) = &mut self.file else {
            return;
        };
        if take > 0 {
            if let Err(e) = file.write_all(&bytes[..take]) {
                self.error = Some(e.to_string());
                return;
            }
            self.written += take as u64;
        }
    }

    /// Moves the output into place under the store's next number, prunes the store, and
    /// returns the number.
    pub(crate) fn keep(mut self) -> std::io::Result<u64> {
        if let Some(error) = self.error.take() {
            return Err(std::io::Error::other(error));
        }
        let file = match self.file.take() {
            Some(file) => file,
            // Nothing was written: an empty output is kept as such.
            None => BufWriter::new(create_private(&self.tmp)?),
        };
        let placed = file
            .into_inner()
            .map_err(|e| e.into_error())
            .and_then(|_| self.store.place(&self.tmp, &self.call_id));
        if placed.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        placed
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

    /// The text for the model; when it was truncated, the full output is kept and a line
    /// after the truncation note says so.
    pub(crate) fn finish(&mut self) -> String {
        self.finish_with(|text| (text, false))
    }

    /// Like [`finish`](Self::finish), with the text shaped further by `shape` first, which
    /// returns it and whether it cut something more.
    pub(crate) fn finish_with(&mut self, shape: impl FnOnce(String) -> (String, bool)) -> String {
        let (mut text, cut) = shape(self.buffer.render());
        let cut = cut || self.buffer.is_truncated();
        keep_if_cut(self.spill.take(), cut, &mut text);
        text
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn names(store: &OutputStore) -> Vec<String> {
        store.list().unwrap().into_iter().map(|k| k.name).collect()
    }

    #[test]
    fn the_oldest_outputs_go_first_past_either_bound() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path().join("s"))
            .unwrap()
            .with_limits(3, 25);
        for i in 0..4 {
            assert_eq!(store.save(&format!("c{i}"), &[b'x'; 5]).unwrap(), i + 1);
        }
        assert!(store.read("c0").unwrap().is_none(), "over the call bound");
        assert_eq!(store.read("c3").unwrap().unwrap().len(), 5);
        assert_eq!(store.save("big", &[b'y'; 20]).unwrap(), 5);
        // 20 + 5 = 25 fits; the next older one would not.
        assert!(store.read("c3").unwrap().is_some());
        assert!(store.read("c2").unwrap().is_none(), "over the byte bound");
        // A pruned number is not handed out again, even when the store starts afresh.
        let again = OutputStore::open(store.dir()).unwrap().with_limits(3, 25);
        assert_eq!(again.save("c0", b"new").unwrap(), 6);
        assert_eq!(names(&again), ["6-c0.out", "5-big.out"]);
    }

    #[test]
    fn a_reused_call_id_keeps_each_output_apart() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path().join("s")).unwrap();
        let first = store.save("call_0", b"first turn").unwrap();
        let second = store.save("call_0", b"second turn").unwrap();
        assert_ne!(first, second);
        assert_eq!(
            store.read_output(first, "call_0").unwrap().unwrap(),
            b"first turn"
        );
        assert_eq!(
            store.read_output(second, "call_0").unwrap().unwrap(),
            b"second turn"
        );
        assert_eq!(store.read("call_0").unwrap().unwrap(), b"second turn");
        // A number names one call's output only.
        assert!(store.read_output(first, "call_1").unwrap().is_none());
        // Odd ids cannot name a path outside the store.
        let odd = store.save("../../etc/x", b"odd").unwrap();
        assert_eq!(
            store.read_output(odd, "../../etc/x").unwrap().unwrap(),
            b"odd"
        );
        assert_eq!(names(&store).len(), 3);
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
        let shown = capture.finish();
        assert_eq!(retained_call(&shown), Some("call_9"));
        let number = retained_number(&shown).unwrap();
        assert!(shown.starts_with("0\n1\n"));
        assert!(shown.ends_with("19999\n"));
        assert_eq!(
            store.read_output(number, "call_9").unwrap().unwrap(),
            text.as_bytes()
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let path = store.dir().join(format!("{number}-call_9.out"));
            let mode = std::fs::metadata(path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        // A short output is not kept, and leaves no file behind.
        let mut capture = Capture::new(OUTPUT_LIMIT, Some(store.spill("short")));
        capture.push(b"hi\n");
        assert_eq!(capture.finish(), "hi\n");
        assert!(store.read("short").unwrap().is_none());
        assert_eq!(std::fs::read_dir(store.dir()).unwrap().count(), 1);
    }

    #[test]
    fn the_extension_cuts_a_long_result_once() {
        let tmp = tempfile::tempdir().unwrap();
        let store = OutputStore::open(tmp.path().join("s")).unwrap();
        // Quoting a truncation note does not exempt a result from the cut.
        let text = format!("[output truncated: quoted]\n{}", "y\n".repeat(40_000));
        let shown = store.cut_and_keep("m1", &text).unwrap();
        assert!(shown.len() < OUTPUT_LIMIT + NOTES_ROOM);
        let number = retained_number(&shown).unwrap();
        assert_eq!(
            store.read_output(number, "m1").unwrap().unwrap(),
            text.as_bytes()
        );
        // What a tool cut and kept passes unchanged.
        assert!(store.cut_and_keep("m1", &shown).is_none());
        assert!(store.cut_and_keep("m2", "short").is_none());
    }
}
