//! Change notification for the snapshots of one run (Linux inotify): every directory a full
//! walk lists is watched, and the next snapshot drains the queue of events to learn which
//! paths to look at again instead of walking the whole tree. No thread: the descriptor is
//! non-blocking and read at the start of each snapshot.
//!
//! The events name a path under a watched directory (a file written, created, deleted,
//! renamed, its attributes changed) or the directory itself. Besides them, a drain checks
//! what no watch of the workspace reports: the ignore files of the directories above the root
//! and the `.git/info/exclude` files (`.git` is not watched), the root itself, and the files
//! with other hard links (a write through another name is reported to that name's directory
//! only). Whenever the events cannot be trusted — the kernel queue overflowed, a watch could
//! not be added (the user's watch limit, or the cap), the queue could not be read, the root
//! was removed or replaced — [`Watcher::drain`] says so and the snapshot walks the whole tree.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::mem::MaybeUninit;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use rustix::fd::OwnedFd;
use rustix::fs::inotify::{self, CreateFlags, ReadFlags, WatchFlags};
use rustix::io::Errno;

use super::ignores::Rules;
use super::snapshot::{RACY_NS, now_ns};

/// A watch descriptor.
pub(crate) type Wd = i32;

/// How many watches to leave to the user's other programs below the kernel's per-user limit.
const KERNEL_MARGIN: usize = 2048;

/// More events than this in one drain (a writer faster than the reads): walk instead.
const MAX_EVENTS: usize = 1 << 16;

/// What a directory watch reports: its entries created, deleted, renamed, written or with
/// changed attributes, and the directory itself removed or renamed.
fn watch_flags() -> WatchFlags {
    WatchFlags::CREATE
        | WatchFlags::DELETE
        | WatchFlags::MODIFY
        | WatchFlags::CLOSE_WRITE
        | WatchFlags::ATTRIB
        | WatchFlags::MOVED_FROM
        | WatchFlags::MOVED_TO
        | WatchFlags::DELETE_SELF
        | WatchFlags::MOVE_SELF
        | WatchFlags::ONLYDIR
        | WatchFlags::DONT_FOLLOW
}

/// What the events of one drain ask to look at again.
#[derive(Debug, Default)]
pub(crate) struct Events {
    /// Paths to stat again (and their directories, whose stat changes with their entries).
    pub dirty: BTreeSet<String>,
    /// Directories whose ignore rules may have changed: everything below them is walked again.
    pub rewalk: BTreeSet<String>,
}

/// The stat of a file the ignore rules are read from (size, mtime, ctime, inode; `None`: it
/// does not exist) and when it was taken (ns since the epoch).
#[derive(Clone, Copy, Debug)]
struct Stamp {
    stat: Option<(u64, i64, i64, u64)>,
    taken: i64,
}

/// The inotify instance of one run's snapshots and what it watches.
#[derive(Debug)]
pub(crate) struct Watcher {
    fd: OwnedFd,
    root: PathBuf,
    cap: usize,
    maps: Mutex<Maps>,
    /// A watch could not be added where one was needed: the events miss something.
    broken: AtomicBool,
    /// Set by tests to make the next drain behave as after a queue overflow.
    #[cfg(test)]
    overflow: AtomicBool,
}

#[derive(Debug, Default)]
struct Maps {
    dirs: HashMap<Wd, String>,
    wds: HashMap<String, Wd>,
    /// The rules in force in each listed directory.
    rules: HashMap<String, Arc<Rules>>,
    /// The directories holding a `.git`, with the stat of their exclude file.
    git: HashMap<String, Stamp>,
    /// Regular files with several hard links, stat'ed at every drain.
    links: HashSet<String>,
    /// The ignore files above the root, with their stats.
    above: Vec<(PathBuf, Stamp)>,
    /// The root's inode.
    root: Option<u64>,
}

#[cfg(test)]
thread_local! {
    static FAIL_INIT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Makes creating a watcher fail in this thread (tests of the fallback).
#[cfg(test)]
pub(crate) fn fail_init_in_this_thread(fail: bool) {
    FAIL_INIT.with(|f| f.set(fail));
}

impl Watcher {
    /// A new inotify instance for the workspace `root`, adding at most `cap` watches (fewer
    /// when the user's kernel limit is lower), watching nothing yet.
    pub(crate) fn new(root: &Path, cap: usize) -> std::io::Result<Self> {
        #[cfg(test)]
        if FAIL_INIT.with(std::cell::Cell::get) {
            return Err(std::io::Error::other("inotify disabled by the test"));
        }
        let fd = inotify::init(CreateFlags::NONBLOCK | CreateFlags::CLOEXEC)?;
        let cap = match kernel_limit() {
            Some(limit) => cap.min(limit.saturating_sub(KERNEL_MARGIN)),
            None => cap,
        };
        let maps = Maps {
            above: root
                .ancestors()
                .skip(1)
                .flat_map(|dir| [dir.join(".gitignore"), dir.join(".git/info/exclude")])
                .map(|file| {
                    let stamp = stamp(&file);
                    (file, stamp)
                })
                .collect(),
            root: std::fs::symlink_metadata(root).ok().map(|m| ino_of(&m)),
            ..Maps::default()
        };
        Ok(Watcher {
            fd,
            root: root.to_path_buf(),
            cap,
            maps: Mutex::new(maps),
            broken: AtomicBool::new(false),
            #[cfg(test)]
            overflow: AtomicBool::new(false),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a watch that was needed could not be added (the events will miss changes).
    pub(crate) fn is_broken(&self) -> bool {
        self.broken.load(Ordering::Relaxed)
    }

    /// Starts watching the workspace directory `rel`, before it is listed. `None` when it
    /// could not be watched (over the cap or the user's limit: the watcher is broken).
    pub(crate) fn add(&self, rel: &str) -> Option<Wd> {
        if self.lock().dirs.len() >= self.cap {
            self.broken.store(true, Ordering::Relaxed);
            return None;
        }
        let path = if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        };
        match inotify::add_watch(&self.fd, &path, watch_flags()) {
            Ok(wd) => Some(wd),
            // Gone or unreadable: its listing fails too, or `listed` sees a listing unwatched.
            Err(Errno::NOENT | Errno::ACCESS | Errno::NOTDIR | Errno::LOOP) => None,
            Err(_) => {
                self.broken.store(true, Ordering::Relaxed);
                None
            }
        }
    }

    /// The workspace directory `rel` was listed, watched as `wd`, with `rules` in force in it.
    pub(crate) fn listed(&self, rel: &str, wd: Option<Wd>, rules: &Arc<Rules>, has_git: bool) {
        let Some(wd) = wd else {
            // Listed but not watched: what changes in it would go unseen.
            self.broken.store(true, Ordering::Relaxed);
            return;
        };
        let exclude = has_git.then(|| stamp(&self.root.join(rel).join(".git/info/exclude")));
        let mut maps = self.lock();
        // The same directory under a new name (moved): the watch is the same.
        if let Some(old) = maps.dirs.insert(wd, rel.to_owned()) {
            if old != rel && maps.wds.get(&old) == Some(&wd) {
                maps.wds.remove(&old);
            }
        }
        maps.wds.insert(rel.to_owned(), wd);
        maps.rules.insert(rel.to_owned(), rules.clone());
        match exclude {
            Some(stamp) => maps.git.insert(rel.to_owned(), stamp),
            None => maps.git.remove(rel),
        };
    }

    /// Records whether the file `rel` has other hard links (then it is stat'ed at each drain).
    pub(crate) fn set_shared(&self, rel: &str, shared: bool) -> bool {
        let mut maps = self.lock();
        if shared {
            maps.links.insert(rel.to_owned())
        } else {
            maps.links.remove(rel);
            false
        }
    }

    /// The rules in force in the listed directory `rel`.
    pub(crate) fn rules_of(&self, rel: &str) -> Option<Arc<Rules>> {
        self.lock().rules.get(rel).cloned()
    }

    /// Whether the directory `rel` is watched.
    pub(crate) fn is_watched(&self, rel: &str) -> bool {
        self.lock().wds.contains_key(rel)
    }

    /// Stops watching the directory `dir` and every directory below it (removed, replaced,
    /// or about to be walked again).
    pub(crate) fn forget(&self, dir: &str) {
        let mut maps = self.lock();
        let below = |path: &str| is_below(path, dir);
        let gone: Vec<(String, Wd)> = maps
            .wds
            .iter()
            .filter(|(path, _)| below(path))
            .map(|(path, wd)| (path.clone(), *wd))
            .collect();
        for (path, wd) in gone {
            maps.wds.remove(&path);
            maps.dirs.remove(&wd);
            // Already gone when the directory was deleted: nothing to undo.
            let _ = inotify::remove_watch(&self.fd, wd);
        }
        maps.rules.retain(|path, _| !below(path));
        maps.git.retain(|path, _| !below(path));
        maps.links.retain(|path| !below(path));
    }

    /// Makes the next drain report an overflow (tests of the fallback).
    #[cfg(test)]
    pub(crate) fn simulate_overflow(&self) {
        self.overflow.store(true, Ordering::Relaxed);
    }

    /// The paths to look at again since the last drain, or `None` when the events cannot be
    /// trusted (the snapshot must walk the whole tree).
    pub(crate) fn drain(&self) -> Option<Events> {
        #[cfg(test)]
        if self.overflow.swap(false, Ordering::Relaxed) {
            return None;
        }
        if self.is_broken() {
            return None;
        }
        let mut events = Events::default();
        let mut maps = self.lock();
        let mut buf = vec![MaybeUninit::<u8>::uninit(); 64 * 1024];
        let mut reader = inotify::Reader::new(&self.fd, &mut buf);
        let mut seen = 0usize;
        loop {
            match reader.next() {
                Ok(event) => {
                    seen += 1;
                    if seen > MAX_EVENTS
                        || !maps.note(event.wd(), event.events(), event.file_name(), &mut events)
                    {
                        return None;
                    }
                }
                Err(Errno::AGAIN) => break,
                Err(Errno::INTR) => {}
                Err(_) => return None,
            }
        }
        maps.unwatched_changes(&self.root, &mut events)?;
        Some(events)
    }
}

impl Maps {
    /// Adds what one event names to `events`; `false` when the events cannot be trusted.
    fn note(
        &mut self,
        wd: Wd,
        flags: ReadFlags,
        name: Option<&std::ffi::CStr>,
        events: &mut Events,
    ) -> bool {
        if flags.intersects(ReadFlags::QUEUE_OVERFLOW | ReadFlags::UNMOUNT) {
            return false;
        }
        let Some(dir) = self.dirs.get(&wd).cloned() else {
            return true; // a watch removed since: its directory was dealt with then
        };
        let gone = ReadFlags::DELETE_SELF | ReadFlags::MOVE_SELF | ReadFlags::IGNORED;
        if dir.is_empty() && flags.intersects(gone) {
            return false; // the root itself removed or renamed
        }
        if flags.contains(ReadFlags::IGNORED) {
            // The kernel dropped the watch (its directory was deleted).
            self.dirs.remove(&wd);
            if self.wds.get(&dir) == Some(&wd) {
                self.wds.remove(&dir);
            }
        }
        match name.map(std::ffi::CStr::to_str) {
            Some(Ok(name)) => {
                if name == ".gitignore" || name == ".git" {
                    events.rewalk.insert(dir.clone());
                }
                events.dirty.insert(join(&dir, name));
                if !dir.is_empty() {
                    events.dirty.insert(dir);
                }
            }
            Some(Err(_)) => {} // not UTF-8: never recorded
            None if dir.is_empty() => {}
            None => {
                events.dirty.insert(dir);
            }
        }
        true
    }

    /// What the watches cannot report: the root replaced, an ignore file above the root or a
    /// `.git/info/exclude` changed, files with other hard links. `None`: walk everything.
    fn unwatched_changes(&mut self, root: &Path, events: &mut Events) -> Option<()> {
        let now = std::fs::symlink_metadata(root).ok().map(|m| ino_of(&m));
        if now.is_none() || now != self.root {
            return None;
        }
        if self
            .above
            .iter()
            .any(|(file, was)| !same_stamp(was, &stamp(file)))
        {
            return None;
        }
        for (dir, was) in &mut self.git {
            let now = stamp(&root.join(dir.as_str()).join(".git/info/exclude"));
            if !same_stamp(was, &now) {
                events.rewalk.insert(dir.clone());
                *was = now;
            }
        }
        events.dirty.extend(self.links.iter().cloned());
        Some(())
    }
}

/// Whether `path` is `dir` or lies below it (`""`: the root, above everything).
pub(crate) fn is_below(path: &str, dir: &str) -> bool {
    dir.is_empty()
        || path
            .strip_prefix(dir)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn ino_of(meta: &std::fs::Metadata) -> u64 {
    std::os::unix::fs::MetadataExt::ino(meta)
}

/// The stat of a file the ignore rules are read from (followed like the rules' reader does),
/// with the time it was taken.
fn stamp(file: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let taken = now_ns();
    let stat = std::fs::metadata(file).ok().map(|m| {
        let nanos = |s: i64, ns: i64| s.saturating_mul(1_000_000_000).saturating_add(ns);
        (
            m.size(),
            nanos(m.mtime(), m.mtime_nsec()),
            nanos(m.ctime(), m.ctime_nsec()),
            m.ino(),
        )
    });
    Stamp { stat, taken }
}

/// Whether an ignore file is unchanged: same stat, and not changed so close to when the
/// first stat was taken that a write in the same timestamp tick could hide.
fn same_stamp(was: &Stamp, now: &Stamp) -> bool {
    was.stat == now.stat
        && was
            .stat
            .is_none_or(|(_, mtime, _, _)| mtime.saturating_add(RACY_NS) < was.taken)
}

/// The user's inotify watch limit.
fn kernel_limit() -> Option<usize> {
    std::fs::read_to_string("/proc/sys/fs/inotify/max_user_watches")
        .ok()?
        .trim()
        .parse()
        .ok()
}
