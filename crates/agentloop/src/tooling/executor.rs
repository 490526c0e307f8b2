//! The tool executor: runs a batch of tool calls and returns exactly one result per call, in call
//! order, whatever the handlers do.
//!
//! Rules (docs/ARCHITECTURE.md, "Tools and the executor", plus what Rust lets us do better):
//! - no calls → no results; one call runs inline; several run concurrently with at most
//!   [`MAX_PARALLEL_TOOLS`] in flight — unless any called tool is not parallel-safe (or the caller
//!   forces sequential mode), in which case the whole batch runs one call after another, in order;
//! - each call is checked in this order: known tool → arguments are a JSON object → arguments
//!   satisfy the tool's JSON Schema → arguments bind to the handler's type → approval hook → run;
//!   the observer's `call_started` fires only once every check passed, right before the handler
//!   runs — a call refused by a check gets `call_blocked` instead of `call_started` and
//!   `call_finished`;
//! - every failure (including a panic in the handler or the approval hook, a timeout and an abort)
//!   becomes an error result with text the model can act on;
//! - async handlers that time out or are aborted are *dropped* (their destructors run, their
//!   pending I/O is cancelled); blocking handlers cannot be stopped, so they are abandoned: their
//!   cancellation token is cancelled, their late result is discarded, and their thread finishes on
//!   its own (note that a Tokio runtime waits for such threads when it shuts down).

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::deps::{Approval, ApprovalRequest, ToolDeps};
use super::error::{ToolError, ToolErrorKind};
use super::observer::{ToolObserver, guarded};
use super::registry::{RegisteredTool, Registry};
use super::spec::{Invocation, ProgressSink, ToolContext, ToolOutput};
use super::{panic_message, validate};
use crate::transcript::{ToolArguments, ToolCallPart, ToolResultPart};

/// At most this many calls of one batch run at the same time.
pub const MAX_PARALLEL_TOOLS: usize = 8;

/// How a batch is executed. `Default` gives the executor contract's behaviour: parallel up to
/// [`MAX_PARALLEL_TOOLS`], no default timeout, no retries, no observer.
#[derive(Clone)]
pub struct ExecOptions {
    /// Receives start / progress / finish callbacks.
    pub observer: Option<Arc<dyn ToolObserver>>,
    /// Aborts the batch: calls not yet finished get an "aborted" error result.
    pub cancel: CancellationToken,
    /// Concurrency cap (values below 1 are treated as 1).
    pub max_parallel: usize,
    /// Run every batch sequentially, in call order, regardless of the tools' flags.
    pub sequential: bool,
    /// Time limit for tools that have none of their own.
    pub default_timeout: Option<Duration>,
    /// How many times to re-run a call whose handler returned a retryable [`ToolError`].
    pub max_retries: u32,
    /// Delay before the first retry; doubled for each further one.
    pub retry_backoff: Duration,
    /// Rewrites each call's outcome the moment it finishes, before the observer's
    /// `call_finished` sees it (the agent loop's `tool_result` hooks run here).
    pub finalize: Option<Finalizer>,
    /// Record tool arguments and results on the `execute_tool` spans (opt-in: user data).
    pub capture_content: bool,
    /// Do not consult the approval hook: a person already approved these calls (the agent
    /// loop's resume of deferred calls). Default `false`.
    pub skip_approval: bool,
    /// The session the calls belong to; handlers see `session/call id` as their
    /// [`idempotency_key`](ToolContext::idempotency_key). Default `None` (the key is the call id).
    pub session_id: Option<Arc<str>>,
}

/// A per-call outcome rewriter; see [`ExecOptions::finalize`].
pub type Finalizer = Arc<dyn Fn(&ToolCallPart, &mut ToolOutcome) + Send + Sync>;

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            observer: None,
            cancel: CancellationToken::new(),
            max_parallel: MAX_PARALLEL_TOOLS,
            sequential: false,
            default_timeout: None,
            max_retries: 0,
            retry_backoff: Duration::from_millis(100),
            finalize: None,
            capture_content: false,
            skip_approval: false,
            session_id: None,
        }
    }
}

impl std::fmt::Debug for ExecOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecOptions")
            .field("observer", &self.observer.is_some())
            .field("cancelled", &self.cancel.is_cancelled())
            .field("max_parallel", &self.max_parallel)
            .field("sequential", &self.sequential)
            .field("default_timeout", &self.default_timeout)
            .field("max_retries", &self.max_retries)
            .field("retry_backoff", &self.retry_backoff)
            .field("finalize", &self.finalize.is_some())
            .field("capture_content", &self.capture_content)
            .field("skip_approval", &self.skip_approval)
            .field("session_id", &self.session_id)
            .finish()
    }
}

/// The full outcome of one call: the result sent to the model plus what the caller may want to
/// act on (the error's class, how many attempts ran, how long it took).
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// The result for the model.
    pub result: ToolResultPart,
    /// The failure, when `result.is_error`.
    pub error: Option<ToolError>,
    /// Handler runs (0 when the call failed before its handler ran).
    pub attempts: u32,
    /// Wall time from the call's start to its result.
    pub duration: Duration,
}

/// Runs `calls` and returns one result per call, in call order (the executor contract's `run_tools`).
///
/// ```
/// use agentloop::tooling::{run_tools, Deps, Registry, ToolContext, ToolSpec};
/// use agentloop::transcript::ToolCallPart;
/// use serde_json::{json, Value};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let upper = ToolSpec::<Deps>::builder("upper", "Upper-case the text.")
///     .blocking_handler(|_ctx: ToolContext<Deps>, args: Value| {
///         args["text"].as_str().unwrap_or_default().to_uppercase()
///     })
///     .build()
///     .unwrap();
/// let registry = Registry::new(vec![upper]).unwrap();
/// let calls = [
///     ToolCallPart::new("c1", "upper", json!({"text": "a"})),
///     ToolCallPart::new("c2", "missing", json!({})),
/// ];
/// let results = run_tools(&calls, &registry, &Arc::new(Deps::new()), None).await;
/// assert_eq!(results[0].content, "A");
/// assert!(results[1].is_error);
/// # }
/// ```
pub async fn run_tools<D: ToolDeps>(
    calls: &[ToolCallPart],
    registry: &Registry<D>,
    deps: &Arc<D>,
    observer: Option<Arc<dyn ToolObserver>>,
) -> Vec<ToolResultPart> {
    let options = ExecOptions {
        observer,
        ..ExecOptions::default()
    };
    run_tools_with(calls, registry, deps, &options)
        .await
        .into_iter()
        .map(|o| o.result)
        .collect()
}

/// Runs `calls` with explicit [`ExecOptions`] and returns the full outcome of each, in call order.
pub async fn run_tools_with<D: ToolDeps>(
    calls: &[ToolCallPart],
    registry: &Registry<D>,
    deps: &Arc<D>,
    options: &ExecOptions,
) -> Vec<ToolOutcome> {
    match calls {
        [] => Vec::new(),
        [only] => vec![run_one(only, registry, deps, options).await],
        _ if options.sequential || !batch_is_parallel_safe(calls, registry) => {
            let mut outcomes = Vec::with_capacity(calls.len());
            for call in calls {
                outcomes.push(run_one(call, registry, deps, options).await);
            }
            outcomes
        }
        _ => run_concurrently(calls, registry, deps, options).await,
    }
}

/// Runs the batch with at most `max_parallel` calls in flight. A new call starts as soon as *any*
/// running call finishes (no head-of-line blocking behind a slow first call); outcomes are put
/// back in call order at the end.
async fn run_concurrently<D: ToolDeps>(
    calls: &[ToolCallPart],
    registry: &Registry<D>,
    deps: &Arc<D>,
    options: &ExecOptions,
) -> Vec<ToolOutcome> {
    let cap = options.max_parallel.max(1);
    let mut slots: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
    let mut waiting = calls.iter().enumerate();
    let mut running = FuturesUnordered::new();
    for (index, call) in waiting.by_ref().take(cap) {
        running.push(indexed(index, run_one(call, registry, deps, options)));
    }
    while let Some((index, outcome)) = running.next().await {
        slots[index] = Some(outcome);
        if let Some((index, call)) = waiting.next() {
            running.push(indexed(index, run_one(call, registry, deps, options)));
        }
    }
    slots.into_iter().flatten().collect()
}

async fn indexed<F: std::future::Future>(index: usize, fut: F) -> (usize, F::Output) {
    (index, fut.await)
}

/// True when every *known* tool in the batch is parallel-safe (unknown names fail instantly and do
/// not force the batch sequential).
pub fn batch_is_parallel_safe<D>(calls: &[ToolCallPart], registry: &Registry<D>) -> bool {
    calls.iter().all(|c| {
        registry
            .get(&c.tool_name)
            .is_none_or(|spec| spec.parallel_safe())
    })
}

/// Runs one call through every check and the handler; never panics, always one outcome.
async fn run_one<D: ToolDeps>(
    call: &ToolCallPart,
    registry: &Registry<D>,
    deps: &Arc<D>,
    options: &ExecOptions,
) -> ToolOutcome {
    let started = Instant::now();
    let span = super::spans::tool_span(call, options.capture_content);
    let finished = Arc::new(AtomicBool::new(false));
    let (output, attempts) = if options.cancel.is_cancelled() {
        (Err(ToolError::aborted(&call.tool_name)), 0)
    } else {
        execute(call, registry, deps, options, &finished)
            .instrument(span.clone())
            .await
    };
    finished.store(true, Ordering::Release);
    let (result, error) = match output {
        Ok(out) => (
            ToolResultPart {
                call_id: call.id.clone(),
                tool_name: call.tool_name.clone(),
                content: out.content,
                images: out.images,
                is_error: false,
            },
            None,
        ),
        Err(err) => (
            ToolResultPart::error(&call.id, &call.tool_name, err.message()),
            Some(err),
        ),
    };
    let mut outcome = ToolOutcome {
        result,
        error,
        attempts,
        duration: started.elapsed(),
    };
    // A deferred call has no result yet: it is neither finalized nor reported (the loop's
    // approval request follows instead).
    if outcome.error.as_ref().map(ToolError::kind) == Some(ToolErrorKind::Deferred) {
        return outcome;
    }
    if let Some(finalize) = &options.finalize {
        finalize(call, &mut outcome);
    }
    super::spans::record_tool_outcome(&span, &outcome, options.capture_content);
    drop(span);
    if let Some(observer) = &options.observer {
        // No handler run means the call was refused before it started: it never had a
        // `call_started`, so it is reported as blocked, not finished.
        if outcome.attempts == 0 {
            guarded(|| observer.call_blocked(call, &outcome.result));
        } else {
            guarded(|| observer.call_finished(call, &outcome.result));
        }
    }
    outcome
}

/// Checks that a call names a known tool and carries schema-valid object arguments.
pub(crate) fn check_call<'r, D>(
    call: &ToolCallPart,
    registry: &'r Registry<D>,
) -> Result<(&'r Arc<RegisteredTool<D>>, Value), ToolError> {
    let tool = registry
        .registered(&call.tool_name)
        .ok_or_else(|| ToolError::unknown_tool(&call.tool_name, registry.names()))?;
    let args = match &call.arguments {
        ToolArguments::Json(v @ Value::Object(_)) => v.clone(),
        ToolArguments::Json(other) => {
            return Err(ToolError::malformed(
                &call.tool_name,
                &other.to_string(),
                super::spec::json_kind(other),
            ));
        }
        ToolArguments::Unparsed(text) => {
            return Err(ToolError::malformed(
                &call.tool_name,
                text,
                "text that is not valid JSON",
            ));
        }
    };
    validate::check(&call.tool_name, &tool.validator, &args)?;
    Ok((tool, args))
}

/// Checks, binds, admits and runs one call (with its retries): the handler's result and how
/// many times it ran (0 when the call was refused before its handler started).
async fn execute<D: ToolDeps>(
    call: &ToolCallPart,
    registry: &Registry<D>,
    deps: &Arc<D>,
    options: &ExecOptions,
    finished: &Arc<AtomicBool>,
) -> (Result<ToolOutput, ToolError>, u32) {
    let (tool, args) = match check_call(call, registry) {
        Ok(found) => found,
        Err(e) => return (Err(e), 0),
    };
    let binding = CallBinding::new(call, tool, args, deps, options, finished);

    // Bind before asking for approval: a person should never approve a call that cannot run.
    let first_cancel = options.cancel.child_token();
    let invocation = match binding.bind(first_cancel.clone()) {
        Ok(inv) => inv,
        Err(e) => return (Err(e), 0),
    };
    if let Err(e) = admit(call, tool.spec.requires_approval, deps, options).await {
        return (Err(e), 0);
    }
    // Every check passed: the handler starts now, and only now is the call reported started.
    if let Some(observer) = &options.observer {
        guarded(|| observer.call_started(call));
    }
    binding.run_with_retries(invocation, first_cancel).await
}

/// The checks between binding a call and running it: the approval hook (unless a person
/// already approved the call) and the batch's abort.
async fn admit<D: ToolDeps>(
    call: &ToolCallPart,
    requires_approval: bool,
    deps: &Arc<D>,
    options: &ExecOptions,
) -> Result<(), ToolError> {
    if !options.skip_approval {
        let request = ApprovalRequest::new(call, requires_approval);
        approve(deps, request, &options.cancel).await?;
    }
    if options.cancel.is_cancelled() {
        return Err(ToolError::aborted(&call.tool_name));
    }
    Ok(())
}

/// The delay before retry number `attempts` (1-based): the backoff, doubled for each further
/// retry (capped so that the shift cannot overflow).
fn retry_delay(backoff: Duration, attempts: u32) -> Duration {
    backoff.saturating_mul(1u32 << attempts.saturating_sub(1).min(16))
}

/// What binding a call's handler needs, kept so that every retry binds a fresh invocation
/// with its own cancellation token.
struct CallBinding<'a, D> {
    call: &'a ToolCallPart,
    tool: &'a RegisteredTool<D>,
    args: Value,
    deps: &'a Arc<D>,
    options: &'a ExecOptions,
    call_id: Arc<str>,
    tool_name: Arc<str>,
    progress: Option<ProgressSink>,
}

impl<'a, D: ToolDeps> CallBinding<'a, D> {
    fn new(
        call: &'a ToolCallPart,
        tool: &'a RegisteredTool<D>,
        args: Value,
        deps: &'a Arc<D>,
        options: &'a ExecOptions,
        finished: &Arc<AtomicBool>,
    ) -> Self {
        let progress = options.observer.as_ref().map(|observer| ProgressSink {
            observer: observer.clone(),
            finished: finished.clone(),
        });
        CallBinding {
            call,
            tool,
            args,
            deps,
            options,
            call_id: Arc::from(call.id.as_str()),
            tool_name: Arc::from(call.tool_name.as_str()),
            progress,
        }
    }

    /// Binds the handler to a fresh context whose cancellation is `cancel`.
    fn bind(&self, cancel: CancellationToken) -> Result<Invocation, ToolError> {
        let ctx = ToolContext::new(
            self.deps.clone(),
            self.call_id.clone(),
            self.tool_name.clone(),
            cancel,
            self.progress.clone(),
        )
        .with_session(self.options.session_id.clone());
        bind_invocation(
            &self.tool.spec.handler,
            &self.call.tool_name,
            ctx,
            self.args.clone(),
        )
    }

    /// Runs the bound invocation, re-running it after a retryable error (with backoff) while
    /// retries remain: the last result and the number of handler runs.
    async fn run_with_retries(
        &self,
        mut invocation: Invocation,
        mut cancel: CancellationToken,
    ) -> (Result<ToolOutput, ToolError>, u32) {
        let options = self.options;
        let name = &self.call.tool_name;
        let limit = self.tool.spec.timeout.or(options.default_timeout);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            let result = run_invocation(invocation, name, limit, &cancel, &options.cancel).await;
            match result {
                Err(e) if e.is_retryable() && attempts <= options.max_retries => {
                    tokio::select! {
                        _ = tokio::time::sleep(retry_delay(options.retry_backoff, attempts)) => {}
                        _ = options.cancel.cancelled() => {
                            return (Err(ToolError::aborted(name)), attempts);
                        }
                    }
                    cancel = options.cancel.child_token();
                    invocation = match self.bind(cancel.clone()) {
                        Ok(inv) => inv,
                        Err(e) => return (Err(e), attempts),
                    };
                }
                other => return (other, attempts),
            }
        }
    }
}

/// Asks the deps bundle's [`approve`](ToolDeps::approve); a panic inside it denies the call
/// (fails closed).
async fn approve<D: ToolDeps>(
    deps: &Arc<D>,
    request: ApprovalRequest<'_>,
    abort: &CancellationToken,
) -> Result<(), ToolError> {
    let call = request.call;
    // Building the hook's future runs user code too (a closure hook runs entirely here, before
    // any `async` block): a panic at that point must deny the call just like one while polling.
    let verdict = match std::panic::catch_unwind(AssertUnwindSafe(|| deps.approve(request))) {
        Ok(fut) => AssertUnwindSafe(fut).catch_unwind().left_future(),
        Err(payload) => std::future::ready(Err(payload)).right_future(),
    };
    let verdict = tokio::select! {
        v = verdict => v,
        _ = abort.cancelled() => return Err(ToolError::aborted(&call.tool_name)),
    };
    match verdict {
        Ok(Approval::Allow) => Ok(()),
        Ok(Approval::Deny(reason)) => Err(ToolError::denied(&call.tool_name, &reason)),
        Ok(Approval::Defer(reason)) => Err(ToolError::deferred(&call.tool_name, &reason)),
        Err(payload) => Err(ToolError::approval_failed(
            &call.tool_name,
            &format!("the hook panicked: {}", panic_message(&*payload)),
        )),
    }
}

/// Binds the arguments and builds the handler's invocation. A hand-written handler closure runs
/// user code here (before any future exists), so a panic is caught and becomes an error result
/// like a panic while the handler runs.
pub(crate) fn bind_invocation<D>(
    handler: &super::spec::HandlerFn<D>,
    tool: &str,
    ctx: ToolContext<D>,
    args: Value,
) -> Result<Invocation, ToolError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| handler(ctx, args))) {
        Ok(Ok(inv)) => Ok(inv),
        Ok(Err(detail)) => Err(ToolError::mismatch(tool, &detail)),
        Err(payload) => Err(ToolError::panicked(tool, &panic_message(&*payload))),
    }
}

/// Runs a bound handler under its time limit and the batch's abort signal, catching panics.
async fn run_invocation(
    invocation: Invocation,
    tool: &str,
    limit: Option<Duration>,
    call_cancel: &CancellationToken,
    abort: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let deadline = async {
        match limit {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    let outcome = match invocation {
        Invocation::Async(fut) => {
            let guarded_fut = AssertUnwindSafe(fut).catch_unwind();
            tokio::select! {
                r = guarded_fut => r.unwrap_or_else(|p| Err(ToolError::panicked(tool, &panic_message(&*p)))),
                _ = deadline => Err(ToolError::timeout(tool, limit.unwrap_or_default())),
                _ = abort.cancelled() => Err(ToolError::aborted(tool)),
            }
        }
        Invocation::Blocking(f) => {
            let handle = tokio::task::spawn_blocking(f);
            tokio::select! {
                r = handle => match r {
                    Ok(r) => r,
                    Err(e) if e.is_panic() => Err(ToolError::panicked(tool, &panic_message(&*e.into_panic()))),
                    Err(_) => Err(ToolError::aborted(tool)),
                },
                _ = deadline => Err(ToolError::timeout(tool, limit.unwrap_or_default())),
                _ = abort.cancelled() => Err(ToolError::aborted(tool)),
            }
        }
    };
    // Whatever happened, the handler's token says "stop": an abandoned blocking handler polling it
    // can return early, and a child task it spawned can notice too.
    if outcome
        .as_ref()
        .err()
        .is_some_and(|e| matches!(e.kind(), ToolErrorKind::Timeout | ToolErrorKind::Aborted))
    {
        call_cancel.cancel();
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_back_off_exponentially_without_overflow() {
        let base = Duration::from_millis(100);
        assert_eq!(retry_delay(base, 1), base);
        assert_eq!(retry_delay(base, 2), Duration::from_millis(200));
        assert_eq!(retry_delay(base, 4), Duration::from_millis(800));
        // The shift is capped: a very late retry waits 2^16 backoffs, and saturates.
        assert_eq!(retry_delay(base, 40), base * (1 << 16));
        assert_eq!(retry_delay(Duration::MAX, 3), Duration::MAX);
        assert_eq!(retry_delay(Duration::ZERO, 5), Duration::ZERO);
    }
}
