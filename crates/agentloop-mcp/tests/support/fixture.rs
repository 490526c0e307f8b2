//! The MCP fixture server used by the tests: a hand-written rmcp `ServerHandler` whose tools
//! return text, an image, structured content, an error, sleep (recording cancellation), send
//! progress, announce a tool-list change, or crash the process. Compiled both into the
//! `agentloop-mcp-test-server` binary (stdio) and into the tests (streamable HTTP).

#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler};
use serde_json::{Value, json};

/// A 1×1 transparent PNG.
pub const TINY_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

/// Shared, observable state of one fixture server.
#[derive(Default)]
pub struct FixtureState {
    /// Names of calls whose handler saw `notifications/cancelled`.
    pub cancelled: Mutex<Vec<String>>,
    /// `add_tool` was called: the `extra` tool is listed.
    pub extra: AtomicBool,
    /// Where to append "cancelled <tool>" lines (the stdio binary's way to report).
    pub cancel_log: Option<std::path::PathBuf>,
}

/// The handler.
#[derive(Clone, Default)]
pub struct Fixture {
    pub state: Arc<FixtureState>,
}

fn schema(v: Value) -> Arc<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(serde_json::Map::new()),
    }
}

fn tool(name: &'static str, description: &'static str, s: Value) -> Tool {
    Tool::new(name, description, schema(s))
}

impl Fixture {
    pub fn tools(&self) -> Vec<Tool> {
        let empty = json!({"type": "object", "properties": {}});
        let mut tools = vec![
            tool(
                "echo",
                "Echo the text back.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            tool(
                "pick",
                "Pick a shape (schema uses $defs/$ref and anyOf).",
                json!({
                    "type": "object",
                    "$defs": {"shape": {"anyOf": [{"type": "string", "enum": ["circle", "square"]}, {"type": "integer"}]}},
                    "properties": {"shape": {"$ref": "#/$defs/shape"}},
                    "required": ["shape"]
                }),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            tool("image", "Return a tiny PNG.", empty.clone())
                .with_annotations(ToolAnnotations::new().read_only(true)),
            tool("structured", "Return structured content only.", empty.clone()),
            tool("resources", "Return an embedded resource and a resource link.", empty.clone()),
            tool("fail", "Always fails (isError).", empty.clone()),
            tool(
                "sleep",
                "Sleep for ms milliseconds.",
                json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]}),
            )
            .with_annotations(ToolAnnotations::new().read_only(true)),
            tool(
                "progress",
                "Send `steps` progress notifications `delay_ms` apart, then answer.",
                json!({"type": "object", "properties": {"steps": {"type": "integer"}, "delay_ms": {"type": "integer"}}, "required": ["steps", "delay_ms"]}),
            ),
            tool("add_tool", "Add the `extra` tool and announce tools/list_changed.", empty.clone()),
            tool("crash", "Exit the server process in the middle of the call.", empty.clone()),
            tool("delete_all", "Pretend to delete everything.", empty.clone())
                .with_annotations(ToolAnnotations::new().destructive(true)),
        ];
        if self.state.extra.load(Ordering::Acquire) {
            tools.push(tool("extra", "Appeared after add_tool.", empty));
        }
        tools
    }

    fn record_cancel(&self, name: &str) {
        if let Ok(mut c) = self.state.cancelled.lock() {
            c.push(name.to_owned());
        }
        if let Some(path) = &self.state.cancel_log {
            use std::io::Write;
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                let _ = writeln!(f, "cancelled {name}");
            }
        }
    }
}

fn text(s: impl Into<String>) -> CallToolResponse {
    CallToolResponse::Complete(CallToolResult::success(vec![ContentBlock::text(s)]))
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        let int = |k: &str| args.get(k).and_then(Value::as_u64).unwrap_or(0);
        match request.name.as_ref() {
            "echo" => Ok(text(args["text"].as_str().unwrap_or_default())),
            "pick" => Ok(text(format!("picked {}", args["shape"]))),
            "image" => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::text("a tiny image"),
                ContentBlock::image(TINY_PNG, "image/png"),
            ]))),
            "structured" => Ok(CallToolResponse::Complete(CallToolResult::structured(
                json!({"temperature": 21.5, "unit": "C"}),
            ))),
            "resources" => Ok(CallToolResponse::Complete(CallToolResult::success(vec![
                ContentBlock::embedded_text("file:///notes.txt", "remember the milk"),
                ContentBlock::resource_link(
                    rmcp::model::Resource::new("file:///big.log", "big.log")
                        .with_mime_type("text/plain"),
                ),
            ]))),
            "fail" => Ok(CallToolResponse::Complete(CallToolResult::error(vec![
                ContentBlock::text("the widget is broken"),
            ]))),
            "sleep" => {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(int("ms"))) => Ok(text("slept")),
                    _ = context.ct.cancelled() => {
                        self.record_cancel("sleep");
                        Err(ErrorData::internal_error("cancelled", None))
                    }
                }
            }
            "progress" => {
                let token = context.meta.get_progress_token();
                let steps = int("steps");
                for i in 0..steps {
                    tokio::time::sleep(Duration::from_millis(int("delay_ms"))).await;
                    if let Some(token) = &token {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), (i + 1) as f64)
                                    .with_total(steps as f64),
                            )
                            .await;
                    }
                }
                tokio::time::sleep(Duration::from_millis(int("delay_ms"))).await;
                Ok(text(format!("done after {steps} steps")))
            }
            "add_tool" => {
                self.state.extra.store(true, Ordering::Release);
                let _ = context.peer.notify_tool_list_changed().await;
                Ok(text("added"))
            }
            "extra" => Ok(text("extra works")),
            "crash" => {
                // Die with the request in flight.
                std::process::exit(17);
            }
            "delete_all" => Ok(text("deleted (not really)")),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}
