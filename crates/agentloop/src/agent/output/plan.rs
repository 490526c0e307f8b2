//! The per-run output plan (strategy resolved for the provider, the native format, the final
//! tools, the prompt instructions, the compiled validator) and the run-time state the loop keeps
//! for it: failed attempts, the last raw output and violations, the accepted value, and the
//! partial output of the reply that is streaming.

use std::any::Any;
use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;

use super::schema::{self, WRAP_KEY};
use super::{FINAL_RESULT_TOOL, OutputFormat, OutputStrategy, ParseFn};
use crate::json::partial_json::PartialJson;
use crate::model::ModelDelta;
use crate::opaque::Opaque;
use crate::tooling::ToolSchema;
use crate::tooling::validate::json_path;
use crate::transcript::{Message, StopReason, ToolArguments, ToolCallPart};

/// A final-result tool and whether its arguments wrap the output in `{"response": …}`.
#[derive(Debug)]
pub(crate) struct FinalTool {
    pub(crate) schema: ToolSchema,
    pub(crate) wrapped: bool,
}

/// Everything the loop needs to ask for, check and return the output of one run.
#[derive(Debug)]
pub(crate) struct OutputPlan {
    pub(crate) strategy: OutputStrategy,
    validator: Opaque<Arc<Validator>>,
    parse: Opaque<ParseFn>,
    /// Native strategy: the format for the request.
    pub(crate) format: Option<OutputFormat>,
    /// Native strategy: whether the final text is `{"response": …}`.
    native_wrapped: bool,
    /// Tool strategy: the final-result tools.
    pub(crate) tools: Vec<FinalTool>,
    /// Text appended to the system prompt.
    pub(crate) instructions: Option<String>,
    pub(crate) max_retries: u32,
}

/// Whether an Anthropic model supports native structured output (Claude 4.5 generation and
/// later: Sonnet 4.5, Opus 4.1/4.5, Haiku 4.5 and newer).
fn anthropic_native(model: Option<&str>) -> bool {
    let Some(model) = model else { return false };
    let model = model.to_ascii_lowercase();
    let Some(rest) = ["claude-sonnet-", "claude-opus-", "claude-haiku-"]
        .iter()
        .find_map(|p| model.strip_prefix(p))
    else {
        return false;
    };
    let mut parts = rest.split(['-', '.']);
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    // A date suffix (`-20250929`) is not a minor version.
    let minor: u32 = parts
        .next()
        .filter(|p| p.len() <= 2)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let opus = model.starts_with("claude-opus-");
    major > 4 || (major == 4 && (minor >= 5 || (opus && minor >= 1)))
}

/// Resolves [`OutputStrategy::Auto`] for a provider and model.
pub(crate) fn resolve_strategy(
    wanted: OutputStrategy,
    provider: &str,
    model: Option<&str>,
    strict_ok: bool,
) -> OutputStrategy {
    match wanted {
        OutputStrategy::Auto => match provider {
            "openai_chat" | "openai_responses" => OutputStrategy::Native,
            // Anthropic compiles the schema into a grammar and accepts only its strict subset.
            "anthropic" if strict_ok && anthropic_native(model) => OutputStrategy::Native,
            _ => OutputStrategy::Tool,
        },
        other => other,
    }
}

impl OutputPlan {
    /// Plans the output for `provider` / `model`. Fails when the schema does not compile.
    pub(crate) fn new<T>(
        output: &super::Output<T>,
        provider: &str,
        model: Option<&str>,
    ) -> Result<Self, String> {
        let validator = output.validator.clone()?;
        let object = schema::is_object_schema(&output.schema);
        let native_schema = if object {
            let mut s = output.schema.clone();
            schema::tidy_root(&mut s);
            s
        } else {
            schema::wrap(&output.schema)
        };
        let strict = schema::strictify(&native_schema);
        let strategy = resolve_strategy(output.strategy, provider, model, strict.is_some());
        let mut plan = OutputPlan {
            strategy,
            validator: Opaque(validator),
            parse: Opaque(output.parse.clone()),
            format: None,
            native_wrapped: !object,
            tools: Vec::new(),
            instructions: None,
            max_retries: output.retries,
        };
        match strategy {
            OutputStrategy::Native => {
                let (schema, strict) = match strict {
                    Some(s) => (s, true),
                    None => (native_schema, false),
                };
                let mut format = OutputFormat::new(&output.name, schema, strict);
                format.description = output.description.clone();
                plan.format = Some(format);
            }
            OutputStrategy::Tool => {
                plan.tools = final_tools(output);
                let names: Vec<&str> = plan.tools.iter().map(|t| t.schema.name.as_str()).collect();
                plan.instructions = Some(format!(
                    "When you have the final answer, give it by calling {} (the run ends with that \
                     call); do not answer in plain text.",
                    one_of_names(&names)
                ));
            }
            _ => {
                let shown = serde_json::to_string_pretty(&output.schema)
                    .unwrap_or_else(|_| output.schema.to_string());
                plan.native_wrapped = false;
                plan.instructions = Some(format!(
                    "Your final answer must be a single JSON value, with no other text and no code \
                     fences, that matches this JSON Schema:\n{shown}"
                ));
            }
        }
        Ok(plan)
    }

    /// The final tool named `name`, if it is one.
    pub(crate) fn final_tool(&self, name: &str) -> Option<&FinalTool> {
        self.tools.iter().find(|t| t.schema.name == name)
    }

    /// The final tools' schemas (to add to the request).
    pub(crate) fn tool_schemas(&self) -> impl Iterator<Item = &ToolSchema> {
        self.tools.iter().map(|t| &t.schema)
    }

    /// Whether the final text is the output (native and prompted strategies).
    pub(crate) fn text_output(&self) -> bool {
        self.tools.is_empty()
    }

    /// Validates and deserializes a candidate (unwrapping it first when `wrapped`).
    pub(crate) fn check(&self, candidate: Value, wrapped: bool) -> Result<Accepted, Vec<String>> {
        let value = if wrapped {
            match candidate {
                Value::Object(mut map) if map.contains_key(WRAP_KEY) => {
                    map.remove(WRAP_KEY).unwrap_or(Value::Null)
                }
                _ => {
                    return Err(vec![format!(
                        "$: expected an object with the single property \"{WRAP_KEY}\" holding the output"
                    )]);
                }
            }
        } else {
            candidate
        };
        if !self.validator.is_valid(&value) {
            let mut violations: Vec<String> = self
                .validator
                .iter_errors(&value)
                .map(|e| format!("{}: {}", json_path(e.instance_path()), e))
                .collect();
            violations.dedup();
            return Err(violations);
        }
        match (self.parse)(&value) {
            Ok(typed) => Ok(Accepted { json: value, typed }),
            Err(e) => Err(vec![format!("$: {e}")]),
        }
    }

    /// Checks the final text of an assistant message (native and prompted strategies).
    pub(crate) fn check_text(&self, message: &Message) -> Result<Accepted, Vec<String>> {
        let text = message.text();
        if message.stop_reason == Some(StopReason::Length) {
            return Err(vec![
                "$: the answer was cut off by the output-token limit before the JSON value was \
                 complete; give a shorter answer"
                    .to_owned(),
            ]);
        }
        let value = extract_json(&text).map_err(|e| vec![e])?;
        self.check(value, self.native_wrapped)
    }

    /// Checks a final-tool call's arguments.
    pub(crate) fn check_call(&self, call: &ToolCallPart) -> Result<Accepted, Vec<String>> {
        let wrapped = self.final_tool(&call.tool_name).is_some_and(|t| t.wrapped);
        match &call.arguments {
            ToolArguments::Json(v) => self.check(v.clone(), wrapped),
            ToolArguments::Unparsed(text) => Err(vec![format!(
                "$: the arguments are not valid JSON: {}",
                text.chars().take(200).collect::<String>()
            )]),
        }
    }
}

/// A valid output: the JSON value and the deserialized one.
#[derive(Debug)]
pub(crate) struct Accepted {
    pub(crate) json: Value,
    pub(crate) typed: Box<dyn Any + Send>,
}

fn one_of_names(names: &[&str]) -> String {
    match names {
        [one] => format!("the tool `{one}`"),
        many => format!(
            "one of the tools {}",
            many.iter()
                .map(|n| format!("`{n}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn final_tools<T>(output: &super::Output<T>) -> Vec<FinalTool> {
    let intro = "Give the final result: the arguments are the output, and calling this tool ends \
                 the run.";
    let what = output
        .description
        .as_deref()
        .map(|d| format!(" The output: {d}"))
        .unwrap_or_default();
    match schema::union_branches(&output.schema) {
        Some(branches) => {
            let mut tools: Vec<FinalTool> = Vec::with_capacity(branches.len());
            for (i, branch) in branches.iter().enumerate() {
                let mut name = schema::tool_name(FINAL_RESULT_TOOL, &branch.label);
                if tools.iter().any(|t| t.schema.name == name) {
                    name = schema::tool_name(FINAL_RESULT_TOOL, &format!("{}", i + 1));
                }
                let (parameters, wrapped) = schema::as_parameters(&branch.schema);
                let about = branch
                    .description
                    .as_deref()
                    .map(|d| format!(" This case: {d}"))
                    .unwrap_or_default();
                tools.push(FinalTool {
                    schema: ToolSchema {
                        name,
                        description: format!(
                            "{intro} Use it when the result is a `{}`.{what}{about}",
                            branch.label
                        ),
                        parameters,
                    },
                    wrapped,
                });
            }
            tools
        }
        None => {
            let (parameters, wrapped) = schema::as_parameters(&output.schema);
            vec![FinalTool {
                schema: ToolSchema {
                    name: FINAL_RESULT_TOOL.to_owned(),
                    description: format!("{intro}{what}"),
                    parameters,
                },
                wrapped,
            }]
        }
    }
}

/// The JSON value in a final text: the whole text, else the body of a code fence, else the span
/// from the first `{`/`[` to the last matching bracket (prose around it is tolerated).
pub(crate) fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("$: the answer is empty; expected a JSON value".to_owned());
    }
    let first_error = match serde_json::from_str::<Value>(trimmed) {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    if let Some(start) = trimmed.find("```") {
        let body = &trimmed[start + 3..];
        let body = body.split_once('\n').map_or(body, |(_, rest)| rest);
        if let Some(end) = body.find("```") {
            if let Ok(v) = serde_json::from_str(body[..end].trim()) {
                return Ok(v);
            }
        }
    }
    for (open, close) in [('{', '}'), ('[', ']')] {
        if let (Some(a), Some(b)) = (trimmed.find(open), trimmed.rfind(close)) {
            if a < b {
                if let Ok(v) = serde_json::from_str(&trimmed[a..=b]) {
                    return Ok(v);
                }
            }
        }
    }
    Err(format!(
        "$: the answer is not valid JSON ({first_error}); reply with only the JSON value"
    ))
}

/// The output state of one run, kept by the loop.
pub(crate) struct OutputRun {
    pub(crate) plan: Arc<OutputPlan>,
    /// Invalid outputs so far.
    pub(crate) failures: u32,
    pub(crate) last_raw: Option<String>,
    pub(crate) last_violations: Vec<String>,
    pub(crate) accepted: Option<Accepted>,
}

impl OutputRun {
    pub(crate) fn new(plan: Arc<OutputPlan>) -> Self {
        OutputRun {
            plan,
            failures: 0,
            last_raw: None,
            last_violations: Vec::new(),
            accepted: None,
        }
    }

    /// Records an invalid attempt; true while repairs remain.
    pub(crate) fn fail(&mut self, raw: String, violations: Vec<String>) -> bool {
        self.failures += 1;
        self.last_raw = Some(raw);
        self.last_violations = violations;
        self.failures <= self.plan.max_retries
    }

    /// The user message asking the model to repair an invalid final text.
    pub(crate) fn repair_text_message(&self) -> Message {
        let listed = bullet(&self.last_violations);
        Message::user(if self.plan.text_output() {
            format!(
                "Your answer is not a valid output:\n{listed}\n\nAnswer again with only the \
                 corrected JSON value."
            )
        } else {
            let names: Vec<&str> = self
                .plan
                .tools
                .iter()
                .map(|t| t.schema.name.as_str())
                .collect();
            format!(
                "You answered in plain text, but the final answer must be given by calling {}. \
                 Call it now with the result.",
                one_of_names(&names)
            )
        })
    }

    /// The error result for an invalid final-tool call.
    pub(crate) fn repair_call_text(&self, tool: &str) -> String {
        format!(
            "Validation failed for the final result \"{tool}\":\n{}\n\nCall {tool} again with \
             corrected arguments.",
            bullet(&self.last_violations)
        )
    }
}

fn bullet(violations: &[String]) -> String {
    violations
        .iter()
        .map(|v| format!("  - {v}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Turns the deltas of a streaming reply into snapshots of the output parsed so far.
#[derive(Default)]
pub(crate) struct PartialOutput {
    /// Text strategies: the JSON text once its first bracket arrived.
    text: Option<PartialJson>,
    /// Tool strategy: streaming final-tool calls by index (with a parser for providers that send
    /// no partial value).
    calls: HashMap<usize, (bool, PartialJson)>,
}

impl PartialOutput {
    /// The output so far after `delta`, when it changed.
    pub(crate) fn on_delta(&mut self, plan: &OutputPlan, delta: &ModelDelta) -> Option<Value> {
        match delta {
            ModelDelta::Text { delta } if plan.text_output() => {
                let parser = match &mut self.text {
                    Some(p) => p,
                    None => {
                        let start = delta.find(['{', '['])?;
                        let parser = self.text.insert(PartialJson::new());
                        let snapshot = parser.push_and_snapshot(&delta[start..]);
                        return snapshot.map(|v| unwrap(v, plan.native_wrapped));
                    }
                };
                parser
                    .push_and_snapshot(delta)
                    .map(|v| unwrap(v, plan.native_wrapped))
            }
            ModelDelta::ToolCallStart { index, name, .. } => {
                if let Some(tool) = plan.final_tool(name) {
                    self.calls
                        .insert(*index, (tool.wrapped, PartialJson::new()));
                }
                None
            }
            ModelDelta::ToolCallArguments {
                index,
                delta,
                partial,
            } => {
                let (wrapped, parser) = self.calls.get_mut(index)?;
                let snapshot = match partial {
                    Some(v) => Some(v.clone()),
                    None => parser.push_and_snapshot(delta),
                };
                snapshot.map(|v| unwrap(v, *wrapped))
            }
            _ => None,
        }
    }
}

fn unwrap(value: Value, wrapped: bool) -> Value {
    match value {
        Value::Object(mut map) if wrapped => map.remove(WRAP_KEY).unwrap_or(Value::Null),
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_found_in_fences_and_prose() {
        assert_eq!(extract_json(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(
            extract_json("Here:\n```json\n{\"a\": 2}\n```\nDone.").unwrap(),
            json!({"a": 2})
        );
        assert_eq!(
            extract_json("The answer is {\"a\": 3}.").unwrap(),
            json!({"a": 3})
        );
        assert!(extract_json("no json here").is_err());
        assert!(extract_json("").is_err());
    }

    #[test]
    fn anthropic_models_with_native_output() {
        assert!(anthropic_native(Some("claude-sonnet-4-5")));
        assert!(anthropic_native(Some("claude-sonnet-4-5-20250929")));
        assert!(anthropic_native(Some("claude-opus-4-1")));
        assert!(anthropic_native(Some("claude-haiku-4-5")));
        assert!(anthropic_native(Some("claude-sonnet-5")));
        assert!(!anthropic_native(Some("claude-sonnet-4-20250514")));
        assert!(!anthropic_native(Some("claude-3-5-haiku-latest")));
        assert!(!anthropic_native(None));
    }

    #[test]
    fn auto_strategy_per_provider() {
        use OutputStrategy::*;
        assert_eq!(resolve_strategy(Auto, "openai_chat", None, false), Native);
        assert_eq!(
            resolve_strategy(Auto, "openai_responses", None, true),
            Native
        );
        assert_eq!(
            resolve_strategy(Auto, "anthropic", Some("claude-sonnet-4-5"), true),
            Native
        );
        assert_eq!(
            resolve_strategy(Auto, "anthropic", Some("claude-sonnet-4-5"), false),
            Tool
        );
        assert_eq!(
            resolve_strategy(Auto, "anthropic", Some("claude-3-7-sonnet"), true),
            Tool
        );
        assert_eq!(resolve_strategy(Auto, "scripted", None, true), Tool);
        assert_eq!(
            resolve_strategy(Prompted, "openai_chat", None, true),
            Prompted
        );
    }
}
