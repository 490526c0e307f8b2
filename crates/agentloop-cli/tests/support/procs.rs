//! The processes a test's commands leave behind, seen through `/proc`: whether one is still
//! alive, the pid a command wrote to a file, and a poll for a process to be gone (a kill is
//! asynchronous to the check). The waits are hang guards: each ends as soon as its condition
//! holds.

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether process `pid` exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rfind(')')
                .map(|i| !s[i + 1..].trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// The pid written to `path`, once it is there (at most 30 s).
pub fn read_pid(path: &Path) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if let Some(pid) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            return pid;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{} was never written", path.display());
}

/// Polls until process `pid` is gone; false if it is still alive after 10 s.
pub fn gone(pid: u32) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !alive(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
