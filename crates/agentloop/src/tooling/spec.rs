//! [`ToolSpec`]: a tool's model-visible definition plus the handler that does the work.
//!
//! A handler is any `Fn(ToolContext<D>, Args) -> R` where `Args: Deserialize` ("binding to the
//! handler's signature" is deserializing the model's arguments into `Args`) and `R` converts into a
//! result ([`IntoToolOutput`]). Async handlers are awaited by the executor; blocking handlers run
//! on Tokio's blocking pool so they never stall the async workers. This module only describes
//! tools; running them is the executor's job.

use derive_where::derive_where;
use std::any::Any;
use std::future::Future;
use std::ops::Deref;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::FutureExt;
use jsonschema::Validator;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::error::{SpecError, ToolError};
use super::observer::ToolObserver;
use super::validate;
use crate::transcript::ImagePart;

/// What a successful handler produced: text for the model, optionally images.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ToolOutput {
    /// Model-visible text.
    pub content: String,
    /// Images to show the model.
    pub images: Vec<ImagePart>,
}

impl ToolOutput {
    /// A text-only output.
    pub fn text(content: impl Into<String>) -> Self {
        ToolOutput {
            content: content.into(),
            images: Vec::new(),
        }
    }

    /// Adds an image.
    pub fn with_image(mut self, image: ImagePart) -> Self {
        self.images.push(image);
        self
    }
}

/// Wraps any `Serialize` value so a handler can return it: the value becomes compact JSON, except
/// that a value serializing to a JSON string passes through unquoted (the tool contract's
/// `serialize_result`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Json<T>(pub T);

/// Converts a handler's return value into a result for the model.
///
/// Implemented for `String`, `&str`, [`ToolOutput`], [`serde_json::Value`], [`Json<T>`], `()`
/// (empty content) and `Result<T, E>` where `T: IntoToolOutput` and `E: Into<ToolError>`.
pub trait IntoToolOutput {
    /// Performs the conversion; an `Err` becomes an error result.
    fn into_tool_output(self) -> Result<ToolOutput, ToolError>;
}

impl IntoToolOutput for ToolOutput {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

impl IntoToolOutput for String {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self))
    }
}

impl IntoToolOutput for &str {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(self))
    }
}

impl IntoToolOutput for () {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::default())
    }
}

impl IntoToolOutput for Value {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(serialize_result(&self)?))
    }
}

impl<T: Serialize> IntoToolOutput for Json<T> {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text(serialize_result(&self.0)?))
    }
}

impl<T: IntoToolOutput, E: Into<ToolError>> IntoToolOutput for Result<T, E> {
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        self.map_err(Into::into)?.into_tool_output()
    }
}

/// Converts a value to the text a model sees: strings unchanged, anything else compact JSON.
pub fn serialize_result<T: Serialize + ?Sized>(value: &T) -> Result<String, ToolError> {
    match serde_json::to_value(value) {
        Ok(Value::String(s)) => Ok(s),
        Ok(other) => Ok(other.to_string()),
        Err(e) => Err(ToolError::new(format!(
            "the tool's result could not be serialized: {e}"
        ))),
    }
}

/// Per-call context handed to a handler: the deps bundle (also reachable through `Deref`), the
/// call id, a cancellation signal and a way to report progress.
#[derive_where(Clone)]
pub struct ToolContext<D> {
    deps: Arc<D>,
    call_id: Arc<str>,
    tool_name: Arc<str>,
    cancel: CancellationToken,
    progress: Option<ProgressSink>,
    session_id: Option<Arc<str>>,
}

#[derive(Clone)]
pub(crate) struct ProgressSink {
    pub(crate) observer: Arc<dyn ToolObserver>,
    /// Set once the call has its result; later updates (from an abandoned handler) are dropped.
    pub(crate) finished: Arc<AtomicBool>,
}

impl<D> ToolContext<D> {
    pub(crate) fn new(
        deps: Arc<D>,
        call_id: Arc<str>,
        tool_name: Arc<str>,
        cancel: CancellationToken,
        progress: Option<ProgressSink>,
    ) -> Self {
        ToolContext {
            deps,
            call_id,
            tool_name,
            cancel,
            progress,
            session_id: None,
        }
    }

    /// Sets the session the call belongs to (for [`idempotency_key`](Self::idempotency_key)).
    pub(crate) fn with_session(mut self, session_id: Option<Arc<str>>) -> Self {
        self.session_id = session_id;
        self
    }

    /// A key unique to this call of this session: `<session id>/<call id>`, or the call id alone
    /// when the agent has no session id
    /// ([`AgentLoop::with_session_label`](crate::agent::AgentLoop::with_session_label) or [`with_session`](crate::agent::AgentLoop::with_session)). It is the
    /// same when a call deferred for approval finally runs in another process, so a tool whose
    /// side effects live outside our control (a payment, an email) can pass it on and let the
    /// other side drop a duplicate.
    pub fn idempotency_key(&self) -> String {
        match &self.session_id {
            Some(session) => format!("{session}/{}", self.call_id),
            None => self.call_id.to_string(),
        }
    }

    /// A context for calling a handler directly, outside any batch (tests, direct calls).
    pub fn detached(deps: Arc<D>, call_id: impl Into<String>) -> Self {
        let call_id: String = call_id.into();
        ToolContext::new(
            deps,
            Arc::from(call_id),
            Arc::from(""),
            CancellationToken::new(),
            None,
        )
    }

    /// The dependency bundle.
    pub fn deps(&self) -> &Arc<D> {
        &self.deps
    }

    /// The id of the call being answered.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// Cancelled when the call times out or the run is aborted. Async handlers are dropped at
    /// that point anyway; blocking handlers should poll
    /// [`is_cancelled`](CancellationToken::is_cancelled) and return early.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// Whether the call has been cancelled (timeout or abort).
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Reports a progress update (forwarded to the observer as `call_progress`, and by the agent
    /// loop as a `ToolExecutionUpdate` event). Updates after the call finished are dropped.
    pub fn progress(&self, update: impl Into<Value>) {
        if let Some(sink) = &self.progress {
            if sink.finished.load(Ordering::Acquire) {
                return;
            }
            let update = update.into();
            let observer = &sink.observer;
            super::observer::guarded(|| {
                observer.call_progress(&self.call_id, &self.tool_name, &update)
            });
        }
    }
}

impl<D> Deref for ToolContext<D> {
    type Target = D;
    fn deref(&self) -> &D {
        &self.deps
    }
}

/// A boxed future returned by async handlers.
pub type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;

/// A bound call, ready to run: arguments have been deserialized but no handler code has run.
pub(crate) enum Invocation {
    Async(ToolFuture),
    Blocking(Box<dyn FnOnce() -> Result<ToolOutput, ToolError> + Send>),
}

/// Binds arguments and prepares an invocation. An `Err` means the arguments did not deserialize.
pub(crate) type HandlerFn<D> =
    Arc<dyn Fn(ToolContext<D>, Value) -> Result<Invocation, String> + Send + Sync>;

fn bind<A: DeserializeOwned + 'static>(args: Value) -> Result<A, String> {
    // A handler that takes its arguments as a `Value` (every MCP tool, most dynamic tools) gets
    // them as they are: `from_value::<Value>` would rebuild every map, string and number of
    // them into an identical copy, on each call.
    let mut slot = Some(args);
    if let Some(same) = (&mut slot as &mut dyn Any).downcast_mut::<Option<A>>()
        && let Some(args) = same.take()
    {
        return Ok(args);
    }
    serde_json::from_value(slot.unwrap_or_default()).map_err(|e| e.to_string())
}

/// A tool: its model-visible definition and its handler. Build one with [`ToolSpec::builder`].
///
/// ```
/// use agentloop::tooling::{Deps, ToolContext, ToolSpec};
/// use serde::Deserialize;
/// use serde_json::json;
///
/// #[derive(Deserialize)]
/// struct EchoArgs {
///     text: String,
/// }
///
/// let spec = ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
///     .parameters(json!({
///         "type": "object",
///         "properties": {"text": {"type": "string"}},
///         "required": ["text"],
///         "additionalProperties": false
///     }))
///     .handler(|_ctx: ToolContext<Deps>, args: EchoArgs| async move { args.text })
///     .build()
///     .unwrap();
/// assert_eq!(spec.name(), "echo");
/// assert!(spec.parallel_safe());
/// ```
#[derive_where(Clone, Debug)]
pub struct ToolSpec<D> {
    pub(crate) name: String,
    pub(crate) description: String,
    pub(crate) parameters: Value,
    #[derive_where(skip(Debug))]
    pub(crate) handler: HandlerFn<D>,
    pub(crate) parallel_safe: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) guidelines: Vec<String>,
    pub(crate) snippet: Option<String>,
    pub(crate) deferred: bool,
    pub(crate) local_tool_search: bool,
    pub(crate) requires_approval: bool,
    /// The parameters schema, compiled on first use (registration in a registry or a direct
    /// [`call`](ToolSpec::call)) and shared by clones and by [`with_handler`](ToolSpec::with_handler)
    /// copies: a spec registered in many agents compiles its schema once.
    #[derive_where(skip(Debug))]
    pub(crate) validator: Arc<OnceLock<Result<Arc<Validator>, String>>>,
}

impl<D: Send + Sync + 'static> ToolSpec<D> {
    /// Starts building a tool with a name and a description.
    pub fn builder(name: impl Into<String>, description: impl Into<String>) -> ToolSpecBuilder<D> {
        ToolSpecBuilder {
            name: name.into(),
            description: description.into(),
            parameters: None,
            handler: None,
            parallel_safe: true,
            timeout: None,
            guidelines: Vec::new(),
            snippet: None,
            deferred: false,
            local_tool_search: false,
            requires_approval: false,
        }
    }
}

impl<D> ToolSpec<D> {
    /// Model-visible name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Model-visible description.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// JSON Schema of the arguments.
    pub fn parameters(&self) -> &Value {
        &self.parameters
    }
    /// Whether calls may run concurrently with other calls of the same batch.
    pub fn parallel_safe(&self) -> bool {
        self.parallel_safe
    }
    /// Per-call time limit (`None`: the executor's default, if any).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    /// Model-facing rules rendered into the tool-guidance section.
    pub fn guidelines(&self) -> &[String] {
        &self.guidelines
    }
    /// Invocation examples rendered into the tool-guidance section.
    pub fn snippet(&self) -> Option<&str> {
        self.snippet.as_deref()
    }
    /// Whether the tool is hidden from the model until a tool search loads it.
    pub fn deferred(&self) -> bool {
        self.deferred
    }
    /// Whether this tool answers client-side tool searches.
    pub fn local_tool_search(&self) -> bool {
        self.local_tool_search
    }
    /// Whether a call needs a decision before it runs: the deps bundle's
    /// [`approve`](crate::tooling::ToolDeps::approve) sees it as
    /// [`ApprovalRequest::requires_approval`](crate::tooling::ApprovalRequest::requires_approval),
    /// and by default defers such a call for a person (the agent loop parks the run).
    pub fn requires_approval(&self) -> bool {
        self.requires_approval
    }

    crate::setters! {
        /// Returns a copy with a different `requires_approval` flag.
        pub fn with_requires_approval(requires_approval: bool) =>
            requires_approval = requires_approval;
        /// Returns a copy with a different timeout.
        pub fn with_timeout(timeout: Option<Duration>) => timeout = timeout;
        /// Returns a copy with a different `parallel_safe` flag.
        pub fn with_parallel_safe(parallel_safe: bool) => parallel_safe = parallel_safe;
    }

    /// The compiled parameters schema (compiled on the first call, then shared; see
    /// [`ToolSpec::validator`]). `Err` holds why the schema does not compile.
    pub(crate) fn compiled_validator(&self) -> Result<&Arc<Validator>, &str> {
        self.validator
            .get_or_init(|| validate::compile(&self.parameters).map(Arc::new))
            .as_ref()
            .map_err(String::as_str)
    }
}

impl<D: Send + Sync + 'static> ToolSpec<D> {
    /// Returns a copy that runs `handler` instead, with the same name, description, schema,
    /// flags, timeout and guidance: a wrapper (a proxy that forwards calls elsewhere, say)
    /// that looks exactly like the tool to the model. The compiled schema is shared with the
    /// original, so building such copies per run costs no recompilation.
    ///
    /// ```
    /// use agentloop::tooling::{Deps, ToolContext, ToolSpec};
    /// use serde_json::{json, Value};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let upper = ToolSpec::<Deps>::builder("upper", "Upper-case the text.")
    ///     .parameters(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
    ///     .handler(|_ctx: ToolContext<Deps>, args: Value| async move {
    ///         args["text"].as_str().unwrap_or_default().to_uppercase()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let logged = upper.clone().with_handler(|_ctx: ToolContext<Deps>, args: Value| async move {
    ///     format!("would upper-case {}", args["text"])
    /// });
    /// assert_eq!(logged.name(), "upper");
    /// let deps = Arc::new(Deps::new());
    /// assert_eq!(
    ///     logged.call(deps.clone(), json!({"text": "hi"})).await.unwrap().content,
    ///     "would upper-case \"hi\""
    /// );
    /// // Same schema, same checks.
    /// assert!(logged.call(deps, json!({"text": 5})).await.is_err());
    /// # }
    /// ```
    pub fn with_handler<A, F, Fut, R>(mut self, handler: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(ToolContext<D>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolOutput + 'static,
    {
        self.handler = async_handler(handler);
        self
    }
}

impl<D: Send + Sync + 'static> ToolSpec<D> {
    /// Calls the tool directly from Rust with a JSON object of arguments (the tool contract's `__call__`),
    /// without a model, a registry or an approval hook.
    ///
    /// The arguments go through the same checks as in [`run_tools`](crate::tooling::run_tools):
    /// a JSON object, valid against the full parameters schema (every violation listed), bound
    /// to the handler's argument type. The tool's own timeout applies. A blocking handler runs
    /// on Tokio's blocking pool, so this must be awaited inside a Tokio runtime; a panicking
    /// handler becomes a [`ToolErrorKind::Panicked`](crate::tooling::ToolErrorKind) error. The
    /// handler's context has the call id `"direct"` and no progress observer.
    ///
    /// ```
    /// use agentloop::tooling::{Deps, ToolContext, ToolSpec};
    /// use serde_json::{json, Value};
    /// use std::sync::Arc;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let upper = ToolSpec::<Deps>::builder("upper", "Upper-case the text.")
    ///     .parameters(json!({
    ///         "type": "object",
    ///         "properties": {"text": {"type": "string"}},
    ///         "required": ["text"]
    ///     }))
    ///     .blocking_handler(|_ctx: ToolContext<Deps>, args: Value| {
    ///         args["text"].as_str().unwrap_or_default().to_uppercase()
    ///     })
    ///     .build()
    ///     .unwrap();
    /// let deps = Arc::new(Deps::new());
    /// assert_eq!(upper.call(deps.clone(), json!({"text": "hi"})).await.unwrap().content, "HI");
    /// let err = upper.call(deps, json!({"text": 5})).await.unwrap_err();
    /// assert!(err.message().contains("$.text: 5 is not of type \"string\""));
    /// # }
    /// ```
    pub async fn call(&self, deps: Arc<D>, args: Value) -> Result<ToolOutput, ToolError> {
        if !args.is_object() {
            return Err(ToolError::malformed(
                &self.name,
                &args.to_string(),
                json_kind(&args),
            ));
        }
        match self.compiled_validator() {
            Ok(validator) => validate::check(&self.name, validator, &args)?,
            Err(reason) => {
                return Err(ToolError::new(format!(
                    "the parameters schema of tool \"{}\" does not compile: {reason}",
                    self.name
                )));
            }
        }
        let cancel = CancellationToken::new();
        let ctx = ToolContext::new(
            deps,
            Arc::from("direct"),
            Arc::from(self.name.as_str()),
            cancel.clone(),
            None,
        );
        let invocation = super::executor::bind_invocation(&self.handler, &self.name, ctx, args)?;
        let name = self.name.as_str();
        let run = async move {
            match invocation {
                Invocation::Async(fut) => AssertUnwindSafe(fut)
                    .catch_unwind()
                    .await
                    .unwrap_or_else(|p| Err(ToolError::panicked(name, &super::panic_message(&*p)))),
                Invocation::Blocking(f) => match tokio::task::spawn_blocking(f).await {
                    Ok(result) => result,
                    Err(e) if e.is_panic() => Err(ToolError::panicked(
                        name,
                        &super::panic_message(&*e.into_panic()),
                    )),
                    Err(_) => Err(ToolError::aborted(name)),
                },
            }
        };
        match self.timeout {
            None => run.await,
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(result) => result,
                Err(_) => {
                    // Tell an abandoned blocking handler to stop early.
                    cancel.cancel();
                    Err(ToolError::timeout(name, limit))
                }
            },
        }
    }
}

/// `f` as a handler: binds the arguments to `A`, then awaits `f`'s future.
fn async_handler<D, A, F, Fut, R>(f: F) -> HandlerFn<D>
where
    D: Send + Sync + 'static,
    A: DeserializeOwned + Send + 'static,
    F: Fn(ToolContext<D>, A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolOutput + 'static,
{
    Arc::new(move |ctx, args| {
        let args: A = bind(args)?;
        let fut = f(ctx, args);
        Ok(Invocation::Async(Box::pin(async move {
            fut.await.into_tool_output()
        })))
    })
}

/// How a non-object JSON value is named in a "malformed arguments" error.
pub(super) fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Builder for [`ToolSpec`]; [`build`](ToolSpecBuilder::build) checks the name, description and
/// parameters.
pub struct ToolSpecBuilder<D> {
    name: String,
    description: String,
    parameters: Option<Value>,
    handler: Option<HandlerFn<D>>,
    parallel_safe: bool,
    timeout: Option<Duration>,
    guidelines: Vec<String>,
    snippet: Option<String>,
    deferred: bool,
    local_tool_search: bool,
    requires_approval: bool,
}

impl<D: Send + Sync + 'static> ToolSpecBuilder<D> {
    /// JSON Schema of the arguments (an object schema). Defaults to an object with no properties.
    pub fn parameters(mut self, schema: Value) -> Self {
        self.parameters = Some(schema);
        self
    }

    /// An async handler: `|ctx, args| async move { … }`. Dropped (cancelled) on timeout or abort.
    pub fn handler<A, F, Fut, R>(mut self, f: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(ToolContext<D>, A) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = R> + Send + 'static,
        R: IntoToolOutput + 'static,
    {
        self.handler = Some(async_handler(f));
        self
    }

    /// A blocking (synchronous) handler: runs on Tokio's blocking pool, never on an async worker.
    /// On timeout it is abandoned (Rust cannot stop a running thread): its late result is
    /// discarded and its context's cancellation token is cancelled so it can stop early.
    pub fn blocking_handler<A, F, R>(mut self, f: F) -> Self
    where
        A: DeserializeOwned + Send + 'static,
        F: Fn(ToolContext<D>, A) -> R + Send + Sync + 'static,
        R: IntoToolOutput + 'static,
    {
        let f = Arc::new(f);
        let handler: HandlerFn<D> = Arc::new(move |ctx, args| {
            let args: A = bind(args)?;
            let f = f.clone();
            Ok(Invocation::Blocking(Box::new(move || {
                f(ctx, args).into_tool_output()
            })))
        });
        self.handler = Some(handler);
        self
    }

    crate::setters! {
        /// Marks the tool unsafe to run beside others: a batch that calls it runs sequentially.
        pub fn parallel_safe(parallel_safe: bool) => parallel_safe = parallel_safe;
        /// Per-call time limit.
        pub fn timeout(timeout: Duration) => timeout = Some(timeout);
    }

    /// Adds a model-facing rule for the tool-guidance section.
    pub fn guideline(mut self, rule: impl Into<String>) -> Self {
        self.guidelines.push(rule.into());
        self
    }

    crate::setters! {
        /// Sets invocation examples for the tool-guidance section.
        pub fn snippet(snippet: impl Into<String>) => snippet = Some(snippet.into());
        /// Hides the tool until a tool search loads it.
        pub fn deferred(deferred: bool) => deferred = deferred;
        /// Marks the tool as the registry's client-side tool-search handler.
        pub fn local_tool_search(yes: bool) => local_tool_search = yes;
        /// Declares that a call needs a decision before it runs (see
        /// [`ToolSpec::requires_approval`]).
        pub fn requires_approval(yes: bool) => requires_approval = yes;
    }

    /// Checks the definition and builds the spec.
    pub fn build(self) -> Result<ToolSpec<D>, SpecError> {
        validate_name(&self.name)?;
        if self.description.trim().is_empty() {
            return Err(SpecError::EmptyDescription(self.name));
        }
        let parameters = self
            .parameters
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}}));
        check_parameters(&self.name, &parameters)?;
        let handler = self
            .handler
            .ok_or_else(|| SpecError::MissingHandler(self.name.clone()))?;
        Ok(ToolSpec {
            name: self.name,
            description: self.description,
            parameters,
            handler,
            parallel_safe: self.parallel_safe,
            timeout: self.timeout,
            guidelines: self.guidelines,
            snippet: self.snippet,
            deferred: self.deferred,
            local_tool_search: self.local_tool_search,
            requires_approval: self.requires_approval,
            validator: Arc::new(OnceLock::new()),
        })
    }
}

/// Checks a tool name against what every supported provider accepts: `^[A-Za-z0-9_-]{1,64}$`.
pub fn validate_name(name: &str) -> Result<(), SpecError> {
    if name.is_empty() {
        return Err(SpecError::EmptyName);
    }
    let ok = name.len() <= 64 && name.chars().all(is_name_char);
    if ok {
        Ok(())
    } else {
        Err(SpecError::InvalidName(name.to_owned()))
    }
}

/// Whether every supported provider accepts `c` in a tool name or a call id: `[A-Za-z0-9_-]`.
pub(crate) fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// The first `max_chars` characters of `text`, each one that a provider would reject in a tool
/// name or a call id replaced by `_`.
pub(crate) fn name_safe(text: &str, max_chars: usize) -> String {
    text.chars()
        .map(|c| if is_name_char(c) { c } else { '_' })
        .take(max_chars)
        .collect()
}

fn check_parameters(name: &str, schema: &Value) -> Result<(), SpecError> {
    let invalid = |reason: &str| SpecError::InvalidParameters {
        name: name.to_owned(),
        reason: reason.to_owned(),
    };
    let obj = schema
        .as_object()
        .ok_or_else(|| invalid("the schema must be a JSON object"))?;
    match obj.get("type") {
        Some(Value::String(t)) if t == "object" => Ok(()),
        Some(_) => Err(invalid(
            "the schema's \"type\" must be \"object\" (tool arguments are always an object)",
        )),
        None => Err(invalid("the schema needs \"type\": \"object\"")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooling::Deps;
    use serde_json::json;

    fn builder(name: &str, description: &str) -> ToolSpecBuilder<Deps> {
        ToolSpec::<Deps>::builder(name, description)
            .blocking_handler(|_ctx: ToolContext<Deps>, _: Value| "ok")
    }

    #[test]
    fn names_providers_refuse_are_rejected() {
        assert_eq!(builder("", "d").build().err(), Some(SpecError::EmptyName));
        for bad in ["has space", "dot.name", "ünï", &"x".repeat(65), "a/b"] {
            assert_eq!(
                builder(bad, "d").build().err(),
                Some(SpecError::InvalidName(bad.to_owned())),
                "{bad}"
            );
        }
        for good in ["a", "read_file", "Tool-2", &"x".repeat(64)] {
            assert!(builder(good, "d").build().is_ok(), "{good}");
        }
    }

    #[test]
    fn empty_description_is_rejected_with_the_tool_name() {
        let err = builder("t", "  ").build().err();
        assert_eq!(err, Some(SpecError::EmptyDescription("t".into())));
        assert!(
            err.map(|e| e.to_string())
                .unwrap_or_default()
                .contains("\"t\"")
        );
    }

    #[test]
    fn parameters_must_be_an_object_schema() {
        let err = builder("t", "d")
            .parameters(json!({"type": "string"}))
            .build();
        assert!(matches!(err, Err(SpecError::InvalidParameters { .. })));
        let err = builder("t", "d").parameters(json!([1])).build();
        assert!(matches!(err, Err(SpecError::InvalidParameters { .. })));
    }

    #[test]
    fn a_handler_is_required() {
        let err = ToolSpec::<Deps>::builder("t", "d").build().err();
        assert_eq!(err, Some(SpecError::MissingHandler("t".into())));
    }

    #[test]
    fn value_arguments_are_bound_as_they_are_and_typed_ones_deserialize() {
        let args = json!({"a": [1, 2.5, "x"], "b": {"c": null}});
        assert_eq!(bind::<Value>(args.clone()), Ok(args.clone()));
        #[derive(serde::Deserialize, Debug, PartialEq)]
        struct Typed {
            a: Vec<Value>,
        }
        assert_eq!(
            bind::<Typed>(args),
            Ok(Typed {
                a: vec![json!(1), json!(2.5), json!("x")]
            })
        );
        assert!(bind::<Typed>(json!({"b": 1})).is_err());
    }

    #[test]
    fn results_serialize_like_seed_004() {
        assert_eq!(serialize_result("plain").ok(), Some("plain".to_owned()));
        assert_eq!(
            serialize_result(&json!({"a": 1, "b": [true]})).ok(),
            Some("{\"a\":1,\"b\":[true]}".to_owned())
        );
        assert_eq!(serialize_result(&42).ok(), Some("42".to_owned()));
        let out: Result<ToolOutput, ToolError> =
            Err::<String, _>(ToolError::new("boom")).into_tool_output();
        assert_eq!(out, Err(ToolError::new("boom")));
    }
}
