//! The "tool guidance" section of the system prompt, rendered from each tool's
//! [`guidelines`](crate::tooling::ToolSpec::guidelines) and
//! [`snippet`](crate::tooling::ToolSpec::snippet) (docs/ARCHITECTURE.md, "Tools and the executor").
//!
//! The output is deterministic (registration order, no maps, no timestamps) so the system prompt
//! is byte-identical from run to run and provider prompt caches keep hitting. A guideline several
//! tools share is rendered once, under the first tool that has it. This module only renders text;
//! placing it in the system prompt is the agent loop's job.

use std::collections::HashSet;

use super::registry::Registry;
use super::search::LoadedTools;
use super::spec::ToolSpec;

/// The heading that opens the section.
const HEADING: &str = "## Tool guidance";

/// Renders the tool-guidance section for every tool of the registry (deferred ones included), or
/// `None` when no tool has guidelines or a snippet.
///
/// Tools appear in registration order, each under its name, with its guidelines as a list and its
/// snippet after `Example:`. A guideline whose text (trimmed) was already rendered for an earlier
/// tool is skipped; a tool left with nothing to show is skipped entirely.
///
/// ```
/// use agentloop::tooling::{render_guidance, Deps, Registry, ToolContext, ToolSpec};
/// use serde_json::Value;
///
/// let tool = |name: &str| {
///     ToolSpec::<Deps>::builder(name, "A tool.")
///         .guideline("Paths are relative to the workspace root.")
///         .blocking_handler(|_ctx: ToolContext<Deps>, _args: Value| "ok")
/// };
/// let registry = Registry::new([
///     tool("read_file").snippet(r#"read_file({"path": "src/main.rs"})"#).build().unwrap(),
///     tool("write_file").guideline("Never overwrite without reading first.").build().unwrap(),
/// ])
/// .unwrap();
/// let expected = [
///     "## Tool guidance",
///     "",
///     "### read_file",
///     "- Paths are relative to the workspace root.",
///     "",
///     "Example:",
///     r#"read_file({"path": "src/main.rs"})"#,
///     "",
///     "### write_file",
///     "- Never overwrite without reading first.",
/// ];
/// assert_eq!(render_guidance(&registry).unwrap(), expected.join("\n"));
/// ```
pub fn render_guidance<D>(registry: &Registry<D>) -> Option<String> {
    render(registry.specs())
}

/// Like [`render_guidance`], but only for the tools the model can currently see: tools that are
/// not deferred, the deferred tools in `loaded`, and the `local_tool_search` tool.
pub fn render_guidance_for<D>(registry: &Registry<D>, loaded: &LoadedTools) -> Option<String> {
    render(
        registry
            .specs()
            .filter(|s| s.local_tool_search() || registry.is_visible(s.name(), loaded)),
    )
}

fn render<'a, D: 'a>(specs: impl Iterator<Item = &'a ToolSpec<D>>) -> Option<String> {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut sections: Vec<String> = Vec::new();
    for spec in specs {
        let rules: Vec<&str> = spec
            .guidelines()
            .iter()
            .map(|g| g.trim())
            .filter(|g| !g.is_empty() && seen.insert(g))
            .collect();
        let snippet = spec.snippet().map(str::trim).filter(|s| !s.is_empty());
        if rules.is_empty() && snippet.is_none() {
            continue;
        }
        let mut section = format!("### {}", spec.name());
        for rule in &rules {
            section.push_str("\n- ");
            // Continuation lines are indented under their bullet.
            section.push_str(&rule.replace('\n', "\n  "));
        }
        if let Some(snippet) = snippet {
            if !rules.is_empty() {
                section.push('\n');
            }
            section.push_str("\nExample:\n");
            section.push_str(snippet);
        }
        sections.push(section);
    }
    if sections.is_empty() {
        return None;
    }
    Some(format!("{HEADING}\n\n{}", sections.join("\n\n")))
}
