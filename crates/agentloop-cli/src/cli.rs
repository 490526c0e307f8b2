//! The command line: every subcommand, flag and default, as clap derive types. Parsing only;
//! nothing here touches the network, the disk or the terminal.

use std::path::PathBuf;

use agentloop::builtin::ApprovalPolicy;
use agentloop::model::ReasoningLevel;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// Run LLM agents with workspace-confined coding tools, and manage their recorded sessions.
///
/// Start with `agentloop demo`: a real agent loop, real tools, real HTTP — against a scripted
/// mock model, so it needs no API key and no network.
#[derive(Parser, Debug)]
#[command(name = "agentloop", version)]
pub struct Cli {
    /// The session database (SQLite). Default: `$XDG_DATA_HOME/agentloop/sessions.db`, else
    /// `~/.local/share/agentloop/sessions.db`; directories are created.
    #[arg(long, global = true, env = "AGENTLOOP_DB", value_name = "PATH")]
    pub db: Option<PathBuf>,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run an agent on a prompt, with the built-in tools confined to a workspace directory.
    Run(RunArgs),
    /// List, show, export, import or delete recorded sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// A scripted demo: the real loop and the real tools on a temporary sample project, with a
    /// mock model server replaying a fixed script (no key, no network).
    Demo(DemoArgs),
    /// Summarise a session's older turns now (context compaction); the full history stays
    /// stored and resuming uses the summary.
    Compact(CompactArgs),
    /// Serve a mock model script over HTTP (OpenAI Chat, OpenAI Responses and Anthropic
    /// wires) until Ctrl-C.
    MockServer(MockServerArgs),
}

/// `agentloop run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The prompt (`-` reads it from standard input).
    pub prompt: String,

    /// The directory the tools may read and change (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// `PROVIDER:NAME`, e.g. `openai:gpt-4o-mini`, `openai-responses:gpt-5`,
    /// `anthropic:claude-sonnet-4-5`. `openai` also covers compatible servers (Ollama, vLLM,
    /// llama.cpp, OpenRouter) with `--base-url`.
    #[arg(
        long,
        short = 'm',
        env = "AGENTLOOP_MODEL",
        default_value = "openai:gpt-4o-mini",
        value_name = "PROVIDER:NAME"
    )]
    pub model: String,

    /// Base URL of the provider API (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL). OpenAI
    /// URLs include `/v1`, Anthropic's do not.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// System prompt (replaces the default one, which describes the workspace).
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,

    /// How hard the model should think (providers that support it).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub reasoning: Option<ReasoningArg>,

    /// Stop after this many model calls (exit code 1 if work was left).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,

    /// Record into (and resume) this session; a new session gets this id.
    #[arg(long, value_name = "ID", conflicts_with = "continue_last")]
    pub session: Option<String>,

    /// Resume the most recently updated session: its stored context, then the new prompt.
    #[arg(long = "continue", short = 'c')]
    pub continue_last: bool,

    /// Title of a new session (default: derived from the prompt).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// Which tool calls run without asking. `mutating` (default): read-only tools run, mutating
    /// ones (write_file, edit_file, shell) are asked about on the terminal — and denied, with a
    /// reason the model sees, when there is no terminal. `never`: mutating calls are always
    /// denied. `always`: everything runs.
    #[arg(long, value_enum, default_value_t = ApproveArg::Mutating, value_name = "POLICY")]
    pub approve: ApproveArg,

    /// Print exactly one JSON object per agent event per line on stdout, nothing else; the
    /// `agent_start` line carries the session id and a final `result` line sums the run up.
    #[arg(long)]
    pub json: bool,

    /// Print only the final answer on stdout; progress, tool calls and the summary go to
    /// stderr.
    #[arg(long, short = 'q', conflicts_with = "json")]
    pub quiet: bool,

    /// Also write the final answer to this file.
    #[arg(long, value_name = "FILE")]
    pub output_last_message: Option<PathBuf>,

    /// Do not add AGENTS.md / CLAUDE.md files (workspace up to the repository root) to the
    /// system prompt.
    #[arg(long)]
    pub no_project_instructions: bool,

    /// Never compact the context (by default older turns are summarised when the context
    /// reaches `--compact-at` of the model's window, or when the provider reports an overflow).
    #[arg(long)]
    pub no_compaction: bool,

    /// Fraction of the context window at which to compact.
    #[arg(long, default_value_t = 0.8, value_name = "FRACTION", value_parser = parse_fraction)]
    pub compact_at: f64,

    /// The model's context window in tokens (default: from a built-in table of known models;
    /// unknown models then compact only on an overflow error).
    #[arg(long, value_name = "TOKENS", value_parser = clap::value_parser!(u64).range(1..))]
    pub context_window: Option<u64>,

    /// Turns kept verbatim when compacting.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub keep_turns: usize,
}

fn parse_fraction(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(f) if f > 0.0 && f <= 1.0 => Ok(f),
        _ => Err("expected a number in (0, 1], e.g. 0.8".into()),
    }
}

/// `agentloop compact`.
#[derive(Args, Debug)]
pub struct CompactArgs {
    /// Session id (or a unique prefix).
    pub session: String,
    /// The model that writes the summary (`PROVIDER:NAME`).
    #[arg(
        long,
        short = 'm',
        env = "AGENTLOOP_MODEL",
        default_value = "openai:gpt-4o-mini",
        value_name = "PROVIDER:NAME"
    )]
    pub model: String,
    /// Base URL of the provider API.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Turns kept verbatim.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub keep_turns: usize,
}

/// `--reasoning` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReasoningArg {
    /// No reasoning.
    Off,
    /// The least the provider offers.
    Minimal,
    /// Low effort.
    Low,
    /// Medium effort.
    Medium,
    /// High effort.
    High,
    /// The most the provider offers.
    Xhigh,
}

impl From<ReasoningArg> for ReasoningLevel {
    fn from(arg: ReasoningArg) -> Self {
        match arg {
            ReasoningArg::Off => ReasoningLevel::Off,
            ReasoningArg::Minimal => ReasoningLevel::Minimal,
            ReasoningArg::Low => ReasoningLevel::Low,
            ReasoningArg::Medium => ReasoningLevel::Medium,
            ReasoningArg::High => ReasoningLevel::High,
            ReasoningArg::Xhigh => ReasoningLevel::Xhigh,
        }
    }
}

/// `--approve` values.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApproveArg {
    /// Deny every mutating call.
    Never,
    /// Ask about mutating calls on the terminal (deny without one).
    Mutating,
    /// Allow every call.
    Always,
}

impl From<ApproveArg> for ApprovalPolicy {
    fn from(arg: ApproveArg) -> Self {
        match arg {
            ApproveArg::Never => ApprovalPolicy::Never,
            ApproveArg::Mutating => ApprovalPolicy::Mutating,
            ApproveArg::Always => ApprovalPolicy::Always,
        }
    }
}

/// `agentloop sessions …`. Session ids may be abbreviated to any unique prefix.
#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// List sessions, most recently updated first.
    List {
        /// One JSON object (the session's metadata) per line.
        #[arg(long)]
        json: bool,
    },
    /// Print a session's transcript.
    Show {
        /// Session id (or a unique prefix).
        id: String,
        /// Show the context the model sees (after compaction) instead of the full history.
        #[arg(long)]
        context: bool,
    },
    /// Write a session as JSON Lines to stdout (a header line, then one message per line).
    Export {
        /// Session id (or a unique prefix).
        id: String,
    },
    /// Import a JSON Lines export (`-` for stdin) as a new session; prints the new id.
    Import {
        /// The file to read.
        file: PathBuf,
    },
    /// Delete a session.
    Rm {
        /// Session id (or a unique prefix).
        id: String,
    },
}

/// `agentloop demo`.
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Print the agent events as JSON lines on stdout (like `run --json`); the labels go to
    /// stderr.
    #[arg(long)]
    pub json: bool,
    /// Keep the demo session: record it into the session database (`--db` or the default one)
    /// with the title "demo". Without it the session goes to a temporary database that is
    /// deleted at the end.
    #[arg(long)]
    pub keep_session: bool,
}

/// `agentloop mock-server`.
#[derive(Args, Debug)]
pub struct MockServerArgs {
    /// The script (JSON; the format of the agentloop-testkit crate).
    #[arg(long, value_name = "FILE")]
    pub script: PathBuf,
    /// The port (0: any free port).
    #[arg(long, default_value_t = 0)]
    pub port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: std::net::IpAddr,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn session_and_continue_conflict() {
        let parsed =
            Cli::try_parse_from(["agentloop", "run", "hi", "--session", "x", "--continue"]);
        assert!(parsed.is_err());
    }
}
