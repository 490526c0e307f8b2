//! Sub-agents through the real binary against the testkit mock model: agent files (trusted and
//! untrusted workspaces), the built-in `explore` agent, the `task` tool, and the `--json` fields
//! of a child's events. Parent and child share the mock's one script, in request order.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use agentloop::session::{SessionStore, SqliteStore};
use agentloop_testkit::MockServer;
use serde_json::{Value, json};

mod support;

use support::schema::schema_checked;
use support::{Scratch, assert_stderr_has, ok, server, text};

/// A workspace holding `notes.txt` ("the answer is 42").
fn scratch() -> Scratch {
    let scratch = Scratch::new();
    std::fs::write(scratch.ws().join("notes.txt"), "the answer is 42\n").unwrap();
    scratch
}

impl Scratch {
    fn agent_file(&self, dir: &str, name: &str, text: &str) {
        let dir = self.ws().join(dir).join("agents");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.md")), text).unwrap();
    }
    /// `agentloop --db … ARGS` (not a run: `sessions …`, `worktrees …`), which must succeed.
    fn cli(&self, args: &[&str]) -> Output {
        let out = self.plain(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            text(&out.stderr)
        );
        out
    }
    fn store(&self) -> SqliteStore {
        SqliteStore::open(self.db()).unwrap()
    }
    fn run_command(&self, server: &MockServer, args: &[&str], prompt: &str) -> Command {
        let mut cmd = self.run_cmd(server);
        cmd.args(args).arg(prompt);
        cmd
    }
}

/// The parent's `task` call, the child's `read_file` call and answer, the parent's answer.
fn delegation(agent: &str) -> Value {
    json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": agent, "prompt": "What does notes.txt say?"}}]},
        {"tool_calls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "notes.txt says the answer is 42."},
        {"text": "Done."}
    ]})
}

/// The tool names offered in request `i`.
fn tool_names(server: &MockServer, i: usize) -> Vec<String> {
    server.requests()[i].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
                .collect()
        })
        .unwrap_or_default()
}

fn task_result(lines: &[Value]) -> Value {
    lines
        .iter()
        .find(|e| {
            e["type"] == "tool_execution_end"
                && e["call"]["id"] == "call_task"
                && e.get("parent_call_id").is_none()
        })
        .expect("the task call ended")["result"]
        .clone()
}

const REVIEWER: &str = "---\nname: reviewer\ndescription: Reviews notes carefully\ntools: read_file, grep\nmodel: openai:mock-small\nmax_turns: 4\n---\nYou are the REVIEWER-INSTRUCTIONS agent.\n";

#[test]
fn an_agent_file_in_a_trusted_workspace_runs_as_a_child_with_tagged_json_events() {
    let scratch = scratch();
    scratch.agent_file(".agentloop", "reviewer", REVIEWER);
    let server = server(delegation("reviewer"));
    let out = ok(scratch.run(&server, &["--json", "--trust-project"], "Delegate it."));
    let lines = schema_checked(&out.stdout);

    // The parent sees one `task` tool that lists the agents.
    let parent_tools = tool_names(&server, 0);
    assert!(
        parent_tools.contains(&"task".to_owned()),
        "{parent_tools:?}"
    );
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("reviewer") && first.contains("Reviews notes carefully"),
        "{first}"
    );
    assert!(first.contains("explore"), "{first}");
    // The child got its instructions, the prompt, and only the tools its file names.
    let child = server.requests()[1].body.to_string();
    assert!(child.contains("REVIEWER-INSTRUCTIONS"), "{child}");
    assert!(child.contains("What does notes.txt say?"), "{child}");
    let mut child_tools = tool_names(&server, 1);
    child_tools.sort();
    assert_eq!(child_tools, ["grep", "read_file"]);
    // Its file names a model of the same provider; the parent keeps its own.
    assert_eq!(server.requests()[1].body["model"], "mock-small");
    assert_eq!(server.requests()[0].body["model"], "mock");

    // The child's answer is the task call's result.
    let result = task_result(&lines);
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["content"], "notes.txt says the answer is 42.");

    // The child's events carry the task call and the agent's name, and keep their fields.
    let child_lines: Vec<&Value> = lines
        .iter()
        .filter(|e| e.get("parent_call_id").is_some())
        .collect();
    assert!(
        child_lines
            .iter()
            .all(|e| e["parent_call_id"] == "call_task" && e["agent"] == "reviewer")
    );
    assert_eq!(child_lines.first().unwrap()["type"], "agent_start");
    let read = child_lines
        .iter()
        .find(|e| e["type"] == "tool_execution_end")
        .expect("the child's read_file call");
    assert_eq!(read["call"]["tool_name"], "read_file");
    assert!(
        read["result"]["content"]
            .as_str()
            .unwrap()
            .contains("the answer is 42")
    );
    let child_end = child_lines
        .iter()
        .find(|e| e["type"] == "agent_end")
        .unwrap();
    assert_eq!(child_end["stop"]["reason"], "done");
    assert_eq!(child_end["turns"], 2);
    // The parent's own stream ends once, untagged, counting only its own turns.
    let ends: Vec<&Value> = lines
        .iter()
        .filter(|e| e["type"] == "agent_end" && e.get("parent_call_id").is_none())
        .collect();
    assert_eq!(ends.len(), 1);
    assert_eq!(ends[0]["turns"], 2);
    assert_eq!(ends[0]["tool_calls"], 1);
}

/// A Claude Code agent file as such files are written: a block-scalar description, Claude
/// Code's tool names, a key agentloop has no use for.
const CLAUDE_REVIEWER: &str = "---
name: reviewer
description: |
  Reviews notes carefully.
  Reports what they say.
tools: Read, Grep
color: blue
---
You are the REVIEWER-INSTRUCTIONS agent.
";

#[test]
fn a_claude_code_agent_file_gets_the_tools_its_claude_code_names_stand_for() {
    let scratch = scratch();
    scratch.agent_file(".claude", "reviewer", CLAUDE_REVIEWER);
    let server = server(delegation("reviewer"));
    let out = ok(scratch.run(&server, &["--json", "--trust-project"], "Delegate it."));
    let stderr = text(&out.stderr);
    assert!(!stderr.contains("unknown tool"), "{stderr}");
    let lines = schema_checked(&out.stdout);

    // The whole block scalar is the description the parent reads.
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("Reviews notes carefully.\\nReports what they say."),
        "{first}"
    );
    // `Read, Grep` are the built-in read_file and grep.
    let mut child_tools = tool_names(&server, 1);
    child_tools.sort();
    assert_eq!(child_tools, ["grep", "read_file"]);
    let read = lines
        .iter()
        .find(|e| {
            e["type"] == "tool_execution_end"
                && e["parent_call_id"] == "call_task"
                && e["call"]["tool_name"] == "read_file"
        })
        .expect("the child's read_file call");
    assert_eq!(read["result"]["is_error"], false, "{read}");
    assert!(
        read["result"]["content"]
            .as_str()
            .unwrap()
            .contains("the answer is 42"),
        "{read}"
    );
    assert_eq!(
        task_result(&lines)["content"],
        "notes.txt says the answer is 42."
    );
    let result = lines.last().unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["text"], "Done.");
}

#[test]
fn the_built_in_explore_agent_needs_no_file_and_gets_read_only_tools() {
    let scratch = scratch();
    let server = server(delegation("explore"));
    let out = ok(scratch.run(&server, &["--json"], "Explore."));
    let lines = schema_checked(&out.stdout);
    assert_eq!(
        task_result(&lines)["content"],
        "notes.txt says the answer is 42."
    );
    let child_tools = tool_names(&server, 1);
    assert!(
        child_tools.contains(&"read_file".to_owned()),
        "{child_tools:?}"
    );
    for mutating in ["write_file", "edit_file", "shell", "job_kill", "task"] {
        assert!(
            !child_tools.contains(&mutating.to_owned()),
            "{child_tools:?}"
        );
    }
}

#[test]
fn an_untrusted_workspaces_agent_file_is_ignored_and_unknown_agents_list_the_known_ones() {
    let scratch = scratch();
    scratch.agent_file(".claude", "reviewer", REVIEWER);
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "reviewer", "prompt": "Review."}}]},
        {"text": "Done."}
    ]}));
    let out = ok(scratch.run(&server, &["--json"], "Delegate it."));
    let first = server.requests()[0].body.to_string();
    assert!(!first.contains("Reviews notes carefully"), "{first}");
    let result = task_result(&schema_checked(&out.stdout));
    assert_eq!(result["is_error"], true, "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(
        content.contains("unknown agent") && content.contains("explore"),
        "{content}"
    );
    // Only two requests: no child ran.
    assert_eq!(server.requests().len(), 2);

    // Trusted, the same `.claude/agents` file is used.
    let server = self::server(delegation("reviewer"));
    let out = ok(scratch.run(&server, &["--json", "--trust-project"], "Delegate it."));
    assert_eq!(task_result(&schema_checked(&out.stdout))["is_error"], false);
}

#[test]
fn the_human_output_shows_a_childs_tool_calls_indented_under_its_agent() {
    let scratch = scratch();
    let server = server(delegation("explore"));
    let out = ok(scratch.run(&server, &[], "Explore."));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains("[explore]"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(
        line.starts_with("  ") && line.contains("read_file"),
        "{line}"
    );
    // Under its call: the `task` line comes first, its result after the child's lines, and
    // the call is shown once.
    let lines: Vec<&str> = stdout.lines().collect();
    let position = |needle: &str| lines.iter().position(|l| l.contains(needle));
    let task = position("→ task").unwrap_or_else(|| panic!("{stdout}"));
    let child = position("[explore]").unwrap();
    let result =
        position("│ notes.txt says the answer is 42.").unwrap_or_else(|| panic!("{stdout}"));
    assert!(task < child && child < result, "{stdout}");
    assert_eq!(stdout.matches("→ task").count(), 1, "{stdout}");
}

#[test]
fn in_plan_mode_an_agent_cannot_write_whatever_its_file_lists() {
    let scratch = scratch();
    scratch.agent_file(
        ".agentloop",
        "writer",
        "---\ndescription: Writes files\ntools: write_file, read_file\n---\nWrite what you are asked.\n",
    );
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "writer", "prompt": "Write out.txt."}}]},
        {"tool_calls": [{"id": "call_write", "name": "write_file",
                         "arguments": {"path": "out.txt", "content": "x"}}]},
        {"text": "I could not write."},
        {"text": "Done."}
    ]}));
    ok(scratch.run(
        &server,
        &["--json", "--trust-project", "--mode", "plan"],
        "Delegate it.",
    ));
    assert!(!scratch.ws().join("out.txt").exists());
    let child_tools = tool_names(&server, 1);
    assert_eq!(child_tools, ["read_file"]);
}

// ---------------------------------------------------------------------------------------------
// Child sessions

/// The stored sessions: the one top-level session and its one child.
fn parent_and_child(
    store: &SqliteStore,
) -> (
    agentloop::session::SessionInfo,
    agentloop::session::SessionInfo,
) {
    let all = store.list().unwrap();
    assert_eq!(all.len(), 2, "{all:?}");
    let child = all.iter().find(|s| s.parent.is_some()).unwrap().clone();
    let parent = all.iter().find(|s| s.parent.is_none()).unwrap().clone();
    (parent, child)
}

#[test]
fn a_childs_run_is_a_session_listed_under_its_parent_and_continue_picks_the_parent() {
    let scratch = scratch();
    let server = server(delegation("explore"));
    ok(scratch.run(&server, &["--json"], "Explore."));
    let store = scratch.store();
    let (parent, child) = parent_and_child(&store);
    let link = child.parent.clone().unwrap();
    assert_eq!(
        (
            link.session_id.as_str(),
            link.call_id.as_str(),
            link.agent.as_str()
        ),
        (parent.id.as_str(), "call_task", "explore")
    );
    // The child's own conversation: its prompt, its read_file call and result, its answer.
    let messages = store.load_raw(&child.id).unwrap();
    assert_eq!(messages.len(), 4);
    assert_eq!(messages[0].text(), "What does notes.txt say?");
    assert_eq!(messages[3].text(), "notes.txt says the answer is 42.");
    assert_eq!(store.info(&parent.id).unwrap().message_count, 4);

    // Listed indented under its parent; `--all`: a row of its own.
    let listed = text(&scratch.cli(&["sessions", "list"]).stdout);
    let rows: Vec<&str> = listed.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{listed}");
    assert!(rows[0].starts_with(&parent.id[..8]), "{listed}");
    assert!(
        rows[1].starts_with(&format!("  {}", &child.id[..8])),
        "{listed}"
    );
    assert!(rows[1].contains("[explore]"), "{listed}");
    let flat = text(&scratch.cli(&["sessions", "list", "--all"]).stdout);
    assert!(
        flat.lines().skip(1).all(|l| !l.starts_with(' ')) && flat.lines().count() == 3,
        "{flat}"
    );
    let json = text(&scratch.cli(&["sessions", "list", "--json"]).stdout);
    let objects: Vec<Value> = json
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objects[1]["parent"]["call_id"], "call_task", "{json}");
    // `show` of the parent names the child; `show` of the child names its parent.
    let shown = text(&scratch.cli(&["sessions", "show", &parent.id]).stdout);
    assert!(
        shown.contains(&format!(
            "child session {} · agent explore · call call_task",
            child.id
        )),
        "{shown}"
    );
    let shown = text(&scratch.cli(&["sessions", "show", &child.id]).stdout);
    assert!(
        shown.contains(&format!("child session of {}", parent.id)),
        "{shown}"
    );

    // The child is now the most recently updated session of the workspace: `--continue`
    // still continues the parent.
    store.rename(&child.id, "touched last").unwrap();
    assert_eq!(store.list().unwrap()[0].id, child.id);
    let next = self::server(json!({"mode": "sequential", "turns": [{"text": "Continued."}]}));
    ok(scratch.run(&next, &["--json", "--continue"], "And now?"));
    let sent = next.requests()[0].body.to_string();
    assert!(
        sent.contains("Explore.") && sent.contains("And now?"),
        "{sent}"
    );
    assert_eq!(store.info(&parent.id).unwrap().message_count, 6);
    assert_eq!(store.info(&child.id).unwrap().message_count, 4);

    // Removing the parent removes its child session too.
    scratch.cli(&["sessions", "rm", &parent.id]);
    assert!(store.list().unwrap().is_empty());
}

/// Kills `child` when dropped (a test that fails midway leaves no process behind).
struct KillOnDrop(std::process::Child);

/// Runs `agentloop run ARGS… PROMPT` until the model server has received its third request
/// (the child's second call), then kills it, as a crash in the middle of the child's run would.
fn kill_at_the_third_request(scratch: &Scratch, server: &MockServer, args: &[&str], prompt: &str) {
    let mut running = KillOnDrop(
        scratch
            .run_command(server, args, prompt)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while server.requests().len() < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "the child never made its second call"
        );
        assert!(
            running.0.try_wait().unwrap().is_none(),
            "the run ended early"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    running.0.kill().unwrap();
    running.0.wait().unwrap();
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_child_killed_mid_run_resumes_where_it_stopped_when_the_parent_continues() {
    let scratch = scratch();
    // The child's second model call never answers: the process is killed while it waits.
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "explore", "prompt": "What does notes.txt say?"}}]},
        {"tool_calls": [{"id": "call_read", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "never sent", "first_byte_delay_ms": 600_000}
    ]}));
    // The third request is sent only after the child's read_file result was stored.
    kill_at_the_third_request(&scratch, &server, &["--json"], "Delegate it.");
    let store = scratch.store();
    let (parent, child) = parent_and_child(&store);
    assert_eq!(store.load_raw(&parent.id).unwrap().len(), 2);
    assert_eq!(store.load_raw(&child.id).unwrap().len(), 3);

    let resumed = self::server(json!({"mode": "sequential", "turns": [
        {"text": "notes.txt says the answer is 42."},
        {"text": "Done."}
    ]}));
    let out = ok(scratch.run(&resumed, &["--json", "--continue"], "Go on."));
    assert_stderr_has(&out, "resuming 1 interrupted sub-agent run");
    let lines = schema_checked(&out.stdout);
    let result = task_result(&lines);
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["content"], "notes.txt says the answer is 42.");
    // The child went on from its stored conversation: its prompt once, its read result, and
    // no new prompt.
    let child_request = resumed.requests()[0].body.to_string();
    assert_eq!(
        child_request.matches("What does notes.txt say?").count(),
        1,
        "{child_request}"
    );
    assert!(
        child_request.contains("the answer is 42"),
        "{child_request}"
    );
    assert!(!child_request.contains("Go on."), "{child_request}");
    let parent_request = resumed.requests()[1].body.to_string();
    assert!(parent_request.contains("Go on."), "{parent_request}");
    // Still one child session, now finished.
    let (_, child) = parent_and_child(&store);
    let messages = store.load_raw(&child.id).unwrap();
    assert_eq!(
        messages.last().unwrap().text(),
        "notes.txt says the answer is 42."
    );
    assert_eq!(store.info(&parent.id).unwrap().parent, None);
}

// ---------------------------------------------------------------------------------------------
// Isolation: `isolation: worktree`

const BUILDER: &str = "---\nname: builder\ndescription: Builds things\ntools: write_file, read_file, shell\nisolation: worktree\n---\nBuild what you are asked.\n";

/// The flags of a run whose children write: `--json`, a trusted workspace (for the agent file)
/// and every call allowed.
const WRITING: &[&str] = &["--json", "--trust-project", "--approve", "allow"];

/// A workspace holding `notes.txt` and the worktree-isolated `builder` agent (not yet in git).
fn builder_scratch() -> Scratch {
    let scratch = scratch();
    scratch.agent_file(".agentloop", "builder", BUILDER);
    scratch
}

/// Makes `dir` a git repository with everything in it committed.
fn commit_all(dir: &std::path::Path) {
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "init"]);
}

/// `git ARGS` in `dir` (a test identity: CI has none); its stdout.
fn git(dir: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "Test")
        .env("GIT_AUTHOR_EMAIL", "test@example.invalid")
        .env("GIT_COMMITTER_NAME", "Test")
        .env("GIT_COMMITTER_EMAIL", "test@example.invalid")
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// Every file under `dir` but `.git`, with its bytes.
fn snapshot(dir: &std::path::Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(next) = stack.pop() {
        for entry in std::fs::read_dir(&next).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n == ".git") {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                files.push((path.clone(), std::fs::read(&path).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The isolated child tries to write the parent's checkout with both tools, then writes in
/// its own workspace with both.
fn breakout_script(parent_file: &std::path::Path) -> Value {
    let target = parent_file.to_string_lossy().into_owned();
    json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "builder", "prompt": "Build it."}}]},
        {"tool_calls": [
            {"id": "w_out", "name": "write_file", "arguments": {"path": target, "content": "HACKED\n"}},
            {"id": "s_out", "name": "shell", "arguments": {"command": format!("echo x > '{target}'")}},
            {"id": "w_in", "name": "write_file", "arguments": {"path": "new.txt", "content": "made in the worktree\n"}},
            {"id": "s_in", "name": "shell", "arguments": {"command": "echo shell-made > shell.txt"}}
        ]},
        {"text": "Built."},
        {"text": "Done."}
    ]})
}

/// Runs [`breakout_script`] against the workspace's `notes.txt` (by its real path, as the
/// child would name a file outside its own workspace), which must succeed; its `--json` lines.
fn run_breakout(scratch: &Scratch) -> Vec<Value> {
    let notes = std::fs::canonicalize(scratch.ws().join("notes.txt")).unwrap();
    let server = server(breakout_script(&notes));
    let out = ok(scratch.run(&server, WRITING, "Delegate it."));
    schema_checked(&out.stdout)
}

fn child_result<'a>(lines: &'a [Value], call: &str) -> &'a Value {
    &lines
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["call"]["id"] == call)
        .unwrap_or_else(|| panic!("no result for {call}"))["result"]
}

/// The text of the parent's `task` result.
fn task_content(lines: &[Value]) -> String {
    task_result(lines)["content"].as_str().unwrap().to_owned()
}

/// The branch a worktree child's work is committed on, as its result names it.
fn branch_in(content: &str) -> &str {
    content
        .split_whitespace()
        .find(|w| w.starts_with("agentloop/builder-"))
        .unwrap_or_else(|| panic!("no branch in {content}"))
}

/// The directory of the isolated copy a child outside git worked in, as its result names it.
fn copy_in(content: &str) -> PathBuf {
    PathBuf::from(
        content
            .split_whitespace()
            .find(|w| w.contains("/agentloop/worktrees/"))
            .unwrap(),
    )
}

/// The children's worktrees under the data directory (not the `.tmp` ones still being made).
fn worktree_dirs(scratch: &Scratch) -> Vec<PathBuf> {
    let root = scratch.path("data").join("agentloop").join("worktrees");
    std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir() && !p.to_string_lossy().ends_with(".tmp"))
        .collect()
}

#[test]
fn a_worktree_isolated_child_cannot_write_the_parents_checkout_and_its_result_names_its_branch() {
    let scratch = builder_scratch();
    let ws = scratch.ws();
    commit_all(&ws);
    let before = snapshot(&ws);
    let lines = run_breakout(&scratch);

    // Both write attempts failed, and the parent's checkout is byte for byte as it was.
    assert_eq!(snapshot(&ws), before);
    assert_eq!(child_result(&lines, "w_out")["is_error"], true);
    let shell_out = child_result(&lines, "s_out")["content"].to_string();
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "the answer is 42\n",
        "{shell_out}"
    );
    // Inside its worktree it could write.
    assert_eq!(child_result(&lines, "w_in")["is_error"], false);

    // The result names the branch and the diff stat; the work is committed on that branch.
    let result = task_result(&lines);
    assert_eq!(result["is_error"], false, "{result}");
    let content = result["content"].as_str().unwrap();
    assert!(content.starts_with("Built."), "{content}");
    let branch = branch_in(content);
    assert!(content.contains("new.txt"), "{content}");
    assert_eq!(
        git(&ws, &["show", &format!("{branch}:new.txt")]),
        "made in the worktree\n"
    );
    let shell_can_run =
        agentloop::builtin::sandbox_support(agentloop::builtin::SandboxMode::WorkspaceWrite)
            .is_ok();
    if shell_can_run {
        assert_eq!(
            git(&ws, &["show", &format!("{branch}:shell.txt")]),
            "shell-made\n"
        );
    }
    // The worktree is under the data directory, not in the repository, and is kept.
    let listed = text(&scratch.cli(&["worktrees", "list"]).stdout);
    assert!(
        listed.contains(branch) && listed.contains("finished"),
        "{listed}"
    );
    let dir = worktree_dirs(&scratch)
        .into_iter()
        .next()
        .expect("the worktree");
    assert!(dir.join("new.txt").exists());
    // Pruning only what is older than a day keeps it; pruning removes it, the branch stays.
    scratch.cli(&["worktrees", "prune", "--older-than", "1d"]);
    assert!(dir.exists());
    let pruned = text(&scratch.cli(&["worktrees", "prune"]).stdout);
    assert!(pruned.contains("removed"), "{pruned}");
    assert!(!dir.exists());
    assert!(git(&ws, &["branch", "--list", branch]).contains(branch));
    assert!(!git(&ws, &["worktree", "list"]).contains(&*dir.to_string_lossy()));
}

#[test]
fn outside_git_an_isolated_child_works_on_a_copy_of_the_workspace() {
    let scratch = builder_scratch();
    let ws = scratch.ws();
    let before = snapshot(&ws);
    let lines = run_breakout(&scratch);
    assert_eq!(snapshot(&ws), before);
    let content = task_content(&lines);
    assert!(
        content.contains("[isolated copy]") && content.contains("new.txt"),
        "{content}"
    );
    assert_eq!(
        std::fs::read_to_string(copy_in(&content).join("new.txt")).unwrap(),
        "made in the worktree\n"
    );
}

/// `[worktrees] prune_after` in the user's config: the next run removes the copies of children
/// that ended longer ago than that (here any age: "0s") and says so on stderr; without it they
/// stay until `agentloop worktrees prune`.
#[test]
fn a_configured_age_prunes_finished_worktrees_when_the_next_run_starts() {
    let scratch = builder_scratch();
    let copy = copy_in(&task_content(&run_breakout(&scratch)));
    assert!(copy.exists());

    // No configured age: the next run keeps it.
    let again = server_text("Nothing to do.");
    ok(scratch.run(&again, &["--trust-project"], "Hi."));
    assert!(copy.exists());

    scratch.user_config("[worktrees]\nprune_after = \"0s\"\n");
    let out = ok(scratch.run(&again, &["--trust-project"], "Hi."));
    assert!(!copy.exists(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("removed") && text(&out.stderr).contains("prune_after"),
        "{}",
        text(&out.stderr)
    );
    scratch.cli(&["worktrees", "list"]);
}

/// A mock model that answers every request with `answer`.
fn server_text(answer: &str) -> MockServer {
    server(json!({"mode": "sequential", "repeat": true, "turns": [{"text": answer}]}))
}

#[test]
fn an_isolated_child_killed_mid_run_goes_on_in_the_same_worktree() {
    let scratch = builder_scratch();
    let ws = scratch.ws();
    commit_all(&ws);
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "call_task", "name": "task",
                         "arguments": {"agent": "builder", "prompt": "Build it."}}]},
        {"tool_calls": [{"id": "w1", "name": "write_file",
                         "arguments": {"path": "one.txt", "content": "first run\n"}}]},
        {"text": "never sent", "first_byte_delay_ms": 600_000}
    ]}));
    kill_at_the_third_request(&scratch, &server, WRITING, "Delegate it.");

    let resumed = self::server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "w2", "name": "write_file",
                         "arguments": {"path": "two.txt", "content": "second run\n"}}]},
        {"text": "Built."},
        {"text": "Done."}
    ]}));
    let out = ok(scratch.run(&resumed, &[WRITING, &["--continue"]].concat(), "Go on."));
    let content = task_content(&schema_checked(&out.stdout));
    let branch = branch_in(&content);
    // The first run's file is on the branch too: the second run went on in its worktree.
    assert_eq!(
        git(&ws, &["show", &format!("{branch}:one.txt")]),
        "first run\n"
    );
    assert_eq!(
        git(&ws, &["show", &format!("{branch}:two.txt")]),
        "second run\n"
    );
    let listed = text(&scratch.cli(&["worktrees", "list"]).stdout);
    assert_eq!(listed.lines().count(), 1, "{listed}");
}

#[test]
fn an_isolated_child_cannot_write_another_childs_worktree() {
    let scratch = builder_scratch();
    let ws = scratch.ws();
    commit_all(&ws);
    // The second child tries to overwrite notes.txt in every sibling worktree.
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"agent": "builder", "prompt": "First."}}]},
        {"text": "First done."},
        {"tool_calls": [{"id": "t2", "name": "task", "arguments": {"agent": "builder", "prompt": "Second."}}]},
        {"tool_calls": [{"id": "s", "name": "shell", "arguments": {
            "command": "for f in ../*/notes.txt; do [ \"$f\" -ef notes.txt ] || echo x > \"$f\"; done"}}]},
        {"text": "Second done."},
        {"text": "Done."}
    ]}));
    let out = ok(scratch.run(&server, WRITING, "Delegate twice."));
    let trees = worktree_dirs(&scratch);
    assert_eq!(trees.len(), 2, "{trees:?}");
    for tree in &trees {
        assert_eq!(
            std::fs::read_to_string(tree.join("notes.txt")).unwrap(),
            "the answer is 42\n",
            "{}",
            tree.display()
        );
    }
    assert_eq!(
        std::fs::read_to_string(ws.join("notes.txt")).unwrap(),
        "the answer is 42\n"
    );
    // Where the sandbox is enforced the attempt was made, and refused.
    if agentloop::builtin::sandbox_support(agentloop::builtin::SandboxMode::WorkspaceWrite).is_ok()
    {
        let tried = child_result(&schema_checked(&out.stdout), "s")["content"].to_string();
        assert!(tried.contains("Permission denied"), "{tried}");
    }
}
