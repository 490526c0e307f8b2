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

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agentloop::agent::command_hooks::{CommandHooks, MAX_STOP_CONTINUATIONS};
use agentloop::agent::{AgentLoop, AgentLoopConfig, SubAgent};
use agentloop::builtin::{self, SandboxMode, ShellOptions, Workspace, WorkspaceDeps};
use agentloop::model::Model;
use agentloop::tooling::{ToolContext, ToolError, ToolSpec};
use serde::Deserialize;
use serde_json::json;

use crate::config::user_config_path;
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
    /// `tools`: the tool names it gets (`None`: the parent's read-only tools).
    pub tools: Option<Vec<String>>,
    /// `model`: a model id on the parent's provider (`None`: the parent's model).
    pub model: Option<String>,
    /// `max_turns`: the child's own turn ceiling.
    pub max_turns: Option<u32>,
    /// `sandbox`: the child's shell sandbox (only narrower than the parent's takes effect).
    pub sandbox: Option<SandboxMode>,
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
        instructions: "You explore a code workspace to answer one question. Use the read-only \
                       tools to find and read what matters; change nothing. Finish with a short, \
                       factual report: what you found and where (paths and line numbers)."
            .into(),
        path: None,
    }
}

/// The agent directories for `workspace`, most specific first.
pub fn roots(workspace: &Path, trusted: bool) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if trusted {
        roots.push(workspace.join(".agentloop").join("agents"));
        roots.push(workspace.join(".claude").join("agents"));
    }
    if let Some(config) = user_config_path() {
        roots.push(config.with_file_name("agents"));
    }
    roots
}

/// The agents for `workspace` (the built-in one included, last), and one line per file that
/// could not be used.
pub fn load(workspace: &Path, trusted: bool) -> (Vec<AgentDef>, Vec<String>) {
    let mut agents: Vec<AgentDef> = Vec::new();
    let mut problems = Vec::new();
    for root in roots(workspace, trusted) {
        let Ok(entries) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "md"))
            .collect();
        files.sort();
        for file in files {
            match read(&file) {
                Ok(def) if agents.iter().any(|a| a.name == def.name) => {}
                Ok(def) => agents.push(def),
                Err(e) => problems.push(format!("{}: {e}", file.display())),
            }
        }
    }
    if !agents.iter().any(|a| a.name == "explore") {
        agents.push(explore());
    }
    (agents, problems)
}

fn read(path: &Path) -> Result<AgentDef, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse(&text, &stem).map(|mut def| {
        def.path = Some(path.to_owned());
        def
    })
}

/// Parses an agent file; `stem` names it when the front matter does not.
pub fn parse(text: &str, stem: &str) -> Result<AgentDef, String> {
    let (front, body) = builtin::split_front_matter(text);
    let front = front.ok_or("no front matter (a `---` block with name and description)")?;
    let fields = parse_fields(front)?;
    let get = |key: &str| fields.get(key).and_then(|v| v.first()).cloned();
    let name = get("name").unwrap_or_else(|| stem.to_owned());
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "invalid name {name:?} (letters, digits, - and _ only)"
        ));
    }
    let description = get("description").ok_or("missing description")?;
    let max_turns = match get("max_turns") {
        Some(v) => Some(
            v.parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or(format!("max_turns: expected a positive number, got {v:?}"))?,
        ),
        None => None,
    };
    let sandbox = match get("sandbox") {
        Some(v) => Some(v.parse::<SandboxMode>().map_err(|e| e.to_string())?),
        None => None,
    };
    if let Some(isolation) = get("isolation").filter(|v| v != "none") {
        return Err(format!(
            "isolation {isolation:?} is not supported (children share the workspace; use none)"
        ));
    }
    Ok(AgentDef {
        name,
        description,
        tools: fields.get("tools").cloned(),
        model: get("model").filter(|m| !m.is_empty() && m != "inherit"),
        max_turns,
        sandbox,
        instructions: body.trim().to_owned(),
        path: None,
    })
}

/// `key: value` lines; a value may be a list (`[a, b]`, `a, b` for `tools`, or `- item` lines).
fn parse_fields(front: &str) -> Result<BTreeMap<String, Vec<String>>, String> {
    let mut fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut last: Option<String> = None;
    for line in front.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ") {
            let key = last
                .clone()
                .ok_or(format!("unexpected list item {trimmed:?}"))?;
            fields
                .entry(key)
                .or_default()
                .push(unquote(item).to_owned());
            continue;
        }
        let (key, value) = trimmed
            .split_once(':')
            .ok_or(format!("expected `key: value`, got {trimmed:?}"))?;
        let key = key.trim().replace('-', "_");
        let value = value.trim();
        let values: Vec<String> = if key == "tools" {
            let inner = value
                .strip_prefix('[')
                .and_then(|v| v.strip_suffix(']'))
                .unwrap_or(value);
            inner
                .split(',')
                .map(|t| unquote(t).to_owned())
                .filter(|t| !t.is_empty())
                .collect()
        } else if value.is_empty() {
            Vec::new()
        } else {
            vec![unquote(value).to_owned()]
        };
        fields.insert(key.clone(), values);
        last = Some(key);
    }
    Ok(fields)
}

fn unquote(value: &str) -> &str {
    let value = value.trim();
    for q in ['"', '\''] {
        if let Some(inner) = value.strip_prefix(q).and_then(|v| v.strip_suffix(q)) {
            return inner;
        }
    }
    value
}

/// What a child inherits from the parent run.
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
    let mut shell = parent.shell.clone();
    if let Some(mode) = def.sandbox {
        if strictness(mode) > strictness(shell.sandbox_mode()) {
            shell = shell.sandbox(mode);
        }
    }
    if parent.read_only {
        shell = shell.sandbox(SandboxMode::ReadOnly);
    }
    let mut all = builtin::tools_with::<WorkspaceDeps>(&parent.workspace, &shell);
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
            for name in names {
                if !all.iter().any(|t| t.name() == name) && !parent.read_only {
                    warnings.push(format!("agent {}: unknown tool {name:?} ignored", def.name));
                }
            }
            all.into_iter()
                .filter(|t| names.iter().any(|n| n == t.name()))
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
            parent.workspace.root().display()
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
            if crate::model::Provider::parse(provider).is_some()
                && crate::model::Provider::parse(provider)
                    == crate::model::Provider::parse(parent.model.provider()) =>
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
    let mut children: BTreeMap<String, Arc<SubAgent<WorkspaceDeps>>> = BTreeMap::new();
    let mut warnings = Vec::new();
    let mut listing = String::new();
    for def in agents {
        let (agent, warned) = child(def, parent)?;
        warnings.extend(warned);
        listing.push_str(&format!("\n- {}: {}", def.name, def.description));
        children.insert(
            def.name.clone(),
            Arc::new(SubAgent::new(
                agent,
                def.name.clone(),
                def.description.clone(),
            )),
        );
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
                match hooks {
                    Some(hooks) => answer_past_stop_hooks(child, &hooks, &call_id, args).await,
                    None => child.run_call(&call_id, args.prompt).await,
                }
            }
        })
        .build()
        .map_err(|e| Failure::new(format!("cannot build the task tool: {e}")))?;
    Ok((spec, warnings))
}

/// Runs `child` on the task; while a `subagent_stop` hook blocks its answer (at most
/// [`MAX_STOP_CONTINUATIONS`] times), runs it again on the task, its answer and the hook's
/// reason. The child starts afresh each time, so the prompt carries what it needs.
async fn answer_past_stop_hooks(
    child: &SubAgent<WorkspaceDeps>,
    hooks: &CommandHooks,
    call_id: &str,
    task: TaskArgs,
) -> Result<String, ToolError> {
    let mut prompt = task.prompt.clone();
    let mut continued = 0;
    loop {
        let answer = child.run_call(call_id, prompt).await?;
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

    #[test]
    fn unusable_files_are_one_line_errors() {
        for (text, needle) in [
            ("no front matter", "front matter"),
            ("---\nname: x\n---\n", "description"),
            (
                "---\ndescription: d\nisolation: worktree\n---\n",
                "isolation",
            ),
            ("---\ndescription: d\nsandbox: wide-open\n---\n", "sandbox"),
            ("---\ndescription: d\nmax_turns: 0\n---\n", "max_turns"),
            ("---\nname: a b\ndescription: d\n---\n", "invalid name"),
        ] {
            let err = parse(text, "x").unwrap_err();
            assert!(
                err.contains(needle) && !err.contains('\n'),
                "{text:?}: {err}"
            );
        }
    }
}
