//! The `streamGenerateContent` request body: contents, system instruction, tools and generation
//! config (see the module docs of [`super`] for the mapping).

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::{PROVIDER, SKIP_SIGNATURE};
use crate::model::OutputFormat;
use crate::model::{ModelRequest, ReasoningLevel};
use crate::providers::ProviderConfig;
use crate::providers::core::wire_f32;
use crate::providers::replay;
use crate::tooling::ToolSchema;
use crate::transcript::{ImagePart, Message, Part, Role, ToolResultPart};

/// The wire key of a thought signature.
pub(super) const SIGNATURE: &str = "thoughtSignature";

/// The `generationConfig.thinkingConfig` for a reasoning level on `model`.
///
/// Gemini 3 models take a `thinkingLevel` and cannot turn thinking off; earlier models (2.5) take
/// a `thinkingBudget` in tokens. Thought summaries are asked for (`includeThoughts: true`) at
/// every level but `Off`.
///
/// | level | Gemini 3 Pro | Gemini 3 Flash (and other Gemini 3) | Gemini 2.5 and others |
/// |---|---|---|---|
/// | `Off` | `low` | `minimal` | budget 0 (Pro: 128, its minimum) |
/// | `Minimal` | `low` | `minimal` | 1024 |
/// | `Low` | `low` | `low` | 2048 |
/// | `Medium` | `high` | `medium` | 8192 |
/// | `High` | `high` | `high` | 16384 |
/// | `Xhigh` | `high` | `high` | 24576 |
///
/// ```
/// use agentloop::model::ReasoningLevel;
/// use agentloop::providers::gemini::thinking_config;
/// use serde_json::json;
///
/// assert_eq!(
///     thinking_config("gemini-3-pro-preview", ReasoningLevel::Medium),
///     json!({"includeThoughts": true, "thinkingLevel": "high"})
/// );
/// assert_eq!(
///     thinking_config("gemini-2.5-flash", ReasoningLevel::Off),
///     json!({"thinkingBudget": 0})
/// );
/// ```
pub fn thinking_config(model: &str, level: ReasoningLevel) -> Value {
    let model = super::model_id(model).to_ascii_lowercase();
    let include = level != ReasoningLevel::Off;
    let mut config = Map::new();
    if include {
        config.insert("includeThoughts".into(), json!(true));
    }
    if major_version(&model).is_some_and(|major| major >= 3) {
        let pro = model.contains("-pro");
        let level = match level {
            ReasoningLevel::Off | ReasoningLevel::Minimal if pro => "low",
            ReasoningLevel::Off | ReasoningLevel::Minimal => "minimal",
            ReasoningLevel::Low => "low",
            ReasoningLevel::Medium if pro => "high",
            ReasoningLevel::Medium => "medium",
            ReasoningLevel::High | ReasoningLevel::Xhigh => "high",
        };
        config.insert("thinkingLevel".into(), json!(level));
    } else {
        let budget = match level {
            ReasoningLevel::Off if model.contains("-pro") => 128,
            ReasoningLevel::Off => 0,
            ReasoningLevel::Minimal => 1024,
            ReasoningLevel::Low => 2048,
            ReasoningLevel::Medium => 8192,
            ReasoningLevel::High => 16384,
            ReasoningLevel::Xhigh => 24576,
        };
        config.insert("thinkingBudget".into(), json!(budget));
    }
    Value::Object(config)
}

/// The major version of a `gemini-N…` model id.
fn major_version(model: &str) -> Option<u32> {
    let rest = model.strip_prefix("gemini-")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn inline_data(image: &ImagePart) -> Value {
    json!({"inlineData": {"mimeType": image.media_type, "data": image.data}})
}

fn user_parts(message: &Message) -> Vec<Value> {
    message
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } if !text.is_empty() => Some(json!({"text": text})),
            Part::Image(image) => Some(inline_data(image)),
            _ => None,
        })
        .collect()
}

/// `part` with its signature, when it has one.
fn signed(mut part: Value, signature: Option<&str>) -> Value {
    if let (Some(signature), Some(object)) = (signature, part.as_object_mut()) {
        object.insert(SIGNATURE.into(), json!(signature));
    }
    part
}

/// How a call is answered: its name (as replayed) and whether Gemini gave it an id.
type CallInfo<'m> = (&'m str, bool);

/// The parts of a model turn. After `replay::prepare`, provider data and thinking left are from
/// this provider and model.
fn model_parts<'m>(message: &'m Message, calls: &mut HashMap<&'m str, CallInfo<'m>>) -> Vec<Value> {
    let mut parts = Vec::with_capacity(message.content.len());
    // Whether an earlier call of this turn carries the model's own signature: Gemini signs only
    // the first of parallel calls, and the others go back as they came.
    let mut signed_before = false;
    for part in &message.content {
        match part {
            Part::Text {
                text,
                provider_data,
            } => {
                let signature = provider_data
                    .as_ref()
                    .and_then(|d| d.get(PROVIDER, SIGNATURE));
                if !text.is_empty() || signature.is_some() {
                    parts.push(signed(json!({"text": text}), signature));
                }
            }
            Part::Thinking(t) => {
                let signature = t.signature.as_deref().filter(|s| !s.is_empty());
                if !t.thinking.is_empty() || signature.is_some() {
                    parts.push(signed(
                        json!({"text": t.thinking, "thought": true}),
                        signature,
                    ));
                }
            }
            Part::ToolCall(call) => {
                let data = call.provider_data.as_ref();
                let wire_id = data.and_then(|d| d.get(PROVIDER, "id"));
                let mut function_call = json!({
                    "name": call.tool_name,
                    "args": replay::object_arguments(&call.arguments),
                });
                if let (Some(id), Some(object)) = (wire_id, function_call.as_object_mut()) {
                    object.insert("id".into(), json!(id));
                }
                calls.insert(
                    call.id.as_str(),
                    (call.tool_name.as_str(), wire_id.is_some()),
                );
                // A call the model did not sign (history from another provider or model, an
                // old session, a model that signs nothing) gets the documented sentinel, unless
                // an earlier call of the step was signed: Gemini 3 rejects a step whose first
                // call comes back without a signature.
                let signature = match data.and_then(|d| d.get(PROVIDER, SIGNATURE)) {
                    Some(signature) => {
                        signed_before = true;
                        Some(signature)
                    }
                    None if signed_before => None,
                    None => Some(SKIP_SIGNATURE),
                };
                parts.push(signed(json!({"functionCall": function_call}), signature));
            }
            _ => {}
        }
    }
    parts
}

fn function_response(result: &ToolResultPart, call: Option<&CallInfo<'_>>) -> Value {
    let (name, wire_id) = call.copied().unwrap_or((result.tool_name.as_str(), false));
    let key = if result.is_error { "error" } else { "output" };
    let mut response = Map::new();
    response.insert("name".into(), json!(name));
    response.insert("response".into(), json!({ key: result.content }));
    if wire_id {
        response.insert("id".into(), json!(result.call_id));
    }
    json!({"functionResponse": response})
}

/// The resolved model id and the body for `request`.
pub(super) fn build_body(config: &ProviderConfig, request: &ModelRequest<'_>) -> (String, Value) {
    let (model, messages) = replay::model_and_messages(config.model.as_ref(), request, PROVIDER);

    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents(&messages)));
    if let Some(system) = request
        .system_prompt
        .as_deref()
        .filter(|s| !s.trim().is_empty())
    {
        body.insert(
            "systemInstruction".into(),
            json!({"parts": [{"text": system}]}),
        );
    }
    if !request.tools.is_empty() {
        body.insert("tools".into(), function_declarations(&request.tools));
    }
    let generation = generation_config(request, &model);
    if !generation.is_empty() {
        body.insert("generationConfig".into(), Value::Object(generation));
    }
    (model, Value::Object(body))
}

/// The conversation as Gemini contents: model turns, user turns, and each tool batch's
/// function responses gathered into one user content (its images after them).
fn contents(messages: &[Message]) -> Vec<Value> {
    let mut contents: Vec<Value> = Vec::with_capacity(messages.len());
    let mut calls: HashMap<&str, CallInfo<'_>> = HashMap::new();
    // The function responses of the current tool batch (one user content), then its images.
    let mut responses: Vec<Value> = Vec::new();
    let mut images: Vec<Value> = Vec::new();
    for m in messages {
        match m.role {
            Role::ToolResult => {
                for r in m.content.iter().filter_map(|p| match p {
                    Part::ToolResult(r) => Some(r),
                    _ => None,
                }) {
                    responses.push(function_response(r, calls.get(r.call_id.as_str())));
                    images.extend(r.images.iter().map(inline_data));
                }
            }
            Role::Assistant => {
                flush_batch(&mut contents, &mut responses, &mut images);
                let parts = model_parts(m, &mut calls);
                if !parts.is_empty() {
                    contents.push(json!({"role": "model", "parts": parts}));
                }
            }
            _ => {
                flush_batch(&mut contents, &mut responses, &mut images);
                let parts = user_parts(m);
                if !parts.is_empty() {
                    contents.push(json!({"role": "user", "parts": parts}));
                }
            }
        }
    }
    flush_batch(&mut contents, &mut responses, &mut images);
    contents
}

/// Closes the current tool batch into one user content: its function responses, then its
/// images (nothing when the batch is empty).
fn flush_batch(contents: &mut Vec<Value>, responses: &mut Vec<Value>, images: &mut Vec<Value>) {
    if !responses.is_empty() || !images.is_empty() {
        let mut parts = std::mem::take(responses);
        parts.append(images);
        contents.push(json!({"role": "user", "parts": parts}));
    }
}

/// The `tools` entry: every tool as a function declaration (full JSON Schema parameters).
fn function_declarations(tools: &[ToolSchema]) -> Value {
    let declarations: Vec<Value> = tools
        .iter()
        .map(|t| {
            json!({
                "name": t.name,
                "description": t.description,
                "parametersJsonSchema": t.parameters,
            })
        })
        .collect();
    json!([{"functionDeclarations": declarations}])
}

/// The `generationConfig` entries the request asks for (empty when it asks for none).
fn generation_config(request: &ModelRequest<'_>, model: &str) -> Map<String, Value> {
    let mut generation = Map::new();
    if let Some(t) = request.temperature {
        generation.insert("temperature".into(), json!(wire_f32(t)));
    }
    if let Some(n) = request.max_output_tokens {
        generation.insert("maxOutputTokens".into(), json!(n));
    }
    if let Some(level) = request.reasoning {
        generation.insert("thinkingConfig".into(), thinking_config(model, level));
    }
    if let Some(format) = &request.output {
        add_output_format(&mut generation, format);
    }
    generation
}

/// Native structured output: JSON that matches the schema (`responseJsonSchema` takes full JSON
/// Schema; the name and strictness are OpenAI notions).
fn add_output_format(generation: &mut Map<String, Value>, format: &OutputFormat) {
    generation.insert("responseMimeType".into(), json!("application/json"));
    generation.insert("responseJsonSchema".into(), format.schema.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_batch_is_one_user_content_with_images_last() {
        let mut contents = Vec::new();
        let mut responses = vec![json!({"functionResponse": {"name": "a"}})];
        let mut images = vec![json!({"inlineData": {}})];
        flush_batch(&mut contents, &mut responses, &mut images);
        assert!(responses.is_empty() && images.is_empty());
        assert_eq!(
            contents,
            [json!({"role": "user", "parts": [
                {"functionResponse": {"name": "a"}},
                {"inlineData": {}},
            ]})]
        );
        flush_batch(&mut contents, &mut Vec::new(), &mut Vec::new());
        assert_eq!(contents.len(), 1, "an empty batch adds no content");
    }

    #[test]
    fn generation_config_holds_only_what_was_asked() {
        let mut request = ModelRequest::new(Vec::<Message>::new());
        assert!(generation_config(&request, "gemini-2.5-flash").is_empty());
        request.max_output_tokens = Some(64);
        let generation = generation_config(&request, "gemini-2.5-flash");
        assert_eq!(Value::Object(generation), json!({"maxOutputTokens": 64}));
    }
}
