//! `agentloop acp`: agentloop as an Agent Client Protocol agent. An editor (Zed, JetBrains,
//! Neovim …) starts the process and speaks JSON-RPC 2.0 over its stdin and stdout; each ACP
//! session is an ordinary stored session of the CLI, run with the same model, tools, sandbox,
//! approval policy, MCP servers and config files as `agentloop run`.
//!
//! The protocol library's futures are not `Send`, so the connection runs on a Tokio
//! [`LocalSet`](tokio::task::LocalSet) on the CLI's single-threaded runtime. The agent loop's
//! callbacks (events, approval questions) must be `Send`, so they talk to the connection through
//! one ordered queue ([`outbound`]) that a local task drains. Stdout carries the protocol alone:
//! diagnostics go to stderr.

mod agent;
mod client_files;
mod client_terminals;
mod content;
mod modes;
mod outbound;
mod permission;
mod replay;
mod session;
mod stdout;
mod turn;
mod updates;
mod usage;

use std::rc::Rc;

use agent_client_protocol::AgentSideConnection;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::cli::RunArgs;
use crate::error::Failure;

/// `agentloop acp`: serves the protocol on stdin/stdout until the client closes stdin.
pub async fn serve(db: Option<&str>, args: RunArgs) -> Result<(), Failure> {
    if args.prompt.is_some() {
        return Err(Failure::usage(
            "agentloop acp takes no prompt: the editor sends them (session/prompt)",
        ));
    }
    let server = session::Server::open(db, args)?;
    // Killed by the editor (SIGTERM, SIGHUP …): no command a tool started outlives the process.
    let exit_signals = crate::commands::run::kill_on_exit_signals();
    let local = tokio::task::LocalSet::new();
    let result = local
        .run_until(async move {
            let (queue, receiver) = outbound::queue();
            let agent = agent::AcpAgent::new(server, queue);
            let (connection, io) = AgentSideConnection::new(
                agent,
                stdout::Stdout::new().compat_write(),
                tokio::io::stdin().compat(),
                |future| {
                    tokio::task::spawn_local(future);
                },
            );
            let drain = tokio::task::spawn_local(outbound::drain(Rc::new(connection), receiver));
            let result = io.await;
            drain.abort();
            result.map_err(|e| Failure::new(format!("the ACP connection failed: {e}")))
        })
        .await;
    exit_signals.abort();
    // The editor closed the connection: nothing a shell command started outlives it.
    agentloop::builtin::kill_shell_processes();
    result
}
