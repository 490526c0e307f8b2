//! Typed output over HTTP against the testkit mock, for each provider wire (OpenAI Chat, OpenAI
//! Responses, Anthropic): the native request bodies (snapshots), the final-result tool with
//! another tool called first, invalid output → repair → success, retries exhausted → a typed
//! error with the raw output and the completed messages, union outputs, and partial output in
//! `MessageUpdate` events while the reply streams.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunStop};
use agentloop::model::Model;
use agentloop::output::{Output, OutputError, OutputStrategy};
use agentloop::providers::{Anthropic, OpenAiChat, OpenAiResponses, ProviderConfig, RetryPolicy};
use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Role};
use agentloop_testkit::{MockServer, RecordedRequest, Script};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

#[derive(Clone, Copy, Debug, PartialEq)]
enum Wire {
    Chat,
    Responses,
    Anthropic,
}

const WIRES: [Wire; 3] = [Wire::Chat, Wire::Responses, Wire::Anthropic];

/// A ticket, as an application would define it.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
struct Ticket {
    /// One-line summary.
    title: String,
    /// 1 (urgent) to 5.
    priority: u8,
    /// Free-form labels.
    tags: Vec<String>,
    /// Who should handle it, if known.
    assignee: Option<String>,
}

/// A union output: either an answer or a question back.
#[derive(Debug, Deserialize, JsonSchema, PartialEq)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum Decision {
    /// The question can be answered.
    Answer { text: String },
    /// More information is needed first.
    NeedsMoreInfo { question: String },
}

fn ticket_json() -> Value {
    json!({"title": "Disk full on build host", "priority": 1, "tags": ["infra", "disk"],
           "assignee": null})
}

fn ticket() -> Ticket {
    Ticket {
        title: "Disk full on build host".into(),
        priority: 1,
        tags: vec!["infra".into(), "disk".into()],
        assignee: None,
    }
}

/// The model name per wire; Anthropic's is one with native structured output.
fn model_name(wire: Wire) -> &'static str {
    match wire {
        Wire::Chat => "gpt-4o-mini",
        Wire::Responses => "gpt-5-mini",
        Wire::Anthropic => "claude-sonnet-4-5",
    }
}

fn model(wire: Wire, server: &MockServer) -> Arc<dyn Model> {
    let config = |base: String| {
        ProviderConfig::new(base)
            .api_key("test")
            .retry(RetryPolicy::none())
            .idle_timeout(Duration::from_secs(10))
    };
    match wire {
        Wire::Chat => Arc::new(OpenAiChat::new(config(server.openai_base_url()))),
        Wire::Responses => Arc::new(OpenAiResponses::new(config(server.openai_base_url()))),
        Wire::Anthropic => Arc::new(Anthropic::new(config(server.base_url()))),
    }
}

fn agent(wire: Wire, server: &MockServer) -> AgentLoop {
    let config = AgentLoopConfig {
        model: Some(model_name(wire).into()),
        ..AgentLoopConfig::default()
    };
    AgentLoop::new(config, model(wire, server))
}

fn server(turns: Value) -> MockServer {
    MockServer::start(Script::from_value(json!({ "turns": turns })).unwrap())
}

fn lookup() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("lookup", "Look a host up.")
        .handler(|_c: ToolContext<Deps>, a: Value| async move {
            format!("{} is the build host", a["host"].as_str().unwrap_or("?"))
        })
        .build()
        .unwrap()
}

/// The tool names a request offered, on any wire.
fn tool_names(request: &RecordedRequest) -> Vec<String> {
    request.body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| {
                    t["name"]
                        .as_str()
                        .or_else(|| t["function"]["name"].as_str())
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The native-output field of a request body, per wire.
fn native_field(wire: Wire, body: &Value) -> Value {
    match wire {
        Wire::Chat => body["response_format"].clone(),
        Wire::Responses => body["text"].clone(),
        Wire::Anthropic => body["output_config"].clone(),
    }
}

#[tokio::test]
async fn native_request_bodies_per_provider() {
    for wire in WIRES {
        let server = server(json!([{"text": ticket_json().to_string(), "chunk_size": 7}]));
        let agent = agent(wire, &server);
        let typed = agent
            .run_typed::<Ticket>(vec![Message::user("File a ticket: disk full")], vec![])
            .await
            .unwrap();
        assert_eq!(typed.strategy, OutputStrategy::Native, "{wire:?}");
        assert_eq!(typed.value, ticket(), "{wire:?}");
        assert_eq!(typed.json, ticket_json());
        assert_eq!(typed.outcome.stop, RunStop::Done);
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        // Native output adds no tool.
        assert!(tool_names(&requests[0]).is_empty(), "{wire:?}");
        insta::assert_json_snapshot!(
            format!("native_{wire:?}").to_lowercase(),
            native_field(wire, &requests[0].body)
        );
    }
}

#[tokio::test]
async fn a_schema_that_strict_mode_cannot_express_goes_out_non_strict() {
    // `note` is optional and not nullable: making it required would change the schema.
    let schema = json!({"type": "object", "properties": {
        "ok": {"type": "boolean"}, "note": {"type": "string"}}, "required": ["ok"]});
    let output = Output::from_schema("verdict", schema.clone()).unwrap();
    for wire in [Wire::Chat, Wire::Responses] {
        let server = server(json!([{"text": "{\"ok\": true}"}]));
        let typed = agent(wire, &server)
            .run_output(&output, vec![Message::user("ok?")], vec![])
            .await
            .unwrap();
        assert_eq!(typed.value, json!({"ok": true}));
        let field = native_field(wire, &server.requests()[0].body);
        let format = if wire == Wire::Chat {
            &field["json_schema"]
        } else {
            &field["format"]
        };
        assert_eq!(format["strict"], json!(false), "{wire:?}");
        assert_eq!(format["schema"], schema, "sent unchanged: {wire:?}");
    }
    // On Anthropic the same schema falls back to the final-result tool.
    let server = server(json!([{"tool_calls": [{"id": "f", "name": "final_result",
                                                 "arguments": {"ok": false}}]}]));
    let agent = agent(Wire::Anthropic, &server);
    assert_eq!(
        agent.output_strategy(&output).unwrap(),
        OutputStrategy::Tool
    );
    let typed = agent
        .run_output(&output, vec![Message::user("ok?")], vec![])
        .await
        .unwrap();
    assert_eq!(typed.value, json!({"ok": false}));
    assert!(server.requests()[0].body.get("output_config").is_none());
}

#[tokio::test]
async fn final_result_tool_after_another_tool() {
    for wire in WIRES {
        let server = server(json!([
            {"text": "Let me check the host.",
             "tool_calls": [{"id": "call_1", "name": "lookup", "arguments": {"host": "b1"}}]},
            {"tool_calls": [{"id": "call_2", "name": "final_result", "arguments": ticket_json(),
                             "arg_chunks": 4}]}
        ]));
        let agent = agent(wire, &server).with_tools([lookup()]).unwrap();
        let output = Output::<Ticket>::of().strategy(OutputStrategy::Tool);
        let typed = agent
            .run_output(&output, vec![Message::user("File a ticket")], vec![])
            .await
            .unwrap();
        assert_eq!(typed.value, ticket(), "{wire:?}");
        assert_eq!(typed.strategy, OutputStrategy::Tool);
        assert_eq!(typed.outcome.turns, 2);
        // prompt, call, lookup result, final call, final result: every call has one result.
        let new = typed.outcome.new_messages();
        assert_eq!(new.len(), 5, "{wire:?}");
        assert_eq!(
            new[2].tool_result_part().unwrap().content,
            "b1 is the build host"
        );
        let last = new[4].tool_result_part().unwrap();
        assert_eq!(last.tool_name, "final_result");
        assert!(!last.is_error);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(
            tool_names(&requests[0]),
            ["lookup", "final_result"],
            "{wire:?}"
        );
        assert!(native_field(wire, &requests[0].body).is_null());
        assert!(server.violations().is_empty(), "{:?}", server.violations());
    }
}

#[tokio::test]
async fn invalid_output_is_repaired() {
    for wire in WIRES {
        let server = server(json!([
            {"text": "{\"title\": \"Disk full\", \"priority\": \"high\"}"},
            {"text": format!("Here it is:\n```json\n{}\n```", ticket_json())}
        ]));
        let typed = agent(wire, &server)
            .run_typed::<Ticket>(vec![Message::user("File a ticket")], vec![])
            .await
            .unwrap();
        assert_eq!(typed.value, ticket(), "{wire:?}");
        assert_eq!(typed.outcome.turns, 2);
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        // The second request tells the model what was wrong, path by path.
        let second = requests[1].body.to_string();
        assert!(second.contains("not a valid output"), "{wire:?}: {second}");
        assert!(second.contains("$.priority"), "{wire:?}: {second}");
        assert!(second.contains("tags"), "{wire:?}: {second}");
        // The repair request still asks for native output.
        assert!(!native_field(wire, &requests[1].body).is_null());
    }
}

#[tokio::test]
async fn invalid_final_tool_call_is_repaired() {
    let server = server(json!([
        {"tool_calls": [{"id": "c1", "name": "final_result", "arguments": {"title": 3}}]},
        {"tool_calls": [{"id": "c2", "name": "final_result", "arguments": ticket_json()}]}
    ]));
    let output = Output::<Ticket>::of().strategy(OutputStrategy::Tool);
    let typed = agent(Wire::Chat, &server)
        .run_output(&output, vec![Message::user("File a ticket")], vec![])
        .await
        .unwrap();
    assert_eq!(typed.value, ticket());
    let first_result = typed.outcome.new_messages()[2].tool_result_part().unwrap();
    assert!(first_result.is_error);
    assert!(
        first_result.content.contains("$.title"),
        "{}",
        first_result.content
    );
    assert!(server.violations().is_empty());
}

#[tokio::test]
async fn retries_exhausted_is_a_typed_error_with_raw_output_and_messages() {
    for wire in WIRES {
        let server = server(json!([
            {"text": "I think the priority is high."},
            {"text": "{\"title\": \"Disk\"}"},
            {"text": "{\"title\": \"Disk\", \"priority\": 9000}"}
        ]));
        let output = Output::<Ticket>::of().retries(2);
        let err = agent(wire, &server)
            .run_output(&output, vec![Message::user("File a ticket")], vec![])
            .await
            .unwrap_err();
        assert!(err.is_invalid_output(), "{wire:?}: {err}");
        let OutputError::Invalid {
            attempts,
            raw,
            violations,
            stop,
            completed,
        } = &err
        else {
            panic!("{err:?}");
        };
        assert_eq!(*attempts, 3);
        assert_eq!(*stop, RunStop::OutputInvalid { attempts: 3 });
        assert_eq!(
            raw.as_deref(),
            Some("{\"title\": \"Disk\", \"priority\": 9000}")
        );
        assert!(
            violations.iter().any(|v| v.starts_with("$.priority")),
            "{violations:?}"
        );
        // prompt + 3 answers + 2 repair requests, all kept.
        assert_eq!(completed.len(), 6, "{wire:?}");
        assert_eq!(completed[0].text(), "File a ticket");
        assert_eq!(completed[5].role, Role::Assistant);
        assert_eq!(agentloop::agent::completed_messages(&err).len(), 6);
        assert!(err.to_string().contains("$.priority"), "{err}");
        assert_eq!(
            server.requests().len(),
            3,
            "no request after the last attempt"
        );
    }
}

#[tokio::test]
async fn final_tool_never_called_exhausts_the_retries() {
    let server = server(json!([{"text": "The ticket is about a disk."}]));
    let server_script_repeat = server; // one turn: the repair request would exhaust the script
    let output = Output::<Ticket>::of()
        .strategy(OutputStrategy::Tool)
        .retries(0);
    let err = agent(Wire::Anthropic, &server_script_repeat)
        .run_output(&output, vec![Message::user("File a ticket")], vec![])
        .await
        .unwrap_err();
    assert_eq!(err.raw_output(), Some("The ticket is about a disk."));
    assert_eq!(err.violations(), ["$: no final-result tool was called"]);
}

#[tokio::test]
async fn union_outputs_as_several_final_tools() {
    for wire in WIRES {
        let server = server(json!([
            {"tool_calls": [{"id": "u1", "name": "final_result_needs_more_info",
                             "arguments": {"kind": "needs_more_info", "question": "Which host?"}}]}
        ]));
        let output = Output::<Decision>::of().strategy(OutputStrategy::Tool);
        let typed = agent(wire, &server)
            .run_output(&output, vec![Message::user("Fix the disk")], vec![])
            .await
            .unwrap();
        assert_eq!(
            typed.value,
            Decision::NeedsMoreInfo {
                question: "Which host?".into()
            }
        );
        assert_eq!(
            tool_names(&server.requests()[0]),
            ["final_result_answer", "final_result_needs_more_info"],
            "{wire:?}"
        );
    }
}

#[tokio::test]
async fn union_outputs_natively_as_a_wrapped_any_of() {
    let server = server(json!([
        {"text": "{\"response\": {\"kind\": \"answer\", \"text\": \"Delete the logs.\"}}"}
    ]));
    let typed = agent(Wire::Chat, &server)
        .run_typed::<Decision>(vec![Message::user("Fix the disk")], vec![])
        .await
        .unwrap();
    assert_eq!(
        typed.value,
        Decision::Answer {
            text: "Delete the logs.".into()
        }
    );
    assert_eq!(typed.json["kind"], "answer");
    let format = &server.requests()[0].body["response_format"]["json_schema"];
    assert_eq!(
        format["strict"],
        json!(true),
        "tagged branches are disjoint"
    );
    insta::assert_json_snapshot!("native_union_chat", format);
}

fn collect_outputs(agent: AgentLoop) -> (AgentLoop, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let agent = agent.with_emit(move |event| {
        if let AgentEvent::MessageUpdate {
            output: Some(output),
            ..
        } = event
        {
            sink.lock().unwrap().push(output.clone());
        }
    });
    (agent, seen)
}

#[tokio::test]
async fn partial_output_streams_in_message_updates() {
    for wire in WIRES {
        for strategy in [OutputStrategy::Native, OutputStrategy::Tool] {
            let turn = if strategy == OutputStrategy::Native {
                json!({"text": ticket_json().to_string(), "chunk_size": 6})
            } else {
                json!({"tool_calls": [{"id": "p1", "name": "final_result",
                                       "arguments": ticket_json(), "arg_chunks": 12}]})
            };
            let server = server(json!([turn]));
            let (agent, seen) = collect_outputs(agent(wire, &server));
            let output = Output::<Ticket>::of().strategy(strategy);
            let typed = agent
                .run_output(&output, vec![Message::user("File a ticket")], vec![])
                .await
                .unwrap();
            assert_eq!(typed.value, ticket());
            let seen = seen.lock().unwrap();
            assert!(seen.len() >= 3, "{wire:?} {strategy:?}: {seen:?}");
            // Snapshots grow (keys arrive in order: assignee, priority, tags, title), and the
            // last is the output.
            assert!(
                seen.iter()
                    .any(|v| v.get("priority").is_some() && v.get("title").is_none()),
                "{wire:?} {strategy:?}: {seen:?}"
            );
            assert_eq!(seen.last(), Some(&ticket_json()), "{wire:?} {strategy:?}");
        }
    }
}

#[tokio::test]
async fn prompted_output_puts_the_schema_in_the_system_prompt() {
    let server = server(json!([{"text": format!("Sure! {}", ticket_json())}]));
    let output = Output::<Ticket>::of().strategy(OutputStrategy::Prompted);
    let typed = agent(Wire::Chat, &server)
        .run_output(&output, vec![Message::user("File a ticket")], vec![])
        .await
        .unwrap();
    assert_eq!(typed.value, ticket());
    let body = &server.requests()[0].body;
    assert!(body.get("response_format").is_none());
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("single JSON value"), "{system}");
    assert!(system.contains("\"priority\""), "{system}");
}

#[tokio::test]
async fn other_calls_beside_a_valid_final_result_are_not_run_but_answered() {
    let server = server(json!([
        {"tool_calls": [
            {"id": "a", "name": "lookup", "arguments": {"host": "x"}},
            {"id": "b", "name": "final_result", "arguments": ticket_json()}
        ]}
    ]));
    let output = Output::<Ticket>::of().strategy(OutputStrategy::Tool);
    let typed = agent(Wire::Responses, &server)
        .with_tools([lookup()])
        .unwrap()
        .run_output(&output, vec![Message::user("File a ticket")], vec![])
        .await
        .unwrap();
    let new = typed.outcome.new_messages();
    assert_eq!(new.len(), 4);
    let skipped = new[2].tool_result_part().unwrap();
    assert_eq!(skipped.call_id, "a");
    assert!(skipped.is_error && skipped.content.contains("not run"));
    assert_eq!(new[3].tool_result_part().unwrap().call_id, "b");
}
