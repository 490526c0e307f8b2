//! `agentloop-mock`: serve a script over HTTP until killed.
//!
//! Prints `listening on http://HOST:PORT` as its first stdout line (flushed), then serves
//! HTTP/1.1 and h2c (HTTP/2 with prior knowledge) on that port until SIGINT (ctrl-c) or SIGTERM,
//! and exits 0.

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
    /// The most HTTP/2 streams one h2c connection may have open at once (announced as
    /// SETTINGS_MAX_CONCURRENT_STREAMS). Default 100000.
    #[arg(long = "h2-max-streams", value_name = "N")]
    h2_max_streams: Option<u32>,
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
    // The runtime that waits for signals and the signal handlers come before the server: once it
    // accepts connections, the descriptors they need may have run out.
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
    let signals = rt.block_on(async { Signals::register() });
    let mut builder = MockServer::builder(script)
        .host(args.host)
        .port(args.port)
        .worker_threads(args.workers)
        // A long-running server must not grow without bound.
        .record_requests(false);
    if let Some(n) = args.h2_max_streams {
        builder = builder.http2_max_concurrent_streams(n);
    }
    let server = match builder.start() {
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

    rt.block_on(signals.wait());
    eprintln!("agentloop-mock: {}", server.shutdown_report());
    ExitCode::SUCCESS
}

/// SIGINT (ctrl-c) and, on unix, SIGTERM.
struct Signals {
    #[cfg(unix)]
    handlers: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    /// Registers the handlers; call it within the runtime that will wait for them.
    fn register() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let handlers = match (
                signal(SignalKind::interrupt()),
                signal(SignalKind::terminate()),
            ) {
                (Ok(int), Ok(term)) => Some((int, term)),
                _ => None,
            };
            Signals { handlers }
        }
        #[cfg(not(unix))]
        {
            Signals {}
        }
    }

    /// Waits for the first signal.
    async fn wait(self) {
        #[cfg(unix)]
        if let Some((mut int, mut term)) = self.handlers {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = tokio::signal::ctrl_c().await;
    }
}
