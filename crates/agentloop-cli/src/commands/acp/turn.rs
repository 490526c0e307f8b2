//! One `session/prompt`: the stored session's context, the agent built as `agentloop run`
//! builds it (built-in tools, the `task` tool over the agent definitions, skills, MCP tools,
//! hooks, permission rules, compaction, limits, workspace checkpoints unless
//! `--no-checkpoints`), its events recorded into the store and sent to the editor, its
//! questions asked there. The session is locked for the turn, as a run locks it: `run
//! --continue` and the editor never write the same session at once.
//!
//! The steps, in order: [`prepare`] (slash commands, MCP servers, hooks, system prompt),
//! [`build`] (the agent and its event sink), the run itself, and [`finish`] (shut the MCP
//! servers, seal the checkpoints, map the stop).

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::{StopReason, Usage as AcpUsage};
use agentloop::agent::command_hooks::CommandHooks;
use agentloop::agent::compaction::{context_window, effective_context};
use agentloop::agent::{
    AbortSignal, AgentEvent, AgentLoop, AgentLoopConfig, RunOutcome, RunStop, TelemetryConfig,
    UsageLimits,
};
use agentloop::builtin::WorkspaceDeps;
use agentloop::checkpoint::Recorder;
use agentloop::session::{SessionRecorder, load_parked};
use agentloop::tooling::ToolSpec;
use agentloop::transcript::Message;
use agentloop_mcp::McpToolset;

use super::content::Prompt;
use super::outbound::Queue;
use super::session::{Server, Session};
use super::updates::Updates;
use super::usage::Meter;
use crate::config::extensions::Extensions;
use crate::error::Failure;

/// How long a turn waits for another process (a `run --continue`) to finish with the session.
const SESSION_LOCK_WAIT: Duration = Duration::from_secs(2);

/// How a turn ended: the stop reason and the turn's token usage.
pub struct Ended {
    /// The ACP stop reason.
    pub stop: StopReason,
    /// The tokens the turn's model calls used.
    pub usage: AcpUsage,
}

/// Runs `prompt` in `session`; how the turn ended, or a one-line reason it could not run.
pub async fn run(
    server: &Server,
    session: &Session,
    prompt: Prompt,
    abort: AbortSignal,
    queue: Queue,
) -> Result<Ended, Failure> {
    let _lock = server.store.lock_session(&session.id, SESSION_LOCK_WAIT)?;
    let (stored, _parked) = load_parked(&*server.store, &session.id)?;
    let context = effective_context(&stored);
    let before = server.store.info(&session.id)?.stats;
    let mut prepared = prepare(session, prompt, !context.is_empty()).await?;
    let window = server
        .args
        .context_window
        .or_else(|| context_window(&server.spec.name));
    let meter = Meter::new(window, before.usage);
    let turns_before = u32::try_from(before.turns + before.failed_turns).unwrap_or(u32::MAX);
    let checkpoints = (!server.args.no_checkpoints)
        .then(|| {
            crate::commands::checkpoints::recorder(
                &*server.store,
                &session.id,
                session.workspace.root(),
            )
        })
        .flatten();
    let sink = Sink {
        recorder: SessionRecorder::new(server.store.clone(), &session.id),
        updates: Updates::new(&session.id, session.workspace.root(), queue.clone())
            .with_workspace(session.workspace.clone()),
        meter: meter.clone(),
        checkpoints: checkpoints.clone(),
        turns_before,
        abort: abort.clone(),
    };
    let agent = build(server, session, &mut prepared, sink.clone(), abort, queue)?;
    let outcome = agent
        .run(vec![Message::user_parts(prepared.prompt.parts())], context)
        .await;
    let stop = finish(&prepared, &sink, outcome).await?;
    Ok(Ended {
        stop,
        usage: meter.turn_usage(),
    })
}

/// What a turn runs with, once the prompt was expanded and the hooks agreed to it.
struct Prepared {
    prompt: Prompt,
    extensions: Arc<Extensions>,
    toolset: Arc<McpToolset>,
    mcp_tools: Vec<ToolSpec<WorkspaceDeps>>,
    hooks: CommandHooks,
    system_prompt: String,
}

/// Expands a slash command (narrowing the allowed tools to its list) and an MCP prompt
/// command, connects the MCP servers, builds the system prompt with the skills, and runs the
/// `session_start` / `user_prompt_submit` hooks (which may refuse the prompt).
async fn prepare(
    session: &Session,
    mut prompt: Prompt,
    resumed: bool,
) -> Result<Prepared, Failure> {
    let root = session.workspace.root();
    let mut allowed = Vec::new();
    if let Some(command) =
        crate::config::custom_commands::expand_prompt(root, session.trusted, &prompt.text)?
    {
        prompt.text = command.prompt;
        allowed = command.allowed_tools;
    }
    let extensions = match allowed.is_empty() {
        true => session.extensions.clone(),
        false => {
            let mut narrowed = Extensions::load(root, session.trusted)?;
            narrowed.allow_for_prompt(&allowed)?;
            Arc::new(narrowed)
        }
    };
    let (toolset, mcp_tools) = crate::mcp::connect(session.mcp.clone()).await?;
    let toolset = Arc::new(toolset);
    prompt.text = crate::mcp::expand_prompt(&toolset, prompt.text).await?;
    let hooks = crate::config::hooks::for_run(&extensions.hooks, &session.id, root, false);
    let system_prompt = session
        .system_prompt
        .clone()
        .unwrap_or_else(|| crate::commands::run::default_system_prompt(root));
    let mut system_prompt =
        crate::commands::run::with_skills_section(system_prompt, &extensions.skills);
    let started =
        crate::config::hooks::before_run(&hooks, resumed, &mut system_prompt, &mut prompt.text);
    if let Err(refused) = started {
        toolset.shutdown().await;
        return Err(refused);
    }
    Ok(Prepared {
        prompt,
        extensions,
        toolset,
        mcp_tools,
        hooks,
        system_prompt,
    })
}

/// Where a turn's events go: checkpoints numbered, recorded (durable before the editor shows
/// it; a store failure stops the turn), usage counted, then sent to the editor.
#[derive(Clone)]
struct Sink {
    recorder: SessionRecorder,
    updates: Updates,
    meter: Meter,
    checkpoints: Option<Arc<Recorder>>,
    turns_before: u32,
    abort: AbortSignal,
}

impl Sink {
    fn on_event(&self, event: &AgentEvent) {
        if let Some(checkpoints) = &self.checkpoints {
            crate::commands::checkpoints::on_turn(checkpoints, self.turns_before, event);
        }
        self.recorder.on_event(event);
        if self.recorder.failures() > 0 {
            self.abort.abort();
        }
        self.updates.on_event(event);
        if let Some(update) = self.meter.on_event(event) {
            self.updates.send(update);
        }
    }
}

/// The agent `agentloop run` would build for this session: its deps asking the editor, the
/// built-in tools, the `task` tool over the agent definitions, hooks, MCP tools, and the
/// checkpoint extension last (a call another extension blocks leaves no checkpoint).
fn build(
    server: &Server,
    session: &Session,
    prepared: &mut Prepared,
    sink: Sink,
    abort: AbortSignal,
    queue: Queue,
) -> Result<AgentLoop<WorkspaceDeps>, Failure> {
    let shell = crate::commands::run::shell_options(&server.args);
    // Full outputs of cut results, kept as `run` keeps them (`sessions show --full`).
    let (shell, retention) = crate::outputs::attach(&shell, &session.id);
    let shell = super::client_terminals::attach(shell, session.terminals, &session.id, &queue);
    let asker = session.asker.clone();
    let updates = sink.updates.clone();
    let deps = WorkspaceDeps::new(session.workspace.clone(), session.mode.policy())
        .with_tool_classifier(prepared.toolset.approval_classifier())
        .with_permissions(prepared.extensions.permissions.clone())
        .with_async_asker({
            let workspace = session.workspace.clone();
            move |call| {
                let (asker, updates, queue) = (asker.clone(), updates.clone(), queue.clone());
                let workspace = workspace.clone();
                async move { asker.ask(call, updates, queue, workspace).await }
            }
        });
    let parent = crate::config::agents::Parent {
        hooks: Some(prepared.hooks.clone()),
        model: server.model.clone(),
        model_name: server.spec.name.clone(),
        deps: deps.clone(),
        workspace: session.workspace.clone(),
        shell: shell.clone(),
        read_only: false,
        sessions: Some((
            server.store.clone(),
            server.store.info(&session.id)?.settings,
        )),
        session_id: Some(session.id.clone()),
    };
    let (task, warnings) = crate::config::agents::task_tool(&prepared.extensions.agents, &parent)?;
    for warning in warnings {
        eprintln!(
            "agentloop: warning: {}",
            crate::ui::safe_text::visible_line(&warning)
        );
    }
    let checkpoints = sink.checkpoints.clone();
    let agent = AgentLoop::with_deps(
        config(server, session, prepared.system_prompt.clone()),
        server.model.clone(),
        Arc::new(deps),
    );
    let (workspace, skills) = (&session.workspace, &prepared.extensions.skills);
    let agent =
        crate::commands::run::with_workspace_tools(agent, workspace, &shell, skills, false)?
            .with_tools([task])
            .map_err(|e| Failure::new(format!("cannot register the task tool: {e}")))?
            .with_emit(move |event: &AgentEvent| sink.on_event(event))
            .with_session_label(&session.id)
            .with_abort_signal(abort);
    let follow_ups = agent.follow_up_queue().clone();
    let mut agent = agent.with_extension(prepared.hooks.extension(follow_ups));
    if let Some(retention) = retention {
        agent = agent.with_extension(retention);
    }
    let mcp_tools = std::mem::take(&mut prepared.mcp_tools);
    let mut agent = crate::mcp::attach(agent, prepared.toolset.clone(), mcp_tools)?;
    if let Some(checkpoints) = &checkpoints {
        let classifier = prepared.toolset.approval_classifier();
        let mutating = crate::commands::checkpoints::is_mutating(classifier);
        agent = agent.with_extension(checkpoints.extension(mutating));
    }
    Ok(agent)
}

/// After the run: the MCP servers shut, the checkpoints sealed (what the commands changed
/// belongs to the last one), a store failure reported, the `notification` hook run, and the
/// stop mapped to ACP's.
async fn finish(
    prepared: &Prepared,
    sink: &Sink,
    outcome: Result<RunOutcome, agentloop::agent::AgentError>,
) -> Result<StopReason, Failure> {
    prepared.toolset.shutdown().await;
    if let Some(checkpoints) = &sink.checkpoints {
        crate::commands::checkpoints::seal(checkpoints);
    }
    if let Some(error) = sink.recorder.take_error() {
        return Err(Failure::new(format!(
            "the session store failed, so the turn was stopped: {error}"
        )));
    }
    let stop = match outcome {
        Ok(outcome) => outcome.stop,
        Err(e) => RunStop::Internal {
            message: e.to_string(),
        },
    };
    crate::config::hooks::after_run(&prepared.hooks, &stop);
    stop_reason(&stop)
}

fn config(server: &Server, session: &Session, system_prompt: String) -> AgentLoopConfig {
    let args = &server.args;
    AgentLoopConfig {
        model: Some(server.spec.name.clone()),
        system_prompt: Some(system_prompt),
        reasoning: server.choice.reasoning.map(Into::into),
        max_turns: args.max_turns.0,
        usage_limits: UsageLimits {
            max_requests: args.max_requests,
            max_input_tokens: args.max_input_tokens,
            max_output_tokens: args.max_output_tokens,
            max_total_tokens: args.max_total_tokens,
            max_cost_usd: args.max_cost,
        },
        telemetry: TelemetryConfig {
            agent_name: Some("agentloop".into()),
            conversation_id: Some(session.id.clone()),
            capture_content: args.trace_content,
        },
        compaction: crate::commands::compact::config(args),
        prompt_cache_key: Some(session.id.clone()),
        ..AgentLoopConfig::default()
    }
}

/// The ACP stop reason of a run's stop; an error for stops ACP has no reason for.
fn stop_reason(stop: &RunStop) -> Result<StopReason, Failure> {
    match stop {
        RunStop::Done => Ok(StopReason::EndTurn),
        RunStop::Aborted => Ok(StopReason::Cancelled),
        RunStop::MaxTurns { .. } => Ok(StopReason::MaxTurnRequests),
        RunStop::UsageLimit { .. } => Ok(StopReason::MaxTokens),
        other => Err(Failure::new(crate::ui::render::describe_stop(other))),
    }
}
