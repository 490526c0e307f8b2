//! Shell commands in the editor's terminals: when the client advertises `terminal`, the
//! `shell` tool's foreground commands run in a `terminal/create` terminal that the editor
//! shows inside the tool call (`{"type": "terminal", "terminalId": …}`), so the person sees
//! the output live. Still sandboxed: the editor is asked to start agentloop's own sandbox
//! wrapper (this executable's hidden `__sandbox-exec` subcommand, with the policy of
//! `--sandbox` and the environment allow-list), which confines itself as the shell tool's
//! commands are confined and only then becomes `sh -c COMMAND` — never the raw command.
//!
//! The turn waits for `terminal/wait_for_exit`; past the call's timeout the terminal is
//! killed (`terminal/kill`). Its output (`terminal/output`) and exit status are the tool's
//! result; the terminal is released (`terminal/release`) when the call ends, however it ends
//! (a cancelled turn kills it first).

use std::rc::Rc;
use std::sync::Arc;

use agent_client_protocol::{
    AgentSideConnection, Client, CreateTerminalRequest, Error, KillTerminalRequest,
    ReleaseTerminalRequest, SessionUpdate, Terminal, TerminalExitStatus, TerminalId,
    TerminalOutputRequest, ToolCallContent, ToolCallUpdate, ToolCallUpdateFields,
    WaitForTerminalExitRequest,
};
use agentloop::builtin::{CommandRunner, DelegatedCommand, OUTPUT_LIMIT, ShellOptions};
use agentloop::tooling::ToolError;

use super::outbound::Queue;

/// `shell`, running its commands in the client's terminals when the client offers them.
pub fn attach(
    shell: ShellOptions,
    terminals: bool,
    session_id: &str,
    queue: &Queue,
) -> ShellOptions {
    if !terminals {
        return shell;
    }
    shell.runner(Arc::new(ClientTerminals {
        session_id: session_id.to_owned(),
        queue: queue.clone(),
    }))
}

struct ClientTerminals {
    session_id: String,
    queue: Queue,
}

impl CommandRunner for ClientTerminals {
    fn run(
        &self,
        command: DelegatedCommand,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, ToolError>> + Send>>
    {
        let (session_id, queue) = (self.session_id.clone(), self.queue.clone());
        Box::pin(run(session_id, queue, command))
    }
}

async fn run(
    session_id: String,
    queue: Queue,
    command: DelegatedCommand,
) -> Result<String, ToolError> {
    let create =
        CreateTerminalRequest::new(session_id.clone(), command.program.display().to_string())
            .args(command.args.clone())
            .cwd(command.cwd.clone())
            .output_byte_limit(OUTPUT_LIMIT as u64);
    let created = create_terminal(&queue, create).await?;
    let mut held = Held {
        session_id: session_id.clone(),
        terminal: created.terminal_id.clone(),
        queue: queue.clone(),
        running: true,
    };
    let content = ToolCallContent::Terminal(Terminal::new(held.terminal.clone()));
    queue.update(
        &session_id,
        SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
            command.call_id.clone(),
            ToolCallUpdateFields::new().content(vec![content]),
        )),
    );
    let wait = WaitForTerminalExitRequest::new(session_id.clone(), held.terminal.clone());
    let waited = tokio::time::timeout(
        command.timeout,
        ask(&queue, move |c| async move {
            c.wait_for_terminal_exit(wait).await
        }),
    )
    .await;
    let status = match waited {
        Ok(exited) => Some(exited?.exit_status),
        Err(_) => {
            held.kill();
            None
        }
    };
    held.running = false;
    let read = TerminalOutputRequest::new(session_id, held.terminal.clone());
    let output = ask(
        &queue,
        move |c| async move { c.terminal_output(read).await },
    )
    .await?;
    let mut text = output.output;
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let text = agentloop::builtin::truncate_output(&text, OUTPUT_LIMIT);
    match status.or(output.exit_status) {
        None => Err(ToolError::new(format!(
            "{text}[command timed out after {}s and was killed]",
            command.timeout.as_secs()
        ))),
        Some(status) => Ok(format!("{text}[{}]", describe(&status))),
    }
}

fn describe(status: &TerminalExitStatus) -> String {
    match (&status.exit_code, &status.signal) {
        (Some(code), _) => format!("exit code: {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "exit status unknown".to_owned(),
    }
}

/// A terminal this call created: killed if the call ends while it runs (a cancelled turn),
/// released in any case.
struct Held {
    session_id: String,
    terminal: TerminalId,
    queue: Queue,
    running: bool,
}

impl Held {
    fn kill(&self) {
        let kill = KillTerminalRequest::new(self.session_id.clone(), self.terminal.clone());
        send(
            &self.queue,
            move |c| async move { c.kill_terminal(kill).await },
        );
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.running {
            self.kill();
        }
        let release = ReleaseTerminalRequest::new(self.session_id.clone(), self.terminal.clone());
        send(&self.queue, move |c| async move {
            c.release_terminal(release).await
        });
    }
}

/// Creates a terminal. A call cancelled while the client creates it (the turn was cancelled)
/// does not leave it running: the terminal the client then reports is killed and released.
async fn create_terminal(
    queue: &Queue,
    create: CreateTerminalRequest,
) -> Result<agent_client_protocol::CreateTerminalResponse, ToolError> {
    let session_id = create.session_id.clone();
    let (reply, answer) = tokio::sync::oneshot::channel();
    let queued = queue.call(Box::new(move |client| {
        Box::pin(async move {
            let created = client.create_terminal(create).await;
            if let Err(Ok(orphan)) = reply.send(created) {
                let id = orphan.terminal_id;
                let kill = KillTerminalRequest::new(session_id.clone(), id.clone());
                let _ = client.kill_terminal(kill).await;
                let _ = client
                    .release_terminal(ReleaseTerminalRequest::new(session_id, id))
                    .await;
            }
        })
    }));
    answered(queued, answer).await
}

/// Makes a request to the client and waits for its answer.
async fn ask<T, F, Fut>(queue: &Queue, request: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce(Rc<AgentSideConnection>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, Error>> + 'static,
{
    let (reply, answer) = tokio::sync::oneshot::channel();
    let queued = queue.call(Box::new(move |client| {
        Box::pin(async move {
            let _ = reply.send(request(client).await);
        })
    }));
    answered(queued, answer).await
}

/// The client's answer to a request that was `queued` (not queued, or dropped unanswered: the
/// connection is closed).
async fn answered<T>(
    queued: bool,
    answer: tokio::sync::oneshot::Receiver<Result<T, Error>>,
) -> Result<T, ToolError> {
    let closed = || ToolError::new("the connection to the editor is closed");
    if !queued {
        return Err(closed());
    }
    match answer.await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(ToolError::new(format!("the editor's terminal failed: {e}"))),
        Err(_) => Err(closed()),
    }
}

/// Makes a request to the client without waiting (errors go to stderr).
fn send<T, F, Fut>(queue: &Queue, request: F)
where
    F: FnOnce(Rc<AgentSideConnection>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Result<T, Error>> + 'static,
{
    queue.call(Box::new(move |client| {
        Box::pin(async move {
            if let Err(e) = request(client).await {
                eprintln!("agentloop: acp: a terminal request failed: {e}");
            }
        })
    }));
}
