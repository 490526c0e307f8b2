//! Command hooks: programs run at fixed points of a session, fed one JSON object on stdin, whose
//! exit code and stdout decide (the format of Claude Code's hooks, so existing scripts port).
//!
//! [`CommandHooks`] holds the hooks and runs those of one [`HookEvent`]; its
//! [`extension`](CommandHooks::extension) plugs `pre_tool_use`, `post_tool_use` and `stop` into
//! the loop's hook API ([`Extension`]), and the application calls [`CommandHooks::run`] at its own
//! points for the others (`session_start`, `user_prompt_submit`, …). Exit 0 goes on (stdout may
//! carry a JSON decision); exit 2 blocks, with stderr as the reason.
//!
//! Guards fail closed: a `pre_tool_use` hook that exits with another code, prints JSON that
//! cannot be read or times out blocks the call, with a reason naming the hook, unless it opted
//! into [`OnError::Allow`]. For the other events such a failure is a warning. A hook runs as the
//! user, outside the shell sandbox, with the shell tool's environment (an allow-list of
//! harmless variables, credentials dropped) plus `AGENTLOOP_PROJECT_DIR`, in its own process
//! group; its output is capped, and on timeout the whole group is killed, so a hook that hangs,
//! floods its output or forks a daemon costs at most its timeout and leaves nothing behind.
//!
//! Each hook run is a `hook {event}` span (with the event, the command, the tool, the exit code
//! and the outcome as attributes), exported with the run's
//! other spans when OpenTelemetry is on.
//!
//! Hooks run synchronously (the loop's hooks are synchronous): on a multi-threaded Tokio runtime
//! the worker is handed over with `block_in_place`; on a current-thread runtime the loop waits
//! for the hook, at most its timeout.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::{Duration, Instant};

use regex::Regex;
use serde_json::{Map, Value, json};

mod lifecycle;
mod span;
pub use lifecycle::CompactionTrigger;

use super::{Extension, FinalizedToolCall, MessageQueue, PreparedToolCall, ResultRewrite};
use super::{ToolCallDecision, TurnSummary};
use crate::opaque::Opaque;
use crate::transcript::Message;

/// The default timeout of a hook.
pub const DEFAULT_HOOK_TIMEOUT: Duration = Duration::from_secs(60);

/// How much of a hook's stdout and of its stderr is kept; the rest is read and dropped.
pub const HOOK_OUTPUT_LIMIT: usize = 64 * 1024;

/// How many times in a row `stop` hooks may send the agent back to work in one run.
pub const MAX_STOP_CONTINUATIONS: u32 = 3;

/// The points a hook can run at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HookEvent {
    /// A session (or a run of the CLI) starts; `additional_context` is added for the model.
    SessionStart,
    /// The user submitted a prompt; a block refuses it, `additional_context` is added to it.
    UserPromptSubmit,
    /// A tool call is about to run; a block answers it with an error, `updated_input` replaces
    /// its arguments (validated again).
    PreToolUse,
    /// A tool call finished; a block or `additional_context` is added to its result.
    PostToolUse,
    /// The agent is about to stop; a block gives it another turn with the reason.
    Stop,
    /// A sub-agent is about to give its answer to its parent; a block sends it back to work.
    SubagentStop,
    /// Older turns are about to be summarised; a block skips that compaction,
    /// `additional_context` is appended to the summary ([`CommandHooks::compactor`]).
    PreCompact,
    /// The application tells the person something (an approval is needed, a turn finished;
    /// [`CommandHooks::notify`]).
    Notification,
    /// The session ends.
    SessionEnd,
}

impl HookEvent {
    /// Every event, in the order above.
    pub const ALL: &'static [HookEvent] = &[
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::Stop,
        HookEvent::SubagentStop,
        HookEvent::PreCompact,
        HookEvent::Notification,
        HookEvent::SessionEnd,
    ];

    /// The name in config files and in the hook's input (`hook_event_name`).
    pub fn as_str(&self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStop => "subagent_stop",
            HookEvent::PreCompact => "pre_compact",
            HookEvent::Notification => "notification",
            HookEvent::SessionEnd => "session_end",
        }
    }

    /// The event named `name`.
    pub fn from_name(name: &str) -> Option<HookEvent> {
        HookEvent::ALL.iter().copied().find(|e| e.as_str() == name)
    }

    /// Whether a failing hook of this event blocks by default.
    fn is_guard(&self) -> bool {
        matches!(self, HookEvent::PreToolUse)
    }
}

/// What a hook's failure (a bad exit code, unreadable JSON, a timeout) means.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnError {
    /// `pre_tool_use`: block the call; other events: warn and go on.
    #[default]
    Default,
    /// Warn and go on, for every event.
    Allow,
}

/// One hook: a command run by `sh -c` at one event.
#[derive(Clone, Debug)]
pub struct CommandHook {
    /// When it runs.
    pub event: HookEvent,
    /// For tool events: a regex the whole tool name must match; `None` matches every tool.
    pub matcher: Option<Regex>,
    /// The command line.
    pub command: String,
    /// How long it may take.
    pub timeout: Duration,
    /// What its failure means.
    pub on_error: OnError,
}

impl CommandHook {
    /// A hook with the default timeout, no matcher and fail-closed guards.
    pub fn new(event: HookEvent, command: impl Into<String>) -> Self {
        CommandHook {
            event,
            matcher: None,
            command: command.into(),
            timeout: DEFAULT_HOOK_TIMEOUT,
            on_error: OnError::Default,
        }
    }

    fn matches(&self, event: HookEvent, tool: Option<&str>) -> bool {
        self.event == event
            && match (&self.matcher, tool) {
                (Some(re), Some(tool)) => re
                    .find(tool)
                    .is_some_and(|m| m.start() == 0 && m.end() == tool.len()),
                _ => true,
            }
    }
}

/// What the hooks of one event decided together.
#[derive(Clone, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct HookOutcome {
    /// Set when a hook blocked: the reason, naming the hook when it failed.
    pub block: Option<String>,
    /// Text the hooks asked to add for the model.
    pub additional_context: Vec<String>,
    /// New tool arguments (`pre_tool_use`).
    pub updated_input: Option<Value>,
    /// Failures that did not block, one line each.
    pub warnings: Vec<String>,
}

/// What one hook run did, for the application to show (`hook_result` lines in the CLI's JSON).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct HookReport {
    /// The event.
    pub event: HookEvent,
    /// The hook's command.
    pub command: String,
    /// The tool, for tool events.
    pub tool_name: Option<String>,
    /// Its exit code (`None`: killed, timed out or never started).
    pub exit_code: Option<i32>,
    /// `"continue"`, `"block"` or `"error"`.
    pub outcome: &'static str,
    /// The block reason or the error.
    pub message: Option<String>,
}

type Observer = Arc<dyn Fn(&HookReport) + Send + Sync>;

/// A set of hooks for one session. Cheap to clone.
#[derive(Clone, Debug)]
pub struct CommandHooks {
    hooks: Arc<Vec<CommandHook>>,
    session_id: String,
    cwd: PathBuf,
    observer: Option<Opaque<Observer>>,
}

impl CommandHooks {
    /// Hooks run in `cwd` (the workspace) for session `session_id`.
    pub fn new(hooks: Vec<CommandHook>, session_id: impl Into<String>, cwd: PathBuf) -> Self {
        CommandHooks {
            hooks: Arc::new(hooks),
            session_id: session_id.into(),
            cwd,
            observer: None,
        }
    }

    /// Calls `observer` after every hook run.
    pub fn with_observer(mut self, observer: impl Fn(&HookReport) + Send + Sync + 'static) -> Self {
        self.observer = Some(Opaque(Arc::new(observer)));
        self
    }

    /// Whether any hook runs at `event`.
    pub fn has(&self, event: HookEvent) -> bool {
        self.hooks.iter().any(|h| h.event == event)
    }

    /// Runs, in order, the hooks of `event` that match `tool`, with the input `fields` plus
    /// `session_id`, `cwd` and `hook_event_name`. The first block ends the sequence; an
    /// `updated_input` is passed on to the next hook as its `tool_input`.
    pub fn run(
        &self,
        event: HookEvent,
        tool: Option<&str>,
        fields: Map<String, Value>,
    ) -> HookOutcome {
        let mut outcome = HookOutcome::default();
        let mut input = fields;
        input.insert("session_id".into(), json!(self.session_id));
        input.insert("cwd".into(), json!(self.cwd.display().to_string()));
        input.insert("hook_event_name".into(), json!(event.as_str()));
        for hook in self.hooks.iter().filter(|h| h.matches(event, tool)) {
            let stdin = Value::Object(input.clone()).to_string();
            let span = span::hook_span(hook, tool);
            let ran = span.in_scope(|| blocking(|| run_one(hook, &stdin, &self.cwd)));
            let (verdict, report) = judge(hook, tool, ran);
            span::record_report(&span, &report);
            drop(span);
            if let Some(observer) = &self.observer {
                observer(&report);
            }
            match verdict {
                Verdict::Block(reason) => {
                    outcome.block = Some(reason);
                    break;
                }
                Verdict::Warn(line) => outcome.warnings.push(line),
                Verdict::Continue { context, updated } => {
                    outcome.additional_context.extend(context);
                    if let Some(updated) = updated {
                        input.insert("tool_input".into(), updated.clone());
                        outcome.updated_input = Some(updated);
                    }
                }
            }
        }
        for line in &outcome.warnings {
            tracing::warn!(hook_event = event.as_str(), "{line}");
        }
        outcome
    }

    /// An [`Extension`] named `command-hooks` that runs the `pre_tool_use`, `post_tool_use` and
    /// `stop` hooks. A `stop` block is delivered through `follow_ups` (the loop's follow-up
    /// queue), at most [`MAX_STOP_CONTINUATIONS`] times in a row.
    pub fn extension(&self, follow_ups: MessageQueue) -> Extension {
        let mut extension = Extension::new("command-hooks");
        if self.has(HookEvent::PreToolUse) {
            let hooks = self.clone();
            extension = extension.on_tool_call(move |call| hooks.pre_tool_use(call));
        }
        if self.has(HookEvent::PostToolUse) {
            let hooks = self.clone();
            extension = extension.on_tool_result(move |call| hooks.post_tool_use(call));
        }
        if self.has(HookEvent::Stop) {
            let hooks = self.clone();
            let streak = AtomicU32::new(0);
            extension = extension.on_should_stop_after_turn(move |summary| {
                hooks.stop(summary, &follow_ups, &streak);
                false
            });
        }
        extension
    }

    /// Whether a hook of `event` matches `tool` (checked before any input is built, so a call
    /// no hook matches costs only the matchers).
    fn any_matches(&self, event: HookEvent, tool: &str) -> bool {
        self.hooks.iter().any(|h| h.matches(event, Some(tool)))
    }

    fn pre_tool_use(&self, call: &PreparedToolCall) -> ToolCallDecision {
        if !self.any_matches(HookEvent::PreToolUse, &call.tool_name) {
            return ToolCallDecision::Continue;
        }
        let mut fields = Map::new();
        fields.insert("tool_name".into(), json!(call.tool_name));
        fields.insert("tool_input".into(), call.arguments.clone());
        fields.insert("tool_call_id".into(), json!(call.id));
        let outcome = self.run(HookEvent::PreToolUse, Some(&call.tool_name), fields);
        match (outcome.block, outcome.updated_input) {
            (Some(reason), _) => ToolCallDecision::Block(reason),
            (None, Some(updated)) => ToolCallDecision::Rewrite(updated),
            (None, None) => ToolCallDecision::Continue,
        }
    }

    fn post_tool_use(&self, call: &FinalizedToolCall) -> Option<ResultRewrite> {
        if !self.any_matches(HookEvent::PostToolUse, &call.tool_name) {
            return None;
        }
        let mut fields = Map::new();
        fields.insert("tool_name".into(), json!(call.tool_name));
        fields.insert("tool_input".into(), call.arguments.clone());
        fields.insert("tool_call_id".into(), json!(call.id));
        fields.insert(
            "tool_response".into(),
            json!({"content": call.result.content, "is_error": call.result.is_error}),
        );
        let outcome = self.run(HookEvent::PostToolUse, Some(&call.tool_name), fields);
        let mut notes: Vec<String> = outcome.additional_context;
        if let Some(reason) = outcome.block {
            notes.push(reason);
        }
        if notes.is_empty() {
            return None;
        }
        Some(ResultRewrite {
            content: Some(format!(
                "{}\n\n[post_tool_use hook]\n{}",
                call.result.content,
                notes.join("\n")
            )),
            is_error: None,
        })
    }

    fn stop(&self, summary: &TurnSummary<'_>, follow_ups: &MessageQueue, streak: &AtomicU32) {
        // Only when the model is done: a turn with tool calls goes on anyway.
        if !summary.tool_results.is_empty() {
            return;
        }
        let continued = streak.load(Ordering::SeqCst);
        let mut fields = Map::new();
        fields.insert("stop_hook_active".into(), json!(continued > 0));
        fields.insert(
            "last_assistant_message".into(),
            json!(summary.message.text()),
        );
        let outcome = self.run(HookEvent::Stop, None, fields);
        match outcome.block {
            Some(reason) if continued < MAX_STOP_CONTINUATIONS => {
                streak.fetch_add(1, Ordering::SeqCst);
                follow_ups.push(Message::user(reason));
            }
            Some(_) => tracing::warn!(
                "a stop hook blocked again after {MAX_STOP_CONTINUATIONS} continuations; stopping"
            ),
            None => streak.store(0, Ordering::SeqCst),
        }
    }
}

/// Runs `f` where blocking is allowed: through `block_in_place` on a multi-threaded runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(f)
        }
        _ => f(),
    }
}

/// How a hook process ended.
struct Ran {
    /// `Err`: it could not be started, or timed out (the text says which).
    status: Result<Option<i32>, String>,
    stdout: String,
    stderr: String,
}

/// The environment a hook gets: the agent's minus every credential-like variable.
fn hook_command(command: &str, cwd: &std::path::Path) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(std::env::vars_os().filter(|(name, value)| passes_env_filter(name, value)))
        .env("AGENTLOOP_PROJECT_DIR", cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    cmd
}

/// The shell tool's filter: an allow-listed name ([`SHELL_ENV_BASE`](crate::builtin::SHELL_ENV_BASE)
/// or `LC_*`) whose name and value do not look like a credential.
fn passes_env_filter(name: &std::ffi::OsStr, value: &std::ffi::OsStr) -> bool {
    let name = name.to_string_lossy();
    (crate::builtin::SHELL_ENV_BASE.contains(&name.as_ref()) || name.starts_with("LC_"))
        && !crate::builtin::looks_like_credential(&name)
        && !crate::builtin::looks_like_credential_value(&value.to_string_lossy())
}

fn run_one(hook: &CommandHook, stdin: &str, cwd: &std::path::Path) -> Ran {
    let mut child = match hook_command(&hook.command, cwd).spawn() {
        Ok(child) => child,
        Err(e) => {
            return Ran {
                status: Err(format!("could not be started: {e}")),
                stdout: String::new(),
                stderr: String::new(),
            };
        }
    };
    let out = capture(child.stdout.take());
    let err = capture(child.stderr.take());
    if let Some(mut pipe) = child.stdin.take() {
        let input = stdin.to_owned();
        // A hook that does not read its input must not block the write.
        std::thread::spawn(move || {
            let _ = pipe.write_all(input.as_bytes());
        });
    }
    let status = wait(&mut child, hook.timeout);
    // The group goes whatever happened: nothing the hook started outlives it.
    kill_group(&child);
    let _ = child.wait();
    Ran {
        status,
        stdout: take(out),
        stderr: take(err),
    }
}

type Captured = Arc<Mutex<Vec<u8>>>;

/// How long the output is waited for once the hook's group is gone (a process that left the
/// group may still hold the pipe; what arrived by then is used).
const DRAIN_WAIT: Duration = Duration::from_secs(1);

/// Reads a pipe to its end on a thread, keeping the first [`HOOK_OUTPUT_LIMIT`] bytes; the
/// receiver hears when the pipe closed.
fn capture(pipe: Option<impl Read + Send + 'static>) -> (Captured, Option<mpsc::Receiver<()>>) {
    let buffer: Captured = Arc::default();
    let done = pipe.map(|mut pipe| {
        let buffer = buffer.clone();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                let mut kept = buffer.lock().unwrap_or_else(PoisonError::into_inner);
                let room = HOOK_OUTPUT_LIMIT.saturating_sub(kept.len());
                kept.extend_from_slice(&chunk[..n.min(room)]);
            }
            let _ = tx.send(());
        });
        rx
    });
    (buffer, done)
}

fn take((buffer, done): (Captured, Option<mpsc::Receiver<()>>)) -> String {
    if let Some(done) = done {
        let _ = done.recv_timeout(DRAIN_WAIT);
    }
    let bytes = std::mem::take(&mut *buffer.lock().unwrap_or_else(PoisonError::into_inner));
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Waits for the child, at most `timeout`.
fn wait(child: &mut Child, timeout: Duration) -> Result<Option<i32>, String> {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status.code()),
            Ok(None) if Instant::now() >= deadline => {
                return Err(format!("timed out after {}s", timeout.as_secs_f64()));
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(format!("could not be waited for: {e}")),
        }
    }
}

fn kill_group(child: &Child) {
    #[cfg(unix)]
    {
        if let Some(pid) = i32::try_from(child.id())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }
    #[cfg(not(unix))]
    let _ = child;
}

enum Verdict {
    Continue {
        context: Option<String>,
        updated: Option<Value>,
    },
    Block(String),
    Warn(String),
}

/// Turns a finished run into a verdict (see the module docs) and a report.
fn judge(hook: &CommandHook, tool: Option<&str>, ran: Ran) -> (Verdict, HookReport) {
    let name = format!("{} hook `{}`", hook.event.as_str(), hook.command);
    let failed = |why: String| {
        let line = format!("{name} failed: {why}");
        if hook.event.is_guard() && hook.on_error == OnError::Default {
            Verdict::Block(format!("{line}; the call was blocked"))
        } else {
            Verdict::Warn(line)
        }
    };
    let exit_code = ran.status.as_ref().ok().copied().flatten();
    let mut failed_run = true;
    let verdict = match ran.status {
        Err(why) => failed(why),
        Ok(Some(2)) => {
            failed_run = false;
            let reason = ran.stderr.trim();
            Verdict::Block(if reason.is_empty() {
                format!("blocked by the {name} (no reason given)")
            } else {
                reason.to_owned()
            })
        }
        Ok(Some(0)) => match parse_stdout(&ran.stdout) {
            Ok(verdict) => {
                failed_run = false;
                verdict
            }
            Err(why) => failed(why),
        },
        Ok(Some(code)) => failed(format!(
            "exit code {code}{}",
            match ran.stderr.trim() {
                "" => String::new(),
                e => format!(": {}", first_line(e)),
            }
        )),
        Ok(None) => failed("killed by a signal".into()),
    };
    let (outcome, message) = match &verdict {
        Verdict::Continue { .. } => ("continue", None),
        Verdict::Block(reason) if failed_run => ("error", Some(reason.clone())),
        Verdict::Block(reason) => ("block", Some(reason.clone())),
        Verdict::Warn(line) => ("error", Some(line.clone())),
    };
    let report = HookReport {
        event: hook.event,
        command: hook.command.clone(),
        tool_name: tool.map(str::to_owned),
        exit_code,
        outcome,
        message,
    };
    (verdict, report)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// Exit 0's stdout: empty, or a JSON object with `decision`, `reason`, `additional_context` and
/// `updated_input` (each optional). Anything else is an error.
fn parse_stdout(stdout: &str) -> Result<Verdict, String> {
    let text = stdout.trim();
    if text.is_empty() {
        return Ok(Verdict::Continue {
            context: None,
            updated: None,
        });
    }
    let value: Value =
        serde_json::from_str(text).map_err(|e| format!("its output is not a JSON object ({e})"))?;
    let Value::Object(object) = value else {
        return Err("its output is JSON but not an object".into());
    };
    let reason = object
        .get("reason")
        .and_then(Value::as_str)
        .map(str::to_owned);
    match object.get("decision") {
        None | Some(Value::Null) => {}
        Some(Value::String(d)) if d == "allow" || d == "approve" => {}
        Some(Value::String(d)) if d == "block" || d == "deny" => {
            return Ok(Verdict::Block(
                reason.unwrap_or_else(|| "blocked by a hook (no reason given)".into()),
            ));
        }
        Some(other) => return Err(format!("unknown decision {other}")),
    }
    let context = match object.get("additional_context") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => Some(other.to_string()),
    };
    Ok(Verdict::Continue {
        context,
        updated: object
            .get("updated_input")
            .filter(|v| !v.is_null())
            .cloned(),
    })
}
