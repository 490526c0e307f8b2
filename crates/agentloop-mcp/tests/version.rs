//! Protocol version negotiation: agentloop proposes the newest version with an `initialize`
//! handshake, accepts each supported version a server answers (real rmcp servers narrowed to
//! one version, and a hand-written JSON-RPC server for answers rmcp would never give), and
//! refuses any other answer (2024-11-05, unknown dates) with an error naming both versions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use agentloop::tooling::Deps;
use agentloop_mcp::rmcp::model::{
    ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities, ServerConfig,
    Tool,
};
use agentloop_mcp::rmcp::service::{RequestContext, RoleServer};
use agentloop_mcp::rmcp::{ErrorData, ServerHandler};
use agentloop_mcp::{
    McpServerConfig, McpToolset, PROPOSED_PROTOCOL_VERSION, SUPPORTED_PROTOCOL_VERSIONS,
    ServerState,
};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use support::serve_mcp_router;

/// An rmcp server that speaks exactly one protocol version.
#[derive(Clone)]
struct Pinned(ProtocolVersion);

impl ServerHandler for Pinned {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_protocol_version(self.0.clone())
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Owned(vec![self.0.clone()])
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = json!({"type": "object", "properties": {}});
        let Value::Object(schema) = schema else {
            unreachable!()
        };
        Ok(ListToolsResult::with_all_items(vec![Tool::new(
            "ping",
            "Answers pong.",
            Arc::new(schema),
        )]))
    }
}

async fn rmcp_server(version: ProtocolVersion) -> String {
    use agentloop_mcp::rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let service = StreamableHttpService::new(
        move || Ok(Pinned(version.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    serve_mcp_router(axum::Router::new().nest_service("/mcp", service)).await
}

/// A minimal stateless JSON-RPC server over HTTP that answers `initialize` with `version`
/// whatever the client proposed, and records the version the client proposed.
async fn raw_server(version: &'static str) -> (String, Arc<Mutex<Vec<String>>>) {
    let proposed = Arc::new(Mutex::new(Vec::new()));
    let seen = proposed.clone();
    let handler = move |body: String| {
        let seen = seen.clone();
        async move {
            let body: Value = serde_json::from_str(&body).unwrap_or_default();
            let Some(id) = body.get("id").cloned() else {
                return StatusCode::ACCEPTED.into_response();
            };
            let result = match body["method"].as_str() {
                Some("initialize") => {
                    let asked = body["params"]["protocolVersion"].as_str().unwrap_or("");
                    seen.lock().unwrap().push(asked.to_owned());
                    json!({"protocolVersion": version, "capabilities": {"tools": {}},
                           "serverInfo": {"name": "raw", "version": "1.0.0"}})
                }
                Some("tools/list") => json!({"tools": [
                    {"name": "ping", "inputSchema": {"type": "object"}}
                ]}),
                _ => json!({}),
            };
            let reply = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
            let reply: Response = (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                reply,
            )
                .into_response();
            reply
        }
    };
    let router = axum::Router::new().route(
        "/mcp",
        axum::routing::post(handler)
            .get(|| async { StatusCode::METHOD_NOT_ALLOWED })
            .delete(|| async { StatusCode::OK }),
    );
    (serve_mcp_router(router).await, proposed)
}

async fn connect(url: &str) -> McpToolset {
    McpToolset::connect([McpServerConfig::http("srv", url)])
        .await
        .unwrap()
}

#[tokio::test]
async fn each_supported_version_an_rmcp_server_answers_is_accepted() {
    for version in [
        ProtocolVersion::V_2025_03_26,
        ProtocolVersion::V_2025_06_18,
        ProtocolVersion::V_2025_11_25,
    ] {
        let toolset = connect(&rmcp_server(version.clone()).await).await;
        assert_eq!(
            toolset.servers()[0].1,
            ServerState::Running { tools: 1 },
            "{version}"
        );
        let report = toolset.report().await;
        assert_eq!(
            report[0].protocol_version.as_deref(),
            Some(version.as_str())
        );
        assert_eq!(toolset.tools::<Deps>().await.unwrap().len(), 1);
        toolset.shutdown().await;
    }
}

#[tokio::test]
async fn the_newest_version_is_proposed_and_every_supported_answer_accepted() {
    assert_eq!(PROPOSED_PROTOCOL_VERSION, ProtocolVersion::V_2025_11_25);
    for version in SUPPORTED_PROTOCOL_VERSIONS {
        let version: &'static str = Box::leak(version.to_string().into_boxed_str());
        let (url, proposed) = raw_server(version).await;
        let toolset = connect(&url).await;
        assert_eq!(
            toolset.servers()[0].1,
            ServerState::Running { tools: 1 },
            "{version}"
        );
        assert_eq!(
            toolset.report().await[0].protocol_version.as_deref(),
            Some(version)
        );
        assert_eq!(
            *proposed.lock().unwrap(),
            vec![PROPOSED_PROTOCOL_VERSION.to_string()]
        );
        toolset.shutdown().await;
    }
}

#[tokio::test]
async fn an_unsupported_answer_is_refused_naming_both_versions() {
    for version in ["2024-11-05", "1999-01-01", "2027-01-01"] {
        let (url, _) = raw_server(version).await;
        let toolset = connect(&url).await;
        let ServerState::Down(why) = &toolset.servers()[0].1 else {
            panic!("{version} was accepted: {:?}", toolset.servers());
        };
        assert!(why.contains(version), "{why}");
        assert!(why.contains(PROPOSED_PROTOCOL_VERSION.as_str()), "{why}");
        assert!(why.contains("srv"), "{why}");
        assert!(toolset.tools::<Deps>().await.unwrap().is_empty());
    }
    // An rmcp server that only speaks 2024-11-05 is refused the same way.
    let toolset = connect(&rmcp_server(ProtocolVersion::V_2024_11_05).await).await;
    let ServerState::Down(why) = &toolset.servers()[0].1 else {
        panic!("accepted: {:?}", toolset.servers());
    };
    assert!(
        why.contains("2024-11-05") && why.contains("2025-11-25"),
        "{why}"
    );
}
