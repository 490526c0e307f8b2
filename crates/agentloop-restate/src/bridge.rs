//! The bridge between the agent loop and the engine's context.
//!
//! The loop calls its model and its tools itself; the engine's context, which journals, can only
//! be used from the handler's own future. So the loop gets a model and tools that do not do the
//! work but post a [`Job`] on a channel and wait for its answer, and the handler (see
//! `session.rs`) polls the loop and the channel together, turning each job into a journaled step:
//! a model job into one `ctx.run`, a tool job into a durable call of the `ToolExecutor` service
//! (a lone read-only call is answered from the model's step instead), an approval job into an
//! awakeable. Everything runs in the handler's task, in a deterministic order, which is what
//! makes replay after a crash reproduce the same journal.

use std::sync::Arc;

use agentloop::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream, StreamErrorKind};
use agentloop::tooling::{Approval, ToolContext, ToolError, ToolOutput, ToolSpec};
use agentloop::transcript::{Message, StopReason, ToolCallPart};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::types::{ModelReply, ToolCallInput, ToolCallOutcome};

/// Work the loop asks the handler to do through the engine.
pub(crate) enum Job {
    /// Drain this (not yet started) model stream inside one journaled step.
    Model {
        stream: ModelStream,
        reply: oneshot::Sender<ModelReply>,
    },
    /// Execute this call through the `ToolExecutor` service.
    Tool {
        input: ToolCallInput,
        reply: oneshot::Sender<ToolCallOutcome>,
    },
    /// Ask a person about this call, through an awakeable.
    Approval {
        call: ToolCallPart,
        reply: oneshot::Sender<Approval>,
    },
}

/// Sends jobs to the handler.
pub(crate) type JobSender = mpsc::UnboundedSender<Job>;

/// A model whose every call becomes one journaled step.
///
/// Adapters build their request synchronously and only send it when the stream is first polled,
/// so creating the inner stream here costs nothing; on replay the handler drops it unpolled and
/// no request leaves the process.
pub(crate) struct JournaledModel {
    pub(crate) inner: Arc<dyn Model>,
    pub(crate) jobs: JobSender,
}

impl Model for JournaledModel {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let inner = self.inner.stream(request);
        let (reply, answer) = oneshot::channel();
        let posted = self
            .jobs
            .send(Job::Model {
                stream: inner,
                reply,
            })
            .is_ok();
        Box::pin(futures::stream::once(async move {
            let reply = if posted { answer.await.ok() } else { None };
            match reply {
                Some(ModelReply::Done { message, .. }) => ModelEvent::Done(message),
                Some(ModelReply::Failed { message, error }) => ModelEvent::Error {
                    message,
                    error: ModelError::stream(StreamErrorKind::Other, error),
                },
                None => {
                    let error = "the durable run ended before the model replied".to_owned();
                    let mut message = Message::assistant(Vec::new(), StopReason::Aborted);
                    message.error_message = Some(error.clone());
                    ModelEvent::Error {
                        message,
                        error: ModelError::stream(StreamErrorKind::Other, error),
                    }
                }
            }
        }))
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn capabilities(&self) -> agentloop::model::ModelCapabilities {
        self.inner.capabilities()
    }
}

/// Drains a model stream to its terminal event: the value journaled for one model call.
pub(crate) async fn drain(mut stream: ModelStream) -> ModelReply {
    while let Some(event) = stream.next().await {
        match event {
            ModelEvent::Done(message) => {
                return ModelReply::Done {
                    message,
                    lone_read: None,
                };
            }
            ModelEvent::Error { message, error } => {
                return ModelReply::Failed {
                    message,
                    error: error.to_string(),
                };
            }
            _ => {}
        }
    }
    let error = "the model stream ended without a terminal event".to_owned();
    let mut message = Message::assistant(Vec::new(), StopReason::Error);
    message.error_message = Some(error.clone());
    ModelReply::Failed { message, error }
}

/// The stand-in for `spec` inside the loop: same name, description, schema, guidance and
/// parallel-safety, but its handler posts the call to the handler as a [`Job::Tool`].
///
/// It has no timeout of its own: the `ToolExecutor` applies the tool's real timeout, so the
/// journaled result is the only result, on first execution and on replay alike.
pub(crate) fn forwarding_tool<D: Send + Sync + 'static>(
    spec: &ToolSpec<D>,
    session_id: &str,
    jobs: JobSender,
) -> Result<ToolSpec<D>, agentloop::tooling::SpecError> {
    let name = spec.name().to_owned();
    let session_id = session_id.to_owned();
    let mut builder = ToolSpec::<D>::builder(spec.name(), spec.description())
        .parameters(spec.parameters().clone())
        .parallel_safe(spec.parallel_safe())
        .deferred(spec.deferred())
        .local_tool_search(spec.local_tool_search())
        .handler(move |ctx: ToolContext<D>, args: Value| {
            let jobs = jobs.clone();
            let call = ToolCallPart::new(ctx.call_id(), &name, args);
            let idempotency_key = format!("{session_id}:{}", call.id);
            async move {
                let (reply, answer) = oneshot::channel();
                let input = ToolCallInput {
                    call,
                    idempotency_key,
                };
                if jobs.send(Job::Tool { input, reply }).is_err() {
                    return Err(ToolError::new(
                        "the durable run ended before the call was sent",
                    ));
                }
                match answer.await {
                    Ok(outcome) if outcome.is_error => Err(ToolError::new(outcome.content)),
                    Ok(outcome) => Ok(ToolOutput {
                        content: outcome.content,
                        images: outcome.images,
                    }),
                    Err(_) => Err(ToolError::new(
                        "the durable run ended before the call's result arrived",
                    )),
                }
            }
        });
    for rule in spec.guidelines() {
        builder = builder.guideline(rule.clone());
    }
    if let Some(snippet) = spec.snippet() {
        builder = builder.snippet(snippet);
    }
    builder.build()
}
