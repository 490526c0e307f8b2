//! Extension points read from files, through the real binary against the testkit mock model:
//! `[permissions]` rules and `[[hooks.EVENT]]` command hooks with real hook scripts (every
//! event the CLI runs, each decision and exit-code path, a hook that hangs and forks).
//!
//! Every child runs with stdin from /dev/null (no terminal), so a call that needs approval and
//! is not allowed by a rule is denied (exit code 4).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Output;

use agentloop_testkit::MockServer;
use serde_json::{Value, json};

mod support;

use support::{COMPACTING_FLAGS, Scratch, assert_stderr_has, compacting_server, server, text};

impl Scratch {
    /// Writes an executable script in the scratch directory and returns its path.
    fn script(&self, name: &str, body: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        path
    }
    /// `agentloop run --json --model openai:mock --base-url … --workspace ws ARGS… PROMPT`.
    fn run_json(&self, server: &MockServer, args: &[&str], prompt: &str) -> Output {
        self.run_cmd(server)
            .arg("--json")
            .args(args)
            .arg(prompt)
            .output()
            .unwrap()
    }
}

/// Reads a hook's recorded input and checks it against its documented schema
/// (`docs/hook-schemas/EVENT.input.json`).
fn hook_input(path: &Path) -> Value {
    let input: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let event = input["hook_event_name"].as_str().unwrap().to_owned();
    let schema_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs/hook-schemas")
        .join(format!("{event}.input.json"));
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(schema_path).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(&input)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{input}: {}", errors.join("; "));
    input
}

fn events(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The results of the calls of `tool`.
fn results(out: &Output, tool: &str) -> Vec<Value> {
    events(out)
        .into_iter()
        .filter(|e| e["type"] == "tool_execution_end" && e["call"]["tool_name"] == tool)
        .map(|e| e["result"].clone())
        .collect()
}

fn hook_lines(out: &Output) -> Vec<Value> {
    events(out)
        .into_iter()
        .filter(|e| e["type"] == "hook_result")
        .collect()
}

/// One call of `tool` with `arguments`, then a final answer.
fn one_call(tool: &str, arguments: Value) -> Value {
    json!({"turns": [
        {"tool_calls": [{"id": "call_1", "name": tool, "arguments": arguments}]},
        {"text": "Done."}
    ]})
}

fn write_call(path: &str) -> Value {
    one_call("write_file", json!({"path": path, "content": "x\n"}))
}

fn shell_call(command: &str) -> Value {
    one_call("shell", json!({ "command": command }))
}

/// The body of the last request the model got, as text.
fn last_request(server: &MockServer) -> String {
    server.requests().last().unwrap().body.to_string()
}

fn toml_str(path: &Path) -> String {
    toml_string(&path.display().to_string())
}

fn toml_string(s: &str) -> String {
    format!("{:?}", s)
}

// ---- permissions -------------------------------------------------------------------------

#[test]
fn an_allow_rule_runs_a_call_that_would_have_been_asked_about() {
    let scratch = Scratch::new();
    let server = server(write_call("src/out.txt"));
    // Without a rule: asked, and with no terminal, denied (exit 4).
    let out = scratch.run_json(&server, &[], "write");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("src/out.txt").exists());

    scratch.user_config("[permissions]\nallow = [\"write_file(src/**)\"]\n");
    let server = self::server(write_call("src/out.txt"));
    let out = scratch.run_json(&server, &[], "write");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(scratch.ws().join("src/out.txt").exists());
    // Outside the pattern: still asked.
    let server = self::server(write_call("other.txt"));
    let out = scratch.run_json(&server, &[], "write");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
}

#[test]
fn a_shell_allow_rule_does_not_cover_a_second_command() {
    let scratch = Scratch::new();
    scratch.user_config("[permissions]\nallow = [\"shell(echo ok*)\"]\n");
    let server = server(shell_call("echo ok"));
    let out = scratch.run_json(&server, &[], "run it");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        results(&out, "shell")[0]["content"]
            .as_str()
            .unwrap()
            .contains("ok")
    );

    for line in [
        "echo ok; touch pwned",
        "echo ok $(touch pwned)",
        "echo ok > pwned",
    ] {
        let server = self::server(shell_call(line));
        let out = scratch.run_json(&server, &[], "run it");
        assert_eq!(out.status.code(), Some(4), "{line}: {}", text(&out.stderr));
        assert!(!scratch.ws().join("pwned").exists(), "{line}");
    }
}

#[test]
fn a_deny_rule_wins_even_under_approve_allow() {
    let scratch = Scratch::new();
    scratch.user_config(
        "[permissions]\nallow = [\"shell\"]\ndeny = [\"shell(touch*)\", \"read_file(.env*)\"]\n",
    );
    std::fs::write(scratch.ws().join(".env"), "SECRET=1\n").unwrap();
    let server = server(shell_call("echo a && touch pwned"));
    let out = scratch.run_json(&server, &["--approve", "allow"], "run it");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("pwned").exists());
    let result = &results(&out, "shell")[0];
    assert_eq!(result["is_error"], true);
    assert!(last_request(&server).contains("shell(touch*)"));

    let server = self::server(one_call("read_file", json!({"path": ".env"})));
    let out = scratch.run_json(&server, &["--approve", "allow"], "read it");
    assert!(!last_request(&server).contains("SECRET=1"));
    assert_eq!(results(&out, "read_file")[0]["is_error"], true);
}

#[test]
fn an_untrusted_workspace_file_can_deny_but_not_allow() {
    let scratch = Scratch::new();
    scratch.workspace_config(
        "[permissions]\nallow = [\"write_file\"]\ndeny = [\"write_file(blocked.txt)\"]\n",
    );
    let server = server(write_call("a.txt"));
    let out = scratch.run_json(&server, &[], "write");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("a.txt").exists());
    let server = self::server(write_call("blocked.txt"));
    let out = scratch.run_json(&server, &["--approve", "allow"], "write");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("blocked.txt").exists());
}

#[test]
fn a_bad_rule_is_a_one_line_error_naming_the_file() {
    let scratch = Scratch::new();
    scratch.user_config("[permissions]\nallow = [\"shell(cargo test\"]\n");
    let server = server(write_call("a.txt"));
    let out = scratch.run_json(&server, &[], "write");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("config.toml") && stderr.contains("shell(cargo test"),
        "{stderr}"
    );
    assert_eq!(server.request_count(), 0);
}

// ---- hooks -------------------------------------------------------------------------------

fn hook_config(event: &str, extra: &str, script: &Path) -> String {
    format!(
        "[[hooks.{event}]]\ncommand = {}\n{extra}\n",
        toml_str(script)
    )
}

/// Configures `hook` as the user's one hook of `event` (with the `extra` settings), then runs a
/// model that writes `path`, every call allowed; the model server and the run's output.
fn write_under_hook(
    scratch: &Scratch,
    event: &str,
    extra: &str,
    hook: &Path,
    path: &str,
) -> (MockServer, Output) {
    scratch.user_config(&hook_config(event, extra, hook));
    let server = server(write_call(path));
    let out = scratch.run_json(&server, &["--approve", "allow"], "write");
    (server, out)
}

#[test]
fn pre_tool_use_exit_2_blocks_the_call_with_stderr_as_the_reason() {
    let scratch = Scratch::new();
    let input = scratch.path("input.json");
    let hook = scratch.script(
        "guard.sh",
        &format!(
            "cat > {}\necho 'no writes today' >&2\nexit 2",
            input.display()
        ),
    );
    scratch.user_config(&hook_config(
        "pre_tool_use",
        "matcher = \"write_file|shell\"",
        &hook,
    ));
    let server = server(write_call("out.txt"));
    let out = scratch.run_json(&server, &["--approve", "allow"], "write");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("out.txt").exists());
    let result = &results(&out, "write_file")[0];
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("no writes today")
    );
    assert!(last_request(&server).contains("no writes today"));
    let hooks = hook_lines(&out);
    assert_eq!(hooks.len(), 1, "{hooks:?}");
    assert_eq!(hooks[0]["outcome"], "block");
    assert_eq!(hooks[0]["hook_event_name"], "pre_tool_use");
    assert_eq!(hooks[0]["exit_code"], 2);
    // The input: one JSON object with the documented fields.
    let input = hook_input(&input);
    assert_eq!(input["hook_event_name"], "pre_tool_use");
    assert_eq!(input["tool_name"], "write_file");
    assert_eq!(input["tool_call_id"], "call_1");
    assert_eq!(input["tool_input"]["path"], "out.txt");
    assert!(input["session_id"].as_str().is_some_and(|s| !s.is_empty()));
    assert!(input["cwd"].as_str().unwrap().ends_with("ws"));
}

#[test]
fn a_matcher_that_does_not_name_the_tool_leaves_the_call_alone() {
    let scratch = Scratch::new();
    let hook = scratch.script("guard.sh", "exit 2");
    let (_, out) = write_under_hook(
        &scratch,
        "pre_tool_use",
        "matcher = \"shell\"",
        &hook,
        "out.txt",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(scratch.ws().join("out.txt").exists());
    assert!(hook_lines(&out).is_empty());
}

#[test]
fn a_failing_guard_blocks_unless_it_opted_into_failing_open() {
    for (body, needle) in [
        ("exit 1", "exit code 1"),
        ("echo 'not json'", "not a JSON object"),
        ("echo '[1]'", "not an object"),
    ] {
        let scratch = Scratch::new();
        let hook = scratch.script("guard.sh", body);
        let (_, out) = write_under_hook(&scratch, "pre_tool_use", "", &hook, "out.txt");
        assert!(!scratch.ws().join("out.txt").exists(), "{body}");
        let result = &results(&out, "write_file")[0];
        let content = result["content"].as_str().unwrap();
        assert!(
            content.contains(needle) && content.contains("guard.sh"),
            "{body}: {content}"
        );
        assert_eq!(hook_lines(&out)[0]["outcome"], "error");

        let (_, out) = write_under_hook(
            &scratch,
            "pre_tool_use",
            "on_error = \"allow\"",
            &hook,
            "out.txt",
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        assert!(scratch.ws().join("out.txt").exists(), "{body}");
    }
}

#[test]
fn a_hook_that_hangs_and_forks_is_killed_with_its_children_at_its_timeout() {
    let scratch = Scratch::new();
    let pid_file = scratch.path("daemon.pid");
    let hook = scratch.script(
        "hang.sh",
        &format!(
            "sleep 300 &\necho $! > {}\nhead -c 100000000 /dev/zero\nsleep 300",
            pid_file.display()
        ),
    );
    let (_, out) = write_under_hook(&scratch, "pre_tool_use", "timeout = 1", &hook, "out.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("out.txt").exists());
    let content = results(&out, "write_file")[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        content.contains("timed out") || content.contains("not a JSON"),
        "{content}"
    );
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The background child was in the hook's process group: it is gone (or a zombie).
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    assert!(
        status.is_empty() || status.contains("State:\tZ"),
        "the hook's child {pid} survived: {status}"
    );
}

#[test]
fn pre_tool_use_can_rewrite_the_arguments_and_json_can_block() {
    let scratch = Scratch::new();
    let hook = scratch.script(
        "rewrite.sh",
        r#"echo '{"updated_input": {"path": "redirected.txt", "content": "from the hook"}}'"#,
    );
    let (_, out) = write_under_hook(&scratch, "pre_tool_use", "", &hook, "out.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!scratch.ws().join("out.txt").exists());
    assert_eq!(
        std::fs::read_to_string(scratch.ws().join("redirected.txt")).unwrap(),
        "from the hook"
    );

    // Arguments that break the tool's schema are refused like the model's own.
    let hook = scratch.script("bad.sh", r#"echo '{"updated_input": {"path": 5}}'"#);
    let (_, out) = write_under_hook(&scratch, "pre_tool_use", "", &hook, "out2.txt");
    assert_eq!(results(&out, "write_file")[0]["is_error"], true);
    assert!(!scratch.ws().join("out2.txt").exists());

    let hook = scratch.script(
        "block.sh",
        r#"echo '{"decision": "block", "reason": "use the staging dir"}'"#,
    );
    let (_, out) = write_under_hook(&scratch, "pre_tool_use", "", &hook, "out3.txt");
    assert!(!scratch.ws().join("out3.txt").exists());
    let content = results(&out, "write_file")[0]["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(content.contains("use the staging dir"), "{content}");
}

#[test]
fn post_tool_use_adds_context_to_the_result_the_model_sees() {
    let scratch = Scratch::new();
    let input = scratch.path("post.json");
    let hook = scratch.script(
        "post.sh",
        &format!(
            "cat > {}\necho '{{\"additional_context\": \"remember to run the linter\"}}'",
            input.display()
        ),
    );
    let (server, out) = write_under_hook(&scratch, "post_tool_use", "", &hook, "out.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(scratch.ws().join("out.txt").exists());
    assert!(last_request(&server).contains("remember to run the linter"));
    let input = hook_input(&input);
    assert_eq!(input["hook_event_name"], "post_tool_use");
    assert_eq!(input["tool_response"]["is_error"], false);

    // Exit 2 after the fact: the reason is added too (the call already ran).
    let hook = scratch.script("post2.sh", "echo 'that file is generated' >&2; exit 2");
    let (server, out) = write_under_hook(&scratch, "post_tool_use", "", &hook, "out2.txt");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(last_request(&server).contains("that file is generated"));
}

#[test]
fn user_prompt_submit_can_refuse_a_prompt_or_add_context() {
    let scratch = Scratch::new();
    let hook = scratch.script(
        "prompt.sh",
        "if grep -q password; then echo 'prompts must not contain passwords' >&2; exit 2; fi\n\
         echo '{\"additional_context\": \"the ticket is ABC-1\"}'",
    );
    scratch.user_config(&hook_config("user_prompt_submit", "", &hook));
    let server = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "my password is hunter2");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("prompts must not contain passwords"));
    assert_eq!(server.request_count(), 0);

    let out = scratch.run_json(&server, &[], "fix the bug");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = last_request(&server);
    assert!(
        body.contains("fix the bug") && body.contains("the ticket is ABC-1"),
        "{body}"
    );
}

#[test]
fn session_start_context_reaches_the_model_and_session_end_sees_the_stop() {
    let scratch = Scratch::new();
    let end = scratch.path("end.json");
    let start = scratch.script(
        "start.sh",
        "echo '{\"additional_context\": \"the build uses make\"}'",
    );
    let finish = scratch.script("end.sh", &format!("cat > {}", end.display()));
    scratch.user_config(&format!(
        "{}{}",
        hook_config("session_start", "", &start),
        hook_config("session_end", "", &finish)
    ));
    let server = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(last_request(&server).contains("the build uses make"));
    let end = hook_input(&end);
    assert_eq!(end["hook_event_name"], "session_end");
    assert_eq!(end["reason"]["reason"], "done", "{end}");
    // A failing hook of these events is a warning; the run goes on.
    let broken = scratch.script("broken.sh", "exit 7");
    scratch.user_config(&hook_config("session_start", "", &broken));
    let server = self::server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(hook_lines(&out)[0]["outcome"], "error");
}

/// A `--json` run of [`compacting_server`] under [`COMPACTING_FLAGS`]: the loop compacts before
/// the third model call (the summary is the third scripted reply) unless a hook skips it.
fn compacting_run(scratch: &Scratch) -> (MockServer, Output) {
    let server = compacting_server();
    let out = scratch.run_json(&server, &COMPACTING_FLAGS, "list twice");
    (server, out)
}

#[test]
fn pre_compact_hooks_can_pin_context_into_the_summary_or_skip_the_compaction() {
    let scratch = Scratch::new();
    let input = scratch.path("input.json");
    let pin = scratch.script(
        "pin.sh",
        &format!(
            "cat > {}\necho '{{\"additional_context\": \"PINNED: keep the API key rotation plan\"}}'",
            input.display()
        ),
    );
    scratch.user_config(&hook_config("pre_compact", "", &pin));
    let (server, out) = compacting_run(&scratch);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 4);
    let last = requests[3].body["messages"].to_string();
    assert!(
        last.contains("SUMMARY-OF-EARLY-WORK") && last.contains("PINNED: keep the API key"),
        "{last}"
    );
    let input = hook_input(&input);
    assert_eq!(input["hook_event_name"], "pre_compact");
    assert_eq!(input["trigger"], "auto");
    assert!(input["message_count"].as_u64().unwrap() >= 1, "{input}");

    // exit 2: this compaction is skipped; the run goes on with the whole context.
    let skip = scratch.script(
        "skip.sh",
        "echo 'keep everything for the audit' >&2; exit 2",
    );
    scratch.user_config(&hook_config("pre_compact", "", &skip));
    let (server, out) = compacting_run(&scratch);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = server.requests();
    assert_eq!(requests.len(), 3, "no summary call was made");
    assert!(requests[2].body["messages"].to_string().contains("c1"));
    assert_eq!(hook_lines(&out)[0]["outcome"], "block");
}

#[test]
fn notification_hooks_hear_that_a_turn_finished() {
    let scratch = Scratch::new();
    let heard = scratch.path("heard.json");
    let hook = scratch.script("notify.sh", &format!("cat > {}", heard.display()));
    scratch.user_config(&hook_config("notification", "", &hook));
    let server = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let heard = hook_input(&heard);
    assert_eq!(heard["hook_event_name"], "notification");
    assert_eq!(heard["notification_type"], "turn_finished");
    assert_eq!(heard["reason"]["reason"], "done");
    assert!(heard["message"].as_str().is_some_and(|m| !m.is_empty()));
}

#[test]
fn a_subagent_stop_hook_sends_the_sub_agent_back_to_work_with_its_reason() {
    let scratch = Scratch::new();
    let input = scratch.path("subagent-input.json");
    let seen = scratch.path("seen-once");
    let hook = scratch.script(
        "check.sh",
        &format!(
            "cat > {input}\nif [ -e {seen} ]; then exit 0; fi\ntouch {seen}\necho 'cite the file you read' >&2\nexit 2",
            input = input.display(),
            seen = seen.display()
        ),
    );
    scratch.user_config(&hook_config("subagent_stop", "", &hook));
    let server = server(json!({"mode": "sequential", "turns": [
        {"tool_calls": [{"id": "t1", "name": "task", "arguments": {"agent": "explore", "prompt": "find the entry point"}}]},
        {"text": "FIRST-ANSWER"},
        {"text": "SECOND-ANSWER in main.rs"},
        {"text": "Done."}
    ]}));
    let out = scratch.run_json(&server, &[], "delegate");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let result = &results(&out, "task")[0];
    assert_eq!(result["is_error"], false, "{result}");
    assert_eq!(result["content"], "SECOND-ANSWER in main.rs");
    let retry = server.requests()[2].body["messages"].to_string();
    assert!(
        retry.contains("find the entry point")
            && retry.contains("FIRST-ANSWER")
            && retry.contains("cite the file you read"),
        "{retry}"
    );
    // The second run's input: the answer it accepted, marked as a continuation.
    let input = hook_input(&input);
    assert_eq!(input["hook_event_name"], "subagent_stop");
    assert_eq!(input["agent"], "explore");
    assert_eq!(input["tool_call_id"], "t1");
    assert_eq!(input["last_assistant_message"], "SECOND-ANSWER in main.rs");
    assert_eq!(input["stop_hook_active"], true);
}

#[test]
fn a_stop_hook_sends_the_agent_back_to_work_a_bounded_number_of_times() {
    let scratch = Scratch::new();
    let marker = scratch.path("stopped-once");
    let hook = scratch.script(
        "stop.sh",
        &format!(
            "if [ -e {m} ]; then exit 0; fi\ntouch {m}\necho 'the tests were not run' >&2\nexit 2",
            m = marker.display()
        ),
    );
    scratch.user_config(&hook_config("stop", "", &hook));
    let server = server(json!({"turns": [{"text": "all done"}, {"text": "ran the tests"}]}));
    let out = scratch.run_json(&server, &[], "work");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(server.request_count(), 2);
    assert!(last_request(&server).contains("the tests were not run"));

    // A hook that always blocks gets the agent at most three more turns.
    let always = scratch.script("always.sh", "echo 'again' >&2; exit 2");
    scratch.user_config(&hook_config("stop", "", &always));
    let server = self::server(json!({"turns": [
        {"text": "1"}, {"text": "2"}, {"text": "3"}, {"text": "4"}, {"text": "5"}, {"text": "6"}
    ]}));
    let out = scratch.run_json(&server, &[], "work");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(server.request_count(), 4);
}

#[test]
fn workspace_hooks_do_not_run_in_an_untrusted_workspace() {
    let scratch = Scratch::new();
    let ran = scratch.path("ran");
    scratch.workspace_config(&format!(
        "[[hooks.session_start]]\ncommand = {}\n",
        toml_string(&format!("touch {}", ran.display()))
    ));
    let server = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!ran.exists());
}

// ---- skills, custom commands, user-wide instructions --------------------------------------

/// Writes `SKILL.md` (and `extra` files) of a user skill.
fn user_skill(scratch: &Scratch, dir: &str, skill_md: &str, extra: &[(&str, &str)]) {
    let root = scratch.path("config/agentloop/skills").join(dir);
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("SKILL.md"), skill_md).unwrap();
    for (name, text) in extra {
        std::fs::write(root.join(name), text).unwrap();
    }
}

#[test]
fn skills_are_listed_in_the_prompt_and_loaded_through_the_skill_tool() {
    let scratch = Scratch::new();
    user_skill(
        &scratch,
        "notes",
        "---\nname: release-notes\ndescription: Write release notes\nallowed-tools: shell\n---\nGroup commits by area. BODY-MARKER\n",
        &[("template.md", "TEMPLATE-MARKER")],
    );
    std::fs::write(scratch.path("config/agentloop/secret.txt"), "SECRET-MARKER").unwrap();
    user_skill(
        &scratch,
        "broken",
        "---\nname: broken\n---\nno description\n",
        &[],
    );
    let server = server(json!({"turns": [
        {"tool_calls": [
            {"id": "c1", "name": "skill", "arguments": {"name": "release-notes"}},
            {"id": "c2", "name": "skill", "arguments": {"name": "release-notes", "file": "template.md"}},
            {"id": "c3", "name": "skill", "arguments": {"name": "release-notes", "file": "../../secret.txt"}}
        ]},
        {"text": "Done."}
    ]}));
    let out = scratch.run_json(&server, &[], "write the notes");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_stderr_has(&out, "broken");
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("release-notes") && first.contains("Write release notes"));
    assert!(
        !first.contains("BODY-MARKER"),
        "only names and descriptions up front"
    );
    // The calls run in parallel: their results are taken by call id.
    let result = |id: &str| {
        events(&out)
            .into_iter()
            .find(|e| e["type"] == "tool_execution_end" && e["call"]["id"] == id)
            .map(|e| e["result"].clone())
            .unwrap()
    };
    assert!(
        result("c1")["content"]
            .as_str()
            .unwrap()
            .contains("BODY-MARKER")
    );
    assert!(
        result("c2")["content"]
            .as_str()
            .unwrap()
            .contains("TEMPLATE-MARKER")
    );
    assert_eq!(result("c3")["is_error"], true);
    assert!(!last_request(&server).contains("SECRET-MARKER"));
}

#[test]
fn skills_list_shows_names_and_descriptions() {
    let scratch = Scratch::new();
    user_skill(
        &scratch,
        "pdf",
        "---\ndescription: Fill PDF forms\n---\nbody\n",
        &[],
    );
    let out = scratch.plain(&[
        "skills",
        "list",
        "--json",
        "--workspace",
        scratch.ws().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(listed["name"], "pdf");
    assert_eq!(listed["description"], "Fill PDF forms");
}

#[test]
fn a_custom_command_expands_its_arguments_and_allows_its_tools() {
    let scratch = Scratch::new();
    let commands = scratch.path("config/agentloop/commands");
    std::fs::create_dir_all(&commands).unwrap();
    std::fs::write(
        commands.join("fix.md"),
        "---\ndescription: Fix a bug\nallowed_tools: write_file(fixed.txt)\n---\nFix bug #$1 ($ARGUMENTS).\n",
    )
    .unwrap();
    let server = server(write_call("fixed.txt"));
    let out = scratch.run_json(&server, &[], "/fix 42 urgently");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("Fix bug #42 (42 urgently)."), "{first}");
    // allowed_tools applied for this prompt: no approval was needed.
    assert!(scratch.ws().join("fixed.txt").exists());
    // An unknown /name is sent as typed.
    let server = self::server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "/unknown thing");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(last_request(&server).contains("/unknown thing"));
}

#[test]
fn the_user_agents_md_comes_before_the_project_one() {
    let scratch = Scratch::new();
    std::fs::write(scratch.path("config/agentloop/AGENTS.md"), "USER-RULES").unwrap();
    std::fs::write(scratch.ws().join("AGENTS.md"), "PROJECT-RULES").unwrap();
    let server = server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &[], "hello");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body = last_request(&server);
    let user = body.find("USER-RULES").expect("user file sent");
    let project = body.find("PROJECT-RULES").expect("project file sent");
    assert!(user < project, "{body}");
}

#[test]
fn a_trusted_workspace_brings_its_own_rules_hooks_skills_and_commands() {
    let scratch = Scratch::new();
    let ran = scratch.path("hook-ran");
    let project = scratch.ws().join(".agentloop");
    std::fs::create_dir_all(project.join("skills/deploy")).unwrap();
    std::fs::create_dir_all(project.join("commands")).unwrap();
    std::fs::write(
        project.join("config.toml"),
        format!(
            "[permissions]\nallow = [\"write_file(out.txt)\"]\n\n[[hooks.session_start]]\ncommand = {}\n",
            toml_string(&format!("touch {}", ran.display()))
        ),
    )
    .unwrap();
    std::fs::write(
        project.join("skills/deploy/SKILL.md"),
        "---\ndescription: Deploy to staging\n---\nsteps\n",
    )
    .unwrap();
    std::fs::write(project.join("commands/ship.md"), "Ship $ARGUMENTS now.").unwrap();
    // Untrusted: none of it applies, and stderr says what was ignored.
    let server = server(write_call("out.txt"));
    let out = scratch.run_json(&server, &[], "/ship v2");
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    assert!(!ran.exists() && !scratch.ws().join("out.txt").exists());
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("/ship v2") && !first.contains("Deploy to staging"),
        "{first}"
    );
    assert_stderr_has(&out, "hooks.session_start");
    // Trusted for this invocation: all of it does.
    let server = self::server(write_call("out.txt"));
    let out = scratch.run_json(&server, &["--trust-project"], "/ship v2");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(ran.exists() && scratch.ws().join("out.txt").exists());
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("Ship v2 now.") && first.contains("Deploy to staging"),
        "{first}"
    );
    // Claude Code's command directory works as it is, with its hyphenated keys; ours wins
    // for a name both have.
    let claude = scratch.ws().join(".claude").join("commands");
    std::fs::create_dir_all(&claude).unwrap();
    std::fs::write(
        claude.join("review.md"),
        "---\nallowed-tools: Write(out.txt)\nargument-hint: [file]\n---\nReview $1 carefully.",
    )
    .unwrap();
    std::fs::write(claude.join("ship.md"), "CLAUDE SHIP").unwrap();
    std::fs::remove_file(scratch.ws().join("out.txt")).unwrap();
    std::fs::write(project.join("config.toml"), "").unwrap();
    let server = self::server(write_call("out.txt"));
    let out = scratch.run_json(&server, &["--trust-project"], "/review main.rs");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        scratch.ws().join("out.txt").exists(),
        "allowed-tools applied"
    );
    let first = server.requests()[0].body.to_string();
    assert!(first.contains("Review main.rs carefully."), "{first}");
    let server = self::server(json!({"turns": [{"text": "ok"}]}));
    let out = scratch.run_json(&server, &["--trust-project"], "/ship v3");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let first = server.requests()[0].body.to_string();
    assert!(
        first.contains("Ship v3 now.") && !first.contains("CLAUDE SHIP"),
        "{first}"
    );
}
