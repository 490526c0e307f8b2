//! Interop with the reference MCP servers (Node): `@modelcontextprotocol/server-everything`
//! 2026.8.31 over stdio and streamable HTTP, and `@modelcontextprotocol/server-filesystem`
//! 2026.8.31 on a temp dir. Installed by `.ci/setup-mcp-servers` into
//! `${AGENTLOOP_CI_CACHE:-$HOME/.cache/agentloop-ci}/mcp` (or `AGENTLOOP_MCP_SERVERS_DIR`);
//! absent → the suite says so in one line and skips (a failure in CI).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agentloop::tooling::{Deps, ToolSpec};
use agentloop_mcp::{McpServerConfig, McpToolset};
use serde_json::{Value, json};
use support::running_tools;

const SUITE: &str = "MCP interop with the reference Node servers";

/// Where the pinned servers are installed, when they and node are (else the suite is reported
/// skipped).
fn servers_dir() -> Option<PathBuf> {
    agentloop_testkit::external::node_package_dir_or_skip(
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        SUITE,
    )
}

fn everything(dir: &std::path::Path) -> String {
    dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js")
        .to_string_lossy()
        .into_owned()
}

/// server-everything over stdio, as `everything`.
fn everything_stdio(dir: &std::path::Path) -> McpServerConfig {
    McpServerConfig::stdio("everything", "node", [everything(dir), "stdio".into()])
}

async fn call(tools: &[ToolSpec<Deps>], name: &str, args: Value) -> agentloop::tooling::ToolOutput {
    let spec = tools
        .iter()
        .find(|t| t.name() == name)
        .unwrap_or_else(|| panic!("no {name}"));
    spec.call(Arc::new(Deps::new()), args)
        .await
        .unwrap_or_else(|e| panic!("{name}: {e}"))
}

async fn everything_checks(toolset: &McpToolset, p: &str) {
    let tools = running_tools(toolset).await;
    let out = call(&tools, &format!("{p}echo"), json!({"message": "hi there"})).await;
    assert!(out.content.contains("hi there"), "{}", out.content);
    let out = call(&tools, &format!("{p}get-sum"), json!({"a": 2, "b": 40})).await;
    assert!(out.content.contains("42"), "{}", out.content);
    let out = call(&tools, &format!("{p}get-tiny-image"), json!({})).await;
    assert_eq!(out.images.len(), 1, "{out:?}");
    assert_eq!(out.images[0].media_type, "image/png");
    let out = call(
        &tools,
        &format!("{p}get-structured-content"),
        json!({"location": "Chicago"}),
    )
    .await;
    assert!(out.content.contains("temperature"), "{}", out.content);
    // Progress notifications restart the 1.5 s call timeout over a 3 s operation.
    let out = call(
        &tools,
        &format!("{p}trigger-long-running-operation"),
        json!({"duration": 3, "steps": 6}),
    )
    .await;
    assert!(
        out.content.to_lowercase().contains("complete"),
        "{}",
        out.content
    );
    // Bad arguments are caught by the server's own schema, before the call.
    let spec = tools
        .iter()
        .find(|t| t.name() == format!("{p}get-sum"))
        .unwrap();
    assert!(
        spec.call(Arc::new(Deps::new()), json!({"a": "x"}))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let toolset =
        McpToolset::connect(
            [everything_stdio(&dir).with_tool_timeout(Duration::from_millis(1500))],
        )
        .await
        .unwrap();
    everything_checks(&toolset, "mcp__everything__").await;
}

#[tokio::test]
async fn server_everything_over_streamable_http() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = tokio::process::Command::new("node")
        .args([everything(&dir), "streamableHttp".into()])
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(up, "server-everything did not listen on {port}");
    let toolset = McpToolset::connect([
        McpServerConfig::http("web", url).with_tool_timeout(Duration::from_millis(1500))
    ])
    .await
    .unwrap();
    everything_checks(&toolset, "mcp__web__").await;
    toolset.shutdown().await;
    let _ = child.kill().await;
}

#[tokio::test]
async fn server_filesystem_on_a_temp_dir() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    std::fs::write(root_path.join("a.txt"), "alpha\n").unwrap();
    let script = dir.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    let toolset = McpToolset::connect([McpServerConfig::stdio(
        "fs",
        "node",
        [
            script.to_string_lossy().into_owned(),
            root_path.to_string_lossy().into_owned(),
        ],
    )])
    .await
    .unwrap();
    let tools = running_tools(&toolset).await;
    let names: Vec<&str> = tools.iter().map(|t| t.name()).collect();
    assert!(names.contains(&"mcp__fs__list_directory"), "{names:?}");
    let read = if names.contains(&"mcp__fs__read_text_file") {
        "mcp__fs__read_text_file"
    } else {
        "mcp__fs__read_file"
    };
    let out = call(&tools, read, json!({"path": root_path.join("a.txt")})).await;
    assert!(out.content.contains("alpha"), "{}", out.content);
    call(
        &tools,
        "mcp__fs__write_file",
        json!({"path": root_path.join("b.txt"), "content": "beta"}),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(root_path.join("b.txt")).unwrap(),
        "beta"
    );
    let out = call(
        &tools,
        "mcp__fs__list_directory",
        json!({"path": root_path}),
    )
    .await;
    assert!(
        out.content.contains("a.txt") && out.content.contains("b.txt"),
        "{}",
        out.content
    );
    // Outside the allowed directory: an error result, not a crash.
    let spec = tools.iter().find(|t| t.name() == read).unwrap();
    assert!(
        spec.call(Arc::new(Deps::new()), json!({"path": "/etc/hostname"}))
            .await
            .is_err()
    );
    // read-only annotations map to approval.
    assert_eq!(toolset.needs_approval("mcp__fs__write_file"), Some(true));
}

#[tokio::test]
async fn resources_of_server_everything_are_listed_and_read_through_the_model_tools() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let toolset = McpToolset::connect([
        everything_stdio(&dir),
        // A second server, without resources, is not offered to the resource tools.
        McpServerConfig::stdio(
            "plain",
            env!("CARGO_BIN_EXE_agentloop-mcp-test-server"),
            Vec::<String>::new(),
        ),
    ])
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let list = tools
        .iter()
        .find(|t| t.name() == agentloop_mcp::LIST_RESOURCES_TOOL)
        .expect("mcp_list_resources offered");
    assert!(list.parallel_safe());
    assert_eq!(
        toolset.needs_approval(agentloop_mcp::READ_RESOURCE_TOOL),
        Some(false)
    );

    let listed = call(&tools, "mcp_list_resources", json!({})).await.content;
    assert!(
        listed.contains("demo://resource/static/document/architecture.md"),
        "{listed}"
    );
    assert!(listed.contains("(text/markdown)"), "{listed}");
    assert!(
        listed.contains("demo://resource/dynamic/text/{resourceId}"),
        "{listed}"
    );
    assert!(!listed.contains("`plain`"), "{listed}");
    let one = call(
        &tools,
        "mcp_list_resources",
        json!({"server": "everything"}),
    )
    .await;
    assert_eq!(one.content, listed);

    // A static document: exactly the file's text, headed by its URI.
    let doc = std::fs::read_to_string(
        dir.join("node_modules/@modelcontextprotocol/server-everything/dist/docs/architecture.md"),
    )
    .unwrap();
    let uri = "demo://resource/static/document/architecture.md";
    let read = call(
        &tools,
        "mcp_read_resource",
        json!({"server": "everything", "uri": uri}),
    )
    .await;
    assert_eq!(read.content, format!("[resource {uri}]\n{doc}"));

    // A template filled in, text and blob.
    let text = call(
        &tools,
        "mcp_read_resource",
        json!({"server": "everything", "uri": "demo://resource/dynamic/text/7"}),
    )
    .await;
    assert!(
        text.content
            .starts_with("[resource demo://resource/dynamic/text/7]\n"),
        "{}",
        text.content
    );
    let blob = call(
        &tools,
        "mcp_read_resource",
        json!({"server": "everything", "uri": "demo://resource/dynamic/blob/7"}),
    )
    .await;
    assert!(
        blob.content.contains("bytes of base64 not shown"),
        "{}",
        blob.content
    );

    // Errors are tool errors naming what failed.
    let spec = tools
        .iter()
        .find(|t| t.name() == "mcp_read_resource")
        .unwrap();
    let err = spec
        .call(
            Arc::new(Deps::new()),
            json!({"server": "everything", "uri": "demo://nope/1"}),
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("everything") && err.to_string().contains("demo://nope/1"),
        "{err}"
    );
    let err = spec
        .call(
            Arc::new(Deps::new()),
            json!({"server": "plain", "uri": "x://y"}),
        )
        .await
        .unwrap_err();
    // The schema names the servers with resources: a server without is refused up front.
    assert!(
        err.to_string()
            .contains("\"plain\" is not one of \"everything\""),
        "{err}"
    );
    toolset.shutdown().await;
}

#[tokio::test]
async fn prompts_of_server_everything_expand_as_slash_commands() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let toolset = McpToolset::connect([everything_stdio(&dir)]).await.unwrap();
    let commands = toolset.prompt_commands().await;
    let args = commands
        .iter()
        .find(|c| c.command == "mcp__everything__args-prompt")
        .unwrap_or_else(|| panic!("{commands:?}"));
    assert_eq!(args.usage(), "/mcp__everything__args-prompt <city> [state]");

    let expand = |line: &'static str| {
        let toolset = &toolset;
        async move { toolset.expand_prompt_command(line).await }
    };
    assert_eq!(
        expand("/mcp__everything__simple-prompt").await.unwrap(),
        Some("This is a simple prompt without arguments.".into())
    );
    // By name and by position, quoted values keep their spaces.
    for line in [
        "/mcp__everything__args-prompt Austin state=Texas",
        "/mcp__everything__args-prompt state=Texas Austin",
        "/mcp__everything__args-prompt Austin Texas",
    ] {
        let text = expand(line).await.unwrap().unwrap();
        assert!(text.contains("Austin, Texas"), "{line}: {text}");
    }
    let text = expand("/mcp__everything__args-prompt \"San Antonio\"")
        .await
        .unwrap()
        .unwrap();
    assert!(text.contains("San Antonio"), "{text}");
    // An embedded resource comes with its URI and text.
    let text = expand("/mcp__everything__resource-prompt Text 3")
        .await
        .unwrap()
        .unwrap();
    assert!(
        text.contains("[resource demo://resource/dynamic/text/3]"),
        "{text}"
    );

    // Not a prompt command: left alone.
    assert_eq!(expand("plain words /mcp__x").await.unwrap(), None);
    let err = expand("/mcp__everything__args-prompt").await.unwrap_err();
    assert!(err.is_prompt());
    assert!(
        err.to_string().contains(
            "missing required argument(s) city; usage: /mcp__everything__args-prompt <city> [state]"
        ),
        "{err}"
    );
    let err = expand("/mcp__everything__nope").await.unwrap_err();
    assert!(
        err.to_string().contains("available: ")
            && err.to_string().contains("/mcp__everything__simple-prompt"),
        "{err}"
    );
    toolset.shutdown().await;
}

#[tokio::test]
async fn elicitation_is_answered_at_once_never_waited_for() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let connect = |mode| {
        let dir = dir.clone();
        async move {
            McpToolset::connect([everything_stdio(&dir).with_elicitation(mode)])
                .await
                .unwrap()
        }
    };
    // Declining (the default) announces no elicitation: the server hides its eliciting tool.
    let toolset = connect(agentloop_mcp::ElicitationMode::Decline).await;
    let tools = toolset.tools::<Deps>().await.unwrap();
    assert!(
        !tools
            .iter()
            .any(|t| t.name() == "mcp__everything__trigger-elicitation-request")
    );
    toolset.shutdown().await;
    // With defaults: the form's required `name` has no default, so the answer is a decline,
    // returned at once (the server would wait ten minutes for a person).
    let toolset = connect(agentloop_mcp::ElicitationMode::Defaults).await;
    let tools = toolset.tools::<Deps>().await.unwrap();
    let out = call(
        &tools,
        "mcp__everything__trigger-elicitation-request",
        json!({}),
    )
    .await;
    assert!(out.content.contains("declined"), "{}", out.content);
    toolset.shutdown().await;
}

/// A person answering a form may take longer than the tool timeout: the call's idle time is
/// stopped while they are asked. The elicitor here takes twice the timeout, then accepts; the
/// form reaches it in the server's property order.
#[tokio::test]
async fn a_call_waits_for_the_person_answering_its_form_past_the_tool_timeout() {
    let Some(dir) = servers_dir() else {
        return;
    };
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let elicitor = agentloop_mcp::Elicitor::new(move |request| {
        let record = record.clone();
        Box::pin(async move {
            if let agentloop_mcp::ElicitationRequest::Form { order, .. } = &request {
                record.lock().unwrap().extend(order.iter().cloned());
            }
            tokio::time::sleep(Duration::from_millis(1600)).await;
            let mut content = serde_json::Map::new();
            content.insert("name".into(), json!("Ada"));
            agentloop_mcp::ElicitationAnswer::Accept(content)
        })
    });
    let toolset = McpToolset::connect([everything_stdio(&dir)
        .with_tool_timeout(Duration::from_millis(800))
        .with_elicitor(elicitor)])
    .await
    .unwrap();
    let tools = toolset.tools::<Deps>().await.unwrap();
    let out = call(
        &tools,
        "mcp__everything__trigger-elicitation-request",
        json!({}),
    )
    .await;
    assert!(out.content.contains("Name: Ada"), "{}", out.content);
    let order = seen.lock().unwrap().clone();
    assert_eq!(order.first().map(String::as_str), Some("name"), "{order:?}");
    assert_eq!(order.get(1).map(String::as_str), Some("check"), "{order:?}");
    toolset.shutdown().await;
}
