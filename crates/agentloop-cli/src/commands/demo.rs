//! `agentloop demo`: the real agent loop, over real HTTP, with the real built-in tools — against
//! the testkit's mock model server replaying a fixed script, so it needs no key and no network.
//!
//! The script (`demo/script.json`, embedded) lists the directory, reads the README and the
//! source, greps, fixes an off-by-one with `edit_file`, re-reads the fixed lines and answers.
//! The tools run for real on a temporary copy of a small sample project (`demo/sample/`,
//! embedded), with `--approve allow` semantics since nothing outside the copy is touched. The
//! session is recorded into a temporary database that is deleted afterwards, unless
//! `--keep-session` records it into the normal one (title "demo").

use std::path::Path;
use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, Workspace};
use agentloop::providers::{OpenAiChat, ProviderConfig};
use agentloop::session::{NewSession, SessionInfo, SessionStore, SqliteStore};
use agentloop::transcript::{Message, Role};
use agentloop_testkit::{MockServer, Script};

use crate::cli::DemoArgs;
use crate::commands::run::{RunSetup, execute, exit_status};
use crate::commands::sessions::open_store;
use crate::error::Failure;
use crate::scripting::result_line;
use crate::ui::render::{Style, out, stdout_color, thousands};

/// The label printed before and after the demo.
pub const LABEL: &str =
    "scripted demo: the model is a mock server replaying a fixed script; the tools are real";

/// The prompt the scripted model "answers".
pub const PROMPT: &str = "`average` gives the wrong answer. Find the bug and fix it.";

const SCRIPT: &str = include_str!("../../demo/script.json");

/// The sample project: (path in the workspace, content).
pub const SAMPLE: &[(&str, &str)] = &[
    ("README.md", include_str!("../../demo/sample/README.md")),
    (
        "Cargo.toml",
        include_str!("../../demo/sample/Cargo.toml.in"),
    ),
    ("src/lib.rs", include_str!("../../demo/sample/src/lib.rs")),
];

fn write_sample(root: &Path) -> Result<(), Failure> {
    for (path, content) in SAMPLE {
        let target = root.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, content)?;
    }
    Ok(())
}

/// `agentloop demo`.
pub async fn run(db: Option<&str>, args: DemoArgs) -> Result<(), Failure> {
    let style = Style::new(!args.json && stdout_color());
    // In JSON mode stdout carries only events; the labels go to stderr.
    let say = |text: &str| {
        if args.json {
            eprint!("{text}");
        } else {
            out(text);
        }
    };

    let server = start_server()?;
    // The copy lives until the summary has read what the run changed.
    let (_dir, workspace) = sample_workspace()?;
    let db_dir = tempfile::tempdir()
        .map_err(|e| Failure::new(format!("cannot create a temporary directory: {e}")))?;
    let store: Arc<dyn SessionStore> = if args.keep_session {
        open_store(db)?
    } else {
        Arc::new(SqliteStore::open(db_dir.path().join("sessions.db"))?)
    };
    let session = store.create(NewSession::new().title("demo").model("mock"))?;
    let session_id = session.id.clone();

    say(&banner(style, &server, &workspace));
    let model = OpenAiChat::new(ProviderConfig::new(server.openai_base_url()).model("mock"));
    let setup = demo_setup(model, &workspace, store.clone(), session, args.json);
    let report = execute(setup).await?;

    let violations = server.violations();
    server.shutdown();

    let messages = store.load_raw(&session_id).unwrap_or_default();
    let summary = summary(
        &report,
        &messages,
        &workspace,
        &session_id,
        &violations,
        &args,
        style,
    );
    say(&summary);
    if args.json {
        // As `run --json`: the last line sums the run up.
        out(&format!("{}\n", result_line(&report, &session_id)));
    }

    exit_status(&report)?;
    if !violations.is_empty() {
        return Err(Failure::new(
            "the agent sent the mock server an invalid request",
        ));
    }
    Ok(())
}

/// The mock model server replaying the built-in script.
fn start_server() -> Result<MockServer, Failure> {
    let script = Script::from_json(SCRIPT)
        .map_err(|e| Failure::new(format!("the built-in demo script is invalid: {e}")))?;
    MockServer::builder(script)
        .worker_threads(1)
        .start()
        .map_err(|e| Failure::new(format!("cannot start the mock model server: {e}")))
}

/// A temporary copy of the sample project (deleted when the directory is dropped) and the
/// workspace over it.
fn sample_workspace() -> Result<(tempfile::TempDir, Workspace), Failure> {
    let dir = tempfile::Builder::new()
        .prefix("agentloop-demo-")
        .tempdir()
        .map_err(|e| Failure::new(format!("cannot create a temporary directory: {e}")))?;
    write_sample(dir.path())?;
    let workspace = Workspace::new(dir.path()).map_err(|e| Failure::new(e.to_string()))?;
    Ok((dir, workspace))
}

/// What the demo says it runs against, before it starts.
fn banner(style: Style, server: &MockServer, workspace: &Workspace) -> String {
    format!(
        "{}\n{}\n{}\n\n{}\n",
        style.yellow(&style.bold(&format!("agentloop demo — {LABEL}"))),
        style.dim(&format!(
            "model:     mock, served at {} (OpenAI Chat Completions wire, real HTTP + SSE)",
            server.openai_base_url()
        )),
        style.dim(&format!(
            "workspace: {} (a temporary copy of a small sample project)",
            workspace.root().display()
        )),
        style.bold(&format!("> {PROMPT}")),
    )
}

/// The demo's run: the scripted prompt, every tool allowed (only the copy is touched), at
/// most 10 turns.
fn demo_setup(
    model: OpenAiChat,
    workspace: &Workspace,
    store: Arc<dyn SessionStore>,
    session: SessionInfo,
    json: bool,
) -> RunSetup {
    RunSetup {
        model: Arc::new(model),
        model_name: "mock".into(),
        workspace: workspace.clone(),
        policy: ApprovalPolicy::Always,
        system_prompt: None,
        reasoning: None,
        max_turns: Some(10),
        limits: Default::default(),
        trace_content: false,
        json,
        store,
        session,
        context: Vec::new(),
        prompt: PROMPT.into(),
        images: Vec::new(),
        steering: None,
        interactive: None,
        shell: Default::default(),
        output: None,
        resume: None,
        mcp: Vec::new(),
        compaction: None,
        extensions: Default::default(),
        plan_mode: false,
        // A temporary sample project: nothing to rewind.
        checkpoints: false,
    }
}

/// `tools used: list_dir, read_file ×3, grep, edit_file`
fn tools_used(messages: &[Message]) -> String {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for call in messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .flat_map(Message::tool_calls)
    {
        match counts.iter_mut().find(|(name, _)| *name == call.tool_name) {
            Some((_, n)) => *n += 1,
            None => counts.push((call.tool_name.clone(), 1)),
        }
    }
    let listed: Vec<String> = counts
        .iter()
        .map(|(name, n)| {
            if *n == 1 {
                name.clone()
            } else {
                format!("{name} ×{n}")
            }
        })
        .collect();
    format!("tools used: {}\n", listed.join(", "))
}

/// The sample files the run changed, with their changed lines.
fn changes(root: &Path, style: Style) -> String {
    let mut text = String::new();
    for (path, original) in SAMPLE {
        let now = std::fs::read_to_string(root.join(path)).unwrap_or_default();
        if now == *original {
            continue;
        }
        text.push_str(&format!("changed: {path}\n"));
        for (sign, line) in line_diff(original, &now) {
            let line = format!("  {sign} {line}");
            text.push_str(&if sign == '-' {
                style.red(&line)
            } else {
                style.green(&line)
            });
            text.push('\n');
        }
    }
    if text.is_empty() {
        text.push_str("changed: nothing\n");
    }
    text
}

/// The removed (`-`) and added (`+`) lines between two small texts (longest common
/// subsequence; quadratic, fine for the sample files).
fn line_diff<'a>(old: &'a str, new: &'a str) -> Vec<(char, &'a str)> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            out.push(('-', a[i]));
            i += 1;
        } else {
            out.push(('+', b[j]));
            j += 1;
        }
    }
    out
}

/// The transcript summary printed after the demo run: tools used, changed files, counts, where
/// the session is, and any invalid request the mock server saw.
fn summary(
    report: &crate::commands::run::RunReport,
    messages: &[Message],
    workspace: &Workspace,
    session_id: &str,
    violations: &[String],
    args: &DemoArgs,
    style: Style,
) -> String {
    let mut summary = format!("\n{}\n", style.bold("── transcript summary ──"));
    summary.push_str(&tools_used(messages));
    summary.push_str(&changes(workspace.root(), style));
    let totals = &report.totals;
    summary.push_str(&format!(
        "model calls: {} · tool calls: {} · {} messages recorded · tokens {} in / {} out (scripted)\n",
        totals.turns,
        totals.tool_calls,
        messages.len(),
        thousands(totals.usage.input_tokens),
        thousands(totals.usage.output_tokens),
    ));
    if args.keep_session {
        summary.push_str(&format!(
            "session: {session_id} (title \"demo\"; see `agentloop sessions show {session_id}`)\n"
        ));
    } else {
        summary.push_str(
            "session: recorded in a temporary database, deleted now (use --keep-session to keep it)\n",
        );
    }
    if !violations.is_empty() {
        summary.push_str(&style.red(&format!(
            "the mock server saw {} invalid request(s): {}\n",
            violations.len(),
            violations.join("; ")
        )));
    }
    summary.push_str(&style.dim(&format!("({LABEL})\n")));
    summary
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_script_parses_and_its_edit_applies_to_the_sample() {
        let script = Script::from_json(SCRIPT).unwrap();
        let edit = script
            .turns
            .iter()
            .flat_map(|t| &t.tool_calls)
            .find(|c| c.name == "edit_file")
            .unwrap();
        let args: serde_json::Value =
            serde_json::from_str(&edit.arguments.to_wire_string()).unwrap();
        let lib = SAMPLE.iter().find(|(p, _)| *p == "src/lib.rs").unwrap().1;
        let old = args["old_text"].as_str().unwrap();
        assert_eq!(
            lib.matches(old).count(),
            1,
            "old_text must occur exactly once"
        );
    }

    #[test]
    fn diffs_list_changed_lines() {
        let d = line_diff("a\nb\nc\n", "a\nB\nc\nd\n");
        assert_eq!(d, vec![('-', "b"), ('+', "B"), ('+', "d")]);
        assert!(line_diff("x\n", "x\n").is_empty());
    }
}
