//! `agentloop mock-server`: the testkit's mock model server, serving a script until Ctrl-C.
//! Prints its address first (one line, flushed), so scripts can read it.

use agentloop_testkit::{MockServer, Script};

use crate::cli::MockServerArgs;
use crate::error::Failure;
use crate::ui::render::out;

/// `agentloop mock-server`.
pub async fn run(args: MockServerArgs) -> Result<(), Failure> {
    let script = Script::from_file(&args.script).map_err(|e| Failure::usage(e.to_string()))?;
    let server = MockServer::builder(script)
        .host(args.host)
        .port(args.port)
        // A long-running server must not grow without bound.
        .record_requests(false)
        .start()
        .map_err(|e| Failure::new(format!("cannot start the mock server: {e}")))?;
    out(&format!("listening on {}\n", server.base_url()));
    eprintln!(
        "OpenAI base URL: {} (e.g. agentloop run --model openai:mock --base-url {} …); \
         Anthropic base URL: {}. Ctrl-C stops.",
        server.openai_base_url(),
        server.openai_base_url(),
        server.base_url()
    );
    tokio::signal::ctrl_c()
        .await
        .map_err(|e| Failure::new(format!("cannot wait for Ctrl-C: {e}")))?;
    eprintln!("{}", server.shutdown_report());
    Ok(())
}
