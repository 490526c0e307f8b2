//! The protocol's output: the process's stdout, written in place. `tokio::io::stdout` hands
//! every write to Tokio's blocking pool, a thread hop per message that showed as most of the
//! latency between the model's first token and the editor's first chunk; a write to the pipe
//! the editor reads is short, so it is done on the connection's own thread instead. (An
//! editor that stops reading its agent's stdout stalls the agent either way.)

use std::io::Write;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Tokio's `AsyncWrite` over the process's stdout, writing synchronously.
pub struct Stdout(std::io::Stdout);

impl Stdout {
    /// The process's stdout.
    pub fn new() -> Stdout {
        Stdout(std::io::stdout())
    }
}

impl tokio::io::AsyncWrite for Stdout {
    fn poll_write(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Poll::Ready(self.get_mut().0.lock().write(buf))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(self.get_mut().0.lock().flush())
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.poll_flush(cx)
    }
}
