//! Runs parked for approval (`--approve defer`): `agentloop approvals list`, `approve`, `deny`
//! and `resume`, plus the listing of pending calls printed when a run stops for approval.
//!
//! Decisions are written to the session store, so any process (another terminal, a script, a
//! web app using the library) can make them; `resume` then runs the approved calls, answers the
//! denied ones and lets the agent continue.

use std::sync::Arc;

use agentloop::agent::{PendingApproval, PendingStatus, RunStop};
use agentloop::builtin::Workspace;
use agentloop::session::{SessionStore, load_parked};
use serde_json::json;

use crate::cli::{ApprovalsCommand, ApproveArgs, DenyArgs, ResumeArgs};
use crate::error::Failure;
use crate::model::{ModelSpec, build_model};
use crate::run::{RunReport, RunSetup, execute, exit_status};
use crate::session_settings::{Choice, recorded, restore, store_if_changed};
use crate::sessions::{open_store, resolve_id};

/// Reason given to the model when `deny` has no `--reason`.
const DEFAULT_DENY_REASON: &str = "the user denied this tool call; do not retry it";

/// Control characters would let arguments rewrite the terminal: show them escaped.
fn neutralise(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            if c.is_control() && c != '\n' {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

fn print_one(session: &str, p: &PendingApproval, json: bool) {
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
    let status = match &p.status {
        PendingStatus::Denied { reason } => format!("denied ({reason})"),
        other => other.name().to_owned(),
    };
    let args = serde_json::to_string_pretty(&p.arguments).unwrap_or_else(|_| "{}".into());
    println!(
        "{session}  {}  {}  [{}]\n  {}\n  arguments: {}",
        neutralise(&p.call_id),
        neutralise(&p.tool_name),
        status,
        neutralise(&p.reason),
        neutralise(&args).replace('\n', "\n  ")
    );
}

/// After a run: when it stopped for approval, prints the pending calls in full (human mode;
/// `--json` already carried one `approval_requested` event per call).
pub fn print_pending(report: &RunReport, session: &str, json: bool) {
    if json {
        return;
    }
    if let RunStop::AwaitingApproval { pending } = &report.stop {
        println!("awaiting approval ({} call(s)):", pending.len());
        for p in pending {
            print_one(session, p, false);
        }
        println!(
            "approve: agentloop approve {session} CALL_ID… | --all;  deny: agentloop deny \
             {session} CALL_ID --reason TEXT;  then: agentloop resume {session}"
        );
    }
}

/// `agentloop approvals list [SESSION]`.
pub fn list(db: Option<&str>, command: ApprovalsCommand) -> Result<(), Failure> {
    let store = open_store(db)?;
    let ApprovalsCommand::List { session, json } = command;
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
        for p in pending {
            any = true;
            print_one(id, p, json);
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

/// `agentloop approve SESSION [CALL_ID…|--all]`.
pub fn approve(db: Option<&str>, args: ApproveArgs) -> Result<(), Failure> {
    let store = open_store(db)?;
    let id = resolve_id(&*store, &args.session)?;
    let pending = store.parked(&id)?.map(|p| p.pending).unwrap_or_default();
    let calls: Vec<String> = if args.all {
        pending
            .iter()
            .filter(|p| p.status == PendingStatus::Awaiting)
            .map(|p| p.call_id.clone())
            .collect()
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

/// `agentloop deny SESSION CALL_ID [--reason TEXT]`.
pub fn deny(db: Option<&str>, args: DenyArgs) -> Result<(), Failure> {
    let store = open_store(db)?;
    let id = resolve_id(&*store, &args.session)?;
    let reason = args
        .reason
        .filter(|r| !r.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_DENY_REASON.to_owned());
    decide(
        &*store,
        &id,
        &args.call_id,
        &PendingStatus::Denied { reason },
    )?;
    println!("denied {}", args.call_id);
    eprintln!("continue with: agentloop resume {id}");
    Ok(())
}

/// `agentloop resume SESSION`.
pub async fn resume(db: Option<&str>, args: ResumeArgs) -> Result<(), Failure> {
    let store: Arc<dyn SessionStore> = open_store(db)?;
    let id = resolve_id(&*store, &args.session)?;
    let (context, parked) = load_parked(&*store, &id)?;
    let Some(parked) = parked else {
        return Err(Failure::new(format!(
            "session {id} is not waiting for approval (continue it with `agentloop run --session {id} PROMPT`)"
        )));
    };
    let mut session = store.info(&id)?;
    // The session's stored model, provider, base URL and reasoning, unless given here.
    let mut choice = Choice {
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        reasoning: None,
    };
    if let Some(note) = restore(&session.settings, args.explicit, &mut choice) {
        eprintln!("agentloop: note: {note}");
    }
    let spec = ModelSpec::parse(&choice.model)?;
    let model = build_model(&spec, choice.base_url.as_deref())?;
    let root = match &args.workspace {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()?,
    };
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
        extensions: Arc::new(crate::extensions::Extensions::load(
            &root,
            crate::trust::Trust::evaluate(&root, false)?.applies_to(&root),
        )?),
    })
    .await?;
    report.renderer.print_summary(Some(&id));
    print_pending(&report, &id, args.json);
    exit_status(&report)
}
