//! agentloop as an MCP server: [`BuiltinToolsServer`] serves the built-in coding tools (confined
//! to one workspace, with its approval policy) to any MCP client, and [`serve_builtin_tools`]
//! runs it over stdio (`agentloop mcp-server --workspace DIR`).
//!
//! There is no terminal to ask on, so calls the policy would ask about are decided by the policy
//! alone: `always` runs them, `mutating` and `never` refuse them with a reason (an error result).
//! Every call goes through the same executor as in an agent run (schema validation, timeouts,
//! error results), and a client's `notifications/cancelled` stops the call.

use std::sync::Arc;

use agentloop::builtin::{self, ApprovalPolicy, Workspace, WorkspaceDeps};
use agentloop::tooling::{ExecOptions, Registry, run_tools_with};
use agentloop::transcript::ToolCallPart;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use serde_json::Value;

/// An MCP server handler exposing agentloop's built-in tools.
#[derive(Clone)]
pub struct BuiltinToolsServer {
    registry: Arc<Registry<WorkspaceDeps>>,
    deps: Arc<WorkspaceDeps>,
    tools: Arc<Vec<Tool>>,
}

impl std::fmt::Debug for BuiltinToolsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuiltinToolsServer")
            .field("deps", &self.deps)
            .finish_non_exhaustive()
    }
}

impl BuiltinToolsServer {
    /// The built-in tools confined to `workspace`, under `policy`.
    pub fn new(
        workspace: Workspace,
        policy: ApprovalPolicy,
    ) -> Result<Self, agentloop::tooling::RegistryError> {
        let registry = Registry::new(builtin::tools::<WorkspaceDeps>(&workspace))?;
        let tools = registry
            .specs()
            .map(|spec| {
                let schema = match spec.parameters() {
                    Value::Object(m) => m.clone(),
                    _ => serde_json::Map::new(),
                };
                let mutating = builtin::is_mutating(spec.name());
                Tool::new(
                    spec.name().to_owned(),
                    spec.description().to_owned(),
                    Arc::new(schema),
                )
                .with_annotations(
                    ToolAnnotations::new()
                        .read_only(!mutating)
                        .destructive(mutating),
                )
            })
            .collect();
        Ok(BuiltinToolsServer {
            registry: Arc::new(registry),
            deps: Arc::new(WorkspaceDeps::new(workspace, policy)),
            tools: Arc::new(tools),
        })
    }
}

impl ServerHandler for BuiltinToolsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentloop", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "agentloop's built-in coding tools, confined to {} (approval policy: {}).",
                self.deps.workspace().root().display(),
                self.deps.policy()
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools.to_vec()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.registry.get(&request.name).is_none() {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`; available: {}",
                    request.name,
                    self.registry.names().join(", ")
                ),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCallPart::new(context.id.to_string(), request.name.to_string(), args);
        let options = ExecOptions::default();
        let calls = [call];
        let run = run_tools_with(&calls, &self.registry, &self.deps, &options);
        let outcome = tokio::select! {
            outcomes = run => outcomes.into_iter().next(),
            _ = context.ct.cancelled() => {
                return Err(ErrorData::internal_error("the call was cancelled", None));
            }
        };
        let Some(outcome) = outcome else {
            return Err(ErrorData::internal_error(
                "the call produced no result",
                None,
            ));
        };
        let result = outcome.result;
        let mut content = vec![ContentBlock::text(result.content)];
        content.extend(
            result
                .images
                .into_iter()
                .map(|i| ContentBlock::image(i.data, i.media_type)),
        );
        Ok(CallToolResponse::Complete(if result.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        }))
    }
}

/// Serves the built-in tools for `workspace` over stdin/stdout until the client disconnects.
pub async fn serve_builtin_tools(
    workspace: Workspace,
    policy: ApprovalPolicy,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let server = BuiltinToolsServer::new(workspace, policy)?;
    let service = server.serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}
