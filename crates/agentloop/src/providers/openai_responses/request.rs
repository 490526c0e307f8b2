//! The Responses request body: input items (with encrypted reasoning and item ids replayed to
//! the same model), tools (with deferred tools and client tool search when active), and
//! options (see the module docs of [`super`]).

use std::collections::HashSet;

use serde_json::{Map, Value, json};

use super::tool_search::SearchPlan;
use super::{PROVIDER, item_id};
use crate::model::ModelRequest;
use crate::model::OutputFormat;
use crate::providers::ProviderConfig;
use crate::providers::core::wire_f32;
use crate::providers::replay;
use crate::tooling::ToolSchema;
use crate::transcript::{
    ImagePart, Message, Part, Role, ThinkingPart, ToolCallPart, ToolResultPart,
};

fn input_image(image: &ImagePart) -> Value {
    json!({
        "type": "input_image",
        "image_url": format!("data:{};base64,{}", image.media_type, image.data),
    })
}

pub(super) fn function_tool(tool: &ToolSchema, deferred: bool) -> Value {
    let mut t = json!({
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
    });
    if deferred {
        t["defer_loading"] = json!(true);
    }
    t
}

/// The `reasoning` input item stored in a thinking part's signature (see the module docs).
pub(super) fn reasoning_item(thinking: &ThinkingPart) -> Option<Value> {
    let signature: Value = serde_json::from_str(thinking.signature.as_deref()?).ok()?;
    let id = signature.get("id")?.as_str()?;
    let encrypted = signature.get("encrypted_content")?.as_str()?;
    let summary = if thinking.thinking.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "summary_text", "text": thinking.thinking})]
    };
    Some(json!({
        "type": "reasoning",
        "id": id,
        "encrypted_content": encrypted,
        "summary": summary,
    }))
}

/// The input items of one assistant message: its text as message items, its replayable
/// reasoning, and its calls.
fn assistant_items(
    m: &Message,
    search: Option<&SearchPlan<'_>>,
    search_calls: &mut HashSet<String>,
    input: &mut Vec<Value>,
) {
    // Consecutive text parts of one output message share one message item, each its own
    // `output_text` (no separator is invented between, say, thinking turned into text and the
    // answer). A message recorded with its item id (`msg_…`) goes back with it: the server pairs
    // encrypted reasoning with the item that followed it.
    let mut text: Vec<Value> = Vec::new();
    let mut text_id: Option<&str> = None;
    for part in &m.content {
        match part {
            Part::Text {
                text: t,
                provider_data,
            } if !t.is_empty() => {
                let id = item_id(provider_data.as_ref(), "message");
                if id != text_id {
                    flush_text(&mut text, text_id, input);
                    text_id = id;
                }
                text.push(json!({"type": "output_text", "text": t}));
            }
            Part::Thinking(t) => {
                flush_text(&mut text, text_id, input);
                // Only same-source thinking is left after `replay::prepare`.
                if let Some(item) = reasoning_item(t) {
                    input.push(item);
                }
            }
            Part::ToolCall(c) => {
                flush_text(&mut text, text_id, input);
                input.push(call_item(c, search, search_calls));
            }
            _ => {}
        }
    }
    flush_text(&mut text, text_id, input);
}

/// Closes the text gathered so far into one assistant message item (with its item id, when
/// it was recorded with one); nothing when no text is pending.
fn flush_text(text: &mut Vec<Value>, text_id: Option<&str>, input: &mut Vec<Value>) {
    if text.is_empty() {
        return;
    }
    let mut item = Map::new();
    item.insert("type".into(), json!("message"));
    item.insert("role".into(), json!("assistant"));
    if let Some(id) = text_id {
        for t in text.iter_mut().filter_map(Value::as_object_mut) {
            t.insert("annotations".into(), json!([]));
        }
        item.insert("id".into(), json!(id));
        item.insert("status".into(), json!("completed"));
    }
    item.insert("content".into(), Value::Array(std::mem::take(text)));
    input.push(Value::Object(item));
}

/// The input item of one call: a client tool search call (remembered in `search_calls`, so
/// that its result goes back as a search output) or a function call, with its item id.
fn call_item(
    c: &ToolCallPart,
    search: Option<&SearchPlan<'_>>,
    search_calls: &mut HashSet<String>,
) -> Value {
    let mut item = match search {
        Some(plan) if c.tool_name == plan.tool.name => {
            search_calls.insert(c.id.clone());
            let arguments = replay::object_arguments(&c.arguments);
            json!({
                "type": "tool_search_call",
                "call_id": c.id,
                "execution": "client",
                "status": "completed",
                "arguments": arguments,
            })
        }
        _ => json!({
            "type": "function_call",
            "call_id": c.id,
            "name": c.tool_name,
            // Only an object is accepted (see `replay`); the transcript keeps
            // the raw text.
            "arguments": replay::wire_arguments(&c.arguments),
        }),
    };
    let kind = item["type"].as_str().unwrap_or_default().to_owned();
    if let (Some(id), Some(object)) = (
        item_id(c.provider_data.as_ref(), &kind),
        item.as_object_mut(),
    ) {
        object.insert("id".into(), json!(id));
    }
    item
}

pub(super) fn build_body(config: &ProviderConfig, request: &ModelRequest<'_>) -> Value {
    let (model, messages) = replay::model_and_messages(config.model.as_ref(), request, PROVIDER);
    let search = SearchPlan::of(request);
    let mut search_calls: HashSet<String> = HashSet::new();
    let mut input: Vec<Value> = Vec::with_capacity(messages.len());
    for m in messages.iter() {
        match m.role {
            Role::Assistant => assistant_items(m, search.as_ref(), &mut search_calls, &mut input),
            Role::ToolResult => {
                if let Some(r) = m.tool_result_part() {
                    input.push(tool_result_item(r, search.as_ref(), &search_calls));
                }
            }
            _ => input.push(user_item(m)),
        }
    }

    let tools = declared_tools(request, search.as_ref());
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = &request.system_prompt {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    insert_settings(config, request, &mut body);
    Value::Object(body)
}

/// A tool result: the output of a client-side tool search, or a function call's output (text,
/// or parts with its images).
fn tool_result_item(
    r: &ToolResultPart,
    search: Option<&SearchPlan>,
    search_calls: &HashSet<String>,
) -> Value {
    if let Some(plan) = search.filter(|_| search_calls.contains(&r.call_id)) {
        return json!({
            "type": "tool_search_output",
            "call_id": r.call_id,
            "execution": "client",
            "status": "completed",
            "tools": plan.loaded_tools(r),
        });
    }
    let output = if r.images.is_empty() {
        json!(r.content)
    } else {
        let mut parts = vec![json!({"type": "input_text", "text": r.content})];
        parts.extend(r.images.iter().map(input_image));
        Value::Array(parts)
    };
    json!({
        "type": "function_call_output",
        "call_id": r.call_id,
        "output": output,
    })
}

/// A user message as an input item of text and image parts.
fn user_item(m: &Message) -> Value {
    let content: Vec<Value> = m
        .content
        .iter()
        .filter_map(|p| match p {
            Part::Text { text, .. } => Some(json!({"type": "input_text", "text": text})),
            Part::Image(i) => Some(input_image(i)),
            _ => None,
        })
        .collect();
    json!({"role": "user", "content": content})
}

/// The request's tools; with a tool-search plan, deferred tools are declared as deferred and the
/// search tool as `tool_search`.
fn declared_tools(request: &ModelRequest<'_>, search: Option<&SearchPlan>) -> Vec<Value> {
    let mut tools: Vec<Value> = Vec::new();
    for t in request.tools.iter() {
        if let Some(plan) = search {
            // Declared below: deferred tools as deferred, the search tool as `tool_search`.
            if t.name == plan.tool.name || plan.is_deferred(&t.name) {
                continue;
            }
        }
        tools.push(function_tool(t, false));
    }
    if let Some(plan) = search {
        tools.extend(plan.deferred.iter().map(|t| function_tool(t, true)));
        tools.push(json!({
            "type": "tool_search",
            "execution": "client",
            "description": plan.tool.description,
            "parameters": plan.tool.parameters,
        }));
    }
    tools
}

/// The sampling, reasoning, caching and output settings of `request`.
fn insert_settings(
    config: &ProviderConfig,
    request: &ModelRequest<'_>,
    body: &mut Map<String, Value>,
) {
    if let Some(key) = request
        .prompt_cache_key
        .as_deref()
        .filter(|_| config.prompt_cache)
    {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    if let Some(t) = request.temperature {
        body.insert("temperature".into(), json!(wire_f32(t)));
    }
    if let Some(n) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(n));
    }
    if let Some(effort) = request
        .reasoning
        .and_then(crate::providers::openai_reasoning_effort)
    {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if let Some(format) = &request.output {
        body.insert("text".into(), responses_text_format(format));
    }
}

/// Native structured output (typed output): `text.format` with a `json_schema`.
fn responses_text_format(format: &OutputFormat) -> Value {
    let mut f = Map::new();
    f.insert("type".into(), json!("json_schema"));
    f.insert("name".into(), json!(format.name));
    if let Some(description) = &format.description {
        f.insert("description".into(), json!(description));
    }
    f.insert("schema".into(), format.schema.clone());
    f.insert("strict".into(), json!(format.strict));
    json!({"format": f})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_text_becomes_one_message_item_with_its_id() {
        let mut input = Vec::new();
        let mut text = vec![
            json!({"type": "output_text", "text": "a"}),
            json!({"type": "output_text", "text": "b"}),
        ];
        flush_text(&mut text, Some("msg_1"), &mut input);
        assert!(text.is_empty());
        assert_eq!(
            input,
            [json!({
                "type": "message",
                "role": "assistant",
                "id": "msg_1",
                "status": "completed",
                "content": [
                    {"type": "output_text", "text": "a", "annotations": []},
                    {"type": "output_text", "text": "b", "annotations": []},
                ],
            })]
        );

        let mut text = vec![json!({"type": "output_text", "text": "c"})];
        flush_text(&mut text, None, &mut input);
        assert_eq!(
            input[1],
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": "c"}]})
        );
        // Nothing pending: no item.
        flush_text(&mut Vec::new(), Some("msg_2"), &mut input);
        assert_eq!(input.len(), 2);
    }
}
