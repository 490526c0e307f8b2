//! The dependency bundle handed to every tool handler, and the approval hook it carries.
//!
//! Applications define their own bundle (database handles, configuration, a workspace root…) and
//! implement [`ToolDeps`] for it; the only thing the executor asks of a bundle is
//! [`ToolDeps::before_tool`], the approval hook consulted before each call runs. [`Deps`] is the
//! ready-made bundle for applications that need nothing else.

use std::future::Future;
use std::sync::Arc;

use crate::transcript::ToolCallPart;

/// The approval hook's verdict on one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Run the call.
    Allow,
    /// Do not run it; the reason is shown to the model in the call's error result.
    Deny(String),
    /// Nobody can decide now: do not run it and do not answer it. The agent loop runs the rest
    /// of the batch, records this call as pending (with this text: what policy asked) and stops
    /// with [`RunStop::AwaitingApproval`](crate::agent::RunStop::AwaitingApproval); a person
    /// decides later and [`AgentLoop::resume`](crate::agent::AgentLoop::resume) continues.
    /// Outside the loop (plain [`run_tools`](crate::tooling::run_tools)) a deferred call gets
    /// an error result of kind [`Deferred`](crate::tooling::ToolErrorKind::Deferred).
    Defer(String),
}

impl Approval {
    /// Shorthand for [`Approval::Deny`].
    pub fn deny(reason: impl Into<String>) -> Self {
        Approval::Deny(reason.into())
    }

    /// Shorthand for [`Approval::Defer`].
    pub fn defer(reason: impl Into<String>) -> Self {
        Approval::Defer(reason.into())
    }
}

/// The default approval hook: permits every call.
pub fn allow_all(_call: &ToolCallPart) -> Approval {
    Approval::Allow
}

/// What the executor needs from an application's dependency bundle.
///
/// Implement it for your own struct to give handlers your fields; override `before_tool` to
/// approve or deny calls (it may be async, e.g. to ask a person). A panic inside `before_tool`
/// denies that call with an "approval check failed" result; it never ends the batch.
///
/// ```
/// use agentloop::tooling::{Approval, ToolDeps};
/// use agentloop::transcript::ToolCallPart;
///
/// struct AppDeps {
///     read_only: bool,
/// }
///
/// impl ToolDeps for AppDeps {
///     async fn before_tool(&self, call: &ToolCallPart) -> Approval {
///         if self.read_only && call.tool_name == "write_file" {
///             Approval::deny("the workspace is read-only")
///         } else {
///             Approval::Allow
///         }
///     }
/// }
/// ```
pub trait ToolDeps: Send + Sync + 'static {
    /// Decides whether `call` may run. The default allows everything ([`allow_all`]).
    fn before_tool(&self, call: &ToolCallPart) -> impl Future<Output = Approval> + Send {
        std::future::ready(allow_all(call))
    }
}

/// A synchronous approval hook, as stored in [`Deps`].
pub type ApprovalHook = Arc<dyn Fn(&ToolCallPart) -> Approval + Send + Sync>;

/// The default dependency bundle: nothing but an approval hook (allow-all unless set).
#[derive(Clone, Default)]
pub struct Deps {
    approval: Option<ApprovalHook>,
}

impl Deps {
    /// A bundle that allows every call.
    pub fn new() -> Self {
        Deps::default()
    }

    /// A bundle whose approval hook is `hook`.
    pub fn with_approval(hook: impl Fn(&ToolCallPart) -> Approval + Send + Sync + 'static) -> Self {
        Deps {
            approval: Some(Arc::new(hook)),
        }
    }
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field("approval", &self.approval.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl ToolDeps for Deps {
    fn before_tool(&self, call: &ToolCallPart) -> impl Future<Output = Approval> + Send {
        std::future::ready(match &self.approval {
            Some(hook) => hook(call),
            None => allow_all(call),
        })
    }
}

impl ToolDeps for () {}
