//! [`AgentEventStream`]: a run as an async stream of events.
//!
//! The stream drives the run itself (no spawned task): polling the stream polls the run. It always
//! ends with `AgentEnd` — the run emits it on every path, including panics it catches — and it
//! ends as soon as the run has finished, even if an abandoned blocking tool still holds a sender.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use futures::future::BoxFuture;
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};

use super::events::AgentEvent;
use super::{AgentError, AgentLoop, RunOutcome};
use crate::tooling::ToolDeps;
use crate::transcript::Message;

/// The events of one run, ending with `AgentEnd`. After it ends,
/// [`outcome`](AgentEventStream::outcome) gives the run's result.
pub struct AgentEventStream<'a> {
    run: Option<BoxFuture<'a, Result<RunOutcome, AgentError>>>,
    outcome: Option<Result<RunOutcome, AgentError>>,
    events: UnboundedReceiver<AgentEvent>,
    ended: bool,
}

impl<'a> AgentEventStream<'a> {
    pub(crate) fn new<D: ToolDeps>(
        agent: &'a AgentLoop<D>,
        prompts: Option<Vec<Message>>,
        context: Vec<Message>,
    ) -> Self {
        let (tx, rx) = unbounded_channel();
        let emitter = agent.emitter(Some(tx));
        AgentEventStream {
            run: Some(Box::pin(agent.drive(prompts, context, emitter))),
            outcome: None,
            events: rx,
            ended: false,
        }
    }

    /// The run's result, once the stream has ended (taken: later calls return `None`).
    pub fn outcome(&mut self) -> Option<Result<RunOutcome, AgentError>> {
        self.outcome.take()
    }
}

impl Stream for AgentEventStream<'_> {
    type Item = AgentEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        let this = &mut *self;
        if this.ended {
            return Poll::Ready(None);
        }
        loop {
            if let Poll::Ready(Some(event)) = this.events.poll_recv(cx) {
                if matches!(event, AgentEvent::AgentEnd { .. }) {
                    this.ended = true;
                }
                return Poll::Ready(Some(event));
            }
            match this.run.as_mut() {
                Some(run) => match run.as_mut().poll(cx) {
                    Poll::Ready(outcome) => {
                        this.outcome = Some(outcome);
                        this.run = None;
                        // Every event the run emitted is already queued; loop to deliver them.
                    }
                    Poll::Pending => return Poll::Pending,
                },
                None => {
                    // The run is over and the queue is drained (a sender may still be alive in
                    // an abandoned blocking tool, so do not wait for the channel to close).
                    return match this.events.try_recv() {
                        Ok(event) => {
                            if matches!(event, AgentEvent::AgentEnd { .. }) {
                                this.ended = true;
                            }
                            Poll::Ready(Some(event))
                        }
                        Err(_) => {
                            this.ended = true;
                            Poll::Ready(None)
                        }
                    };
                }
            }
        }
    }
}
