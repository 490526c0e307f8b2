//! Runs parked for approval (`--approve defer`): `agentloop approvals` (bare or `list`: every
//! pending call, commands whole and file edits as diffs, each with its state), `approve`,
//! `deny` (also as `approvals approve|deny`; `--all`) and `resume`, plus the listing of pending
//! calls printed when a run stops for approval.
//!
//! Decisions are written to the session store, so any process (another terminal, a script, a
//! web app using the library) can make them; `resume` then runs the approved calls, answers the
//! denied ones and lets the agent continue.

use std::sync::Arc;

use agentloop::agent::{PendingApproval, PendingStatus, RunStop};
use agentloop::builtin::Workspace;
use agentloop::session::{SessionStore, load_parked};
use serde_json::json;

use crate::cli::{ApprovalsArgs, ApprovalsCommand, ApproveArgs, DenyArgs, ResumeArgs};
use crate::commands::run::{RunReport, RunSetup, execute, exit_status};
use crate::commands::sessions::{open_store, resolve_id};
use crate::config::session::{Choice, recorded, restore, store_if_changed};
use crate::error::Failure;
use crate::provider::{ModelSpec, build_model};
use crate::ui::prompt::{describe_call, width};
use crate::ui::safe_text::visible_line;

/// Reason given to the model when `deny` has no `--reason`.
const DEFAULT_DENY_REASON: &str = "the user denied this tool call; do not retry it";

/// One pending call as a person reads it: its state on the first line (the policy's reason
/// only while it still awaits a decision), then the call as the approval prompt shows it — a
/// command whole, a file edit as a diff of the file in `workspace`, any other argument in full,
/// every character made visible.
fn print_one(session: &str, p: &PendingApproval, json: bool, workspace: Option<&Workspace>) {
    if json {
        println!(
            "{}",
            json!({
                "session_id": session,
                "call_id": p.call_id,
                "tool_name": p.tool_name,
                "arguments": p.arguments,
                "reason": p.reason,
                "status": p.status,
            })
        );
        return;
    }
    let state = match &p.status {
        PendingStatus::Awaiting => format!("awaiting approval: {}", visible_line(&p.reason)),
        PendingStatus::Approved => "approved; runs at `agentloop resume`".to_owned(),
        PendingStatus::Denied { reason } => format!("denied ({})", visible_line(reason)),
        PendingStatus::Started => "started (it was running when the run stopped)".to_owned(),
        other => other.name().to_owned(),
    };
    let view = describe_call(&p.call(), workspace, width());
    println!(
        "{session}  {}  {}  [{}]\n  {}",
        visible_line(&p.call_id),
        visible_line(&p.tool_name),
        p.status.name(),
        state
    );
    print!("  {}", view.body);
}

/// After a run: when it stopped for approval, prints the pending calls in full (human mode;
/// `--json` already carried one `approval_requested` event per call).
/// Edits are shown as diffs of the files under `root` (the run's workspace).
pub fn print_pending(report: &RunReport, session: &str, json: bool, root: &std::path::Path) {
    if json {
        return;
    }
    let workspace = Workspace::new(root).ok();
    if let RunStop::AwaitingApproval { pending } = &report.stop {
        let awaiting = pending
            .iter()
            .filter(|p| p.status == PendingStatus::Awaiting)
            .count();
        println!("awaiting approval ({awaiting} call(s)):");
        for p in pending {
            print_one(session, p, false, workspace.as_ref());
        }
        println!(
            "approve: agentloop approve {session} CALL_ID… | --all;  deny: agentloop deny \
             {session} CALL_ID… [--reason TEXT] | --all;  then: agentloop resume {session}"
        );
    }
}

/// The workspace a session was recorded in, to show its pending edits as diffs of the files
/// there (`None` when unknown or gone: the edit is then shown against nothing).
fn session_workspace(store: &dyn SessionStore, id: &str) -> Option<Workspace> {
    let info = store.info(id).ok()?;
    Workspace::new(info.settings.workspace?).ok()
}

/// `agentloop approvals [list|approve|deny]`: bare, it lists every session's pending calls.
pub fn command(db: Option<&str>, args: ApprovalsArgs) -> Result<(), Failure> {
    match args.command {
        None => list(db, None, false),
        Some(ApprovalsCommand::List { session, json }) => list(db, session, json),
        Some(ApprovalsCommand::Approve(args)) => approve(db, args),
        Some(ApprovalsCommand::Deny(args)) => deny(db, args),
    }
}

/// `agentloop approvals list [SESSION]`.
fn list(db: Option<&str>, session: Option<String>, json: bool) -> Result<(), Failure> {
    let store = open_store(db)?;
    let sessions = match session {
        Some(given) => {
            let id = resolve_id(&*store, &given)?;
            let pending = store.parked(&id)?.map(|p| p.pending).unwrap_or_default();
            vec![(id, pending)]
        }
        None => store.awaiting_approval()?,
    };
    let mut any = false;
    for (id, pending) in &sessions {
        let workspace = if json {
            None
        } else {
            session_workspace(&*store, id)
        };
        for p in pending {
            any = true;
            print_one(id, p, json, workspace.as_ref());
        }
    }
    if !any && !json {
        println!("no tool calls await approval");
    }
    Ok(())
}

fn decide(
    store: &dyn SessionStore,
    session: &str,
    call_id: &str,
    status: &PendingStatus,
) -> Result<(), Failure> {
    store
        .decide(session, call_id, status)
        .map_err(|e| Failure::new(format!("cannot decide call {call_id:?}: {e}")))
}

/// The calls of session `id` still awaiting a decision.
fn awaiting_calls(store: &dyn SessionStore, id: &str) -> Result<Vec<String>, Failure> {
    let pending = store.parked(id)?.map(|p| p.pending).unwrap_or_default();
    Ok(pending
        .iter()
        .filter(|p| p.status == PendingStatus::Awaiting)
        .map(|p| p.call_id.clone())
        .collect())
}

/// `agentloop approve SESSION [CALL_ID…|--all]`.
pub fn approve(db: Option<&str>, args: ApproveArgs) -> Result<(), Failure> {
    let store = open_store(db)?;
    let id = resolve_id(&*store, &args.session)?;
    let calls: Vec<String> = if args.all {
        awaiting_calls(&*store, &id)?
    } else {
        args.call_ids
    };
    if calls.is_empty() {
        return Err(Failure::new(format!(
            "session {id} has no tool call awaiting approval"
        )));
    }
    for call in &calls {
        decide(&*store, &id, call, &PendingStatus::Approved)?;
        println!("approved {call}");
    }
    eprintln!("continue with: agentloop resume {id}");
    Ok(())
}

/// `agentloop deny [SESSION] [CALL_ID…|--all] [--reason TEXT]`: with `--all` and no session,
/// every session's awaiting calls.
pub fn deny(db: Option<&str>, args: DenyArgs) -> Result<(), Failure> {
    let store = open_store(db)?;
    let reason = args
        .reason
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DENY_REASON.to_owned());
    let targets: Vec<(String, Vec<String>)> = match (&args.session, args.all) {
        (Some(given), true) => {
            let id = resolve_id(&*store, given)?;
            let calls = awaiting_calls(&*store, &id)?;
            vec![(id, calls)]
        }
        (Some(given), false) => vec![(resolve_id(&*store, given)?, args.call_ids.clone())],
        (None, _) => store
            .awaiting_approval()?
            .into_iter()
            .map(|(id, pending)| {
                let calls = pending
                    .into_iter()
                    .filter(|p| p.status == PendingStatus::Awaiting)
                    .map(|p| p.call_id)
                    .collect();
                (id, calls)
            })
            .collect(),
    };
    if targets.iter().all(|(_, calls)| calls.is_empty()) {
        return Err(Failure::new(match &args.session {
            Some(given) => format!("session {given} has no tool call awaiting approval"),
            None => "no tool call awaits approval".to_owned(),
        }));
    }
    let status = PendingStatus::Denied { reason };
    for (id, calls) in targets.iter().filter(|(_, calls)| !calls.is_empty()) {
        for call in calls {
            decide(&*store, id, call, &status)?;
            println!("denied {call}");
        }
        eprintln!("continue with: agentloop resume {id}");
    }
    Ok(())
}

/// `agentloop resume SESSION`.
pub async fn resume(db: Option<&str>, args: ResumeArgs) -> Result<(), Failure> {
    let store: Arc<dyn SessionStore> = open_store(db)?;
    let id = resolve_id(&*store, args.session.as_deref().unwrap_or_default())?;
    let (context, parked) = load_parked(&*store, &id)?;
    let Some(parked) = parked else {
        return Err(Failure::new(format!(
            "session {id} is not waiting for approval (continue it with `agentloop run --session {id} PROMPT`)"
        )));
    };
    let mut session = store.info(&id)?;
    // The session's stored model, provider, base URL and reasoning, unless given here.
    let mut choice = Choice {
        model: args.target.model.clone(),
        base_url: args.base_url.clone(),
        reasoning: None,
    };
    if let Some(note) = restore(&session.settings, args.explicit, &mut choice) {
        eprintln!("agentloop: note: {note}");
    }
    let spec = ModelSpec::parse(&choice.model)?;
    let model = build_model(&spec, choice.base_url.as_deref())?;
    let root = args.target.root()?;
    let workspace = Workspace::new(&root).map_err(|e| Failure::usage(e.to_string()))?;
    let settings = recorded(
        &spec,
        choice.base_url.as_deref(),
        choice.reasoning,
        workspace.root(),
    );
    store_if_changed(&*store, &mut session, settings)?;
    let report = execute(RunSetup {
        model,
        model_name: spec.name.clone(),
        workspace,
        policy: args.approve.into(),
        system_prompt: None,
        reasoning: choice.reasoning.map(Into::into),
        max_turns: args.max_turns,
        limits: Default::default(),
        trace_content: false,
        json: args.json,
        store,
        session,
        context,
        prompt: String::new(),
        images: Vec::new(),
        steering: None,
        interactive: None,
        shell: Default::default(),
        output: None,
        resume: Some(parked),
        mcp: Vec::new(),
        compaction: None,
        extensions: Arc::new(crate::config::extensions::Extensions::load(
            &root,
            crate::config::trust::Trust::evaluate(&root, false)?.applies_to(&root),
        )?),
        plan_mode: false,
        checkpoints: true,
    })
    .await?;
    report.renderer.print_summary(Some(&id));
    print_pending(&report, &id, args.json, &root);
    exit_status(&report)
}
