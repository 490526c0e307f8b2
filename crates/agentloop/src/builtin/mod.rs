//! The built-in coding tools: read, write and edit files, list directories, find files, search
//! contents and run shell commands — all confined to a [`Workspace`].
//!
//! [`tools`] returns the nine tools as ordinary [`ToolSpec`]s, generic over the application's
//! deps bundle (they need nothing from it), so they register next to any other tool. Their
//! argument names are a contract models and scripts rely on:
//!
//! | tool | arguments |
//! |---|---|
//! | `read_file` | `path`, `offset?`, `limit?` |
//! | `write_file` | `path`, `content` |
//! | `edit_file` | `path`, `old_text`, `new_text` |
//! | `list_dir` | `path?` |
//! | `find_files` | `pattern`, `path?` |
//! | `grep` | `pattern`, `path?`, `glob?` |
//! | `shell` | `command`, `timeout_secs?`, `background?` |
//! | `job_output` | `job`, `tail_lines?` |
//! | `job_kill` | `job` |
//!
//! This module owns the tools' behaviour, their path confinement ([`Workspace`]: every file is
//! opened beneath a handle on the root, so a symbolic link swapped in mid-call cannot lead
//! outside), the bounds on what they read (only regular files, at most a capped part of one
//! line held in memory, globs and regexes checked for length and nesting before compiling),
//! their output truncation ([`truncate_output`]) and the approval policy for them ([`ApprovalPolicy`],
//! [`WorkspaceDeps`]). It must not prompt anyone (an application plugs in an asker), and it must
//! not touch anything outside the workspace except through `shell`, which is sandboxed
//! ([`SandboxMode`], [`ShellOptions`]; Linux only, `workspace-write` by default) but can still
//! change the workspace and is therefore classed as mutating ([`MUTATING_TOOLS`]).
//!
//! `read_file`, `write_file` and `edit_file` can read and write text through a [`TextFiles`]
//! (an editor's buffers) set on the workspace ([`Workspace::with_text_files`]); paths are
//! checked by the workspace first either way.
//!
//! The file tools are blocking handlers (they run on Tokio's blocking pool and stop walking when
//! their call is cancelled); `shell` is async so a timeout or abort kills its process group. The
//! mutating tools are not parallel-safe: a batch that contains one runs in call order, so a read
//! after a write in the same batch sees the write.
//!
//! ```
//! use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
//! use agentloop::tooling::{run_tools, Registry};
//! use agentloop::transcript::ToolCallPart;
//! use serde_json::json;
//! use std::sync::Arc;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let dir = std::env::temp_dir().join(format!("agentloop-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir).unwrap();
//! let workspace = Workspace::new(&dir).unwrap();
//! let registry = Registry::new(builtin::tools::<WorkspaceDeps>(&workspace)).unwrap();
//! let deps = Arc::new(WorkspaceDeps::new(workspace, ApprovalPolicy::Always));
//!
//! let calls = [
//!     ToolCallPart::new("1", "write_file", json!({"path": "hello.txt", "content": "hi\n"})),
//!     ToolCallPart::new("2", "read_file", json!({"path": "hello.txt"})),
//! ];
//! let results = run_tools(&calls, &registry, &deps, None).await;
//! assert_eq!(results[1].content, "     1\thi\n");
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # }
//! ```

mod approval;
#[cfg(target_os = "linux")]
mod cgroup;
mod edit_file;
mod find_files;
mod front_matter;
mod grep;
mod jobs;
mod list_dir;
mod listing;
mod output;
pub(crate) mod patterns;
mod permissions;
mod plan;
mod procs;
mod read_file;
mod reading;
mod retention;
mod sandbox;
mod sandbox_exec;
mod schema;
mod secrets;
mod shell;
mod shell_env;
mod shell_line;
mod skills;
mod text_files;
mod workspace;
mod write_file;

use std::time::Duration;

use crate::tooling::{ToolContext, ToolDeps, ToolError, ToolSpec};

pub use approval::ToolClassifier;
pub use approval::{
    ApprovalFuture, ApprovalPolicy, NO_ASKER_REASON, ParsePolicyError, PolicyDecision,
    WorkspaceDeps,
};
pub use find_files::MAX_RESULTS as FIND_FILES_MAX_RESULTS;
#[cfg(feature = "fuzzing")]
pub(crate) use front_matter::MAX_ERROR_CHARS;
pub use front_matter::{
    MAX_FRONT_MATTER_BYTES, deserialize_name_list, parse_front_matter_as, split_front_matter,
};
pub use grep::MAX_MATCHES as GREP_MAX_MATCHES;
pub use jobs::{DEFAULT_JOB_LIMIT, JOB_OUTPUT_LIMIT, JobEvent, JobInfo, JobStatus, Jobs};
pub use list_dir::MAX_ENTRIES as LIST_DIR_MAX_ENTRIES;
pub use output::{OUTPUT_LIMIT, truncate_output};
pub use permissions::{PermissionRule, PermissionRules, RuleError, RuleVerdict};
pub use plan::{Plan, PlanError, PlanStep, StepStatus, UPDATE_PLAN_TOOL, plan_tool};
pub use procs::kill_shell_processes;
pub use read_file::{
    DEFAULT_LINE_LIMIT as READ_FILE_DEFAULT_LINES, MAX_BYTES as READ_FILE_MAX_BYTES,
};
pub use retention::{
    MAX_RETAINED_BYTES, MAX_RETAINED_CALLS, OutputStore, retained_call, retained_note,
    retained_number, safe_file_name,
};
pub use sandbox::{ParseSandboxModeError, SandboxMode, sandbox_support};
pub use sandbox_exec::{CommandRunner, DelegatedCommand, SANDBOX_EXEC_SUBCOMMAND, exec_sandboxed};
pub use secrets::protect_agent_secrets;
pub use shell::{
    DEFAULT_TIMEOUT_SECS as SHELL_DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS as SHELL_MAX_TIMEOUT_SECS,
    ShellOptions,
};
pub use shell_env::{SHELL_ENV_BASE, looks_like_credential, looks_like_credential_value};
pub use skills::{
    FrontMatter, MAX_SKILL_FILE_BYTES, SKILL_TOOL_NAME, Skill, Skills, parse_front_matter,
    skill_tool,
};
pub use text_files::TextFiles;
pub use workspace::Workspace;

/// The names of the built-in tools that change files or run commands (and so need approval
/// under [`ApprovalPolicy::Mutating`]).
pub const MUTATING_TOOLS: &[&str] = &["write_file", "edit_file", "shell"];

/// The names of all nine built-in tools, in the order [`tools`] returns them.
pub const TOOL_NAMES: &[&str] = &[
    "read_file",
    "write_file",
    "edit_file",
    "list_dir",
    "find_files",
    "grep",
    "shell",
    "job_output",
    "job_kill",
];

/// The built-in tool `name` stands for: one of [`TOOL_NAMES`] as itself, or the name Claude Code
/// gives the equivalent tool (as in its agent files' `tools`: `Read`, `Write`, `Edit`,
/// `MultiEdit`, `Glob`, `Grep`, `LS`, `Bash`, `BashOutput`, `KillShell`, `KillBash`). `None` for
/// a name with no equivalent here (`WebFetch`, `TodoWrite`, `Task`, an MCP tool…). Names are
/// matched exactly.
///
/// ```
/// use agentloop::builtin::builtin_tool_name;
/// assert_eq!(builtin_tool_name("Read"), Some("read_file"));
/// assert_eq!(builtin_tool_name("Bash"), Some("shell"));
/// assert_eq!(builtin_tool_name("grep"), Some("grep"));
/// assert_eq!(builtin_tool_name("WebFetch"), None);
/// ```
pub fn builtin_tool_name(name: &str) -> Option<&'static str> {
    if let Some(ours) = TOOL_NAMES.iter().find(|ours| **ours == name) {
        return Some(ours);
    }
    Some(match name {
        "Read" => "read_file",
        "Write" => "write_file",
        // MultiEdit applies several replacements to one file; edit_file applies one per call,
        // which the model can repeat.
        "Edit" | "MultiEdit" => "edit_file",
        "Glob" => "find_files",
        "Grep" => "grep",
        "LS" => "list_dir",
        "Bash" => "shell",
        "BashOutput" => "job_output",
        // Claude Code renamed KillBash to KillShell; files name either.
        "KillShell" | "KillBash" => "job_kill",
        _ => return None,
    })
}

/// Whether `name` is one of the [`MUTATING_TOOLS`].
///
/// ```
/// assert!(agentloop::builtin::is_mutating("edit_file"));
/// assert!(!agentloop::builtin::is_mutating("grep"));
/// ```
pub fn is_mutating(name: &str) -> bool {
    MUTATING_TOOLS.contains(&name)
}

/// Time limit for the file tools (a walk over a huge tree stops when it is reached).
const FILE_TOOL_TIMEOUT: Duration = Duration::from_secs(120);

/// The nine built-in tools, confined to `workspace`, in the order of [`TOOL_NAMES`].
///
/// The tools ignore the deps bundle, so any [`ToolDeps`] works; use [`WorkspaceDeps`] to get the
/// approval policy as well.
pub fn tools<D: ToolDeps>(workspace: &Workspace) -> Vec<ToolSpec<D>> {
    tools_with(workspace, &ShellOptions::default())
}

/// Like [`tools`], with explicit [`ShellOptions`] for the `shell` tool (sandbox mode,
/// environment allow-list).
pub fn tools_with<D: ToolDeps>(workspace: &Workspace, shell: &ShellOptions) -> Vec<ToolSpec<D>> {
    // Each file tool's module is named after the tool and holds its description, schema and
    // `run`, which takes the workspace and the arguments, then what the tool uses of the call:
    // the file its whole output spills into, and the cancellation check the walks make.
    macro_rules! file_tool {
        ($tool:ident) => {
            file_tool!(@ $tool, |ws, args, _, _| $tool::run(ws, args))
        };
        ($tool:ident, spill) => {
            file_tool!(@ $tool, |ws, args, _, spill| $tool::run(ws, args, spill()))
        };
        ($tool:ident, cancelled, spill) => {
            file_tool!(@ $tool, |ws, args, cancelled, spill| {
                $tool::run(ws, args, cancelled, spill())
            })
        };
        (@ $tool:ident, $run:expr) => {
            file_tool(workspace, shell, stringify!($tool), $tool::DESCRIPTION, $tool::schema(), $run)
        };
    }
    let built = [
        file_tool!(read_file),
        file_tool!(write_file),
        file_tool!(edit_file),
        file_tool!(list_dir, spill),
        file_tool!(find_files, cancelled, spill),
        file_tool!(grep, cancelled, spill),
        build_shell(workspace, shell),
        build_job_output(shell),
        build_job_kill(shell),
    ];
    built
        .into_iter()
        .filter_map(|spec| match spec {
            Ok(spec) => Some(spec),
            Err(e) => {
                // Unreachable with the definitions below (a unit test builds them all); a bad
                // definition must not take the application down.
                tracing::error!("built-in tool definition rejected: {e}");
                None
            }
        })
        .collect()
}

type Built<D> = Result<ToolSpec<D>, crate::tooling::SpecError>;

/// The file a call's whole output streams into when `shell` retains outputs (see
/// [`ShellOptions::retain_outputs`]).
fn spill<D: ToolDeps>(options: &ShellOptions, ctx: &ToolContext<D>) -> Option<retention::Spill> {
    options.retention().map(|store| store.spill(ctx.call_id()))
}

/// A call's cancellation check, for a file tool's `run`.
type Cancelled<'a> = &'a dyn Fn() -> bool;

/// A call's spill file, made on demand (a tool that may cut its output asks for it), for a file
/// tool's `run`.
type SpillOnDemand<'a> = &'a dyn Fn() -> Option<retention::Spill>;

/// A file tool on `workspace`: `name` with its description and argument schema, the file-tool
/// time limit, run on the blocking pool; a mutating one ([`is_mutating`]) is not parallel-safe.
/// `run` gets the workspace, the arguments, the call's cancellation check and its spill file on
/// demand (see [`spill`]).
fn file_tool<D, A, R>(
    workspace: &Workspace,
    shell: &ShellOptions,
    name: &str,
    description: &str,
    schema: serde_json::Value,
    run: fn(&Workspace, A, Cancelled<'_>, SpillOnDemand<'_>) -> Result<R, ToolError>,
) -> Built<D>
where
    D: ToolDeps,
    A: serde::de::DeserializeOwned + Send + 'static,
    Result<R, ToolError>: crate::tooling::IntoToolOutput + 'static,
{
    let (ws, shell) = (workspace.clone(), shell.clone());
    ToolSpec::builder(name, description)
        .parameters(schema)
        .timeout(FILE_TOOL_TIMEOUT)
        .parallel_safe(!is_mutating(name))
        .blocking_handler(move |ctx: ToolContext<D>, args: A| {
            run(&ws, args, &|| ctx.is_cancelled(), &|| spill(&shell, &ctx))
        })
        .build()
}

fn build_shell<D: ToolDeps>(workspace: &Workspace, options: &ShellOptions) -> Built<D> {
    let ws = workspace.clone();
    let options = options.clone();
    ToolSpec::builder("shell", shell::DESCRIPTION)
        .parameters(shell::schema())
        .timeout(shell::spec_timeout())
        .parallel_safe(false)
        .handler(move |ctx: ToolContext<D>, args: shell::Args| {
            let call = jobs::CallScope {
                call_id: ctx.call_id().to_owned(),
                run_over: ctx.cancellation().clone(),
            };
            shell::run(ws.clone(), options.clone(), args, call)
        })
        .build()
}

fn build_job_output<D: ToolDeps>(options: &ShellOptions) -> Built<D> {
    let shell = options.clone();
    ToolSpec::builder("job_output", jobs::OUTPUT_DESCRIPTION)
        .parameters(jobs::output_schema())
        .timeout(FILE_TOOL_TIMEOUT)
        .blocking_handler(move |ctx: ToolContext<D>, args: jobs::OutputArgs| {
            shell.job_table().output(args, spill(&shell, &ctx))
        })
        .build()
}

fn build_job_kill<D: ToolDeps>(options: &ShellOptions) -> Built<D> {
    let jobs = options.job_table().clone();
    ToolSpec::builder("job_kill", jobs::KILL_DESCRIPTION)
        .parameters(jobs::kill_schema())
        .timeout(FILE_TOOL_TIMEOUT)
        .handler(move |_ctx: ToolContext<D>, args: jobs::KillArgs| {
            jobs::kill_tool(jobs.clone(), args)
        })
        .build()
}

/// Whether the first bytes of a file look binary (contain a NUL byte), as git and grep decide.
fn looks_binary(sniff: &[u8]) -> bool {
    sniff.iter().take(8192).any(|&b| b == 0)
}

/// A model-actionable error for a failed file operation.
fn io_error(action: &str, shown: &str, e: &std::io::Error) -> ToolError {
    if workspace::is_escape(e) {
        return ToolError::new(format!(
            "cannot {action} `{shown}`: it leads outside the workspace (through a symbolic \
             link, possibly one that appeared while the tool ran); only files inside the \
             workspace can be used"
        ));
    }
    match e.kind() {
        std::io::ErrorKind::NotFound => ToolError::new(format!(
            "`{shown}` does not exist; use list_dir or find_files to see what is there"
        )),
        std::io::ErrorKind::PermissionDenied => {
            ToolError::new(format!("permission denied: cannot {action} `{shown}`"))
        }
        _ => ToolError::new(format!("could not {action} `{shown}`: {e}")),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::tooling::{Deps, Registry};

    #[test]
    fn all_nine_tools_build_and_register() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let specs = tools::<Deps>(&ws);
        let names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
        assert_eq!(names, TOOL_NAMES);
        for spec in &specs {
            assert_eq!(spec.parameters()["additionalProperties"], false);
            assert_eq!(spec.parallel_safe(), !is_mutating(spec.name()));
        }
        assert!(Registry::new(specs).is_ok());
    }

    #[test]
    fn claude_code_tool_names_map_to_built_in_tools() {
        for name in TOOL_NAMES {
            assert_eq!(builtin_tool_name(name), Some(*name));
        }
        for (claude, ours) in [
            ("Read", "read_file"),
            ("Write", "write_file"),
            ("Edit", "edit_file"),
            ("MultiEdit", "edit_file"),
            ("Glob", "find_files"),
            ("Grep", "grep"),
            ("LS", "list_dir"),
            ("Bash", "shell"),
            ("BashOutput", "job_output"),
            ("KillShell", "job_kill"),
            ("KillBash", "job_kill"),
        ] {
            assert_eq!(builtin_tool_name(claude), Some(ours), "{claude}");
        }
        for none in [
            "WebFetch",
            "WebSearch",
            "TodoWrite",
            "NotebookEdit",
            "Task",
            "mcp__x__y",
        ] {
            assert_eq!(builtin_tool_name(none), None, "{none}");
        }
        // Exact names only: a near miss is not silently another tool.
        assert_eq!(builtin_tool_name("read"), None);
        assert_eq!(builtin_tool_name("bash"), None);
    }

    #[test]
    fn binary_sniffing_looks_for_nul() {
        assert!(looks_binary(b"PK\x03\x04\x00"));
        assert!(!looks_binary("plain ü text\n".as_bytes()));
    }
}
