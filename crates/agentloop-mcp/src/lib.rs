//! MCP for agentloop, on the official Rust SDK (`rmcp` 3.11, kept in this one crate so a future
//! rmcp major is one place to change).
//!
//! - [`McpToolset`] connects to MCP servers over stdio ([`McpTransport::Stdio`]) or streamable
//!   HTTP ([`McpTransport::Http`]) and turns their tools into agentloop
//!   [`ToolSpec`](agentloop::tooling::ToolSpec)s named `mcp__<server>__<tool>`: schemas passed
//!   through unchanged, results mapped (text, images, resources, structured content, errors),
//!   per-server timeouts with progress, cancellation, restarts and process-group cleanup.
//! - Servers' resources reach the model through two read-only tools,
//!   [`LIST_RESOURCES_TOOL`] and [`READ_RESOURCE_TOOL`] (arguments: server and URI).
//! - Servers' prompts are slash commands `/mcp__<server>__<prompt> args…`
//!   ([`McpToolset::expand_prompt_command`]).
//! - [`serve_builtin_tools`] serves agentloop's built-in tools over MCP (stdio), and
//!   [`serve_builtin_tools_http`] over streamable HTTP (Host/Origin checks, optional bearer token).
//! - OAuth 2.1 for streamable-HTTP servers: [`OAuthSettings`] on an [`HttpServer`], [`login`]
//!   and [`logout`]; a server that needs authorization it was not given is
//!   [`ServerState::NeedsLogin`]. Without a person, a [`ClientGrant`] obtains tokens by client
//!   credentials or enterprise-managed cross-app access.

mod auth;
mod client;
mod config;
mod elicitation;
mod error;
mod events;
mod grant;
mod http_server;
mod logging;
mod prompts;
mod registration;
mod resources;
mod server;
mod toolset;
mod version;

pub use auth::{AuthorizeFuture, Authorizer, OAuthSettings, login, logout};
pub use client::{ServerState, map_result};
pub use config::{
    ApprovalMode, DEFAULT_MAX_RESTARTS, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, HttpServer,
    McpServerConfig, McpTransport, ParseApprovalModeError, StdioServer,
};
pub use elicitation::{
    ElicitFuture, ElicitationAnswer, ElicitationMode, ElicitationRequest, Elicitor,
};
pub use error::McpError;
pub use events::{McpEvent, McpEventFn};
pub use grant::ClientGrant;
pub use http_server::{HttpServeOptions, MCP_PATH, builtin_tools_router, serve_builtin_tools_http};
pub use logging::{DEFAULT_LOG_LEVEL, McpLogLevel, ParseLogLevelError};
pub use prompts::{PromptArg, PromptCommand};
pub use resources::{LIST_RESOURCES_TOOL, READ_RESOURCE_TOOL};
pub use server::{BuiltinToolsServer, serve_builtin_tools};
pub use toolset::{McpToolset, ServerReport, ToolReport};
pub use version::{PROPOSED_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS, is_supported};

/// The rmcp version this crate is built on (re-exported so applications can name its types).
pub use rmcp;

/// Whether `line` starts with an MCP prompt command: `/mcp__` then a name (the prompt may still
/// be unknown; [`McpToolset::expand_prompt_command`] says).
pub fn is_prompt_command(line: &str) -> bool {
    line.trim_start()
        .strip_prefix("/mcp__")
        .is_some_and(|rest| rest.chars().next().is_some_and(|c| !c.is_whitespace()))
}
