//! Sub-agent definitions and the `task` tool that delegates to them.
//!
//! An agent is a Markdown file with YAML front matter (`name`, `description`, `tools`, `model`,
//! `max_turns`, `sandbox`, `isolation`) whose body is the agent's instructions, loaded from
//! `~/.config/agentloop/agents/*.md` always and, in a trusted workspace only, from
//! `.agentloop/agents/*.md` and `.claude/agents/*.md` (a workspace agent wins over a user agent
//! of the same name, like skills). A built-in `explore` agent (read-only tools) exists without
//! any file. The parent model sees one tool, `task` (`{"agent": NAME, "prompt": TEXT}`), whose
//! description lists the agents; a call runs the named agent as a child loop (the library's
//! [`SubAgent`]) with the parent's model, approval policy and sandbox, which a file may only
//! narrow. See `docs/EXTENDING.md`.
//!
//! Each child run is a session of its own in the parent's store, linked to the parent session
//! and the `task` call ([`SubAgent::record_in`]). When the process dies in the middle of a
//! child, resuming the parent ([`park_interrupted_children`]) runs that `task` call again,
//! and the call continues the child's session where it stopped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentloop::agent::command_hooks::{CommandHooks, MAX_STOP_CONTINUATIONS};
use agentloop::agent::{AgentLoop, AgentLoopConfig, PendingApproval, PendingStatus, SubAgent};
use agentloop::builtin::{self, SandboxMode, ShellOptions, Workspace, WorkspaceDeps};
use agentloop::model::Model;
use agentloop::session::{SessionError, SessionSettings, SessionStore};
use agentloop::tooling::{ToolContext, ToolError, ToolSpec};
use agentloop::transcript::{Role, StopReason, ToolArguments};
use serde::Deserialize;
use serde_json::json;

use crate::config::files::{extension_dirs, load_markdown_defs};
use crate::error::Failure;

/// The name of the one tool the parent model delegates through.
pub const TASK_TOOL: &str = "task";

/// The tools an agent gets when its file names none: those that only read the workspace.
const READ_ONLY_TOOLS: &[&str] = &["read_file", "list_dir", "find_files", "grep"];

/// Default turn ceiling of a child run when its file names none.
const DEFAULT_CHILD_MAX_TURNS: u32 = 30;

/// One agent definition.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentDef {
    /// `name` (default: the file's stem).
    pub name: String,
    /// `description`: when the parent should use it.
    pub description: String,
    /// `tools`: the tool names it asks for, ours or Claude Code's (`Read`, `Bash`…; see
    /// [`builtin::builtin_tool_name`]); `None`: the parent's read-only tools.
    pub tools: Option<Vec<String>>,
    /// `model`: a model id on the parent's provider (`None`: the parent's model).
    pub model: Option<String>,
    /// `max_turns`: the child's own turn ceiling.
    pub max_turns: Option<u32>,
    /// `sandbox`: the child's shell sandbox (only narrower than the parent's takes effect).
    pub sandbox: Option<SandboxMode>,
    /// `isolation`: `worktree` runs each call in an isolated workspace of its own (see
    /// [`crate::commands::worktrees`]); `none` (the default) shares the parent's.
    pub isolated: bool,
    /// The body: the child's instructions.
    pub instructions: String,
    /// The file it came from (`None`: built in).
    pub path: Option<PathBuf>,
}

/// The built-in `explore` agent.
fn explore() -> AgentDef {
    AgentDef {
        name: "explore".into(),
        description: "Explores the workspace read-only (finds files, reads code, searches) and \
                      reports what it found."
            .into(),
        tools: None,
        model: None,
        max_turns: None,
        sandbox: Some(SandboxMode::ReadOnly),
        isolated: false,
        instructions: "You explore a code workspace to answer one question. Use the read-only \
                       tools to find and read what matters; change nothing. Finish with a short, \
                       factual report: what you found and where (paths and line numbers)."
            .into(),
        path: None,
    }
}

/// The agent directories for `workspace`, most specific first.
pub fn roots(workspace: &Path, trusted: bool) -> Vec<PathBuf> {
    extension_dirs(workspace, trusted, "agents")
}

/// The agents for `workspace` (the built-in one included, last), and one line per file that
/// could not be used.
pub fn load(workspace: &Path, trusted: bool) -> (Vec<AgentDef>, Vec<String>) {
    let (mut agents, problems) = load_markdown_defs(
        roots(workspace, trusted),
        |file| read(file).map_err(|e| format!("{}: {e}", file.display())),
        |def| &def.name,
    );
    if !agents.iter().any(|a| a.name == "explore") {
        agents.push(explore());
    }
    (agents, problems)
}

/// The largest agent file read (bytes), as for a command file: a file in a cloned repository is
/// no reason to hold gigabytes in memory.
const MAX_AGENT_FILE_BYTES: u64 = 256 * 1024;

fn read(path: &Path) -> Result<AgentDef, String> {
    use std::io::Read;
    // Only a regular file: opening a FIFO would wait for a writer.
    if !std::fs::metadata(path)
        .map_err(|e| e.to_string())?
        .is_file()
    {
        return Err("not a regular file".into());
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|file| file.take(MAX_AGENT_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > MAX_AGENT_FILE_BYTES {
        return Err(format!(
            "larger than {} KiB: not read",
            MAX_AGENT_FILE_BYTES / 1024
        ));
    }
    let text = String::from_utf8(bytes).map_err(|e| e.to_string())?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse(&text, &stem).map(|mut def| {
        def.path = Some(path.to_owned());
        def
    })
}

/// The front matter of an agent file as written. Scalars are read as text (`max_turns: 5` and
/// `max_turns: "5"` alike) and checked by [`parse`]; keys not named here (Claude Code's `color`,
/// a `metadata:` map…) are ignored.
#[derive(Deserialize)]
struct AgentKeys {
    name: Option<String>,
    description: Option<String>,
    /// Absent: the read-only tools; present, even empty: exactly these.
    #[serde(default, deserialize_with = "present_name_list")]
    tools: Option<Vec<String>>,
    model: Option<String>,
    #[serde(alias = "max-turns")]
    max_turns: Option<String>,
    sandbox: Option<String>,
    isolation: Option<String>,
}

/// [`builtin::deserialize_name_list`] for a key that is there (serde's `default` covers its
/// absence), so `tools:` with no value is no tools rather than the default set.
fn present_name_list<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<String>>, D::Error> {
    builtin::deserialize_name_list(deserializer).map(Some)
}

/// Parses an agent file; `stem` names it when the front matter does not.
pub fn parse(text: &str, stem: &str) -> Result<AgentDef, String> {
    let (front, body) = builtin::split_front_matter(text);
    let front = front.ok_or("no front matter (a `---` block with name and description)")?;
    let keys: AgentKeys = builtin::parse_front_matter_as(front)?;
    let name = keys.name.unwrap_or_else(|| stem.to_owned());
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "invalid name {name:?} (letters, digits, - and _ only)"
        ));
    }
    // A block scalar (`description: |`) ends with a line break that is no part of the text.
    let description = keys
        .description
        .map(|d| d.trim_end().to_owned())
        .ok_or("missing description")?;
    let max_turns = match keys.max_turns {
        Some(v) => Some(
            v.trim()
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("max_turns: expected a positive number, got {v:?}"))?,
        ),
        None => None,
    };
    let sandbox = match keys.sandbox {
        Some(v) => Some(v.parse::<SandboxMode>().map_err(|e| e.to_string())?),
        None => None,
    };
    let isolated = match keys.isolation.as_deref() {
        None | Some("none" | "") => false,
        Some("worktree") => true,
        Some(other) => {
            return Err(format!(
                "isolation {other:?} is not supported (use worktree or none)"
            ));
        }
    };
    Ok(AgentDef {
        name,
        description,
        tools: keys.tools,
        model: keys.model.filter(|m| !m.is_empty() && m != "inherit"),
        max_turns,
        sandbox,
        isolated,
        instructions: body.trim().to_owned(),
        path: None,
    })
}

/// What a child inherits from the parent run.
#[derive(Clone)]
pub struct Parent {
    /// The parent's model adapter.
    pub model: Arc<dyn Model>,
    /// The parent's model id.
    pub model_name: String,
    /// The parent's deps (approval policy, asker, permissions).
    pub deps: WorkspaceDeps,
    /// The workspace.
    pub workspace: Workspace,
    /// The parent's shell options (sandbox).
    pub shell: ShellOptions,
    /// The parent may not change anything (plan mode): nor may its children, whatever their
    /// files say.
    pub read_only: bool,
    /// The run's command hooks (`subagent_stop` runs on each child's answer).
    pub hooks: Option<CommandHooks>,
    /// Where the children's runs are recorded (the parent's store) and the settings their
    /// sessions start from (the parent's); `None`: not recorded.
    pub sessions: Option<(Arc<dyn SessionStore>, SessionSettings)>,
    /// The parent's session id (an isolated call run again finds its child's worktree).
    pub session_id: Option<String>,
}

/// How strict a sandbox mode is (higher: stricter).
fn strictness(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::ReadOnly => 2,
        SandboxMode::WorkspaceWrite => 1,
        _ => 0,
    }
}

/// The child loop for `def`, and one warning per tool name it asked for that does not exist.
fn child(
    def: &AgentDef,
    parent: &Parent,
) -> Result<(AgentLoop<WorkspaceDeps>, Vec<String>), Failure> {
    child_in(def, parent, &parent.workspace, parent.shell.clone(), true)
}

/// The built-in tools an agent file's `tools` name (ours, or Claude Code's names for the same
/// tools: `Read`, `Bash`…), and the names that stand for no tool here.
fn resolve_tool_names(names: &[String]) -> (Vec<&'static str>, Vec<&str>) {
    let mut tools = Vec::new();
    let mut unknown = Vec::new();
    for name in names {
        match builtin::builtin_tool_name(name) {
            Some(tool) => tools.push(tool),
            None => unknown.push(name.as_str()),
        }
    }
    (tools, unknown)
}

/// [`child`] working in `workspace` with the shell options `shell` (before the agent's own
/// narrowing); without `shell_allowed` it gets no shell tool.
fn child_in(
    def: &AgentDef,
    parent: &Parent,
    workspace: &Workspace,
    mut shell: ShellOptions,
    shell_allowed: bool,
) -> Result<(AgentLoop<WorkspaceDeps>, Vec<String>), Failure> {
    if let Some(mode) = def.sandbox {
        if strictness(mode) > strictness(shell.sandbox_mode()) {
            shell = shell.sandbox(mode);
        }
    }
    if parent.read_only {
        shell = shell.sandbox(SandboxMode::ReadOnly);
    }
    let mut all = builtin::tools_with::<WorkspaceDeps>(workspace, &shell);
    if !shell_allowed {
        all.retain(|t| t.name() != "shell");
    }
    if parent.read_only {
        // As in the parent's plan mode: no file writes, the shell only in its read-only sandbox.
        all.retain(|t| t.name() == "shell" || !builtin::is_mutating(t.name()));
    }
    let mut warnings = Vec::new();
    let tools: Vec<ToolSpec<WorkspaceDeps>> = match &def.tools {
        None => all
            .into_iter()
            .filter(|t| READ_ONLY_TOOLS.contains(&t.name()))
            .collect(),
        Some(names) => {
            let (wanted, unknown) = resolve_tool_names(names);
            // No warnings in plan mode, which narrows the tools whatever the file names.
            if !parent.read_only {
                warnings.extend(unknown.iter().map(|name| {
                    format!(
                        "agent {}: unknown tool {name:?} ignored (it has no equivalent here)",
                        def.name
                    )
                }));
            }
            // What the file asks for, narrowed by what `all` still holds (plan mode, no shell).
            all.into_iter()
                .filter(|t| wanted.contains(&t.name()))
                .collect()
        }
    };
    let model = child_model(def, parent, &mut warnings);
    let config = AgentLoopConfig {
        model: Some(model),
        system_prompt: Some(format!(
            "{}\n\nYou work in the directory {}; paths are relative to it. Your final answer is \
             returned to the agent that gave you this task.",
            def.instructions,
            workspace.root().display()
        )),
        max_turns: Some(def.max_turns.unwrap_or(DEFAULT_CHILD_MAX_TURNS)),
        ..AgentLoopConfig::default()
    };
    let agent = AgentLoop::with_deps(config, parent.model.clone(), Arc::new(parent.deps.clone()))
        .with_tools(tools)
        .map_err(|e| {
            Failure::new(format!(
                "agent {}: cannot register its tools: {e}",
                def.name
            ))
        })?;
    Ok((agent, warnings))
}

/// The model id a child sends: its file's `model` when that names a model of the parent's
/// provider (`provider:model` or a bare id), else the parent's. Claude Code's aliases (`sonnet`,
/// `opus`, `haiku`) mean the parent's model too: the child cannot switch providers.
fn child_model(def: &AgentDef, parent: &Parent, warnings: &mut Vec<String>) -> String {
    let Some(wanted) = def.model.as_deref() else {
        return parent.model_name.clone();
    };
    if ["sonnet", "opus", "haiku"].contains(&wanted) {
        return parent.model_name.clone();
    }
    match wanted.split_once(':') {
        None => wanted.to_owned(),
        Some((provider, id))
            if crate::provider::Provider::parse(provider).is_some()
                && crate::provider::Provider::parse(provider)
                    == crate::provider::Provider::parse(parent.model.provider()) =>
        {
            id.to_owned()
        }
        Some((provider, _)) => {
            warnings.push(format!(
                "agent {}: model {wanted:?} is on provider {provider}, not {}; it uses the main \
                 agent's model",
                def.name,
                parent.model.provider()
            ));
            parent.model_name.clone()
        }
    }
}

#[derive(Deserialize)]
struct TaskArgs {
    agent: String,
    prompt: String,
}

/// The `task` tool for `agents` (each a child of `parent`), and warnings about the agents.
pub fn task_tool(
    agents: &[AgentDef],
    parent: &Parent,
) -> Result<(ToolSpec<WorkspaceDeps>, Vec<String>), Failure> {
    let mut children: BTreeMap<String, Child> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut listing = String::new();
    let shared_parent = Arc::new(parent.clone());
    for def in agents {
        let (agent, warned) = child(def, parent)?;
        warnings.extend(warned);
        listing.push_str(&format!("\n- {}: {}", def.name, def.description));
        let entry = if def.isolated {
            Child::Isolated(Arc::new(def.clone()), shared_parent.clone())
        } else {
            Child::Shared(Arc::new(sub_agent(def, agent, parent, None)))
        };
        children.insert(def.name.clone(), entry);
    }
    let description = format!(
        "Delegates a self-contained task to a sub-agent, which works on its own (it sees nothing \
         of this conversation but the prompt) and returns its final report. Independent tasks \
         can run in parallel: call this tool several times in one reply. Agents:{listing}"
    );
    let names: Vec<String> = children.keys().cloned().collect();
    let children = Arc::new(children);
    let hooks = parent.hooks.clone();
    let spec = ToolSpec::<WorkspaceDeps>::builder(TASK_TOOL, description)
        .parameters(json!({
            "type": "object",
            "properties": {
                "agent": {"type": "string", "description": format!("The agent to run: one of {}.", names.join(", "))},
                "prompt": {"type": "string", "description": "The complete task: what to do and what to report."}
            },
            "required": ["agent", "prompt"],
            "additionalProperties": false
        }))
        .handler(move |ctx: ToolContext<WorkspaceDeps>, args: TaskArgs| {
            let children = children.clone();
            let hooks = hooks.clone();
            let call_id = ctx.call_id().to_owned();
            async move {
                let Some(child) = children.get(&args.agent) else {
                    let known: Vec<&str> = children.keys().map(String::as_str).collect();
                    return Err(ToolError::new(format!(
                        "unknown agent {:?}; the agents are: {}",
                        args.agent,
                        known.join(", ")
                    )));
                };
                match child {
                    Child::Shared(sub) => {
                        answer_past_stop_hooks(sub, hooks.as_ref(), &call_id, args).await
                    }
                    Child::Isolated(def, parent) => {
                        run_isolated(def.clone(), parent.clone(), &call_id, args).await
                    }
                }
            }
        })
        .build()
        .map_err(|e| Failure::new(format!("cannot build the task tool: {e}")))?;
    Ok((spec, warnings))
}

/// Runs `child` on the task; while a `subagent_stop` hook blocks its answer (at most
/// [`MAX_STOP_CONTINUATIONS`] times), runs it again on the task, its answer and the hook's
/// reason. A recorded child continues its session with that prompt; one that is not recorded
/// starts afresh, so the prompt carries what it needs.
async fn answer_past_stop_hooks(
    child: &SubAgent<WorkspaceDeps>,
    hooks: Option<&CommandHooks>,
    call_id: &str,
    task: TaskArgs,
) -> Result<String, ToolError> {
    let Some(hooks) = hooks else {
        return child.run_call(call_id, task.prompt).await;
    };
    let mut prompt = task.prompt.clone();
    let mut continued = 0;
    loop {
        let answer = if continued == 0 {
            child.run_call(call_id, prompt).await?
        } else {
            child.continue_call(call_id, prompt).await?
        };
        let blocked = hooks.subagent_stop(&task.agent, call_id, &answer, continued > 0);
        match blocked {
            Some(reason) if continued < MAX_STOP_CONTINUATIONS => {
                continued += 1;
                prompt = format!(
                    "{}\n\nYou already answered this task with:\n{answer}\n\nThat answer was \
                     not accepted: {reason}\nContinue the work and answer again.",
                    task.prompt
                );
            }
            _ => return Ok(answer),
        }
    }
}

/// One agent the `task` tool runs: built once (sharing the parent's workspace), or per call
/// in an isolated workspace of its own.
enum Child {
    Shared(Arc<SubAgent<WorkspaceDeps>>),
    Isolated(Arc<AgentDef>, Arc<Parent>),
}

/// The sub-agent for `def` running `agent`, recorded in the parent's store (its sessions
/// recording `workdir` as their workspace, when given).
fn sub_agent(
    def: &AgentDef,
    agent: AgentLoop<WorkspaceDeps>,
    parent: &Parent,
    workdir: Option<&Path>,
) -> SubAgent<WorkspaceDeps> {
    let model = agent.config().model.clone();
    let mut sub = SubAgent::new(agent, def.name.clone(), def.description.clone());
    if let Some((store, settings)) = &parent.sessions {
        let mut settings = settings.clone();
        settings.model = model.or(settings.model);
        if let Some(dir) = workdir {
            settings = settings.workspace(dir);
        }
        sub = sub.record_in(store.clone(), settings);
    }
    sub
}

/// Runs one call of an isolated agent: in a worktree (or copy) of its own, its file tools and
/// shell confined there; the result ends with where the work is and its diff stat.
async fn run_isolated(
    def: Arc<AgentDef>,
    parent: Arc<Parent>,
    call_id: &str,
    task: TaskArgs,
) -> Result<String, ToolError> {
    let prompt = task.prompt.clone();
    let source = parent.workspace.root().to_owned();
    let name = def.name.clone();
    let earlier = earlier_workdir(&parent, call_id);
    let record = tokio::task::spawn_blocking(move || {
        match earlier
            .as_deref()
            .and_then(crate::commands::worktrees::reopen)
        {
            Some(record) => Ok(record),
            None => crate::commands::worktrees::create(&source, &name),
        }
    })
    .await
    .map_err(|e| ToolError::new(format!("cannot isolate the sub-agent: {e}")))?
    .map_err(|e| {
        ToolError::new(format!(
            "Sub-agent \"{}\" was not run: cannot create its isolated workspace: {e}",
            def.name
        ))
    })?;
    let answer = run_in(&def, &parent, &record, call_id, task).await;
    let mut record = record;
    let summary = tokio::task::spawn_blocking(move || {
        crate::commands::worktrees::finish(&mut record, &prompt)
    })
    .await
    .unwrap_or_else(|e| format!("(the isolated workspace could not be closed: {e})"));
    match answer {
        Ok(text) => Ok(format!("{text}\n\n{summary}")),
        Err(e) => Err(ToolError::new(format!("{}\n\n{summary}", e.message()))),
    }
}

/// The directory an earlier run of call `call_id` worked in (its child session's workspace).
fn earlier_workdir(parent: &Parent, call_id: &str) -> Option<PathBuf> {
    let (store, _) = parent.sessions.as_ref()?;
    let children = store.children(parent.session_id.as_deref()?).ok()?;
    let child = children
        .into_iter()
        .find(|c| c.parent.as_ref().is_some_and(|p| p.call_id == call_id))?;
    child.settings.workspace.map(PathBuf::from)
}

/// The isolated child's run in `record`'s directory: the file tools confined there; the shell
/// sandboxed to it (at least `workspace-write`, no extra writable roots, a private temporary
/// directory) — and left out where the kernel cannot enforce that sandbox.
async fn run_in(
    def: &AgentDef,
    parent: &Parent,
    record: &crate::commands::worktrees::Record,
    call_id: &str,
    task: TaskArgs,
) -> Result<String, ToolError> {
    let unusable =
        |e: String| ToolError::new(format!("Sub-agent \"{}\" was not run: {e}", def.name));
    let workspace = Workspace::new(&record.workdir).map_err(|e| unusable(e.to_string()))?;
    let mut shell = parent
        .shell
        .clone()
        .without_writable_roots()
        .temp_dir(crate::commands::worktrees::temp_dir(record).map_err(unusable)?);
    if strictness(shell.sandbox_mode()) < strictness(SandboxMode::WorkspaceWrite) {
        shell = shell.sandbox(SandboxMode::WorkspaceWrite);
    }
    let enforced = builtin::sandbox_support(shell.sandbox_mode()).is_ok();
    let (agent, _) =
        child_in(def, parent, &workspace, shell, enforced).map_err(|e| unusable(e.to_string()))?;
    let sub = sub_agent(def, agent, parent, Some(&record.workdir));
    answer_past_stop_hooks(&sub, parent.hooks.as_ref(), call_id, task).await
}

/// Prepares session `id` to continue the `task` calls a dead process left running: each
/// unanswered `task` call of its last tool batch that has a child session is stored as an
/// approved pending call (the other unanswered calls of that batch as interrupted), so the
/// resume runs it again — and the call continues its child session where it stopped. Leaves a
/// session that waits for a person's approval decisions as it is. Returns how many calls will
/// resume.
pub fn park_interrupted_children(
    store: &dyn SessionStore,
    id: &str,
) -> Result<usize, SessionError> {
    let parked = store.parked(id)?;
    if parked
        .as_ref()
        .is_some_and(|p| p.pending.iter().any(|c| c.status != PendingStatus::Started))
    {
        return Ok(0);
    }
    let messages = store.load_raw(id)?;
    let Some(at) = messages.iter().rposition(|m| {
        m.role == Role::Assistant
            && m.stop_reason != Some(StopReason::Error)
            && m.tool_calls().next().is_some()
    }) else {
        return Ok(0);
    };
    let tail = &messages[at + 1..];
    if tail.iter().any(|m| m.role != Role::ToolResult) {
        return Ok(0); // the batch is not the last thing: the conversation went on after it
    }
    let answered = agentloop::transcript::answered_call_ids(tail);
    let children = store.children(id)?;
    let has_child = |call: &str| {
        children
            .iter()
            .any(|c| c.parent.as_ref().is_some_and(|p| p.call_id == call))
    };
    let mut pending = Vec::new();
    let mut resumed = 0;
    for call in messages[at].tool_calls() {
        if answered.contains(&call.id.as_str())
            || pending
                .iter()
                .any(|p: &PendingApproval| p.call_id == call.id)
        {
            continue;
        }
        let resumes = call.tool_name == TASK_TOOL && has_child(&call.id);
        resumed += usize::from(resumes);
        pending.push(PendingApproval {
            call_id: call.id.clone(),
            tool_name: call.tool_name.clone(),
            arguments: match &call.arguments {
                ToolArguments::Json(v) => v.clone(),
                ToolArguments::Unparsed(t) => serde_json::Value::String(t.clone()),
            },
            reason: "the run stopped while this call ran".into(),
            status: if resumes {
                PendingStatus::Approved
            } else {
                PendingStatus::Started
            },
        });
    }
    if resumed == 0 {
        return Ok(0);
    }
    let mut again = parked.unwrap_or_default();
    again.pending = pending;
    store.clear_parked(id)?;
    store.save_parked(id, &again)?;
    Ok(resumed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn tools_may_be_a_comma_separated_string_or_a_list() {
        let a = parse("---\ndescription: d\ntools: Read, grep\n---\nbody\n", "x").unwrap();
        assert_eq!(a.name, "x");
        assert_eq!(a.tools, Some(vec!["Read".to_owned(), "grep".to_owned()]));
        assert_eq!(a.instructions, "body");
        let b = parse(
            "---\nname: y\ndescription: d\ntools:\n  - read_file\n  - grep\nsandbox: read-only\n---\n",
            "x",
        )
        .unwrap();
        assert_eq!(
            b.tools,
            Some(vec!["read_file".to_owned(), "grep".to_owned()])
        );
        assert_eq!(b.sandbox, Some(SandboxMode::ReadOnly));
        let c = parse("---\ndescription: d\ntools: [read_file]\n---\n", "x").unwrap();
        assert_eq!(c.tools, Some(vec!["read_file".to_owned()]));
        assert_eq!(
            parse("---\ndescription: d\n---\n", "x").unwrap().tools,
            None
        );
    }

    /// A Claude Code agent file with the YAML such files use.
    const CLAUDE_AGENT: &str = "---
name: code-reviewer
description: |
  Reviews code: finds bugs.
  Use after every change.
# A comment line.
tools: Read, Grep, Glob, Bash   # a trailing comment
model: sonnet
color: blue
metadata:
  owner: team
  tags: [a, b]
---
You review code.
";

    #[test]
    fn claude_code_agent_files_read_as_yaml() {
        let a = parse(CLAUDE_AGENT, "x").unwrap();
        assert_eq!(a.name, "code-reviewer");
        assert_eq!(
            a.description,
            "Reviews code: finds bugs.\nUse after every change."
        );
        assert_eq!(
            a.tools,
            Some(["Read", "Grep", "Glob", "Bash"].map(String::from).to_vec())
        );
        // Kept as written; `child_model` reads Claude Code's aliases as the parent's model.
        assert_eq!(a.model.as_deref(), Some("sonnet"));
        assert_eq!(a.instructions, "You review code.");

        // Escapes in double quotes are decoded (a tab is not allowed in a name).
        let escaped = parse("---\ndescription: d\nname: \"tab\\tbed\"\n---\n", "x");
        assert!(escaped.unwrap_err().contains("invalid name"));
        let quoted = parse(
            "---\ndescription: \"Line one\\nline two: with a colon\"\n---\n",
            "x",
        )
        .unwrap();
        assert_eq!(quoted.description, "Line one\nline two: with a colon");
        let folded = parse("---\ndescription: >\n  One\n  line.\n---\n", "x").unwrap();
        assert_eq!(folded.description, "One line.");
    }

    /// The agent files Claude Code writes often have a description that is not valid YAML
    /// (`: ` inside a plain value); they are read as Claude Code reads them.
    #[test]
    fn a_claude_code_description_that_is_not_yaml_is_read_as_its_text() {
        let text = "---\nname: test-runner\ndescription: Use this agent when: tests fail. \
                    Examples: <example>Context: a red build. user: \"fix it\"</example>\n\
                    tools: Read, Bash\nmodel: inherit\nmax_turns: 4\ncolor: red\n---\nRun the tests.\n";
        let a = parse(text, "x").unwrap();
        assert_eq!(a.name, "test-runner");
        assert_eq!(
            a.description,
            "Use this agent when: tests fail. Examples: <example>Context: a red build. \
             user: \"fix it\"</example>"
        );
        assert_eq!(a.tools, Some(vec!["Read".to_owned(), "Bash".to_owned()]));
        assert_eq!((a.model, a.max_turns), (None, Some(4)));
        assert_eq!(a.instructions, "Run the tests.");
    }

    #[test]
    fn max_turns_is_a_yaml_number_or_a_numeric_string_under_either_spelling() {
        for front in [
            "max_turns: 5",
            "max_turns: \"5\"",
            "max-turns: 5",
            "max_turns: '5'",
        ] {
            let a = parse(&format!("---\ndescription: d\n{front}\n---\n"), "x").unwrap();
            assert_eq!(a.max_turns, Some(5), "{front}");
        }
        for front in ["max_turns: -1", "max_turns: 2.5", "max_turns: many"] {
            let err = parse(&format!("---\ndescription: d\n{front}\n---\n"), "x").unwrap_err();
            assert!(err.contains("max_turns"), "{front}: {err}");
        }
    }

    #[test]
    fn an_empty_tools_key_is_no_tools_and_a_flow_list_may_quote() {
        let a = parse("---\ndescription: d\ntools:\n---\n", "x").unwrap();
        assert_eq!(a.tools, Some(Vec::new()));
        let b = parse(
            "---\ndescription: d\ntools: [read_file, 'grep']\n---\n",
            "x",
        )
        .unwrap();
        assert_eq!(
            b.tools,
            Some(vec!["read_file".to_owned(), "grep".to_owned()])
        );
        // A key with nothing after it is unset.
        let c = parse("---\ndescription: d\nmodel:\nsandbox:\n---\n", "x").unwrap();
        assert_eq!((c.model, c.sandbox), (None, None));
    }

    #[test]
    fn claude_code_tool_names_resolve_to_built_in_tools() {
        let names: Vec<String> = ["Read", "grep", "Bash", "WebFetch", "mcp__github__x", "Edit"]
            .map(String::from)
            .to_vec();
        let (tools, unknown) = resolve_tool_names(&names);
        assert_eq!(tools, ["read_file", "grep", "shell", "edit_file"]);
        assert_eq!(unknown, ["WebFetch", "mcp__github__x"]);
    }

    #[test]
    fn hostile_front_matter_is_a_one_line_error() {
        let mut bomb = String::from("---\ndescription: d\nl0: &l0 [lol, lol, lol, lol]\n");
        for level in 1..=9 {
            bomb.push_str(&format!(
                "l{level}: &l{level} [{}]\n",
                vec![format!("*l{}", level - 1); 10].join(", ")
            ));
        }
        bomb.push_str("color: *l9\n---\n");
        let deep = format!(
            "---\ndescription: d\nmetadata: {}{}\n---\n",
            "{a: ".repeat(500),
            "}".repeat(500)
        );
        let long = format!("---\ndescription: {}\n---\n", "x".repeat(70 * 1024));
        for text in [bomb, deep, long] {
            let err = parse(&text, "x").unwrap_err();
            assert!(!err.contains('\n') && err.len() < 400, "{err}");
        }
    }

    #[test]
    fn an_agent_file_is_read_only_up_to_its_size_limit() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.md");
        let body = "x".repeat(MAX_AGENT_FILE_BYTES as usize);
        std::fs::write(&path, format!("---\ndescription: d\n---\n{body}")).unwrap();
        let err = read(&path).unwrap_err();
        assert!(err.contains("KiB"), "{err}");
        std::fs::write(&path, "---\ndescription: d\n---\nsmall\n").unwrap();
        assert_eq!(read(&path).unwrap().instructions, "small");
        assert!(read(dir.path()).unwrap_err().contains("regular file"));
    }

    #[test]
    fn unusable_files_are_one_line_errors() {
        for (text, needle) in [
            ("no front matter", "front matter"),
            ("---\nname: x\n---\n", "description"),
            (
                "---\ndescription: d\nisolation: sideways\n---\n",
                "isolation",
            ),
            ("---\ndescription: d\nsandbox: wide-open\n---\n", "sandbox"),
            ("---\ndescription: d\nmax_turns: 0\n---\n", "max_turns"),
            ("---\nname: a b\ndescription: d\n---\n", "invalid name"),
            ("---\ndescription: \"unterminated\n---\n", "line"),
            ("---\ndescription: d\ntools: {Read: yes}\n---\n", "names"),
            ("---\ndescription:\n  nested: map\n---\n", "expected string"),
        ] {
            let err = parse(text, "x").unwrap_err();
            assert!(
                err.contains(needle) && !err.contains('\n'),
                "{text:?}: {err}"
            );
        }
    }
}
