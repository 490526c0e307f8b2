//! Snapshots kept current by change notification: after every kind of change the run's
//! snapshot equals a fresh walk of the tree and reports the changes a full walk would, and
//! whenever the notifications cannot be trusted (queue overflow, the watch cap, no inotify,
//! the root replaced) the snapshot walks the whole tree and is still right.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use super::snapshot::{Snapshot, diff};
use super::test_fixture::{Dirs, dirs, write};
use super::*;

/// A recorder that has taken its first snapshot (the tree walked and watched).
fn watching(w: &Dirs, options: CheckpointOptions) -> Recorder {
    let recorder = w.store.recorder(&w.ws, "s", options).unwrap();
    assert!(recorder.snapshot().unwrap().full_walk);
    recorder
}

/// Takes a snapshot and checks it against a fresh walk of the tree: the same entries (stat
/// fields included), and the changes a full walk from the previous snapshot reports.
fn step(w: &Dirs, recorder: &Recorder, what: &str, full_walk: bool) -> SnapshotReport {
    let before = recorder.last_snapshot().unwrap();
    let report = recorder.snapshot().unwrap();
    same_as_a_walk(w, recorder, &before, &report, what);
    assert_eq!(report.full_walk, full_walk, "after {what}: full walk");
    report
}

/// Checks the recorder's snapshot, taken after `before` with `report`, against a walk.
fn same_as_a_walk(
    w: &Dirs,
    recorder: &Recorder,
    before: &Snapshot,
    report: &SnapshotReport,
    what: &str,
) {
    let after = recorder.last_snapshot().unwrap();
    let fresh = w.walk();
    let mut differ: Vec<String> = fresh
        .entries
        .keys()
        .chain(after.entries.keys())
        .filter(|path| fresh.entries.get(*path) != after.entries.get(*path))
        .map(|path| {
            let (kept, walked) = (after.entries.get(path), fresh.entries.get(path));
            format!("{path}: kept {kept:?}, walk {walked:?}")
        })
        .collect();
    differ.sort();
    differ.dedup();
    assert!(differ.is_empty(), "after {what}:\n{}", differ.join("\n"));
    assert_eq!(report.changes, diff(before, &fresh, &w.ws), "after {what}");
    assert_eq!(report.entries, fresh.entries.len());
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

type Op = (&'static str, fn(&Dirs));

/// Every kind of change, in an order where each builds on the previous ones.
const OPS: &[Op] = &[
    ("nothing", |_| {}),
    ("a new file", |w| write(&w.ws.join("a/new.txt"), "new\n")),
    ("a rewrite of the same size just after", |w| {
        write(&w.ws.join("a/new.txt"), "NEW\n")
    }),
    ("an append", |w| {
        use std::io::Write;
        let mut file = std::fs::File::options()
            .append(true)
            .open(w.ws.join("a/new.txt"))
            .unwrap();
        file.write_all(b"more\n").unwrap();
    }),
    ("a truncation", |w| {
        let file = std::fs::File::options()
            .write(true)
            .open(w.ws.join("a/one.txt"))
            .unwrap();
        file.set_len(1).unwrap();
    }),
    ("a rename within a directory", |w| {
        std::fs::rename(w.ws.join("a/new.txt"), w.ws.join("a/renamed.txt")).unwrap()
    }),
    ("a rename between directories", |w| {
        std::fs::rename(w.ws.join("a/renamed.txt"), w.ws.join("b/moved.txt")).unwrap()
    }),
    ("a rename over an existing file", |w| {
        std::fs::rename(w.ws.join("b/moved.txt"), w.ws.join("a/one.txt")).unwrap()
    }),
    ("a new tree", |w| {
        write(&w.ws.join("c/x"), "x");
        write(&w.ws.join("c/d/y"), "y");
        write(&w.ws.join("c/d/e/z"), "z");
    }),
    ("a directory renamed into another", |w| {
        std::fs::rename(w.ws.join("c"), w.ws.join("b/c2")).unwrap()
    }),
    ("a write in the renamed directory", |w| {
        write(&w.ws.join("b/c2/d/e/z"), "zz")
    }),
    ("a tree removed", |w| {
        std::fs::remove_dir_all(w.ws.join("b/c2")).unwrap()
    }),
    ("a file's mode", |w| chmod(&w.ws.join("a/one.txt"), 0o600)),
    ("a directory's mode", |w| chmod(&w.ws.join("a"), 0o750)),
    ("a directory made unreadable", |w| {
        chmod(&w.ws.join("a"), 0o300)
    }),
    ("a directory made readable again", |w| {
        chmod(&w.ws.join("a"), 0o750)
    }),
    ("a symbolic link", |w| {
        symlink("one.txt", w.ws.join("a/link")).unwrap()
    }),
    ("a symbolic link retargeted", |w| {
        symlink("two.txt", w.ws.join("a/link.tmp")).unwrap();
        std::fs::rename(w.ws.join("a/link.tmp"), w.ws.join("a/link")).unwrap();
    }),
    ("a file replaced by a directory", |w| {
        std::fs::remove_file(w.ws.join("a/two.txt")).unwrap();
        write(&w.ws.join("a/two.txt/inner"), "inner");
    }),
    ("a directory replaced by a file", |w| {
        std::fs::remove_dir_all(w.ws.join("a/two.txt")).unwrap();
        write(&w.ws.join("a/two.txt"), "a file again");
    }),
    ("a nested .gitignore hiding a file", |w| {
        write(&w.ws.join("a/.gitignore"), "*.log\n")
    }),
    ("a write to the hidden file", |w| {
        write(&w.ws.join("a/x.log"), "more log")
    }),
    ("the nested .gitignore emptied", |w| {
        write(&w.ws.join("a/.gitignore"), "")
    }),
    ("an ignored directory filled", |w| {
        write(&w.ws.join("target/debug/out"), "artifact")
    }),
    ("a hard link", |w| {
        std::fs::hard_link(w.ws.join("a/one.txt"), w.ws.join("b/hl.txt")).unwrap()
    }),
    ("a write through the other name", |w| {
        write(&w.ws.join("b/hl.txt"), "written through b")
    }),
    // `b/one.txt` was linked from outside before the run: stat'ed at every snapshot.
    ("a write through the outside name", |w| {
        write(&w.outside.join("ext"), "written from outside")
    }),
    ("the other link removed", |w| {
        std::fs::remove_file(w.ws.join("b/hl.txt")).unwrap()
    }),
    ("a tree moved in from outside", |w| {
        write(&w.outside.join("tree/f"), "f");
        write(&w.outside.join("tree/sub/g"), "g");
        std::fs::rename(w.outside.join("tree"), w.ws.join("in")).unwrap();
    }),
    ("the tree moved out", |w| {
        std::fs::rename(w.ws.join("in"), w.outside.join("tree2")).unwrap()
    }),
    ("a write in the tree moved out", |w| {
        write(&w.outside.join("tree2/sub/g"), "not ours")
    }),
    ("a nested repository", |w| {
        write(&w.ws.join("repo/.git/info/exclude"), "");
        write(&w.ws.join("repo/f.secret"), "s");
    }),
    ("its exclude file hiding a file", |w| {
        write(&w.ws.join("repo/.git/info/exclude"), "*.secret\n")
    }),
    ("its .git removed", |w| {
        std::fs::remove_dir_all(w.ws.join("repo/.git")).unwrap()
    }),
    ("a directory removed and made again", |w| {
        std::fs::remove_dir_all(w.ws.join("b")).unwrap();
        write(&w.ws.join("b/again"), "again");
    }),
];

#[test]
fn a_watched_snapshot_equals_a_fresh_walk_after_every_kind_of_change() {
    let w = dirs();
    write(&w.ws.join(".gitignore"), "target/\n");
    write(&w.ws.join("a/one.txt"), "one\n");
    write(&w.ws.join("a/two.txt"), "two\n");
    write(&w.ws.join("a/x.log"), "log\n");
    write(&w.ws.join("b/one.txt"), "b one\n");
    std::fs::hard_link(w.ws.join("b/one.txt"), w.outside.join("ext")).unwrap();
    let recorder = watching(&w, CheckpointOptions::default());
    for (what, op) in OPS {
        op(&w);
        step(&w, &recorder, what, false);
    }
    let quiet = step(&w, &recorder, "nothing more", false);
    assert!(quiet.changes.is_empty());
    assert_eq!(quiet.files_read, 0);
    // The root's own rules changed: everything may come in or go out, so it walks.
    write(&w.ws.join(".gitignore"), "target/\n*.txt\n");
    step(&w, &recorder, "the root .gitignore", true);
    write(&w.ws.join("a/after"), "after");
    step(&w, &recorder, "a write after the walk", false);
}

/// A small deterministic generator (xorshift), so a failing sequence can be replayed.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 % n as u64) as usize
    }

    fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}

const DIRS: &[&str] = &["", "p", "q", "p/r", "q/s/t"];
const NAMES: &[&str] = &["f", "g.log", "h", "r", "s", ".gitignore"];

/// One random change somewhere in the tree; returns what it was, and whether it may have
/// touched the root's `.gitignore`.
fn random_op(w: &Dirs, rng: &mut Rng) -> (String, bool) {
    let path = |rng: &mut Rng| {
        let dir = rng.pick(DIRS);
        let name = rng.pick(NAMES);
        if dir.is_empty() {
            name.to_owned()
        } else {
            format!("{dir}/{name}")
        }
    };
    let (a, b) = (path(rng), path(rng));
    let (pa, pb) = (w.ws.join(&a), w.ws.join(&b));
    let parents = std::fs::create_dir_all(pa.parent().unwrap())
        .and_then(|()| std::fs::create_dir_all(pb.parent().unwrap()));
    let op = rng.below(8);
    let done = parents.and_then(|()| match op {
        0 | 1 if a.ends_with(".gitignore") => {
            let rule = rng.pick(&["*.log\n", "h\n", "s/\n", "!g.log\n*\n", ""]);
            std::fs::write(&pa, rule)
        }
        0 | 1 => std::fs::write(&pa, "x".repeat(rng.below(4))),
        2 => std::fs::rename(&pa, &pb),
        3 => std::fs::create_dir_all(pa.join("deep"))
            .and_then(|()| std::fs::write(pa.join("deep/f"), "deep")),
        4 => std::fs::remove_dir_all(&pa).or_else(|_| std::fs::remove_file(&pa)),
        5 => std::fs::set_permissions(&pa, std::fs::Permissions::from_mode(0o700)),
        6 => std::fs::remove_file(&pa).and_then(|()| symlink(&b, &pa)),
        // A file replaced by a directory, or the other way round.
        _ => std::fs::remove_file(&pa)
            .and_then(|()| std::fs::create_dir(&pa))
            .or_else(|_| std::fs::remove_dir_all(&pa).and_then(|()| std::fs::write(&pa, "f"))),
    });
    let outcome = if done.is_ok() { "done" } else { "failed" };
    let root_rules = a == ".gitignore" || b == ".gitignore";
    (format!("op {op} on {a} {b}: {outcome}"), root_rules)
}

#[test]
fn a_watched_snapshot_equals_a_fresh_walk_after_random_changes() {
    for seed in [1u64, 7, 42, 1234] {
        let w = dirs();
        for dir in DIRS {
            write(&w.ws.join(dir).join("f"), "start");
        }
        let recorder = watching(&w, CheckpointOptions::default());
        let mut rng = Rng(seed);
        let mut done = Vec::new();
        for _ in 0..60 {
            let (op, root_rules) = random_op(&w, &mut rng);
            done.push(op);
            let what = format!("seed {seed}: {}", done.join("; "));
            let before = recorder.last_snapshot().unwrap();
            let report = recorder.snapshot().unwrap();
            same_as_a_walk(&w, &recorder, &before, &report, &what);
            // A root `.gitignore` may have changed: only then may it walk everything.
            assert!(!report.full_walk || root_rules, "{what}: walked");
        }
    }
}

#[test]
fn an_overflowed_queue_makes_the_snapshot_walk_and_watch_again() {
    let w = dirs();
    write(&w.ws.join("a/f"), "1");
    let recorder = watching(&w, CheckpointOptions::default());
    write(&w.ws.join("a/f"), "2");
    write(&w.ws.join("a/g"), "new");
    recorder.simulate_overflow();
    let report = step(&w, &recorder, "an overflow", true);
    assert_eq!(report.files_read, 2);
    assert_eq!(report.changes.len(), 2, "{:?}", report.changes);
    write(&w.ws.join("a/g"), "again");
    let report = step(&w, &recorder, "a write after the walk", false);
    assert_eq!(report.files_read, 1);
}

#[test]
fn more_directories_than_the_watch_cap_are_walked_every_time() {
    let w = dirs();
    for dir in ["a", "b", "c"] {
        write(&w.ws.join(dir).join("f"), "1");
    }
    let recorder = watching(&w, CheckpointOptions::default().max_watches(2));
    for round in 0..3 {
        write(&w.ws.join("c/f"), format!("round {round}"));
        let report = step(&w, &recorder, "a write over the cap", true);
        assert_eq!(report.changes.len(), 1, "{:?}", report.changes);
    }
    // Under the cap it watches.
    let w = dirs();
    write(&w.ws.join("a/f"), "1");
    let recorder = watching(&w, CheckpointOptions::default().max_watches(2));
    write(&w.ws.join("a/f"), "2");
    step(&w, &recorder, "a write under the cap", false);
}

#[test]
fn without_change_notification_every_snapshot_walks() {
    super::watch::fail_init_in_this_thread(true);
    let w = dirs();
    write(&w.ws.join("a/f"), "1");
    let recorder = watching(&w, CheckpointOptions::default());
    write(&w.ws.join("a/f"), "2");
    std::fs::remove_dir_all(w.ws.join("a")).unwrap();
    let report = step(&w, &recorder, "a removal", true);
    assert_eq!(report.changes.len(), 2, "{:?}", report.changes);
    super::watch::fail_init_in_this_thread(false);
}

#[test]
fn a_replaced_root_makes_the_snapshot_walk() {
    let w = dirs();
    write(&w.ws.join("a/f"), "1");
    let recorder = watching(&w, CheckpointOptions::default());
    std::fs::rename(&w.ws, w.outside.join("old-root")).unwrap();
    write(&w.ws.join("a/f"), "replaced");
    let report = step(&w, &recorder, "the root replaced", true);
    assert_eq!(report.changes.len(), 1, "{:?}", report.changes);
    write(&w.ws.join("a/f"), "again");
    step(&w, &recorder, "a write in the new root", false);
}

#[test]
fn recorded_calls_get_their_changes_from_the_notifications() {
    let w = dirs();
    write(&w.ws.join("src/main.rs"), "fn main() {}\n");
    let calls: [&dyn Fn(&Dirs); 2] = [
        &|w| {
            write(&w.ws.join("src/main.rs"), "fn main() { run() }\n");
            std::fs::create_dir_all(w.ws.join("src/gen/deep")).unwrap();
            write(&w.ws.join("src/gen/deep/out.rs"), "// generated\n");
        },
        &|w| std::fs::remove_dir_all(w.ws.join("src/gen")).unwrap(),
    ];
    let list = w.record("s", calls);
    assert_eq!(
        list[0].files(),
        [
            "src/gen",
            "src/gen/deep",
            "src/gen/deep/out.rs",
            "src/main.rs"
        ]
    );
    assert_eq!(
        list[1].files(),
        ["src/gen", "src/gen/deep", "src/gen/deep/out.rs"]
    );
}

#[test]
fn what_the_watches_cannot_see_is_attributed_when_the_run_is_sealed() {
    let w = dirs();
    write(&w.ws.join("a/f"), "before\n");
    let list = w.record(
        "s",
        [|w: &Dirs| {
            // A name made outside the workspace after the walk: writes through it reach no watch.
            std::fs::hard_link(w.ws.join("a/f"), w.outside.join("ext")).unwrap();
            write(&w.outside.join("ext"), "written from outside\n");
        }],
    );
    assert_eq!(list[0].files(), ["a/f"]);
}
