//! One `session/prompt`: the stored session's context, the agent built as `agentloop run`
//! builds it (built-in tools, skills, MCP tools, hooks, permission rules, compaction, limits),
//! its events recorded into the store and sent to the editor, its questions asked there. The
//! session is locked for the turn, as a run locks it: `run --continue` and the editor never
//! write the same session at once.

use std::sync::Arc;
use std::time::Duration;

use agent_client_protocol::StopReason;
use agentloop::agent::compaction::effective_context;
use agentloop::agent::{
    AbortSignal, AgentLoop, AgentLoopConfig, RunStop, TelemetryConfig, UsageLimits,
};
use agentloop::builtin::WorkspaceDeps;
use agentloop::session::{SessionRecorder, load_parked};
use agentloop::transcript::Message;

use super::content::Prompt;
use super::outbound::Queue;
use super::session::{Server, Session};
use super::updates::Updates;
use crate::error::Failure;

/// How long a turn waits for another process (a `run --continue`) to finish with the session.
const SESSION_LOCK_WAIT: Duration = Duration::from_secs(2);

/// Runs `prompt` in `session`; how the turn ended, or a one-line reason it could not run.
pub async fn run(
    server: &Server,
    session: &Session,
    mut prompt: Prompt,
    abort: AbortSignal,
    queue: Queue,
) -> Result<StopReason, Failure> {
    let root = session.workspace.root().to_path_buf();
    let _lock = server.store.lock_session(&session.id, SESSION_LOCK_WAIT)?;
    let (stored, _parked) = load_parked(&*server.store, &session.id)?;
    let context = effective_context(&stored);
    let mut allowed = Vec::new();
    if let Some(command) =
        crate::config::custom_commands::expand_prompt(&root, session.trusted, &prompt.text)?
    {
        prompt.text = command.prompt;
        allowed = command.allowed_tools;
    }
    let extensions = match allowed.is_empty() {
        true => session.extensions.clone(),
        false => {
            let mut narrowed = crate::config::extensions::Extensions::load(&root, session.trusted)?;
            narrowed.allow_for_prompt(&allowed)?;
            Arc::new(narrowed)
        }
    };

    let (toolset, mcp_tools) = crate::mcp::connect(session.mcp.clone()).await?;
    let toolset = Arc::new(toolset);
    prompt.text = crate::mcp::expand_prompt(&toolset, prompt.text).await?;
    let hooks = crate::config::hooks::for_run(&extensions.hooks, &session.id, &root, false);
    let system_prompt = session
        .system_prompt
        .clone()
        .unwrap_or_else(|| crate::commands::run::default_system_prompt(&root));
    let mut system_prompt =
        crate::commands::run::with_skills_section(system_prompt, &extensions.skills);
    if let Err(refused) = crate::config::hooks::before_run(
        &hooks,
        !context.is_empty(),
        &mut system_prompt,
        &mut prompt.text,
    ) {
        toolset.shutdown().await;
        return Err(refused);
    }

    let updates = Updates::new(&session.id, &root, queue.clone());
    let asker = session.asker.clone();
    let deps = WorkspaceDeps::new(session.workspace.clone(), session.mode.policy())
        .with_tool_classifier(toolset.approval_classifier())
        .with_permissions(extensions.permissions.clone())
        .with_async_asker({
            let updates = updates.clone();
            move |call| {
                let (asker, updates, queue) = (asker.clone(), updates.clone(), queue.clone());
                async move { asker.ask(call, updates, queue).await }
            }
        });
    let recorder = SessionRecorder::new(server.store.clone(), &session.id);
    let emit = {
        let recorder = recorder.clone();
        let abort = abort.clone();
        move |event: &agentloop::agent::AgentEvent| {
            // Record first: the transcript is durable before the editor shows it.
            recorder.on_event(event);
            if recorder.failures() > 0 {
                abort.abort();
            }
            updates.on_event(event);
        }
    };
    let agent = AgentLoop::with_deps(
        config(server, session, system_prompt),
        server.model.clone(),
        Arc::new(deps),
    );
    let shell = crate::commands::run::shell_options(&server.args);
    let (workspace, skills) = (&session.workspace, &extensions.skills);
    let agent =
        crate::commands::run::with_workspace_tools(agent, workspace, &shell, skills, false)?
            .with_emit(emit)
            .with_session_label(&session.id)
            .with_abort_signal(abort);
    let follow_ups = agent.follow_up_queue().clone();
    let agent = agent.with_extension(hooks.extension(follow_ups));
    let agent = crate::mcp::attach(agent, toolset.clone(), mcp_tools)?;

    let outcome = agent
        .run(vec![Message::user_parts(prompt.parts())], context)
        .await;
    toolset.shutdown().await;
    if let Some(error) = recorder.take_error() {
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
    crate::config::hooks::after_run(&hooks, &stop);
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
