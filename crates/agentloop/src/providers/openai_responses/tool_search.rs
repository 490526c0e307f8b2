//! Client-executed tool search, which only the Responses API runs natively (the adapter
//! reports it in its [`capabilities`](crate::model::ModelCapabilities), so the agent loop fills
//! [`ModelRequest::deferred_tools`] and [`ModelRequest::tool_search`] for it alone): when a
//! request's search is active, which tools are deferred, how a search result loads them, and
//! which `tool_search_call` items the client answers. See "Deferred tools and client-executed
//! tool search" in the module docs of [`super`].

use std::collections::HashSet;

use serde_json::Value;

use super::request::function_tool;
use crate::model::ModelRequest;
use crate::tooling::{TOOL_SEARCH_NAME, ToolSchema, search_result_names};
use crate::transcript::ToolResultPart;

/// The client-executed tool search of one request, when active (see the module docs).
pub(super) struct SearchPlan<'r> {
    pub(super) tool: &'r ToolSchema,
    pub(super) deferred: &'r [ToolSchema],
}

impl<'r> SearchPlan<'r> {
    pub(super) fn of(request: &'r ModelRequest<'_>) -> Option<Self> {
        let tool = request.tool_search.as_ref()?;
        if request.deferred_tools.is_empty() {
            return None;
        }
        Some(SearchPlan {
            tool,
            deferred: &request.deferred_tools,
        })
    }

    pub(super) fn is_deferred(&self, name: &str) -> bool {
        self.deferred.iter().any(|t| t.name == name)
    }

    /// The definitions of the deferred tools a search result names.
    pub(super) fn loaded_tools(&self, result: &ToolResultPart) -> Vec<Value> {
        if result.is_error {
            return Vec::new();
        }
        let names = search_result_names(&result.content).unwrap_or_default();
        let mut seen: HashSet<&str> = HashSet::new();
        names
            .iter()
            .filter(|name| seen.insert(name.as_str()))
            .filter_map(|name| self.deferred.iter().find(|t| &t.name == name))
            .map(|t| function_tool(t, true))
            .collect()
    }
}

/// The name a `tool_search_call` from the model is a call of: the request's search tool, else
/// the registry's default name.
pub(super) fn search_name(request: &ModelRequest<'_>) -> String {
    request
        .tool_search
        .as_ref()
        .map_or_else(|| TOOL_SEARCH_NAME.to_owned(), |t| t.name.clone())
}

/// A `tool_search_call` the client must answer (server-executed ones carry no `call_id`).
pub(super) fn is_client_search(item: &Value) -> bool {
    match item.get("execution").and_then(Value::as_str) {
        Some("server") => false,
        Some("client") => true,
        _ => item.get("call_id").and_then(Value::as_str).is_some(),
    }
}
