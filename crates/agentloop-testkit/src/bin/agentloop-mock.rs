//! `agentloop-mock`: serve a script over HTTP until killed.
//!
//! Prints `listening on http://HOST:PORT` as its first stdout line (flushed), then serves until
//! SIGINT (ctrl-c) or SIGTERM, and exits 0.

use std::io::Write;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use agentloop_testkit::{MockServer, Script};
use clap::Parser;

/// A mock LLM provider server (OpenAI Chat Completions, OpenAI Responses, Anthropic Messages)
/// driven by a JSON script.
#[derive(Parser, Debug)]
#[command(name = "agentloop-mock", version)]
struct Args {
    /// The script file (JSON; see the agentloop-testkit README).
    #[arg(long)]
    script: PathBuf,
    /// The port to listen on (0: any free port).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// The address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Worker threads of the server runtime.
    #[arg(long, default_value_t = 2)]
    workers: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let script = match Script::from_file(&args.script) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentloop-mock: {e}");
            return ExitCode::from(2);
        }
    };
    let server = match MockServer::builder(script)
        .host(args.host)
        .port(args.port)
        .worker_threads(args.workers)
        // A long-running server must not grow without bound.
        .record_requests(false)
        .start()
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("agentloop-mock: {e}");
            return ExitCode::from(1);
        }
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on {}", server.base_url());
    let _ = out.flush();
    drop(out);

    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("agentloop-mock: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(wait_for_signal());
    let served = server.request_count();
    let violations = server.violations();
    server.shutdown();
    eprintln!(
        "agentloop-mock: stopped after {served} requests, {} invariant violations",
        violations.len()
    );
    for v in violations {
        eprintln!("  {v}");
    }
    ExitCode::SUCCESS
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
