//! A measurement, not a check: how long interactive mode (bare `agentloop` on a terminal) takes
//! to draw its first prompt, next to `agentloop --version` (the cost of starting the process at
//! all), with an empty session database and with 200 sessions of 200 messages, fresh and with
//! `--continue`. Each start runs in its own pseudo-terminal; the clock starts once the binary
//! executes and stops when `› ` appears.
//! Also times `agentloop sessions list` on the 200 sessions. Prints medians; asserts nothing
//! about time.
//!
//! A second measurement runs bare `agentloop` and `agentloop --version` side by side
//! (interleaved pairs, so load from other processes hits both alike) with an empty database,
//! with no database yet, with 200 sessions, and with a large CA bundle in `SSL_CERT_FILE`, and
//! prints each as a ratio of medians to `--version`, with the load average.
//!
//! ```sh
//! cargo build --release -p agentloop-cli
//! AGENTLOOP_BIN=target/release/agentloop \
//!     cargo test -p agentloop-cli --test startup -- --ignored --nocapture
//! ```
//!
//! Without `AGENTLOOP_BIN` it measures the binary of the test's own profile.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use agentloop::session::{NewSession, SessionSettings, SessionStore, SqliteStore};
use agentloop::transcript::{Message, Part, StopReason, Usage};
use expectrl::{Eof, Session};

mod support;

use support::Scratch;

const RUNS: usize = 20;

fn binary() -> PathBuf {
    std::env::var_os("AGENTLOOP_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_agentloop")))
}

/// The command with a clean environment: a dummy key (no request is made before the prompt),
/// home, data and config directories in the scratch directory.
fn command(dir: &Scratch, db: &Path, args: &[&str]) -> Command {
    let mut cmd = dir.env_cmd_of(binary());
    cmd.current_dir(dir.ws()).arg("--db").arg(db).args(args);
    cmd
}

/// The median, in milliseconds.
fn median_ms(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1000.0
}

/// The 1-minute load average (`/proc/loadavg`), or "?" where there is none.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

/// Median, 90th percentile and minimum, in milliseconds.
fn summary(mut times: Vec<Duration>) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let p90 = times[(times.len() * 9 / 10).min(times.len() - 1)];
    format!(
        "median {:6.1} ms  p90 {:6.1} ms  min {:6.1} ms  ({} runs)",
        ms(times[times.len() / 2]),
        ms(p90),
        ms(times[0]),
        times.len()
    )
}

/// Time from spawning `agentloop ARGS…` in a pseudo-terminal to its first input prompt; then
/// Ctrl-D. A resumed chat first shows its earlier conversation, whose prompts are drawn after
/// `› ` too: with `after`, the clock stops at the first `› ` that follows that text (the last
/// earlier prompt), which is the input prompt.
fn to_first_prompt(dir: &Scratch, db: &Path, args: &[&str], after: Option<&str>) -> Duration {
    prompt_of(command(dir, db, args), after)
}

/// [`to_first_prompt`] of a prepared command.
fn prompt_of(cmd: Command, after: Option<&str>) -> Duration {
    let (mut session, start) = spawned(cmd);
    let mut seen = Vec::new();
    let from = after.map_or(0, |text| {
        read_past(&mut session, &mut seen, text, 0)
            .unwrap_or_else(|| panic!("no {text:?}: {}", String::from_utf8_lossy(&seen)))
    });
    if read_past(&mut session, &mut seen, "› ", from).is_none() {
        panic!("no prompt: {}", String::from_utf8_lossy(&seen));
    }
    let elapsed = start.elapsed();
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session
        .send(expectrl::ControlCode::EndOfTransmission)
        .unwrap();
    let _ = session.expect(Eof);
    elapsed
}

/// Time from spawning `cmd` in a pseudo-terminal to the end of its output, read the same way
/// as [`prompt_of`] reads (the floor a start measured there is compared with).
fn output_of(cmd: Command) -> Duration {
    let (mut session, start) = spawned(cmd);
    let mut seen = Vec::new();
    assert!(read_past(&mut session, &mut seen, "\u{0}", 0).is_none());
    let elapsed = start.elapsed();
    assert!(!seen.is_empty());
    elapsed
}

/// `cmd` started in a new pseudo-terminal, and when the clock starts: once the binary is
/// executing (the spawn returns when the exec succeeded). What comes before — forking the test
/// process and closing every descriptor up to the limit in the child — is the harness's cost,
/// tens of milliseconds on a loaded machine, and would hide the binary's own.
fn spawned(cmd: Command) -> (Session, Instant) {
    let session = Session::spawn(cmd).unwrap();
    (session, Instant::now())
}

/// Reads the terminal until `needle` appears at or after `from` in `seen` (what was read so
/// far); the offset just past it, or `None` at the end of the output. The reads block:
/// `expect`'s polling loop spins, and on a small machine a spinning reader takes the CPU from
/// the process being measured (it more than doubled the times of a chat's start here).
fn read_past(
    session: &mut Session,
    seen: &mut Vec<u8>,
    needle: &str,
    from: usize,
) -> Option<usize> {
    let needle = needle.as_bytes();
    let mut buf = [0u8; 4096];
    loop {
        let found = seen
            .get(from..)
            .and_then(|tail| tail.windows(needle.len()).position(|w| w == needle));
        if let Some(at) = found {
            return Some(from + at + needle.len());
        }
        match std::io::Read::read(session, &mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// The text of the last prompt of every populated session (`question 99 words words …`).
const LAST_PROMPT: &str = "question 99 ";

/// 200 sessions of 200 messages (100 prompts and 100 replies with usage), in `workspace`.
fn populate(db: &Path, workspace: &Path) {
    let store = SqliteStore::open(db).unwrap();
    let mut conversation = Vec::new();
    for i in 0..100u64 {
        conversation.push(Message::user(format!(
            "question {i} {}",
            "words ".repeat(40)
        )));
        let mut reply = Message::assistant(
            vec![Part::text("answer words ".repeat(60))],
            StopReason::Stop,
        );
        reply.model = Some("gpt-4o-mini".into());
        reply.usage = Some(Usage {
            input_tokens: 1000 + i,
            output_tokens: 200,
            ..Usage::default()
        });
        conversation.push(reply);
    }
    let settings = SessionSettings::new()
        .workspace(std::fs::canonicalize(workspace).unwrap())
        .provider("openai")
        .model("gpt-4o-mini")
        .base_url("https://api.openai.com/v1");
    for _ in 0..200 {
        store
            .create_with(NewSession::new().settings(settings.clone()), &conversation)
            .unwrap();
    }
}

#[test]
#[ignore = "a measurement; run by hand (see the module docs)"]
fn interactive_start_up_to_the_first_prompt() {
    let dir = Scratch::new();
    let empty = dir.path("empty.db");
    let full = dir.path("full.db");
    drop(SqliteStore::open(&empty).unwrap());
    let built = Instant::now();
    populate(&full, &dir.ws());
    println!("binary: {}", binary().display());
    println!(
        "populated 200 sessions x 200 messages in {:.1} s",
        built.elapsed().as_secs_f64()
    );

    // Warm the page cache once per variant, then measure.
    // In a pseudo-terminal and timed like the starts to the prompt below.
    let version = |_: ()| output_of(command(&dir, &empty, &["--version"]));
    version(());
    let floor: Vec<Duration> = (0..RUNS).map(|_| version(())).collect();
    println!("agentloop --version            {}", summary(floor));
    for (label, args) in [
        ("agentloop sessions list       ", &["sessions", "list"][..]),
        (
            "agentloop sessions list -w    ",
            &["sessions", "list", "-w"][..],
        ),
    ] {
        let list = |_: ()| {
            let start = Instant::now();
            let out = command(&dir, &full, args).output().unwrap();
            assert!(out.status.success());
            assert!(String::from_utf8_lossy(&out.stdout).lines().count() > 200);
            start.elapsed()
        };
        list(());
        let times: Vec<Duration> = (0..RUNS).map(|_| list(())).collect();
        println!("{label} {}  (200 sessions of 200 messages)", summary(times));
    }
    for (label, db, args, after) in [
        ("agentloop (empty database)    ", &empty, &[][..], None),
        ("agentloop (200 sessions)      ", &full, &[][..], None),
        (
            "agentloop -c (200 sessions)   ",
            &full,
            &["chat", "--continue"][..],
            // The resumed conversation's last prompt; its reply has no `› `.
            Some(LAST_PROMPT),
        ),
    ] {
        to_first_prompt(&dir, db, args, after);
        let times: Vec<Duration> = (0..RUNS)
            .map(|_| to_first_prompt(&dir, db, args, after))
            .collect();
        println!("{label} {}", summary(times));
    }
}

/// A CA bundle of every certificate in /etc/ssl/certs, five times over (`None` where there
/// are none).
fn large_ca_bundle(dir: &Scratch) -> Option<(PathBuf, usize)> {
    let mut one = String::new();
    for entry in std::fs::read_dir("/etc/ssl/certs").ok()?.flatten() {
        if entry.path().extension().is_some_and(|e| e == "pem") {
            one.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
        }
    }
    let certificates = one.matches("BEGIN CERTIFICATE").count() * 5;
    if certificates == 0 {
        return None;
    }
    let path = dir.path("bundle.pem");
    std::fs::write(&path, one.repeat(5)).unwrap();
    Some((path, certificates))
}

/// One start of `--version` and one of the measured command, in a row: their times.
type Pair<'a> = dyn Fn() -> (Duration, Duration) + 'a;

/// Pairs of one start of each measured in a row, so load from other processes hits both alike.
const PAIRS: usize = 30;

#[test]
#[ignore = "a measurement; run by hand (see the module docs)"]
fn bare_start_side_by_side_with_version() {
    let dir = Scratch::new();
    let empty = dir.path("empty.db");
    let full = dir.path("full.db");
    drop(SqliteStore::open(&empty).unwrap());
    populate(&full, &dir.ws());
    let bundle = large_ca_bundle(&dir);
    println!("binary: {}", binary().display());
    // Both in a pseudo-terminal, read alike.
    let version = |db: &Path, cert: Option<&Path>| {
        let mut cmd = command(&dir, db, &["--version"]);
        if let Some(cert) = cert {
            cmd.env("SSL_CERT_FILE", cert);
        }
        output_of(cmd)
    };
    let bare = |db: &Path, cert: Option<&Path>| {
        let mut cmd = command(&dir, db, &[]);
        if let Some(cert) = cert {
            cmd.env("SSL_CERT_FILE", cert);
        }
        prompt_of(cmd, None)
    };
    let fresh = std::cell::Cell::new(0);
    // A database path nobody has opened yet, for each start.
    let new_db = || {
        fresh.set(fresh.get() + 1);
        dir.path(&format!("fresh-{}/sessions.db", fresh.get()))
    };
    let mut variants: Vec<(String, Box<Pair<'_>>)> = vec![
        (
            "empty database".into(),
            Box::new(|| (version(&empty, None), bare(&empty, None))),
        ),
        (
            "no database yet".into(),
            Box::new(|| (version(&empty, None), bare(&new_db(), None))),
        ),
        (
            "200 sessions".into(),
            Box::new(|| (version(&full, None), bare(&full, None))),
        ),
    ];
    if let Some((path, certificates)) = &bundle {
        let (path, empty, version, bare) = (path.clone(), &empty, &version, &bare);
        variants.push((
            format!("SSL_CERT_FILE of {certificates} certificates, empty database"),
            Box::new(move || (version(empty, Some(&path)), bare(empty, Some(&path)))),
        ));
    }
    for (label, pair) in &variants {
        pair();
        let load_before = load();
        let (floor, times): (Vec<Duration>, Vec<Duration>) = (0..PAIRS).map(|_| pair()).unzip();
        let (floor, times) = (median_ms(floor), median_ms(times));
        println!(
            "bare agentloop, {label}: {times:.1} ms vs --version {floor:.1} ms = {:.2}x  \
             ({PAIRS} interleaved pairs, load average {load_before} -> {})",
            times / floor,
            load()
        );
    }
}
