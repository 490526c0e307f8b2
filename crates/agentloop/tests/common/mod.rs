//! Shared helpers for the agent-loop behaviour tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::future::Future;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use agentloop::agent::{AgentEvent, AgentLoop, AgentLoopConfig, RunOutcome};
use agentloop::model::ScriptedModel;
use agentloop::tooling::{Deps, ToolContext, ToolDeps, ToolSpec};
use agentloop::transcript::{Message, Role};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;

/// Every test run must end: a hang fails the test instead of the suite.
pub async fn within<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(20), f)
        .await
        .expect("the run did not terminate within 20s")
}

/// The whole run of `prompt` on an empty context, which must succeed (bounded by [`within`]).
pub async fn run_prompt<D: ToolDeps>(agent: &AgentLoop<D>, prompt: &str) -> RunOutcome {
    within(agent.run(vec![Message::user(prompt)], vec![]))
        .await
        .unwrap()
}

/// Collects events as compact strings.
#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Vec<AgentEvent>>>);

impl Recorder {
    pub fn callback(&self) -> impl Fn(&AgentEvent) + Send + Sync + 'static {
        let events = self.0.clone();
        move |e: &AgentEvent| events.lock().unwrap().push(e.clone())
    }

    pub fn events(&self) -> Vec<AgentEvent> {
        self.0.lock().unwrap().clone()
    }

    /// Compact names with consecutive `message_update`s collapsed into one.
    pub fn names(&self) -> Vec<String> {
        compact(&self.events())
    }
}

pub fn role(m: &Message) -> &'static str {
    match m.role {
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::ToolResult => "tool_result",
        Role::Custom => "custom",
        _ => "other",
    }
}

pub fn compact(events: &[AgentEvent]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let s = match e {
            AgentEvent::MessageStart { message } => format!("message_start({})", role(message)),
            AgentEvent::MessageEnd { message } => format!("message_end({})", role(message)),
            AgentEvent::ToolExecutionStart { call } => format!("tool_execution_start({})", call.id),
            AgentEvent::ToolExecutionEnd { call, .. } => format!("tool_execution_end({})", call.id),
            AgentEvent::TurnEnd { tool_results, .. } => format!(
                "turn_end[{}]",
                tool_results
                    .iter()
                    .map(|r| r.call_id.as_str())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            other => other.kind().to_owned(),
        };
        if s == "message_update" && out.last().map(String::as_str) == Some("message_update") {
            continue;
        }
        out.push(s);
    }
    out
}

/// Collects a run's events through the async stream interface.
pub async fn stream_names<D: agentloop::tooling::ToolDeps>(
    agent: &AgentLoop<D>,
    prompts: Vec<Message>,
    context: Vec<Message>,
) -> Vec<AgentEvent> {
    within(agent.run_stream(prompts, context).collect::<Vec<_>>()).await
}

#[derive(Deserialize)]
pub struct SleepArgs {
    pub ms: u64,
    #[serde(default)]
    pub label: String,
}

/// An async tool that sleeps `ms` then answers `label` (or "slept").
pub fn sleep_tool(name: &str) -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder(name, "Sleep, then answer.")
        .handler(|_c: ToolContext<Deps>, a: SleepArgs| async move {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            if a.label.is_empty() {
                "slept".to_owned()
            } else {
                a.label
            }
        })
        .build()
        .unwrap()
}

/// A tool that echoes its `text` argument.
pub fn echo_tool() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(serde_json::json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }))
        .blocking_handler(|_c: ToolContext<Deps>, a: Value| {
            a["text"].as_str().unwrap_or_default().to_owned()
        })
        .build()
        .unwrap()
}

pub fn agent(model: Arc<ScriptedModel>, tools: Vec<ToolSpec<Deps>>) -> AgentLoop<Deps> {
    agent_with(AgentLoopConfig::default(), model, tools)
}

pub fn agent_with(
    config: AgentLoopConfig,
    model: Arc<ScriptedModel>,
    tools: Vec<ToolSpec<Deps>>,
) -> AgentLoop<Deps> {
    AgentLoop::new(config, model).with_tools(tools).unwrap()
}

/// How long a [`Meeting`] or a [`Latch`] waits before giving up: a hang guard only, far longer
/// than any scenario needs, so a test that breaks fails with a message instead of hanging.
pub const HANG_GUARD: Duration = Duration::from_secs(60);

/// A rendezvous proving that calls ran at the same time: each call [`arrive`](Meeting::arrive)s
/// and waits until `parties` calls have arrived. Calls run one after another never meet: the
/// first waits out [`HANG_GUARD`] and answers "alone", so the test fails on the content instead of
/// on a measured duration.
#[derive(Clone)]
pub struct Meeting {
    parties: usize,
    arrived: Arc<(Mutex<usize>, Condvar)>,
}

impl Meeting {
    pub fn new(parties: usize) -> Self {
        Meeting {
            parties,
            arrived: Arc::default(),
        }
    }

    /// Blocks the calling (non-async) thread until every party arrived: "met", else "alone".
    pub fn arrive(&self) -> &'static str {
        let (count, all_here) = &*self.arrived;
        let mut n = count.lock().unwrap();
        *n += 1;
        all_here.notify_all();
        let (n, _) = all_here
            .wait_timeout_while(n, HANG_GUARD, |n| *n < self.parties)
            .unwrap();
        if *n >= self.parties { "met" } else { "alone" }
    }

    /// The same from async code: waits on a blocking-pool thread, so the caller's task is the one
    /// that must have been polled for it to arrive.
    pub async fn arrive_async(&self) -> &'static str {
        let meeting = self.clone();
        tokio::task::spawn_blocking(move || meeting.arrive())
            .await
            .unwrap()
    }
}

/// A gate a test opens by hand, for a tool that must stay busy until the test has seen what it
/// wants (e.g. the run ending without it). [`wait`](Latch::wait) gives up after [`HANG_GUARD`].
#[derive(Clone, Default)]
pub struct Latch(Arc<(Mutex<bool>, Condvar)>);

impl Latch {
    pub fn open(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }

    pub fn is_open(&self) -> bool {
        *self.0.0.lock().unwrap()
    }

    /// Blocks the calling thread until the latch is open (true) or the guard passed (false).
    pub fn wait(&self) -> bool {
        let (open, changed) = &*self.0;
        let guard = open.lock().unwrap();
        let (guard, _) = changed
            .wait_timeout_while(guard, HANG_GUARD, |open| !*open)
            .unwrap();
        *guard
    }
}

/// A blocking tool that ignores cancellation: it stays busy until `release` opens (or the hang
/// guard passes), then marks `finished`. A run that returns while `finished` is still false
/// provably did not wait for it. `timeout` is the tool's own limit, if any.
pub fn stuck_tool(
    name: &str,
    timeout: Option<Duration>,
    release: Latch,
    finished: Arc<std::sync::atomic::AtomicBool>,
) -> ToolSpec<Deps> {
    let mut builder = ToolSpec::<Deps>::builder(name, "Blocks and ignores cancellation.");
    if let Some(limit) = timeout {
        builder = builder.timeout(limit);
    }
    builder
        .blocking_handler(move |_c: ToolContext<Deps>, _a: Value| {
            release.wait();
            finished.store(true, std::sync::atomic::Ordering::SeqCst);
            "too late"
        })
        .build()
        .unwrap()
}
