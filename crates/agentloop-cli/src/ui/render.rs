//! Turning agent events into output: JSON lines (`--json`), or compact human-readable text with
//! an optional spinner.
//!
//! Human output goes to stdout: the assistant's text as it streams, one line per tool call with
//! its arguments abbreviated, the first lines of each result, and a final summary line. The
//! spinner (waiting for the model, running a tool) is drawn on stderr, and only when stderr is a
//! terminal; it is hidden before anything is printed so the two never interleave. In JSON mode
//! stdout carries exactly one `serde_json::to_string(&event)` per line and nothing else. With
//! `run --output-schema`, human output goes to stderr so stdout carries only the output.
//!
//! This module only formats; it never decides how a run ends or what the exit code is.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use agentloop::agent::{AgentEvent, RunStop};
use agentloop::model::ModelDelta;
use agentloop::transcript::{
    Message, Part, Role, StopReason, ToolArguments, ToolCallPart, ToolResultPart, Usage,
};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

use crate::ui::markdown::MarkdownStream;
use crate::ui::safe_text::{visible, visible_line};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Human output goes to stderr instead of stdout (`run --quiet`: stdout is kept for the final
/// answer).
static HUMAN_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// `run --quiet`: the answer is printed once, at the end, on stdout; the streamed text is not
/// shown on the way (on a terminal, stderr and stdout are the same screen).
static ANSWER_AT_END: AtomicBool = AtomicBool::new(false);

/// `--json=compact`: events without the transcript other lines already carried.
static JSON_COMPACT: AtomicBool = AtomicBool::new(false);

/// `--json=compact` from now on (see [`compact_event`]).
pub fn compact_json() {
    JSON_COMPACT.store(true, Ordering::SeqCst);
}

/// Sends everything [`out`] writes to stderr from now on (`run --quiet`).
pub fn redirect_to_stderr() {
    HUMAN_TO_STDERR.store(true, Ordering::SeqCst);
}

/// `run --quiet`: human output to stderr ([`redirect_to_stderr`]) without the text of a message
/// that may be the answer — only messages that call tools show theirs — since the caller prints
/// the answer once at the end ([`final_answer`]).
pub fn quiet() {
    redirect_to_stderr();
    ANSWER_AT_END.store(true, Ordering::SeqCst);
}

/// A final answer as stdout shows it: rendered Markdown on a terminal (styled unless
/// `NO_COLOR`, escape sequences made visible), the model's text unchanged when piped (a script
/// gets exactly what the model wrote); ending with a newline unless empty.
pub fn final_answer(text: &str) -> String {
    if text.is_empty() {
        return String::new();
    }
    let mut shown = if std::io::stdout().is_terminal() {
        let mut markdown = MarkdownStream::new(stdout_color());
        let mut shown = markdown.push(text);
        shown.push_str(&markdown.finish());
        shown
    } else {
        text.to_owned()
    };
    if !shown.ends_with('\n') {
        shown.push('\n');
    }
    shown
}

/// Writes to stdout and flushes, ignoring errors (a closed pipe must not crash the run; the
/// session is still recorded).
pub fn out(text: &str) {
    if HUMAN_TO_STDERR.load(Ordering::SeqCst) {
        let mut stderr = std::io::stderr().lock();
        let _ = stderr.write_all(text.as_bytes());
        let _ = stderr.flush();
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

/// Whether to use ANSI colours on stdout: a terminal, and `NO_COLOR` unset.
pub fn stdout_color() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// `Style`'s methods, one per ANSI SGR code: `NAME => "CODE";` becomes
/// `pub fn NAME(&self, text: &str) -> String`, `text` in that style when colour is on.
macro_rules! sgr_styles {
    ($($(#[$doc:meta])* $name:ident => $code:literal;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(&self, text: &str) -> String {
                self.paint($code, text)
            }
        )*
    };
}

/// ANSI styling that becomes a no-op when colour is off.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    color: bool,
}

impl Style {
    /// Styling on (`true`) or off.
    pub fn new(color: bool) -> Self {
        Style { color }
    }

    /// Whether styling is on.
    pub fn is_color(&self) -> bool {
        self.color
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    sgr_styles! {
        /// Dimmed.
        dim => "2";
        /// Bold.
        bold => "1";
        /// Cyan.
        cyan => "36";
        /// Red.
        red => "31";
        /// Green.
        green => "32";
        /// Yellow.
        yellow => "33";
    }
}

/// What the person is typing while the agent works (chat's steering line, see
/// `chat::steering`): drawn on a line of its own under the spinner, so the spinner's redraws
/// never erase it and the typed keys never land on the spinner's line.
static TYPED: Mutex<String> = Mutex::new(String::new());

/// The spinner's bar while one is on the screen: lines printed from another thread (the
/// steering reader's) go above it.
static ACTIVE: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Sets the line being typed (see [`TYPED`]; empty: none) and redraws the spinner with it.
pub fn set_typed(text: &str) {
    *lock(&TYPED) = text.to_owned();
    let bar = lock(&ACTIVE).clone();
    if let Some(bar) = bar {
        bar.tick();
    }
}

/// Prints `line` on stderr above the spinner (which is cleared, then drawn again under it).
pub fn print_above_spinner(line: &str) {
    let bar = lock(&ACTIVE).clone();
    match bar {
        Some(bar) => bar.suspend(|| eprintln!("{line}")),
        None => eprintln!("{line}"),
    }
}

/// Runs `f` (a question on the terminal) with the spinner off the screen and not redrawn
/// until it returns.
pub fn suspend_spinner<R>(f: impl FnOnce() -> R) -> R {
    let bar = lock(&ACTIVE).clone();
    match bar {
        Some(bar) => bar.suspend(f),
        None => f(),
    }
}

/// The spinner's `{typed}` key: a new line holding the end of the typed text that fits.
fn typed_key(_: &indicatif::ProgressState, out: &mut dyn std::fmt::Write) {
    let typed = lock(&TYPED);
    if typed.is_empty() {
        return;
    }
    let room = crate::ui::prompt::width().saturating_sub(3);
    let shown = visible_line(&typed);
    let skip = shown.chars().count().saturating_sub(room);
    let tail: String = shown.chars().skip(skip).collect();
    let _ = out.write_str("\n› ");
    let _ = out.write_str(&tail);
}

/// A spinner on stderr, shared by the renderer and the approval prompt. Disabled, every method
/// does nothing.
#[derive(Debug)]
pub struct Spinner {
    enabled: bool,
    bar: Mutex<Option<ProgressBar>>,
    /// A question is on the terminal waiting for its answer (its line is not finished).
    question_open: AtomicBool,
}

impl Spinner {
    /// A spinner that draws only if `enabled` (callers pass "stderr is a terminal").
    pub fn new(enabled: bool) -> Arc<Spinner> {
        Arc::new(Spinner {
            enabled,
            bar: Mutex::new(None),
            question_open: AtomicBool::new(false),
        })
    }

    /// Marks a question as open on the terminal (`true`) or answered.
    pub fn set_question_open(&self, open: bool) {
        self.question_open.store(open, Ordering::SeqCst);
    }

    /// Ends the line of a question left unanswered (e.g. by Ctrl-C), so output starts on a
    /// fresh line.
    fn close_question(&self) {
        if self.question_open.swap(false, Ordering::SeqCst) {
            eprintln!();
        }
    }

    /// Shows the spinner with `message` (or changes its message).
    pub fn show(&self, message: String) {
        if !self.enabled {
            return;
        }
        let mut bar = lock(&self.bar);
        match bar.as_ref() {
            Some(b) => b.set_message(message),
            None => {
                let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                let style = ProgressStyle::with_template(
                    "{spinner:.cyan} {msg:.dim} {elapsed:.dim}{typed}",
                )
                .map(|style| style.with_key("typed", typed_key))
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
                b.set_style(style);
                b.set_message(message);
                b.enable_steady_tick(Duration::from_millis(90));
                *lock(&ACTIVE) = Some(b.clone());
                *bar = Some(b);
            }
        }
    }

    /// Removes the spinner from the screen.
    pub fn hide(&self) {
        if let Some(b) = lock(&self.bar).take() {
            lock(&ACTIVE).take();
            b.finish_and_clear();
        }
    }

    /// Runs `f` (which prints whole lines) with the spinner temporarily cleared.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        let bar = lock(&self.bar).clone();
        match bar {
            Some(b) => b.suspend(f),
            None => f(),
        }
    }
}

impl Renderer {
    /// Interactive mode: what a finished `edit_file` call changed, as a coloured diff of its
    /// `old_text` → `new_text` ("" for other calls).
    fn edit_view(&self, call: &ToolCallPart) -> String {
        let ToolArguments::Json(serde_json::Value::Object(map)) = &call.arguments else {
            return String::new();
        };
        let text = |key: &str| map.get(key).and_then(|v| v.as_str());
        let (Some(path), Some(old), Some(new)) = (text("path"), text("old_text"), text("new_text"))
        else {
            return String::new();
        };
        if call.tool_name != "edit_file" {
            return String::new();
        }
        let diff = crate::ui::prompt::diff_text(path, old, new, crate::ui::prompt::width());
        diff.lines()
            .map(|line| {
                let body = line.trim_start();
                let painted = if body.starts_with('+') && !body.starts_with("+++") {
                    self.style.green(line)
                } else if body.starts_with('-') && !body.starts_with("---") {
                    self.style.red(line)
                } else {
                    self.style.dim(line)
                };
                format!("{painted}\n")
            })
            .collect()
    }
}

/// Where events go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// One JSON object per event per line on stdout.
    Json,
    /// Human-readable text.
    Human {
        /// ANSI colours on stdout.
        color: bool,
    },
}

/// Counters gathered from the events (they are right even when the run ends in an error).
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Model calls.
    pub turns: u32,
    /// Tool calls finished.
    pub tool_calls: u32,
    /// Summed token usage of the assistant messages.
    pub usage: Usage,
    /// Why the run ended (from `AgentEnd`).
    pub stop: Option<RunStop>,
}

#[derive(Default)]
struct State {
    totals: Totals,
    /// stdout ends in the middle of a line.
    line_open: bool,
    /// The current assistant message streamed text deltas.
    streamed: bool,
    running_tools: usize,
    /// Tool output was printed since the last assistant text: separate the next text from it.
    gap: bool,
    /// Interactive mode: the Markdown renderer of the current message's text.
    markdown: Option<MarkdownStream>,
    /// Interactive mode: the current message's thinking, not yet summarised on the screen.
    thinking: String,
    /// `--quiet`: the current message's text, shown at its end only when it is not the answer
    /// (a message with tool calls); the answer itself is printed once, at the end, on stdout.
    held: String,
    /// Counters of each sub-agent run, by the parent call that runs it.
    children: std::collections::HashMap<String, Totals>,
    /// The run's calls that started and have not ended, by id: a sub-agent call's line is
    /// printed when its child's first tool call ends, so the child's lines stand under it.
    running: std::collections::HashMap<String, ToolCallPart>,
    /// Calls whose line was printed that way: their end prints only their result.
    headed: std::collections::HashSet<String>,
}

/// Renders one run's events. Cheap to share: `on_event` takes `&self`.
pub struct Renderer {
    mode: OutputMode,
    style: Style,
    spinner: Arc<Spinner>,
    state: Mutex<State>,
    /// Human output goes to stderr.
    stderr: bool,
    /// Interactive mode (see [`Renderer::interactive`]).
    interactive: Option<Interactive>,
    /// Answers rendered as Markdown (interactive mode, or stdout on a terminal).
    markdown: bool,
    /// The last message's thinking, for `/thinking`.
    last_thinking: Mutex<String>,
}

/// What interactive mode adds to the human output.
#[derive(Clone, Copy, Debug)]
struct Interactive {
    /// Show thinking in full (dimmed) instead of one collapsed line.
    expand_thinking: bool,
}

impl Renderer {
    /// A renderer writing in `mode`, drawing `spinner` (pass a disabled one for none).
    pub fn new(mode: OutputMode, spinner: Arc<Spinner>) -> Self {
        let color = matches!(mode, OutputMode::Human { color: true });
        Renderer {
            mode,
            style: Style::new(color),
            spinner,
            state: Mutex::new(State::default()),
            stderr: false,
            interactive: None,
            markdown: false,
            last_thinking: Mutex::new(String::new()),
        }
    }

    /// Interactive mode: text rendered as Markdown a line at a time, thinking shown dimmed
    /// (in full with `expand_thinking`, else collapsed to one line), and finished edits shown as
    /// diffs.
    pub fn interactive(mut self, expand_thinking: bool) -> Self {
        self.interactive = Some(Interactive { expand_thinking });
        self.markdown = true;
        self
    }

    /// The answer's text rendered as Markdown a line at a time, as interactive mode does
    /// (`run` with stdout on a terminal).
    pub fn markdown(mut self) -> Self {
        self.markdown = true;
        self
    }

    /// The thinking of the run's last message that had any ("" when none).
    pub fn last_thinking(&self) -> String {
        lock(&self.last_thinking).clone()
    }

    /// Interactive mode: shows the thinking gathered so far (once), before what follows it.
    fn flush_thinking(&self, state: &mut State) {
        let Some(interactive) = self.interactive else {
            return;
        };
        let thinking = std::mem::take(&mut state.thinking);
        if thinking.trim().is_empty() {
            return;
        }
        let text = if interactive.expand_thinking {
            format!(
                "{}\n",
                self.style.dim(visible(thinking.trim_end()).as_ref())
            )
        } else {
            let lines = thinking.trim().lines().count();
            let first = one_line(thinking.trim().lines().next().unwrap_or_default(), 70);
            format!(
                "{}\n",
                self.style.dim(&format!(
                    "▸ thought {lines} line{}: {first} (/thinking shows it)",
                    if lines == 1 { "" } else { "s" }
                ))
            )
        };
        *lock(&self.last_thinking) = thinking;
        self.spinner.hide();
        self.print_lines(state, &text);
    }

    /// Text of the model's answer: through the Markdown renderer in interactive mode.
    fn answer_text(&self, state: &mut State, text: &str) {
        self.flush_thinking(state);
        if ANSWER_AT_END.load(Ordering::SeqCst) {
            state.held.push_str(text);
            return;
        }
        self.show_text(state, text);
    }

    /// `--quiet`, at the end of a message: its text is shown when the message called tools (it
    /// narrates the work), dropped when it may be the answer (printed later, once).
    fn release_held(&self, state: &mut State, message: &Message) {
        let held = std::mem::take(&mut state.held);
        if !held.is_empty() && message.tool_calls().next().is_some() {
            self.show_text(state, &held);
        }
    }

    /// Text of the model's answer as it arrives.
    fn show_text(&self, state: &mut State, text: &str) {
        if std::mem::take(&mut state.gap) {
            self.out("\n");
        }
        if self.markdown {
            let color = self.style.is_color();
            let rendered = state
                .markdown
                .get_or_insert_with(|| MarkdownStream::new(color))
                .push(text);
            if !rendered.is_empty() {
                self.out(&rendered);
                state.line_open = !rendered.ends_with('\n');
            }
        } else {
            self.out(&visible(text));
            state.line_open = !text.ends_with('\n');
        }
    }

    /// Interactive mode: the end of a message's text (its last line, an open code block).
    fn finish_text(&self, state: &mut State) {
        if let Some(mut markdown) = state.markdown.take() {
            let rest = markdown.finish();
            if !rest.is_empty() {
                self.out(&rest);
                state.line_open = false;
            }
        }
    }

    /// Sends the human output to stderr instead of stdout (`run --output-schema`: stdout
    /// carries only the validated output).
    pub fn on_stderr(mut self) -> Self {
        self.stderr = true;
        self
    }

    fn out(&self, text: &str) {
        if self.stderr {
            let mut stderr = std::io::stderr().lock();
            let _ = stderr.write_all(text.as_bytes());
            let _ = stderr.flush();
        } else {
            out(text);
        }
    }

    /// The counters so far.
    pub fn totals(&self) -> Totals {
        lock(&self.state).totals.clone()
    }

    /// Handles one event.
    pub fn on_event(&self, event: &AgentEvent) {
        let mut state = lock(&self.state);
        count(&mut state.totals, event);
        if let Some((call_id, agent, inner)) = innermost_child(event) {
            // A sub-agent's event: its own counters, a line of its own, never the run's end.
            let child = state.children.entry(call_id.to_owned()).or_default();
            count(child, inner);
            match self.mode {
                OutputMode::Json => match child_json_line(child, call_id, agent, inner) {
                    Ok(line) => self.out(&format!("{line}\n")),
                    Err(e) => eprintln!(
                        "agentloop: could not serialize a {} event: {e}",
                        inner.kind()
                    ),
                },
                OutputMode::Human { .. } => {
                    if let AgentEvent::Child { parent_call_id, .. } = event {
                        self.head_call(&mut state, parent_call_id);
                    }
                    self.child_human(&mut state, agent, inner)
                }
            }
            return;
        }
        match self.mode {
            OutputMode::Json => match json_line(&state.totals, event) {
                Ok(line) => self.out(&format!("{line}\n")),
                Err(e) => eprintln!(
                    "agentloop: could not serialize a {} event: {e}",
                    event.kind()
                ),
            },
            OutputMode::Human { .. } => self.human(&mut state, event),
        }
    }

    fn close_line(&self, state: &mut State) {
        self.spinner.close_question();
        if state.line_open {
            self.out("\n");
            state.line_open = false;
        }
    }

    fn spin(&self, state: &mut State, message: String) {
        // The spinner redraws the cursor's line: never over a half-printed line of text.
        self.close_line(state);
        self.spinner.show(message);
    }

    fn print_lines(&self, state: &mut State, text: &str) {
        self.close_line(state);
        self.spinner.suspend(|| self.out(text));
    }

    fn human(&self, state: &mut State, event: &AgentEvent) {
        match event {
            AgentEvent::TurnStart { .. } => self.spin(state, "waiting for the model".into()),
            AgentEvent::MessageStart { message } if message.role == Role::Assistant => {
                state.streamed = false;
            }
            AgentEvent::MessageUpdate { delta, .. } => self.human_delta(state, delta),
            AgentEvent::MessageEnd { message } if message.role == Role::Assistant => {
                self.human_reply_end(state, message);
            }
            AgentEvent::ToolExecutionStart { call } => {
                state.running_tools += 1;
                state.running.insert(call.id.clone(), call.clone());
                self.spin(
                    state,
                    format!(
                        "running {} {}",
                        visible_line(&call.tool_name),
                        abbreviate_args(&call.arguments, 50)
                    ),
                );
            }
            // A running call's progress (MCP `notifications/progress`) on the spinner line.
            AgentEvent::ToolExecutionUpdate {
                tool_name, update, ..
            } => {
                if let Some(progress) = crate::mcp::progress_text(update) {
                    let line = format!("running {} {progress}", visible_line(tool_name));
                    self.spin(state, line);
                }
            }
            AgentEvent::ToolExecutionEnd {
                call,
                result,
                blocked,
            } => self.human_tool_end(state, call, result, *blocked),
            // A deferred call never started: nothing runs for it in this run.
            AgentEvent::ApprovalRequested { .. } if state.running_tools == 0 => {
                self.spinner.hide();
            }
            AgentEvent::ModelRetry {
                attempt,
                delay_ms,
                reason,
            } => {
                let line = format!(
                    "model request failed ({}); retry {attempt} in {:.1}s\n",
                    one_line(reason, 100),
                    *delay_ms as f64 / 1000.0
                );
                self.warn_line(state, &line);
            }
            AgentEvent::ModelFallback { from, to, reason } => {
                let line = format!(
                    "model {} failed ({}); falling back to {}\n",
                    one_line(from, 60),
                    one_line(reason, 100),
                    one_line(to, 60)
                );
                self.warn_line(state, &line);
            }
            AgentEvent::AgentEnd { .. } => {
                self.spinner.hide();
                self.close_line(state);
            }
            _ => {}
        }
    }

    /// A streamed piece of the reply: text is shown as it comes, thinking is kept (interactive)
    /// and named on the spinner, a starting tool call is named on the spinner.
    fn human_delta(&self, state: &mut State, delta: &ModelDelta) {
        match delta {
            ModelDelta::Text { delta } if !delta.is_empty() => {
                self.spinner.hide();
                self.answer_text(state, delta);
                state.streamed = true;
            }
            ModelDelta::Thinking { delta } => {
                if self.interactive.is_some() {
                    state.thinking.push_str(delta);
                }
                if !state.streamed {
                    self.spin(state, "thinking".into());
                }
            }
            ModelDelta::ToolCallStart { name, .. } => {
                self.flush_thinking(state);
                self.spin(state, format!("preparing {}", visible_line(name)));
            }
            _ => {}
        }
    }

    /// The complete reply: its text when nothing was streamed, its thinking, and a note when
    /// the output-token limit cut it off.
    fn human_reply_end(&self, state: &mut State, message: &Message) {
        let text = message.text();
        if self.interactive.is_some() && state.thinking.is_empty() && !state.streamed {
            // A provider that does not stream its reasoning still has it here.
            state.thinking = message
                .content
                .iter()
                .filter_map(|p| match p {
                    Part::Thinking(t) => Some(t.thinking.as_str()),
                    _ => None,
                })
                .collect();
        }
        if !state.streamed && !text.trim().is_empty() {
            self.spinner.hide();
            self.answer_text(state, &text);
        }
        self.release_held(state, message);
        self.flush_thinking(state);
        self.finish_text(state);
        self.close_line(state);
        if message.stop_reason == Some(StopReason::Length) {
            let note = "(the reply was cut off at the output-token limit)";
            self.print_lines(state, &format!("{}\n", self.style.yellow(note)));
        }
        if message.tool_calls().next().is_none() {
            self.spinner.hide();
        }
    }

    /// A finished (or blocked) tool call: its line, and in interactive mode the edit it made.
    fn human_tool_end(
        &self,
        state: &mut State,
        call: &ToolCallPart,
        result: &ToolResultPart,
        blocked: bool,
    ) {
        // A blocked call never started, so it was never counted as running.
        if !blocked {
            state.running_tools = state.running_tools.saturating_sub(1);
        }
        state.running.remove(&call.id);
        let mut text = format_tool(self.style, call, Some(result));
        if state.headed.remove(&call.id) {
            // Its line stands above its sub-agent's lines already: only the result now.
            text = text
                .split_once('\n')
                .map(|(_, rest)| rest.to_owned())
                .unwrap_or_default();
        }
        if self.interactive.is_some() && !result.is_error {
            text.push_str(&self.edit_view(call));
        }
        self.print_lines(state, &text);
        state.gap = true;
        if state.running_tools == 0 {
            self.spinner.hide();
        }
    }

    /// A warning about the model call (a retry, a fallback) on stderr, in yellow.
    fn warn_line(&self, state: &mut State, line: &str) {
        self.close_line(state);
        self.spinner
            .suspend(|| eprint!("{}", self.style.yellow(line)));
    }

    /// Prints the line of the run's call `call_id` (a sub-agent call, before its child shows
    /// anything), once.
    fn head_call(&self, state: &mut State, call_id: &str) {
        if state.headed.contains(call_id) {
            return;
        }
        let Some(call) = state.running.get(call_id) else {
            return;
        };
        let text = format_tool(self.style, call, None);
        let first = text.lines().next().unwrap_or_default().to_owned();
        state.headed.insert(call_id.to_owned());
        self.print_lines(state, &format!("{first}\n"));
    }

    /// A sub-agent's tool call: one indented line under the call that runs the sub-agent.
    fn child_human(&self, state: &mut State, agent: &str, event: &AgentEvent) {
        if let AgentEvent::ToolExecutionEnd { call, result, .. } = event {
            let text = format_tool(self.style, call, Some(result));
            let first = text.lines().next().unwrap_or_default();
            let line = format!(
                "  {} {first}\n",
                self.style.dim(&format!("[{}]", visible_line(agent)))
            );
            self.print_lines(state, &line);
        }
    }

    /// The final summary line (human mode only; nothing in JSON mode).
    pub fn print_summary(&self, session_id: Option<&str>) {
        if self.mode == OutputMode::Json {
            return;
        }
        let mut state = lock(&self.state);
        self.close_line(&mut state);
        let line = summary_line(&state.totals, session_id);
        self.out(&format!("{}\n", self.style.dim(&line)));
    }
}

/// One event as its JSON line; the final `agent_end` also carries the run's totals (`turns`,
/// `tool_calls`, and `usage` with `cost_usd` when a price was known).
fn json_line(totals: &Totals, event: &AgentEvent) -> serde_json::Result<String> {
    let compact = JSON_COMPACT.load(Ordering::SeqCst);
    if !compact && !matches!(event, AgentEvent::AgentEnd { .. }) {
        return serde_json::to_string(event);
    }
    let mut value = serde_json::to_value(event)?;
    if let Value::Object(map) = &mut value {
        if matches!(event, AgentEvent::AgentEnd { .. }) {
            map.insert("turns".into(), Value::from(totals.turns));
            map.insert("tool_calls".into(), Value::from(totals.tool_calls));
            map.insert("usage".into(), serde_json::to_value(totals.usage)?);
        }
        if compact {
            compact_event(map);
        }
    }
    serde_json::to_string(&value)
}

/// `--json=compact`: drops what earlier lines already carried — `message_start` keeps only
/// the message's role (its content arrives in `message_update`/`message_end`), `turn_end`
/// only its number (its message and results were `message_end` and `tool_execution_end`
/// lines), `agent_end` only why and how much (its transcript was every `message_end`).
fn compact_event(event: &mut serde_json::Map<String, Value>) {
    match event.get("type").and_then(Value::as_str) {
        Some("message_start") => {
            let role = event
                .get("message")
                .and_then(|m| m.get("role"))
                .cloned()
                .unwrap_or(Value::Null);
            event.remove("message");
            event.insert("role".into(), role);
        }
        Some("turn_end") => {
            event.remove("message");
            event.remove("tool_results");
        }
        Some("agent_end") => {
            event.remove("messages");
        }
        _ => {}
    }
}

/// For a sub-agent's event (wrapped once per level): the call that ran the innermost
/// sub-agent, its name and the event itself.
fn innermost_child(event: &AgentEvent) -> Option<(&str, &str, &AgentEvent)> {
    let AgentEvent::Child {
        parent_call_id,
        agent,
        event,
    } = event
    else {
        return None;
    };
    Some(innermost_child(event).unwrap_or((parent_call_id, agent, event)))
}

/// A sub-agent's event as its JSON line: the event's own fields plus `parent_call_id` and
/// `agent`; its `agent_end` carries the sub-agent run's own totals.
fn child_json_line(
    totals: &Totals,
    call_id: &str,
    agent: &str,
    event: &AgentEvent,
) -> serde_json::Result<String> {
    let line = json_line(totals, event)?;
    let mut value: Value = serde_json::from_str(&line)?;
    if let Value::Object(map) = &mut value {
        map.insert("parent_call_id".into(), Value::from(call_id));
        map.insert("agent".into(), Value::from(agent));
    }
    serde_json::to_string(&value)
}

fn count(totals: &mut Totals, event: &AgentEvent) {
    match event {
        // A sub-agent's tokens belong to the run's usage (not its turns or tool calls).
        AgentEvent::Child { event, .. } => {
            let mut child = Totals::default();
            count(&mut child, event);
            totals.usage.accumulate(&child.usage);
        }
        AgentEvent::TurnStart { turn } => totals.turns = totals.turns.max(*turn),
        AgentEvent::MessageEnd { message } if message.role == Role::Assistant => {
            if let Some(usage) = &message.usage {
                totals.usage.accumulate(usage);
            }
        }
        AgentEvent::ToolExecutionEnd { .. } => totals.tool_calls += 1,
        AgentEvent::AgentEnd { stop, .. } => totals.stop = Some(stop.clone()),
        _ => {}
    }
}

/// Short description of why a run stopped.
pub fn describe_stop(stop: &RunStop) -> String {
    match stop {
        RunStop::Done => "done".into(),
        RunStop::MaxTurns { limit } => format!("stopped at --max-turns {limit} with work left"),
        RunStop::RepeatedToolFailures { turns } => {
            format!("stopped: the same tool calls failed {turns} turns in a row")
        }
        RunStop::Aborted => "aborted".into(),
        RunStop::ModelError { message } => format!("model error: {}", one_line(message, 300)),
        RunStop::HookStop { extension } => format!("stopped by extension {extension}"),
        RunStop::Internal { message } => format!("internal error: {}", one_line(message, 300)),
        RunStop::UsageLimit { which, used, limit } => match which {
            agentloop::agent::UsageLimit::CostUsd => {
                format!("stopped: cost limit reached (${used:.4} of ${limit:.4})")
            }
            which => format!(
                "stopped: {} limit reached ({} of {})",
                which.as_str().replace('_', " "),
                thousands(*used as u64),
                thousands(*limit as u64)
            ),
        },
        RunStop::AwaitingApproval { pending } => {
            format!("awaiting approval ({} tool call(s))", pending.len())
        }
        other => format!("stopped: {}", visible_line(&other.to_string())),
    }
}

/// `done · 3 turns · 5 tool calls · 1,234 in / 56 out tokens · $0.0012 · session 1b2c…`
///
/// A failure is named without its details (`model error`): the error line says them, once.
pub fn summary_line(totals: &Totals, session_id: Option<&str>) -> String {
    let mut parts = Vec::new();
    parts.push(match &totals.stop {
        None => "ended".to_owned(),
        Some(RunStop::ModelError { .. }) => "model error".to_owned(),
        Some(RunStop::Internal { .. }) => "internal error".to_owned(),
        Some(stop) => describe_stop(stop),
    });
    parts.push(plural(totals.turns as u64, "turn"));
    parts.push(plural(totals.tool_calls as u64, "tool call"));
    parts.push(format!(
        "{} in / {} out tokens",
        thousands(totals.usage.input_tokens + totals.usage.cache_read_tokens),
        thousands(totals.usage.output_tokens)
    ));
    if let Some(cost) = totals.usage.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    if let Some(id) = session_id {
        parts.push(format!("session {id}"));
    }
    parts.join(" · ")
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `1234567` → `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `text` cut to `max` characters (ending with `…` when cut).
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// `text` on one line (whitespace collapsed, terminal controls made visible), cut to `max`
/// characters.
pub fn one_line(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    truncate(&visible_line(&collapsed), max)
}

fn abbreviate_value(value: &Value, max: usize) -> String {
    match value {
        Value::String(s) => {
            let simple = !s.is_empty()
                && s.chars().count() <= max
                && !s.chars().any(|c| c.is_whitespace() || c == '"' || c == '=');
            if simple {
                s.clone()
            } else {
                format!("{:?}", truncate(s, max))
            }
        }
        other => truncate(&other.to_string(), max),
    }
}

/// A tool call's arguments in one short line: `path=src/lib.rs limit=20` (terminal controls
/// made visible). For progress lines only: the approval prompt shows the whole call.
pub fn abbreviate_args(args: &ToolArguments, max: usize) -> String {
    let text = match args {
        ToolArguments::Json(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| format!("{k}={}", abbreviate_value(v, 40)))
            .collect::<Vec<_>>()
            .join(" "),
        ToolArguments::Json(other) => abbreviate_value(other, max),
        ToolArguments::Unparsed(raw) => format!("{:?} (malformed)", truncate(raw, 40)),
    };
    truncate(&visible_line(&text), max)
}

/// Lines of a result shown under its call.
const RESULT_LINES: usize = 4;
/// Longest result line shown.
const RESULT_LINE_CHARS: usize = 110;

/// One call, rendered: `→ name args` and the first lines of its result.
pub fn format_tool(style: Style, call: &ToolCallPart, result: Option<&ToolResultPart>) -> String {
    let is_error = result.is_some_and(|r| r.is_error);
    let marker = if is_error {
        style.red("✗")
    } else {
        style.cyan("→")
    };
    let args = abbreviate_args(&call.arguments, 100);
    let mut text = format!("{marker} {}", style.bold(&visible_line(&call.tool_name)));
    if !args.is_empty() {
        text.push(' ');
        text.push_str(&style.dim(&args));
    }
    text.push('\n');
    let Some(result) = result else {
        text.push_str(&format!("  {}\n", style.dim("│ (no result)")));
        return text;
    };
    let lines: Vec<&str> = result.content.lines().collect();
    if lines.is_empty() {
        text.push_str(&format!("  {}\n", style.dim("│ (empty)")));
    }
    for line in lines.iter().take(RESULT_LINES) {
        let shown = truncate(&visible_line(&line.replace('\t', "  ")), RESULT_LINE_CHARS);
        let shown = format!("│ {shown}");
        let shown = if is_error {
            style.red(&shown)
        } else {
            style.dim(&shown)
        };
        text.push_str(&format!("  {shown}\n"));
    }
    if lines.len() > RESULT_LINES {
        let more = lines.len() - RESULT_LINES;
        text.push_str(&format!(
            "  {}\n",
            style.dim(&format!("│ … {}", plural(more as u64, "more line")))
        ));
    }
    if !result.images.is_empty() {
        text.push_str(&format!(
            "  {}\n",
            style.dim(&format!(
                "│ [{}]",
                plural(result.images.len() as u64, "image")
            ))
        ));
    }
    text
}

/// The tool results among `messages`, by the id of the call each answers (a call's line
/// shows its result).
pub fn results_by_call(messages: &[Message]) -> HashMap<&str, &ToolResultPart> {
    messages
        .iter()
        .filter_map(Message::tool_result_part)
        .map(|r| (r.call_id.as_str(), r))
        .collect()
}

/// A stored transcript, rendered like a live run (for `sessions show`).
pub fn format_transcript(style: Style, messages: &[Message]) -> String {
    let results = results_by_call(messages);
    let shown_calls = agentloop::transcript::call_ids(messages);
    let mut text = String::new();
    for message in messages {
        match message.role {
            Role::User | Role::Custom => {
                let body = message.text();
                for line in body.lines() {
                    text.push_str(&style.bold(&format!("> {}", visible_line(line))));
                    text.push('\n');
                }
            }
            Role::Assistant => {
                let body = message.text();
                if !body.trim().is_empty() {
                    text.push_str(&visible(body.trim_end()));
                    text.push('\n');
                }
                for call in message.tool_calls() {
                    text.push_str(&format_tool(
                        style,
                        call,
                        results.get(call.id.as_str()).copied(),
                    ));
                }
                if let Some(error) = &message.error_message {
                    text.push_str(&style.red(&format!("(error: {})", one_line(error, 200))));
                    text.push('\n');
                }
            }
            Role::ToolResult => {
                // Shown under its call; an orphan result is shown on its own.
                if let Some(result) = message.tool_result_part() {
                    if !shown_calls.contains(result.call_id.as_str()) {
                        let call = ToolCallPart::new(
                            &result.call_id,
                            &result.tool_name,
                            Value::Object(Default::default()),
                        );
                        text.push_str(&format_tool(style, &call, Some(result)));
                    }
                }
            }
            _ => {}
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arguments_are_abbreviated_on_one_line() {
        let args = ToolArguments::Json(json!({"path": "src/lib.rs", "limit": 20}));
        assert_eq!(abbreviate_args(&args, 100), "limit=20 path=src/lib.rs");
        let args = ToolArguments::Json(json!({"content": "line one\nline two"}));
        assert_eq!(
            abbreviate_args(&args, 100),
            r#"content="line one\nline two""#
        );
        let long = ToolArguments::Json(json!({"content": "x".repeat(500)}));
        assert!(abbreviate_args(&long, 60).chars().count() <= 60);
        let raw = ToolArguments::Unparsed("{\"pa".into());
        assert!(abbreviate_args(&raw, 60).ends_with("(malformed)"));
    }

    #[test]
    fn results_show_their_first_lines() {
        let call = ToolCallPart::new("1", "read_file", json!({"path": "a"}));
        let result = ToolResultPart::success("1", "read_file", "1\n2\n3\n4\n5\n6");
        let text = format_tool(Style::new(false), &call, Some(&result));
        assert_eq!(
            text,
            "→ read_file path=a\n  │ 1\n  │ 2\n  │ 3\n  │ 4\n  │ … 2 more lines\n"
        );
        let failed = ToolResultPart::error("1", "read_file", "nope");
        let text = format_tool(Style::new(false), &call, Some(&failed));
        assert!(text.starts_with("✗ read_file"), "{text}");
    }

    #[test]
    fn summary_lines() {
        let totals = Totals {
            turns: 3,
            tool_calls: 1,
            usage: Usage {
                input_tokens: 12345,
                output_tokens: 67,
                cost_usd: Some(0.01234),
                ..Usage::default()
            },
            stop: Some(RunStop::Done),
        };
        assert_eq!(
            summary_line(&totals, Some("abc")),
            "done · 3 turns · 1 tool call · 12,345 in / 67 out tokens · $0.0123 · session abc"
        );
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }
}
