//! `#[tool]` behaviour: descriptions come from doc comments, options map onto the spec, return
//! values convert as the tool contract says, a generated tool behaves exactly like a hand-written one in
//! `run_tools`, direct calls validate like the executor, and sync tools never block async siblings.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use crate::common::Meeting;

use agentloop::tool;
use agentloop::tooling::{
    Deps, Registry, ToolContext, ToolDeps, ToolError, ToolErrorKind, ToolSpec,
    batch_is_parallel_safe, run_tools,
};
use agentloop::transcript::{ToolCallPart, ToolResultPart};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// Tools under test

/// Add two integers.
///
/// Both must fit in 64 bits.
#[tool]
fn add(
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
) -> i64 {
    a + b
}

/// Return the current greeting.
#[tool(name = "greeting", parallel_safe = false, timeout = 30)]
fn no_arguments() -> String {
    "hello".to_owned()
}

/// Store a value.
#[tool(
    timeout = "500ms",
    guidelines = ["Store only what the user asked for.", "Keys are case-sensitive."],
    snippet = r#"store({"key": "a", "value": "b"})"#,
    deferred
)]
fn store(key: String, value: String) -> Result<String, ToolError> {
    if key.is_empty() {
        return Err(ToolError::retryable("the key is empty"));
    }
    Ok(format!("stored {key}={value}"))
}

/// Answer tool searches.
#[tool(local_tool_search, timeout = "2m")]
fn find_tools(query: String) -> Vec<String> {
    vec![query]
}

/// Parse an integer.
#[tool]
fn parse_int(text: String) -> Result<i64, std::num::ParseIntError> {
    text.trim().parse()
}

/// Read a note.
#[tool]
fn read_note(name: String) -> Result<String, std::io::Error> {
    if name == "missing" {
        Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "no such note",
        ))
    } else {
        Ok(format!("note {name}"))
    }
}

/// Return the text as a JSON string value.
#[tool]
fn echo_value(text: String) -> Value {
    Value::String(text)
}

/// Nothing to return.
#[tool]
fn unit_result() {}

/// A result with a displayable error that is neither `String` nor `ToolError`.
#[derive(Debug)]
struct Oops;

impl std::fmt::Display for Oops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("oops happened")
    }
}

/// Fail with a displayable error.
#[tool]
fn fail_display(fail: bool) -> Result<String, Oops> {
    if fail { Err(Oops) } else { Ok("fine".into()) }
}

/// A sort order.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
enum Order {
    /// Newest first.
    Newest,
    /// Oldest first.
    Oldest,
}

/// Narrows a search.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct Filter {
    /// Only notes with this tag.
    tag: String,
    /// Only notes scoring at least this much.
    #[schemars(range(min = 0.0, max = 1.0))]
    min_score: Option<f64>,
}

/// One search hit.
#[derive(Debug, Serialize)]
struct Hit {
    title: String,
    order: Order,
    limit: u32,
    tag: Option<String>,
}

/// Search the notes.
#[tool]
fn search_notes(
    /// Words to look for.
    #[schemars(length(min = 1, max = 200))]
    query: String,
    /// Sort order of the results.
    order: Order,
    /// Narrow the results.
    filter: Option<Filter>,
    /// At most this many results.
    #[schemars(range(min = 1, max = 50))]
    limit: Option<u32>,
    /// Reply-to address for the digest.
    #[schemars(email)]
    reply_to: Option<String>,
    /// Tags to leave out.
    exclude: Vec<String>,
) -> Vec<Hit> {
    let _ = (reply_to, exclude);
    vec![Hit {
        title: query,
        order,
        limit: limit.unwrap_or(10),
        tag: filter.map(|f| f.tag),
    }]
}

/// Application deps: a key-value store.
struct AppDeps {
    store: HashMap<String, String>,
}

impl ToolDeps for AppDeps {}

/// Look up a key.
#[tool]
async fn lookup(ctx: ToolContext<AppDeps>, key: String) -> Result<String, ToolError> {
    tokio::task::yield_now().await;
    let value = ctx
        .store
        .get(&key)
        .ok_or_else(|| ToolError::new(format!("no {key}")))?;
    Ok(format!("{}:{value}", ctx.call_id()))
}

/// Report the call id (works with any deps bundle).
#[tool]
async fn whoami<D: ToolDeps>(ctx: ToolContext<D>) -> String {
    ctx.call_id().to_owned()
}

/// Report the call id (bounds in a `where` clause, sync).
#[tool]
fn whoami_where<D>(ctx: ToolContext<D>) -> String
where
    D: ToolDeps,
{
    ctx.call_id().to_owned()
}

/// Where [`meet_sync`] and [`meet_async`] wait for each other.
static SIBLINGS: LazyLock<Meeting> = LazyLock::new(|| Meeting::new(2));

/// Wait on the blocking pool for the async sibling.
#[tool]
fn meet_sync() -> String {
    format!("sync {}", SIBLINGS.arrive())
}

/// Wait asynchronously for the sync sibling.
#[tool]
async fn meet_async() -> String {
    format!("async {}", SIBLINGS.arrive_async().await)
}

/// Argument names that are Rust keywords.
#[tool]
fn raw_names(r#type: String, mut count: u8) -> String {
    count = count.saturating_add(1);
    format!("{type}:{count}", type = r#type)
}

fn deps() -> Arc<Deps> {
    Arc::new(Deps::new())
}

fn app_deps() -> Arc<AppDeps> {
    Arc::new(AppDeps {
        store: HashMap::from([("owner".to_owned(), "Ada".to_owned())]),
    })
}

// ---------------------------------------------------------------------------------------------
// Descriptions, schemas, options

#[test]
fn descriptions_come_from_doc_comments() {
    let spec: ToolSpec<Deps> = add_tool();
    assert_eq!(spec.name(), "add");
    assert_eq!(
        spec.description(),
        "Add two integers.\n\nBoth must fit in 64 bits."
    );
    let p = spec.parameters();
    assert_eq!(p["properties"]["a"]["description"], "The first addend.");
    assert_eq!(p["properties"]["b"]["description"], "The second addend.");

    let search: ToolSpec<Deps> = search_notes_tool();
    let props = &search.parameters()["properties"];
    assert_eq!(props["query"]["description"], "Words to look for.");
    assert_eq!(
        props["filter"]["properties"]["tag"]["description"],
        "Only notes with this tag."
    );
    let variants = serde_json::to_string(&props["order"]).unwrap();
    assert!(variants.contains("Newest first."), "{variants}");
    assert!(variants.contains("Oldest first."), "{variants}");
}

#[test]
fn schema_lists_required_arguments_and_refuses_extras() {
    let spec: ToolSpec<Deps> = search_notes_tool();
    let p = spec.parameters();
    assert_eq!(p["type"], "object");
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["required"], json!(["query", "order", "exclude"]));
    assert!(p.get("$schema").is_none() && p.get("title").is_none());
    assert!(
        !serde_json::to_string(p).unwrap().contains("$ref"),
        "the schema is self-contained: {p}"
    );
    assert_eq!(p["properties"]["limit"]["minimum"], 1);
    assert_eq!(p["properties"]["limit"]["maximum"], 50);
    assert_eq!(p["properties"]["query"]["maxLength"], 200);
    assert_eq!(p["properties"]["reply_to"]["format"], "email");
}

#[test]
fn a_tool_without_arguments_takes_an_empty_object() {
    let spec: ToolSpec<Deps> = no_arguments_tool();
    assert_eq!(
        spec.parameters(),
        &json!({"type": "object", "properties": {}, "additionalProperties": false})
    );
}

#[test]
fn options_map_onto_the_spec() {
    let greeting: ToolSpec<Deps> = no_arguments_tool();
    assert_eq!(greeting.name(), "greeting");
    assert!(!greeting.parallel_safe());
    assert_eq!(greeting.timeout(), Some(Duration::from_secs(30)));

    let store: ToolSpec<Deps> = store_tool();
    assert!(store.parallel_safe());
    assert!(store.deferred());
    assert!(!store.local_tool_search());
    assert_eq!(store.timeout(), Some(Duration::from_millis(500)));
    assert_eq!(
        store.guidelines(),
        [
            "Store only what the user asked for.",
            "Keys are case-sensitive."
        ]
    );
    assert_eq!(
        store.snippet(),
        Some(r#"store({"key": "a", "value": "b"})"#)
    );

    let search: ToolSpec<Deps> = find_tools_tool();
    assert!(search.local_tool_search());
    assert!(!search.deferred());
    assert_eq!(search.timeout(), Some(Duration::from_secs(120)));

    let plain: ToolSpec<Deps> = add_tool();
    assert!(plain.parallel_safe() && !plain.deferred() && !plain.local_tool_search());
    assert_eq!(plain.timeout(), None);
    assert!(plain.guidelines().is_empty() && plain.snippet().is_none());
}

#[test]
fn parallel_safe_false_makes_the_batch_sequential() {
    let registry = Registry::<Deps>::new([add_tool(), no_arguments_tool()]).unwrap();
    let add = ToolCallPart::new("1", "add", json!({"a": 1, "b": 2}));
    let greet = ToolCallPart::new("2", "greeting", json!({}));
    assert!(batch_is_parallel_safe(
        &[add.clone(), add.clone()],
        &registry
    ));
    assert!(!batch_is_parallel_safe(&[add, greet], &registry));
}

#[test]
fn tools_without_context_work_with_any_deps() {
    let _: ToolSpec<Deps> = add_tool();
    let _: ToolSpec<()> = add_tool();
    let _: ToolSpec<AppDeps> = add_tool();
    let _: ToolSpec<AppDeps> = whoami_tool();
    let _: ToolSpec<AppDeps> = lookup_tool();
}

#[test]
fn the_original_functions_stay_callable() {
    assert_eq!(add(2, 3), 5);
    assert_eq!(no_arguments(), "hello");
    assert_eq!(raw_names("x".into(), 1), "x:2");
    let hits = search_notes("q".into(), Order::Oldest, None, None, None, vec![]);
    assert_eq!(hits[0].order, Order::Oldest);
}

// ---------------------------------------------------------------------------------------------
// Direct calls and return values

#[tokio::test]
async fn direct_calls_bind_and_convert_results() {
    let out = add_tool::<Deps>()
        .call(deps(), json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert_eq!(out.content, "42");

    // A `String` passes unchanged; a JSON string value is not quoted either.
    let out = no_arguments_tool::<Deps>()
        .call(deps(), json!({}))
        .await
        .unwrap();
    assert_eq!(out.content, "hello");
    let out = echo_value_tool::<Deps>()
        .call(deps(), json!({"text": "plain \"text\""}))
        .await
        .unwrap();
    assert_eq!(out.content, "plain \"text\"");

    // A struct becomes compact JSON.
    let out = search_notes_tool::<Deps>()
        .call(
            deps(),
            json!({"query": "rust", "order": "newest", "exclude": [], "filter": {"tag": "t"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        out.content,
        r#"[{"limit":10,"order":"newest","tag":"t","title":"rust"}]"#
    );

    let out = unit_result_tool::<Deps>()
        .call(deps(), json!({}))
        .await
        .unwrap();
    assert_eq!(out.content, "");

    let out = raw_names_tool::<Deps>()
        .call(deps(), json!({"type": "kind", "count": 4}))
        .await
        .unwrap();
    assert_eq!(out.content, "kind:5");
}

#[tokio::test]
async fn errors_become_error_results() {
    // `ToolError` keeps its flags.
    let err = store_tool::<Deps>()
        .call(deps(), json!({"key": "", "value": "v"}))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "the key is empty");
    assert!(err.is_retryable());

    // `E: Into<ToolError>` (io::Error) and plain `E: Display` both become the error's text.
    let err = read_note_tool::<Deps>()
        .call(deps(), json!({"name": "missing"}))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "no such note");
    let err = parse_int_tool::<Deps>()
        .call(deps(), json!({"text": "x"}))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "invalid digit found in string");
    assert_eq!(err.kind(), ToolErrorKind::Failed);
    let ok = parse_int_tool::<Deps>()
        .call(deps(), json!({"text": " 7 "}))
        .await
        .unwrap();
    assert_eq!(ok.content, "7");
    let err = fail_display_tool::<Deps>()
        .call(deps(), json!({"fail": true}))
        .await
        .unwrap_err();
    assert_eq!(err.message(), "oops happened");
}

#[tokio::test]
async fn direct_calls_validate_like_the_executor() {
    let spec: ToolSpec<Deps> = search_notes_tool();
    let err = spec
        .call(
            deps(),
            json!({"query": "", "order": "sideways", "limit": 99, "extra": 1}),
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::InvalidArguments);
    let msg = err.message();
    for needle in [
        "Validation failed for tool \"search_notes\"",
        "$.query",
        "$.order",
        "$.limit",
        "extra",
        "exclude",
    ] {
        assert!(msg.contains(needle), "{needle} missing from {msg}");
    }

    let err = spec.call(deps(), json!("text")).await.unwrap_err();
    assert_eq!(err.kind(), ToolErrorKind::MalformedArguments);
}

#[tokio::test]
async fn context_tools_get_deps_and_call_id() {
    let out = lookup_tool()
        .call(app_deps(), json!({"key": "owner"}))
        .await
        .unwrap();
    assert_eq!(out.content, "direct:Ada");

    let registry = Registry::new([lookup_tool(), whoami_tool(), whoami_where_tool()]).unwrap();
    let calls = [
        ToolCallPart::new("c-1", "lookup", json!({"key": "owner"})),
        ToolCallPart::new("c-2", "lookup", json!({"key": "nope"})),
        ToolCallPart::new("c-3", "whoami", json!({})),
        ToolCallPart::new("c-4", "whoami_where", json!({})),
    ];
    let results = run_tools(&calls, &registry, &app_deps(), None).await;
    assert_eq!(results[0].content, "c-1:Ada");
    assert!(results[1].is_error);
    assert_eq!(results[1].content, "no nope");
    assert_eq!(results[2].content, "c-3");
    assert_eq!(results[3].content, "c-4");
}

// ---------------------------------------------------------------------------------------------
// Generated vs hand-written

#[derive(Deserialize)]
struct AddArgs {
    a: i64,
    b: i64,
}

fn hand_written_add() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("add", "Add two integers.\n\nBoth must fit in 64 bits.")
        .parameters(json!({
            "type": "object",
            "properties": {
                "a": {"type": "integer", "format": "int64", "description": "The first addend."},
                "b": {"type": "integer", "format": "int64", "description": "The second addend."}
            },
            "required": ["a", "b"],
            "additionalProperties": false
        }))
        .blocking_handler(|_ctx: ToolContext<Deps>, args: AddArgs| (args.a + args.b).to_string())
        .build()
        .unwrap()
}

#[tokio::test]
async fn generated_and_hand_written_tools_behave_identically() {
    let generated: ToolSpec<Deps> = add_tool();
    let manual = hand_written_add();
    assert_eq!(generated.parameters(), manual.parameters());
    assert_eq!(generated.description(), manual.description());

    let calls: Vec<ToolCallPart> = [
        json!({"a": 1, "b": 2}),
        json!({"a": -5, "b": 5}),
        json!({"a": 1}),
        json!({"a": "1", "b": 2}),
        json!({"a": 1, "b": 2, "c": 3}),
        json!({"a": 1.5, "b": 2}),
        json!([1, 2]),
        json!(null),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, args)| ToolCallPart::new(format!("c{i}"), "add", args))
    .chain([ToolCallPart {
        id: "raw".into(),
        tool_name: "add".into(),
        arguments: agentloop::transcript::ToolArguments::Unparsed("{\"a\": 1,".into()),
        provider_data: None,
    }])
    .collect();

    let run = |spec: ToolSpec<Deps>| {
        let calls = calls.clone();
        async move {
            let registry = Registry::new([spec]).unwrap();
            run_tools(&calls, &registry, &deps(), None).await
        }
    };
    let from_macro: Vec<ToolResultPart> = run(generated).await;
    let by_hand: Vec<ToolResultPart> = run(manual).await;
    assert_eq!(from_macro, by_hand);
    assert_eq!(from_macro[0].content, "3");
    assert_eq!(from_macro[1].content, "0");
    let errors: Vec<bool> = from_macro.iter().map(|r| r.is_error).collect();
    assert_eq!(
        errors,
        [false, false, true, true, true, true, true, true, true]
    );
}

// ---------------------------------------------------------------------------------------------
// Sync tools run on the blocking pool

#[tokio::test(flavor = "current_thread")]
async fn sync_tools_do_not_block_async_siblings() {
    let registry = Registry::<Deps>::new([meet_sync_tool(), meet_async_tool()]).unwrap();
    let calls = [
        ToolCallPart::new("s", "meet_sync", json!({})),
        ToolCallPart::new("a", "meet_async", json!({})),
    ];
    let results = run_tools(&calls, &registry, &deps(), None).await;
    // On a current-thread runtime, a sync tool run inline would stall the async one, so the two
    // would never run at the same time and each would answer "alone". On the blocking pool the
    // async sibling keeps being polled and they meet.
    assert_eq!(results[0].content, "sync met");
    assert_eq!(results[1].content, "async met");
}
