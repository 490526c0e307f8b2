//! `agentloop run`: one agent run with the built-in tools on a workspace, recorded into the
//! session store, rendered as text or JSON lines, abortable with Ctrl-C.
//!
//! [`execute`] is the engine shared with `agentloop demo`: it wires the model, the tools, the
//! approval policy, the session recorder and the renderer into one [`AgentLoop`] and reports how
//! the run ended; [`exit_status`] maps that to the process's exit code.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentloop::agent::{AbortSignal, AgentError, AgentLoop, AgentLoopConfig, RunOutcome, RunStop};
use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::model::{Model, ReasoningLevel};
use agentloop::session::{NewSession, SessionError, SessionInfo, SessionRecorder, SessionStore};
use agentloop::transcript::Message;

use crate::cli::RunArgs;
use crate::error::{EXIT_INTERRUPTED, Failure};
use crate::model::{ModelSpec, build_model};
use crate::prompt::terminal_asker;
use crate::render::{OutputMode, Renderer, Spinner, Totals, describe_stop, stdout_color};
use crate::scripting;
use crate::sessions::open_store;
use agentloop::agent::compaction::effective_context;

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
    /// JSON lines instead of text.
    pub json: bool,
    /// The store the run is recorded into.
    pub store: Arc<dyn SessionStore>,
    /// The session it is recorded into.
    pub session: SessionInfo,
    /// The context to run on top of (a resumed session's messages).
    pub context: Vec<Message>,
    /// The new prompt.
    pub prompt: String,
    /// Automatic context compaction (`None`: off).
    pub compaction: Option<agentloop::agent::CompactionConfig>,
}

/// How a run went.
pub struct RunReport {
    /// Why it ended (from the `AgentEnd` event, or the error when it never started).
    pub stop: RunStop,
    /// Ctrl-C aborted it.
    pub interrupted: bool,
    /// Counters gathered from the events.
    pub totals: Totals,
    /// What the loop returned.
    pub outcome: Result<RunOutcome, AgentError>,
    /// The renderer (to print the summary line).
    pub renderer: Arc<Renderer>,
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
pub async fn execute(setup: RunSetup) -> Result<RunReport, Failure> {
    let stderr_tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let spinner = Spinner::new(!setup.json && stderr_tty);
    let mode = if setup.json {
        OutputMode::Json
    } else {
        OutputMode::Human {
            color: stdout_color(),
        }
    };
    let renderer = Arc::new(Renderer::new(mode, spinner.clone()));

    let mut deps = WorkspaceDeps::new(setup.workspace.clone(), setup.policy);
    if setup.policy == ApprovalPolicy::Mutating {
        if let Some(asker) = terminal_asker(spinner.clone()) {
            deps = deps.with_asker(asker);
        }
    }

    let config = AgentLoopConfig {
        model: Some(setup.model_name.clone()),
        system_prompt: Some(
            setup
                .system_prompt
                .unwrap_or_else(|| default_system_prompt(setup.workspace.root())),
        ),
        reasoning: setup.reasoning,
        max_turns: setup.max_turns,
        compaction: setup.compaction,
        ..AgentLoopConfig::default()
    };

    let recorder = SessionRecorder::new(setup.store.clone(), &setup.session.id);
    let emit = {
        let recorder = recorder.clone();
        let renderer = renderer.clone();
        // Record first: the transcript is durable before anything is shown.
        let json = setup.json;
        let session_id = setup.session.id.clone();
        move |event: &agentloop::agent::AgentEvent| {
            recorder.on_event(event);
            if json && matches!(event, agentloop::agent::AgentEvent::AgentStart) {
                crate::render::out(&format!("{}\n", scripting::agent_start_line(&session_id)));
            } else {
                renderer.on_event(event);
            }
            if !json {
                if let Some(note) = crate::compact::note(event) {
                    eprintln!("agentloop: {note}");
                }
            }
        }
    };
    let abort = AbortSignal::new();
    let agent = AgentLoop::with_deps(config, setup.model, Arc::new(deps))
        .with_tools(builtin::tools::<WorkspaceDeps>(&setup.workspace))
        .map_err(|e| Failure::new(format!("cannot register the built-in tools: {e}")))?
        .with_emit(emit)
        .with_abort_signal(abort.clone());

    let interrupted = Arc::new(AtomicBool::new(false));
    let mut interrupts = Interrupts::listen();
    let ctrl_c = tokio::spawn({
        let interrupted = interrupted.clone();
        async move {
            while interrupts.next().await {
                if interrupted.swap(true, Ordering::SeqCst) {
                    // A second Ctrl-C: the person wants out now.
                    std::process::exit(i32::from(EXIT_INTERRUPTED));
                }
                abort.abort();
            }
        }
    });

    let outcome = agent
        .run(vec![Message::user(setup.prompt)], setup.context)
        .await;
    ctrl_c.abort();

    if let Some(error) = recorder.take_error() {
        eprintln!(
            "agentloop: warning: {} message(s) could not be recorded in the session store: {error}",
            recorder.failures()
        );
    }
    let totals = renderer.totals();
    let stop = match (&totals.stop, &outcome) {
        (Some(stop), _) => stop.clone(),
        (None, Ok(o)) => o.stop.clone(),
        (None, Err(e)) => RunStop::Internal {
            message: e.to_string(),
        },
    };
    Ok(RunReport {
        stop,
        interrupted: interrupted.load(Ordering::SeqCst),
        totals,
        outcome,
        renderer,
    })
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

/// The process result for a finished run: success only for [`RunStop::Done`]; Ctrl-C is 130.
pub fn exit_status(report: &RunReport) -> Result<(), Failure> {
    match &report.stop {
        RunStop::Done => Ok(()),
        RunStop::Aborted if report.interrupted => {
            Err(Failure::new("interrupted (Ctrl-C)").with_code(EXIT_INTERRUPTED))
        }
        RunStop::MaxTurns { limit } => Err(Failure::new(format!(
            "stopped at --max-turns {limit} with work left (resume with --continue)"
        ))),
        RunStop::Internal { message } if report.outcome.is_err() => {
            Err(Failure::new(message.clone()))
        }
        other => Err(Failure::new(describe_stop(other))),
    }
}

/// `agentloop run`.
pub async fn run(db: Option<&Path>, args: RunArgs) -> Result<(), Failure> {
    let prompt = scripting::combined_prompt(&args.prompt)?;
    if prompt.trim().is_empty() {
        return Err(Failure::usage("the prompt is empty"));
    }
    if args.quiet {
        crate::render::redirect_to_stderr();
    }
    let spec = ModelSpec::parse(&args.model)?;
    let model = build_model(&spec, args.base_url.as_deref())?;
    let root = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
    let workspace = Workspace::new(&root).map_err(|e| Failure::usage(e.to_string()))?;

    let system_prompt = if args.no_project_instructions {
        args.system.clone()
    } else {
        let found = crate::instructions::discover(workspace.root());
        if let Some(header) = crate::instructions::header(&found) {
            eprintln!("agentloop: {header}");
        }
        let base = args
            .system
            .clone()
            .unwrap_or_else(|| default_system_prompt(workspace.root()));
        Some(crate::instructions::with_instructions(&base, &found.files))
    };

    let store: Arc<dyn SessionStore> = Arc::new(open_store(db)?);
    let new_session = || {
        let mut new = NewSession::new().model(&spec.name);
        if let Some(title) = &args.title {
            new = new.title(title);
        }
        new
    };
    let (session, context) = if let Some(given) = &args.session {
        // Exact ids only: an unknown id starts a new session with that id.
        match store.info(given) {
            Ok(info) => {
                let context = effective_context(&store.load(&info.id)?);
                (info, context)
            }
            Err(SessionError::NotFound { .. }) => {
                (store.create(new_session().id(given))?, Vec::new())
            }
            Err(e) => return Err(e.into()),
        }
    } else if args.continue_last {
        match store.last()? {
            Some(info) => {
                let context = effective_context(&store.load(&info.id)?);
                (info, context)
            }
            None => {
                eprintln!("agentloop: no session to continue; starting a new one");
                (store.create(new_session())?, Vec::new())
            }
        }
    } else {
        (store.create(new_session())?, Vec::new())
    };

    let session_id = session.id.clone();
    let report = execute(RunSetup {
        model,
        model_name: spec.name.clone(),
        workspace,
        policy: args.approve.into(),
        system_prompt,
        reasoning: args.reasoning.map(Into::into),
        max_turns: args.max_turns,
        json: args.json,
        store,
        session,
        context,
        prompt,
        compaction: crate::compact::config(&args),
    })
    .await?;
    report.renderer.print_summary(Some(&session_id));
    if args.json {
        crate::render::out(&format!(
            "{}\n",
            scripting::result_line(&report, &session_id)
        ));
    }
    if let Some(path) = &args.output_last_message {
        scripting::write_last_message(path, &report)?;
    }
    if args.quiet {
        print_final_answer(&scripting::final_text(&report));
    }
    exit_status(&report)
}

/// `--quiet`: the final answer alone on stdout (with a final newline).
fn print_final_answer(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes());
    if !text.is_empty() && !text.ends_with('\n') {
        let _ = stdout.write_all(b"\n");
    }
    let _ = stdout.flush();
}
