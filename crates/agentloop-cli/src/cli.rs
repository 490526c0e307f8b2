//! The command line: every subcommand, flag and default, as clap derive types. Parsing only;
//! nothing here touches the network, the disk or the terminal.

use std::path::PathBuf;
use std::time::Duration;

use agentloop::builtin::{ApprovalPolicy, SandboxMode};
use agentloop::model::ReasoningLevel;
use agentloop::output::OutputStrategy;
use clap::{Args, Parser, Subcommand, ValueEnum};

/// `agentloop --version`: the package version, the commit and the build date (see build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("AGENTLOOP_COMMIT"),
    ", built ",
    env!("AGENTLOOP_BUILD_DATE"),
    ")"
);

/// The one description of the global `--store` option (hidden from each subcommand's list).
const STORE_HELP: &str = "\
Global option (before or after any subcommand):
      --store <PATH|URL>  The session store: a SQLite file path, or a PostgreSQL URL
                          (postgres://user:password@host:port/database). Default:
                          $XDG_DATA_HOME/agentloop/sessions.db, else
                          ~/.local/share/agentloop/sessions.db. Environment: AGENTLOOP_STORE;
                          --db and AGENTLOOP_DB are older names for it.";

/// Run LLM agents with workspace-confined file tools and a sandboxed shell (Linux), and manage
/// their recorded sessions.
///
/// Start with `agentloop demo`: a real agent loop, real tools, real HTTP — against a scripted
/// mock model, so it needs no API key and no network.
#[derive(Parser, Debug)]
#[command(
    name = "agentloop",
    version = VERSION,
    after_help = STORE_HELP,
    mut_args = crate::help::shorten_arg,
    mut_subcommands = crate::help::shorten_command
)]
pub struct Cli {
    /// The session store (see the end of `agentloop --help`).
    #[arg(
        long,
        global = true,
        // Said once, in the top-level help, not under every subcommand.
        hide = true,
        alias = "db",
        env = "AGENTLOOP_STORE",
        // The value may hold a password: never print it in --help.
        hide_env_values = true,
        value_name = "PATH|URL"
    )]
    pub store: Option<String>,

    /// Apply the workspace's own configuration (`.agentloop/config.toml` …) in full for this
    /// invocation, as if the directory were trusted; nothing is recorded (see `agentloop
    /// trust`). For scripts that run in a checkout they vouch for.
    #[arg(long, global = true)]
    pub trust_project: bool,

    /// What to do (none, on a terminal: `chat`).
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands.
#[derive(Subcommand, Debug)]
// Parsed once per process: the size of the `run` variant does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Run an agent on a prompt. The file tools are confined to a workspace directory; `shell`
    /// commands are sandboxed on Linux as `--sandbox` says (default: writes only in the workspace
    /// and the temporary directory, no TCP network).
    Run(RunArgs),
    /// Serve the Agent Client Protocol on stdin/stdout for an editor (Zed, JetBrains, Neovim):
    /// each editor session is a stored session in the editor's directory, run with the flags
    /// and config files of `run`; approvals are asked in the editor.
    #[cfg(feature = "acp")]
    Acp(RunArgs),
    /// A conversation on the terminal (what bare `agentloop` opens): line editing and history,
    /// Markdown answers, Ctrl-C cancels the turn, Ctrl-D exits, `/help` lists the slash
    /// commands; typing while the agent works steers it. Takes the flags of `run`.
    Chat(RunArgs),
    /// List, show, export, import or delete recorded sessions.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// A scripted demo: the real loop and the real tools on a temporary sample project, with a
    /// mock model server replaying a fixed script (no key, no network).
    #[cfg(feature = "demo")]
    Demo(DemoArgs),
    /// The tool calls parked for approval: `agentloop approvals` lists them (all sessions);
    /// `approvals list [SESSION]`, `approvals approve …`, `approvals deny …` (`--all`).
    Approvals(ApprovalsArgs),
    /// Approve pending tool calls of a session (then `agentloop resume SESSION`).
    Approve(ApproveArgs),
    /// Deny a pending tool call of a session; the model sees the reason.
    Deny(DenyArgs),
    /// Continue a session: one that stopped awaiting approval runs the approved calls, answers
    /// the denied ones and lets the agent go on; any other (on a terminal) continues in chat.
    /// No id, on a terminal: pick one of this workspace's sessions.
    Resume(ResumeArgs),
    /// Summarise a session's older turns now (context compaction); the full history stays
    /// stored and resuming uses the summary.
    Compact(CompactArgs),
    /// The workspace checkpoints of a session (default: this directory's last session): one
    /// per mutating tool call, with the files it changed.
    Checkpoints(crate::commands::checkpoints::CheckpointsArgs),
    /// Put the workspace files back as they were before a checkpoint and fork the conversation
    /// there. Files changed since by anyone but the agent are skipped unless `--force`.
    Rewind(crate::commands::checkpoints::RewindArgs),
    /// What a session (default: this directory's last session) changed in the workspace, from
    /// its checkpoints: a unified diff of text files, one line per binary or large one.
    Diff(crate::commands::checkpoints::DiffArgs),
    /// Serve a mock model script over HTTP (OpenAI Chat, OpenAI Responses and Anthropic
    /// wires) until Ctrl-C.
    #[cfg(feature = "demo")]
    MockServer(MockServerArgs),
    /// MCP servers from the config files: `agentloop mcp list`.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Serve the built-in tools (confined to a workspace) over MCP on stdin/stdout.
    McpServer(McpServerArgs),
    /// List the models a provider's API offers (`GET /models`), one id per line.
    Models(ModelsArgs),
    /// The configuration files: `agentloop config show`.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Trust a directory (default: the current one): its own `.agentloop/config.toml`, MCP
    /// servers and other project files then take full effect. Until then they may only narrow
    /// your own settings. Recorded with a hash of those files: when they change, the directory
    /// must be trusted again. `--revoke` withdraws the trust, `--list` shows every trusted one.
    Trust(crate::config::trust::TrustArgs),
    /// Print a completion script for a shell. Bash: `agentloop completions bash >
    /// ~/.local/share/bash-completion/completions/agentloop`; zsh: into a directory of
    /// `$fpath` as `_agentloop`; fish: `~/.config/fish/completions/agentloop.fish`.
    Completions(CompletionsArgs),
    /// Print the man page (roff). Read it with `agentloop man | man -l -`, or install it as
    /// `agentloop.1` in a `man1` directory.
    Man,
    /// Skills (directories with a SKILL.md) the agent can load: `agentloop skills list`.
    #[command(subcommand)]
    Skills(SkillsCommand),
    /// The isolated workspaces of sub-agents whose file says `isolation: worktree` (git
    /// worktrees, or copies outside git, under the data directory): `agentloop worktrees list`,
    /// `agentloop worktrees prune [--older-than 7d]`.
    #[command(subcommand)]
    Worktrees(WorktreesCommand),
}

/// `agentloop worktrees …`.
#[derive(Subcommand, Debug)]
pub enum WorktreesCommand {
    /// List them, oldest first: id, creation time (UTC), state, branch, directory.
    List {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
    /// Remove those whose sub-agent has ended (their branches stay: they hold the work).
    Prune {
        /// Only those created longer ago than this (`90m`, `12h`, `7d`; a bare number is
        /// seconds).
        #[arg(long, value_name = "DURATION", value_parser = crate::commands::worktrees::parse_age)]
        older_than: Option<Duration>,
    },
}

/// `agentloop skills …`.
#[derive(Subcommand, Debug)]
pub enum SkillsCommand {
    /// List the skills for a workspace: name, description, directory.
    List {
        /// The workspace (default: the current directory).
        #[arg(long, short = 'w', value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
    },
}

/// `agentloop completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `agentloop config …`.
#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print the effective settings of `agentloop run` and where each comes from (flag
    /// environment, profile, workspace file, user file, default).
    Show(ConfigShowArgs),
}

/// `agentloop config show`.
#[derive(Args, Debug)]
pub struct ConfigShowArgs {
    /// The workspace whose `.agentloop/config.toml` applies (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Show this profile's settings (default: the config files' `profile` key).
    #[arg(long, env = "AGENTLOOP_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,

    /// Whether the workspace's own files apply (decided while parsing).
    #[arg(skip)]
    pub trust: crate::config::trust::Trust,
}

/// `agentloop run`.
#[derive(Args, Debug)]
pub struct RunArgs {
    /// The prompt (`-` reads it from standard input). `run` without one reads it from piped
    /// standard input; `chat` starts with it when given.
    pub prompt: Option<String>,

    /// The workspace and the model.
    #[command(flatten)]
    pub target: RunTarget,

    /// Use the settings of `[profiles.NAME]` from the config files (`~/.config/agentloop/config.toml`,
    /// `<workspace>/.agentloop/config.toml`); flags still win. Default: the files' `profile` key.
    #[arg(long, env = "AGENTLOOP_PROFILE", value_name = "NAME")]
    pub profile: Option<String>,

    /// Base URL of the provider API (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL). OpenAI
    /// URLs include `/v1`, Anthropic's do not.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// A model to try when the model fails before answering (after its retries, or at once
    /// for an error retries cannot fix: 401, context overflow). Repeatable: tried in order.
    /// A fallback of the same provider family uses `--base-url` too; others read their
    /// `*_BASE_URL`/`*_API_KEY` variables.
    #[arg(long = "fallback-model", value_name = "PROVIDER:NAME")]
    pub fallback_model: Vec<String>,

    /// Do not use the provider's prompt cache. By default Anthropic requests carry cache
    /// breakpoints (system prompt, tool list, newest user turn) and OpenAI requests the
    /// session id as `prompt_cache_key`.
    #[arg(long)]
    pub no_prompt_cache: bool,

    /// System prompt (replaces the default one, which describes the workspace).
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,

    /// How hard the model should think (providers that support it).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub reasoning: Option<ReasoningArg>,

    /// Stop after this many model calls (exit code 1 if work was left). `0` or `none`: no limit.
    #[arg(long, value_name = "N", default_value = DEFAULT_MAX_TURNS, value_parser = parse_max_turns)]
    pub max_turns: MaxTurns,

    /// Stop before the model call after this many calls in this run (exit code 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_requests: Option<u32>,

    /// Stop before the next model call once the run's prompt tokens (cached ones included)
    /// reach this many.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_input_tokens: Option<u64>,

    /// Stop before the next model call once the run's output tokens reach this many.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_output_tokens: Option<u64>,

    /// Stop before the next model call once the run's prompt plus output tokens reach this many.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_total_tokens: Option<u64>,

    /// Stop before the next model call once the run has cost this many US dollars (models
    /// without a known price count as free).
    #[arg(long, value_name = "USD", value_parser = parse_cost)]
    pub max_cost: Option<f64>,

    /// Put message contents (prompts, answers, tool arguments and results) on the exported
    /// OpenTelemetry spans. Off by default: they contain user data.
    #[arg(long, env = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")]
    pub trace_content: bool,

    /// Resume this session (any workspace): an exact id, else a unique id prefix (an ambiguous
    /// prefix is an error listing the candidates). Its model, provider, base URL and reasoning
    /// come back with it unless given as flags here (an imported session's provider and base
    /// URL do not: give them again). No match: a name such as `fix-login`
    /// starts a new session with that id; something that looks like an abbreviated id (only hex
    /// digits and dashes) is an error instead, and nothing is created — add `--create` to use
    /// it as a new id anyway.
    #[arg(long, value_name = "ID", conflicts_with = "continue_last")]
    pub session: Option<String>,

    /// With `--session ID`: take ID exactly (no prefix matching) and create the session when it
    /// does not exist.
    #[arg(long, requires = "session")]
    pub create: bool,

    /// Resume the most recently updated session of this workspace in which the model replied
    /// (a run that failed before any reply is skipped, and so is an imported session not yet
    /// resumed here with `--session`), with the model, provider, base URL and
    /// reasoning stored with it; flags given here win and are stored for next time. A base URL
    /// is stored without its `user:password@`, so give such a URL again with `--base-url`.
    #[arg(long = "continue", short = 'c')]
    pub continue_last: bool,

    /// Resume a session: with ID, as `--session ID`; alone (on a terminal), pick one of this
    /// workspace's sessions from a list, most recent first (`agentloop --resume`).
    #[arg(
        long,
        value_name = "ID",
        num_args = 0..=1,
        conflicts_with_all = ["session", "continue_last"]
    )]
    pub resume: Option<Option<String>>,

    /// Title of a new session (default: derived from the prompt).
    #[arg(long, value_name = "TEXT")]
    pub title: Option<String>,

    /// Which tool calls run without asking. `ask` (default): read-only tools run, mutating ones
    /// (write_file, edit_file, shell) are asked about on the terminal, showing the whole command
    /// or a diff — and denied, with a reason the model sees, when there is no terminal (the run
    /// then exits with code 4). `deny`: mutating calls are denied without asking. `allow`:
    /// everything runs, no questions. `defer`: the run stops at the first batch with a mutating
    /// call (after running the read-only ones), prints the pending calls and exits with code 3;
    /// decide with `agentloop approve` / `agentloop deny`, continue with `agentloop resume
    /// SESSION` (or `run --continue`). The old names `mutating`, `never` and `always` still work
    /// (deprecated).
    #[arg(long, value_enum, default_value_t = ApproveArg::Ask, value_name = "POLICY")]
    pub approve: ApproveArg,

    /// Print exactly one JSON object per agent event per line on stdout, nothing else; the
    /// `agent_start` line carries the session id and a final `result` line sums the run up
    /// (with `--output-schema`, one more line before it: `{"type": "output", "output": …}`).
    /// `--json=compact` leaves out what other lines already carried: the message of
    /// `message_start` (its role stays), the message and results of `turn_end`, and the
    /// transcript of `agent_end`. Every event and field: docs/JSON_EVENTS.md.
    #[arg(
        long,
        value_enum,
        value_name = "FORM",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "full"
    )]
    pub json: Option<JsonForm>,

    /// How shell commands are confined (Linux, Landlock). `workspace-write` (default): writes
    /// only inside the workspace and the temporary directory, no network (TCP). `read-only`:
    /// no writes at all, no network. `full-access`: no sandbox. Where the kernel cannot enforce
    /// it, a warning line says what is missing. The file tools are always confined to the
    /// workspace, whatever this says.
    #[arg(long, default_value = "workspace-write", value_name = "MODE")]
    pub sandbox: SandboxMode,

    /// Let this environment variable of the agent reach shell commands. Commands get a fresh
    /// environment: only `PATH`, `HOME`, `USER`, `LOGNAME`, `SHELL`, `LANG`, `LANGUAGE`, `LC_*`,
    /// `TERM`, `COLORTERM`, `NO_COLOR`, `TMPDIR`, `TZ` and toolchain homes (`CARGO_HOME`,
    /// `RUSTUP_HOME`, `GOPATH`, `JAVA_HOME`, …) pass, and not even those when the name or value
    /// looks like a credential (`*_API_KEY`, `*_TOKEN`, `*_SECRET`, `*_PASSWORD`, `PGPASSWORD`,
    /// `*_PWD`, `*_DSN`, `*_WEBHOOK_URL`, `*_AUTH`, `*_COOKIE`, `NPM_CONFIG__AUTH*`,
    /// `SSH_AUTH_SOCK`, provider keys, a URL with `user:password@`). A name given here passes
    /// whatever it looks like (except the key this CLI uses). Repeatable.
    #[arg(long = "shell-env-allow", value_name = "NAME")]
    pub shell_env_allow: Vec<String>,

    /// Leave background jobs running when a run ends and when agentloop exits. By default a
    /// job the model started (shell with `"background": true`) is killed, with every process
    /// it started, when its run ends, on Ctrl-C and on SIGTERM; with this flag only `job_kill`
    /// ends it, and in chat later turns can still read it.
    #[arg(long)]
    pub keep_jobs: bool,

    /// Do not record workspace checkpoints (by default every mutating tool call is preceded by
    /// one, for `agentloop rewind` and `diff`).
    #[arg(long)]
    pub no_checkpoints: bool,

    /// `plan`: only read-only tools are offered (plus `update_plan`), shell commands run in the
    /// `read-only` sandbox, and the model is asked for a plan instead of changes; `run` ends
    /// with the plan, `chat` asks whether to accept it and then switches back to `normal`
    /// (also `/plan` in chat). Default `normal`.
    #[arg(long, value_enum, default_value = "normal", value_name = "MODE")]
    pub mode: crate::plan::Mode,

    /// The answer must be a JSON value matching this JSON Schema file: stdout then carries only
    /// the validated JSON (events and text go to stderr, unless `--json`). Invalid output goes
    /// back to the model with its violations; when it never produces a valid one, the exit
    /// code is 1 and the violations are printed on stderr.
    #[arg(long, value_name = "FILE.json")]
    pub output_schema: Option<PathBuf>,

    /// How the model is asked for the `--output-schema` output: `auto` (per provider),
    /// `native` (the provider's structured output), `tool` (a final-result tool) or `prompted`.
    #[arg(
        long,
        value_name = "STRATEGY",
        requires = "output_schema",
        default_value = "auto"
    )]
    pub output_strategy: OutputStrategy,

    /// How many times the model may repair an invalid `--output-schema` output.
    #[arg(long, value_name = "N", requires = "output_schema", default_value_t = agentloop::output::DEFAULT_OUTPUT_RETRIES)]
    pub output_retries: u32,

    /// Add an MCP server: `NAME=COMMAND [ARGS…]` (stdio) or `NAME=URL` (streamable HTTP).
    /// Repeatable; wins over `[mcp_servers.NAME]` in the config files.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL")]
    pub mcp: Vec<String>,

    /// Answer MCP servers' requests for user input (elicitation) with the form's default values
    /// (declined when a required field has none). Without it they are declined at once.
    #[arg(long = "elicitation-defaults")]
    pub elicitation_defaults: bool,

    /// Print only the final answer on stdout; progress, tool calls and the summary go to
    /// stderr.
    #[arg(long, short = 'q', conflicts_with = "json")]
    pub quiet: bool,

    /// Attach an image (PNG, JPEG, GIF or WebP, up to 5 MB) to the prompt; repeatable.
    #[arg(long = "image", value_name = "FILE")]
    pub images: Vec<PathBuf>,

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

    /// Which of the settings a session stores were given explicitly (filled in by
    /// `config::layers::parse`, not a flag).
    #[arg(skip)]
    pub explicit: Explicit,

    /// Whether the workspace's own files apply (decided by `config::layers::parse`, not a flag).
    #[arg(skip)]
    pub trust: crate::config::trust::Trust,
}

/// The flags `run` (with `chat` and `acp`) and `resume` share: where the tools work and which
/// model answers. `resume` words the model's help for a stored session (`resume_model_help`).
#[derive(Args, Debug)]
pub struct RunTarget {
    /// The directory the tools may read and change (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// `PROVIDER:NAME`, e.g. `openai:gpt-4o-mini`, `openai-responses:gpt-5`,
    /// `anthropic:claude-sonnet-4-5`, `gemini:gemini-2.5-flash`. `openai` also covers compatible
    /// servers (Ollama, vLLM, llama.cpp, OpenRouter) with `--base-url`.
    #[arg(
        long,
        short = 'm',
        env = "AGENTLOOP_MODEL",
        default_value = "openai:gpt-4o-mini",
        value_name = "PROVIDER:NAME"
    )]
    pub model: String,
}

impl RunTarget {
    /// The workspace directory: `--workspace`, else the current directory.
    pub fn root(&self) -> std::io::Result<PathBuf> {
        match &self.workspace {
            Some(dir) => Ok(dir.clone()),
            None => std::env::current_dir(),
        }
    }
}

/// `resume --model`'s own help (the session's stored model is its default). Set by mapping
/// every argument, which keeps their order (`Command::mut_arg` would move it last, and the
/// completion scripts list arguments in that order).
fn resume_model_help(arg: clap::Arg) -> clap::Arg {
    if arg.get_id() == "model" {
        arg.help(
            "`PROVIDER:NAME` (as for `run`; default: the session's stored model, else \
             `openai:gpt-4o-mini`)",
        )
    } else {
        arg
    }
}

/// Which session-stored settings the user gave on this invocation — typed as a flag, through
/// its environment variable, or from a profile chosen with `--profile`/`AGENTLOOP_PROFILE`.
/// These win over the settings stored with a resumed session; defaults and values from the
/// config files' top level (or their `profile` key) do not.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Explicit {
    /// `--model` / `AGENTLOOP_MODEL`.
    pub model: bool,
    /// `--base-url`.
    pub base_url: bool,
    /// `--reasoning`.
    pub reasoning: bool,
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
    /// The model that writes the summary (`PROVIDER:NAME`). Default: the session's own model
    /// (and its base URL), else `openai:gpt-4o-mini`.
    #[arg(
        long,
        short = 'm',
        env = "AGENTLOOP_MODEL",
        value_name = "PROVIDER:NAME"
    )]
    pub model: Option<String>,
    /// Base URL of the provider API. Default: the session's, when the model is the session's
    /// provider.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Turns kept verbatim.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub keep_turns: usize,
}

/// A `--max-cost` amount: a finite number of US dollars above zero (a leading `$` is allowed).
fn parse_cost(text: &str) -> Result<f64, String> {
    let amount: f64 = text
        .trim()
        .trim_start_matches('$')
        .parse()
        .map_err(|_| format!("{text:?} is not an amount of US dollars (e.g. 0.50)"))?;
    if amount.is_finite() && amount > 0.0 {
        Ok(amount)
    } else {
        Err(format!("the cost limit must be above zero (got {text})"))
    }
}

/// `agentloop mcp …`.
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Show each configured MCP server, whether it starts, and its tools.
    List(McpListArgs),
    /// Authorize agentloop with a streamable-HTTP server that asks for OAuth: prints the
    /// authorization URL (and opens a browser), receives the code on 127.0.0.1, stores the
    /// tokens (mode 0600) under the data directory's `agentloop/mcp-tokens/`.
    Login(McpLoginArgs),
    /// Forget the tokens stored for a server.
    Logout(McpLogoutArgs),
}

/// `agentloop mcp login NAME`.
#[derive(Args, Debug)]
pub struct McpLoginArgs {
    /// The server, as named in `[mcp_servers.NAME]`.
    pub name: String,

    /// Only print the authorization URL; do not try to open a browser.
    #[arg(long)]
    pub no_browser: bool,

    /// The workspace whose `.agentloop/config.toml` is read (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Whether the workspace's own files apply (decided while parsing).
    #[arg(skip)]
    pub trust: crate::config::trust::Trust,
}

/// `agentloop mcp logout NAME`.
#[derive(Args, Debug)]
pub struct McpLogoutArgs {
    /// The server, as named in `[mcp_servers.NAME]`.
    pub name: String,

    /// The workspace whose `.agentloop/config.toml` is read (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Whether the workspace's own files apply (decided while parsing).
    #[arg(skip)]
    pub trust: crate::config::trust::Trust,
}

/// `agentloop mcp list`.
#[derive(Args, Debug)]
pub struct McpListArgs {
    /// The workspace whose `.agentloop/config.toml` is read (default: the current directory).
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: Option<PathBuf>,

    /// Extra servers, as on `agentloop run`.
    #[arg(long = "mcp", value_name = "NAME=COMMAND|URL")]
    pub mcp: Vec<String>,

    /// Whether the workspace's own files apply (decided while parsing).
    #[arg(skip)]
    pub trust: crate::config::trust::Trust,
}

/// `agentloop mcp-server`.
#[derive(Args, Debug)]
pub struct McpServerArgs {
    /// The directory the tools are confined to.
    #[arg(long, short = 'w', value_name = "DIR")]
    pub workspace: PathBuf,

    /// Which calls run: there is no terminal to ask on, so `ask` (the default) and `deny`
    /// refuse mutating calls, `allow` runs them.
    #[arg(long, value_enum, default_value_t = ApproveArg::Ask, value_name = "POLICY")]
    pub approve: ApproveArg,

    /// Serve over streamable HTTP at `http://ADDR/mcp` instead of stdio (e.g. `127.0.0.1:8765`;
    /// port 0 picks one, printed on stderr). Requests need a loopback `Host` and `Origin` (or an
    /// allowed one), and `Authorization: Bearer $AGENTLOOP_MCP_SERVER_TOKEN` when that is set.
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,

    /// With --listen: also allow this browser origin (e.g. `https://app.example.com`).
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "listen")]
    pub allow_origin: Vec<String>,

    /// With --listen: also allow this `Host` name (e.g. the machine's name on a public address).
    #[arg(long = "allow-host", value_name = "HOST", requires = "listen")]
    pub allow_host: Vec<String>,
}

/// `agentloop models`.
#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// `openai` (default; also any OpenAI-compatible server with `--base-url`),
    /// `openai-responses` (the same list), `anthropic` or `gemini`.
    #[arg(default_value = "openai", value_name = "PROVIDER")]
    pub provider: String,

    /// The provider's base URL, as for `run` (default: `{PROVIDER}_BASE_URL`, then the official
    /// endpoint).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,

    /// Print one JSON object per model (`{"id": …, "name": …, "created": …}`) instead of ids.
    #[arg(long)]
    pub json: bool,
}

/// `--json` forms.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonForm {
    /// Every event with everything it carries.
    Full,
    /// Without the transcript repeated in `message_start`, `turn_end` and `agent_end`.
    Compact,
}

/// A `--reasoning` value: one of the library's [`ReasoningLevel`]s, named and described for
/// clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasoningArg(pub ReasoningLevel);

impl ReasoningArg {
    /// The `--reasoning` value for `level` (`None` for a level this CLI has no value for).
    pub fn of(level: ReasoningLevel) -> Option<ReasoningArg> {
        let arg = ReasoningArg(level);
        arg.to_possible_value().map(|_| arg)
    }
}

impl ValueEnum for ReasoningArg {
    fn value_variants<'a>() -> &'a [Self] {
        use ReasoningLevel::*;
        &[
            ReasoningArg(Off),
            ReasoningArg(Minimal),
            ReasoningArg(Low),
            ReasoningArg(Medium),
            ReasoningArg(High),
            ReasoningArg(Xhigh),
        ]
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        let (name, help) = match self.0 {
            ReasoningLevel::Off => ("off", "No reasoning"),
            ReasoningLevel::Minimal => ("minimal", "The least the provider offers"),
            ReasoningLevel::Low => ("low", "Low effort"),
            ReasoningLevel::Medium => ("medium", "Medium effort"),
            ReasoningLevel::High => ("high", "High effort"),
            ReasoningLevel::Xhigh => ("xhigh", "The most the provider offers"),
            _ => return None,
        };
        Some(clap::builder::PossibleValue::new(name).help(help))
    }
}

impl From<ReasoningArg> for ReasoningLevel {
    fn from(arg: ReasoningArg) -> Self {
        arg.0
    }
}

/// The default `--max-turns`.
pub const DEFAULT_MAX_TURNS: &str = "100";

/// `--max-turns`: a ceiling on model calls, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxTurns(pub Option<u32>);

fn parse_max_turns(text: &str) -> Result<MaxTurns, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("none") || text.eq_ignore_ascii_case("unlimited") {
        return Ok(MaxTurns(None));
    }
    match text.parse::<u32>() {
        Ok(0) => Ok(MaxTurns(None)),
        Ok(n) => Ok(MaxTurns(Some(n))),
        Err(_) => Err(format!(
            "expected a number of model calls, or 0 / none for no limit; got {text:?}"
        )),
    }
}

/// `--approve` values. The old names are hidden aliases that print a deprecation note: `never`
/// read as "never ask" to people used to other agents, where it meant "never allow" here.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApproveArg {
    /// Read-only tools run; mutating calls are asked about on the terminal (denied without one).
    Ask,
    /// Mutating calls are denied without asking; read-only tools run.
    Deny,
    /// Every call runs, no questions.
    Allow,
    /// Deprecated name of `ask`.
    #[value(hide = true)]
    Mutating,
    /// Deprecated name of `deny`.
    #[value(hide = true)]
    Never,
    /// Deprecated name of `allow`.
    #[value(hide = true)]
    Always,
    /// Park mutating calls for a later decision (exit code 3).
    Defer,
}

impl ApproveArg {
    /// The one-line note to print when a deprecated name was used.
    pub fn deprecation(&self) -> Option<&'static str> {
        match self {
            ApproveArg::Mutating => Some("--approve mutating is deprecated; use --approve ask"),
            ApproveArg::Never => {
                Some("--approve never is deprecated (it means \"never allow\"); use --approve deny")
            }
            ApproveArg::Always => Some("--approve always is deprecated; use --approve allow"),
            _ => None,
        }
    }
}

impl From<ApproveArg> for ApprovalPolicy {
    fn from(arg: ApproveArg) -> Self {
        match arg {
            ApproveArg::Deny | ApproveArg::Never => ApprovalPolicy::Never,
            ApproveArg::Ask | ApproveArg::Mutating => ApprovalPolicy::Mutating,
            ApproveArg::Allow | ApproveArg::Always => ApprovalPolicy::Always,
            ApproveArg::Defer => ApprovalPolicy::Defer,
        }
    }
}

/// `agentloop sessions …`. Session ids may be abbreviated to any unique prefix; an ambiguous
/// prefix is an error listing the sessions it matches.
#[derive(Subcommand, Debug)]
pub enum SessionsCommand {
    /// List sessions, most recently updated first: id (abbreviated to a unique prefix), last
    /// update (UTC), workspace, model, model replies, tokens, cost and title. Every session by
    /// default; `-w` alone: only this directory's. A sub-agent's child session is listed
    /// indented under its parent session (`--all`: as a row of its own).
    List {
        /// Only the sessions recorded in DIR (`-w` without a value: the current directory).
        /// Sessions recorded before workspaces were stored have none and never match.
        #[arg(
            long,
            short = 'w',
            value_name = "DIR",
            num_args = 0..=1,
            default_missing_value = "."
        )]
        workspace: Option<PathBuf>,
        /// One JSON object (the session's metadata, settings and running totals) per line.
        #[arg(long)]
        json: bool,
        /// Every session as a row of its own, sub-agents' child sessions included (flat, most
        /// recently updated first) instead of nested under their parents.
        #[arg(long)]
        all: bool,
    },
    /// Print a session's transcript.
    Show {
        /// Session id (or a unique prefix).
        id: String,
        /// Show the context the model sees (after compaction) instead of the full history.
        #[arg(long)]
        context: bool,
        /// Every tool result whole: the full output of each call the model saw truncated, for
        /// the calls whose output is still kept (the last 50, at most 64 MiB; pruned ones say
        /// so).
        #[arg(long)]
        full: bool,
    },
    /// Print a session's messages, then each new one as it is appended (by any process: a run,
    /// a chat, a Restate worker), until Ctrl-C, `--until-idle` or `--until-done`. PostgreSQL
    /// stores announce new messages (LISTEN/NOTIFY); SQLite files are read every 100 ms.
    Follow {
        /// Session id (or a unique prefix).
        id: String,
        /// One JSON object per message per line: `{"seq": …, "created_ms": …, "message": …}`.
        #[arg(long)]
        json: bool,
        /// Only messages appended from now on (not those already stored).
        #[arg(long)]
        new: bool,
        /// Stop after this many seconds without a new message.
        #[arg(long, value_name = "SECS", value_parser = parse_seconds)]
        until_idle: Option<Duration>,
        /// Stop once no process is writing to the session (none holds its writer lock), after
        /// printing everything it wrote.
        #[arg(long)]
        until_done: bool,
    },
    /// Write a session as JSON Lines to stdout (a header line, then one message per line).
    Export {
        /// Session id (or a unique prefix).
        id: String,
    },
    /// Import a JSON Lines export (`-` for stdin) as a new session; prints the new id. The
    /// session is marked imported: its recorded provider and base URL are not used on resume.
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

/// A number of seconds (fractions allowed) as a duration.
fn parse_seconds(text: &str) -> Result<Duration, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .ok_or_else(|| format!("{text:?} is not a number of seconds"))
}

/// `agentloop approvals [list|approve|deny]` (bare: list every session's).
#[derive(Args, Debug)]
pub struct ApprovalsArgs {
    /// What to do (default: `list`).
    #[command(subcommand)]
    pub command: Option<ApprovalsCommand>,
}

/// `agentloop approvals …`.
#[derive(Subcommand, Debug)]
pub enum ApprovalsCommand {
    /// List pending calls in full: commands whole, file edits as diffs.
    List {
        /// Only this session (id or unique prefix).
        session: Option<String>,
        /// One JSON object per pending call per line.
        #[arg(long)]
        json: bool,
    },
    /// Approve pending calls of a session (as `agentloop approve`).
    Approve(ApproveArgs),
    /// Deny pending calls (as `agentloop deny`).
    Deny(DenyArgs),
}

/// `agentloop approve`.
#[derive(Args, Debug)]
pub struct ApproveArgs {
    /// Session id (or a unique prefix).
    pub session: String,
    /// The calls to approve.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub call_ids: Vec<String>,
    /// Approve every call still awaiting a decision.
    #[arg(long)]
    pub all: bool,
}

/// `agentloop deny`.
#[derive(Args, Debug)]
pub struct DenyArgs {
    /// Session id (or a unique prefix); with `--all` and no session, every session's.
    #[arg(required_unless_present = "all")]
    pub session: Option<String>,
    /// The calls to deny.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    pub call_ids: Vec<String>,
    /// Deny every call still awaiting a decision (of the session, else of every session).
    #[arg(long)]
    pub all: bool,
    /// Why (shown to the model).
    #[arg(long, value_name = "TEXT")]
    pub reason: Option<String>,
}

/// `agentloop resume`.
#[derive(Args, Debug)]
#[command(mut_args = resume_model_help)]
pub struct ResumeArgs {
    /// Session id (or a unique prefix). None, on a terminal: pick one of this workspace's
    /// sessions from a list.
    pub session: Option<String>,
    /// The workspace and the model (the session's stored one by default).
    #[command(flatten)]
    pub target: RunTarget,
    /// Base URL of the provider API (default: the session's stored one).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Stop after this many model calls.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_turns: Option<u32>,
    /// Approval policy for the calls the model makes from here on (as for `run`).
    #[arg(long, value_enum, default_value_t = ApproveArg::Defer, value_name = "POLICY")]
    pub approve: ApproveArg,
    /// JSON lines on stdout (as for `run`).
    #[arg(long)]
    pub json: bool,
    /// Which settings were given explicitly (the session's stored model, base URL and
    /// reasoning apply otherwise).
    #[arg(skip)]
    pub explicit: Explicit,
}

/// `agentloop demo`.
#[cfg(feature = "demo")]
#[derive(Args, Debug)]
pub struct DemoArgs {
    /// Print the agent events as JSON lines on stdout (like `run --json`); the labels go to
    /// stderr.
    #[arg(long)]
    pub json: bool,
    /// Keep the demo session: record it into the session store (`--store` or the default one)
    /// with the title "demo". Without it the session goes to a temporary database that is
    /// deleted at the end.
    #[arg(long)]
    pub keep_session: bool,
}

/// `agentloop mock-server`.
#[cfg(feature = "demo")]
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

/// Runs `f` on the clap definition of [`Cli`], built once per thread. Building it formats every
/// flag's and subcommand's help text (see `crate::help`), and reading one command line needs it
/// several times (the rewrite of other tools' shapes, the arguments as given, each config value
/// checked alone, the arguments with the config applied, a default looked up): built each time,
/// it was most of the start-up's own CPU. `f` must not call this again (the definition is
/// borrowed while it runs).
pub fn with_definition<T>(f: impl FnOnce(&mut clap::Command) -> T) -> T {
    use clap::CommandFactory;
    thread_local! {
        static DEFINITION: std::cell::RefCell<Option<clap::Command>> =
            const { std::cell::RefCell::new(None) };
    }
    DEFINITION.with(|cell| f(cell.borrow_mut().get_or_insert_with(Cli::command)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn approve_names_and_their_deprecated_aliases() {
        let parse = |v: &str| match Cli::try_parse_from(["agentloop", "run", "hi", "--approve", v])
            .map(|c| c.command)
        {
            Ok(Some(Command::Run(args))) => Some(args.approve),
            _ => None,
        };
        for (new, old) in [("ask", "mutating"), ("deny", "never"), ("allow", "always")] {
            let (new, old) = (parse(new).unwrap(), parse(old).unwrap());
            assert_eq!(ApprovalPolicy::from(new), ApprovalPolicy::from(old));
            assert!(new.deprecation().is_none());
            assert!(old.deprecation().is_some());
        }
        assert_eq!(
            ApprovalPolicy::from(parse("deny").unwrap()),
            ApprovalPolicy::Never
        );
        assert_eq!(
            ApprovalPolicy::from(parse("allow").unwrap()),
            ApprovalPolicy::Always
        );
        assert!(parse("yes").is_none());
    }

    #[test]
    fn max_turns_defaults_to_a_ceiling_and_zero_or_none_lift_it() {
        let parse = |extra: &[&str]| {
            let mut argv = vec!["agentloop", "run", "hi"];
            argv.extend_from_slice(extra);
            match Cli::try_parse_from(argv).map(|c| c.command) {
                Ok(Some(Command::Run(args))) => Some(args.max_turns),
                _ => None,
            }
        };
        assert_eq!(parse(&[]), Some(MaxTurns(Some(100))));
        assert_eq!(parse(&["--max-turns", "7"]), Some(MaxTurns(Some(7))));
        assert_eq!(parse(&["--max-turns", "0"]), Some(MaxTurns(None)));
        assert_eq!(parse(&["--max-turns", "none"]), Some(MaxTurns(None)));
        assert_eq!(parse(&["--max-turns", "-1"]), None);
    }

    #[test]
    fn resume_shares_the_run_flags_with_its_own_model_help_in_the_same_order() {
        let cli = Cli::command();
        let help_of = |command: &str| {
            let command = cli.find_subcommand(command).unwrap();
            let model = command.get_arguments().find(|a| a.get_id() == "model");
            model.and_then(|a| a.get_help()).map(ToString::to_string)
        };
        assert_eq!(
            help_of("resume").as_deref(),
            Some(
                "`PROVIDER:NAME` (as for `run`; default: the session's stored model, else \
                 `openai:gpt-4o-mini`)"
            )
        );
        assert!(
            help_of("run")
                .unwrap()
                .starts_with("`PROVIDER:NAME`, e.g. `openai:gpt-4o-mini`")
        );
        let resume = cli.find_subcommand("resume").unwrap();
        let ids: Vec<&str> = resume
            .get_arguments()
            .map(|a| a.get_id().as_str())
            .collect();
        assert_eq!(ids[..4], ["session", "workspace", "model", "base_url"]);
    }

    #[test]
    fn reasoning_values_name_the_library_levels() {
        let parse = |v: &str| ReasoningArg::from_str(v, false).map(ReasoningLevel::from);
        assert_eq!(parse("minimal"), Ok(ReasoningLevel::Minimal));
        assert_eq!(parse("xhigh"), Ok(ReasoningLevel::Xhigh));
        assert!(parse("none").is_err());
        for arg in ReasoningArg::value_variants() {
            assert_eq!(ReasoningArg::of(arg.0), Some(*arg));
        }
        assert_eq!(ReasoningArg::value_variants().len(), 6);
    }

    #[test]
    fn session_and_continue_conflict() {
        let parsed =
            Cli::try_parse_from(["agentloop", "run", "hi", "--session", "x", "--continue"]);
        assert!(parsed.is_err());
    }
}
