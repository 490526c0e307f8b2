//! Holes a red team found in the tools' confinement, each closed as a class: a hard link in the
//! workspace cannot carry a `write_file`/`edit_file` out of it; a workspace directory swapped
//! for a symbolic link after start is refused by the shell instead of making `/` its working
//! directory and writable root; the agent's environment cannot be read through
//! `/proc/$PPID/environ` by the commands it runs.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![cfg(target_os = "linux")]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use agentloop::builtin::{self, SandboxMode, ShellOptions, Workspace};
use agentloop::tooling::{Deps, Registry, run_tools};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use serde_json::{Value, json};

async fn call(
    workspace: &Workspace,
    options: &ShellOptions,
    tool: &str,
    args: Value,
) -> ToolResultPart {
    let registry = Registry::new(builtin::tools_with::<Deps>(workspace, options)).unwrap();
    let call = ToolCallPart::new("h", tool, args);
    run_tools(&[call], &registry, &Arc::new(Deps::new()), None)
        .await
        .remove(0)
}

/// One `shell` call of `command` in `workspace` under sandbox `mode`.
async fn shell(workspace: &Workspace, mode: SandboxMode, command: &str) -> ToolResultPart {
    let options = ShellOptions::default().sandbox(mode);
    call(workspace, &options, "shell", json!({"command": command})).await
}

/// `root/ws` (the workspace) and `root/outside/secret.txt` (mode 0640) hard-linked into the
/// workspace as `ws/link.txt`.
fn linked() -> (tempfile::TempDir, Workspace) {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    let secret = outside.join("secret.txt");
    std::fs::write(&secret, "outside stays\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o640)).unwrap();
    std::fs::hard_link(&secret, ws.join("link.txt")).unwrap();
    let workspace = Workspace::new(&ws).unwrap();
    (root, workspace)
}

fn assert_outside_untouched(root: &Path, ws: &Path, expected_inside: &str) {
    assert_eq!(
        std::fs::read_to_string(root.join("outside/secret.txt")).unwrap(),
        "outside stays\n",
        "the write went through the hard link to the file outside the workspace"
    );
    let inside = ws.join("link.txt");
    assert_eq!(std::fs::read_to_string(&inside).unwrap(), expected_inside);
    let mode = std::fs::metadata(&inside).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o640, "the replaced file keeps the old mode");
    let leftovers: Vec<_> = std::fs::read_dir(ws)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[tokio::test]
async fn write_file_through_a_hard_link_does_not_change_the_file_outside() {
    let (root, ws) = linked();
    let r = call(
        &ws,
        &ShellOptions::default(),
        "write_file",
        json!({"path": "link.txt", "content": "replaced\n"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.content);
    assert_outside_untouched(root.path(), ws.root(), "replaced\n");
}

#[tokio::test]
async fn edit_file_through_a_hard_link_does_not_change_the_file_outside() {
    let (root, ws) = linked();
    let r = call(
        &ws,
        &ShellOptions::default(),
        "edit_file",
        json!({"path": "link.txt", "old_text": "stays", "new_text": "edited"}),
    )
    .await;
    assert!(!r.is_error, "{}", r.content);
    assert_outside_untouched(root.path(), ws.root(), "outside edited\n");
}

#[tokio::test]
async fn a_workspace_swapped_for_a_symbolic_link_is_refused_by_the_shell() {
    let root = tempfile::tempdir().unwrap();
    let ws = root.path().join("ws");
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let workspace = Workspace::new(&ws).unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::FullAccess] {
        let r = shell(&workspace, mode, "echo before > f; pwd").await;
        assert!(!r.is_error, "{}", r.content);
    }
    // `cd .. && mv ws ws.orig && ln -s elsewhere ws`, done by a command or anyone else.
    std::fs::rename(&ws, root.path().join("ws.orig")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &ws).unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::FullAccess] {
        let r = shell(&workspace, mode, "echo after > f; pwd").await;
        assert!(r.is_error, "{mode}: {}", r.content);
        assert!(
            r.content
                .contains("no longer the directory the agent started with"),
            "{}",
            r.content
        );
        assert!(
            !elsewhere.join("f").exists(),
            "{mode}: the command ran in the link's target"
        );
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("ws.orig/f")).unwrap(),
        "before\n"
    );
}

/// The uid the environment test runs its inner half as (`nobody`): as root, reading another
/// process's environment needs no permission at all, so the defence shows only as a user.
const NOBODY: u32 = 65534;

/// Runs this test binary again as `nobody` with a key in its environment, filtered to
/// `inner_environ_is_unreadable`.
#[test]
fn the_agents_environment_is_unreadable_to_its_commands() {
    use std::os::unix::process::CommandExt;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipping: needs root to run its inner half as another user");
        return;
    }
    // The checkout (and so this binary) may sit under a directory `nobody` cannot enter, such
    // as root's home: run a copy from a directory everyone may read.
    let copy_dir = tempfile::tempdir().unwrap();
    let binary = copy_dir.path().join("tools-test");
    std::fs::copy(std::env::current_exe().unwrap(), &binary).unwrap();
    for (path, mode) in [(copy_dir.path(), 0o755), (binary.as_path(), 0o755)] {
        std::fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode)).unwrap();
    }
    let mut inner = std::process::Command::new(&binary);
    inner
        .args([
            "--exact",
            &crate::test_name(module_path!(), "inner_environ_is_unreadable"),
            "--nocapture",
            "--include-ignored",
            "--test-threads=1",
        ])
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap())
        .env("AGENTLOOP_TEST_INNER", "1")
        .env("OPENAI_API_KEY", "sk-environ-secret")
        .current_dir("/")
        .uid(NOBODY)
        .gid(NOBODY);
    let out = output_of_fresh_copy(&mut inner);
    crate::assert_inner_passed(&out);
}

/// Runs `command`, whose program was just written. Another test thread that forks while the
/// copy was open for writing leaves the child holding that descriptor until it execs, and until
/// then executing the file fails with `ETXTBSY`; that window closes by itself, so try again.
fn output_of_fresh_copy(command: &mut std::process::Command) -> std::process::Output {
    let busy = Some(rustix::io::Errno::TXTBSY.raw_os_error());
    for _ in 0..500 {
        match command.output() {
            Err(e) if e.raw_os_error() == busy => {
                std::thread::sleep(std::time::Duration::from_millis(10))
            }
            result => return result.unwrap(),
        }
    }
    panic!("the copied test binary stayed busy (ETXTBSY)");
}

#[tokio::test]
#[ignore = "run by the_agents_environment_is_unreadable_to_its_commands as another user"]
async fn inner_environ_is_unreadable() {
    if std::env::var_os("AGENTLOOP_TEST_INNER").is_none() {
        return;
    }
    builtin::protect_agent_secrets().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    // Full access: no Landlock domain either, so only the agent's own protection is tested.
    let r = shell(
        &workspace,
        SandboxMode::FullAccess,
        "id -u; tr '\\0' '\\n' < /proc/$PPID/environ; echo done",
    )
    .await;
    assert!(r.content.contains(&format!("{NOBODY}\n")), "{}", r.content);
    assert!(r.content.contains("done"), "{}", r.content);
    assert!(
        !r.content.contains("sk-environ-secret"),
        "the command read the agent's environment: {}",
        r.content
    );
}

/// What a command can do to a terminal: whether it can open `/dev/tty`, whether it leads its
/// own session, and what `TIOCSTI` (also with high bits set, which the kernel ignores) and
/// `TIOCLINUX` do on a fresh pseudo-terminal master (as root `TIOCSTI` succeeds there without
/// the seccomp filter).
const TTY_PROBE: &str = r#"if (exec 3</dev/tty) 2>/dev/null; then echo TTY-OPEN; else echo NO-TTY; fi
[ "$(cut -d' ' -f6 /proc/$$/stat)" = "$$" ] && echo OWN-SESSION
perl -e 'open(my $f, "<", "/dev/ptmx") or die "open: $!\n";
for my $req (0x5412, 0x5412 | (1 << 32)) { my $c = "x"; print defined(ioctl($f, $req, $c)) ? "STI-INJECTED\n" : "STI-DENIED: $!\n" }
my $sel = "\x02"; print defined(ioctl($f, 0x541C, $sel)) ? "LINUX-ALLOWED\n" : "LINUX-DENIED: $!\n"'"#;

#[tokio::test]
async fn sandboxed_commands_cannot_inject_terminal_input() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let r = shell(&workspace, mode, TTY_PROBE).await;
        let denied = r
            .content
            .matches("STI-DENIED: Operation not permitted")
            .count();
        assert_eq!(denied, 2, "{mode}: {}", r.content);
        assert!(
            r.content.contains("LINUX-DENIED: Operation not permitted"),
            "{mode}: {}",
            r.content
        );
        assert!(r.content.contains("NO-TTY"), "{mode}: {}", r.content);
    }
    if rustix::process::geteuid().is_root() {
        // Unconfined, the same probe does inject: the refusals above are the filter's doing.
        let r = shell(&workspace, SandboxMode::FullAccess, TTY_PROBE).await;
        assert!(r.content.contains("STI-INJECTED"), "{}", r.content);
    }
}

/// Runs this test binary again on a pseudo-terminal (`script`), so the agent has a
/// controlling terminal, filtered to `inner_commands_have_no_terminal`.
#[test]
fn commands_run_in_their_own_session_without_the_agents_terminal() {
    let Ok(exe) = std::env::current_exe() else {
        panic!("no test executable path");
    };
    if std::process::Command::new("script")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipping: `script` (util-linux) is not installed");
        return;
    }
    let inner = format!(
        "{} --exact {} --nocapture --include-ignored",
        exe.display(),
        crate::test_name(module_path!(), "inner_commands_have_no_terminal")
    );
    let out = std::process::Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .env("AGENTLOOP_TEST_INNER", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    crate::assert_inner_passed(&out);
}

#[tokio::test]
#[ignore = "run by commands_run_in_their_own_session_without_the_agents_terminal on a terminal"]
async fn inner_commands_have_no_terminal() {
    if std::env::var_os("AGENTLOOP_TEST_INNER").is_none() {
        return;
    }
    assert!(
        std::fs::File::open("/dev/tty").is_ok(),
        "the agent itself has no terminal: the test proves nothing"
    );
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace::new(dir.path()).unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::FullAccess] {
        let r = shell(&workspace, mode, TTY_PROBE).await;
        assert!(r.content.contains("NO-TTY"), "{mode}: {}", r.content);
        assert!(r.content.contains("OWN-SESSION"), "{mode}: {}", r.content);
    }
}
