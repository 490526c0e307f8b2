//! `agentloop`: the command-line front end of the agentloop library — a thin binary over it,
//! in the ripgrep style.
//!
//! - `agentloop` (on a terminal) or `agentloop chat`: a conversation with line editing, Markdown
//!   answers and slash commands.
//! - `agentloop run "PROMPT"`: an agent with the built-in tools on a workspace directory,
//!   recorded into the session store, rendered as text (a spinner on a terminal) or as JSON
//!   lines (`--json`).
//! - `agentloop sessions list|show|follow|export|import|rm`: the recorded sessions, in the
//!   store `--store` names (a SQLite file or a PostgreSQL URL).
//! - `agentloop acp`: an Agent Client Protocol agent on stdin/stdout for editors.
//! - `agentloop demo`: the real loop and tools against a scripted mock model (no key needed).
//! - `agentloop mock-server --script FILE`: the mock model server on its own.
//! - `agentloop checkpoints`, `rewind --to ID`, `diff`: the workspace checkpoints taken before
//!   each mutating tool call, putting files back, and what a session changed.
//! - `agentloop approvals list`, `approve`, `deny`, `resume`: runs parked by `--approve defer`.
//! - `agentloop config show`: the effective settings and where each comes from.
//! - `agentloop trust [DIR]`, `--revoke`, `--list`: which workspaces' own configuration applies.
//! - `agentloop models [PROVIDER]`: the models the provider's API lists.
//! - `agentloop mcp list`: the configured MCP servers and their tools;
//!   `agentloop mcp-server --workspace DIR`: the built-in tools served over MCP (stdio).
//! - `agentloop completions SHELL`, `agentloop man`: a completion script and the man page.
//!
//! Exit codes: 0 success, 1 failure (including a run that did not stop normally), 2 bad usage
//! (including an invalid config file), 4 mutating calls denied for lack of a terminal,
//! 3 the run stopped awaiting approval (`--approve defer`), 130 interrupted by Ctrl-C. Diagnostics go to stderr as one line.

mod cli;
mod commands;
mod config;
mod error;
mod help;
mod hints;
mod invocation;
mod jobs;
mod mcp;
mod mcp_auth;
mod otel;
mod outputs;
mod plan;
mod provider;
mod scripting;
mod shell;
mod ui;

use std::process::ExitCode;
use std::time::Duration;

use crate::cli::{Command, ConfigCommand};
use crate::error::Failure;

fn main() -> ExitCode {
    if let Some(failed) = sandbox_exec() {
        return failed;
    }
    let cli = match parse_args() {
        Ok(cli) => cli,
        Err(failure) => return report(&failure),
    };
    otel::init();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentloop: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let store = store_spec(&cli);
    let db = store.as_deref();
    let trust_project = cli.trust_project;
    let result = runtime.block_on(async move {
        let Some(command) = cli.command else {
            return Err(Failure::usage(
                "no command given (see `agentloop --help`; on a terminal, bare `agentloop` \
                 opens a chat)",
            ));
        };
        match command {
            Command::Chat(args) => commands::chat::run(db, args).await,
            Command::Run(args) => commands::run::run(db, ui::picker::run_resume_flag(args)?).await,
            #[cfg(feature = "acp")]
            Command::Acp(args) => commands::acp::serve(db, args).await,
            Command::Sessions(command) => commands::sessions::run(db, command),
            #[cfg(feature = "demo")]
            Command::Demo(args) => commands::demo::run(db, args).await,
            Command::Compact(args) => commands::compact::run(db, args).await,
            Command::Checkpoints(args) => commands::checkpoints::list(db, args),
            Command::Rewind(args) => commands::checkpoints::rewind(db, args),
            Command::Diff(args) => commands::checkpoints::diff(db, args),
            #[cfg(feature = "demo")]
            Command::MockServer(args) => commands::mock::run(args).await,
            Command::Approvals(args) => commands::approvals::command(db, args),
            Command::Approve(args) => commands::approvals::approve(db, args),
            Command::Deny(args) => commands::approvals::deny(db, args),
            Command::Resume(args) => ui::picker::command(db, args).await,
            Command::Mcp(command) => mcp::run(command).await,
            Command::McpServer(args) => mcp::serve(args).await,
            Command::Models(args) => commands::models::run(args).await,
            Command::Config(ConfigCommand::Show(args)) => config::layers::show(args),
            Command::Trust(args) => config::trust::command(args),
            Command::Completions(args) => shell::completions(args),
            Command::Man => shell::man(),
            Command::Skills(cli::SkillsCommand::List { workspace, json }) => {
                config::skills::list(workspace, json, trust_project)
            }
            Command::Worktrees(cli::WorktreesCommand::List { json }) => {
                commands::worktrees::list(json)
            }
            Command::Worktrees(cli::WorktreesCommand::Prune { older_than }) => {
                commands::worktrees::prune(older_than)
            }
        }
    });
    // An abandoned blocking task (a prompt nobody answers after Ctrl-C, a tool that ignored
    // its cancellation) must not keep the process alive.
    runtime.shutdown_timeout(Duration::from_millis(200));
    otel::shutdown();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => report(&failure),
    }
}

/// A command an editor's terminal runs for the shell tool (`agentloop __sandbox-exec …`):
/// confined, then `sh -c`. Returns only when it could not be started (exit code 126).
fn sandbox_exec() -> Option<ExitCode> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv
        .get(1)
        .is_none_or(|a| a != agentloop::builtin::SANDBOX_EXEC_SUBCOMMAND)
    {
        return None;
    }
    eprintln!(
        "agentloop: {}",
        agentloop::builtin::exec_sandboxed(&argv[2..])
    );
    Some(ExitCode::from(126))
}

/// The command line, made safe to read keys with first (see `protect_agent_secrets`), in the
/// shapes other tools accept, with the config files' defaults for the flags not given.
fn parse_args() -> Result<cli::Cli, Failure> {
    // Before any key is read: shell commands (same user) must not read this process's
    // environment or memory through /proc.
    if let Err(e) = agentloop::builtin::protect_agent_secrets() {
        eprintln!("agentloop: warning: cannot make the process non-dumpable: {e}");
    }
    // `agentloop "PROMPT"`, `agentloop -m X`: the shapes other tools accept, made ours first.
    let argv = invocation::rewrite(
        std::env::args_os().collect(),
        invocation::Terminal::detect(),
    );
    // Config files fill in the `run` flags the user did not give (see config/layers.rs).
    config::layers::parse(argv)
}

/// The session store: `--store` (or `--db`), else `AGENTLOOP_STORE` (read by the parser), else
/// the older `AGENTLOOP_DB`.
fn store_spec(cli: &cli::Cli) -> Option<String> {
    cli.store
        .clone()
        .or_else(|| std::env::var("AGENTLOOP_DB").ok().filter(|v| !v.is_empty()))
}

fn report(failure: &Failure) -> ExitCode {
    eprintln!("agentloop: {failure}");
    ExitCode::from(failure.code)
}
