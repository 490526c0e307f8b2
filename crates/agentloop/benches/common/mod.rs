//! What several benches share: the `echo` tool their agents call, a scratch directory in the
//! system temp directory, and the session benches' messages (a typical assistant turn and tool
//! result, a conversation of them).
// Each bench compiles this module whole and uses only some of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use agentloop::tooling::{Deps, ToolContext, ToolSpec};
use agentloop::transcript::{Message, Part, StopReason, ToolCallPart, ToolResultPart, Usage};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct EchoArgs {
    text: String,
}

/// A tool that returns its `text` argument.
pub fn echo() -> ToolSpec<Deps> {
    ToolSpec::<Deps>::builder("echo", "Return the supplied text.")
        .parameters(json!({
            "type": "object",
            "properties": {"text": {"type": "string"}},
            "required": ["text"],
            "additionalProperties": false
        }))
        .handler(|_c: ToolContext<Deps>, a: EchoArgs| async move { a.text })
        .build()
        .unwrap()
}

/// An empty directory `agentloop-bench-{name}-{pid}` in the system temp directory (so on disk
/// or tmpfs as `$TMPDIR` is: check `df $TMPDIR`), removed with what it holds on drop. One left
/// by an earlier run that was killed is emptied first.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let dir =
            std::env::temp_dir().join(format!("agentloop-bench-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A typical assistant turn: some text and one tool call (~600 bytes of JSON), with the model,
/// provider and usage a real turn records.
pub fn assistant(i: usize) -> Message {
    let mut m = Message::assistant(
        vec![
            Part::text(format!(
                "Step {i}: I will read the file and then summarise what it says. {}",
                "Lorem ipsum dolor sit amet. ".repeat(12)
            )),
            Part::ToolCall(ToolCallPart::new(
                format!("call-{i}"),
                "read_file",
                json!({"path": format!("src/module_{i}.rs"), "offset": 0, "limit": 200}),
            )),
        ],
        StopReason::ToolUse,
    );
    m.model = Some("gpt-bench".into());
    m.provider = Some("openai_chat".into());
    m.usage = Some(Usage {
        input_tokens: 12_000 + i as u64,
        output_tokens: 180,
        cache_read_tokens: 11_000,
        cache_write_tokens: 0,
        cost_usd: Some(0.0123),
    });
    m
}

/// The result of the tool call in `assistant(i)`: ~1.5 KB of text.
pub fn tool_result(i: usize) -> ToolResultPart {
    ToolResultPart::success(
        format!("call-{i}"),
        "read_file",
        format!("fn f{i}() {{}}\n").repeat(100),
    )
}

/// A conversation of `len` messages: a prompt, an assistant turn (`assistant`), its tool's
/// result (`tool_result`), and again.
pub fn conversation(len: usize) -> Vec<Message> {
    let mut messages = Vec::with_capacity(len);
    let mut i = 0;
    while messages.len() < len {
        match i % 3 {
            0 => messages.push(Message::user(format!("Please continue with step {i}."))),
            1 => messages.push(assistant(i)),
            _ => messages.push(Message::tool_result(tool_result(i - 1))),
        }
        i += 1;
    }
    messages
}
