//! MCP resources for the model: two read-only tools, `mcp_list_resources` (the resources and
//! resource templates of one server or of all) and `mcp_read_resource` (one resource by server
//! and URI), offered when a running server announced the `resources` capability.
//!
//! Text contents come back as text headed by their URI, image blobs as image parts, other blobs
//! as a one-line note (the model cannot use base64). A failed read is an error result naming
//! the server and the URI; it never ends the run.

use std::sync::Arc;

use agentloop::tooling::{SpecError, ToolContext, ToolDeps, ToolError, ToolOutput, ToolSpec};
use agentloop::transcript::ImagePart;
use rmcp::model::{ReadResourceRequestParams, ResourceContents};
use serde_json::{Value, json};

use crate::client::ServerHandle;

/// The tool that lists resources.
pub const LIST_RESOURCES_TOOL: &str = "mcp_list_resources";
/// The tool that reads a resource.
pub const READ_RESOURCE_TOOL: &str = "mcp_read_resource";

/// Entries listed per server at most (resource lists can be long; templates are not capped).
const MAX_LISTED: usize = 200;

/// The two resource tools, when at least one running server offers resources.
pub(crate) fn resource_tools<D: ToolDeps>(
    servers: &[Arc<ServerHandle>],
) -> Result<Vec<ToolSpec<D>>, SpecError> {
    let servers: Arc<Vec<Arc<ServerHandle>>> = Arc::new(
        servers
            .iter()
            .filter(|s| s.capabilities().is_some_and(|c| c.resources.is_some()))
            .cloned()
            .collect(),
    );
    if servers.is_empty() {
        return Ok(Vec::new());
    }
    let names: Vec<&str> = servers.iter().map(|s| s.name()).collect();
    let server_schema = json!({"type": "string", "enum": names,
        "description": "The MCP server's name."});
    let list_servers = servers.clone();
    let list = ToolSpec::<D>::builder(
        LIST_RESOURCES_TOOL,
        format!(
            "List the resources (URIs, names, MIME types) and resource templates that MCP \
             servers offer, to read with {READ_RESOURCE_TOOL}. Servers: {}. Omit `server` to \
             list all.",
            names.join(", ")
        ),
    )
    .parameters(
        json!({"type": "object", "properties": {"server": server_schema},
        "additionalProperties": false}),
    )
    .parallel_safe(true)
    .handler(move |_ctx: ToolContext<D>, args: Value| {
        let servers = list_servers.clone();
        async move { list_resources(&servers, args["server"].as_str()).await }
    })
    .build()?;
    let read = ToolSpec::<D>::builder(
        READ_RESOURCE_TOOL,
        format!(
            "Read one resource of an MCP server by its URI (from {LIST_RESOURCES_TOOL}, or a \
             template filled in). Servers: {}.",
            names.join(", ")
        ),
    )
    .parameters(json!({"type": "object", "properties": {
            "server": server_schema,
            "uri": {"type": "string", "description": "The resource's URI."}},
        "required": ["server", "uri"], "additionalProperties": false}))
    .parallel_safe(true)
    .handler(move |_ctx: ToolContext<D>, args: Value| {
        let servers = servers.clone();
        async move {
            let server = find(&servers, args["server"].as_str().unwrap_or_default())?;
            read_resource(server, args["uri"].as_str().unwrap_or_default()).await
        }
    })
    .build()?;
    Ok(vec![list, read])
}

fn find<'a>(servers: &'a [Arc<ServerHandle>], name: &str) -> Result<&'a ServerHandle, ToolError> {
    servers
        .iter()
        .find(|s| s.name() == name)
        .map(|s| &**s)
        .ok_or_else(|| {
            let names: Vec<&str> = servers.iter().map(|s| s.name()).collect();
            ToolError::new(format!(
                "no MCP server `{name}` with resources; servers with resources: {}",
                names.join(", ")
            ))
        })
}

async fn list_resources(
    servers: &[Arc<ServerHandle>],
    only: Option<&str>,
) -> Result<ToolOutput, ToolError> {
    let chosen: Vec<&ServerHandle> = match only {
        Some(name) => vec![find(servers, name)?],
        None => servers.iter().map(|s| &**s).collect(),
    };
    let mut sections = Vec::new();
    for server in chosen {
        sections.push(list_one(server).await?);
    }
    Ok(ToolOutput::text(sections.join("\n\n")))
}

async fn list_one(server: &ServerHandle) -> Result<String, ToolError> {
    let peer = server.peer().await?;
    let timeout = server.config.tool_timeout;
    let resources = tokio::time::timeout(timeout, peer.list_all_resources())
        .await
        .map_err(|_| server.request_failed("resources/list", timed_out(timeout)))?
        .map_err(|e| server.request_failed("resources/list", e))?;
    // Templates are optional: a server without them may answer with an error.
    let templates = tokio::time::timeout(timeout, peer.list_all_resource_templates())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let mut out = format!(
        "MCP server `{}`: {} resource(s), {} template(s)",
        server.name(),
        resources.len(),
        templates.len()
    );
    for r in resources.iter().take(MAX_LISTED) {
        out.push_str(&format!("\n- {}  {}", r.uri, r.name));
        if let Some(m) = &r.mime_type {
            out.push_str(&format!(" ({m})"));
        }
        if let Some(d) = r.description.as_deref().filter(|d| !d.trim().is_empty()) {
            out.push_str(&format!(": {}", d.lines().next().unwrap_or_default()));
        }
    }
    if resources.len() > MAX_LISTED {
        out.push_str(&format!(
            "\n… {} more not shown",
            resources.len() - MAX_LISTED
        ));
    }
    if !templates.is_empty() {
        out.push_str("\ntemplates (fill in the {placeholders} to read):");
    }
    for t in &templates {
        out.push_str(&format!("\n- {}  {}", t.uri_template, t.name));
        if let Some(d) = t.description.as_deref().filter(|d| !d.trim().is_empty()) {
            out.push_str(&format!(": {}", d.lines().next().unwrap_or_default()));
        }
    }
    Ok(out)
}

fn timed_out(timeout: std::time::Duration) -> rmcp::service::ServiceError {
    rmcp::service::ServiceError::Timeout { timeout }
}

async fn read_resource(server: &ServerHandle, uri: &str) -> Result<ToolOutput, ToolError> {
    if uri.trim().is_empty() {
        return Err(ToolError::new("`uri` must name a resource"));
    }
    let peer = server.peer().await?;
    let timeout = server.config.tool_timeout;
    let what = format!("resources/read of `{uri}`");
    let result = tokio::time::timeout(
        timeout,
        peer.read_resource(ReadResourceRequestParams::new(uri)),
    )
    .await
    .map_err(|_| server.request_failed(&what, timed_out(timeout)))?
    .map_err(|e| server.request_failed(&what, e))?;
    Ok(map_contents(result.contents))
}

/// Maps resource contents onto a tool result (see the module docs).
pub(crate) fn map_contents(contents: Vec<ResourceContents>) -> ToolOutput {
    let mut texts = Vec::new();
    let mut images = Vec::new();
    for content in contents {
        match content {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                texts.push(format!("[resource {uri}]\n{text}"));
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type: Some(mime),
                blob,
                ..
            } if mime.starts_with("image/") => {
                texts.push(format!("[resource {uri} ({mime}): the image is attached]"));
                images.push(ImagePart {
                    media_type: mime,
                    data: blob,
                });
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => texts.push(format!(
                "[resource {uri} ({}), {} bytes of base64 not shown]",
                mime_type.as_deref().unwrap_or("binary"),
                blob.len()
            )),
            #[allow(unreachable_patterns)]
            _ => texts.push("[resource of an unknown kind]".into()),
        }
    }
    if texts.is_empty() {
        texts.push("[the resource is empty]".into());
    }
    ToolOutput {
        content: texts.join("\n\n"),
        images,
    }
}
