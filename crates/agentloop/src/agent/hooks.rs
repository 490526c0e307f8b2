//! Extensions: named bundles of hooks the loop calls at fixed points (the loop contract's
//! `hook_dispatcher`).
//!
//! | hook | when | can |
//! |---|---|---|
//! | `context` | before each model call | transform a *copy* of the messages (prune, summarise) |
//! | `before_provider_request` | just before the request is sent | inspect or replace it |
//! | `tool_call` | for each valid call, in call order, before any runs | veto with a reason, or rewrite the arguments (validated again) |
//! | `tool_result` | the moment each call finishes | rewrite its content / error flag |
//! | `should_stop_after_turn` | after `TurnEnd` | end the run without polling the queues |
//!
//! Hooks run in registration order. A hook that panics fails closed for what it guards: a
//! panicking `tool_call` hook blocks that call, a panicking `tool_result` hook turns that result
//! into an error; a panicking `context` / `before_provider_request` hook leaves its input as it
//! was and a panicking `should_stop_after_turn` counts as "stop". No hook panic ends the run.
//! When no extension registers a hook, its call site does no work at all
//! ([`HookKind`] + `has_hook_handlers`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use serde_json::Value;

use super::calls::{FinalizedToolCall, PreparedToolCall};
use crate::model::ModelRequest;
use crate::tooling::panic_message;
use crate::transcript::{Message, ToolResultPart};

/// The hook points, for [`AgentLoop::has_hook_handlers`](crate::agent::AgentLoop::has_hook_handlers).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HookKind {
    /// `context`.
    Context,
    /// `before_provider_request`.
    BeforeProviderRequest,
    /// `tool_call`.
    ToolCall,
    /// `tool_result`.
    ToolResult,
    /// `should_stop_after_turn`.
    ShouldStopAfterTurn,
}

/// What a `tool_call` hook decides.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolCallDecision {
    /// Let the call proceed unchanged.
    Continue,
    /// Veto it; the model sees `⛔ blocked by <extension>: <reason>`.
    Block(String),
    /// Replace the arguments (they are validated again before the tool runs).
    Rewrite(Value),
}

/// A `tool_result` hook's change to a result; `None` fields stay as they were.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResultRewrite {
    /// New content.
    pub content: Option<String>,
    /// New error flag.
    pub is_error: Option<bool>,
}

/// What `should_stop_after_turn` sees.
#[derive(Clone, Copy, Debug)]
pub struct TurnSummary<'a> {
    /// 1-based turn number within the run.
    pub turn: u32,
    /// The assistant message of the turn.
    pub message: &'a Message,
    /// The turn's tool results, in call order.
    pub tool_results: &'a [ToolResultPart],
}

type ContextHook = Arc<dyn Fn(&mut Vec<Message>) + Send + Sync>;
type RequestHook = Arc<dyn for<'a> Fn(&mut ModelRequest<'a>) + Send + Sync>;
type ToolCallHook = Arc<dyn Fn(&PreparedToolCall) -> ToolCallDecision + Send + Sync>;
type ToolResultHook = Arc<dyn Fn(&FinalizedToolCall) -> Option<ResultRewrite> + Send + Sync>;
type StopHook = Arc<dyn Fn(&TurnSummary<'_>) -> bool + Send + Sync>;

/// A named set of hooks. Build with [`Extension::new`] and the `on_*` methods.
///
/// ```
/// use agentloop::agent::{Extension, ToolCallDecision};
///
/// let guard = Extension::new("no-rm").on_tool_call(|call| {
///     let cmd = call.arguments["command"].as_str().unwrap_or_default();
///     if call.tool_name == "shell" && cmd.contains("rm -rf") {
///         ToolCallDecision::Block("destructive command".into())
///     } else {
///         ToolCallDecision::Continue
///     }
/// });
/// assert_eq!(guard.name(), "no-rm");
/// ```
#[derive(Clone)]
pub struct Extension {
    name: String,
    context: Option<ContextHook>,
    before_provider_request: Option<RequestHook>,
    tool_call: Option<ToolCallHook>,
    tool_result: Option<ToolResultHook>,
    should_stop_after_turn: Option<StopHook>,
}

impl std::fmt::Debug for Extension {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extension")
            .field("name", &self.name)
            .field("context", &self.context.is_some())
            .field(
                "before_provider_request",
                &self.before_provider_request.is_some(),
            )
            .field("tool_call", &self.tool_call.is_some())
            .field("tool_result", &self.tool_result.is_some())
            .field(
                "should_stop_after_turn",
                &self.should_stop_after_turn.is_some(),
            )
            .finish()
    }
}

impl Extension {
    /// An extension with no hooks yet.
    pub fn new(name: impl Into<String>) -> Self {
        Extension {
            name: name.into(),
            context: None,
            before_provider_request: None,
            tool_call: None,
            tool_result: None,
            should_stop_after_turn: None,
        }
    }

    /// Its name (shown in `⛔ blocked by <name>`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Transforms a copy of the messages before each model call; the loop's own history is never
    /// changed.
    pub fn on_context(mut self, f: impl Fn(&mut Vec<Message>) + Send + Sync + 'static) -> Self {
        self.context = Some(Arc::new(f));
        self
    }

    /// Inspects or replaces the request just before it is sent.
    pub fn on_before_provider_request(
        mut self,
        f: impl for<'a> Fn(&mut ModelRequest<'a>) + Send + Sync + 'static,
    ) -> Self {
        self.before_provider_request = Some(Arc::new(f));
        self
    }

    /// Vetoes or rewrites each valid tool call before it runs.
    pub fn on_tool_call(
        mut self,
        f: impl Fn(&PreparedToolCall) -> ToolCallDecision + Send + Sync + 'static,
    ) -> Self {
        self.tool_call = Some(Arc::new(f));
        self
    }

    /// Rewrites each tool result as its call finishes.
    pub fn on_tool_result(
        mut self,
        f: impl Fn(&FinalizedToolCall) -> Option<ResultRewrite> + Send + Sync + 'static,
    ) -> Self {
        self.tool_result = Some(Arc::new(f));
        self
    }

    /// Ends the run after a turn when it returns true.
    pub fn on_should_stop_after_turn(
        mut self,
        f: impl Fn(&TurnSummary<'_>) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.should_stop_after_turn = Some(Arc::new(f));
        self
    }

    /// Whether this extension handles `kind`.
    pub fn handles(&self, kind: HookKind) -> bool {
        match kind {
            HookKind::Context => self.context.is_some(),
            HookKind::BeforeProviderRequest => self.before_provider_request.is_some(),
            HookKind::ToolCall => self.tool_call.is_some(),
            HookKind::ToolResult => self.tool_result.is_some(),
            HookKind::ShouldStopAfterTurn => self.should_stop_after_turn.is_some(),
        }
    }
}

/// Runs hooks of every extension in order, with panics contained.
#[derive(Clone, Default, Debug)]
pub(crate) struct HookDispatcher {
    extensions: Arc<Vec<Extension>>,
}

fn contained<T>(what: &str, extension: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        let detail = panic_message(&*payload);
        tracing::warn!(extension, hook = what, panic = %detail, "an extension hook panicked");
        detail
    })
}

impl HookDispatcher {
    pub(crate) fn add(&mut self, extension: Extension) {
        Arc::make_mut(&mut self.extensions).push(extension);
    }

    pub(crate) fn has(&self, kind: HookKind) -> bool {
        self.extensions.iter().any(|e| e.handles(kind))
    }

    pub(crate) fn context(&self, messages: &mut Vec<Message>) {
        for ext in self.extensions.iter() {
            if let Some(hook) = &ext.context {
                // Work on a scratch copy so a panic half-way leaves the previous state intact.
                let mut scratch = messages.clone();
                if contained("context", &ext.name, || hook(&mut scratch)).is_ok() {
                    *messages = scratch;
                }
            }
        }
    }

    pub(crate) fn before_provider_request(&self, request: &mut ModelRequest<'_>) {
        for ext in self.extensions.iter() {
            if let Some(hook) = &ext.before_provider_request {
                let mut scratch = request.clone();
                if contained("before_provider_request", &ext.name, || hook(&mut scratch)).is_ok() {
                    *request = scratch;
                }
            }
        }
    }

    /// The first veto wins; rewrites chain. `Err` holds (extension, why) for a block.
    pub(crate) fn tool_call(
        &self,
        call: &PreparedToolCall,
    ) -> Result<Option<Value>, (Option<String>, String)> {
        let mut current = call.clone();
        let mut rewritten = false;
        for ext in self.extensions.iter() {
            let Some(hook) = &ext.tool_call else { continue };
            match contained("tool_call", &ext.name, || hook(&current)) {
                Ok(ToolCallDecision::Continue) => {}
                Ok(ToolCallDecision::Block(reason)) => {
                    return Err((Some(ext.name.clone()), reason));
                }
                Ok(ToolCallDecision::Rewrite(args)) => {
                    current.arguments = args;
                    rewritten = true;
                }
                Err(detail) => {
                    return Err((
                        None,
                        format!(
                            "Tool call \"{}\" was blocked because the extension \"{}\" failed while \
                             checking it ({detail}).",
                            call.tool_name, ext.name
                        ),
                    ));
                }
            }
        }
        Ok(rewritten.then_some(current.arguments))
    }

    pub(crate) fn tool_result(&self, finalized: &mut FinalizedToolCall) {
        for ext in self.extensions.iter() {
            let Some(hook) = &ext.tool_result else {
                continue;
            };
            match contained("tool_result", &ext.name, || hook(finalized)) {
                Ok(None) => {}
                Ok(Some(rewrite)) => {
                    if let Some(content) = rewrite.content {
                        finalized.result.content = content;
                    }
                    if let Some(is_error) = rewrite.is_error {
                        finalized.result.is_error = is_error;
                    }
                    finalized.is_error = finalized.result.is_error;
                }
                Err(detail) => {
                    finalized.result.content = format!(
                        "The result of tool \"{}\" was withheld because the extension \"{}\" failed \
                         while processing it ({detail}).",
                        finalized.tool_name, ext.name
                    );
                    finalized.result.is_error = true;
                    finalized.result.images.clear();
                    finalized.is_error = true;
                }
            }
        }
    }

    /// `Some(name)` of the extension that asked to stop (a panicking hook counts as a stop).
    pub(crate) fn should_stop_after_turn(&self, summary: &TurnSummary<'_>) -> Option<String> {
        for ext in self.extensions.iter() {
            let Some(hook) = &ext.should_stop_after_turn else {
                continue;
            };
            match contained("should_stop_after_turn", &ext.name, || hook(summary)) {
                Ok(false) => {}
                Ok(true) | Err(_) => return Some(ext.name.clone()),
            }
        }
        None
    }
}
