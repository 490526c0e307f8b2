//! Typed output: an agent run that returns a validated value instead of "the last message's
//! text" — a Rust type (`T: DeserializeOwned + JsonSchema`) or a JSON Schema given at run time.
//!
//! This module owns the output description ([`Output`]), how the model is asked for it
//! ([`OutputStrategy`]: the provider's native structured output, a final-result tool, or
//! instructions in the prompt), validation with the tool-argument validator plus
//! deserialization, the repair loop (violations go back to the model, up to
//! [`Output::retries`] times) and the typed error when the model never produces a valid value
//! ([`OutputError::Invalid`], carrying the raw output, the violations and the completed
//! messages). The loop itself stays in [`agent`](crate::agent); providers only see an
//! [`OutputFormat`] on the request and map it to their wire field.
//!
//! While the reply streams, each [`AgentEvent::MessageUpdate`](crate::agent::AgentEvent) carries
//! the output parsed so far (`output`), so a UI can render a growing object.
//!
//! ```
//! use agentloop::agent::{AgentLoop, AgentLoopConfig};
//! use agentloop::model::{ScriptedModel, ScriptedTurn};
//! use agentloop::transcript::Message;
//! use schemars::JsonSchema;
//! use serde::Deserialize;
//!
//! #[derive(Debug, Deserialize, JsonSchema)]
//! struct Ticket {
//!     title: String,
//!     priority: u8,
//! }
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Without native structured output (a scripted model), the model ends the run by calling
//! // the final-result tool with the output as its arguments.
//! let model = ScriptedModel::new([ScriptedTurn::new().tool_call(
//!     "call-1",
//!     "final_result",
//!     serde_json::json!({"title": "Disk full", "priority": 1}),
//! )]);
//! let agent = AgentLoop::new(AgentLoopConfig::default(), model);
//! let typed = agent
//!     .run_typed::<Ticket>(vec![Message::user("File a ticket: the disk is full")], vec![])
//!     .await?;
//! assert_eq!(typed.value.title, "Disk full");
//! assert_eq!(typed.outcome.turns, 1);
//! # Ok(()) }
//! ```

mod plan;
mod run;
pub(crate) mod schema;

use derive_where::derive_where;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The native structured-output request a provider sees; it lives with the model request.
pub use crate::model::OutputFormat;
pub(crate) use plan::{OutputPlan, OutputRun, PartialOutput};

use crate::agent::{AgentError, RunOutcome, RunStop};
use crate::tooling::name_safe;
use crate::transcript::Message;

/// Default number of repair attempts after the first invalid output.
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;

/// Base name of the final-result tool(s).
pub const FINAL_RESULT_TOOL: &str = "final_result";

/// How the model is asked for the output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum OutputStrategy {
    /// Chosen per provider: native structured output on OpenAI Chat and Responses, and on
    /// Anthropic models that support it (when the schema fits its strict subset); a final-result
    /// tool everywhere else.
    #[default]
    Auto,
    /// The provider's structured-output field (`response_format`, `text.format`,
    /// `output_config.format`): the model's final text is the JSON value. Other tools stay
    /// available.
    Native,
    /// A final-result tool whose parameters are the output schema (one tool per branch for a
    /// union). The model may call other tools first; the run ends when it calls a final tool
    /// with valid arguments.
    Tool,
    /// Instructions and the schema in the system prompt; the final text is parsed as JSON (code
    /// fences and surrounding prose are tolerated). The last resort, for models without native
    /// output or tool calling.
    Prompted,
}

crate::keywords! {
    OutputStrategy;
    /// An unknown output strategy name.
    error ParseOutputStrategyError: "output strategy";
    Auto => "auto",
    Native => "native",
    Tool => "tool",
    Prompted => "prompted" | "prompt",
}

type ParseFn = Arc<dyn Fn(&Value) -> Result<Box<dyn Any + Send>, String> + Send + Sync>;

/// The output a run must produce: its schema, how to ask for it and how often to let the model
/// repair it. `T` is the Rust type it deserializes into ([`Value`] for a schema given at run
/// time).
///
/// ```
/// use agentloop::output::{Output, OutputStrategy};
/// use serde_json::{json, Value};
///
/// let dynamic: Output<Value> = Output::from_schema("verdict", json!({
///     "type": "object",
///     "properties": {"ok": {"type": "boolean"}},
///     "required": ["ok"]
/// }))?
/// .strategy(OutputStrategy::Tool)
/// .retries(3);
/// assert_eq!(dynamic.name(), "verdict");
/// # Ok::<(), agentloop::output::OutputError>(())
/// ```
#[derive_where(Clone, Debug)]
pub struct Output<T = Value> {
    name: String,
    description: Option<String>,
    schema: Value,
    strategy: OutputStrategy,
    retries: u32,
    #[derive_where(skip(Debug))]
    parse: ParseFn,
    /// Compiled once, shared by every run with this output.
    #[derive_where(skip(Debug))]
    validator: Result<Arc<jsonschema::Validator>, String>,
    #[derive_where(skip(Debug))]
    _type: PhantomData<fn() -> T>,
}

/// The JSON Schema schemars generates for `T`: self-contained (subschemas inlined; recursive
/// types keep `$defs`), without the `$schema` key.
pub fn output_schema<T: JsonSchema>() -> Value {
    let mut schema = crate::json::schema::inlined_schema::<T>();
    schema::tidy_root(&mut schema);
    schema
}

impl<T: DeserializeOwned + JsonSchema + Send + 'static> Output<T> {
    /// The output of type `T`, its schema generated by schemars (named after the type's schema
    /// title).
    pub fn of() -> Self {
        let schema = output_schema::<T>();
        let name = schema
            .get("title")
            .and_then(Value::as_str)
            .map_or_else(|| T::schema_name().into_owned(), str::to_owned);
        let parse: ParseFn = Arc::new(|value: &Value| {
            T::deserialize(value)
                .map(|t| Box::new(t) as Box<dyn Any + Send>)
                .map_err(|e| e.to_string())
        });
        let validator = compile(&schema);
        Output::assemble(&name, schema, parse, validator)
    }
}

impl<T> Output<T> {
    /// An output with the default strategy and retries; the description is the schema's.
    fn assemble(
        name: &str,
        schema: Value,
        parse: ParseFn,
        validator: Result<Arc<jsonschema::Validator>, String>,
    ) -> Self {
        let description = schema
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_owned);
        Output {
            name: sanitize_name(name),
            description,
            schema,
            strategy: OutputStrategy::Auto,
            retries: DEFAULT_OUTPUT_RETRIES,
            parse,
            validator,
            _type: PhantomData,
        }
    }
}

impl Output<Value> {
    /// An output described by a JSON Schema given at run time (the CLI's `--output-schema`, or
    /// a schema built dynamically). Fails when the schema does not compile.
    pub fn from_schema(name: impl Into<String>, schema: Value) -> Result<Self, OutputError> {
        let validator = Ok(compile(&schema).map_err(OutputError::Schema)?);
        let parse: ParseFn =
            Arc::new(|value: &Value| Ok(Box::new(value.clone()) as Box<dyn Any + Send>));
        Ok(Output::assemble(&name.into(), schema, parse, validator))
    }
}

impl<T> Output<T> {
    crate::setters! {
        /// Uses `strategy` instead of choosing one per provider.
        pub fn strategy(strategy: OutputStrategy) => strategy = strategy;
        /// Lets the model repair an invalid output up to `retries` times (default
        /// [`DEFAULT_OUTPUT_RETRIES`]); 0 fails on the first invalid output.
        pub fn retries(retries: u32) => retries = retries;
        /// Sets the description shown to the model (default: the schema's `description`).
        pub fn description(description: impl Into<String>) => description = Some(description.into());
    }

    /// The output's name (the schema name sent to providers).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The JSON Schema the output is validated against.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// The configured strategy.
    pub fn configured_strategy(&self) -> OutputStrategy {
        self.strategy
    }

    /// The configured number of repair attempts.
    pub fn configured_retries(&self) -> u32 {
        self.retries
    }
}

fn compile(schema: &Value) -> Result<Arc<jsonschema::Validator>, String> {
    jsonschema::validator_for(schema)
        .map(Arc::new)
        .map_err(|e| e.to_string())
}

/// Provider-safe schema name.
fn sanitize_name(name: &str) -> String {
    let mut out = name_safe(name, 64);
    if out.is_empty() {
        out.push_str("output");
    }
    out
}

/// A typed run's result: the validated value and the usual outcome.
#[derive(Clone, Debug)]
pub struct TypedOutcome<T> {
    /// The output, deserialized.
    pub value: T,
    /// The output as the validated JSON value (unwrapped when the schema was wrapped).
    pub json: Value,
    /// Which strategy produced it.
    pub strategy: OutputStrategy,
    /// The run: messages, usage, turns, stop.
    pub outcome: RunOutcome,
}

/// Why a typed run produced no value.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OutputError {
    /// The output schema is unusable (it does not compile).
    #[error("invalid output schema: {0}")]
    Schema(String),
    /// The run itself failed (model error, bad configuration…); see the inner error.
    #[error(transparent)]
    Run(#[from] AgentError),
    /// The model never produced a valid output: every attempt was invalid (and the repairs ran
    /// out), or the run ended for another reason (max turns, abort, hook stop) before it did.
    #[error("the model produced no valid output ({attempts} invalid attempt(s), run stop: {stop}){}", render_violations(.violations))]
    Invalid {
        /// How many invalid outputs the model gave.
        attempts: u32,
        /// The last raw output (final text or final-tool arguments), if any.
        raw: Option<String>,
        /// The last output's violations (JSON paths and messages).
        violations: Vec<String>,
        /// Why the run ended.
        stop: RunStop,
        /// Every message the run completed (prompts included).
        completed: Vec<Message>,
    },
}

fn render_violations(violations: &[String]) -> String {
    if violations.is_empty() {
        return String::new();
    }
    let mut out = String::from(":");
    for v in violations {
        out.push_str("\n  - ");
        out.push_str(v);
    }
    out
}

impl OutputError {
    /// The messages completed before the run ended (empty when it never started).
    pub fn completed_messages(&self) -> &[Message] {
        match self {
            OutputError::Run(e) => e.completed_messages(),
            OutputError::Invalid { completed, .. } => completed,
            OutputError::Schema(_) => &[],
        }
    }

    /// The last raw output, when the model gave one.
    pub fn raw_output(&self) -> Option<&str> {
        match self {
            OutputError::Invalid { raw, .. } => raw.as_deref(),
            _ => None,
        }
    }

    /// The violations of the last output (empty unless [`OutputError::Invalid`]).
    pub fn violations(&self) -> &[String] {
        match self {
            OutputError::Invalid { violations, .. } => violations,
            _ => &[],
        }
    }

    /// Whether the model never produced a valid output (as opposed to a failed run).
    pub fn is_invalid_output(&self) -> bool {
        matches!(self, OutputError::Invalid { .. })
    }
}
