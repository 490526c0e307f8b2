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
    /// decides later and [`AgentLoop::resume_parked`](crate::agent::AgentLoop::resume_parked) continues.
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

/// One call to decide, as [`ToolDeps::approve`] sees it: the call, whether its tool declared
/// that it requires approval, and typed access to its (schema-valid, bound) arguments.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct ApprovalRequest<'a> {
    /// The call.
    pub call: &'a ToolCallPart,
    /// Whether the tool was declared to need a decision before it runs
    /// ([`ToolSpec::requires_approval`](crate::tooling::ToolSpec::requires_approval),
    /// `#[tool(requires_approval)]`).
    pub requires_approval: bool,
}

impl<'a> ApprovalRequest<'a> {
    /// A request for `call`.
    pub fn new(call: &'a ToolCallPart, requires_approval: bool) -> Self {
        ApprovalRequest {
            call,
            requires_approval,
        }
    }

    /// The tool's name.
    pub fn tool_name(&self) -> &str {
        &self.call.tool_name
    }

    /// The arguments deserialized into `T` (typically the tool's own argument type). They
    /// passed the tool's schema and bound to its handler before approval is asked, so `Err`
    /// means `T` is not the tool's argument type.
    pub fn arguments_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        match &self.call.arguments {
            crate::transcript::ToolArguments::Json(value) => T::deserialize(value),
            crate::transcript::ToolArguments::Unparsed(text) => serde_json::from_str(text),
        }
    }
}

/// What the executor needs from an application's dependency bundle.
///
/// Implement it for your own struct to give handlers your fields — with no approval logic an
/// empty `impl ToolDeps for AppDeps {}` or `#[derive(agentloop::ToolDeps)]` is all it takes.
///
/// # Deciding whether a call may run: one method, [`approve`](Self::approve)
///
/// A call is checked in this order (by the agent loop and by the executor alike):
///
/// 1. **lookup and schema**: the tool exists and the arguments satisfy its JSON Schema
///    (otherwise the model gets the violations);
/// 2. **`tool_call` hooks** of the agent's [extensions](crate::agent::Extension), in the agent
///    loop only: policy vetoes and argument rewrites, which need no person; a rewrite is
///    validated again;
/// 3. **binding**: the arguments deserialize into the handler's type (a person is never asked
///    about a call that cannot run);
/// 4. **approval**: [`approve`](Self::approve), which sees the arguments that will run;
/// 5. the handler runs (`ToolExecutionStart` comes
///    now, not before: a refused call is reported blocked).
///
/// Hooks come before approval on purpose: a person should only be asked about the final
/// arguments of a call no policy refused. Put "may this call run?" logic in `approve`: it may
/// be async (ask a person, a service), it sees whether the tool declared
/// [`requires_approval`](ApprovalRequest::requires_approval) and gives typed arguments
/// ([`ApprovalRequest::arguments_as`]); answer [`Approval::Defer`] to park the run for a
/// person's later decision. A panic inside it denies that call with an "approval check
/// failed" result; it never ends the batch.
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
    /// Decides whether a call may run — the one place for approval logic (see the order of
    /// checks above). The default defers a call to a tool that
    /// [requires approval](ApprovalRequest::requires_approval) — the agent loop parks the run
    /// ([`RunStop::AwaitingApproval`](crate::agent::RunStop::AwaitingApproval)) until a person
    /// decides — and asks [`before_tool`](Self::before_tool) about every other call.
    fn approve(&self, request: ApprovalRequest<'_>) -> impl Future<Output = Approval> + Send {
        async move {
            if request.requires_approval {
                Approval::defer(format!(
                    "the tool \"{}\" requires approval",
                    request.call.tool_name
                ))
            } else {
                self.before_tool(request.call).await
            }
        }
    }

    /// The untyped approval hook [`approve`](Self::approve) falls back to for tools that do not
    /// require approval. The default allows everything ([`allow_all`]). Prefer overriding
    /// `approve`, which sees the tool's declaration and typed arguments.
    fn before_tool(&self, call: &ToolCallPart) -> impl Future<Output = Approval> + Send {
        std::future::ready(allow_all(call))
    }
}

/// A synchronous approval hook, as stored in [`Deps`] (asked through `before_tool`, so never
/// about a tool that [requires approval](ApprovalRequest::requires_approval); see
/// [`Deps::with_approver`] for one that decides those too).
pub type ApprovalHook = Arc<dyn Fn(&ToolCallPart) -> Approval + Send + Sync>;

/// A synchronous [`approve`](ToolDeps::approve) hook, as stored in [`Deps`].
pub type ApproverHook = Arc<dyn Fn(ApprovalRequest<'_>) -> Approval + Send + Sync>;

/// The default dependency bundle: nothing but an approval hook (allow-all unless set; a tool
/// that [requires approval](ApprovalRequest::requires_approval) is deferred unless
/// [`with_approver`](Deps::with_approver) decides it).
#[derive(Clone, Default)]
pub struct Deps {
    approval: Option<ApprovalHook>,
    approver: Option<ApproverHook>,
}

impl Deps {
    /// A bundle that allows every call.
    pub fn new() -> Self {
        Deps::default()
    }

    /// A bundle whose `before_tool` hook is `hook` (asked about the calls of tools that do not
    /// require approval).
    pub fn with_approval(hook: impl Fn(&ToolCallPart) -> Approval + Send + Sync + 'static) -> Self {
        Deps {
            approval: Some(Arc::new(hook)),
            approver: None,
        }
    }

    /// A bundle whose [`approve`](ToolDeps::approve) is `hook`: it decides every call,
    /// including those of tools that require approval.
    ///
    /// ```
    /// use agentloop::tooling::{Approval, ApprovalRequest, Deps};
    /// use serde::Deserialize;
    ///
    /// #[derive(Deserialize)]
    /// struct Refund { cents: u64 }
    ///
    /// let deps = Deps::with_approver(|request: ApprovalRequest<'_>| {
    ///     match request.arguments_as::<Refund>() {
    ///         Ok(refund) if request.requires_approval && refund.cents > 10_000 => {
    ///             Approval::defer("refunds over $100 need a person")
    ///         }
    ///         _ => Approval::Allow,
    ///     }
    /// });
    /// # let _ = deps;
    /// ```
    pub fn with_approver(
        hook: impl Fn(ApprovalRequest<'_>) -> Approval + Send + Sync + 'static,
    ) -> Self {
        Deps {
            approval: None,
            approver: Some(Arc::new(hook)),
        }
    }
}

impl std::fmt::Debug for Deps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deps")
            .field("approval", &self.approval.as_ref().map(|_| "custom"))
            .field("approver", &self.approver.as_ref().map(|_| "custom"))
            .finish()
    }
}

impl ToolDeps for Deps {
    async fn approve(&self, request: ApprovalRequest<'_>) -> Approval {
        match &self.approver {
            Some(hook) => hook(request),
            None if request.requires_approval => Approval::defer(format!(
                "the tool \"{}\" requires approval",
                request.call.tool_name
            )),
            None => self.before_tool(request.call).await,
        }
    }

    fn before_tool(&self, call: &ToolCallPart) -> impl Future<Output = Approval> + Send {
        std::future::ready(match &self.approval {
            Some(hook) => hook(call),
            None => allow_all(call),
        })
    }
}

impl ToolDeps for () {}
