//! # agentloop-restate
//!
//! Agent runs that live in [Restate](https://restate.dev), a durable execution engine, instead of
//! in one process's memory: a run survives the death of the worker that was executing it, waits
//! for a person's approval without holding a worker, and never repeats a completed model request
//! or tool call.
//!
//! The crate drives the same [`AgentLoop`](agentloop::agent::AgentLoop) as the CLI. Two things
//! are swapped underneath it, and nothing else changes:
//!
//! - the **model** is wrapped so that each call is one journaled step ([`ctx.run`]): its whole
//!   assembled reply (text, tool calls, usage, provider data) is the journaled value, so a replay
//!   after a crash returns the recorded reply and sends **no second request** — no double
//!   billing. Token deltas are not journaled. The loop gets each reply when the step's work is
//!   done and sends its next request while the engine journals the reply (pipelining,
//!   [`WorkerConfig::pipeline_model_calls`]); nothing else acts on a reply before the engine
//!   acknowledges it.
//! - each **tool call** is sent to the [`ToolExecutor`] service as its own durable call; a batch
//!   stays parallel (the calls are fanned in with durable futures), each result is journaled as
//!   it completes, and a call whose result is journaled is never executed again. (A reply's
//!   lone call is cheaper as a journaled step of the session: a read-only call runs inside the
//!   model's own step, right after the reply, its result journaled with the reply; a call to
//!   another tool that stops within two minutes, such as `write_file`, is a step of its own;
//!   see [`AgentSession`].)
//!   A call that was running when its worker died is retried by the engine: tool calls are
//!   **at least once** inside one step, and every call carries an idempotency key
//!   (`session id:call id`) so a tool with outside side effects can deduplicate.
//!
//! A `task` call ([`WorkerConfig::task_tool`]) runs a child agent as a durable invocation of its
//! own, on the object keyed `{session id}:{call id}`, through a durable call from the parent's
//! journal: a replay of the parent never starts a second child, and the child's own journal
//! makes it resume without repeating its completed calls. Its usage counts in the parent's.
//!
//! Approval that needs a person becomes an awakeable: the run's invocation suspends, the pending
//! call is visible through [`AgentSession`]'s `status` handler, and the `approve` handler (any
//! process, any worker, days later) resolves it. Aborting is Restate's cancellation: every
//! pending call gets its "aborted" result, as in a local run.
//!
//! The engine does the scheduling, retries, journaling and suspension; this crate adds no queue
//! or scheduler of its own. One run per session at a time comes from the virtual object's
//! single-writer semantics.
//!
//! [`ctx.run`]: restate_sdk::context::ContextSideEffects::run
//!
//! ## Services
//!
//! | service | handler | kind | input → output |
//! |---|---|---|---|
//! | `AgentSession` (virtual object, key = session id) | `run` | exclusive | [`RunInput`] → [`RunOutput`] |
//! | | `task` | exclusive | [`TaskInput`] → [`RunOutput`] (a `task` call's child run) |
//! | | `approve` | shared | [`ApprovalInput`] → `()` |
//! | | `status` | shared | → [`SessionStatus`] |
//! | | `history` | shared | → the session's messages |
//! | `ToolExecutor` (service) | `execute` | — | [`ToolCallInput`] → [`ToolCallOutcome`] |
//!
//! The `agentloop-worker` binary serves both; see the README's "Running on Restate".

mod bridge;
mod executor;
mod mirror;
mod session;
mod types;
mod worker;

pub use executor::ToolExecutor;
pub use session::AgentSession;
pub use types::{
    ApprovalDecision, ApprovalInput, PendingApproval, RunInput, RunOutput, SessionStatus,
    TaskInput, ToolCallInput, ToolCallOutcome,
};
pub use worker::{Worker, WorkerConfig, WorkerError, serve_endpoint};
