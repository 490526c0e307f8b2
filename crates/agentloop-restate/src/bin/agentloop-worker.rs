//! `agentloop-worker`: serves agent runs to a Restate server.
//!
//! ```sh
//! agentloop-worker --listen 127.0.0.1:9080 --model openai:gpt-4o-mini --workspace ./repo \
//!     --store ./sessions.db   # or a PostgreSQL URL shared by every worker
//! # then register it: curl -X POST localhost:9070/deployments -H 'content-type: application/json' \
//! #     -d '{"uri": "http://127.0.0.1:9080"}'
//! ```

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use agentloop::builtin::{ApprovalPolicy, Workspace};
use agentloop::model::{Model, ReasoningLevel};
use agentloop::providers::{
    Anthropic, Gemini, OpenAiChat, OpenAiResponses, ProviderConfig, anthropic, gemini,
};
use agentloop::session::{SessionStore, StoreSpec};
use agentloop_restate::{Worker, WorkerConfig};
use clap::Parser;

/// Serve agent runs (the `AgentSession` virtual object and the `ToolExecutor` service) to a
/// Restate server: runs survive this process's death, approvals wait without holding it.
#[derive(Parser, Debug)]
#[command(name = "agentloop-worker", version)]
struct Args {
    /// Address the Restate server reaches this worker on.
    #[arg(long, default_value = "127.0.0.1:9080", value_name = "ADDR")]
    listen: SocketAddr,

    /// `PROVIDER:NAME` (`openai:`, `openai-responses:`, `anthropic:`, `gemini:`), as in `agentloop run`.
    #[arg(
        long,
        short = 'm',
        env = "AGENTLOOP_MODEL",
        default_value = "openai:gpt-4o-mini",
        value_name = "PROVIDER:NAME"
    )]
    model: String,

    /// Base URL of the provider API (overrides OPENAI_BASE_URL / ANTHROPIC_BASE_URL).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,

    /// The directory the tools work in (shared by every worker that may run a session's calls).
    #[arg(long, short = 'w', value_name = "DIR")]
    workspace: Option<PathBuf>,

    /// Which calls need a person: `ask` (default; mutating calls wait until
    /// `AgentSession/{id}/approve` decides), `deny` (mutating calls are denied), `allow`
    /// (everything runs).
    #[arg(long, default_value = "ask", value_name = "POLICY")]
    approve: String,

    /// Session store that completed messages are mirrored into: a SQLite file path, or a
    /// PostgreSQL URL (`postgres://user:password@host:port/database`) that several workers and
    /// `agentloop sessions follow` can share.
    #[arg(
        long,
        env = "AGENTLOOP_STORE",
        // The value may hold a password: never print it in --help.
        hide_env_values = true,
        value_name = "PATH|URL"
    )]
    store: Option<String>,

    /// System prompt (default: one describing the workspace).
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,

    /// Model-call ceiling per run (`0` for none).
    #[arg(long, default_value_t = 100, value_name = "N")]
    max_turns: u32,

    /// Reasoning effort (off, minimal, low, medium, high, xhigh).
    #[arg(long, value_name = "LEVEL")]
    reasoning: Option<ReasoningLevel>,

    /// Wait for the engine to journal each model reply before sending the next request. By
    /// default the next request leaves while the reply is being journaled (a turn costs one
    /// engine round trip less); a worker that dies in that window has then made one request
    /// for nothing.
    #[arg(long)]
    no_pipeline: bool,

    /// Do not offer the model the `task` tool. By default a run may delegate a task to a child
    /// agent (same model, tools and workspace), which runs as a durable invocation of its own.
    #[arg(long)]
    no_task: bool,
}

fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// The library's approval-policy words, without `defer`: a worker's `ask` already parks a
/// mutating call until `AgentSession/{id}/approve` decides.
fn policy(text: &str) -> Result<ApprovalPolicy, String> {
    match text.parse::<ApprovalPolicy>() {
        Ok(ApprovalPolicy::Defer) => Err(
            "approval policy `defer` is the CLI's; a worker's `ask` already waits for \
             AgentSession/{id}/approve"
                .to_owned(),
        ),
        Ok(policy) => Ok(policy),
        Err(e) => Err(format!("{e} (a worker takes ask, deny or allow)")),
    }
}

fn model(spec: &str, base_url: Option<&str>) -> Result<(Arc<dyn Model>, String), String> {
    let (provider, name) = spec.split_once(':').unwrap_or(("openai", spec));
    if name.trim().is_empty() {
        return Err(format!("--model {spec:?} names no model"));
    }
    let family = match provider {
        "openai" | "openai-chat" | "openai-responses" => "OPENAI",
        "anthropic" => "ANTHROPIC",
        "gemini" | "google" => "GEMINI",
        other => {
            return Err(format!(
                "unknown provider {other:?}: use openai:, openai-responses:, anthropic: or gemini:"
            ));
        }
    };
    let official = match family {
        "OPENAI" => "https://api.openai.com/v1",
        "GEMINI" => gemini::DEFAULT_BASE_URL,
        _ => anthropic::DEFAULT_BASE_URL,
    };
    let base = base_url
        .map(str::to_owned)
        .or_else(|| env_var(&format!("{family}_BASE_URL")))
        .unwrap_or_else(|| official.to_owned());
    let mut config = ProviderConfig::new(base).model(name);
    // Gemini: Google's SDKs read GOOGLE_API_KEY first, then GEMINI_API_KEY.
    let key = match family {
        "GEMINI" => env_var("GOOGLE_API_KEY").or_else(|| env_var("GEMINI_API_KEY")),
        _ => env_var(&format!("{family}_API_KEY")),
    };
    if let Some(key) = key {
        config = config.api_key(key);
    }
    let model: Arc<dyn Model> = match provider {
        "anthropic" => Arc::new(Anthropic::new(config)),
        "gemini" | "google" => Arc::new(Gemini::new(config)),
        "openai-responses" => Arc::new(OpenAiResponses::new(config)),
        _ => Arc::new(OpenAiChat::new(config)),
    };
    Ok((model, name.to_owned()))
}

async fn start(args: Args) -> Result<(), String> {
    let (model, model_name) = model(&args.model, args.base_url.as_deref())?;
    let root = match args.workspace {
        Some(dir) => dir,
        None => std::env::current_dir().map_err(|e| format!("no current directory: {e}"))?,
    };
    let workspace =
        Workspace::new(&root).map_err(|e| format!("workspace {}: {e}", root.display()))?;
    let store: Option<Arc<dyn SessionStore>> = match args.store.filter(|s| !s.trim().is_empty()) {
        Some(spec) => {
            let spec = StoreSpec::parse(&spec);
            // `spec` shows without its password, and so do the store's errors.
            Some(spec.open().map_err(|e| format!("store {spec}: {e}"))?)
        }
        None => None,
    };
    let config = WorkerConfig {
        model,
        model_name: Some(model_name),
        workspace,
        policy: policy(&args.approve)?,
        system_prompt: args.system,
        reasoning: args.reasoning,
        max_turns: (args.max_turns > 0).then_some(args.max_turns),
        store,
        pipeline_model_calls: !args.no_pipeline,
        task_tool: !args.no_task,
    };
    eprintln!("agentloop-worker listening on {}", args.listen);
    Worker::new(config)
        .serve(args.listen)
        .await
        .map_err(|e| e.to_string())
}

/// Logs to stderr what `RUST_LOG` selects (`target=level,…` or a bare level; `warn` when unset).
fn init_log() -> Result<(), String> {
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;

    let filter: Targets = match env_var("RUST_LOG") {
        Some(spec) => spec
            .parse()
            .map_err(|e| format!("RUST_LOG={spec:?} is not a log filter: {e}"))?,
        None => "warn".parse().map_err(|e| format!("{e}"))?,
    };
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())),
        )
        .with(filter)
        .try_init()
        .map_err(|e| format!("cannot start logging: {e}"))
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(message) = init_log() {
        eprintln!("agentloop-worker: {message}");
        return ExitCode::from(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("agentloop-worker: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(start(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("agentloop-worker: {message}");
            ExitCode::from(2)
        }
    }
}
