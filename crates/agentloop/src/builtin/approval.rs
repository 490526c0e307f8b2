//! Approval for the built-in tools: the [`ApprovalPolicy`] (`--approve deny|ask|allow` in the
//! CLI) and [`WorkspaceDeps`], a ready-made dependency bundle that applies it.
//!
//! This module decides whether a call may run; it never prompts a person itself. Prompting is the
//! application's job, plugged in as an *asker* callback (the CLI asks on the terminal).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use super::is_mutating;
use super::permissions::{PermissionRules, RuleVerdict};
use super::workspace::Workspace;
use crate::tooling::{Approval, ToolDeps};
use crate::transcript::ToolCallPart;

/// Which tool calls run without asking anyone.
///
/// "Mutating" tools are the ones named in [`MUTATING_TOOLS`](super::MUTATING_TOOLS)
/// (`write_file`, `edit_file`, `shell`); every other tool name counts as read-only.
///
/// | policy | spelling | read-only tools | mutating tools |
/// |---|---|---|---|
/// | [`Always`](Self::Always) | `allow` | allowed | allowed |
/// | [`Mutating`](Self::Mutating) (default) | `ask` | allowed | ask (denied when there is no asker) |
/// | [`Never`](Self::Never) | `deny` | allowed | denied, with a reason the model sees |
///
/// The spellings are unambiguous (`never` read as "never ask" to some); the old spellings
/// `always`, `mutating` and `never` still parse.
///
/// ```
/// use agentloop::builtin::{ApprovalPolicy, PolicyDecision};
///
/// let policy: ApprovalPolicy = "ask".parse().unwrap();
/// assert_eq!(policy, "mutating".parse().unwrap());
/// assert_eq!(policy.decide("read_file"), PolicyDecision::Allow);
/// assert_eq!(policy.decide("shell"), PolicyDecision::Ask);
/// assert!(matches!(ApprovalPolicy::Never.decide("shell"), PolicyDecision::Deny(_)));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApprovalPolicy {
    /// Never auto-approve mutating tools: they are denied; read-only tools are allowed.
    Never,
    /// Approve read-only tools automatically; ask for mutating ones.
    #[default]
    Mutating,
    /// Approve every call automatically.
    Always,
    /// Approve read-only tools automatically; *defer* mutating ones: the agent loop parks them
    /// for a decision made later, possibly in another process
    /// ([`RunStop::AwaitingApproval`](crate::agent::RunStop::AwaitingApproval)).
    Defer,
}

/// What an [`ApprovalPolicy`] says about one tool.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PolicyDecision {
    /// Run it.
    Allow,
    /// Ask the asker (deny if there is none).
    Ask,
    /// Do not run it; the reason is shown to the model.
    Deny(String),
    /// Park it for a later decision (the text says what is asked).
    Defer(String),
}

/// The reason given to the model when a call needs approval and no asker is configured.
pub const NO_ASKER_REASON: &str = "mutating tool calls need approval and there is no one to ask, \
so this call was denied (the user can allow such calls with --approve allow)";

impl ApprovalPolicy {
    /// The policy's verdict for a call of `tool_name`.
    pub fn decide(&self, tool_name: &str) -> PolicyDecision {
        self.decide_as(tool_name, is_mutating(tool_name))
    }

    /// The policy's verdict for a call of `tool_name`, told whether the tool is mutating (for
    /// tools the built-in list does not know, e.g. MCP tools classified by their annotations).
    pub fn decide_as(&self, tool_name: &str, mutating: bool) -> PolicyDecision {
        if !mutating {
            return PolicyDecision::Allow;
        }
        match self {
            ApprovalPolicy::Always => PolicyDecision::Allow,
            ApprovalPolicy::Mutating => PolicyDecision::Ask,
            ApprovalPolicy::Defer => PolicyDecision::Defer(format!(
                "`{tool_name}` changes files or runs commands and needs a person's approval"
            )),
            ApprovalPolicy::Never => PolicyDecision::Deny(format!(
                "`{tool_name}` changes files or runs commands, and this session does not allow \
                 that (approval policy \"deny\"); use read-only tools instead"
            )),
        }
    }
}

// The CLI spellings: `ask`, `deny`, `allow`, `defer`; the variant names read too.
crate::keywords! {
    ApprovalPolicy;
    /// The error of parsing an [`ApprovalPolicy`] from text.
    error ParsePolicyError: "approval policy";
    Mutating => "ask" | "mutating",
    Never => "deny" | "never",
    Always => "allow" | "always",
    Defer => "defer",
}

/// A boxed future resolving to an [`Approval`], returned by async askers.
pub type ApprovalFuture = Pin<Box<dyn Future<Output = Approval> + Send>>;

#[derive(Clone)]
enum Asker {
    /// Runs on Tokio's blocking pool (it may block on a terminal read).
    Blocking(Arc<dyn Fn(&ToolCallPart) -> Approval + Send + Sync>),
    Async(Arc<dyn Fn(ToolCallPart) -> ApprovalFuture + Send + Sync>),
}

/// Classifies a tool name as mutating (`Some(true)`), read-only (`Some(false)`) or unknown
/// (`None`, then the built-in [`MUTATING_TOOLS`](super::MUTATING_TOOLS) list decides).
pub type ToolClassifier = Arc<dyn Fn(&str) -> Option<bool> + Send + Sync>;

/// A dependency bundle for the built-in tools: the [`Workspace`], an [`ApprovalPolicy`] and an
/// optional *asker* consulted when the policy says "ask".
///
/// Its [`ToolDeps::before_tool`] applies the policy. When the policy asks and no asker is set,
/// the call is denied with [`NO_ASKER_REASON`]. A panicking asker is reported by the executor as
/// a failed approval check; the call does not run.
///
/// ```
/// use agentloop::builtin::{ApprovalPolicy, Workspace, WorkspaceDeps};
/// use agentloop::tooling::Approval;
///
/// let workspace = Workspace::new(std::env::temp_dir()).unwrap();
/// let deps = WorkspaceDeps::new(workspace, ApprovalPolicy::Mutating)
///     .with_asker(|call| {
///         // A real asker would prompt a person here (it runs on the blocking pool).
///         if call.tool_name == "shell" { Approval::deny("no commands today") } else { Approval::Allow }
///     });
/// assert_eq!(deps.policy(), ApprovalPolicy::Mutating);
/// ```
#[derive(Clone)]
pub struct WorkspaceDeps {
    workspace: Workspace,
    policy: ApprovalPolicy,
    asker: Option<Asker>,
    classifier: Option<ToolClassifier>,
    permissions: Arc<PermissionRules>,
}

impl fmt::Debug for WorkspaceDeps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let asker = match &self.asker {
            None => "none",
            Some(Asker::Blocking(_)) => "blocking",
            Some(Asker::Async(_)) => "async",
        };
        f.debug_struct("WorkspaceDeps")
            .field("workspace", &self.workspace)
            .field("policy", &self.policy)
            .field("asker", &asker)
            .field("permissions", &self.permissions)
            .finish()
    }
}

impl WorkspaceDeps {
    /// A bundle with no asker.
    pub fn new(workspace: Workspace, policy: ApprovalPolicy) -> Self {
        WorkspaceDeps {
            workspace,
            policy,
            asker: None,
            classifier: None,
            permissions: Arc::default(),
        }
    }

    /// Sets the permission rules consulted before the policy: a matching deny rule denies, a
    /// matching allow rule turns the policy's "ask" or "defer" into "run" (see
    /// [`PermissionRules`]).
    pub fn with_permissions(mut self, rules: PermissionRules) -> Self {
        self.permissions = Arc::new(rules);
        self
    }

    /// The permission rules.
    pub fn permissions(&self) -> &PermissionRules {
        &self.permissions
    }

    /// Sets a classifier for tools other than the built-in ones (e.g. an MCP toolset's
    /// annotation-based one): a tool it calls mutating is treated like `write_file`.
    pub fn with_tool_classifier(mut self, classifier: ToolClassifier) -> Self {
        self.classifier = Some(classifier);
        self
    }

    /// Sets a blocking asker (e.g. a terminal prompt). It runs on Tokio's blocking pool, so it
    /// may block for as long as a person takes to answer.
    pub fn with_asker(
        mut self,
        asker: impl Fn(&ToolCallPart) -> Approval + Send + Sync + 'static,
    ) -> Self {
        self.asker = Some(Asker::Blocking(Arc::new(asker)));
        self
    }

    /// Sets an async asker (e.g. one that sends the question to a UI and awaits the answer).
    pub fn with_async_asker<F, Fut>(mut self, asker: F) -> Self
    where
        F: Fn(ToolCallPart) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Approval> + Send + 'static,
    {
        self.asker = Some(Asker::Async(Arc::new(move |call| Box::pin(asker(call)))));
        self
    }

    /// The workspace the tools are confined to.
    pub fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    /// The approval policy.
    pub fn policy(&self) -> ApprovalPolicy {
        self.policy
    }

    /// Whether an asker is set.
    pub fn has_asker(&self) -> bool {
        self.asker.is_some()
    }

    /// Applies the permission rules, then the policy (and the asker, if either asks) to `call`.
    pub async fn approve(&self, call: &ToolCallPart) -> Approval {
        let name = call.tool_name.as_str();
        let mutating = self
            .classifier
            .as_ref()
            .and_then(|c| c(name))
            .unwrap_or_else(|| is_mutating(name));
        let verdict = if self.permissions.is_empty() {
            RuleVerdict::NoMatch
        } else {
            let arguments = match &call.arguments {
                crate::transcript::ToolArguments::Json(value) => value.clone(),
                crate::transcript::ToolArguments::Unparsed(_) => serde_json::Value::Null,
            };
            self.permissions
                .check(name, &arguments, self.workspace.root())
        };
        let decision = self.policy.decide_as(name, mutating);
        match (verdict, decision) {
            (RuleVerdict::Deny(reason), _) => Approval::Deny(reason),
            (_, PolicyDecision::Deny(reason)) => Approval::Deny(reason),
            (RuleVerdict::Ask(why), _) => match &self.asker {
                None => Approval::deny(format!("{why}; there is no one to ask, so it was denied")),
                Some(_) => self.ask(call).await,
            },
            (RuleVerdict::Allow, PolicyDecision::Ask | PolicyDecision::Defer(_)) => Approval::Allow,
            (_, PolicyDecision::Allow) => Approval::Allow,
            (_, PolicyDecision::Defer(reason)) => Approval::Defer(reason),
            (_, PolicyDecision::Ask) => match &self.asker {
                None => Approval::deny(NO_ASKER_REASON),
                Some(_) => self.ask(call).await,
            },
        }
    }

    /// Asks the asker (there is one: the caller checked).
    async fn ask(&self, call: &ToolCallPart) -> Approval {
        match &self.asker {
            None => Approval::deny(NO_ASKER_REASON),
            Some(Asker::Async(ask)) => ask(call.clone()).await,
            Some(Asker::Blocking(ask)) => {
                let ask = ask.clone();
                let call = call.clone();
                match tokio::task::spawn_blocking(move || ask(&call)).await {
                    Ok(approval) => approval,
                    // Re-raise so the executor reports "approval check failed".
                    Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                    Err(_) => Approval::deny("the approval prompt was cancelled"),
                }
            }
        }
    }
}

impl ToolDeps for WorkspaceDeps {
    fn before_tool(&self, call: &ToolCallPart) -> impl Future<Output = Approval> + Send {
        self.approve(call)
    }
}
