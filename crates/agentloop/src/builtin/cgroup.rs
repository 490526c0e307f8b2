//! One cgroup (v2) per shell command, so that ending the call ends everything it started, with
//! no way out for processes that change session, process group or environment, or that fork
//! faster than a process scan can follow.
//!
//! Where the agent may create cgroups below its own (root, or a delegated subtree such as a
//! systemd user scope), each command gets `<agent's cgroup>/agentloop-<pid>-<n>`; its shell is
//! moved into it before the user's command starts (see the `shell` module's start gate), and
//! every process it starts is born inside. A sandboxed command cannot move itself out: Landlock
//! denies it every write below `/sys/fs/cgroup`. Ending the call freezes the cgroup (no process
//! in it runs again, so none can react to a sibling's death, fork, or print "Killed"), kills
//! it (`cgroup.kill`, or a `SIGKILL` per member where the kernel is older than 5.14), waits
//! until it is empty and removes it. Where cgroups cannot be created, [`CallCgroup::create`]
//! returns `None` and the `procs` module's subreaper-and-marker scan is the defence.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Cgroups of calls that may still hold processes (for [`kill_all`]).
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

static NEXT: AtomicU64 = AtomicU64::new(1);

/// The cgroup of one shell call. Dropping it does nothing: [`CallCgroup::kill`] ends it.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    path: PathBuf,
}

impl CallCgroup {
    /// Creates a fresh cgroup below the agent's own, or `None` where that is not possible
    /// (no cgroup v2, not delegated to this user, inside another agent's sandbox, …).
    pub(crate) fn create() -> Option<CallCgroup> {
        let parent = own_cgroup()?;
        let path = parent.join(format!(
            "agentloop-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        if let Err(e) = std::fs::create_dir(&path) {
            tracing::debug!("no cgroup for the shell command ({}): {e}", path.display());
            return None;
        }
        if let Ok(mut live) = LIVE.lock() {
            live.push(path.clone());
        }
        Some(CallCgroup { path })
    }

    /// Moves process `pid` (and so everything it starts from now on) into this cgroup.
    pub(crate) fn add(&self, pid: u32) -> io::Result<()> {
        std::fs::write(self.path.join("cgroup.procs"), pid.to_string())
    }

    /// Leaves the cgroup out of [`kill_all`] (its command is meant to outlive the agent).
    pub(crate) fn forget(&self) {
        if let Ok(mut live) = LIVE.lock() {
            live.retain(|p| p != &self.path);
        }
    }

    /// Freezes, kills and removes the cgroup (see the module docs); forgets it once removed.
    pub(crate) fn kill(&self) {
        if end(&self.path) {
            if let Ok(mut live) = LIVE.lock() {
                live.retain(|p| p != &self.path);
            }
        }
    }
}

/// Ends every call cgroup of this process that still exists (the agent is exiting).
pub(crate) fn kill_all() {
    let paths: Vec<PathBuf> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    for path in paths {
        if end(&path) {
            if let Ok(mut live) = LIVE.lock() {
                live.retain(|p| p != &path);
            }
        }
    }
}

/// Freezes, kills, waits for and removes the cgroup at `path`; true once it is gone.
fn end(path: &Path) -> bool {
    if !path.exists() {
        return true;
    }
    if populated(path) != Some(false) {
        // Frozen first, so no member runs between its siblings' deaths and its own.
        if std::fs::write(path.join("cgroup.freeze"), "1").is_ok() {
            wait_for(path, "frozen 1", 200);
        }
        if std::fs::write(path.join("cgroup.kill"), "1").is_err() {
            kill_members(path);
        }
        wait_for(path, "populated 0", 2500);
    }
    for _ in 0..50 {
        match std::fs::remove_dir(path) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) => std::thread::sleep(Duration::from_millis(2)),
        }
    }
    tracing::warn!(
        "the shell command's cgroup {} could not be removed; it is retried at exit",
        path.display()
    );
    false
}

/// `SIGKILL` to every member, until none is left (kernels without `cgroup.kill`).
fn kill_members(path: &Path) {
    use rustix::process::{Pid, Signal, kill_process};
    for _ in 0..100 {
        let Ok(procs) = std::fs::read_to_string(path.join("cgroup.procs")) else {
            return;
        };
        let pids: Vec<Pid> = procs
            .lines()
            .filter_map(|l| l.trim().parse::<i32>().ok())
            .filter_map(Pid::from_raw)
            .collect();
        if pids.is_empty() {
            return;
        }
        for pid in pids {
            let _ = kill_process(pid, Signal::KILL);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether the cgroup has live members (`None` if it cannot be read).
fn populated(path: &Path) -> Option<bool> {
    let events = std::fs::read_to_string(path.join("cgroup.events")).ok()?;
    Some(!events.lines().any(|l| l.trim() == "populated 0"))
}

/// Polls `cgroup.events` until it has the line `wanted`, at most `max_ms` milliseconds.
fn wait_for(path: &Path, wanted: &str, max_ms: u32) {
    for _ in 0..max_ms {
        match std::fs::read_to_string(path.join("cgroup.events")) {
            Ok(events) if events.lines().any(|l| l.trim() == wanted) => return,
            Ok(_) => std::thread::sleep(Duration::from_millis(1)),
            Err(_) => return,
        }
    }
}

/// The agent's own cgroup v2 directory, if it may create children there (checked once).
fn own_cgroup() -> Option<PathBuf> {
    static OWN: OnceLock<Option<PathBuf>> = OnceLock::new();
    OWN.get_or_init(|| {
        let found = find_own_cgroup();
        if found.is_none() {
            tracing::debug!(
                "no writable cgroup v2 for shell commands; processes are tracked by scanning"
            );
        }
        found
    })
    .clone()
}

fn find_own_cgroup() -> Option<PathBuf> {
    let membership = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = membership.lines().find_map(|l| l.strip_prefix("0::"))?;
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (root, mount_point) = cgroup2_mount(&mountinfo)?;
    let relative = Path::new(own).strip_prefix(&root).ok()?;
    let dir = mount_point.join(relative);
    let writable = rustix::fs::access(&dir, rustix::fs::Access::WRITE_OK).is_ok()
        && dir.join("cgroup.procs").is_file();
    writable.then_some(dir)
}

/// The cgroup2 mount's root within the hierarchy and its mount point, from `mountinfo`
/// (`id parent major:minor root mount-point options … - cgroup2 source options`).
fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, PathBuf)> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mut fields = before.split_whitespace();
        let root = fields.nth(3)?;
        let mount_point = fields.next()?;
        Some((unescape(root).into(), unescape(mount_point).into()))
    })
}

/// Undoes `mountinfo`'s octal escapes (`\040` for a space).
fn unescape(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut rest = field;
    while let Some(at) = rest.find('\\') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 4);
        match code.and_then(|c| u8::from_str_radix(c, 8).ok()) {
            Some(byte) => {
                out.push(char::from(byte));
                rest = &rest[at + 4..];
            }
            None => {
                out.push('\\');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found() {
        let info = "24 1 0:22 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
                    35 24 0:31 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(info),
            Some(("/".into(), "/sys/fs/cgroup/unified".into()))
        );
        assert_eq!(cgroup2_mount("1 0 0:1 / / rw - ext4 /dev/sda rw\n"), None);
        assert_eq!(unescape("/a\\040b"), "/a b");
    }
}
