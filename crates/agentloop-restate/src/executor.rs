//! `ToolExecutor`: the Restate service that executes one tool call.
//!
//! The session's run sends every call here as its own durable call, so the engine journals each
//! result as it completes and retries a call whose worker died (at least once inside the step;
//! the input carries the idempotency key). Approval has already been decided by the session, so
//! the call runs as it is; its arguments are validated again against the tool's schema and its
//! own timeout applies.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agentloop::builtin::{self, ApprovalPolicy, WorkspaceDeps};
use agentloop::tooling::ToolSpec;
use restate_sdk::prelude::*;

use crate::bridge::arguments_value;
use crate::types::{ToolCallInput, ToolCallOutcome};
use crate::worker::WorkerConfig;

/// The longest time limit a tool may have for its lone calls to run as a step of the session
/// (see [`ToolExecutor::runs_in_step`]): the file tools' two minutes.
pub(crate) const STEP_CALL_LIMIT: Duration = Duration::from_secs(120);

/// The tool-executor service (`ToolExecutor/execute`).
pub struct ToolExecutor {
    tools: HashMap<String, ToolSpec<WorkspaceDeps>>,
    /// The same tools in the built-in order (the order the model sees them in); clones of
    /// `tools`, sharing their compiled schemas.
    ordered: Vec<ToolSpec<WorkspaceDeps>>,
    deps: Arc<WorkspaceDeps>,
}

impl ToolExecutor {
    /// The service for a worker's configuration (its workspace and built-in tools).
    pub fn new(config: &WorkerConfig) -> Self {
        let ordered = builtin::tools::<WorkspaceDeps>(&config.workspace);
        let tools = ordered
            .iter()
            .map(|spec| (spec.name().to_owned(), spec.clone()))
            .collect();
        // The session decided approval before sending the call here.
        let deps = Arc::new(WorkspaceDeps::new(
            config.workspace.clone(),
            ApprovalPolicy::Always,
        ));
        ToolExecutor {
            tools,
            ordered,
            deps,
        }
    }

    /// This worker's tools, in the built-in order. A run's forwarding tools are copies of these
    /// with another handler, so their schemas are compiled once per worker, not once per run.
    pub(crate) fn specs(&self) -> &[ToolSpec<WorkspaceDeps>] {
        &self.ordered
    }

    /// Whether `tool` is one of this worker's tools and only reads (a lone call to it runs
    /// inside the model's step).
    pub(crate) fn is_read_only(&self, tool: &str) -> bool {
        self.tools.contains_key(tool) && !builtin::is_mutating(tool)
    }

    /// Whether a lone call of `tool` may run as a journaled step of the session rather than as
    /// a durable call of this service: `tool` is one of this worker's tools and stops within
    /// [`STEP_CALL_LIMIT`] (the file tools, not `shell`). Inside a step the engine's
    /// cancellation is noticed only when the step ends, so a call that may run for long (a
    /// shell command) stays a durable call, which a cancellation aborts at once.
    pub(crate) fn runs_in_step(&self, tool: &str) -> bool {
        self.tools
            .get(tool)
            .and_then(ToolSpec::timeout)
            .is_some_and(|limit| limit <= STEP_CALL_LIMIT)
    }

    /// Runs one call outside the engine (the handler's body).
    pub async fn execute_call(&self, input: &ToolCallInput) -> ToolCallOutcome {
        let call = &input.call;
        let Some(spec) = self.tools.get(&call.tool_name) else {
            let mut names: Vec<_> = self.tools.keys().cloned().collect();
            names.sort();
            return ToolCallOutcome::error(format!(
                "Unknown tool \"{}\" on this worker; available: {}",
                call.tool_name,
                names.join(", ")
            ));
        };
        match spec
            .call(self.deps.clone(), arguments_value(&call.arguments))
            .await
        {
            Ok(output) => ToolCallOutcome {
                is_error: false,
                content: output.content,
                images: output.images,
            },
            Err(error) => ToolCallOutcome::error(error.message()),
        }
    }
}

#[restate_sdk::service]
impl ToolExecutor {
    /// Executes one call and returns its outcome (journaled by the engine).
    #[handler]
    async fn execute(
        &self,
        _ctx: Context<'_>,
        input: Json<ToolCallInput>,
    ) -> Result<Json<ToolCallOutcome>, HandlerError> {
        let input = input.into_inner();
        tracing::debug!(
            call = %input.call.id,
            tool = %input.call.tool_name,
            key = %input.idempotency_key,
            "executing a tool call"
        );
        Ok(Json(self.execute_call(&input).await))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop::builtin::Workspace;
    use agentloop::transcript::ToolCallPart;

    /// A call runs on the worker's workspace; an unknown tool and a failing call come back as
    /// error results the model can read, never as a failed handler.
    #[tokio::test]
    async fn calls_run_and_failures_become_error_results() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello\n").unwrap();
        let config = WorkerConfig::for_tests(Workspace::new(dir.path()).unwrap());
        let executor = ToolExecutor::new(&config);
        let run = |tool: &str, arguments: serde_json::Value| ToolCallInput {
            call: ToolCallPart::new("c1", tool, arguments),
            idempotency_key: "s1:c1".to_owned(),
        };

        let read = executor
            .execute_call(&run("read_file", serde_json::json!({"path": "a.txt"})))
            .await;
        assert!(!read.is_error, "{read:?}");
        assert!(read.content.contains("hello"), "{read:?}");

        let missing = executor
            .execute_call(&run("read_file", serde_json::json!({"path": "no.txt"})))
            .await;
        assert!(missing.is_error, "{missing:?}");
        assert!(missing.images.is_empty());

        let unknown = executor
            .execute_call(&run("fly", serde_json::json!({})))
            .await;
        assert!(unknown.is_error, "{unknown:?}");
        assert!(
            unknown
                .content
                .starts_with("Unknown tool \"fly\" on this worker; available: "),
            "{unknown:?}"
        );
        // The names are sorted, so the message is the same on every worker.
        let names = unknown.content.split(": ").nth(1).unwrap();
        let listed: Vec<&str> = names.split(", ").collect();
        let mut sorted = listed.clone();
        sorted.sort_unstable();
        assert_eq!(listed, sorted);
        assert!(listed.contains(&"read_file"), "{listed:?}");
    }
}
