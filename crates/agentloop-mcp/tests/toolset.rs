//! MCP toolsets against the fixture server compiled into the tests: over stdio (the
//! `agentloop-mcp-test-server` binary) and streamable HTTP (in-process on 127.0.0.1:0). No Node
//! needed. Covers naming, schema pass-through, result mapping, timeouts with progress,
//! cancellation seen by the server, crashes and restarts, broken servers, list_changed, process
//! cleanup and a whole agent run over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agentloop::agent::{AgentLoop, AgentLoopConfig, RunStop};
use agentloop::tooling::{Deps, ToolContext, ToolErrorKind, ToolSpec};
use agentloop::transcript::{Message, Part, Role};
use agentloop_mcp::{ApprovalMode, McpServerConfig, McpToolset, ServerState};
use agentloop_testkit::{MockServer, Script};
use serde_json::{Value, json};
use support::fixture::{Fixture, FixtureState, TINY_PNG};
use support::{mock_model, serve_mcp_router};

const BIN: &str = env!("CARGO_BIN_EXE_agentloop-mcp-test-server");

fn stdio(name: &str, args: &[&str]) -> McpServerConfig {
    McpServerConfig::stdio(name, BIN, args.iter().copied())
        .with_startup_timeout(Duration::from_secs(20))
}

fn spec<'a>(tools: &'a [ToolSpec<Deps>], name: &str) -> &'a ToolSpec<Deps> {
    tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(
    tools: &[ToolSpec<Deps>],
    name: &str,
    args: Value,
) -> Result<agentloop::tooling::ToolOutput, agentloop::tooling::ToolError> {
    spec(tools, name).call(Arc::new(Deps::new()), args).await
}

async fn wait_for(mut f: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if f() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Whether a process is alive (not gone, not a zombie).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.split(") ").nth(1).unwrap_or("").starts_with('Z'),
        Err(_) => false,
    }
}

async fn mapping_checks(tools: &[ToolSpec<Deps>], p: &str) {
    let out = call(tools, &format!("{p}echo"), json!({"text": "hi"}))
        .await
        .unwrap();
    assert_eq!(out.content, "hi");

    // The schema is passed through unchanged ($defs/$ref/anyOf) and used for validation.
    let pick = spec(tools, &format!("{p}pick"));
    assert!(pick.parameters()["$defs"]["shape"]["anyOf"].is_array());
    assert_eq!(
        pick.parameters()["properties"]["shape"]["$ref"],
        "#/$defs/shape"
    );
    let out = call(tools, &format!("{p}pick"), json!({"shape": "circle"}))
        .await
        .unwrap();
    assert_eq!(out.content, "picked \"circle\"");
    let err = call(tools, &format!("{p}pick"), json!({"shape": "triangle"}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
    let err = call(tools, &format!("{p}echo"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);

    let out = call(tools, &format!("{p}image"), json!({})).await.unwrap();
    assert_eq!(out.content, "a tiny image");
    assert_eq!(out.images.len(), 1);
    assert_eq!(out.images[0].media_type, "image/png");
    assert_eq!(out.images[0].data, TINY_PNG);

    let out = call(tools, &format!("{p}structured"), json!({}))
        .await
        .unwrap();
    let v: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(v, json!({"temperature": 21.5, "unit": "C"}));

    let out = call(tools, &format!("{p}resources"), json!({}))
        .await
        .unwrap();
    assert!(out.content.contains("file:///notes.txt"), "{}", out.content);
    assert!(out.content.contains("remember the milk"));
    assert!(out.content.contains("file:///big.log"));

    let err = call(tools, &format!("{p}fail"), json!({}))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "the widget is broken");
}

#[tokio::test]
async fn stdio_tools_are_named_annotated_and_mapped() {
    let toolset = McpToolset::connect([stdio("fx", &[])]).await.unwrap();
    assert_eq!(toolset.servers()[0].1, ServerState::Running { tools: 11 });
    let tools = toolset.tools::<Deps>().await.unwrap();
    let names: HashSet<&str> = tools.iter().map(|t| t.name()).collect();
    assert!(names.contains("mcp__fx__echo"), "{names:?}");
    assert!(names.contains("mcp__fx__delete_all"));
    assert_eq!(
        spec(&tools, "mcp__fx__echo").description(),
        "Echo the text back."
    );

    // readOnlyHint → parallel-safe, no approval; anything else (destructive or unannotated) →
    // approval under the default `mutating` mode, not parallel-safe.
    assert!(spec(&tools, "mcp__fx__echo").parallel_safe());
    assert!(!spec(&tools, "mcp__fx__delete_all").parallel_safe());
    assert_eq!(toolset.needs_approval("mcp__fx__echo"), Some(false));
    assert_eq!(toolset.needs_approval("mcp__fx__delete_all"), Some(true));
    assert_eq!(toolset.needs_approval("mcp__fx__structured"), Some(true));
    assert_eq!(toolset.needs_approval("read_file"), None);

    mapping_checks(&tools, "mcp__fx__").await;
}

#[tokio::test]
async fn filters_prefixes_approval_modes_deferred_and_collisions() {
    let toolset = McpToolset::connect([
        stdio("a", &[])
            .with_enabled_tools(["echo", "image", "delete_all"])
            .with_disabled_tools(["image"])
            .with_approval(ApprovalMode::Always),
        stdio("b", &[])
            .with_prefix("")
            .with_enabled_tools(["echo", "delete_all"])
            .with_approval(ApprovalMode::NeverAsk)
            .with_deferred(true),
    ])
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    names.sort();
    assert_eq!(
        names,
        ["delete_all", "echo", "mcp__a__delete_all", "mcp__a__echo"]
    );
    assert_eq!(toolset.needs_approval("mcp__a__echo"), Some(true));
    assert_eq!(toolset.needs_approval("delete_all"), Some(false));
    assert!(spec(&tools, "echo").deferred());
    assert!(!spec(&tools, "mcp__a__echo").deferred());

    // Two servers mapping onto the same names: an error naming both.
    let clash = McpToolset::connect([
        stdio("c", &[])
            .with_prefix("x_")
            .with_enabled_tools(["echo"]),
        stdio("d", &[])
            .with_prefix("x_")
            .with_enabled_tools(["echo"]),
    ])
    .await
    .unwrap();
    let err = clash.tools::<Deps>().await.unwrap_err();
    assert!(err.is_collision());
    assert!(
        err.to_string().contains("c/echo") && err.to_string().contains("d/echo"),
        "{err}"
    );

    // Names longer than 64 characters are shortened, stay provider-safe and distinct.
    let long =
        McpToolset::connect([stdio(&"s".repeat(70), &[]).with_enabled_tools(["echo", "image"])])
            .await
            .unwrap();
    let tools = long.tools::<Deps>().await.unwrap();
    assert_eq!(tools.len(), 2);
    for t in &tools {
        assert!(t.name().len() <= 64, "{}", t.name());
        agentloop::tooling::validate_name(t.name()).unwrap();
    }
    assert_ne!(tools[0].name(), tools[1].name());
}

#[tokio::test]
async fn timeout_and_abort_cancel_the_request_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("cancel.log");
    let toolset = McpToolset::connect([stdio("fx", &["--cancel-log", log.to_str().unwrap()])
        .with_tool_timeout(Duration::from_millis(300))])
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();

    let err = call(&tools, "mcp__fx__sleep", json!({"ms": 30_000}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Timeout, "{err}");
    assert!(
        wait_for(|| read(&log).matches("cancelled sleep").count() == 1).await,
        "{}",
        read(&log)
    );

    // Abort: the executor drops the call's future; the server sees notifications/cancelled.
    let fut = call(&tools, "mcp__fx__sleep", json!({"ms": 30_000}));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), fut)
            .await
            .is_err()
    );
    assert!(
        wait_for(|| read(&log).matches("cancelled sleep").count() == 2).await,
        "{}",
        read(&log)
    );

    // Progress restarts the call timeout: 6 steps of 150 ms outlast the 300 ms timeout.
    let out = call(
        &tools,
        "mcp__fx__progress",
        json!({"steps": 6, "delay_ms": 150}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "done after 6 steps");
    // The server still answers afterwards.
    assert_eq!(
        call(&tools, "mcp__fx__echo", json!({"text": "x"}))
            .await
            .unwrap()
            .content,
        "x"
    );
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

#[tokio::test]
async fn a_crash_mid_call_is_an_error_result_and_the_server_restarts() {
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let sink = events.clone();
    let toolset = McpToolset::connect_with_events(
        [stdio("fx", &[])],
        Some(Arc::new(move |e: &agentloop_mcp::McpEvent| {
            sink.lock().unwrap().push(e.to_string())
        })),
    )
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let err = call(&tools, "mcp__fx__crash", json!({})).await.unwrap_err();
    assert!(err.message().contains("MCP server `fx` is down"), "{err}");
    let out = call(&tools, "mcp__fx__echo", json!({"text": "back"}))
        .await
        .unwrap();
    assert_eq!(out.content, "back");
    let seen = events.lock().unwrap().join("\n");
    assert!(seen.contains("restarted"), "{seen}");

    // Restarts are bounded: after max_restarts crashes the tools answer "down" without trying.
    let toolset = McpToolset::connect([{
        let mut c = stdio("fy", &[]);
        c.max_restarts = 1;
        c
    }])
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    call(&tools, "mcp__fy__crash", json!({})).await.unwrap_err();
    call(&tools, "mcp__fy__crash", json!({})).await.unwrap_err();
    let err = call(&tools, "mcp__fy__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(err.message().contains("is down"), "{err}");
}

#[tokio::test]
async fn broken_servers_do_not_fail_the_toolset_and_leave_no_process() {
    let toolset = McpToolset::connect([
        stdio("silent", &["--no-init"]).with_startup_timeout(Duration::from_millis(500)),
        stdio("garbage", &["--garbage"]).with_startup_timeout(Duration::from_millis(1500)),
        McpServerConfig::stdio("missing", "/nonexistent/mcp-server", Vec::<String>::new()),
        stdio("ok", &[]),
    ])
    .await
    .unwrap();
    let states = toolset.servers();
    for (name, state) in &states[..3] {
        assert!(matches!(state, ServerState::Down(_)), "{name}: {state:?}");
    }
    let ServerState::Down(why) = &states[0].1 else {
        unreachable!()
    };
    assert!(why.contains("did not start within"), "{why}");
    let ServerState::Down(why) = &states[2].1 else {
        unreachable!()
    };
    assert!(why.contains("cannot start"), "{why}");
    assert!(matches!(states[3].1, ServerState::Running { .. }));
    let tools = toolset.tools::<Deps>().await.unwrap();
    assert!(tools.iter().all(|t| t.name().starts_with("mcp__ok__")));

    // No child (nor grandchild) survives a server that never initializes.
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let cfg = stdio("silent", &["--spawn-grandchild", "--no-init"])
        .with_startup_timeout(Duration::from_millis(800))
        .with_env("FIXTURE_GRANDCHILD_PID_FILE", pid_file.to_str().unwrap());
    let _t = McpToolset::connect([cfg]).await.unwrap();
    let pid: u32 = read(&pid_file).trim().parse().unwrap();
    assert!(
        wait_for(|| !alive(pid)).await,
        "grandchild {pid} survived a failed start"
    );
}

#[tokio::test]
async fn dropping_the_toolset_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("pid");
    let cfg = stdio("fx", &["--spawn-grandchild"])
        .with_env("FIXTURE_GRANDCHILD_PID_FILE", pid_file.to_str().unwrap());
    let toolset = McpToolset::connect([cfg]).await.unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    assert_eq!(
        call(&tools, "mcp__fx__echo", json!({"text": "x"}))
            .await
            .unwrap()
            .content,
        "x"
    );
    let pid: u32 = read(&pid_file).trim().parse().unwrap();
    assert!(alive(pid));
    drop(toolset);
    assert!(
        wait_for(|| !alive(pid)).await,
        "grandchild {pid} survived the toolset"
    );
    // The tools now answer with an error instead of starting the server again.
    let err = call(&tools, "mcp__fx__echo", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(err.message().contains("shut down"), "{err}");
}

#[tokio::test]
async fn list_changed_refreshes_the_tool_list() {
    let toolset = McpToolset::connect([stdio("fx", &[])]).await.unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    assert!(tools.iter().all(|t| t.name() != "mcp__fx__extra"));
    assert!(!toolset.tools_changed());
    call(&tools, "mcp__fx__add_tool", json!({})).await.unwrap();
    assert!(wait_for(|| toolset.tools_changed()).await);
    assert!(toolset.refresh().await.unwrap());
    assert!(!toolset.tools_changed());
    let tools = toolset.tools::<Deps>().await.unwrap();
    let out = call(&tools, "mcp__fx__extra", json!({})).await.unwrap();
    assert_eq!(out.content, "extra works");
}

/// Serves a fresh fixture on 127.0.0.1:0 over streamable HTTP; returns its URL and state.
async fn http_fixture() -> (String, Arc<FixtureState>) {
    http_fixture_with(Arc::default()).await
}

/// [`http_fixture`] with the given session manager (to expire sessions).
async fn http_fixture_with(
    sessions: Arc<rmcp::transport::streamable_http_server::session::local::LocalSessionManager>,
) -> (String, Arc<FixtureState>) {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let state = Arc::new(FixtureState::default());
    let shared = state.clone();
    let service = StreamableHttpService::new(
        move || {
            Ok(Fixture {
                state: shared.clone(),
            })
        },
        sessions,
        StreamableHttpServerConfig::default(),
    );
    let url = serve_mcp_router(axum::Router::new().nest_service("/mcp", service)).await;
    (url, state)
}

#[tokio::test]
async fn streamable_http_tools_results_and_cancellation() {
    let (url, state) = http_fixture().await;
    let toolset = McpToolset::connect([McpServerConfig::http("web", &url)
        .with_header("Authorization", "Bearer test")
        .with_tool_timeout(Duration::from_millis(300))])
    .await
    .unwrap();
    assert_eq!(toolset.servers()[0].1, ServerState::Running { tools: 11 });
    let tools = toolset.tools::<Deps>().await.unwrap();
    mapping_checks(&tools, "mcp__web__").await;

    let err = call(&tools, "mcp__web__sleep", json!({"ms": 30_000}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::Timeout);
    assert!(wait_for(|| state.cancelled.lock().unwrap().len() == 1).await);
    let fut = call(&tools, "mcp__web__sleep", json!({"ms": 30_000}));
    assert!(
        tokio::time::timeout(Duration::from_millis(100), fut)
            .await
            .is_err()
    );
    assert!(wait_for(|| state.cancelled.lock().unwrap().len() == 2).await);

    let out = call(
        &tools,
        "mcp__web__progress",
        json!({"steps": 6, "delay_ms": 150}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "done after 6 steps");

    // list_changed over HTTP.
    call(&tools, "mcp__web__add_tool", json!({})).await.unwrap();
    assert!(wait_for(|| toolset.tools_changed()).await);
    toolset.refresh().await.unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    assert!(tools.iter().any(|t| t.name() == "mcp__web__extra"));
}

/// The names of the tools a Chat Completions request offered.
fn offered(request: &agentloop_testkit::RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_running_agent_sees_a_tool_announced_by_list_changed_at_its_next_model_call() {
    let (url, _state) = http_fixture().await;
    let toolset = Arc::new(
        McpToolset::connect([McpServerConfig::http("web", &url)])
            .await
            .unwrap(),
    );
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [{"id": "c1", "name": "mcp__web__add_tool", "arguments": {}}]},
            {"tool_calls": [{"id": "c2", "name": "mcp__web__extra", "arguments": {}}]},
            {"text": "the new tool works"}
        ]}))
        .unwrap(),
    );
    let model = mock_model(&server);
    let agent = AgentLoop::new(AgentLoopConfig::default(), model).with_tool_source(toolset.clone());
    // The source's tools are not the agent's own.
    assert!(agent.registry().is_empty());
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    assert_eq!(out.stop, RunStop::Done);
    assert!(server.violations().is_empty(), "{:?}", server.violations());

    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = offered(&requests[0]);
    assert!(
        first.contains(&"mcp__web__add_tool".to_owned()),
        "{first:?}"
    );
    assert!(!first.contains(&"mcp__web__extra".to_owned()), "{first:?}");
    for later in &requests[1..] {
        let names = offered(later);
        assert!(names.contains(&"mcp__web__extra".to_owned()), "{names:?}");
        assert_eq!(names.len(), first.len() + 1, "{names:?}");
    }
    let results: Vec<_> = out
        .context
        .iter()
        .filter_map(Message::tool_result_part)
        .cloned()
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].content, "added");
    assert!(!results[1].is_error, "{}", results[1].content);
    assert_eq!(results[1].content, "extra works");
    assert!(
        !toolset.tools_changed(),
        "the change was consumed by the agent"
    );
}

#[tokio::test]
async fn an_expired_http_session_is_reinitialised_and_the_call_succeeds() {
    use rmcp::transport::streamable_http_server::session::SessionManager;
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

    let sessions = Arc::new(LocalSessionManager::default());
    let (url, _state) = http_fixture_with(sessions.clone()).await;
    let events = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = events.clone();
    let toolset = McpToolset::connect_with_events(
        [McpServerConfig::http("web", &url)],
        Some(Arc::new(move |e: &agentloop_mcp::McpEvent| {
            seen.lock().unwrap().push(e.clone())
        })),
    )
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let echo = |text: &'static str| call(&tools, "mcp__web__echo", json!({"text": text}));
    assert_eq!(echo("before").await.unwrap().content, "before");
    let old: Vec<_> = sessions.sessions.read().await.keys().cloned().collect();
    assert_eq!(old.len(), 1);

    // The server drops the session: requests carrying its Mcp-Session-Id now get 404.
    sessions.close_session(&old[0]).await.unwrap();
    assert!(sessions.sessions.read().await.is_empty());

    let out = echo("after").await;
    assert_eq!(out.unwrap().content, "after", "the call after the expiry");
    let now: Vec<_> = sessions.sessions.read().await.keys().cloned().collect();
    assert_eq!(now.len(), 1, "a new session was initialised");
    assert_ne!(now[0], old[0]);
    assert_eq!(toolset.servers()[0].1, ServerState::Running { tools: 11 });
    // Re-initialised in place: the server was never reported down or restarted.
    let events = events.lock().unwrap().clone();
    assert!(
        events
            .iter()
            .all(|e| matches!(e, agentloop_mcp::McpEvent::Started { .. })),
        "{events:?}"
    );
}

#[tokio::test]
async fn an_unreachable_http_server_is_down_not_fatal() {
    // Bind then drop a listener: nothing listens on that port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let toolset = McpToolset::connect([McpServerConfig::http(
        "gone",
        format!("http://127.0.0.1:{port}/mcp"),
    )
    .with_startup_timeout(Duration::from_secs(5))])
    .await
    .unwrap();
    assert!(matches!(toolset.servers()[0].1, ServerState::Down(_)));
    assert!(toolset.tools::<Deps>().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_whole_agent_run_calls_mcp_tools_in_parallel_with_builtin_ones() {
    let (url, _state) = http_fixture().await;
    let toolset = McpToolset::connect([McpServerConfig::http("web", &url), stdio("fx", &[])])
        .await
        .unwrap();
    let mut tools = toolset.tools::<Deps>().await.unwrap();
    tools.push(
        ToolSpec::<Deps>::builder("local_upper", "Upper-case text.")
            .handler(|_c: ToolContext<Deps>, a: Value| async move {
                a["text"].as_str().unwrap_or_default().to_uppercase()
            })
            .build()
            .unwrap(),
    );
    let server = MockServer::start(
        Script::from_value(json!({"turns": [
            {"tool_calls": [
                {"id": "c1", "name": "mcp__web__echo", "arguments": {"text": "over http"}},
                {"id": "c2", "name": "mcp__fx__echo", "arguments": {"text": "over stdio"}},
                {"id": "c3", "name": "local_upper", "arguments": {"text": "built in"}},
                {"id": "c4", "name": "mcp__web__image", "arguments": {}},
                {"id": "c5", "name": "mcp__fx__fail", "arguments": {}}
            ]},
            {"text": "all done"}
        ]}))
        .unwrap(),
    );
    let model = mock_model(&server);
    let agent = AgentLoop::new(AgentLoopConfig::default(), model)
        .with_tools(tools)
        .unwrap();
    let out = agent.run(vec![Message::user("go")], vec![]).await.unwrap();
    assert_eq!(out.stop, RunStop::Done);
    assert!(server.violations().is_empty(), "{:?}", server.violations());
    let results: Vec<_> = out
        .context
        .iter()
        .filter(|m| m.role == Role::ToolResult)
        .flat_map(|m| m.content.iter())
        .filter_map(|p| match p {
            Part::ToolResult(r) => Some(r.clone()),
            _ => None,
        })
        .collect();
    let ids: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(
        ids,
        ["c1", "c2", "c3", "c4", "c5"],
        "every call answered once, in order"
    );
    assert_eq!(results[0].content, "over http");
    assert_eq!(results[1].content, "over stdio");
    assert_eq!(results[2].content, "BUILT IN");
    assert_eq!(results[3].images.len(), 1);
    assert_eq!(results[3].images[0].media_type, "image/png");
    assert!(results[4].is_error);
    assert_eq!(out.final_text(), "all done");
}

#[tokio::test]
async fn mcp_tools_follow_the_workspace_approval_policy_by_annotation() {
    use agentloop::builtin::{ApprovalPolicy, Workspace, WorkspaceDeps};
    use agentloop::tooling::{Approval, ToolDeps};
    use agentloop::transcript::ToolCallPart;
    let toolset =
        McpToolset::connect([stdio("fx", &[]).with_enabled_tools(["echo", "delete_all"])])
            .await
            .unwrap();
    toolset.tools::<WorkspaceDeps>().await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let deps = |policy| {
        WorkspaceDeps::new(Workspace::new(dir.path()).unwrap(), policy)
            .with_tool_classifier(toolset.approval_classifier())
    };
    let echo = ToolCallPart::new("1", "mcp__fx__echo", json!({"text": "x"}));
    let delete = ToolCallPart::new("2", "mcp__fx__delete_all", json!({}));
    // Read-only: allowed under every policy; destructive: like write_file.
    for policy in [
        ApprovalPolicy::Never,
        ApprovalPolicy::Mutating,
        ApprovalPolicy::Always,
    ] {
        assert_eq!(deps(policy).before_tool(&echo).await, Approval::Allow);
    }
    assert!(matches!(
        deps(ApprovalPolicy::Never).before_tool(&delete).await,
        Approval::Deny(_)
    ));
    assert!(matches!(
        deps(ApprovalPolicy::Mutating).before_tool(&delete).await,
        Approval::Deny(_)
    ));
    let asked = deps(ApprovalPolicy::Mutating).with_asker(|_| Approval::Allow);
    assert_eq!(asked.before_tool(&delete).await, Approval::Allow);
    assert_eq!(
        deps(ApprovalPolicy::Always).before_tool(&delete).await,
        Approval::Allow
    );
}

#[tokio::test]
async fn the_builtin_tools_served_over_mcp_keep_confinement_and_policy() {
    use agentloop::builtin::{ApprovalPolicy, Workspace};
    use agentloop_mcp::BuiltinToolsServer;
    use rmcp::ServiceExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hello.txt"), "hello from the workspace\n").unwrap();
    for (policy, write_ok) in [
        (ApprovalPolicy::Mutating, false),
        (ApprovalPolicy::Always, true),
    ] {
        let server = BuiltinToolsServer::new(Workspace::new(dir.path()).unwrap(), policy).unwrap();
        let (a, b) = tokio::io::duplex(1 << 16);
        tokio::spawn(async move {
            if let Ok(s) = server.serve(a).await {
                let _ = s.waiting().await;
            }
        });
        let client = ().serve(b).await.unwrap();
        let tools = client.list_all_tools().await.unwrap();
        let names: HashSet<String> = tools.iter().map(|t| t.name.to_string()).collect();
        assert!(
            names.contains("read_file") && names.contains("shell"),
            "{names:?}"
        );
        let read_only = |n: &str| {
            tools
                .iter()
                .find(|t| t.name == n)
                .unwrap()
                .annotations
                .as_ref()
                .unwrap()
                .read_only_hint
        };
        assert_eq!(read_only("read_file"), Some(true));
        assert_eq!(read_only("write_file"), Some(false));

        let call = |name: &str, args: Value| {
            let mut p = rmcp::model::CallToolRequestParams::new(name.to_owned());
            p.arguments = args.as_object().cloned();
            client.call_tool(p)
        };
        let r = agentloop_mcp::map_result(
            call("read_file", json!({"path": "hello.txt"}))
                .await
                .unwrap(),
        );
        assert!(r.unwrap().content.contains("hello from the workspace"));
        // Confinement: paths outside the workspace are refused.
        let r = agentloop_mcp::map_result(
            call("read_file", json!({"path": "/etc/passwd"}))
                .await
                .unwrap(),
        );
        assert!(r.is_err());
        // Schema validation like every tool.
        let r = agentloop_mcp::map_result(call("read_file", json!({})).await.unwrap());
        assert!(r.is_err());
        // Mutating calls follow the policy flag (no terminal to ask on).
        let r = agentloop_mcp::map_result(
            call("write_file", json!({"path": "new.txt", "content": "x"}))
                .await
                .unwrap(),
        );
        assert_eq!(r.is_ok(), write_ok, "{policy:?}: {r:?}");
        assert_eq!(dir.path().join("new.txt").exists(), write_ok);
        let _ = std::fs::remove_file(dir.path().join("new.txt"));
    }
}
