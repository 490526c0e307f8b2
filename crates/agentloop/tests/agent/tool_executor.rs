//! Behaviour of `run_tools`: ordering, the concurrency cap, sequential batches, every error class,
//! cancellation of timed-out handlers, guarded observers, retries and abort.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::HANG_GUARD;

use agentloop::tooling::{
    Approval, Deps, ExecOptions, Registry, ToolContext, ToolDeps, ToolError, ToolErrorKind,
    ToolObserver, ToolSpec, run_tools, run_tools_with,
};
use agentloop::transcript::{ToolArguments, ToolCallPart, ToolResultPart};
use serde::Deserialize;
use serde_json::{Value, json};

fn echo_schema() -> Value {
    json!({
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
        "additionalProperties": false
    })
}

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

fn echo() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(echo_schema())
        .blocking_handler(|_c: ToolContext<Deps>, a: EchoArgs| a.text)
        .build()
        .unwrap()
}

/// An async tool that sleeps `ms` milliseconds, then returns `label`.
fn sleeper(name: &str) -> ToolSpec<Deps> {
    #[derive(Deserialize)]
    struct A {
        ms: u64,
        label: String,
    }
    ToolSpec::<Deps>::builder(name, "Sleep, then answer.")
        .handler(|_c: ToolContext<Deps>, a: A| async move {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            a.label
        })
        .build()
        .unwrap()
}

fn deps() -> Arc<Deps> {
    Arc::new(Deps::new())
}

fn call(id: &str, tool: &str, args: Value) -> ToolCallPart {
    ToolCallPart::new(id, tool, args)
}

/// The result of running the one call `c` with default deps.
async fn one(registry: &Registry<Deps>, c: ToolCallPart) -> ToolResultPart {
    one_with(registry, &deps(), c).await
}

/// The result of running the one call `c` with `deps`.
async fn one_with<D: ToolDeps>(
    registry: &Registry<D>,
    deps: &Arc<D>,
    c: ToolCallPart,
) -> ToolResultPart {
    let mut r = run_tools(&[c], registry, deps, None).await;
    assert_eq!(r.len(), 1);
    r.remove(0)
}

/// An observer that notes the ids of the calls in the order they finished.
#[derive(Default)]
struct FinishOrder(Mutex<Vec<String>>);

impl ToolObserver for FinishOrder {
    fn call_finished(&self, call: &ToolCallPart, _r: &ToolResultPart) {
        self.0.lock().unwrap().push(call.id.clone());
    }
}

#[tokio::test]
async fn no_calls_give_no_results() {
    let registry = Registry::new(vec![echo()]).unwrap();
    assert!(run_tools(&[], &registry, &deps(), None).await.is_empty());
}

#[tokio::test]
async fn single_call_runs_and_links_to_its_id() {
    let registry = Registry::new(vec![echo()]).unwrap();
    let r = one(&registry, call("call-1", "echo", json!({"text": "hello"}))).await;
    assert_eq!(r, ToolResultPart::success("call-1", "echo", "hello"));
}

#[tokio::test(start_paused = true)]
async fn out_of_order_completion_keeps_call_order() {
    let registry = Registry::new(vec![sleeper("sleep")]).unwrap();
    let calls = [
        call("a", "sleep", json!({"ms": 150, "label": "A"})),
        call("b", "sleep", json!({"ms": 10, "label": "B"})),
        call("c", "sleep", json!({"ms": 80, "label": "C"})),
    ];
    let order = Arc::new(FinishOrder::default());
    let results = run_tools(&calls, &registry, &deps(), Some(order.clone())).await;
    let ids: Vec<_> = results.iter().map(|r| r.call_id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    let contents: Vec<_> = results.iter().map(|r| r.content.as_str()).collect();
    assert_eq!(contents, ["A", "B", "C"]);
    // The observer saw completion order, proving the calls really overlapped.
    assert_eq!(*order.0.lock().unwrap(), ["b", "c", "a"]);
}

/// How many handlers run at once, and the most that ever did.
#[derive(Default)]
struct InFlight {
    now: AtomicUsize,
    peak: AtomicUsize,
}

impl InFlight {
    fn enter(&self) {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
    }

    fn leave(&self) {
        self.now.fetch_sub(1, Ordering::SeqCst);
    }

    fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }
}

/// Twenty calls of `tool` (no arguments) in one batch; their results.
async fn twenty_calls_of(tool: ToolSpec<Deps>) -> Vec<ToolResultPart> {
    let name = tool.name().to_owned();
    let registry = Registry::new(vec![tool]).unwrap();
    let calls: Vec<_> = (0..20)
        .map(|i| call(&format!("c{i}"), &name, json!({})))
        .collect();
    run_tools(&calls, &registry, &deps(), None).await
}

#[tokio::test(start_paused = true)]
async fn at_most_eight_handlers_in_flight() {
    let in_flight = Arc::new(InFlight::default());
    let counter = in_flight.clone();
    let counted = ToolSpec::<Deps>::builder("counted", "Count concurrency.")
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let counter = counter.clone();
            async move {
                counter.enter();
                tokio::time::sleep(Duration::from_millis(30)).await;
                counter.leave();
                "done"
            }
        })
        .build()
        .unwrap();
    let results = twenty_calls_of(counted).await;
    assert_eq!(results.len(), 20);
    assert!(results.iter().all(|r| !r.is_error && r.content == "done"));
    assert_eq!(in_flight.peak(), 8, "the cap is 8 and 20 calls fill it");
}

#[tokio::test]
async fn blocking_handlers_respect_the_cap_too() {
    let in_flight = Arc::new(InFlight::default());
    let counter = in_flight.clone();
    let counted = ToolSpec::<Deps>::builder("counted", "Count concurrency.")
        .blocking_handler(move |_c: ToolContext<Deps>, _a: Value| {
            counter.enter();
            std::thread::sleep(Duration::from_millis(30));
            counter.leave();
            "done"
        })
        .build()
        .unwrap();
    let results = twenty_calls_of(counted).await;
    assert!(results.iter().all(|r| !r.is_error));
    let peak = in_flight.peak();
    assert!(peak <= 8 && peak > 1, "peak {peak}");
}

#[tokio::test(start_paused = true)]
async fn one_unsafe_tool_makes_the_whole_batch_sequential_in_call_order() {
    // tokio's `Instant`: it follows the paused clock, so overlapping calls show as overlapping.
    use tokio::time::Instant;
    let log: Arc<Mutex<Vec<(String, Instant, Instant)>>> = Arc::default();
    let make = |name: &str, safe: bool| {
        let log = log.clone();
        let name_owned = name.to_owned();
        ToolSpec::<Deps>::builder(name, "Record when it ran.")
            .parallel_safe(safe)
            .handler(move |c: ToolContext<Deps>, _a: Value| {
                let log = log.clone();
                let _ = &name_owned;
                async move {
                    let start = Instant::now();
                    tokio::time::sleep(Duration::from_millis(40)).await;
                    log.lock()
                        .unwrap()
                        .push((c.call_id().to_owned(), start, Instant::now()));
                    "ok"
                }
            })
            .build()
            .unwrap()
    };
    let registry = Registry::new(vec![make("safe", true), make("unsafe", false)]).unwrap();
    let calls = [
        call("1", "safe", json!({})),
        call("2", "unsafe", json!({})),
        call("3", "safe", json!({})),
        call("4", "safe", json!({})),
    ];
    let results = run_tools(&calls, &registry, &deps(), None).await;
    assert!(results.iter().all(|r| !r.is_error));
    let log = log.lock().unwrap();
    let ids: Vec<_> = log.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(ids, ["1", "2", "3", "4"], "ran in call order");
    for pair in log.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "calls overlapped: {pair:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn sequential_option_forces_order_even_for_safe_tools() {
    let registry = Registry::new(vec![sleeper("sleep")]).unwrap();
    let order = Arc::new(FinishOrder::default());
    let options = ExecOptions {
        sequential: true,
        observer: Some(order.clone()),
        ..ExecOptions::default()
    };
    let calls = [
        call("a", "sleep", json!({"ms": 60, "label": "A"})),
        call("b", "sleep", json!({"ms": 1, "label": "B"})),
    ];
    run_tools_with(&calls, &registry, &deps(), &options).await;
    assert_eq!(*order.0.lock().unwrap(), ["a", "b"]);
}

#[tokio::test]
async fn malformed_arguments_of_every_shape() {
    let registry = Registry::new(vec![echo()]).unwrap();
    let cases = [
        (
            ToolArguments::Unparsed("{\"text\": \"hel".into()),
            "text that is not valid JSON",
        ),
        (ToolArguments::Json(json!("hello")), "a string"),
        (ToolArguments::Json(Value::Null), "null"),
        (ToolArguments::Json(json!(["hello"])), "an array"),
    ];
    for (arguments, what) in cases {
        let c = ToolCallPart {
            id: "m".into(),
            tool_name: "echo".into(),
            arguments,
            provider_data: None,
        };
        let r = one(&registry, c).await;
        assert!(r.is_error);
        assert!(
            r.content
                .starts_with("Malformed arguments for tool \"echo\": expected a JSON object"),
            "{}",
            r.content
        );
        assert!(r.content.contains(what), "{} / {what}", r.content);
    }
}

#[tokio::test]
async fn unknown_tool_names_the_available_tools() {
    let registry = Registry::new(vec![echo(), sleeper("sleep")]).unwrap();
    let r = one(&registry, call("u", "ech", json!({}))).await;
    assert!(r.is_error);
    assert_eq!(
        r.content,
        "Unknown tool \"ech\". Available tools: echo, sleep."
    );
    assert_eq!(r.tool_name, "ech");
}

#[tokio::test]
async fn approval_denied_carries_the_hooks_reason() {
    let registry = Registry::new(vec![echo()]).unwrap();
    let deps = Arc::new(Deps::with_approval(|c| {
        if c.tool_name == "echo" {
            Approval::deny("echo is disabled in this workspace")
        } else {
            Approval::Allow
        }
    }));
    let r = one_with(&registry, &deps, call("d", "echo", json!({"text": "x"}))).await;
    assert!(r.is_error);
    assert_eq!(
        r.content,
        "Tool call \"echo\" was denied: echo is disabled in this workspace"
    );
}

#[tokio::test]
async fn approval_hook_panic_fails_closed_for_that_call_only() {
    struct Flaky;
    impl ToolDeps for Flaky {
        async fn before_tool(&self, call: &ToolCallPart) -> Approval {
            if call.id == "boom" {
                panic!("approval service unreachable");
            }
            Approval::Allow
        }
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let tool = ToolSpec::<Flaky>::builder("t", "d")
        .blocking_handler(move |_c: ToolContext<Flaky>, _a: Value| {
            r2.fetch_add(1, Ordering::SeqCst);
            "ran"
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![tool]).unwrap();
    let results = run_tools(
        &[call("boom", "t", json!({})), call("fine", "t", json!({}))],
        &registry,
        &Arc::new(Flaky),
        None,
    )
    .await;
    assert!(results[0].is_error);
    assert!(
        results[0]
            .content
            .contains("The approval check for tool \"t\" failed"),
        "{}",
        results[0].content
    );
    assert!(results[0].content.contains("approval service unreachable"));
    assert_eq!(results[1].content, "ran");
    assert_eq!(
        ran.load(Ordering::SeqCst),
        1,
        "the failed check must not run the tool"
    );
}

#[tokio::test]
async fn arguments_that_do_not_bind_are_reported() {
    // The schema accepts any object, so validation passes and binding must catch it.
    let tool = ToolSpec::<Deps>::builder("typed", "Needs a number.")
        .blocking_handler(|_c: ToolContext<Deps>, a: EchoArgs| a.text)
        .build()
        .unwrap();
    let registry = Registry::new(vec![tool]).unwrap();
    let r = one(&registry, call("b", "typed", json!({"text": 5}))).await;
    assert!(r.is_error);
    assert!(
        r.content
            .starts_with("Arguments for tool \"typed\" do not match its parameters: "),
        "{}",
        r.content
    );
    assert!(r.content.contains("invalid type"), "{}", r.content);
}

#[tokio::test(start_paused = true)]
async fn timeout_names_the_limit_and_drops_the_async_handler() {
    struct Guard(Arc<AtomicUsize>);
    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = dropped.clone();
    let slow = ToolSpec::<Deps>::builder("slow", "Never finishes.")
        .timeout(Duration::from_millis(50))
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let guard = Guard(d.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                "unreachable"
            }
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![slow]).unwrap();
    // The paused clock's time: the call ends when the 50 ms limit fires, not later.
    let started = tokio::time::Instant::now();
    let r = one(&registry, call("t", "slow", json!({}))).await;
    assert!(r.is_error);
    assert_eq!(r.content, "Tool \"slow\" timed out after 50ms.");
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(50)..Duration::from_millis(60)).contains(&waited),
        "{waited:?}"
    );
    assert_eq!(
        dropped.load(Ordering::SeqCst),
        1,
        "the handler's future was dropped"
    );
}

#[tokio::test]
async fn blocking_handler_that_overruns_is_abandoned_and_told_to_stop() {
    let saw_cancel = Arc::new(AtomicUsize::new(0));
    let s = saw_cancel.clone();
    let stubborn = ToolSpec::<Deps>::builder("stubborn", "Blocks.")
        .timeout(Duration::from_millis(50))
        .blocking_handler(move |c: ToolContext<Deps>, _a: Value| {
            let until = Instant::now() + HANG_GUARD;
            while Instant::now() < until {
                if c.is_cancelled() {
                    s.fetch_add(1, Ordering::SeqCst);
                    return "late result";
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            "late result"
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![stubborn]).unwrap();
    let r = one(&registry, call("t", "stubborn", json!({}))).await;
    assert!(r.is_error);
    assert_eq!(r.content, "Tool \"stubborn\" timed out after 50ms.");
    // The abandoned thread sees its cancellation token shortly after (the bound is a hang guard).
    let until = Instant::now() + HANG_GUARD;
    while saw_cancel.load(Ordering::SeqCst) == 0 && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(saw_cancel.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn tool_error_from_the_handler_is_the_result_text() {
    let failing = ToolSpec::<Deps>::builder("failing", "Fails.")
        .handler(|_c: ToolContext<Deps>, _a: Value| async move {
            Err::<String, _>(ToolError::new("file not found: notes.txt"))
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![failing]).unwrap();
    let r = one(&registry, call("f", "failing", json!({}))).await;
    assert!(r.is_error);
    assert_eq!(r.content, "file not found: notes.txt");
}

#[tokio::test]
async fn handler_panics_become_error_results_async_and_blocking() {
    let async_panic = ToolSpec::<Deps>::builder("apanic", "Panics.")
        .handler(|_c: ToolContext<Deps>, _a: Value| async move {
            if true {
                panic!("index out of bounds");
            }
            "never"
        })
        .build()
        .unwrap();
    let blocking_panic = ToolSpec::<Deps>::builder("bpanic", "Panics.")
        .blocking_handler(|_c: ToolContext<Deps>, _a: Value| -> String {
            panic!("{}", String::from("blocking boom"))
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![async_panic, blocking_panic, echo()]).unwrap();
    let results = run_tools(
        &[
            call("1", "apanic", json!({})),
            call("2", "bpanic", json!({})),
            call("3", "echo", json!({"text": "still here"})),
        ],
        &registry,
        &deps(),
        None,
    )
    .await;
    assert_eq!(
        results[0].content,
        "Tool \"apanic\" failed unexpectedly: index out of bounds"
    );
    assert_eq!(
        results[1].content,
        "Tool \"bpanic\" failed unexpectedly: blocking boom"
    );
    assert!(results[0].is_error && results[1].is_error);
    assert_eq!(results[2].content, "still here");
}

#[tokio::test]
async fn a_panicking_observer_changes_no_result() {
    struct Panicky;
    impl ToolObserver for Panicky {
        fn call_started(&self, _c: &ToolCallPart) {
            panic!("observer start");
        }
        fn call_progress(&self, _i: &str, _t: &str, _u: &Value) {
            panic!("observer progress");
        }
        fn call_finished(&self, _c: &ToolCallPart, _r: &ToolResultPart) {
            panic!("observer finish");
        }
    }
    let reporting = ToolSpec::<Deps>::builder("reporting", "Reports progress.")
        .handler(|c: ToolContext<Deps>, _a: Value| async move {
            c.progress(json!({"step": 1}));
            "reported"
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![echo(), reporting]).unwrap();
    let calls = [
        call("1", "echo", json!({"text": "a"})),
        call("2", "reporting", json!({})),
    ];
    let plain = run_tools(&calls, &registry, &deps(), None).await;
    let observed = run_tools(&calls, &registry, &deps(), Some(Arc::new(Panicky))).await;
    assert_eq!(plain, observed);
    assert_eq!(observed[1].content, "reported");
}

#[tokio::test]
async fn progress_updates_reach_the_observer_before_the_finish() {
    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);
    impl ToolObserver for Log {
        fn call_started(&self, c: &ToolCallPart) {
            self.0.lock().unwrap().push(format!("start {}", c.id));
        }
        fn call_progress(&self, id: &str, tool: &str, u: &Value) {
            self.0
                .lock()
                .unwrap()
                .push(format!("progress {id} {tool} {u}"));
        }
        fn call_finished(&self, c: &ToolCallPart, r: &ToolResultPart) {
            self.0
                .lock()
                .unwrap()
                .push(format!("finish {} {}", c.id, r.content));
        }
    }
    let reporting = ToolSpec::<Deps>::builder("reporting", "Reports progress.")
        .blocking_handler(|c: ToolContext<Deps>, _a: Value| {
            c.progress(json!({"pct": 50}));
            c.progress("almost");
            "done"
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![reporting]).unwrap();
    let log = Arc::new(Log::default());
    run_tools(
        &[call("p", "reporting", json!({}))],
        &registry,
        &deps(),
        Some(log.clone()),
    )
    .await;
    assert_eq!(
        *log.0.lock().unwrap(),
        [
            "start p",
            "progress p reporting {\"pct\":50}",
            "progress p reporting \"almost\"",
            "finish p done"
        ]
    );
}

#[tokio::test]
async fn schema_violations_are_reported_with_paths() {
    let registry = Registry::new(vec![echo()]).unwrap();
    let missing = one(&registry, call("1", "echo", json!({}))).await;
    assert!(missing.is_error);
    assert!(
        missing
            .content
            .starts_with("Validation failed for tool \"echo\":\n"),
        "{}",
        missing.content
    );
    assert!(
        missing
            .content
            .contains("  - $: \"text\" is a required property"),
        "{}",
        missing.content
    );

    let wrong = one(&registry, call("2", "echo", json!({"text": 5}))).await;
    assert!(
        wrong
            .content
            .contains("  - $.text: 5 is not of type \"string\""),
        "{}",
        wrong.content
    );
    assert!(
        wrong
            .content
            .ends_with("Received arguments:\n{\n  \"text\": 5\n}"),
        "{}",
        wrong.content
    );

    let extra = one(
        &registry,
        call("3", "echo", json!({"text": "a", "loud": true})),
    )
    .await;
    assert!(extra.content.contains("  - $: "), "{}", extra.content);
    assert!(
        extra.content.contains("'loud' was unexpected"),
        "{}",
        extra.content
    );

    // Every violation at once, one line each.
    let both = one(&registry, call("4", "echo", json!({"loud": true}))).await;
    let lines = both
        .content
        .lines()
        .filter(|l| l.starts_with("  - "))
        .count();
    assert_eq!(lines, 2, "{}", both.content);
}

#[tokio::test]
async fn validation_runs_before_the_handler() {
    let ran = Arc::new(AtomicUsize::new(0));
    let r2 = ran.clone();
    let tool = ToolSpec::<Deps>::builder("guarded", "Needs n >= 1.")
        .parameters(json!({
            "type": "object",
            "properties": {"n": {"type": "integer", "minimum": 1}},
            "required": ["n"]
        }))
        .blocking_handler(move |_c: ToolContext<Deps>, _a: Value| {
            r2.fetch_add(1, Ordering::SeqCst);
            "ran"
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![tool]).unwrap();
    let r = one(&registry, call("1", "guarded", json!({"n": 0}))).await;
    assert!(
        r.content.contains("$.n: 0 is less than the minimum of 1"),
        "{}",
        r.content
    );
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn retryable_errors_are_retried_then_succeed() {
    let attempts = Arc::new(AtomicUsize::new(0));
    let a2 = attempts.clone();
    let flaky = ToolSpec::<Deps>::builder("flaky", "Fails twice.")
        .handler(move |_c: ToolContext<Deps>, _a: Value| {
            let n = a2.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < 2 {
                    Err(ToolError::retryable("upstream busy"))
                } else {
                    Ok("third time lucky")
                }
            }
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![flaky]).unwrap();
    let options = ExecOptions {
        max_retries: 3,
        retry_backoff: Duration::from_millis(1),
        ..ExecOptions::default()
    };
    let out = run_tools_with(
        &[call("r", "flaky", json!({}))],
        &registry,
        &deps(),
        &options,
    )
    .await;
    assert_eq!(out[0].result.content, "third time lucky");
    assert_eq!(out[0].attempts, 3);

    // Without retries the first failure is the result, with its kind.
    attempts.store(0, Ordering::SeqCst);
    let out = run_tools_with(
        &[call("r", "flaky", json!({}))],
        &registry,
        &deps(),
        &ExecOptions::default(),
    )
    .await;
    assert_eq!(out[0].result.content, "upstream busy");
    assert_eq!(
        out[0].error.as_ref().map(|e| e.kind()),
        Some(ToolErrorKind::Failed)
    );
}

#[tokio::test(start_paused = true)]
async fn abort_gives_unfinished_calls_an_aborted_result_and_keeps_finished_ones() {
    let registry = Registry::new(vec![sleeper("sleep")]).unwrap();
    let options = ExecOptions::default();
    let cancel = options.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        cancel.cancel();
    });
    let calls = [
        call("fast", "sleep", json!({"ms": 5, "label": "fast"})),
        call("slow", "sleep", json!({"ms": 30_000, "label": "slow"})),
    ];
    // The paused clock's time: the batch ends at the abort, long before the slow call would.
    let started = tokio::time::Instant::now();
    let out = run_tools_with(&calls, &registry, &deps(), &options).await;
    let waited = started.elapsed();
    assert!(
        (Duration::from_millis(100)..Duration::from_millis(110)).contains(&waited),
        "{waited:?}"
    );
    assert_eq!(out[0].result.content, "fast");
    assert!(!out[0].result.is_error);
    assert!(out[1].result.is_error);
    assert_eq!(
        out[1].result.content,
        "Tool \"sleep\" was aborted before it finished."
    );
    assert_eq!(
        out[1].error.as_ref().map(|e| e.kind()),
        Some(ToolErrorKind::Aborted)
    );

    // A batch started after the abort runs nothing but still answers every call.
    let out = run_tools_with(&calls, &registry, &deps(), &options).await;
    assert!(out.iter().all(|o| o.result.is_error && o.attempts == 0));
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_call_does_not_hold_back_the_rest_of_the_batch() {
    // 1 slow call + 16 fast ones with a cap of 8: the 7 free slots must keep cycling while the
    // slow call runs (no head-of-line blocking), so every call has started before it ends.
    let started = Arc::new(AtomicUsize::new(0));
    let seen_at_slow_end = Arc::new(AtomicUsize::new(0));
    let (s, seen) = (started.clone(), seen_at_slow_end.clone());
    #[derive(Deserialize)]
    struct A {
        ms: u64,
        #[serde(default)]
        slow: bool,
    }
    let tool = ToolSpec::<Deps>::builder("t", "Sleeps.")
        .handler(move |_c: ToolContext<Deps>, a: A| {
            let (s, seen) = (s.clone(), seen.clone());
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(a.ms)).await;
                if a.slow {
                    seen.store(s.load(Ordering::SeqCst), Ordering::SeqCst);
                }
                "ok"
            }
        })
        .build()
        .unwrap();
    let registry = Registry::new(vec![tool]).unwrap();
    let mut calls = vec![call("slow", "t", json!({"ms": 1500, "slow": true}))];
    calls.extend((0..16).map(|i| call(&format!("f{i}"), "t", json!({"ms": 20}))));
    let results = run_tools(&calls, &registry, &deps(), None).await;
    assert!(results.iter().all(|r| !r.is_error));
    assert_eq!(seen_at_slow_end.load(Ordering::SeqCst), 17);
}

/// A `Deps::with_approval` closure runs while the hook's future is *built*: its panic must deny
/// that call (one call, and each call of a batch), not unwind out of `run_tools`.
#[tokio::test]
async fn approval_closure_panicking_before_its_future_is_an_error_result() {
    let hook_deps = Arc::new(Deps::with_approval(|call: &ToolCallPart| {
        if call.id.starts_with("boom") {
            panic!("hook exploded for {}", call.id);
        }
        Approval::Allow
    }));
    let registry = Registry::new(vec![echo()]).unwrap();
    let single = one_with(
        &registry,
        &hook_deps,
        call("boom0", "echo", json!({"text": "x"})),
    )
    .await;
    assert!(single.is_error);
    assert!(
        single
            .content
            .contains("The approval check for tool \"echo\" failed")
            && single.content.contains("hook exploded for boom0"),
        "{}",
        single.content
    );
    let batch = run_tools(
        &[
            call("boom1", "echo", json!({"text": "a"})),
            call("ok", "echo", json!({"text": "b"})),
            call("boom2", "echo", json!({"text": "c"})),
        ],
        &registry,
        &hook_deps,
        None,
    )
    .await;
    assert_eq!(batch.len(), 3);
    assert!(batch[0].is_error && batch[0].content.contains("hook exploded for boom1"));
    assert_eq!(batch[1].content, "b");
    assert!(batch[2].is_error && batch[2].content.contains("hook exploded for boom2"));
}

/// A hand-written handler closure that panics before returning its future (so no future exists
/// to catch the panic in) becomes a "failed unexpectedly" result through `run_tools` (one call
/// and a batch) and through `ToolSpec::call`.
#[tokio::test]
async fn handler_closure_panicking_before_its_future_is_an_error_result() {
    let eager = || {
        ToolSpec::<Deps>::builder("eager", "Panics while building its future.")
            .handler(|_c: ToolContext<Deps>, a: Value| {
                if a.get("boom").is_some() {
                    panic!("eager boom");
                }
                async move { "fine" }
            })
            .build()
            .unwrap()
    };
    let registry = Registry::new(vec![eager(), echo()]).unwrap();
    let single = one(&registry, call("1", "eager", json!({"boom": true}))).await;
    assert_eq!(
        single.content,
        "Tool \"eager\" failed unexpectedly: eager boom"
    );
    assert!(single.is_error);
    let batch = run_tools(
        &[
            call("1", "eager", json!({"boom": true})),
            call("2", "echo", json!({"text": "still here"})),
            call("3", "eager", json!({})),
        ],
        &registry,
        &deps(),
        None,
    )
    .await;
    assert!(batch[0].is_error && batch[0].content.contains("eager boom"));
    assert_eq!(batch[1].content, "still here");
    assert_eq!(batch[2].content, "fine");

    let direct = eager().call(deps(), json!({"boom": 1})).await.unwrap_err();
    assert_eq!(direct.kind(), ToolErrorKind::Panicked);
    assert!(direct.message().contains("eager boom"));
    assert_eq!(
        eager().call(deps(), json!({})).await.unwrap().content,
        "fine"
    );
}
