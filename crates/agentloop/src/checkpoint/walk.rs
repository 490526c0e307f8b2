//! The stat walk of a workspace: every path to record with its stat, `.gitignore` respected,
//! `.git` and the store skipped, symbolic links never followed. Built for a tree walked before
//! and after every mutating tool call: directories are read and their entries `lstat`ed
//! relative to an open handle of the directory (one path component resolved per call, not
//! the whole path), by as many threads as there are cores taking directories from a shared
//! stack, and an entry is checked against the limits as soon as it is seen — before any file
//! is read or copied. A walk may start below the root (a directory that changed), and may
//! have each directory watched for changes before it is listed, so that whatever changes
//! after its listing is reported.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use super::ignores::Rules;
use super::{CheckpointError, Entry, EntryKind};

pub(crate) use super::walk_input::{Found, Walk};

/// A directory waiting to be read: its name in its parent, read through the parent's handle.
struct Job {
    parent: Option<Arc<rustix::fs::Dir>>,
    /// Relative to the root (`""`: the root); the name is what follows `name_at`.
    rel: String,
    name_at: usize,
    rules: Arc<Rules>,
}

/// What the walk's threads share: the stack of directories to read and the running totals.
struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    entries: AtomicUsize,
    bytes: AtomicU64,
    over: AtomicBool,
}

struct Queue {
    jobs: Vec<Job>,
    /// Threads reading a directory (which may push more).
    busy: usize,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The next directory to read, `None` when there is none and none can come.
    fn next(&self) -> Option<Job> {
        let mut queue = self.lock();
        loop {
            if self.over.load(Ordering::Relaxed) {
                return None;
            }
            if let Some(job) = queue.jobs.pop() {
                queue.busy += 1;
                return Some(job);
            }
            if queue.busy == 0 {
                return None;
            }
            queue = self
                .wake
                .wait(queue)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// A directory read, with the subdirectories it holds.
    fn done(&self, children: Vec<Job>) {
        let mut queue = self.lock();
        queue.busy -= 1;
        let wake = !children.is_empty() || queue.busy == 0;
        queue.jobs.extend(children);
        drop(queue);
        if wake {
            self.wake.notify_all();
        }
    }
}

impl Walk<'_> {
    /// Every path to record, in no particular order. Unreadable directories are recorded but
    /// not their contents; paths gone since they were listed are left out.
    pub(crate) fn run(&self) -> Result<Vec<Found>, CheckpointError> {
        let (rel, rules) = match &self.start {
            Some((rel, rules)) => ((*rel).to_owned(), rules.clone()),
            None => (String::new(), self.ignores.above(self.root)),
        };
        let shared = Shared {
            queue: Mutex::new(Queue {
                jobs: vec![Job {
                    parent: None,
                    rel,
                    name_at: 0,
                    rules,
                }],
                busy: 0,
            }),
            wake: Condvar::new(),
            entries: AtomicUsize::new(0),
            bytes: AtomicU64::new(0),
            over: AtomicBool::new(false),
        };
        let threads = std::thread::available_parallelism()
            .map_or(1, usize::from)
            .min(8);
        let mut found = std::thread::scope(|scope| {
            let helpers: Vec<_> = (1..threads)
                .map(|_| scope.spawn(|| self.worker(&shared)))
                .collect();
            let mut found = self.worker(&shared);
            for helper in helpers {
                // A helper that panicked lost its part of the walk: fail the snapshot.
                match helper.join() {
                    Ok(mut part) => found.append(&mut part),
                    Err(_) => return None,
                }
            }
            Some(found)
        })
        .ok_or_else(|| {
            CheckpointError::io("walk", std::io::Error::other("a walk thread panicked"))
        })?;
        self.check_limits(&shared)?;
        found.shrink_to_fit();
        Ok(found)
    }

    fn worker(&self, shared: &Shared) -> Vec<Found> {
        let mut found = Vec::new();
        while let Some(job) = shared.next() {
            let children = self.read_dir(job, shared, &mut found);
            shared.done(children);
        }
        found
    }

    fn check_limits(&self, shared: &Shared) -> Result<(), CheckpointError> {
        let entries = shared.entries.load(Ordering::Relaxed);
        if entries > self.limits.max_entries {
            return Err(CheckpointError::TooLarge(format!(
                "more than {} files and directories",
                self.limits.max_entries
            )));
        }
        if shared.bytes.load(Ordering::Relaxed) > self.limits.max_total_bytes {
            return Err(CheckpointError::TooLarge(format!(
                "more than {} bytes of files",
                self.limits.max_total_bytes
            )));
        }
        Ok(())
    }

    /// Counts one entry against the limits; `false` (and the walk stopped) when over them.
    fn count(&self, shared: &Shared, entry: &Entry) -> bool {
        let entries = shared.entries.fetch_add(1, Ordering::Relaxed) + 1;
        let mut bytes = shared.bytes.load(Ordering::Relaxed);
        if entry.kind == EntryKind::File && entry.size <= self.limits.max_file_size {
            bytes = shared.bytes.fetch_add(entry.size, Ordering::Relaxed) + entry.size;
        }
        let over = entries > self.limits.max_entries || bytes > self.limits.max_total_bytes;
        if over {
            shared.over.store(true, Ordering::Relaxed);
            shared.wake.notify_all();
        }
        !over
    }

    /// Opens the directory of `job`, lists it and stats its entries into `found`; returns its
    /// subdirectories.
    fn read_dir(&self, job: Job, shared: &Shared, found: &mut Vec<Found>) -> Vec<Job> {
        use rustix::fs::{AtFlags, FileType};
        // Watched before it is listed: whatever changes after the listing is reported.
        let watched = self.watch.and_then(|watch| watch.add(&job.rel));
        let Some(mut dir) = self.open(&job) else {
            return Vec::new(); // unreadable: its contents are not recorded
        };
        let listed = self.list(&mut dir, &job.rel);
        let rules = self
            .ignores
            .enter(&job.rules, &job.rel, listed.has_gitignore, listed.has_git);
        if let Some(watch) = self.watch {
            watch.listed(&job.rel, watched, &rules, listed.has_git);
        }
        let dir = Arc::new(dir);
        let Ok(dir_fd) = dir.fd() else {
            return Vec::new();
        };
        let mut children = Vec::new();
        for (rel, name_at, listed_type) in listed.names {
            let name = &rel[name_at..];
            if self.skip.as_deref() == Some(rel.as_str()) {
                continue;
            }
            // The listing's type decides ignore rules before any stat (ignored paths cost none).
            let known_dir = listed_type == FileType::Directory;
            if listed_type != FileType::Unknown && rules.is_ignored(&rel, known_dir) {
                continue;
            }
            let Ok(stat) = rustix::fs::statat(dir_fd, name, AtFlags::SYMLINK_NOFOLLOW) else {
                continue; // gone since it was listed
            };
            let kind = FileType::from_raw_mode(stat.st_mode);
            let is_dir = kind == FileType::Directory;
            if listed_type == FileType::Unknown && rules.is_ignored(&rel, is_dir) {
                continue;
            }
            let Some(mut entry) = entry_of(&stat, kind, dir_fd, name) else {
                continue;
            };
            if !self.count(shared, &entry) {
                return Vec::new();
            }
            let shared_file = kind == FileType::RegularFile && stat.st_nlink > 1;
            let mut cached = false;
            if entry.kind == EntryKind::File {
                if let Some(hit) = (self.lookup)(&rel, &entry) {
                    entry = hit;
                    cached = true;
                }
            }
            if is_dir {
                children.push(Job {
                    parent: Some(dir.clone()),
                    rel: rel.clone(),
                    name_at,
                    rules: rules.clone(),
                });
            }
            found.push(Found {
                rel,
                entry,
                cached,
                shared: shared_file,
            });
        }
        children
    }

    /// The directory of `job`, opened through its parent's handle (the start directory by
    /// path), never through a symbolic link.
    fn open(&self, job: &Job) -> Option<rustix::fs::Dir> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = match &job.parent {
            Some(parent) => {
                let parent_fd = parent.fd().ok()?;
                rustix::fs::openat(parent_fd, &job.rel[job.name_at..], flags, Mode::empty())
            }
            None if job.rel.is_empty() => rustix::fs::open(self.root, flags, Mode::empty()),
            None => rustix::fs::open(self.root.join(&job.rel), flags, Mode::empty()),
        };
        fd.and_then(rustix::fs::Dir::new).ok()
    }

    /// The names of a directory as workspace paths (`.git` and names that are not UTF-8 left
    /// out), and whether it holds a `.gitignore` and a `.git`.
    fn list(&self, dir: &mut rustix::fs::Dir, rel: &str) -> Listed {
        let mut listed = Listed::default();
        while let Some(Ok(item)) = dir.read() {
            let Ok(name) = item.file_name().to_str() else {
                continue;
            };
            match name {
                "." | ".." => continue,
                ".git" => {
                    listed.has_git = true;
                    continue;
                }
                ".gitignore" => listed.has_gitignore = true,
                _ => {}
            }
            let mut path = String::with_capacity(rel.len() + 1 + name.len());
            if !rel.is_empty() {
                path.push_str(rel);
                path.push('/');
            }
            let name_at = path.len();
            path.push_str(name);
            listed.names.push((path, name_at, item.file_type()));
        }
        listed
    }
}

#[derive(Default)]
struct Listed {
    names: Vec<(String, usize, rustix::fs::FileType)>,
    has_gitignore: bool,
    has_git: bool,
}

/// The entry of a stat (`None` for what is not recorded: sockets, devices, a link whose
/// target is unreadable or not UTF-8). The stat field types differ between platforms, hence
/// conversions that are no-ops on some.
#[allow(clippy::useless_conversion, clippy::unnecessary_fallible_conversions)]
fn entry_of(
    stat: &rustix::fs::Stat,
    kind: rustix::fs::FileType,
    dir: rustix::fd::BorrowedFd<'_>,
    name: &str,
) -> Option<Entry> {
    use rustix::fs::FileType;
    let nanos = |secs: i64, nsec: i64| secs.saturating_mul(1_000_000_000).saturating_add(nsec);
    let mut entry = Entry {
        kind: EntryKind::File,
        hash: None,
        target: None,
        size: u64::try_from(stat.st_size).unwrap_or(0),
        mode: u32::from(stat.st_mode) & 0o7777,
        mtime: nanos(
            stat.st_mtime.into(),
            i64::try_from(stat.st_mtime_nsec).unwrap_or(0),
        ),
        ctime: nanos(
            stat.st_ctime.into(),
            i64::try_from(stat.st_ctime_nsec).unwrap_or(0),
        ),
        ino: stat.st_ino.into(),
    };
    match kind {
        FileType::RegularFile => {}
        FileType::Directory => {
            entry.kind = EntryKind::Dir;
            entry.size = 0;
        }
        FileType::Symlink => {
            let target = rustix::fs::readlinkat(dir, name, Vec::new()).ok()?;
            entry.kind = EntryKind::Symlink;
            entry.mode = 0;
            entry.target = Some(target.into_string().ok()?);
        }
        _ => return None,
    }
    Some(entry)
}
