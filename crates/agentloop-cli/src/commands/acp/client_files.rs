//! The editor's view of files: when the client advertises `fs.readTextFile` /
//! `fs.writeTextFile`, a session's `read_file`, `write_file` and `edit_file` read and write
//! through `fs/read_text_file` and `fs/write_text_file`, so the model sees unsaved buffers and
//! its edits land in the editor's undo history. The library's workspace resolves and checks
//! every path first ([`TextFiles`]): a path outside the workspace never reaches the client.
//!
//! The tools call from their blocking threads; a call is queued to the connection's task and
//! its answer awaited on a plain channel, with a bound so an editor that never answers fails
//! the tool call instead of hanging the turn.

use std::future::Future;
use std::io;
use std::path::Path;
use std::rc::Rc;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::Duration;

use agent_client_protocol::{
    AgentSideConnection, Client, ClientCapabilities, Error, ReadTextFileRequest,
    WriteTextFileRequest,
};
use agentloop::builtin::{TextFiles, Workspace};

use super::outbound::Queue;

/// How long a tool waits for the editor to answer one request.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// `workspace`, reading and writing through the client as far as `capabilities` allow.
pub fn attach(
    workspace: Workspace,
    capabilities: &ClientCapabilities,
    session_id: &str,
    queue: &Queue,
) -> Workspace {
    let fs = &capabilities.fs;
    if !fs.read_text_file && !fs.write_text_file {
        return workspace;
    }
    workspace.with_text_files(std::sync::Arc::new(ClientFiles {
        session_id: session_id.to_owned(),
        queue: queue.clone(),
        reads: fs.read_text_file,
        writes: fs.write_text_file,
    }))
}

/// One session's files as the editor has them.
struct ClientFiles {
    session_id: String,
    queue: Queue,
    reads: bool,
    writes: bool,
}

impl TextFiles for ClientFiles {
    fn reads(&self) -> bool {
        self.reads
    }

    fn writes(&self) -> bool {
        self.writes
    }

    fn read_text(&self, path: &Path) -> io::Result<String> {
        let request = ReadTextFileRequest::new(self.session_id.clone(), path.to_path_buf());
        let response = blocking(&self.queue, move |client| async move {
            client.read_text_file(request).await
        })?;
        Ok(response.content)
    }

    fn write_text(&self, path: &Path, text: &str) -> io::Result<()> {
        let request =
            WriteTextFileRequest::new(self.session_id.clone(), path.to_path_buf(), text.to_owned());
        blocking(&self.queue, move |client| async move {
            client.write_text_file(request).await
        })?;
        Ok(())
    }
}

/// Makes one request to the client from a blocking thread and waits (bounded) for its answer.
pub fn blocking<T, F, Fut>(queue: &Queue, request: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce(Rc<AgentSideConnection>) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, Error>> + 'static,
{
    let (reply, answer) = mpsc::channel();
    let queued = queue.call(Box::new(move |client| {
        Box::pin(async move {
            let _ = reply.send(request(client).await);
        })
    }));
    if !queued {
        return Err(closed());
    }
    match answer.recv_timeout(ANSWER_WAIT) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(e)) => Err(io::Error::other(format!("the editor answered: {e}"))),
        Err(RecvTimeoutError::Timeout) => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            format!(
                "the editor did not answer within {} seconds",
                ANSWER_WAIT.as_secs()
            ),
        )),
        Err(RecvTimeoutError::Disconnected) => Err(closed()),
    }
}

fn closed() -> io::Error {
    io::Error::new(
        io::ErrorKind::BrokenPipe,
        "the connection to the editor is closed",
    )
}
