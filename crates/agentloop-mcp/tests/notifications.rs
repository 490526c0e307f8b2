//! Server notifications during an agent run: progress of an MCP call reaches the agent's
//! events as `ToolExecutionUpdate`s of that call (and restarts its timeout), and server log
//! messages reach the application as `McpEvent::Log` at the configured level, after agentloop
//! asked the server for that level, and never reach the model.
#![allow(clippy::unwrap_used, clippy::expect_used)]
#![allow(deprecated)] // MCP logging is deprecated in newer revisions, still used by servers.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::tooling::Deps;
use agentloop::transcript::Message;
use agentloop_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ServerCapabilities, ServerConfig, SetLevelRequestParams, Tool,
};
use agentloop_mcp::rmcp::service::{RequestContext, RoleServer};
use agentloop_mcp::rmcp::{ErrorData, ServerHandler};
use agentloop_mcp::{McpEvent, McpEventFn, McpLogLevel, McpServerConfig, McpToolset};
use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::{mock_model, serve_mcp_router};

/// A server whose one tool logs at four levels and reports three progress steps, each a while
/// apart (longer together than the call's timeout).
#[derive(Clone, Default)]
struct Chatty {
    levels_asked: Arc<Mutex<Vec<LoggingLevel>>>,
}

impl ServerHandler for Chatty {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .build(),
        )
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.levels_asked.lock().unwrap().push(request.level);
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let Value::Object(schema) = json!({"type": "object", "properties": {}}) else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "chatty",
            "Logs and reports progress.",
            Arc::new(schema),
        )]))
    }

    async fn call_tool(
        &self,
        _request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        // Sent whatever level was asked: the client filters too.
        for (level, text) in [
            (LoggingLevel::Debug, "debug detail"),
            (LoggingLevel::Info, "info note"),
            (LoggingLevel::Warning, "disk nearly full"),
            (LoggingLevel::Error, "query failed\n\u{1b}[2Jagain"),
        ] {
            let _ = context
                .peer
                .notify_logging_message(
                    LoggingMessageNotificationParam::new(level, json!(text)).with_logger("db"),
                )
                .await;
        }
        let token = context.meta.get_progress_token();
        for step in 1..=3 {
            tokio::time::sleep(Duration::from_millis(250)).await;
            if let Some(token) = &token {
                let _ = context
                    .peer
                    .notify_progress(
                        ProgressNotificationParam::new(token.clone(), f64::from(step))
                            .with_total(3.0)
                            .with_message(format!("step {step}")),
                    )
                    .await;
            }
        }
        Ok(CallToolResponse::Complete(CallToolResult::success(vec![
            ContentBlock::text("done"),
        ])))
    }
}

async fn serve(handler: Chatty) -> String {
    use agentloop_mcp::rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        move || Ok(handler.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    serve_mcp_router(axum::Router::new().nest_service("/mcp", service)).await
}

/// Runs an agent whose model calls `chatty` once; returns the agent's events, the MCP events
/// and the model's requests.
async fn run(config: McpServerConfig) -> (Vec<AgentEvent>, Vec<McpEvent>, Vec<Value>) {
    let mcp_events = Arc::new(Mutex::new(Vec::new()));
    let sink = mcp_events.clone();
    let on_event: McpEventFn = Arc::new(move |e: &McpEvent| sink.lock().unwrap().push(e.clone()));
    let toolset = McpToolset::connect_with_events([config], Some(on_event))
        .await
        .unwrap();
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c1", "name": "mcp__srv__chatty", "arguments": {}}]},
            {"text": "ok"}
        ]}))
        .unwrap(),
    );
    let model = mock_model(&server);
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let agent = AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools(toolset.tools::<Deps>().await.unwrap())
        .unwrap()
        .with_emit(move |e: &AgentEvent| seen.lock().unwrap().push(e.clone()));
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    assert_eq!(out.stop, RunStop::Done);
    toolset.shutdown().await;
    let requests = server.requests().into_iter().map(|r| r.body).collect();
    let agent_events = events.lock().unwrap().clone();
    let mcp = mcp_events.lock().unwrap().clone();
    (agent_events, mcp, requests)
}

fn logs(events: &[McpEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| matches!(e, McpEvent::Log { .. }))
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
async fn progress_updates_the_running_call_and_restarts_its_timeout() {
    let chatty = Chatty::default();
    // 3 × 250 ms of work under a 600 ms timeout: only progress keeps the call alive.
    let config = McpServerConfig::http("srv", serve(chatty).await)
        .with_tool_timeout(Duration::from_millis(600));
    let (events, _, requests) = run(config).await;
    let updates: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionUpdate {
                call_id, update, ..
            } if call_id == "c1" => Some(update),
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 3, "{events:?}");
    assert_eq!(
        *updates[2],
        json!({"progress": 3.0, "total": 3.0, "message": "step 3"})
    );
    let result = requests[1].to_string();
    assert!(result.contains("\"done\""), "{result}");
}

#[tokio::test]
async fn logs_reach_the_application_at_the_configured_level_never_the_model() {
    let chatty = Chatty::default();
    let asked = chatty.levels_asked.clone();
    let (_, mcp, requests) = run(McpServerConfig::http("srv", serve(chatty).await)).await;
    assert_eq!(*asked.lock().unwrap(), vec![LoggingLevel::Warning]);
    assert_eq!(
        logs(&mcp),
        vec![
            "MCP server `srv` log [warning] db: disk nearly full",
            "MCP server `srv` log [error] db: query failed  [2Jagain",
        ]
    );
    for body in &requests {
        let text = body.to_string();
        assert!(
            !text.contains("disk nearly full") && !text.contains("query failed"),
            "{text}"
        );
    }

    let chatty = Chatty::default();
    let asked = chatty.levels_asked.clone();
    let config =
        McpServerConfig::http("srv", serve(chatty).await).with_log_level(Some(McpLogLevel::Debug));
    let (_, mcp, _) = run(config).await;
    assert_eq!(*asked.lock().unwrap(), vec![LoggingLevel::Debug]);
    assert_eq!(logs(&mcp).len(), 4);

    // No level: nothing asked, nothing passed on.
    let chatty = Chatty::default();
    let asked = chatty.levels_asked.clone();
    let config = McpServerConfig::http("srv", serve(chatty).await).with_log_level(None);
    let (_, mcp, _) = run(config).await;
    assert!(asked.lock().unwrap().is_empty());
    assert!(logs(&mcp).is_empty());
}
