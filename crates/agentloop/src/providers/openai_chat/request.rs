//! The Chat Completions request body, serialized straight from structs borrowing the request
//! and the replay-prepared messages (see the module docs of [`super`]).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::Value;

use super::PROVIDER;
use crate::model::ModelRequest;
use crate::model::OutputFormat;
use crate::providers::ProviderConfig;
use crate::providers::core::wire_f32;
use crate::providers::replay::{self, ReplayTarget};
use crate::tooling::ToolSchema;
use crate::transcript::{Message, Part, Role};

/// The request body, borrowing from the request: serialized straight to bytes (building a
/// `serde_json::Value` tree first cost an allocation per key and a copy of every tool schema on
/// every turn, and grew with the history).
#[derive(Serialize)]
pub(super) struct ChatBody<'a> {
    pub(super) model: &'a str,
    messages: Vec<WireMessage<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    /// Through [`wire_f32`]: `0.2` goes out as `0.2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    response_format: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum WireMessage<'a> {
    System {
        content: &'a str,
    },
    User {
        content: UserContent<'a>,
    },
    Assistant {
        /// `null` for a message that only calls tools.
        content: Option<Cow<'a, str>>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<WireCall<'a>>,
    },
    Tool {
        tool_call_id: &'a str,
        content: &'a str,
    },
}

#[derive(Serialize)]
#[serde(untagged)]
enum UserContent<'a> {
    Text(Cow<'a, str>),
    Parts(Vec<ContentPart<'a>>),
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ContentPart<'a> {
    Text { text: Cow<'a, str> },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Serialize)]
struct ImageUrl {
    url: String,
}

fn image_url<'a>(media_type: &str, data: &str) -> ContentPart<'a> {
    ContentPart::ImageUrl {
        image_url: ImageUrl {
            url: format!("data:{media_type};base64,{data}"),
        },
    }
}

#[derive(Serialize)]
struct WireCall<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    /// A JSON-encoded string, as the API wants it.
    arguments: Cow<'a, str>,
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: WireToolFunction<'a>,
}

#[derive(Serialize)]
struct WireToolFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a Value,
}

/// Builds the body for `request` and hands it to `f` (the body borrows from the request and
/// from the replay-prepared messages, which live only for this call).
pub(super) fn with_body<R>(
    config: &ProviderConfig,
    request: &ModelRequest<'_>,
    f: impl FnOnce(&ChatBody<'_>) -> R,
) -> R {
    let model = request
        .model
        .as_deref()
        .or(config.model.as_deref())
        .unwrap_or_default();
    // Chat Completions rejects tool-call ids longer than 40 characters.
    let target = ReplayTarget::openai(PROVIDER, model).max_id_len(40);
    let messages = replay::prepare(&request.messages, &target);
    let mut wire: Vec<WireMessage<'_>> = Vec::with_capacity(messages.len() + 1);
    if let Some(system) = &request.system_prompt {
        wire.push(WireMessage::System { content: system });
    }
    for m in messages.iter() {
        match m.role {
            Role::Assistant => wire.push(assistant_message(m)),
            Role::ToolResult => push_tool_result(m, &mut wire),
            _ => wire.push(user_message(m)),
        }
    }
    let tools = request.tools.iter().map(wire_tool).collect();
    let body = ChatBody {
        model,
        messages: wire,
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        tools,
        temperature: request.temperature.map(wire_f32),
        max_completion_tokens: request.max_output_tokens,
        reasoning_effort: request
            .reasoning
            .and_then(crate::providers::openai_reasoning_effort),
        response_format: request.output.as_ref().map(chat_response_format),
        prompt_cache_key: request
            .prompt_cache_key
            .as_deref()
            .filter(|_| config.prompt_cache),
    };
    f(&body)
}

/// An assistant message: its text parts (kept apart by blank lines) and its tool calls.
fn assistant_message(m: &Message) -> WireMessage<'_> {
    // Separate text parts (e.g. another provider's reasoning turned into text, then the answer)
    // instead of gluing them together.
    let mut texts = m.content.iter().filter_map(|p| match p {
        Part::Text { text, .. } if !text.is_empty() => Some(text.as_str()),
        _ => None,
    });
    let text: Cow<'_, str> = match (texts.next(), texts.next()) {
        (None, _) => Cow::Borrowed(""),
        (Some(only), None) => Cow::Borrowed(only),
        (Some(first), Some(second)) => {
            let mut joined = format!("{first}\n\n{second}");
            for t in texts {
                joined.push_str("\n\n");
                joined.push_str(t);
            }
            Cow::Owned(joined)
        }
    };
    let tool_calls: Vec<WireCall<'_>> = m
        .tool_calls()
        .map(|c| WireCall {
            id: &c.id,
            kind: "function",
            function: WireFunction {
                name: &c.tool_name,
                // Only an object is accepted (see `replay`); the transcript keeps the raw text.
                arguments: Cow::Owned(replay::wire_arguments(&c.arguments)),
            },
        })
        .collect();
    let content = if text.is_empty() && !tool_calls.is_empty() {
        None
    } else {
        Some(text)
    };
    WireMessage::Assistant {
        content,
        tool_calls,
    }
}

/// A tool result: a `tool` message, and a user message with its images (tool messages carry
/// text only).
fn push_tool_result<'a>(m: &'a Message, wire: &mut Vec<WireMessage<'a>>) {
    let Some(r) = m.tool_result_part() else {
        return;
    };
    wire.push(WireMessage::Tool {
        tool_call_id: &r.call_id,
        content: &r.content,
    });
    if !r.images.is_empty() {
        let mut parts = vec![ContentPart::Text {
            text: Cow::Owned(format!("Images returned by tool call {}:", r.call_id)),
        }];
        parts.extend(r.images.iter().map(|i| image_url(&i.media_type, &i.data)));
        wire.push(WireMessage::User {
            content: UserContent::Parts(parts),
        });
    }
}

/// A user message: plain text, or parts when it has images.
fn user_message(m: &Message) -> WireMessage<'_> {
    let has_images = m.content.iter().any(|p| matches!(p, Part::Image(_)));
    let content = if has_images {
        UserContent::Parts(
            m.content
                .iter()
                .filter_map(|p| match p {
                    Part::Text { text, .. } => Some(ContentPart::Text {
                        text: Cow::Borrowed(text),
                    }),
                    Part::Image(i) => Some(image_url(&i.media_type, &i.data)),
                    _ => None,
                })
                .collect(),
        )
    } else {
        let mut texts = m.content.iter().filter_map(|p| match p {
            Part::Text { text, .. } => Some(text.as_str()),
            _ => None,
        });
        match (texts.next(), texts.next()) {
            (Some(only), None) => UserContent::Text(Cow::Borrowed(only)),
            _ => UserContent::Text(Cow::Owned(m.text())),
        }
    };
    WireMessage::User { content }
}

fn wire_tool(t: &ToolSchema) -> WireTool<'_> {
    WireTool {
        kind: "function",
        function: WireToolFunction {
            name: &t.name,
            description: &t.description,
            parameters: &t.parameters,
        },
    }
}

/// Native structured output (typed output): `response_format` with a `json_schema`.
fn chat_response_format(format: &OutputFormat) -> Value {
    let mut schema = serde_json::Map::new();
    schema.insert("name".into(), Value::String(format.name.clone()));
    if let Some(description) = &format.description {
        schema.insert("description".into(), Value::String(description.clone()));
    }
    schema.insert("schema".into(), format.schema.clone());
    schema.insert("strict".into(), Value::Bool(format.strict));
    serde_json::json!({"type": "json_schema", "json_schema": schema})
}
