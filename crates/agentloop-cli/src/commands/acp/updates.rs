//! Agent events as ACP `session/update` notifications: text and thinking deltas become
//! message and thought chunks, tool calls become `tool_call` / `tool_call_update` with a kind,
//! the paths they touch, and for file edits a diff (the whole file before and after).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use agent_client_protocol::{
    ContentBlock, ContentChunk, Diff, SessionUpdate, TextContent, ToolCall, ToolCallContent,
    ToolCallLocation, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use agentloop::agent::AgentEvent;
use agentloop::builtin::Workspace;
use agentloop::model::ModelDelta;
use agentloop::transcript::{ToolArguments, ToolCallPart, ToolResultPart};
use serde_json::Value;

use super::outbound::Queue;

/// The most characters of a tool result shown in the editor (the model gets it whole).
const MAX_RESULT_CHARS: usize = 20_000;

/// Turns one session's events into updates; shared by the event callback and the approval
/// asker, which must announce a call before asking about it.
#[derive(Clone)]
pub struct Updates {
    session_id: String,
    root: PathBuf,
    queue: Queue,
    announced: Arc<Mutex<HashSet<String>>>,
    /// Where an edit's current text is read from for its diff; without it, calls announced
    /// here show no diff.
    workspace: Option<Workspace>,
}

impl Updates {
    /// Updates for `session_id`, whose workspace is `root`.
    pub fn new(session_id: &str, root: &Path, queue: Queue) -> Updates {
        Updates {
            session_id: session_id.to_owned(),
            root: root.to_path_buf(),
            queue,
            announced: Arc::default(),
            workspace: None,
        }
    }

    /// Shows the diff of an edit announced here (not asked about first) against `workspace`'s
    /// file on disk — unless the workspace reads through the editor, whose buffer may differ
    /// from the disk: then such a call shows no diff rather than a wrong one (the approval
    /// asker announces edits with the buffer's text before they run).
    pub fn with_workspace(mut self, workspace: Workspace) -> Updates {
        self.workspace = Some(workspace);
        self
    }

    /// Sends `update`.
    pub fn send(&self, update: SessionUpdate) {
        self.queue.update(&self.session_id, update);
    }

    /// The updates of one agent event.
    pub fn on_event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::MessageUpdate { delta, .. } => match delta {
                ModelDelta::Text { delta } => {
                    self.send(SessionUpdate::AgentMessageChunk(chunk(delta)))
                }
                ModelDelta::Thinking { delta } => {
                    self.send(SessionUpdate::AgentThoughtChunk(chunk(delta)));
                }
                _ => {}
            },
            AgentEvent::ToolExecutionStart { call } => self.started(call),
            AgentEvent::ToolExecutionEnd { call, result, .. } => {
                self.announce(call, ToolCallStatus::InProgress);
                self.send(SessionUpdate::ToolCallUpdate(finished(result)));
            }
            _ => {}
        }
    }

    /// A call starts running: announced now, or (asked about before) marked in progress.
    fn started(&self, call: &ToolCallPart) {
        if !self.announce(call, ToolCallStatus::InProgress) {
            self.send(SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(
                call.id.clone(),
                ToolCallUpdateFields::new().status(ToolCallStatus::InProgress),
            )));
        }
    }

    /// Sends the `tool_call` of `call` with `status` unless it was sent already; true when it
    /// was sent now.
    pub fn announce(&self, call: &ToolCallPart, status: ToolCallStatus) -> bool {
        self.announce_with(call, status, self.disk_text(call))
    }

    /// [`Updates::announce`], an edit's diff starting from `old` (see [`describe_with`]).
    pub fn announce_with(
        &self,
        call: &ToolCallPart,
        status: ToolCallStatus,
        old: Option<Option<String>>,
    ) -> bool {
        let fresh = self
            .announced
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(call.id.clone());
        if fresh {
            self.send(SessionUpdate::ToolCall(
                describe_with(call, &self.root, old).status(status),
            ));
        }
        fresh
    }

    /// The text on disk of the file an edit changes, for its diff: `None` (no diff) for other
    /// calls, without a workspace, when the workspace reads through the editor, and for a path
    /// the workspace refuses, a file too large or not text; `Some(None)` for a new file.
    fn disk_text(&self, call: &ToolCallPart) -> Option<Option<String>> {
        let workspace = self.workspace.as_ref()?;
        if workspace.text_files().is_some_and(|f| f.reads()) {
            return None;
        }
        let path = edited_path(call)?;
        crate::ui::prompt::current_text(Some(workspace), path).ok()
    }
}

/// A text chunk.
pub fn chunk(text: &str) -> ContentChunk {
    ContentChunk::new(ContentBlock::Text(TextContent::new(text)))
}

/// The path argument of an edit (`write_file`, `edit_file`); `None` for other calls.
pub fn edited_path(call: &ToolCallPart) -> Option<&str> {
    if !matches!(call.tool_name.as_str(), "write_file" | "edit_file") {
        return None;
    }
    match &call.arguments {
        ToolArguments::Json(args) => args.get("path")?.as_str(),
        ToolArguments::Unparsed(_) => None,
    }
}

/// The `tool_call` of `call`: title, kind, locations and raw input, without a diff.
pub fn describe(call: &ToolCallPart, root: &Path) -> ToolCall {
    describe_with(call, root, None)
}

/// [`describe`], with an edit's diff when its file's current text is known: `old` is
/// `Some(Some(text))` for the text the edit starts from (the editor's buffer or the disk, as
/// the workspace reads), `Some(None)` for a file that does not exist yet, `None` when unknown
/// (no diff is shown rather than one against the wrong text, or a file the workspace refuses).
pub fn describe_with(call: &ToolCallPart, root: &Path, old: Option<Option<String>>) -> ToolCall {
    let args = arguments(call);
    let path = args
        .get("path")
        .and_then(Value::as_str)
        .map(|p| resolve(root, p));
    let mut tool = ToolCall::new(call.id.clone(), title(call, &args))
        .kind(kind(&call.tool_name))
        .raw_input(args.clone());
    if let Some(path) = &path {
        tool = tool.locations(vec![ToolCallLocation::new(path.clone())]);
        if let Some(diff) = old.and_then(|old| diff(&call.tool_name, &args, path, old)) {
            tool = tool.content(vec![ToolCallContent::Diff(diff)]);
        }
    }
    tool
}

/// The fields of [`describe_with`], for a permission request's tool call.
pub fn fields(
    call: &ToolCallPart,
    root: &Path,
    old: Option<Option<String>>,
) -> ToolCallUpdateFields {
    let tool = describe_with(call, root, old);
    ToolCallUpdateFields::new()
        .title(tool.title)
        .kind(tool.kind)
        .status(ToolCallStatus::Pending)
        .locations(tool.locations)
        .content(tool.content)
        .raw_input(tool.raw_input)
}

/// The `tool_call_update` that closes a call: completed or failed, with its result text.
pub fn finished(result: &ToolResultPart) -> ToolCallUpdate {
    let status = if result.is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    let text: String = result.content.chars().take(MAX_RESULT_CHARS).collect();
    ToolCallUpdate::new(
        result.call_id.clone(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![ToolCallContent::from(ContentBlock::Text(
                TextContent::new(text),
            ))])
            .raw_output(Value::String(result.content.clone())),
    )
}

/// What kind of work a tool does, for the editor's icon and grouping.
pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "read_file" | "list_dir" => ToolKind::Read,
        "write_file" | "edit_file" => ToolKind::Edit,
        "shell" => ToolKind::Execute,
        "grep" | "find_files" => ToolKind::Search,
        "fetch" | "web_fetch" | "web_search" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

fn arguments(call: &ToolCallPart) -> Value {
    match &call.arguments {
        ToolArguments::Json(value) => value.clone(),
        ToolArguments::Unparsed(raw) => Value::String(raw.clone()),
    }
}

fn title(call: &ToolCallPart, args: &Value) -> String {
    let detail = ["path", "command", "pattern", "url"]
        .iter()
        .find_map(|key| args.get(key).and_then(Value::as_str));
    match detail {
        Some(detail) => format!(
            "{} {}",
            call.tool_name,
            crate::ui::safe_text::visible_line(detail)
        ),
        None => call.tool_name.clone(),
    }
}

/// A tool's path argument as an absolute path (relative ones are inside the workspace).
fn resolve(root: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}

/// The diff an edit would make from `old` (the file's current text, `None` when it does not
/// exist): `write_file` replaces the whole text, `edit_file` its one occurrence of `old_text`.
/// `None` for other tools, and for an edit whose text is not in the file (the tool will fail
/// and say why).
fn diff(tool: &str, args: &Value, path: &Path, old: Option<String>) -> Option<Diff> {
    let new = match tool {
        "write_file" => args.get("content")?.as_str()?.to_owned(),
        "edit_file" => {
            let from = args.get("old_text")?.as_str()?;
            let to = args.get("new_text")?.as_str()?;
            let current = old.as_deref()?;
            if !current.contains(from) {
                return None;
            }
            current.replacen(from, to, 1)
        }
        _ => return None,
    };
    Some(Diff::new(path.to_path_buf(), new).old_text(old))
}
