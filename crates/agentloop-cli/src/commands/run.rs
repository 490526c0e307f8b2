//! `agentloop run`: one agent run with the built-in tools on a workspace, recorded into the
//! session store, rendered as text or JSON lines, abortable with Ctrl-C.
//!
//! [`execute`] is the engine shared with `agentloop demo`: it wires the model, the tools, the
//! approval policy, the session recorder and the renderer into one [`AgentLoop`] and reports how
//! the run ended; [`exit_status`] maps that to the process's exit code.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use agentloop::agent::{
    AbortSignal, AgentEvent, AgentLoop, AgentLoopConfig, MessageQueue, ParkedRun, RunOutcome,
    RunStop, TelemetryConfig, UsageLimits,
};
use agentloop::builtin::{
    self, ApprovalPolicy, SandboxMode, ShellOptions, Workspace, WorkspaceDeps,
};
use agentloop::model::{Model, ReasoningLevel};
use agentloop::output::{Output, OutputError};
use agentloop::session::{NewSession, SessionInfo, SessionRecorder, SessionStore, load_parked};
use agentloop::tooling::{Approval, ToolSpec};
use agentloop::transcript::{ImagePart, Message, Part, ToolCallPart};
use serde_json::Value;

use crate::cli::RunArgs;
use crate::commands::sessions::open_store;
use crate::config::session::{Choice, recorded, restore, store_if_changed};
use crate::error::{EXIT_AWAITING_APPROVAL, EXIT_DENIED_NO_TERMINAL, EXIT_INTERRUPTED, Failure};
use crate::scripting;
use crate::ui::prompt::terminal_asker;
use crate::ui::render::{
    OutputMode, Renderer, Spinner, Totals, abbreviate_args, describe_stop, stdout_color,
};
use crate::ui::safe_text::visible_line;
use agentloop::agent::command_hooks::CommandHooks;
use agentloop::agent::compaction::effective_context;

/// How long a run waits for another process to finish with the session it wants to continue.
const SESSION_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Everything one run needs.
pub struct RunSetup {
    /// The model adapter.
    pub model: Arc<dyn Model>,
    /// The model id sent to the provider (and recorded on the session).
    pub model_name: String,
    /// Where the tools work.
    pub workspace: Workspace,
    /// Which calls run without asking.
    pub policy: ApprovalPolicy,
    /// System prompt (`None`: the default, which describes the workspace).
    pub system_prompt: Option<String>,
    /// Reasoning effort.
    pub reasoning: Option<ReasoningLevel>,
    /// Model-call ceiling.
    pub max_turns: Option<u32>,
    /// Request, token and cost ceilings.
    pub limits: UsageLimits,
    /// Message contents on the telemetry spans.
    pub trace_content: bool,
    /// JSON lines instead of text.
    pub json: bool,
    /// The store the run is recorded into.
    pub store: Arc<dyn SessionStore>,
    /// The session it is recorded into.
    pub session: SessionInfo,
    /// The context to run on top of (a resumed session's messages).
    pub context: Vec<Message>,
    /// The new prompt (ignored when `resume` is set: queue it there as steering instead).
    pub prompt: String,
    /// Images attached to the prompt (`--image`).
    pub images: Vec<ImagePart>,
    /// Messages typed while the agent works (interactive mode), delivered as steering.
    pub steering: Option<MessageQueue>,
    /// Interactive rendering (Markdown, thinking, diffs); the flag expands thinking.
    pub interactive: Option<bool>,
    /// How the shell tool confines commands and filters their environment.
    pub shell: ShellOptions,
    /// The typed output the answer must be (`--output-schema`), if any.
    pub output: Option<Output<Value>>,
    /// Resume this parked run instead of starting one with `prompt`.
    pub resume: Option<ParkedRun>,
    /// MCP servers whose tools are added to the built-in ones.
    pub mcp: Vec<agentloop_mcp::McpServerConfig>,
    /// Automatic context compaction (`None`: off).
    pub compaction: Option<agentloop::agent::CompactionConfig>,
    /// Permission rules and other extension points loaded from files.
    pub extensions: Arc<crate::config::extensions::Extensions>,
    /// `--mode plan`: read-only tools and a plan instead of changes.
    pub plan_mode: bool,
    /// Record workspace checkpoints before mutating calls (off with `--no-checkpoints`, and
    /// in plan mode, which changes nothing).
    pub checkpoints: bool,
}

/// How a run went.
pub struct RunReport {
    /// Why it ended (from the `AgentEnd` event, or the error when it never started).
    pub stop: RunStop,
    /// Ctrl-C aborted it.
    pub interrupted: bool,
    /// Counters gathered from the events.
    pub totals: Totals,
    /// What the loop returned (for a typed run: an [`OutputError::Invalid`] when the model never
    /// produced a valid output).
    pub outcome: Result<RunOutcome, OutputError>,
    /// The validated output of a typed run.
    pub output: Option<Value>,
    /// The renderer (to print the summary line).
    pub renderer: Arc<Renderer>,
    /// Mutating calls denied because there was no terminal to ask on, one short line each.
    pub denied_no_terminal: Vec<String>,
    /// Set when messages could not be recorded (the run was then stopped).
    pub store_error: Option<String>,
}

/// The default system prompt.
pub fn default_system_prompt(root: &Path) -> String {
    format!(
        "You are a coding agent working in the directory {}. Use the tools to inspect and change \
         the files in it; paths are relative to that directory. Read a file before editing it, \
         keep changes focused, and finish with a short summary of what you did.",
        root.display()
    )
}

/// Runs one prompt; see the module docs.
pub async fn execute(mut setup: RunSetup) -> Result<RunReport, Failure> {
    let stderr_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let spinner = Spinner::new(!setup.json && stderr_tty);
    let renderer = renderer_for(&setup, spinner.clone(), stderr_tty);
    warn_about_sandbox(&setup.shell);
    let hooks = crate::config::hooks::for_run(
        &setup.extensions.hooks,
        &setup.session.id,
        setup.workspace.root(),
        setup.json,
    );
    let mut system_prompt = system_prompt_with_skills(&mut setup);
    let resumed = setup.resume.is_some() || !setup.context.is_empty();
    let exit_signals = kill_on_exit_signals();

    let (toolset, mcp_tools, prompt) =
        open_mcp(&mut setup, &hooks, resumed, &mut system_prompt).await?;
    let (deps, denied_no_terminal) = workspace_deps(&setup, &toolset, spinner, &hooks);
    let recorder = SessionRecorder::new(setup.store.clone(), &setup.session.id);
    let checkpoints = checkpoint_recorder(&setup);
    let abort = AbortSignal::new();
    let emit = event_sink(&setup, &recorder, &renderer, &abort, checkpoints.clone());
    let config = loop_config_with_hooks(&setup, system_prompt, &hooks);
    let task = task_tool(&setup, &deps, &hooks)?;
    let agent = AgentLoop::with_deps(config, setup.model.clone(), Arc::new(deps));
    let (workspace, skills) = (&setup.workspace, &setup.extensions.skills);
    // Full outputs of truncated results, kept for `sessions show --full` and `/output`.
    let (shell, retention) = crate::outputs::attach(&setup.shell, &setup.session.id);
    let mut agent = with_workspace_tools(agent, workspace, &shell, skills, setup.plan_mode)?
        .with_tools([task])
        .map_err(|e| Failure::new(format!("cannot register the task tool: {e}")))?
        .with_emit(emit)
        .with_session_label(&setup.session.id)
        .with_abort_signal(abort.clone());
    if let Some(queue) = setup.steering.clone() {
        agent = agent.with_steering_queue(queue);
    }
    let follow_ups = agent.follow_up_queue().clone();
    agent = agent.with_extension(hooks.extension(follow_ups));
    if let Some(retention) = retention {
        agent = agent.with_extension(retention);
    }
    let mut agent = crate::mcp::attach(agent, toolset.clone(), mcp_tools)?;
    if let Some(checkpoints) = &checkpoints {
        // Last, so a call another extension blocks leaves no checkpoint.
        let mutating = crate::commands::checkpoints::is_mutating(toolset.approval_classifier());
        agent = agent.with_extension(checkpoints.extension(mutating));
    }

    crate::jobs::announce(setup.shell.job_table(), setup.json);
    let (interrupted, ctrl_c) = abort_on_ctrl_c(abort);
    let prompts = vec![prompt_message(prompt, &setup.images)];
    let (outcome, output) = drive(&agent, &mut setup, prompts).await;
    ctrl_c.abort();
    exit_signals.abort();
    wind_down(&setup, &toolset, checkpoints.as_ref()).await;

    let totals = renderer.totals();
    let stop = stop_of(&totals, &outcome);
    crate::config::hooks::after_run(&hooks, &stop);
    Ok(RunReport {
        stop,
        interrupted: interrupted.load(Ordering::SeqCst),
        totals,
        outcome,
        output,
        store_error: store_error(&recorder, &setup.session.id),
        renderer,
        denied_no_terminal: std::mem::take(
            &mut *denied_no_terminal
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        ),
    })
}

/// The MCP servers connected, and the prompt with their prompt commands expanded and then
/// the hooks applied (a refusal stops the servers again).
async fn open_mcp(
    setup: &mut RunSetup,
    hooks: &CommandHooks,
    resumed: bool,
    system_prompt: &mut String,
) -> Result<
    (
        Arc<agentloop_mcp::McpToolset>,
        Vec<ToolSpec<WorkspaceDeps>>,
        String,
    ),
    Failure,
> {
    let (toolset, mcp_tools) = crate::mcp::connect(setup.mcp.clone()).await?;
    let toolset = Arc::new(toolset);
    let mut prompt = crate::mcp::expand_prompt(&toolset, std::mem::take(&mut setup.prompt)).await?;
    // After the expansion: the hooks see the prompt the model will get.
    if let Err(refused) =
        crate::config::hooks::before_run(hooks, resumed, system_prompt, &mut prompt)
    {
        toolset.shutdown().await;
        return Err(refused);
    }
    Ok((toolset, mcp_tools, prompt))
}

/// The loop's config, its automatic compaction going through the `pre_compact` hooks.
fn loop_config_with_hooks(
    setup: &RunSetup,
    system_prompt: String,
    hooks: &CommandHooks,
) -> AgentLoopConfig {
    let mut config = loop_config(setup, system_prompt);
    if let Some(compaction) = &mut config.compaction {
        let inner = compaction.compactor.take();
        compaction.compactor = Some(hooks.compactor(
            inner.unwrap_or_else(|| Arc::new(agentloop::agent::compaction::ModelCompactor)),
            agentloop::agent::command_hooks::CompactionTrigger::Auto,
        ));
    }
    config
}

/// The workspace checkpoints of this run, unless switched off or in plan mode.
fn checkpoint_recorder(setup: &RunSetup) -> Option<Arc<agentloop::checkpoint::Recorder>> {
    (setup.checkpoints && !setup.plan_mode)
        .then(|| {
            crate::commands::checkpoints::recorder(
                &*setup.store,
                &setup.session.id,
                setup.workspace.root(),
            )
        })
        .flatten()
}

/// After a normal end: nothing a shell command started outlives the run (the jobs first, so
/// their `job_finished` lines are out before the process can exit), the MCP servers stop, and
/// the last checkpoint is sealed.
async fn wind_down(
    setup: &RunSetup,
    toolset: &agentloop_mcp::McpToolset,
    checkpoints: Option<&Arc<agentloop::checkpoint::Recorder>>,
) {
    let jobs = setup.shell.job_table();
    if !jobs.keeps_after_run() {
        jobs.kill_all().await;
    }
    builtin::kill_shell_processes();
    toolset.shutdown().await;
    // After the jobs are gone: what they changed belongs to the run's last checkpoint.
    if let Some(checkpoints) = checkpoints {
        crate::commands::checkpoints::seal(checkpoints);
    }
}

/// The renderer for this run: JSON lines, or text (on stderr for a typed run, whose stdout is
/// the output; Markdown when a person reads stdout).
fn renderer_for(setup: &RunSetup, spinner: Arc<Spinner>, stderr_tty: bool) -> Arc<Renderer> {
    let typed = setup.output.is_some();
    let mode = if setup.json {
        OutputMode::Json
    } else if typed {
        OutputMode::Human {
            color: stderr_tty && std::env::var_os("NO_COLOR").is_none(),
        }
    } else {
        OutputMode::Human {
            color: stdout_color(),
        }
    };
    let mut renderer = Renderer::new(mode, spinner);
    if typed && !setup.json {
        renderer = renderer.on_stderr();
    }
    if let Some(expand_thinking) = setup.interactive {
        renderer = renderer.interactive(expand_thinking);
    } else if matches!(mode, OutputMode::Human { .. }) && !typed && std::io::stdout().is_terminal()
    {
        // A person reads stdout: Markdown as chat shows it (plain text when piped).
        renderer = renderer.markdown();
    }
    Arc::new(renderer)
}

/// Says once, before any command runs, that the shell sandbox cannot be applied here — never
/// silently.
fn warn_about_sandbox(shell: &ShellOptions) {
    let sandbox = shell.sandbox_mode();
    if sandbox != SandboxMode::FullAccess {
        if let Err(missing) = builtin::sandbox_support(sandbox) {
            eprintln!("agentloop: warning: shell sandbox ({sandbox}): {missing}");
        }
    }
}

/// The run's system prompt (given, or the default) with the skills section appended, and the
/// plan-mode instructions in plan mode.
fn system_prompt_with_skills(setup: &mut RunSetup) -> String {
    let system_prompt = setup
        .system_prompt
        .take()
        .unwrap_or_else(|| default_system_prompt(setup.workspace.root()));
    let mut system_prompt = with_skills_section(system_prompt, &setup.extensions.skills);
    if setup.plan_mode {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(crate::plan::PLAN_MODE_PROMPT);
    }
    system_prompt
}

/// `system_prompt` with the skills section appended, so the model knows which skills exist.
pub fn with_skills_section(mut system_prompt: String, skills: &builtin::Skills) -> String {
    let section = skills.prompt_section();
    if !section.is_empty() {
        system_prompt.push_str("\n\n");
        system_prompt.push_str(&section);
    }
    system_prompt
}

/// `agent` with the built-in coding tools on `workspace` (only the read-only ones in plan
/// mode), the `skill` tool when there are skills, and `update_plan`.
pub fn with_workspace_tools(
    agent: AgentLoop<WorkspaceDeps>,
    workspace: &Workspace,
    shell: &ShellOptions,
    skills: &builtin::Skills,
    plan_mode: bool,
) -> Result<AgentLoop<WorkspaceDeps>, Failure> {
    let tools = if plan_mode {
        crate::plan::plan_mode_tools(workspace, shell)
    } else {
        builtin::tools_with::<WorkspaceDeps>(workspace, shell)
    };
    let plan = builtin::plan_tool::<WorkspaceDeps>()
        .map_err(|e| Failure::new(format!("cannot build the update_plan tool: {e}")))?;
    agent
        .with_tools(tools)
        .map_err(|e| Failure::new(format!("cannot register the built-in tools: {e}")))?
        .with_tools(crate::config::skills::tool(skills)?)
        .map_err(|e| Failure::new(format!("cannot register the skill tool: {e}")))?
        .with_tools([plan])
        .map_err(|e| Failure::new(format!("cannot register the update_plan tool: {e}")))
}

/// The `task` tool over this run's agents (read-only children in plan mode); unusable agent
/// files are one warning line each on stderr.
fn task_tool(
    setup: &RunSetup,
    deps: &WorkspaceDeps,
    hooks: &CommandHooks,
) -> Result<ToolSpec<WorkspaceDeps>, Failure> {
    let parent = crate::config::agents::Parent {
        hooks: Some(hooks.clone()),
        model: setup.model.clone(),
        model_name: setup.model_name.clone(),
        deps: deps.clone(),
        workspace: setup.workspace.clone(),
        shell: setup.shell.clone(),
        read_only: setup.plan_mode,
        sessions: Some((setup.store.clone(), setup.session.settings.clone())),
        session_id: Some(setup.session.id.clone()),
    };
    let (task, warnings) = crate::config::agents::task_tool(&setup.extensions.agents, &parent)?;
    for warning in warnings {
        eprintln!("agentloop: warning: {}", visible_line(&warning));
    }
    Ok(task)
}

/// The tools' dependencies: workspace, approval policy (asking on the terminal, or denying and
/// remembering what was denied when there is none), MCP tools' classifier, permission rules.
fn workspace_deps(
    setup: &RunSetup,
    toolset: &agentloop_mcp::McpToolset,
    spinner: Arc<Spinner>,
    hooks: &CommandHooks,
) -> (WorkspaceDeps, Arc<Mutex<Vec<String>>>) {
    let mut deps = WorkspaceDeps::new(setup.workspace.clone(), setup.policy)
        .with_tool_classifier(toolset.approval_classifier())
        .with_permissions(setup.extensions.permissions.clone());
    let denied_no_terminal = Arc::new(Mutex::new(Vec::new()));
    if setup.policy == ApprovalPolicy::Mutating {
        let targets = crate::ui::prompt::RuleTargets::for_workspace(setup.workspace.root());
        match terminal_asker(spinner, setup.workspace.clone(), hooks.clone(), targets) {
            Some(asker) => deps = deps.with_asker(asker),
            None => {
                // Deny as the library would without an asker, but remember what was denied:
                // the run must not look successful when the work it was asked for was refused.
                let denied = denied_no_terminal.clone();
                deps = deps.with_asker(move |call: &ToolCallPart| {
                    denied
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(describe_denied(call));
                    Approval::deny(builtin::NO_ASKER_REASON)
                });
            }
        }
    }
    (deps, denied_no_terminal)
}

/// The loop's configuration from the run's settings.
fn loop_config(setup: &RunSetup, system_prompt: String) -> AgentLoopConfig {
    AgentLoopConfig {
        model: Some(setup.model_name.clone()),
        system_prompt: Some(system_prompt),
        reasoning: setup.reasoning,
        max_turns: setup.max_turns,
        usage_limits: setup.limits,
        telemetry: TelemetryConfig {
            agent_name: Some("agentloop".into()),
            conversation_id: Some(setup.session.id.clone()),
            capture_content: setup.trace_content,
        },
        compaction: setup.compaction.clone(),
        // The session groups its requests in OpenAI's prompt cache (ignored with
        // --no-prompt-cache, which turns caching off in the adapter).
        prompt_cache_key: Some(setup.session.id.clone()),
        ..AgentLoopConfig::default()
    }
}

/// Where the run's events go: recorded first (the transcript is durable before anything is
/// shown), then rendered; a run whose messages cannot be recorded is stopped, since its work
/// could not be resumed or reviewed.
fn event_sink(
    setup: &RunSetup,
    recorder: &SessionRecorder,
    renderer: &Arc<Renderer>,
    abort: &AbortSignal,
    checkpoints: Option<Arc<agentloop::checkpoint::Recorder>>,
) -> impl Fn(&AgentEvent) + Send + Sync + 'static {
    let (recorder, renderer, abort) = (recorder.clone(), renderer.clone(), abort.clone());
    let turns_before = setup
        .store
        .info(&setup.session.id)
        .map_or(0, |i| i.stats.turns + i.stats.failed_turns);
    let turns_before = u32::try_from(turns_before).unwrap_or(u32::MAX);
    let store_failed = AtomicBool::new(false);
    let json = setup.json;
    let session_id = setup.session.id.clone();
    move |event: &AgentEvent| {
        if let Some(checkpoints) = &checkpoints {
            crate::commands::checkpoints::on_turn(checkpoints, turns_before, event);
        }
        recorder.on_event(event);
        if recorder.failures() > 0 && !store_failed.swap(true, Ordering::SeqCst) {
            abort.abort();
        }
        if json && matches!(event, AgentEvent::AgentStart) {
            crate::ui::render::out(&format!("{}\n", scripting::agent_start_line(&session_id)));
        } else {
            renderer.on_event(event);
        }
        crate::plan::announce(event, json);
        if !json {
            if let Some(note) = crate::commands::compact::note(event) {
                eprintln!("agentloop: {note}");
            }
        }
    }
}

/// Ctrl-C aborts the run (the returned flag records it); a second Ctrl-C exits at once, with
/// no command left behind (exported spans still flushed). The task is aborted when the run
/// ends.
fn abort_on_ctrl_c(abort: AbortSignal) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let interrupted = Arc::new(AtomicBool::new(false));
    let mut interrupts = Interrupts::listen();
    let task = tokio::spawn({
        let interrupted = interrupted.clone();
        async move {
            while interrupts.next().await {
                if interrupted.swap(true, Ordering::SeqCst) {
                    builtin::kill_shell_processes();
                    crate::otel::shutdown();
                    std::process::exit(i32::from(EXIT_INTERRUPTED));
                }
                abort.abort();
            }
        }
    });
    (interrupted, task)
}

/// Runs the agent: resumes the parked run, or runs the prompts (typed when an output schema
/// was asked for). Returns the outcome and the typed output.
async fn drive<D: agentloop::tooling::ToolDeps>(
    agent: &AgentLoop<D>,
    setup: &mut RunSetup,
    prompts: Vec<Message>,
) -> (Result<RunOutcome, OutputError>, Option<Value>) {
    let context = std::mem::take(&mut setup.context);
    match (setup.resume.take(), &setup.output) {
        (Some(parked), _) => (
            agent
                .resume_parked(context, parked)
                .await
                .map_err(OutputError::Run),
            None,
        ),
        (None, None) => (
            agent.run(prompts, context).await.map_err(OutputError::Run),
            None,
        ),
        (None, Some(output)) => match agent.run_output(output, prompts, context).await {
            Ok(typed) => (Ok(typed.outcome), Some(typed.json)),
            Err(e) => (Err(e), None),
        },
    }
}

/// Why the run ended: from its `AgentEnd` event, or the error when it never got that far.
fn stop_of(totals: &Totals, outcome: &Result<RunOutcome, OutputError>) -> RunStop {
    match (&totals.stop, outcome) {
        (Some(stop), _) => stop.clone(),
        (None, Ok(o)) => o.stop.clone(),
        (None, Err(e)) => RunStop::Internal {
            message: e.to_string(),
        },
    }
}

/// The one-line report of a store that failed during the run, if it did.
fn store_error(recorder: &SessionRecorder, session_id: &str) -> Option<String> {
    recorder.take_error().map(|error| {
        format!(
            "the session store failed, so the run was stopped: {} message(s) could not be \
             recorded in session {}: {}",
            recorder.failures(),
            visible_line(session_id),
            visible_line(&error.to_string())
        )
    })
}

/// On SIGTERM, SIGHUP (the terminal closed), SIGQUIT, SIGUSR1 or SIGALRM — the signals whose
/// default action ends the process — kills every process the shell tool started, detached
/// ones included, and exits with 128 + the signal number. (SIGINT is handled by the run
/// itself; SIGKILL cannot be caught: see the README.) The returned task is aborted when the
/// run ends.
pub fn kill_on_exit_signals() -> tokio::task::JoinHandle<()> {
    tokio::spawn(async {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let (Ok(mut term), Ok(mut hup), Ok(mut quit), Ok(mut usr1), Ok(mut alrm)) = (
                signal(SignalKind::terminate()),
                signal(SignalKind::hangup()),
                signal(SignalKind::quit()),
                signal(SignalKind::user_defined1()),
                signal(SignalKind::alarm()),
            ) else {
                return;
            };
            let received = tokio::select! {
                _ = term.recv() => 15,
                _ = hup.recv() => 1,
                _ = quit.recv() => 3,
                _ = usr1.recv() => 10,
                _ = alrm.recv() => 14,
            };
            builtin::kill_shell_processes();
            std::process::exit(128 + received);
        }
    })
}

/// One short line naming a denied call: `shell: make install`, `write_file path=a.txt …`.
fn describe_denied(call: &ToolCallPart) -> String {
    let args = match (call.tool_name.as_str(), &call.arguments) {
        ("shell", agentloop::transcript::ToolArguments::Json(v)) => v
            .get("command")
            .and_then(|c| c.as_str())
            .map(|c| crate::ui::render::one_line(c, 80)),
        _ => None,
    };
    match args {
        Some(command) => format!("shell: {command}"),
        None => format!(
            "{} {}",
            visible_line(&call.tool_name),
            abbreviate_args(&call.arguments, 80)
        ),
    }
}

/// Ctrl-C, listened to from the moment it is created: on Unix the SIGINT handler is installed
/// synchronously, so an interrupt right after the run starts is never lost to the default
/// disposition (which would kill the process without its `agent_end`).
struct Interrupts {
    #[cfg(unix)]
    signal: Option<tokio::signal::unix::Signal>,
}

impl Interrupts {
    fn listen() -> Self {
        Interrupts {
            #[cfg(unix)]
            signal: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt()).ok(),
        }
    }

    /// Waits for the next Ctrl-C; `false` when none can be received.
    async fn next(&mut self) -> bool {
        #[cfg(unix)]
        if let Some(signal) = &mut self.signal {
            return signal.recv().await.is_some();
        }
        tokio::signal::ctrl_c().await.is_ok()
    }
}

/// The shell tool's options from the flags: the sandbox mode, the allow-list, and the keys this
/// CLI reads hidden whatever they are called.
pub fn shell_options(args: &RunArgs) -> ShellOptions {
    let mut options = ShellOptions::default()
        .sandbox(args.sandbox)
        .hide_env("OPENAI_API_KEY")
        .hide_env("ANTHROPIC_API_KEY")
        .jobs(crate::jobs::table(args.keep_jobs));
    for name in &args.shell_env_allow {
        options = options.allow_env(name);
    }
    options
}

/// The process result for a finished run: success only for [`RunStop::Done`] with nothing
/// denied for lack of a terminal (that is exit code 4); a run parked for approval is 3; Ctrl-C
/// is 130.
pub fn exit_status(report: &RunReport) -> Result<(), Failure> {
    if let Some(error) = &report.store_error {
        return Err(Failure::new(error.clone()));
    }
    if let Err(e @ OutputError::Invalid { .. }) = &report.outcome {
        if !report.interrupted {
            return Err(Failure::new(e.to_string()));
        }
    }
    let denied = &report.denied_no_terminal;
    let denied_line = (!denied.is_empty()).then(|| {
        format!(
            "{} mutating tool call(s) were denied because there is no terminal to ask on \
             (rerun on a terminal, or with --approve allow): {}",
            denied.len(),
            denied.join("; ")
        )
    });
    match (&report.stop, denied_line) {
        (RunStop::Done, None) => return Ok(()),
        (RunStop::Done, Some(line)) => {
            return Err(Failure::new(line).with_code(EXIT_DENIED_NO_TERMINAL));
        }
        // The run failed for its own reason (that exit code wins); still say what was denied.
        (_, Some(line)) => eprintln!("agentloop: {line}"),
        (_, None) => {}
    }
    match &report.stop {
        RunStop::Done => Ok(()),
        RunStop::Aborted if report.interrupted => {
            Err(Failure::new("interrupted (Ctrl-C)").with_code(EXIT_INTERRUPTED))
        }
        RunStop::MaxTurns { limit } => Err(Failure::new(format!(
            "stopped at --max-turns {limit} with work left (resume with --continue)"
        ))),
        RunStop::AwaitingApproval { pending } => Err(Failure::new(format!(
            "{} tool call(s) await approval: decide with `agentloop approve` / `agentloop deny`, \
             then continue with `agentloop resume` (or `run --continue`)",
            pending.len()
        ))
        .with_code(EXIT_AWAITING_APPROVAL)),
        RunStop::Internal { message } if report.outcome.is_err() => {
            Err(Failure::new(message.clone()))
        }
        other => Err(Failure::new(describe_stop(other))),
    }
}

/// The user message of a prompt: its text, then its images.
fn prompt_message(text: String, images: &[ImagePart]) -> Message {
    if images.is_empty() {
        return Message::user(text);
    }
    let mut parts = vec![Part::text(text)];
    parts.extend(images.iter().cloned().map(Part::Image));
    Message::user_parts(parts)
}

/// The most bytes one `--image` file may have (Anthropic's per-image limit, the smallest).
const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// Reads the `--image` files; an unreadable, oversized or non-image file is a usage error
/// before anything runs.
fn load_images(paths: &[std::path::PathBuf]) -> Result<Vec<ImagePart>, Failure> {
    paths
        .iter()
        .map(|path| load_image(path, "--image"))
        .collect()
}

/// Reads one image file (`what` names where it was given: `--image`, `/image`).
pub fn load_image(path: &std::path::Path, what: &str) -> Result<ImagePart, Failure> {
    let shown = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| Failure::usage(format!("cannot read {what} {shown}: {e}")))?
        .len();
    if size > MAX_IMAGE_BYTES {
        return Err(Failure::usage(format!(
            "{what} {shown} has {size} bytes; at most {MAX_IMAGE_BYTES} are accepted"
        )));
    }
    let bytes = std::fs::read(path)
        .map_err(|e| Failure::usage(format!("cannot read {what} {shown}: {e}")))?;
    ImagePart::from_bytes(&bytes).ok_or_else(|| {
        Failure::usage(format!(
            "{what} {shown} is not a PNG, JPEG, GIF or WebP image"
        ))
    })
}

/// The system prompt of a run: `--system` or the default, plus the project instructions
/// (AGENTS.md …) unless `--no-project-instructions`; says on stderr which files were loaded.
pub fn system_prompt_for(args: &RunArgs, workspace: &Workspace) -> Option<String> {
    if args.no_project_instructions {
        return args.system.clone();
    }
    let found = crate::config::instructions::discover(workspace.root());
    if let Some(header) = crate::config::instructions::header(&found) {
        eprintln!("agentloop: {header}");
    }
    let base = args
        .system
        .clone()
        .unwrap_or_else(|| default_system_prompt(workspace.root()));
    Some(crate::config::instructions::with_instructions(
        &base,
        &found.files,
    ))
}

/// `agentloop run`.
pub async fn run(db: Option<&str>, args: RunArgs) -> Result<(), Failure> {
    let mut input = RunInput::read(&args)?;
    let store: Arc<dyn SessionStore> = open_store(db)?;

    // Which session: resumed ones bring back their model, provider, base URL and reasoning
    // (flags given on this invocation win).
    let target = session_target(&*store, &args, input.workspace.root())?;
    let choice = model_choice(&args, &target, input.command.as_ref());
    let (spec, model) = choice.build(&args)?;
    let settings = recorded(
        &spec,
        choice.base_url.as_deref(),
        choice.reasoning,
        input.workspace.root(),
    );
    // With fallbacks, the error that ends the run may be another model's.
    let endpoint = args
        .fallback_model
        .is_empty()
        .then(|| crate::hints::Endpoint::of(spec.provider, choice.base_url.as_deref()));
    input.load_workspace_files(&args)?;

    let new_session = || {
        let mut new = NewSession::new()
            .model(&spec.name)
            .settings(settings.clone());
        if let Some(title) = &args.title {
            new = new.title(title);
        }
        new
    };
    let steering = prompt_message(input.prompt.clone(), &input.images);
    let mut opened = open_session(&*store, &target, &settings, new_session, steering)?;
    if let Some(note) = args.approve.deprecation() {
        eprintln!("agentloop: note: {note}");
    }
    let root = input.root.clone();
    let setup = input.setup(
        &args,
        model,
        &spec.name,
        &choice,
        store.clone(),
        &mut opened,
    );
    let report = execute(setup).await?;
    print_report(&report, &args, &opened.session.id, &root)?;
    if opened.created {
        discard_if_unanswered(&*store, &opened.session.id);
    }
    exit_status(&report).map_err(|failure| with_hint(failure, &report, endpoint.as_ref()))
}

/// A failed run's message, with what to do about a model error at `endpoint` (none when
/// fallbacks make the failing model unknown).
fn with_hint(
    failure: Failure,
    report: &RunReport,
    endpoint: Option<&crate::hints::Endpoint>,
) -> Failure {
    match (model_error(report), endpoint) {
        (Some(error), Some(endpoint)) => Failure {
            message: crate::hints::explain(error, endpoint),
            ..failure
        },
        _ => failure,
    }
}

/// What `agentloop run` reads before it opens a session: the prompt (a custom command's when
/// it names one), the images, the output schema, the workspace, its MCP servers and extension
/// points — all checked first, so that bad input leaves no empty session behind.
struct RunInput {
    prompt: String,
    images: Vec<ImagePart>,
    output: Option<Output<Value>>,
    /// The workspace directory as given (or the current one).
    root: std::path::PathBuf,
    workspace: Workspace,
    /// The workspace's own config files apply.
    trusted: bool,
    /// The custom command the prompt named.
    command: Option<crate::config::custom_commands::Expanded>,
    /// The MCP servers (set by [`RunInput::load_workspace_files`]).
    mcp: Vec<agentloop_mcp::McpServerConfig>,
    /// The system prompt with the project instructions (likewise).
    system_prompt: Option<String>,
    /// The extension points (likewise).
    extensions: Arc<crate::config::extensions::Extensions>,
}

impl RunInput {
    /// Reads and checks the prompt, images, schema and workspace; applies `-q` and
    /// `--json compact`.
    fn read(args: &RunArgs) -> Result<Self, Failure> {
        let prompt = read_prompt(args)?;
        let images = load_images(&args.images)?;
        let output = match &args.output_schema {
            Some(path) => Some(load_output_schema(path, args)?),
            None => None,
        };
        if args.quiet {
            crate::ui::render::quiet();
        }
        if args.json == Some(crate::cli::JsonForm::Compact) {
            crate::ui::render::compact_json();
        }
        let root = args.target.root()?;
        let workspace = Workspace::new(&root).map_err(|e| Failure::usage(e.to_string()))?;
        let trusted = args.trust.applies_to(workspace.root());
        // `/NAME ARGS`: a custom command's prompt.
        let command =
            crate::config::custom_commands::expand_prompt(workspace.root(), trusted, &prompt)?;
        let prompt = command.as_ref().map_or(prompt, |c| c.prompt.clone());
        Ok(RunInput {
            prompt,
            images,
            output,
            root,
            workspace,
            trusted,
            command,
            mcp: Vec::new(),
            system_prompt: None,
            extensions: Arc::default(),
        })
    }

    /// Loads the MCP servers, the project instructions and the extension points (with a
    /// custom command's allowed tools).
    fn load_workspace_files(&mut self, args: &RunArgs) -> Result<(), Failure> {
        let root = self.workspace.root();
        let config = crate::config::files::ConfigFile::load(root, &args.trust)?;
        crate::commands::worktrees::prune_expired(config.worktrees.prune_after);
        let mcp = config.mcp_servers(root, &args.mcp)?;
        self.mcp = crate::mcp::with_elicitation(mcp, args.elicitation_defaults);
        self.system_prompt = system_prompt_for(args, &self.workspace);
        let mut extensions = crate::config::extensions::Extensions::load(root, self.trusted)?;
        if let Some(command) = &self.command {
            extensions.allow_for_prompt(&command.allowed_tools)?;
        }
        self.extensions = Arc::new(extensions);
        Ok(())
    }

    /// The run's setup: these inputs, the flags, the model and the opened session (whose lock
    /// stays with the caller).
    fn setup(
        self,
        args: &RunArgs,
        model: Arc<dyn Model>,
        model_name: &str,
        choice: &Choice,
        store: Arc<dyn SessionStore>,
        opened: &mut OpenedSession,
    ) -> RunSetup {
        RunSetup {
            model,
            model_name: model_name.to_owned(),
            system_prompt: self.system_prompt,
            workspace: self.workspace,
            policy: args.approve.into(),
            reasoning: choice.reasoning.map(Into::into),
            max_turns: args.max_turns.0,
            limits: usage_limits(args),
            trace_content: args.trace_content,
            json: args.json.is_some(),
            store,
            session: opened.session.clone(),
            context: std::mem::take(&mut opened.context),
            prompt: self.prompt,
            images: self.images,
            steering: None,
            interactive: None,
            shell: shell_options(args),
            output: self.output,
            resume: opened.resume.take(),
            mcp: self.mcp,
            compaction: crate::commands::compact::config(args),
            extensions: self.extensions,
            plan_mode: args.mode == crate::plan::Mode::Plan,
            checkpoints: !args.no_checkpoints,
        }
    }
}

/// The request, token and cost ceilings of `--max-requests`, `--max-*-tokens`, `--max-cost`.
pub fn usage_limits(args: &RunArgs) -> UsageLimits {
    UsageLimits {
        max_requests: args.max_requests,
        max_input_tokens: args.max_input_tokens,
        max_output_tokens: args.max_output_tokens,
        max_total_tokens: args.max_total_tokens,
        max_cost_usd: args.max_cost,
    }
}

/// The model, base URL and reasoning of this run: the flags, then what a resumed session
/// recorded (flags given on this invocation win), then a custom command's model (unless
/// `--model` was given).
fn model_choice(
    args: &RunArgs,
    target: &SessionTarget,
    command: Option<&crate::config::custom_commands::Expanded>,
) -> Choice {
    let mut choice = Choice {
        model: args.target.model.clone(),
        base_url: args.base_url.clone(),
        reasoning: args.reasoning,
    };
    if let SessionTarget::Resume(info) = target {
        if let Some(note) = restore(&info.settings, args.explicit, &mut choice) {
            eprintln!("agentloop: note: {note}");
        }
    }
    if let Some(model) = command.and_then(|c| c.model.clone()) {
        if !args.explicit.model {
            choice.model = model;
        }
    }
    choice
}

/// The prompt: the argument (`-` and `@file` parts combined), or text piped on standard input.
fn read_prompt(args: &RunArgs) -> Result<String, Failure> {
    let needs_prompt = || {
        Failure::usage(
            "agentloop run needs a prompt: an argument, or text piped on standard input; for \
             a conversation, use `agentloop chat`",
        )
    };
    let prompt = match &args.prompt {
        Some(argument) => scripting::combined_prompt(argument)?,
        // `echo "fix it" | agentloop run`: piped input is the prompt, as `-` would say.
        None if !std::io::IsTerminal::is_terminal(&std::io::stdin()) => {
            let piped = scripting::combined_prompt("-")?;
            if piped.trim().is_empty() {
                return Err(needs_prompt());
            }
            piped
        }
        None => return Err(needs_prompt()),
    };
    if prompt.trim().is_empty() {
        return Err(Failure::usage("the prompt is empty"));
    }
    Ok(prompt)
}

/// The session a run writes, opened under its lock (held until the run ends).
pub struct OpenedSession {
    /// The session as the previous writer left it, or the one just created.
    pub session: SessionInfo,
    /// What the model sees of its history (a compacted session: the summary and later turns).
    pub context: Vec<Message>,
    /// The session's parked run, when it was waiting for approval.
    pub resume: Option<ParkedRun>,
    /// The session was created by this run.
    pub created: bool,
    /// The writer's lock.
    _lock: Option<agentloop::session::SessionLock>,
}

/// Opens the run's session: one writer per session, so the lock is taken before the context is
/// loaded. A chosen id may have been created meanwhile by another run, which is then continued.
/// A session parked for approval resumes (decided calls first), with `steering` (the new prompt)
/// queued before its next model call.
pub fn open_session(
    store: &dyn SessionStore,
    target: &SessionTarget,
    settings: &agentloop::session::SessionSettings,
    new_session: impl Fn() -> NewSession,
    steering: Message,
) -> Result<OpenedSession, Failure> {
    let lock = |id: &str| store.lock_session(id, SESSION_LOCK_WAIT);
    let (held, existing) = match target {
        SessionTarget::Resume(info) => {
            let held = lock(&info.id)?;
            (Some(held), Some(store.info(&info.id)?))
        }
        SessionTarget::New(Some(id)) => {
            let held = lock(id)?;
            match store.info(id) {
                Ok(info) => (Some(held), Some(info)),
                Err(e) if e.is_not_found() => (Some(held), None),
                Err(e) => return Err(e.into()),
            }
        }
        SessionTarget::New(None) => (None, None),
    };
    if let Some(mut info) = existing {
        store_if_changed(store, &mut info, settings.clone())?;
        let children = crate::config::agents::park_interrupted_children(store, &info.id)?;
        if children > 0 {
            eprintln!("agentloop: resuming {children} interrupted sub-agent run(s)");
        }
        let (context, parked) = load_parked(store, &info.id)?;
        return Ok(OpenedSession {
            resume: parked.map(|mut p: ParkedRun| {
                p.steering.push(steering);
                p
            }),
            context: effective_context(&context),
            session: info,
            created: false,
            _lock: held,
        });
    }
    let chosen = match target {
        SessionTarget::New(id) => id.as_ref(),
        SessionTarget::Resume(_) => None,
    };
    let new = match chosen {
        Some(id) => new_session().id(id),
        None => new_session(),
    };
    let info = store.create(new)?;
    if chosen.is_some() {
        eprintln!("agentloop: new session {}", visible_line(&info.id));
    }
    let held = match held {
        Some(held) => held,
        None => lock(&info.id)?,
    };
    Ok(OpenedSession {
        session: info,
        context: Vec::new(),
        resume: None,
        created: true,
        _lock: Some(held),
    })
}

/// What a finished run prints besides its events: the summary, pending approvals, the typed
/// output, the `--json` result line, `--output-last-message`, the `--quiet` answer.
fn print_report(
    report: &RunReport,
    args: &RunArgs,
    session_id: &str,
    root: &Path,
) -> Result<(), Failure> {
    report.renderer.print_summary(Some(session_id));
    crate::commands::approvals::print_pending(report, session_id, args.json.is_some(), root);
    if let Some(output) = &report.output {
        // The validated output is stdout's only content (or, with --json, its last line).
        let line = if args.json.is_some() {
            serde_json::json!({"type": "output", "output": output}).to_string()
        } else {
            output.to_string()
        };
        crate::ui::render::out(&format!("{line}\n"));
    }
    if args.json.is_some() {
        crate::ui::render::out(&format!("{}\n", scripting::result_line(report, session_id)));
    }
    if let Some(path) = &args.output_last_message {
        scripting::write_last_message(path, report)?;
    }
    if args.quiet {
        print_final_answer(&crate::ui::render::final_answer(&scripting::final_text(
            report,
        )));
    }
    Ok(())
}

/// The model error that ended a run, if one did.
pub fn model_error(report: &RunReport) -> Option<&agentloop::model::ModelError> {
    match &report.outcome {
        Err(OutputError::Run(agentloop::agent::AgentError::Model { error, .. }))
            if !report.interrupted =>
        {
            Some(error)
        }
        _ => None,
    }
}

/// Deletes session `id` — one this process created — when the model never replied in it: a
/// run that failed before any reply (a refused key, a server that is down, Ctrl-C at once) or a
/// chat closed before its first answer. Such a session holds nothing to continue or review,
/// and `sessions list` would fill up with them; the prompt is still in the shell's (or the
/// chat's) history. A session with parked tool calls is kept. Returns whether it was deleted.
pub fn discard_if_unanswered(store: &dyn SessionStore, id: &str) -> bool {
    let unanswered = store.info(id).is_ok_and(|info| !info.stats.has_reply());
    let parked = !matches!(store.parked(id), Ok(None));
    let deleted = unanswered && !parked && store.delete(id).is_ok();
    if deleted {
        crate::commands::sessions::forget_files(id);
    }
    deleted
}

/// The session a run records into.
pub enum SessionTarget {
    /// Continue this stored session.
    Resume(Box<SessionInfo>),
    /// Create a session (with this id, when one was chosen).
    New(Option<String>),
}

/// The session `--session` / `--continue` (or neither) selects for a run in `workspace`.
pub fn session_target(
    store: &dyn SessionStore,
    args: &RunArgs,
    workspace: &Path,
) -> Result<SessionTarget, Failure> {
    if let Some(given) = &args.session {
        return Ok(
            match crate::commands::sessions::for_run(store, given, args.create)? {
                Some(info) => SessionTarget::Resume(Box::new(info)),
                None => SessionTarget::New(Some(given.clone())),
            },
        );
    }
    if !args.continue_last {
        return Ok(SessionTarget::New(None));
    }
    let key = workspace.to_string_lossy();
    match crate::commands::sessions::last_local_in(store, &key)? {
        Some(info) => Ok(SessionTarget::Resume(Box::new(info))),
        None => {
            eprintln!(
                "agentloop: no session to continue in {} (none recorded there with a model \
                 reply); starting a new one",
                visible_line(&key)
            );
            Ok(SessionTarget::New(None))
        }
    }
}

/// Reads `--output-schema FILE.json` into an output description (a usage error when the file
/// is unreadable, not JSON, or not a valid JSON Schema).
fn load_output_schema(path: &Path, args: &RunArgs) -> Result<Output<Value>, Failure> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Failure::usage(format!(
            "cannot read --output-schema {}: {e}",
            path.display()
        ))
    })?;
    let schema: Value = serde_json::from_str(&text).map_err(|e| {
        Failure::usage(format!(
            "--output-schema {} is not JSON: {e}",
            path.display()
        ))
    })?;
    let name = schema
        .get("title")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| path.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "output".to_owned());
    Ok(Output::from_schema(name, schema)
        .map_err(|e| Failure::usage(format!("--output-schema {}: {e}", path.display())))?
        .strategy(args.output_strategy)
        .retries(args.output_retries))
}

/// `--quiet`: the final answer alone on stdout (as [`crate::ui::render::final_answer`] shows it).
fn print_final_answer(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    let _ = stdout.flush();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::Parser;

    fn run_args(argv: &[&str]) -> RunArgs {
        let cli = crate::cli::Cli::try_parse_from(argv).unwrap();
        match cli.command {
            Some(crate::cli::Command::Run(args)) => args,
            _ => panic!("not a run"),
        }
    }

    #[test]
    fn each_limit_flag_sets_its_own_ceiling() {
        let args = run_args(&[
            "agentloop",
            "run",
            "--max-requests",
            "3",
            "--max-input-tokens",
            "40",
            "--max-output-tokens",
            "50",
            "--max-total-tokens",
            "60",
            "--max-cost",
            "0.25",
            "hi",
        ]);
        let limits = usage_limits(&args);
        assert_eq!(limits.max_requests, Some(3));
        assert_eq!(limits.max_input_tokens, Some(40));
        assert_eq!(limits.max_output_tokens, Some(50));
        assert_eq!(limits.max_total_tokens, Some(60));
        assert_eq!(limits.max_cost_usd, Some(0.25));
        let none = usage_limits(&run_args(&["agentloop", "run", "hi"]));
        assert_eq!(none.max_requests, None);
        assert_eq!(none.max_cost_usd, None);
    }
}
