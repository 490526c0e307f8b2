//! `agentloop acp` end to end: the real binary speaks the Agent Client Protocol (JSON-RPC 2.0
//! lines on stdin/stdout) to this test acting as the editor, against the testkit mock model
//! server. Covered: initialize, session/new, a read tool call's updates, an edit approved and
//! one rejected through session/request_permission, a cancel while a permission question is
//! open, session/load replaying the stored session in a new process, and the file tools
//! reading and writing the editor's buffers (fs/read_text_file, fs/write_text_file) while
//! staying confined to the workspace, usage updates, and the checkpoints and `task` tool an
//! editor's session gets as `run` does, full tool outputs included.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::Write;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};

#[cfg(target_os = "linux")]
use support::procs::alive;
use support::{ACP_TERMINAL_REQUESTS, Scratch, assert_ok, send_signal, stdout_lines};

/// Only a guard against a hang: every wait ends as soon as the awaited message arrives.
const HANG_GUARD: Duration = Duration::from_secs(120);

/// How the test answers `session/request_permission`.
#[derive(Clone, Copy)]
enum Answer {
    Allow,
    AllowAlways,
    Reject,
    /// Sends `session/cancel` for the session, then answers the request as cancelled.
    CancelTurn,
}

/// The editor side: the agent process, its stdin, and the lines it wrote.
struct Editor {
    child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    next_id: u64,
    /// Every `session/update` params seen so far.
    updates: Vec<Value>,
    /// Every `session/request_permission` params seen so far.
    permissions: Vec<Value>,
    answer: Answer,
    /// Sends `session/cancel` when the tool call with this id starts running.
    cancel_when_running: Option<String>,
    /// Cancel the turn when a `terminal/wait_for_exit` is deferred: the command then runs in
    /// the editor's terminal for sure (an `in_progress` update may come before the terminal).
    cancel_on_wait: bool,
    /// The `clientCapabilities` sent in `initialize`.
    capabilities: Value,
    /// The editor's open buffers by absolute path: `fs/read_text_file` answers from here (else
    /// from the disk), `fs/write_text_file` writes here (an unsaved buffer, not the disk).
    buffers: HashMap<String, String>,
    /// Every `fs/*` request params seen so far, with its method as `"method"`.
    fs_calls: Vec<Value>,
    /// Every `terminal/*` request params seen so far, with its method as `"method"`.
    terminal_calls: Vec<Value>,
    /// Each terminal's command: running, or its output and exit status once it ended.
    terminals: HashMap<String, EditorTerminal>,
    /// `terminal/wait_for_exit` requests not answered yet (their command runs until killed),
    /// by terminal: the request id.
    pending_waits: HashMap<String, Value>,
    /// Answer `terminal/wait_for_exit` only when the command is killed.
    defer_waits: bool,
}

/// A command the test editor runs in a "terminal".
struct EditorTerminal {
    child: Option<Child>,
    output: String,
    status: Value,
}

impl EditorTerminal {
    /// Waits for the command (killing it first when `kill`) and keeps its output and status.
    fn finish(&mut self, kill: bool) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if kill {
            let _ = child.kill();
        }
        let out = child.wait_with_output().unwrap();
        self.output = String::from_utf8_lossy(&out.stdout).into_owned();
        self.output.push_str(&String::from_utf8_lossy(&out.stderr));
        self.status = match out.status.code() {
            Some(code) => json!({"exitCode": code}),
            None => json!({"exitCode": null, "signal": "SIGKILL"}),
        };
    }
}

impl Editor {
    fn start(scratch: &Scratch, server: &MockServer) -> Editor {
        Editor::start_with(scratch, server, &[])
    }

    /// `agentloop acp`, initialized, with a new session; the session id.
    fn open(scratch: &Scratch, server: &MockServer) -> (Editor, String) {
        Editor::open_with(scratch, server, &[])
    }

    /// [`Editor::open`] of `agentloop acp` with `extra` flags.
    fn open_with(scratch: &Scratch, server: &MockServer, extra: &[&str]) -> (Editor, String) {
        let mut editor = Editor::start_with(scratch, server, extra);
        let session = editor.begin(scratch);
        (editor, session)
    }

    /// `agentloop acp` with `extra` flags.
    fn start_with(scratch: &Scratch, server: &MockServer, extra: &[&str]) -> Editor {
        let mut child = scratch
            .cmd()
            .args(["acp", "--model", "openai:mock", "--base-url"])
            .arg(server.openai_base_url())
            .args(extra)
            .current_dir(scratch.ws())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let lines = stdout_lines(&mut child);
        Editor {
            child,
            stdin,
            lines,
            next_id: 1,
            updates: Vec::new(),
            permissions: Vec::new(),
            answer: Answer::Allow,
            cancel_when_running: None,
            cancel_on_wait: false,
            capabilities: json!({}),
            buffers: HashMap::new(),
            fs_calls: Vec::new(),
            terminal_calls: Vec::new(),
            terminals: HashMap::new(),
            pending_waits: HashMap::new(),
            defer_waits: false,
        }
    }

    fn write(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    /// Sends a request and handles what the agent sends until its response arrives.
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let line = self
                .lines
                .recv_timeout(HANG_GUARD)
                .expect("the agent went quiet");
            let message: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a non-JSON line ({e}): {line:?}"));
            assert_eq!(message["jsonrpc"], "2.0", "{message}");
            match message["method"].as_str() {
                Some("session/update") => {
                    let update = &message["params"]["update"];
                    let running = update["status"] == "in_progress"
                        && self.cancel_when_running.as_deref() == update["toolCallId"].as_str();
                    if running {
                        let session = message["params"]["sessionId"].clone();
                        self.write(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                            "params": {"sessionId": session}}));
                    }
                    self.updates.push(message["params"].clone());
                }
                Some("session/request_permission") => self.permit(&message),
                Some(method) if method.starts_with("fs/") => self.file(&message),
                Some(method) if method.starts_with("terminal/") => self.terminal(&message),
                Some(other) => panic!("unexpected request from the agent: {other}"),
                None if message["id"] == json!(id) => return message,
                None => panic!("a response to another request: {message}"),
            }
        }
    }

    fn permit(&mut self, request: &Value) {
        let params = request["params"].clone();
        self.permissions.push(params.clone());
        let outcome = match self.answer {
            Answer::Allow => json!({"outcome": "selected", "optionId": "allow-once"}),
            Answer::AllowAlways => json!({"outcome": "selected", "optionId": "allow-always"}),
            Answer::Reject => json!({"outcome": "selected", "optionId": "reject"}),
            Answer::CancelTurn => {
                self.write(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                    "params": {"sessionId": params["sessionId"]}}));
                json!({"outcome": "cancelled"})
            }
        };
        self.write(&json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}}));
    }

    /// Answers `fs/read_text_file` and `fs/write_text_file` as an editor with unsaved buffers.
    fn file(&mut self, request: &Value) {
        let mut params = request["params"].clone();
        params["method"] = request["method"].clone();
        self.fs_calls.push(params.clone());
        let path = params["path"].as_str().unwrap().to_owned();
        let result = match request["method"].as_str().unwrap() {
            "fs/read_text_file" => match self.buffers.get(&path) {
                Some(text) => Ok(json!({"content": text})),
                None => std::fs::read_to_string(&path)
                    .map(|text| json!({"content": text}))
                    .map_err(|e| e.to_string()),
            },
            "fs/write_text_file" => {
                let text = params["content"].as_str().unwrap().to_owned();
                self.buffers.insert(path, text);
                Ok(json!({}))
            }
            other => panic!("unexpected fs request {other}"),
        };
        let reply = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": request["id"], "result": result}),
            Err(message) => json!({"jsonrpc": "2.0", "id": request["id"],
                "error": {"code": -32002, "message": message}}),
        };
        self.write(&reply);
    }

    /// Answers `terminal/*` as an editor would, running the command it is asked to run in an
    /// environment holding a credential.
    fn terminal(&mut self, request: &Value) {
        let mut params = request["params"].clone();
        params["method"] = request["method"].clone();
        self.terminal_calls.push(params.clone());
        let id = params["terminalId"].as_str().unwrap_or_default().to_owned();
        let result = match request["method"].as_str().unwrap() {
            "terminal/create" => {
                let args: Vec<&str> = params["args"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|a| a.as_str().unwrap())
                    .collect();
                let child = std::process::Command::new(params["command"].as_str().unwrap())
                    .args(&args)
                    .current_dir(params["cwd"].as_str().unwrap())
                    .env("GITHUB_TOKEN", "editor-s3cret")
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let id = format!("term-{}", self.terminals.len() + 1);
                let terminal = EditorTerminal {
                    child: Some(child),
                    output: String::new(),
                    status: Value::Null,
                };
                self.terminals.insert(id.clone(), terminal);
                json!({"terminalId": id})
            }
            "terminal/wait_for_exit" if self.defer_waits => {
                self.pending_waits.insert(id, request["id"].clone());
                if self.cancel_on_wait {
                    self.write(&json!({"jsonrpc": "2.0", "method": "session/cancel",
                        "params": {"sessionId": request["params"]["sessionId"]}}));
                }
                return;
            }
            "terminal/wait_for_exit" => {
                let terminal = self.terminals.get_mut(&id).unwrap();
                terminal.finish(false);
                terminal.status.clone()
            }
            "terminal/output" => {
                let terminal = self.terminals.get_mut(&id).unwrap();
                terminal.finish(false);
                json!({"output": terminal.output, "truncated": false, "exitStatus": terminal.status})
            }
            "terminal/kill" => {
                let terminal = self.terminals.get_mut(&id).unwrap();
                terminal.finish(true);
                if let Some(wait) = self.pending_waits.remove(&id) {
                    let status = terminal.status.clone();
                    self.write(&json!({"jsonrpc": "2.0", "id": wait, "result": status}));
                }
                json!({})
            }
            "terminal/release" => json!({}),
            other => panic!("unexpected terminal request {other}"),
        };
        self.write(&json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
    }

    fn initialize(&mut self) -> Value {
        let capabilities = self.capabilities.clone();
        let response = self.request(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": capabilities}),
        );
        response["result"].clone()
    }

    fn new_session(&mut self, scratch: &Scratch) -> String {
        let response = self.request(
            "session/new",
            json!({"cwd": scratch.ws(), "mcpServers": []}),
        );
        response["result"]["sessionId"].as_str().unwrap().to_owned()
    }

    /// `initialize` (with the capabilities set so far), then `session/new`; the session id.
    fn begin(&mut self, scratch: &Scratch) -> String {
        self.initialize();
        self.new_session(scratch)
    }

    /// `session/load` of `session` in the workspace; the response.
    fn load(&mut self, scratch: &Scratch, session: &str) -> Value {
        self.request(
            "session/load",
            json!({"sessionId": session, "cwd": scratch.ws(), "mcpServers": []}),
        )
    }

    /// `session/set_mode`; the response.
    fn set_mode(&mut self, session: &str, mode: &str) -> Value {
        self.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": mode}),
        )
    }

    fn prompt(&mut self, session: &str, text: &str) -> Value {
        self.request(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
    }

    /// [`Editor::prompt`], which must end the turn with `stop_reason`; the response.
    fn prompt_ending(&mut self, session: &str, text: &str, stop_reason: &str) -> Value {
        let response = self.prompt(session, text);
        assert_eq!(response["result"]["stopReason"], stop_reason, "{response}");
        response
    }

    /// The updates of one kind (`sessionUpdate`), in order.
    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.updates
            .iter()
            .filter(|u| u["update"]["sessionUpdate"] == kind)
            .map(|u| u["update"].clone())
            .collect()
    }

    fn agent_text(&self) -> String {
        self.of_kind("agent_message_chunk")
            .iter()
            .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
            .collect()
    }

    /// The methods of the `terminal/*` requests seen so far, in order.
    fn terminal_methods(&self) -> Vec<&str> {
        self.terminal_calls
            .iter()
            .map(|c| c["method"].as_str().unwrap())
            .collect()
    }

    /// The last `tool_call_update` for `call` that has a final status.
    fn final_status(&self, call: &str) -> Option<String> {
        self.of_kind("tool_call_update")
            .iter()
            .filter(|u| u["toolCallId"] == call)
            .filter_map(|u| u["status"].as_str().map(str::to_owned))
            .rfind(|s| s == "completed" || s == "failed")
    }

    fn close(mut self) {
        drop(self.stdin);
        let status = self.child.wait().unwrap();
        assert!(status.success(), "agentloop acp exited with {status}");
    }
}

/// A mock model server playing `turns` in order.
fn sequential(turns: Value) -> MockServer {
    MockServer::start(Script::from_value(json!({"turns": turns, "mode": "sequential"})).unwrap())
}

/// [`sequential`], recording the requests it receives.
fn recorded(turns: Value) -> MockServer {
    MockServer::builder(Script::from_value(json!({"turns": turns, "mode": "sequential"})).unwrap())
        .record_requests(true)
        .start()
        .unwrap()
}

/// The workspace's notes.txt as it is on the disk.
fn notes_on_disk(scratch: &Scratch) -> String {
    std::fs::read_to_string(scratch.ws().join("notes.txt")).unwrap()
}

fn edit_notes(id: &str) -> Value {
    json!({"id": id, "name": "edit_file", "arguments":
        {"path": "notes.txt", "old_text": "milk", "new_text": "bread"}})
}

/// The turns of a model that edits notes.txt (call `c_edit`: milk to bread), then says `reply`.
fn edit_then(reply: &str) -> Value {
    json!([{"tool_calls": [edit_notes("c_edit")]}, {"text": reply}])
}

#[test]
fn read_then_approved_edit_then_load_in_a_new_process() {
    let scratch = Scratch::with_notes();
    let server = recorded(json!([
        {"tool_calls": [{"id": "c_read", "name": "read_file", "arguments": {"path": "notes.txt"}}]},
        {"text": "The note says milk.", "thinking": "Read it first."},
        {"tool_calls": [edit_notes("c_edit")]},
        {"text": "Edited."},
        {"text": "Continued in the terminal."}
    ]));
    let mut editor = Editor::start(&scratch, &server);
    let init = editor.initialize();
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    let session = editor.new_session(&scratch);

    editor.prompt_ending(&session, "What does the note say?", "end_turn");
    let call = editor
        .of_kind("tool_call")
        .into_iter()
        .find(|c| c["toolCallId"] == "c_read")
        .expect("a tool_call for the read");
    assert_eq!(call["kind"], "read");
    let location = call["locations"][0]["path"].as_str().unwrap();
    assert!(location.ends_with("notes.txt"), "{call}");
    assert_eq!(editor.final_status("c_read").as_deref(), Some("completed"));
    assert!(editor.agent_text().contains("The note says milk."));
    assert!(
        !editor.of_kind("agent_thought_chunk").is_empty(),
        "no thought chunk"
    );

    editor.prompt_ending(&session, "Replace milk by bread.", "end_turn");
    assert_eq!(editor.permissions.len(), 1, "one permission request");
    let asked = &editor.permissions[0]["toolCall"];
    assert_eq!(asked["toolCallId"], "c_edit");
    assert_eq!(asked["kind"], "edit");
    let diff = &asked["content"][0];
    assert_eq!(diff["type"], "diff", "{asked}");
    assert_eq!(diff["oldText"], "remember the milk\n");
    assert_eq!(diff["newText"], "remember the bread\n");
    let options: Vec<&str> = editor.permissions[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(options, ["allow_once", "allow_always", "reject_once"]);
    assert_eq!(editor.final_status("c_edit").as_deref(), Some("completed"));
    assert_eq!(notes_on_disk(&scratch), "remember the bread\n");
    editor.close();

    // A new process loads the stored session and replays it.
    let mut editor = Editor::start(&scratch, &server);
    editor.initialize();
    let response = editor.load(&scratch, &session);
    assert!(response.get("error").is_none(), "{response}");
    let users: String = editor
        .of_kind("user_message_chunk")
        .iter()
        .filter_map(|u| u["content"]["text"].as_str().map(str::to_owned))
        .collect();
    assert!(users.contains("What does the note say?"), "{users}");
    assert!(users.contains("Replace milk by bread."), "{users}");
    assert!(editor.agent_text().contains("Edited."));
    assert_eq!(editor.final_status("c_read").as_deref(), Some("completed"));
    assert_eq!(editor.final_status("c_edit").as_deref(), Some("completed"));
    editor.close();

    // `run --continue` in the same directory continues the editor's session.
    let out = scratch
        .run_cmd(&server)
        .args(["--continue", "And now?"])
        .current_dir(scratch.ws())
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Continued in the terminal."));
    let last = server.requests().last().unwrap().body.to_string();
    assert!(
        last.contains("Replace milk by bread.") && last.contains("And now?"),
        "{last}"
    );
    assert!(server.violations().is_empty(), "{:?}", server.violations());
}

#[test]
fn a_session_started_by_run_loads_in_the_editor() {
    let scratch = Scratch::with_notes();
    let server = sequential(json!([{"text": "Hello from run."}]));
    let out = scratch
        .run_cmd(&server)
        .args(["--json", "Say hello."])
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first: Value = serde_json::from_str(stdout.lines().next().unwrap()).unwrap();
    let session = first["session_id"]
        .as_str()
        .expect("agent_start carries the session id");

    let mut editor = Editor::start(&scratch, &server);
    editor.initialize();
    let response = editor.load(&scratch, session);
    assert!(response.get("error").is_none(), "{response}");
    assert_eq!(response["result"]["modes"]["currentModeId"], "ask");
    assert!(editor.agent_text().contains("Hello from run."));
    let unknown = editor.load(&scratch, "no-such-session");
    assert!(unknown.get("error").is_some(), "{unknown}");
    editor.close();
}

/// Opens a session, prompts the edit of notes.txt (milk to bread) and answers its permission
/// question with `answer`: the turn ends with `stop_reason`, the edit fails and the file keeps
/// its text. The editor, for more checks.
fn refuse_the_edit(
    scratch: &Scratch,
    server: &MockServer,
    answer: Answer,
    stop_reason: &str,
) -> Editor {
    let (mut editor, session) = Editor::open(scratch, server);
    editor.answer = answer;
    editor.prompt_ending(&session, "Replace milk by bread.", stop_reason);
    assert_eq!(editor.final_status("c_edit").as_deref(), Some("failed"));
    assert_eq!(notes_on_disk(scratch), "remember the milk\n");
    editor
}

#[test]
fn rejected_edit_leaves_the_file_and_tells_the_model() {
    let scratch = Scratch::with_notes();
    let server = recorded(edit_then("Understood."));
    let editor = refuse_the_edit(&scratch, &server, Answer::Reject, "end_turn");
    assert_eq!(editor.permissions.len(), 1);
    let requests = server.requests();
    let last = requests.last().unwrap().body.to_string();
    assert!(last.contains("rejected this tool call"), "{last}");
    editor.close();
}

#[test]
fn cancel_while_asking_stops_the_turn_and_answers_the_call() {
    let scratch = Scratch::with_notes();
    let server = sequential(edit_then("This turn should never be requested."));
    let editor = refuse_the_edit(&scratch, &server, Answer::CancelTurn, "cancelled");
    assert_eq!(server.request_count(), 1, "no model call after the cancel");
    editor.close();
}

#[test]
fn mode_auto_runs_edits_without_asking() {
    let scratch = Scratch::with_notes();
    let server = sequential(edit_then("Done."));
    let (mut editor, session) = Editor::open(&scratch, &server);
    let response = editor.set_mode(&session, "auto");
    assert!(response.get("error").is_none(), "{response}");
    let bad = editor.set_mode(&session, "yolo");
    assert!(bad.get("error").is_some(), "{bad}");
    editor.prompt_ending(&session, "Replace milk by bread.", "end_turn");
    assert!(
        editor.permissions.is_empty(),
        "auto asked: {:?}",
        editor.permissions
    );
    assert_eq!(
        editor.of_kind("current_mode_update")[0]["currentModeId"],
        "auto"
    );
    assert_eq!(editor.final_status("c_edit").as_deref(), Some("completed"));
    assert_eq!(notes_on_disk(&scratch), "remember the bread\n");
    editor.close();
}

#[test]
fn cancel_while_a_command_runs_stops_the_turn_and_answers_the_call() {
    let scratch = Scratch::with_notes();
    let server = sequential(json!([
        {"tool_calls": [{"id": "c_sleep", "name": "shell", "arguments": {"command": "sleep 60"}}]},
        {"text": "This turn should never be requested."}
    ]));
    let (mut editor, session) = Editor::open(&scratch, &server);
    editor.cancel_when_running = Some("c_sleep".into());
    editor.answer = Answer::Allow;
    editor.prompt_ending(&session, "Wait a minute.", "cancelled");
    let call = editor
        .of_kind("tool_call")
        .into_iter()
        .find(|c| c["toolCallId"] == "c_sleep")
        .expect("a tool_call for the command");
    assert_eq!(call["kind"], "execute");
    assert!(
        editor.final_status("c_sleep").is_some(),
        "the command got no result"
    );
    assert_eq!(server.request_count(), 1, "no model call after the cancel");
    editor.close();
}

#[test]
fn prompt_content_blocks_reach_the_model() {
    use base64::Engine;
    let scratch = Scratch::with_notes();
    let server = recorded(json!([{"text": "Seen."}]));
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&[0u8; 24]);
    let image = base64::engine::general_purpose::STANDARD.encode(&png);
    let (mut editor, session) = Editor::open(&scratch, &server);
    let notes = scratch.ws().join("notes.txt");
    let response = editor.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [
            {"type": "text", "text": "Compare these."},
            {"type": "resource_link", "name": "notes.txt", "uri": format!("file://{}", notes.display())},
            {"type": "resource", "resource": {"uri": "file:///plan.md", "text": "step one: buy bread"}},
            {"type": "image", "mimeType": "image/png", "data": image}
        ]}),
    );
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let body = server.requests().last().unwrap().body.to_string();
    assert!(body.contains("Compare these."), "{body}");
    assert!(body.contains("notes.txt"), "{body}");
    assert!(
        body.contains("step one: buy bread") && body.contains("file:///plan.md"),
        "{body}"
    );
    assert!(body.contains("data:image/png;base64,"), "{body}");
    let audio = editor.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type": "audio", "mimeType": "audio/wav", "data": ""}]}),
    );
    assert!(audio.get("error").is_some(), "{audio}");
    editor.close();
}

/// Polls for a condition (the test's subject is the end state, not how long it took).
#[cfg(target_os = "linux")]
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + HANG_GUARD;
    while std::time::Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[cfg(target_os = "linux")]
#[test]
fn sigterm_from_the_editor_kills_a_detached_command() {
    let scratch = Scratch::with_notes();
    let command =
        "(setsid sh -c 'echo $$ > pid.tmp && mv pid.tmp pid && exec sleep 300' &) ; sleep 100";
    let server = sequential(json!([
        {"tool_calls": [{"id": "c_sh", "name": "shell", "arguments": {"command": command}}]},
        {"text": "never"}
    ]));
    let (mut editor, session) = Editor::open(&scratch, &server);
    editor.set_mode(&session, "auto");
    editor.write(
        &json!({"jsonrpc": "2.0", "id": 99, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}}),
    );
    let pidfile = scratch.ws().join("pid");
    assert!(eventually(|| pidfile.exists()), "the command never started");
    let pid: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    send_signal(editor.child.id(), "TERM");
    editor.child.wait().unwrap();
    assert!(
        eventually(|| !alive(pid)),
        "the detached command outlived agentloop acp"
    );
}

#[test]
fn allow_always_is_remembered_for_the_session() {
    let scratch = Scratch::with_notes();
    let write = |id: &str, path: &str| {
        json!({"tool_calls": [{"id": id, "name": "write_file",
            "arguments": {"path": path, "content": "x\n"}}]})
    };
    let server = sequential(json!([
        write("c_a", "a.txt"), {"text": "one"},
        write("c_b", "b.txt"), {"text": "two"}
    ]));
    let (mut editor, session) = Editor::open(&scratch, &server);
    editor.answer = Answer::AllowAlways;
    editor.prompt(&session, "write a");
    editor.answer = Answer::Reject;
    editor.prompt_ending(&session, "write b", "end_turn");
    assert_eq!(
        editor.permissions.len(),
        1,
        "asked again after allow always"
    );
    assert!(scratch.ws().join("a.txt").exists() && scratch.ws().join("b.txt").exists());
    editor.close();
}

#[cfg(unix)]
#[test]
fn file_tools_use_the_editor_buffers_and_stay_in_the_workspace() {
    let scratch = Scratch::with_notes();
    let outside = scratch.path("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "outside secret\n").unwrap();
    std::os::unix::fs::symlink(&outside, scratch.ws().join("link")).unwrap();
    let call =
        |id: &str, name: &str, args: Value| json!({"id": id, "name": name, "arguments": args});
    let server = recorded(json!([
        {"tool_calls": [call("c_read", "read_file", json!({"path": "notes.txt"}))]},
        {"tool_calls": [call("c_edit", "edit_file",
            json!({"path": "notes.txt", "old_text": "eggs", "new_text": "bread"}))]},
        {"tool_calls": [call("c_new", "write_file", json!({"path": "sub/new.txt", "content": "fresh\n"}))]},
        {"tool_calls": [
            call("c_up", "read_file", json!({"path": "../outside/secret.txt"})),
            call("c_abs", "read_file", json!({"path": outside.join("secret.txt")})),
            call("c_link", "read_file", json!({"path": "link/secret.txt"})),
            call("c_link_w", "write_file", json!({"path": "link/evil.txt", "content": "x"})),
            call("c_up_w", "write_file", json!({"path": "../outside/secret.txt", "content": "x"}))
        ]},
        {"text": "Done."}
    ]));
    let mut editor = Editor::start(&scratch, &server);
    editor.capabilities = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let ws = std::fs::canonicalize(scratch.ws()).unwrap();
    let notes = ws.join("notes.txt").to_str().unwrap().to_owned();
    // The editor holds an unsaved change to notes.txt.
    editor
        .buffers
        .insert(notes.clone(), "remember the eggs\n".into());
    let session = editor.begin(&scratch);
    editor.set_mode(&session, "auto");
    editor.prompt_ending(&session, "Work on the notes.", "end_turn");

    // The model read the buffer, not the disk.
    let requests = server.requests();
    let after_read = requests[1].body.to_string();
    assert!(after_read.contains("remember the eggs"), "{after_read}");
    assert!(!after_read.contains("remember the milk"), "{after_read}");
    // The edit read and wrote the buffer; the disk waits for the editor to save.
    for id in ["c_read", "c_edit", "c_new"] {
        assert_eq!(
            editor.final_status(id).as_deref(),
            Some("completed"),
            "{id}"
        );
    }
    assert_eq!(editor.buffers[&notes], "remember the bread\n");
    let new = ws.join("sub/new.txt").to_str().unwrap().to_owned();
    assert_eq!(editor.buffers[&new], "fresh\n");
    assert_eq!(notes_on_disk(&scratch), "remember the milk\n");
    assert!(!scratch.ws().join("sub/new.txt").exists());
    let calls: Vec<(String, String)> = editor
        .fs_calls
        .iter()
        .map(|c| {
            assert_eq!(c["sessionId"], session.as_str(), "{c}");
            (
                c["method"].as_str().unwrap().to_owned(),
                c["path"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    // Each edit's diff is read from the buffer before the edit reads it again to change it.
    let expected = [
        ("fs/read_text_file", &notes),
        ("fs/read_text_file", &notes),
        ("fs/read_text_file", &notes),
        ("fs/write_text_file", &notes),
        ("fs/read_text_file", &new),
        ("fs/write_text_file", &new),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
        .collect();
    // The refused paths never reached the editor.
    assert_eq!(calls, expected);
    for id in ["c_up", "c_abs", "c_link", "c_link_w", "c_up_w"] {
        assert_eq!(editor.final_status(id).as_deref(), Some("failed"), "{id}");
    }
    // The edit ran without a question (auto mode): its diff still starts from the buffer the
    // edit changed, not from the disk; the new file's from nothing.
    let diff_of = |id: &str| {
        editor
            .of_kind("tool_call")
            .into_iter()
            .find(|u| u["toolCallId"] == id)
            .map(|u| u["content"][0].clone())
            .unwrap()
    };
    let edit = diff_of("c_edit");
    assert_eq!(edit["type"], "diff", "{edit}");
    assert_eq!(edit["oldText"], "remember the eggs\n", "{edit}");
    assert_eq!(edit["newText"], "remember the bread\n", "{edit}");
    let created = diff_of("c_new");
    assert!(created["oldText"].is_null(), "{created}");
    assert_eq!(created["newText"], "fresh\n", "{created}");
    // A refused path shows no diff: what lies outside never reaches the editor.
    assert!(diff_of("c_up_w").is_null());
    let shown = serde_json::to_string(&editor.updates).unwrap();
    assert!(!shown.contains("outside secret"), "{shown}");
    let last = server.requests().last().unwrap().body.to_string();
    assert!(!last.contains("outside secret"), "{last}");
    assert!(!outside.join("evil.txt").exists());
    editor.close();
}

/// `agentloop ARGS` in the workspace; its stdout (it must succeed).
fn agentloop_in_ws(scratch: &Scratch, args: &[&str]) -> String {
    let out = scratch
        .cmd()
        .current_dir(scratch.ws())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs one auto-mode edit of notes.txt (milk to bread) in a new editor session of
/// `agentloop acp EXTRA`; the editor, for more questions.
fn edit_in_auto_mode(scratch: &Scratch, server: &MockServer, extra: &[&str]) -> (Editor, Value) {
    let (mut editor, session) = Editor::open_with(scratch, server, extra);
    editor.set_mode(&session, "auto");
    let response = editor.prompt_ending(&session, "Replace milk by bread.", "end_turn");
    assert_eq!(notes_on_disk(scratch), "remember the bread\n");
    (editor, response)
}

#[test]
fn usage_is_reported_after_each_reply_and_with_the_response() {
    let scratch = Scratch::with_notes();
    let mut edit = json!({"tool_calls": [edit_notes("c_edit")]});
    edit["usage"] = json!({"input_tokens": 50, "output_tokens": 5});
    let server = sequential(json!([
        edit,
        {"text": "Edited.", "usage": {"input_tokens": 60, "output_tokens": 3}}
    ]));
    let (editor, response) = edit_in_auto_mode(&scratch, &server, &["--context-window", "100000"]);
    let updates: Vec<(u64, u64)> = editor
        .of_kind("usage_update")
        .iter()
        .map(|u| (u["used"].as_u64().unwrap(), u["size"].as_u64().unwrap()))
        .collect();
    assert_eq!(updates, [(55, 100_000), (63, 100_000)]);
    let usage = &response["result"]["usage"];
    assert_eq!(usage["inputTokens"], 110, "{response}");
    assert_eq!(usage["outputTokens"], 8, "{response}");
    assert_eq!(usage["totalTokens"], 118, "{response}");
    editor.close();
}

#[test]
fn an_editor_session_gets_checkpoints_and_the_task_tool() {
    let scratch = Scratch::with_notes();
    let server = recorded(edit_then("Edited."));
    let (editor, _) = edit_in_auto_mode(&scratch, &server, &[]);
    editor.close();
    let tools = &server.requests()[0].body["tools"];
    let names: Vec<&str> = tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().or(t["name"].as_str()))
        .collect();
    assert!(names.contains(&"task"), "{names:?}");

    let list: Vec<Value> = agentloop_in_ws(&scratch, &["checkpoints", "--json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(list.len(), 1, "{list:?}");
    assert_eq!(list[0]["call_id"], "c_edit");
    assert_eq!(list[0]["files"], json!(["notes.txt"]));
    let id = list[0]["id"].to_string();
    agentloop_in_ws(&scratch, &["rewind", "--to", &id, "--files-only"]);
    assert_eq!(notes_on_disk(&scratch), "remember the milk\n");
}

/// A command's long output in an editor's session: the model gets the head and tail, and the
/// whole is kept for `sessions show --full`, as in `run`.
#[test]
fn an_editor_session_keeps_full_tool_outputs() {
    let scratch = Scratch::new();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c_seq", "name": "shell",
                             "arguments": {"command": "seq 1 30000"}}]},
            {"text": "Counted."}
        ]}))
        .unwrap(),
    );
    let (mut editor, session) = Editor::open(&scratch, &server);
    editor.prompt_ending(&session, "Count.", "end_turn");
    editor.close();
    let full = agentloop_in_ws(&scratch, &["sessions", "show", "--full", &session]);
    assert!(full.contains("full output of call c_seq"), "{full:.400}");
    let numbers: Vec<&str> = full
        .lines()
        .skip_while(|l| *l != "1")
        .take_while(|l| l.parse::<u32>().is_ok())
        .collect();
    let expected: Vec<String> = (1..=30_000).map(|n| n.to_string()).collect();
    assert!(numbers == expected, "{} lines kept", numbers.len());
}

#[test]
fn no_checkpoints_records_none_for_an_editor_session() {
    let scratch = Scratch::with_notes();
    let server = sequential(edit_then("Edited."));
    let (editor, _) = edit_in_auto_mode(&scratch, &server, &["--no-checkpoints"]);
    editor.close();
    assert!(!scratch.path("data/agentloop/checkpoints").exists());
    assert_eq!(
        agentloop_in_ws(&scratch, &["checkpoints", "--json"]).trim(),
        ""
    );
}

/// The latency benchmark: how long after the model's first token is on the wire the client
/// has it, through `agentloop acp` (first `agent_message_chunk`), `agentloop run --json` (first
/// `message_update` line) and `agentloop run` (first byte of the text on stdout). A model
/// server of its own (in this process) stamps the moment it writes the first token; reader
/// threads stamp the moment the client side reads it, on the same clock. Run with
/// `cargo test -p agentloop-cli --release --test acp -- --ignored --nocapture first_token`.
mod latency {
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::process::Stdio;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    use serde_json::json;

    use super::support::Scratch;

    const TOKEN: &str = "Hello";

    /// A chat-completions server that answers every request with a streamed "Hello world."
    /// and sends, for each, the moment its first token was written.
    fn model_server() -> (String, mpsc::Receiver<Instant>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        let (stamps, received) = mpsc::channel();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let stamps = stamps.clone();
                std::thread::spawn(move || answer(stream, &stamps));
            }
        });
        (url, received)
    }

    fn answer(mut stream: TcpStream, stamps: &mpsc::Sender<Instant>) {
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let lower = line.to_ascii_lowercase();
            if let Some(value) = lower.strip_prefix("content-length:") {
                length = value.trim().parse().unwrap();
            }
            if line == "\r\n" {
                break;
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        let chunk = |delta: serde_json::Value, finish: serde_json::Value| {
            let event = json!({"id": "c1", "object": "chat.completion.chunk", "created": 0,
                "model": "mock", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
            format!("data: {event}\n\n")
        };
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        stream.write_all(head.as_bytes()).unwrap();
        stream.flush().unwrap();
        let first = chunk(json!({"role": "assistant", "content": TOKEN}), json!(null));
        let sent = Instant::now();
        stream.write_all(first.as_bytes()).unwrap();
        stream.flush().unwrap();
        let _ = stamps.send(sent);
        // The rest later, so the first token travels alone.
        std::thread::sleep(Duration::from_millis(20));
        let rest = chunk(json!({"content": " world."}), json!(null))
            + &chunk(json!({}), json!("stop"))
            + "data: [DONE]\n\n";
        let _ = stream.write_all(rest.as_bytes());
    }

    /// Median and 99th percentile, in microseconds.
    fn summary(mut samples: Vec<Duration>) -> (f64, f64) {
        samples.sort();
        let at = |q: f64| {
            let i = ((samples.len() - 1) as f64 * q).round() as usize;
            samples[i].as_secs_f64() * 1e6
        };
        (at(0.5), at(0.99))
    }

    /// Reads `stdout` on a thread as it comes (not line by line: the text renderer may write a
    /// line in pieces); sends the moment what was read so far first satisfies `is_first`.
    fn watch(
        mut stdout: impl Read + Send + 'static,
        is_first: fn(&str) -> bool,
    ) -> mpsc::Receiver<Instant> {
        let (send, seen) = mpsc::channel();
        std::thread::spawn(move || {
            let mut all = Vec::new();
            let mut chunk = [0u8; 8192];
            loop {
                match stdout.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        let now = Instant::now();
                        all.extend_from_slice(&chunk[..n]);
                        if is_first(&String::from_utf8_lossy(&all)) {
                            let _ = send.send(now);
                            // Drain the rest so the process never blocks on a full pipe.
                            let _ = std::io::copy(&mut stdout, &mut std::io::sink());
                            return;
                        }
                    }
                }
            }
        });
        seen
    }

    const WAIT: Duration = Duration::from_secs(60);

    /// `agentloop SUBCOMMAND` in the workspace on the model at `url`, without checkpoints: the
    /// same conditions for every client measured.
    fn agentloop(scratch: &Scratch, subcommand: &str, url: &str) -> std::process::Command {
        let mut command = scratch.cmd();
        command
            .args([
                subcommand,
                "--model",
                "openai:mock",
                "--no-checkpoints",
                "--base-url",
                url,
            ])
            .current_dir(scratch.ws());
        command
    }

    /// `agentloop acp` with one session open.
    struct Acp {
        child: std::process::Child,
        stdin: std::process::ChildStdin,
        lines: mpsc::Receiver<(Instant, String)>,
        session: serde_json::Value,
        next_id: u64,
    }

    impl Acp {
        fn start(scratch: &Scratch, url: &str) -> Acp {
            let mut child = agentloop(scratch, "acp", url)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let stdin = child.stdin.take().unwrap();
            let (lines_send, lines) = mpsc::channel();
            let stdout = child.stdout.take().unwrap();
            std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { return };
                    if lines_send.send((Instant::now(), line)).is_err() {
                        return;
                    }
                }
            });
            let mut acp = Acp {
                child,
                stdin,
                lines,
                session: json!(null),
                next_id: 1,
            };
            let init = json!({"protocolVersion": 1, "clientCapabilities": {}});
            acp.request("initialize", init);
            let new = json!({"cwd": scratch.ws(), "mcpServers": []});
            acp.session = acp.request("session/new", new).1["result"]["sessionId"].clone();
            acp
        }

        /// Sends a request; when the first `agent_message_chunk` came (if one did), and the
        /// response.
        fn request(
            &mut self,
            method: &str,
            params: serde_json::Value,
        ) -> (Option<Instant>, serde_json::Value) {
            let id = self.next_id;
            self.next_id += 1;
            let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            writeln!(self.stdin, "{message}").unwrap();
            self.stdin.flush().unwrap();
            let mut first = None;
            loop {
                let (at, line) = self.lines.recv_timeout(WAIT).unwrap();
                if first.is_none() && line.contains("agent_message_chunk") {
                    first = Some(at);
                }
                let message: serde_json::Value = serde_json::from_str(&line).unwrap();
                if message["id"] == id && message.get("method").is_none() {
                    return (first, message);
                }
            }
        }

        /// One prompt: from the first token on the wire to its `agent_message_chunk`.
        fn sample(&mut self, sent: &mpsc::Receiver<Instant>) -> Duration {
            let prompt = json!({"sessionId": self.session,
                "prompt": [{"type": "text", "text": "hi"}]});
            let (first, _) = self.request("session/prompt", prompt);
            let sent = sent.recv_timeout(WAIT).unwrap();
            first.unwrap().duration_since(sent)
        }

        fn close(self) {
            drop(self.stdin);
            let mut child = self.child;
            child.wait().unwrap();
        }
    }

    /// One `agentloop run` (`--json` when `json`): from the first token on the wire to the
    /// client's first sight of it.
    fn run(scratch: &Scratch, url: &str, sent: &mpsc::Receiver<Instant>, json: bool) -> Duration {
        let mut command = agentloop(scratch, "run", url);
        command.stdout(Stdio::piped()).stderr(Stdio::null());
        if json {
            command.arg("--json");
        }
        let mut child = command.arg("hi").spawn().unwrap();
        let is_first: fn(&str) -> bool = if json {
            |text| text.contains("message_update")
        } else {
            |text| text.contains(TOKEN)
        };
        let seen = watch(child.stdout.take().unwrap(), is_first);
        let first = seen.recv_timeout(WAIT).unwrap();
        let sent = sent.recv_timeout(WAIT).unwrap();
        child.wait().unwrap();
        first.duration_since(sent)
    }

    #[test]
    #[ignore = "a benchmark: run it on purpose"]
    fn first_token_latency() {
        let n: usize = std::env::var("ACP_BENCH_PROMPTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100);
        let scratch = Scratch::new();
        let (url, sent) = model_server();
        // Interleaved, so the three see the same load on the machine.
        let mut acp = Acp::start(&scratch, &url);
        let (mut over_acp, mut json, mut text) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..n {
            over_acp.push(acp.sample(&sent));
            json.push(run(&scratch, &url, &sent, true));
            text.push(run(&scratch, &url, &sent, false));
        }
        acp.close();
        let added: Vec<Duration> = over_acp
            .iter()
            .zip(&json)
            .map(|(a, j)| a.saturating_sub(*j))
            .collect();
        println!("first token on the wire -> client, {n} prompts each: | path | median | p99 |");
        for (name, samples) in [
            ("agentloop acp (agent_message_chunk)", over_acp),
            ("agentloop run --json (message_update)", json),
            ("agentloop run (text on stdout)", text),
        ] {
            let (median, p99) = summary(samples);
            println!("| {name} | {median:.0} µs | {p99:.0} µs |");
        }
        let (median, p99) = summary(added);
        println!(
            "| acp minus run --json, per round (0 when faster) | {median:.0} µs | {p99:.0} µs |"
        );
    }
}

#[cfg(target_os = "linux")]
#[test]
fn shell_commands_run_in_editor_terminals_through_the_sandbox_wrapper() {
    let scratch = Scratch::with_notes();
    let command = "echo from-terminal; echo \"token=$GITHUB_TOKEN\"; echo in > inside.txt";
    let server = recorded(json!([
        {"tool_calls": [{"id": "c_sh", "name": "shell", "arguments": {"command": command}}]},
        {"text": "Ran it."}
    ]));
    let mut editor = Editor::start_with(&scratch, &server, &["--sandbox", "read-only"]);
    editor.capabilities = json!({"terminal": true});
    let session = editor.begin(&scratch);
    editor.set_mode(&session, "auto");
    editor.prompt_ending(&session, "Run it.", "end_turn");

    // The editor was asked to start agentloop's sandbox wrapper, never the raw command.
    assert_eq!(editor.terminal_methods(), ACP_TERMINAL_REQUESTS);
    let create = &editor.terminal_calls[0];
    assert_eq!(create["sessionId"], session.as_str());
    let program = std::fs::canonicalize(create["command"].as_str().unwrap()).unwrap();
    assert_eq!(
        program,
        std::fs::canonicalize(support::BIN).unwrap(),
        "{create}"
    );
    let args: Vec<&str> = create["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "__sandbox-exec", "{create}");
    assert!(
        args.windows(2).any(|w| w == ["--mode", "read-only"]),
        "{create}"
    );
    assert_eq!(args[args.len() - 2..], ["--", command], "{create}");
    // The call shows the terminal, and the model gets its output and exit status.
    let shown = editor
        .of_kind("tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "c_sh" && u["content"][0]["type"] == "terminal")
        .expect("a terminal in the tool call");
    assert_eq!(shown["content"][0]["terminalId"], "term-1");
    assert_eq!(editor.final_status("c_sh").as_deref(), Some("completed"));
    let body = server.requests().last().unwrap().body.to_string();
    assert!(body.contains("from-terminal"), "{body}");
    // The wrapper applied the shell tool's policy: the credential of the editor's environment
    // was dropped, and in read-only mode nothing could be written (where Landlock enforces).
    assert!(
        body.contains("token=") && !body.contains("editor-s3cret"),
        "{body}"
    );
    if agentloop::builtin::sandbox_support(agentloop::builtin::SandboxMode::ReadOnly).is_ok() {
        assert!(!scratch.ws().join("inside.txt").exists(), "{body}");
        assert!(!body.contains("exit code: 0"), "{body}");
    }
    editor.close();
}

#[cfg(target_os = "linux")]
#[test]
fn a_cancelled_turn_kills_and_releases_the_editor_terminal() {
    let scratch = Scratch::with_notes();
    let server = sequential(json!([
        {"tool_calls": [{"id": "c_sleep", "name": "shell", "arguments": {"command": "sleep 60"}}]},
        {"text": "This turn should never be requested."}
    ]));
    let mut editor = Editor::start(&scratch, &server);
    editor.capabilities = json!({"terminal": true});
    editor.defer_waits = true;
    let session = editor.begin(&scratch);
    editor.set_mode(&session, "auto");
    // Cancelled once the command runs in the terminal (its wait is pending).
    editor.cancel_on_wait = true;
    editor.prompt_ending(&session, "Wait a minute.", "cancelled");
    // The kill and release may trail the response: wait for them (bounded by the hang guard).
    let deadline = std::time::Instant::now() + HANG_GUARD;
    let ended = |editor: &Editor| {
        let methods = editor.terminal_methods();
        methods.contains(&"terminal/kill") && methods.contains(&"terminal/release")
    };
    while !ended(&editor) && std::time::Instant::now() < deadline {
        let line = editor
            .lines
            .recv_timeout(HANG_GUARD)
            .expect("the agent went quiet");
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["method"]
            .as_str()
            .is_some_and(|m| m.starts_with("terminal/"))
        {
            editor.terminal(&message);
        }
    }
    assert!(ended(&editor), "{:?}", editor.terminal_calls);
    let terminal = &editor.terminals["term-1"];
    assert!(terminal.child.is_none(), "the command was not killed");
    assert_eq!(terminal.status["signal"], "SIGKILL");
    assert_eq!(server.request_count(), 1, "no model call after the cancel");
    editor.close();
}

#[test]
fn a_permission_question_shows_the_edit_of_the_editor_buffer() {
    let scratch = Scratch::with_notes();
    let server = sequential(json!([
        {"tool_calls": [{"id": "c_edit", "name": "edit_file", "arguments":
            {"path": "notes.txt", "old_text": "eggs", "new_text": "bread"}}]},
        {"tool_calls": [{"id": "c_out", "name": "write_file", "arguments":
            {"path": "../outside.txt", "content": "x"}}]},
        {"text": "Done."}
    ]));
    let mut editor = Editor::start(&scratch, &server);
    editor.capabilities = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    let notes = std::fs::canonicalize(scratch.ws().join("notes.txt"))
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    editor
        .buffers
        .insert(notes.clone(), "remember the eggs\n".into());
    let session = editor.begin(&scratch);
    editor.prompt_ending(&session, "Edit the notes.", "end_turn");
    assert_eq!(editor.permissions.len(), 2);
    let diff = &editor.permissions[0]["toolCall"]["content"][0];
    assert_eq!(diff["type"], "diff", "{diff}");
    assert_eq!(diff["oldText"], "remember the eggs\n");
    assert_eq!(diff["newText"], "remember the bread\n");
    assert_eq!(editor.buffers[&notes], "remember the bread\n");
    // The refused path was asked about, but never sent to the editor.
    assert_eq!(editor.final_status("c_out").as_deref(), Some("failed"));
    assert!(
        editor
            .fs_calls
            .iter()
            .all(|c| c["path"].as_str() == Some(notes.as_str())),
        "{:?}",
        editor.fs_calls
    );
    editor.close();
}
