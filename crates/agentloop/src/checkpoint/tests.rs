//! The store's own behaviour: blobs deduplicated, the stat cache trusted only when nothing
//! changed, `.gitignore` respected, large files recorded as not restorable, and a recorder's
//! checkpoints rewound.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, SystemTime};

use super::snapshot::{Scanner, Snapshot};
use super::test_fixture::{Dirs, dirs, write};
use super::*;

/// Writes `path` with an mtime an hour ago, out of the stat cache's racy window.
fn write_old(path: &Path, bytes: &[u8]) {
    write(path, bytes);
    let file = std::fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

/// A fixture whose workspace holds `files` (path, content), all written out of the racy window.
fn old_tree(files: &[(&str, &str)]) -> Dirs {
    let d = dirs();
    for (path, content) in files {
        write_old(&d.ws.join(path), content.as_bytes());
    }
    d
}

fn blob_count(store: &CheckpointStore) -> usize {
    let mut n = 0;
    for dir in std::fs::read_dir(store.dir().join("blobs")).unwrap() {
        n += std::fs::read_dir(dir.unwrap().path()).unwrap().count();
    }
    n
}

#[test]
fn equal_contents_are_stored_once() {
    let d = old_tree(&[
        ("a.txt", "same bytes\n"),
        ("sub/b.txt", "same bytes\n"),
        ("c.txt", "other\n"),
    ]);
    let snap = d.walk();
    assert_eq!(snap.entries["a.txt"].hash, snap.entries["sub/b.txt"].hash);
    assert_eq!(blob_count(&d.store), 2);
    let hash = snap.entries["a.txt"].hash.clone().unwrap();
    assert_eq!(d.store.read_blob(&hash).unwrap(), b"same bytes\n");
}

#[test]
fn an_unchanged_file_is_not_read_again_and_a_changed_one_is() {
    let d = dirs();
    for i in 0..20 {
        write_old(&d.ws.join(format!("f{i}.txt")), format!("{i}\n").as_bytes());
    }
    let scanner = d.scanner();
    let first = scanner.scan(&Snapshot::default()).unwrap();
    assert_eq!(first.hashed, 20);
    let second = scanner.scan(&first).unwrap();
    assert_eq!(second.hashed, 0, "the stat cache missed");
    assert_eq!(second.entries, first.entries);
    // Same size, rewritten: the stat fields differ, so it is read again.
    write_old(&d.ws.join("f3.txt"), b"x\n");
    let third = scanner.scan(&second).unwrap();
    assert_eq!(third.hashed, 1);
    let changes = super::snapshot::diff(&second, &third, &d.ws);
    assert_eq!(changes.len(), 1);
    assert_eq!(changes[0].path, "f3.txt");
}

#[test]
fn a_file_written_just_before_a_snapshot_is_read_again_next_time() {
    let d = dirs();
    std::fs::write(d.ws.join("fresh.txt"), b"1\n").unwrap();
    let scanner = d.scanner();
    let first = scanner.scan(&Snapshot::default()).unwrap();
    let second = scanner.scan(&first).unwrap();
    assert_eq!(second.hashed, 1, "a racy entry was trusted");
}

#[test]
fn gitignored_paths_and_the_git_directory_are_not_recorded() {
    let d = old_tree(&[
        (".gitignore", "target/\n*.log\n"),
        ("target/big.bin", "artifact"),
        ("run.log", "log"),
        (".git/HEAD", "ref: refs/heads/main\n"),
        ("src/main.rs", "fn main() {}\n"),
    ]);
    let snap = d.walk();
    let mut paths: Vec<&str> = snap.entries.keys().map(String::as_str).collect();
    paths.sort_unstable();
    assert_eq!(paths, [".gitignore", "src", "src/main.rs"]);
}

#[test]
fn a_file_over_the_size_limit_is_recorded_as_not_restorable() {
    let d = old_tree(&[("small.txt", "tiny")]);
    write_old(&d.ws.join("large.bin"), &[7u8; 100]);
    let scanner = Scanner::new(
        &d.ws,
        d.store.dir(),
        CheckpointOptions::default().max_file_size(10),
    );
    let snap = scanner.scan(&Snapshot::default()).unwrap();
    assert_eq!(snap.entries["large.bin"].kind, EntryKind::Unrestorable);
    assert_eq!(snap.entries["large.bin"].hash, None);
    assert_eq!(snap.entries["small.txt"].kind, EntryKind::File);
    assert_eq!(blob_count(&d.store), 1, "the large file was copied");
}

#[test]
fn a_recorded_call_is_rewound_and_someone_elses_edit_is_kept() {
    let d = old_tree(&[
        ("keep.txt", "original\n"),
        ("mine.txt", "agent will change me\n"),
    ]);
    let list = d.record(
        "s1",
        [|d: &Dirs| {
            std::fs::write(d.ws.join("keep.txt"), b"agent edit\n").unwrap();
            std::fs::write(d.ws.join("mine.txt"), b"agent edit\n").unwrap();
            write(&d.ws.join("new/dir/f"), "new");
        }],
    );
    assert_eq!(list.len(), 1);
    assert_eq!(
        list[0].files(),
        ["keep.txt", "mine.txt", "new", "new/dir", "new/dir/f"]
    );
    // The user edits keep.txt after the agent.
    std::fs::write(d.ws.join("keep.txt"), b"user edit\n").unwrap();
    let report = d.store.rewind("s1", 1, &RewindOptions::default()).unwrap();
    assert_eq!(report.skipped.len(), 1);
    assert_eq!(report.skipped[0].path, "keep.txt");
    assert_eq!(
        std::fs::read(d.ws.join("mine.txt")).unwrap(),
        b"agent will change me\n"
    );
    assert!(!d.ws.join("new").exists());
    assert_eq!(
        std::fs::read(d.ws.join("keep.txt")).unwrap(),
        b"user edit\n"
    );
    let forced = d
        .store
        .rewind("s1", 1, &RewindOptions::default().force(true))
        .unwrap();
    assert_eq!(forced.restored, ["keep.txt"]);
    assert_eq!(std::fs::read(d.ws.join("keep.txt")).unwrap(), b"original\n");
}

#[test]
fn a_workspace_over_the_limits_turns_the_recorder_off_and_leaves_no_checkpoint() {
    let d = dirs();
    for i in 0..5 {
        write_old(&d.ws.join(format!("f{i}")), b"x");
    }
    let options = CheckpointOptions::default().max_entries(3);
    let recorder = d.store.recorder(&d.ws, "big", options).unwrap();
    assert_eq!(recorder.begin("c1", "shell"), None);
    recorder.finish("c1");
    recorder.seal();
    let errors = recorder.take_errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("too large"), "{errors:?}");
    assert!(d.store.list("big").unwrap().is_empty());
    assert_eq!(blob_count(&d.store), 0);
}

#[cfg(unix)]
#[test]
fn a_rewind_never_writes_through_a_symbolic_link_in_a_parent() {
    let d = old_tree(&[("sub/file.txt", "before\n")]);
    d.record(
        "s",
        [|d: &Dirs| write(&d.ws.join("sub/file.txt"), "after\n")],
    );
    // Someone swaps the directory for a link to a directory outside the workspace.
    std::fs::rename(d.ws.join("sub"), d.tmp.path().join("moved")).unwrap();
    std::os::unix::fs::symlink(&d.outside, d.ws.join("sub")).unwrap();
    let report = d
        .store
        .rewind("s", 1, &RewindOptions::default().force(true))
        .unwrap();
    assert!(report.restored.is_empty(), "{report:?}");
    assert_eq!(
        std::fs::read_dir(&d.outside).unwrap().count(),
        0,
        "wrote outside"
    );
}

#[cfg(unix)]
#[test]
fn the_store_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let d = dirs();
    for dir in [d.store.dir().to_path_buf(), d.store.dir().join("blobs")] {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
    }
}

#[test]
fn an_unknown_checkpoint_is_an_error_that_says_so() {
    let d = dirs();
    let error = d
        .store
        .rewind("nobody", 3, &RewindOptions::default())
        .unwrap_err();
    assert!(error.is_unknown_checkpoint(), "{error}");
}

/// The paths `ignore`'s own walker keeps with the options the snapshot walk follows.
fn ignore_crate_paths(root: &Path) -> Vec<String> {
    let walk = super::walk_input::git_rules_walk(root, None);
    let mut out: Vec<String> = walk
        .flatten()
        .filter(|e| e.depth() > 0)
        .map(|e| {
            let rel = e.path().strip_prefix(root).unwrap();
            rel.to_str().unwrap().replace('\\', "/")
        })
        .collect();
    out.sort();
    out
}

fn snapshot_paths(snapshot: &Snapshot) -> Vec<String> {
    let mut paths: Vec<String> = snapshot.entries.keys().cloned().collect();
    paths.sort();
    paths
}

#[test]
fn the_walk_hides_exactly_what_gits_ignore_rules_hide() {
    let d = dirs();
    // Above the workspace: applies to it, as the `ignore` crate applies parents' files.
    write_old(&d.tmp.path().join(".gitignore"), b"*.above\n");
    write_old(
        &d.ws.join(".gitignore"),
        b"*.log\n/build\ndocs/*.md\n!keep.log\nvendor/\n",
    );
    write_old(&d.ws.join(".git/info/exclude"), b"secret.txt\n");
    write_old(&d.ws.join(".git/config"), b"[core]\n");
    for path in [
        "a.log",
        "keep.log",
        "b.above",
        "secret.txt",
        "build/out.o",
        "src/build/x.rs",
        "docs/a.md",
        "docs/deep/b.md",
        "vendor/lib.rs",
        "src/vendor/lib.rs",
        ".hidden/c.rs",
        "src/main.rs",
        "src/x.log",
        "src/nested/.gitignore",
        "src/nested/a.tmp",
        "src/nested/keep.tmp",
        "src/nested/sub/d.tmp",
        "src/nested/e.log",
        "src/nested/f.rs",
    ] {
        write_old(&d.ws.join(path), path.as_bytes());
    }
    // A deeper file overrides the root's: re-includes a log, hides temporaries but one.
    write_old(
        &d.ws.join("src/nested/.gitignore"),
        b"*.tmp\n!keep.tmp\n!e.log\n",
    );
    for i in 0..40 {
        write_old(&d.ws.join(format!("many/d{i}/f.rs")), b"x");
    }
    #[cfg(unix)]
    std::os::unix::fs::symlink("src/main.rs", d.ws.join("link.rs")).unwrap();
    let snapshot = d.walk();
    let expected = ignore_crate_paths(&d.ws);
    assert_eq!(snapshot_paths(&snapshot), expected);
    for hidden in [
        "a.log",
        "b.above",
        "secret.txt",
        "build",
        "docs/a.md",
        "vendor",
    ] {
        assert!(!expected.contains(&hidden.to_owned()), "{hidden} was kept");
    }
    for kept in [
        "keep.log",
        "src/build/x.rs",
        "docs/deep/b.md",
        "src/nested/e.log",
    ] {
        assert!(expected.contains(&kept.to_owned()), "{kept} was hidden");
    }
}

#[test]
fn a_changed_gitignore_takes_effect_at_the_next_snapshot() {
    let d = old_tree(&[(".gitignore", "*.log\n"), ("a.log", "a"), ("a.txt", "a")]);
    let scanner = d.scanner();
    let first = scanner.scan(&Snapshot::default()).unwrap();
    assert_eq!(snapshot_paths(&first), [".gitignore", "a.txt"]);
    // Same size, written within the same instant as the parse could have been: re-read.
    std::fs::write(d.ws.join(".gitignore"), b"*.txt\n").unwrap();
    let second = scanner.scan(&first).unwrap();
    assert_eq!(snapshot_paths(&second), [".gitignore", "a.log"]);
    std::fs::remove_file(d.ws.join(".gitignore")).unwrap();
    let third = scanner.scan(&second).unwrap();
    assert_eq!(snapshot_paths(&third), ["a.log", "a.txt"]);
}

/// Records a run of `session` in which each of `writes` (path, content) is a call of its own.
fn recorded_writes(d: &Dirs, session: &str, writes: &[(&str, &str)]) {
    d.record(
        session,
        writes
            .iter()
            .map(|&(path, content)| move |d: &Dirs| write(&d.ws.join(path), content)),
    );
}

#[test]
fn garbage_collection_deletes_only_blobs_nothing_refers_to() {
    let d = old_tree(&[("a.txt", "shared\n"), ("b.txt", "shared\n")]);
    recorded_writes(&d, "s1", &[("a.txt", "only s1\n"), ("a.txt", "a final\n")]);
    recorded_writes(&d, "s2", &[("b.txt", "b final\n")]);
    // shared, only s1, a final, b final.
    assert_eq!(blob_count(&d.store), 4);
    let report = d.store.collect_garbage().unwrap();
    assert_eq!((report.deleted, report.kept), (0, 4), "{report:?}");

    d.store.remove_session("s1").unwrap();
    let report = d.store.collect_garbage().unwrap();
    assert_eq!(report.deleted, 1, "{report:?}");
    assert_eq!(blob_count(&d.store), 3);
    // The blob s2 shares with the deleted session is still there: s2 rewinds.
    let rewound = d.store.rewind("s2", 1, &RewindOptions::default()).unwrap();
    assert_eq!(rewound.restored, ["b.txt"]);
    assert_eq!(std::fs::read(d.ws.join("b.txt")).unwrap(), b"shared\n");
}

#[test]
fn garbage_collection_waits_for_running_recorders() {
    let d = old_tree(&[("a.txt", "first\n")]);
    recorded_writes(&d, "s1", &[("a.txt", "second\n")]);
    d.store.remove_session("s1").unwrap();
    let running = d.recorder("s2");
    let report = d.store.collect_garbage().unwrap();
    assert!(report.busy, "{report:?}");
    assert_eq!(report.deleted, 0);
    drop(running);
    let report = d.store.collect_garbage().unwrap();
    assert!(!report.busy);
    // `first` went with s1's log; `second` is the workspace's cached state.
    assert_eq!(report.deleted, 1, "{report:?}");
    assert_eq!(blob_count(&d.store), 1);
}
