//! Deferred tools and local tool search (docs/ARCHITECTURE.md, "Tools and the executor"): deferred tools are hidden until a search
//! result loads them, unknown names are ignored with a note, and the BM25 search tool ranks the
//! deferred tools sensibly.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use agentloop::tool;
use agentloop::tooling::{
    Bm25Index, Deps, LoadedTools, Registry, RegistryError, TOOL_SEARCH_NAME, ToolErrorKind,
    bm25_tool_search, run_tools, search_result_names,
};
use agentloop::transcript::ToolCallPart;
use serde_json::json;

/// Read a text file from the workspace.
#[tool]
fn read_file(path: String) -> String {
    path
}

/// Send an email message to a recipient.
#[tool(deferred)]
fn send_email(to: String, body: String) -> String {
    format!("sent {} chars to {to}", body.len())
}

/// Create an invoice for a customer and return its number.
#[tool(deferred)]
fn create_invoice(customer: String, cents: u64) -> String {
    format!("invoice for {customer}: {cents}")
}

/// Look up the current weather forecast for a city.
#[tool(deferred)]
fn weather_forecast(city: String) -> String {
    format!("sunny in {city}")
}

/// List the calendar events of a day.
#[tool(deferred)]
fn calendar_events(day: String) -> String {
    format!("nothing on {day}")
}

fn registry() -> Registry<Deps> {
    let mut registry = Registry::new([
        read_file_tool(),
        send_email_tool(),
        create_invoice_tool(),
        weather_forecast_tool(),
        calendar_events_tool(),
    ])
    .unwrap();
    registry.add(bm25_tool_search(&registry, 3)).unwrap();
    registry
}

fn visible(registry: &Registry<Deps>, loaded: &LoadedTools) -> Vec<String> {
    registry
        .visible_schemas(loaded)
        .into_iter()
        .map(|s| s.name.clone())
        .collect()
}

async fn search(registry: &Registry<Deps>, query: &str) -> Vec<String> {
    let out = registry
        .tool_search()
        .unwrap()
        .call(Arc::new(Deps::new()), json!({"query": query}))
        .await
        .unwrap();
    search_result_names(&out.content).unwrap()
}

#[test]
fn deferred_tools_are_hidden_until_loaded() {
    let registry = registry();
    assert_eq!(
        registry.deferred_names(),
        [
            "send_email",
            "create_invoice",
            "weather_forecast",
            "calendar_events"
        ]
    );
    let mut loaded = LoadedTools::new();
    // The search tool itself is never a visible function tool: adapters declare search their way.
    assert_eq!(visible(&registry, &loaded), ["read_file"]);
    assert!(!registry.is_visible("send_email", &loaded));
    assert!(!registry.is_visible(TOOL_SEARCH_NAME, &loaded));

    let load = registry.load_from_search_result(&mut loaded, ["weather_forecast", "send_email"]);
    assert_eq!(load.loaded, ["weather_forecast", "send_email"]);
    assert!(load.unknown.is_empty() && load.note().is_none());
    // Registration order, whatever the order of the search result.
    assert_eq!(
        visible(&registry, &loaded),
        ["read_file", "send_email", "weather_forecast"]
    );
    assert_eq!(
        loaded.names().collect::<Vec<_>>(),
        ["send_email", "weather_forecast"]
    );

    // A later search adds to what is loaded.
    registry.load_from_search_result(&mut loaded, ["calendar_events"]);
    assert_eq!(visible(&registry, &loaded).len(), 4);
}

#[test]
fn unknown_names_are_ignored_with_a_note() {
    let registry = registry();
    let mut loaded = LoadedTools::new();
    let load = registry.load_from_search_result(
        &mut loaded,
        [
            "no_such_tool",
            "send_email",
            "read_file",
            TOOL_SEARCH_NAME,
            "send_email",
        ],
    );
    assert_eq!(load.loaded, ["send_email"]);
    assert_eq!(load.already_visible, ["read_file"]);
    assert_eq!(load.unknown, ["no_such_tool", TOOL_SEARCH_NAME]);
    assert_eq!(
        load.note().as_deref(),
        Some(
            "Ignored unknown tool names from the tool search result: \"no_such_tool\", \
             \"tool_search\"."
        )
    );
    assert_eq!(loaded.len(), 1);
    assert_eq!(visible(&registry, &loaded), ["read_file", "send_email"]);
}

#[tokio::test]
async fn bm25_search_ranks_the_deferred_tools() {
    let registry = registry();
    assert_eq!(search(&registry, "send an email").await[0], "send_email");
    assert_eq!(
        search(&registry, "invoice customer").await[0],
        "create_invoice"
    );
    assert_eq!(
        search(&registry, "what's the weather in Paris?").await[0],
        "weather_forecast"
    );
    assert_eq!(search(&registry, "calendar").await, ["calendar_events"]);
    // Plurals and camelCase match their singular, snake_case forms.
    assert_eq!(search(&registry, "Invoices").await, ["create_invoice"]);
    assert_eq!(search(&registry, "sendEmail").await[0], "send_email");
    // Nothing in common: nothing found. Non-deferred tools are never search results.
    assert!(search(&registry, "zebra").await.is_empty());
    assert!(search(&registry, "read file").await.is_empty());
}

#[tokio::test]
async fn search_then_load_then_call() {
    let registry = registry();
    let mut loaded = LoadedTools::new();
    let names = search(&registry, "email").await;
    let load = registry.load_from_search_result(&mut loaded, &names);
    assert_eq!(load.loaded, ["send_email"]);
    let results = run_tools(
        &[ToolCallPart::new(
            "c1",
            "send_email",
            json!({"to": "ada@example.com", "body": "hi"}),
        )],
        &registry,
        &Arc::new(Deps::new()),
        None,
    )
    .await;
    assert_eq!(results[0].content, "sent 2 chars to ada@example.com");
}

#[tokio::test]
async fn search_tool_respects_limit_and_validates() {
    let registry = registry();
    let tool = registry.tool_search().unwrap();
    assert!(tool.local_tool_search());
    assert_eq!(tool.name(), TOOL_SEARCH_NAME);
    assert!(tool.description().contains("send_email"));
    let deps = Arc::new(Deps::new());
    // "events email invoice" matches three tools; limit 1 keeps the best one.
    let out = tool
        .call(
            deps.clone(),
            json!({"query": "events email invoice", "limit": 1}),
        )
        .await
        .unwrap();
    assert_eq!(search_result_names(&out.content).unwrap().len(), 1);
    let err = tool
        .call(deps.clone(), json!({"query": "x", "limit": 99}))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
    let err = tool.call(deps, json!({"query": ""})).await.unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
}

#[test]
fn bm25_scores_prefer_name_matches_and_rarer_words() {
    let schemas = [
        schema("notes_search", "Search the notes."),
        schema("send_email", "Send an email."),
        schema(
            "mail_merge",
            "Merge a template with an email list and send every email.",
        ),
    ];
    let index = Bm25Index::new(&schemas);
    assert_eq!(index.len(), 3);
    let ranked = index.search("email", 10);
    let names: Vec<&str> = ranked.iter().map(|(n, _)| *n).collect();
    assert_eq!(names, ["send_email", "mail_merge"]);
    assert!(ranked[0].1 > ranked[1].1);
    assert_eq!(index.search("email", 1).len(), 1);
    assert!(Bm25Index::new([]).search("email", 3).is_empty());
}

#[test]
fn a_second_search_tool_is_refused() {
    let mut registry = registry();
    let err = registry.add(bm25_tool_search::<Deps>(&Registry::default(), 3));
    assert!(matches!(err, Err(RegistryError::DuplicateName(_))));
    /// Another searcher.
    #[tool(local_tool_search)]
    fn other_search(query: String) -> Vec<String> {
        vec![query]
    }
    let err = registry.add(other_search_tool());
    assert!(matches!(err, Err(RegistryError::SecondToolSearch { .. })));
}

fn schema(name: &str, description: &str) -> agentloop::tooling::ToolSchema {
    agentloop::tooling::ToolSchema {
        name: name.into(),
        description: description.into(),
        parameters: json!({"type": "object"}),
    }
}
