//! Context compaction in the CLI: `agentloop compact SESSION` summarises a
//! stored session's older turns by hand, and [`config`] turns the `run` flags into the loop's
//! automatic compaction settings.
//!
//! Nothing is deleted: the summary is appended to the session as a compaction entry, after the
//! full history, and resuming the session sends the model the compacted context
//! (`agentloop::agent::compaction::effective_context`).

use agentloop::agent::AgentEvent;
use std::sync::Arc;

use agentloop::agent::command_hooks::CompactionTrigger;
use agentloop::agent::compaction::{self, CompactionConfig, Compactor, ModelCompactor};
use agentloop::model::Model;
use agentloop::session::SessionStore;

use crate::cli::{CompactArgs, Explicit, RunArgs};
use crate::commands::sessions::{open_store, resolve_id};
use crate::config::session::{Choice, restore};
use crate::error::Failure;
use crate::provider::{ModelSpec, build_model};
use crate::ui::render::thousands;

/// The summarising model when neither `--model` nor the session names one.
const DEFAULT_MODEL: &str = "openai:gpt-4o-mini";

/// The loop's compaction settings for `run` (`None` with `--no-compaction`).
pub fn config(args: &RunArgs) -> Option<CompactionConfig> {
    if args.no_compaction {
        return None;
    }
    Some(CompactionConfig {
        context_window: args.context_window,
        threshold: args.compact_at,
        keep_recent_turns: args.keep_turns,
        compactor: None,
    })
}

/// A one-line note for a compaction event (`None` for other events).
pub fn note(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::Compaction {
            summarized,
            tokens_before,
            tokens_after,
            trigger,
            ..
        } => Some(format!(
            "context compacted ({trigger}): {summarized} older messages summarised, ~{} → ~{} tokens",
            thousands(*tokens_before),
            thousands(*tokens_after)
        )),
        _ => None,
    }
}

/// `agentloop compact SESSION` (the `pre_compact` hooks that apply in the current directory
/// run first).
pub async fn run(db: Option<&str>, args: CompactArgs) -> Result<(), Failure> {
    let store = open_store(db)?;
    let id = resolve_id(&*store, &args.session)?;
    // The session's own model summarises it unless another one is named, as a resumed run
    // would use it (same rules: an explicit flag wins; the base URL follows the provider).
    let explicit = Explicit {
        model: args.model.is_some(),
        base_url: args.base_url.is_some(),
        reasoning: true,
    };
    let mut choice = Choice {
        model: args.model.unwrap_or_else(|| DEFAULT_MODEL.to_owned()),
        base_url: args.base_url,
        reasoning: None,
    };
    if let Some(note) = restore(&store.info(&id)?.settings, explicit, &mut choice) {
        eprintln!("agentloop: note: {note}");
    }
    let spec = ModelSpec::parse(&choice.model)?;
    let model = build_model(&spec, choice.base_url.as_deref())?;
    let compactor = manual_compactor(&id)?;
    match compact_session(
        &*store,
        &id,
        model.as_ref(),
        &spec.name,
        args.keep_turns,
        compactor.as_ref(),
    )
    .await?
    {
        Some(line) => println!("{line}"),
        None => eprintln!("agentloop: nothing to compact in session {id} (it is already short)"),
    }
    Ok(())
}

/// The summariser of a compaction a person asked for: the session's model, after the
/// `pre_compact` hooks of the user's config and, when this directory is a trusted workspace,
/// of its project config (told `trigger: "manual"`).
pub fn manual_compactor(session_id: &str) -> Result<Arc<dyn Compactor>, Failure> {
    let cwd = std::env::current_dir()
        .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))?;
    let trusted = crate::config::trust::Trust::evaluate(&cwd, false)?.is_trusted();
    let hooks = crate::config::hooks::load(&cwd, trusted)?;
    let hooks = crate::config::hooks::for_run(&hooks, session_id, &cwd, false);
    Ok(hooks.compactor(Arc::new(ModelCompactor), CompactionTrigger::Manual))
}

/// Summarises session `id`'s older turns with `model`, keeping the last `keep_turns` verbatim,
/// and appends the compaction entry (the full history stays stored). Returns the line that
/// says what it did, or `None` when the session is too short to compact.
pub async fn compact_session(
    store: &dyn SessionStore,
    id: &str,
    model: &dyn Model,
    model_name: &str,
    keep_turns: usize,
    compactor: &dyn Compactor,
) -> Result<Option<String>, Failure> {
    let context = compaction::effective_context(&store.load(id)?);
    let compacted = compaction::compact(&context, keep_turns, compactor, model, Some(model_name))
        .await
        .map_err(|e| Failure::new(format!("the summary call failed: {e}")))?;
    let Some(compacted) = compacted else {
        return Ok(None);
    };
    store.append(id, &compacted.entry)?;
    let cost = compacted
        .usage
        .and_then(|u| u.cost_usd)
        .map(|c| format!(" · ${c:.4}"))
        .unwrap_or_default();
    Ok(Some(format!(
        "session {id}: {} older messages summarised, {} kept; context ~{} → ~{} tokens{cost}",
        compacted.summarized,
        compacted.context.len() - 1,
        thousands(compacted.tokens_before),
        thousands(compacted.tokens_after)
    )))
}
