//! The bridge between the agent loop and the engine's context.
//!
//! The loop calls its model and its tools itself; the engine's context, which journals, can only
//! be used from the handler's own future. So the loop gets a model and tools that do not do the
//! work but post a [`Job`] on a channel and wait for its answer, and the handler (see
//! `session.rs`) polls the loop and the channel together, turning each job into a journaled step:
//! a model job into one `ctx.run`, a tool job into a durable call of the `ToolExecutor` service
//! (a lone read-only call is answered from the model's step instead, and another lone call of a
//! file tool is a step of its own: see `session.rs`), an approval job into an
//! awakeable. Every job is turned into a journal entry in the handler's task, in the order the
//! loop posted it, which is what makes replay after a crash reproduce the same journal.
//!
//! # Pipelined model calls
//!
//! A step's value is known when its closure returns; the engine's acknowledgement that it is
//! journaled comes one round trip later. The handler hands the reply to the loop at the first
//! moment and lets the loop go on while the acknowledgement travels; two things keep that safe:
//!
//! - **No journal entry depends on an unacknowledged reply.** The handler posts nothing to the
//!   engine (no call, no awakeable, no state) until the step is acknowledged; the loop's jobs
//!   wait in the channel meanwhile. Nothing reaches the session store either: the store mirror
//!   holds the messages the loop completes in that window until the acknowledgement
//!   (`MirrorStore::hold`).
//! - **The next model request may leave early, and only when it is new.** When the loop asks for
//!   its next model call during that window, [`JournaledModel`] starts it right away on a task of
//!   its own (with its lone read, see [`model_step`]), and the next step's closure awaits that
//!   task. It does so only once a step's closure has run in this attempt: from then on every step
//!   is new to the journal (the handler never posts an entry past an unacknowledged step), so a
//!   replay never sends a request early for a turn the journal already holds. The price: if the
//!   worker dies inside the window, the early request was made for nothing and the replay makes
//!   the unacknowledged turn's request again — as it would have without pipelining — so a crash
//!   can waste one request more. `WorkerConfig::pipeline_model_calls` turns it off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use agentloop::model::{Model, ModelError, ModelEvent, ModelRequest, ModelStream, StreamErrorKind};
use agentloop::tooling::{Approval, ToolContext, ToolError, ToolOutput, ToolSpec};
use agentloop::transcript::{Message, StopReason, ToolArguments, ToolCallPart};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::AbortOnDropHandle;

use crate::executor::ToolExecutor;
use crate::types::{ModelReply, RunOutput, ToolCallInput, ToolCallOutcome};

/// Work the loop asks the handler to do through the engine.
pub(crate) enum Job {
    /// Run this model call inside one journaled step.
    Model {
        work: ModelWork,
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
    /// Run this `task` call as a child run: a durable call of the child's own object.
    Task {
        call_id: String,
        prompt: String,
        reply: oneshot::Sender<Result<RunOutput, String>>,
    },
}

/// A model call as its step gets it.
pub(crate) enum ModelWork {
    /// Not started: the step drains the stream (and runs the lone read). Dropped unpolled on
    /// replay, so no request leaves the process.
    Fresh(ModelStream),
    /// Started early on a task of its own (see the module docs); dropping it aborts the task.
    Started(AbortOnDropHandle<ModelReply>),
}

impl ModelWork {
    /// The step's value: the reply, with its lone read's result.
    pub(crate) async fn reply(self, tools: &ToolExecutor, session_id: &str) -> ModelReply {
        match self {
            ModelWork::Fresh(stream) => model_step(stream, tools, session_id).await,
            ModelWork::Started(task) => task.await.unwrap_or_else(|error| {
                ModelReply::failed(format!("the model call's task failed: {error}"))
            }),
        }
    }
}

/// Sends jobs to the handler.
pub(crate) type JobSender = mpsc::UnboundedSender<Job>;

/// The lone read-only call of the last model reply, with the result its step journaled; the
/// forwarding tools answer that call from it (see `session.rs`).
pub(crate) type LoneReadSlot = Arc<Mutex<Option<LoneRead>>>;

/// A model whose every call becomes one journaled step.
///
/// Adapters build their request synchronously and only send it when the stream is first polled,
/// so creating the inner stream here costs nothing; on replay the handler drops it unpolled and
/// no request leaves the process.
pub(crate) struct JournaledModel {
    pub(crate) inner: Arc<dyn Model>,
    pub(crate) jobs: JobSender,
    /// Start calls early once a step of this attempt has run (see the module docs).
    pub(crate) pipeline: bool,
    /// Set by the first step closure this attempt runs: every later step is new.
    pub(crate) live: Arc<AtomicBool>,
    pub(crate) tools: Arc<ToolExecutor>,
    pub(crate) session_id: String,
}

impl Model for JournaledModel {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let inner = self.inner.stream(request);
        let work = match tokio::runtime::Handle::try_current() {
            Ok(runtime) if self.pipeline && self.live.load(Ordering::SeqCst) => {
                let tools = self.tools.clone();
                let session_id = self.session_id.clone();
                ModelWork::Started(AbortOnDropHandle::new(
                    runtime.spawn(async move { model_step(inner, &tools, &session_id).await }),
                ))
            }
            _ => ModelWork::Fresh(inner),
        };
        let (reply, answer) = oneshot::channel();
        let posted = self.jobs.send(Job::Model { work, reply }).is_ok();
        Box::pin(futures::stream::once(async move {
            let reply = if posted { answer.await.ok() } else { None };
            // The reply may come from a step that has just proposed its value to the engine:
            // let the connection's task write that proposal before the loop's work on the reply
            // takes this thread (a task woken by the current one runs only once it yields).
            tokio::task::yield_now().await;
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

/// The message's call when it asks for exactly one and ended for it (a reply cut off at the
/// length limit has its calls answered "truncated" by the loop, never run): a lone call, which
/// runs as a step of the session (see `session.rs`).
pub(crate) fn lone_call(message: &Message) -> Option<&ToolCallPart> {
    if message.stop_reason == Some(StopReason::Length) {
        return None;
    }
    let mut calls = message.tool_calls();
    match (calls.next(), calls.next()) {
        (Some(call), None) => Some(call),
        _ => None,
    }
}

/// The reply's lone call when its arguments parsed and its tool only reads: the call its model
/// step runs (see `session.rs`).
pub(crate) fn lone_read_call<'m>(
    message: &'m Message,
    tools: &ToolExecutor,
) -> Option<&'m ToolCallPart> {
    lone_call(message).filter(|call| {
        matches!(call.arguments, ToolArguments::Json(_)) && tools.is_read_only(&call.tool_name)
    })
}

/// Drains the model's stream and, when the reply asks for a lone read-only call, runs it: the
/// value one model step journals.
pub(crate) async fn model_step(
    stream: ModelStream,
    tools: &ToolExecutor,
    session_id: &str,
) -> ModelReply {
    let mut reply = drain(stream).await;
    if let ModelReply::Done { message, lone_read } = &mut reply
        && let Some(call) = lone_read_call(message, tools)
    {
        let input = ToolCallInput {
            call: call.clone(),
            idempotency_key: format!("{session_id}:{}", call.id),
        };
        *lone_read = Some(tools.execute_call(&input).await);
    }
    reply
}

/// A lone read-only call whose result the last model step journaled.
pub(crate) struct LoneRead {
    call: ToolCallPart,
    outcome: ToolCallOutcome,
}

impl LoneRead {
    /// The lone read a journaled reply carries, if any.
    pub(crate) fn of(reply: &ModelReply, tools: &ToolExecutor) -> Option<LoneRead> {
        match reply {
            ModelReply::Done {
                message,
                lone_read: Some(outcome),
            } => lone_read_call(message, tools).map(|call| LoneRead {
                call: call.clone(),
                outcome: outcome.clone(),
            }),
            _ => None,
        }
    }

    /// The journaled result, if `call` is the call it was computed for.
    fn answer(self, call: &ToolCallPart) -> Option<ToolCallOutcome> {
        (call.id == self.call.id
            && call.tool_name == self.call.tool_name
            && arguments_value(&call.arguments) == arguments_value(&self.call.arguments))
        .then_some(self.outcome)
    }
}

/// A call's arguments as JSON (unparsed text as a string).
pub(crate) fn arguments_value(arguments: &ToolArguments) -> Value {
    match arguments {
        ToolArguments::Json(value) => value.clone(),
        ToolArguments::Unparsed(text) => Value::String(text.clone()),
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
    ModelReply::failed("the model stream ended without a terminal event".to_owned())
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
    lone_read: LoneReadSlot,
) -> ToolSpec<D> {
    let name = spec.name().to_owned();
    let session_id = session_id.to_owned();
    // Same name, schema (compiled once per worker, shared), flags and guidance as the tool;
    // no timeout (see above).
    spec.clone()
        .with_timeout(None)
        .with_handler(move |ctx: ToolContext<D>, args: Value| {
            let jobs = jobs.clone();
            let call = ToolCallPart::new(ctx.call_id(), &name, args);
            let idempotency_key = format!("{session_id}:{}", call.id);
            // The first call after a reply consumes its lone read, whether it is that call or
            // not: a lone read answers only the call it was run for.
            let journaled = lone_read
                .lock()
                .ok()
                .and_then(|mut slot| slot.take())
                .and_then(|lone| lone.answer(&call));
            async move {
                if let Some(outcome) = journaled {
                    return outcome_result(outcome);
                }
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
                let outcome = answer.await;
                // The result may come from a step that has just proposed it to the engine: let
                // the connection's task write that proposal first (see `JournaledModel`).
                tokio::task::yield_now().await;
                match outcome {
                    Ok(outcome) => outcome_result(outcome),
                    Err(_) => Err(ToolError::new(
                        "the durable run ended before the call's result arrived",
                    )),
                }
            }
        })
}

/// The name of the tool that delegates to a child run.
pub(crate) const TASK_TOOL: &str = "task";

#[derive(serde::Deserialize)]
struct TaskArgs {
    prompt: String,
}

/// The `task` tool of a durable run: its handler posts the call to the handler as a
/// [`Job::Task`], which runs the child as a durable invocation of its own, and answers with the
/// child's final text. The child's tokens and model calls go into the parent run's totals.
pub(crate) fn task_tool<D: Send + Sync + 'static>(
    jobs: JobSender,
) -> Result<ToolSpec<D>, agentloop::tooling::SpecError> {
    ToolSpec::<D>::builder(
        TASK_TOOL,
        "Delegates a self-contained task to a sub-agent with the same tools and workspace, and \
         answers with its final report. Use it for work that needs many steps whose details \
         the rest of this conversation does not need.",
    )
    .parameters(agentloop::agent::prompt_parameters())
    .handler(move |ctx: ToolContext<D>, args: TaskArgs| {
        let jobs = jobs.clone();
        async move {
            let (reply, answer) = oneshot::channel();
            let job = Job::Task {
                call_id: ctx.call_id().to_owned(),
                prompt: args.prompt,
                reply,
            };
            if jobs.send(job).is_err() {
                return Err(ToolError::new(
                    "the durable run ended before the task was sent",
                ));
            }
            let output = answer.await;
            // As for a tool call's result (see `forwarding_tool`).
            tokio::task::yield_now().await;
            match output {
                Ok(Ok(output)) => task_result(output),
                Ok(Err(error)) => Err(ToolError::new(format!("the sub-agent failed: {error}"))),
                Err(_) => Err(ToolError::new(
                    "the durable run ended before the sub-agent's result arrived",
                )),
            }
        }
    })
    .build()
}

/// A child run's output as the `task` call's result; its usage goes to the parent run.
fn task_result(output: RunOutput) -> Result<String, ToolError> {
    agentloop::agent::add_child_usage(&output.usage, output.turns);
    if output.stop["reason"] == "done" {
        return Ok(output.final_text);
    }
    let last = if output.final_text.is_empty() {
        String::new()
    } else {
        format!(" Its last answer: {}", output.final_text)
    };
    Err(ToolError::new(format!(
        "The sub-agent stopped before finishing: {}.{last}",
        output.stop
    )))
}

/// A journaled outcome as the loop's tool result.
fn outcome_result(outcome: ToolCallOutcome) -> Result<ToolOutput, ToolError> {
    if outcome.is_error {
        Err(ToolError::new(outcome.content))
    } else {
        Ok(ToolOutput {
            content: outcome.content,
            images: outcome.images,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop::builtin::{self, Workspace, WorkspaceDeps};

    /// Which reply's call is lone (and so a step of the session), and which tools' lone calls
    /// may be steps: the file tools, not `shell` (its commands may outlast a cancellation).
    #[test]
    fn a_lone_call_is_the_only_call_of_a_reply_not_cut_off_and_only_file_tools_run_in_a_step() {
        use agentloop::transcript::Part;
        let call = |id: &str| {
            Part::ToolCall(ToolCallPart::new(
                id,
                "write_file",
                serde_json::json!({"path": "a"}),
            ))
        };
        let one = Message::assistant(vec![call("a")], StopReason::ToolUse);
        assert_eq!(lone_call(&one).map(|c| c.id.as_str()), Some("a"));
        let two = Message::assistant(vec![call("a"), call("b")], StopReason::ToolUse);
        assert!(lone_call(&two).is_none());
        let cut = Message::assistant(vec![call("a")], StopReason::Length);
        assert!(lone_call(&cut).is_none(), "a truncated call never runs");
        assert!(lone_call(&Message::assistant(Vec::new(), StopReason::Stop)).is_none());

        let dir = tempfile::tempdir().unwrap();
        let config = crate::WorkerConfig::for_tests(Workspace::new(dir.path()).unwrap());
        let tools = ToolExecutor::new(&config);
        for tool in [
            "read_file",
            "list_dir",
            "grep",
            "find_files",
            "write_file",
            "edit_file",
        ] {
            assert!(tools.runs_in_step(tool), "{tool}");
        }
        assert!(!tools.runs_in_step("shell"));
        assert!(!tools.runs_in_step("no_such_tool"));
        assert!(
            lone_read_call(&one, &tools).is_none(),
            "write_file is not a read"
        );
    }

    /// A forwarding tool looks like the tool to the model but has no timeout of its own (the
    /// executor applies the real one), and it posts the call to the handler.
    #[tokio::test]
    async fn a_forwarding_tool_keeps_the_tools_shape_drops_its_timeout_and_posts_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(dir.path()).unwrap();
        let tools = builtin::tools::<WorkspaceDeps>(&workspace);
        let write = tools.iter().find(|t| t.name() == "write_file").unwrap();
        assert!(write.timeout().is_some());
        let (jobs, mut posted) = mpsc::unbounded_channel();
        let forward = forwarding_tool(write, "s1", jobs, LoneReadSlot::default());
        assert_eq!(forward.name(), write.name());
        assert_eq!(forward.description(), write.description());
        assert_eq!(forward.parameters(), write.parameters());
        assert_eq!(forward.guidelines(), write.guidelines());
        assert_eq!(forward.parallel_safe(), write.parallel_safe());
        assert_eq!(forward.timeout(), None);

        let deps = Arc::new(WorkspaceDeps::new(
            workspace,
            builtin::ApprovalPolicy::Always,
        ));
        let call = tokio::spawn(async move {
            forward
                .call(deps, serde_json::json!({"path": "a.txt", "content": "x"}))
                .await
        });
        let Some(Job::Tool { input, reply }) = posted.recv().await else {
            panic!("no tool job posted")
        };
        assert_eq!(input.call.tool_name, "write_file");
        assert_eq!(input.idempotency_key, "s1:direct");
        reply
            .send(ToolCallOutcome {
                is_error: false,
                content: "written".to_owned(),
                images: Vec::new(),
            })
            .unwrap();
        assert_eq!(call.await.unwrap().unwrap().content, "written");
        // Nothing was written here: the executor does that.
        assert!(!dir.path().join("a.txt").exists());
    }
}
