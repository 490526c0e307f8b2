//! Every process a shell command starts ends with the call: when it finishes, times out or is
//! aborted, and when the agent exits ([`kill_shell_processes`]).
//!
//! The main defence is a cgroup per command (the `cgroup` module): nothing started inside can
//! leave it, however it detaches. Where the agent cannot create cgroups, this module's scan is
//! the defence: the agent makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so an
//! orphaned descendant is re-parented to the agent instead of to init and stays findable as a
//! descendant of the agent; each command also carries a marker variable,
//! `AGENTLOOP_SHELL_CALL`, unique to the call. When the call ends, every descendant of the
//! agent that is a descendant of the command's shell or carries its marker is stopped
//! (`SIGSTOP`, repeated until a pass finds no new one, so a process forking meanwhile is caught
//! too), then killed (`SIGKILL`), and the killed processes that were re-parented to the agent
//! are reaped. Both defences run for every call (the scan finds nothing after the cgroup was
//! killed). Off Linux only the process group is killed.
//!
//! Known limit of the scan (without cgroups): a process that leaves the command's tree (its
//! parent exits) *and* scrubs its environment of the marker escapes it. Run the agent where
//! it may create cgroups (as root, or in a systemd scope with delegation) to close that gap.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The environment variable that marks a command's processes.
pub(crate) const MARKER: &str = "AGENTLOOP_SHELL_CALL";

static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// Markers of the calls whose processes may still run.
static LIVE: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// A fresh marker value for one call (`<agent pid>.<n>`), registered as live.
pub(crate) fn new_marker() -> String {
    let marker = format!(
        "{}.{}",
        std::process::id(),
        NEXT_CALL.fetch_add(1, Ordering::Relaxed)
    );
    if let Ok(mut live) = LIVE.lock() {
        live.push(marker.clone());
    }
    marker
}

/// A fresh marker for a command meant to outlive the agent (`kept.<agent pid>.<n>`): not
/// registered, and not matched by [`kill_shell_processes`]'s sweep.
pub(crate) fn new_kept_marker() -> String {
    format!(
        "kept.{}.{}",
        std::process::id(),
        NEXT_CALL.fetch_add(1, Ordering::Relaxed)
    )
}

/// Makes the agent a child subreaper once (Linux), so orphaned descendants stay findable.
pub(crate) fn become_subreaper() {
    #[cfg(target_os = "linux")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            if let Err(e) = rustix::process::set_child_subreaper(Some(rustix::process::getpid())) {
                tracing::warn!(
                    "cannot become a child subreaper ({e}); processes a shell command detaches \
                     with setsid may outlive it"
                );
            }
        });
    }
}

/// Kills the command whose shell is `shell_pid` and every process it started (see the module
/// docs), then forgets its marker.
pub(crate) fn kill_call(shell_pid: Option<u32>, marker: &str) {
    #[cfg(target_os = "linux")]
    linux::kill_matching(
        &|proc_| {
            shell_pid.is_some_and(|pid| proc_.descends_from(pid)) || proc_.has_marker(marker, false)
        },
        shell_pid,
    );
    #[cfg(unix)]
    if let Some(pgid) = shell_pid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        // ESRCH (the group is already gone) is the common, harmless failure.
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
    if let Ok(mut live) = LIVE.lock() {
        live.retain(|m| m != marker);
    }
}

/// Kills every process any shell command of this agent started and that is still running.
///
/// Call it when the application exits, including from its signal handling (the CLI does on
/// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGALRM and at a normal exit): shell commands already in flight are killed
/// with their whole trees, detached (`setsid`) ones included. Safe to call more than once and
/// from any thread; it does nothing when no command ever ran.
pub fn kill_shell_processes() {
    #[cfg(target_os = "linux")]
    super::cgroup::kill_all();
    let markers: Vec<String> = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
    #[cfg(target_os = "linux")]
    {
        let prefix = format!("{}.", std::process::id());
        linux::kill_matching(&|proc_| proc_.has_marker(&prefix, true), None);
    }
    for marker in markers {
        kill_call(None, &marker);
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use super::MARKER;
    use std::collections::{HashMap, HashSet};

    /// One process as seen in `/proc`, with the parent map to walk its ancestry.
    pub(super) struct Proc<'a> {
        pid: u32,
        parents: &'a HashMap<u32, u32>,
    }

    impl Proc<'_> {
        /// Whether `ancestor` is this process or one of its ancestors.
        pub(super) fn descends_from(&self, ancestor: u32) -> bool {
            let mut pid = self.pid;
            for _ in 0..4096 {
                if pid == ancestor {
                    return true;
                }
                match self.parents.get(&pid) {
                    Some(&parent) if parent != pid && parent > 0 => pid = parent,
                    _ => return false,
                }
            }
            false
        }

        /// Whether the process's environment has the marker `value` (or, with `prefix`, a
        /// marker value starting with it).
        pub(super) fn has_marker(&self, value: &str, prefix: bool) -> bool {
            let Ok(environ) = std::fs::read(format!("/proc/{}/environ", self.pid)) else {
                return false;
            };
            let wanted = format!("{MARKER}={value}");
            environ.split(|&b| b == 0).any(|entry| {
                if prefix {
                    entry.starts_with(wanted.as_bytes())
                } else {
                    entry == wanted.as_bytes()
                }
            })
        }
    }

    /// `pid → parent pid` for every process, from `/proc/*/stat`.
    fn parent_map() -> HashMap<u32, u32> {
        let mut parents = HashMap::new();
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return parents;
        };
        for entry in entries.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid …`; comm may contain spaces and parentheses.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
                continue;
            };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|s| s.parse().ok()) {
                parents.insert(pid, ppid);
            }
        }
        parents
    }

    /// The pids of the agent's descendants that `matches` (the agent itself excluded).
    fn matching(matches: &dyn Fn(&Proc<'_>) -> bool) -> Vec<u32> {
        let me = std::process::id();
        let parents = parent_map();
        parents
            .keys()
            .copied()
            .filter(|&pid| pid != me)
            .filter(|&pid| {
                let proc_ = Proc {
                    pid,
                    parents: &parents,
                };
                proc_.descends_from(me) && matches(&proc_)
            })
            .collect()
    }

    fn signal(pid: u32, signal: rustix::process::Signal) -> bool {
        i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .is_some_and(|p| rustix::process::kill_process(p, signal).is_ok())
    }

    /// Stops (`SIGSTOP`) every descendant of the agent that `matches`, repeatedly until a pass
    /// finds none that is not stopped yet, then kills (`SIGKILL`) them all, and repeats the
    /// kill until a pass finds none alive; then reaps those re-parented to the agent (except
    /// `owned`, the shell itself, whose status Tokio collects). Stopping first means no
    /// process runs between a relative's death and its own: none can fork a replacement, and
    /// a shell cannot see its child killed and exit with its own status first.
    pub(super) fn kill_matching(matches: &dyn Fn(&Proc<'_>) -> bool, owned: Option<u32>) {
        use rustix::process::{Pid, Signal, WaitOptions, waitpid};
        let me = std::process::id();
        let mut stopped: HashSet<u32> = HashSet::new();
        for _ in 0..50 {
            let fresh: Vec<u32> = matching(matches)
                .into_iter()
                .filter(|pid| !stopped.contains(pid))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for pid in fresh {
                if signal(pid, Signal::STOP) {
                    stopped.insert(pid);
                }
            }
        }
        let mut killed: HashSet<u32> = HashSet::new();
        for &pid in &stopped {
            if signal(pid, Signal::KILL) {
                killed.insert(pid);
            }
        }
        for _ in 0..50 {
            let mut found = false;
            for pid in matching(matches) {
                // A zombie already killed needs no further signal.
                if killed.contains(&pid) && is_zombie(pid) {
                    continue;
                }
                if signal(pid, Signal::KILL) {
                    found = true;
                    killed.insert(pid);
                }
            }
            if !found {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if killed.is_empty() {
            return;
        }
        // Reap what was re-parented to us: those zombies have no other parent to wait for them.
        // Only processes this function killed are waited for, so children the application
        // spawned itself (and waits for) are never taken from it.
        std::thread::sleep(std::time::Duration::from_millis(5));
        let parents = parent_map();
        for pid in killed {
            if Some(pid) != owned && parents.get(&pid) == Some(&me) {
                if let Some(p) = i32::try_from(pid).ok().and_then(Pid::from_raw) {
                    let _ = waitpid(Some(p), WaitOptions::NOHANG);
                }
            }
        }
    }

    fn is_zombie(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rfind(')')
                    .map(|i| s[i + 1..].trim_start().starts_with('Z'))
            })
            .unwrap_or(true)
    }
}
