//! The tool-guidance section of the system prompt: only tools with guidelines or a snippet, in
//! registration order, a shared guideline rendered once, deterministic, `None` when empty.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentloop::tool;
use agentloop::tooling::{
    Deps, LoadedTools, Registry, ToolContext, ToolSpec, ToolSpecBuilder, render_guidance,
    render_guidance_for,
};
use serde_json::Value;

fn builder(name: &str) -> ToolSpecBuilder<Deps> {
    ToolSpec::<Deps>::builder(name, "A tool.")
        .blocking_handler(|_ctx: ToolContext<Deps>, _args: Value| "ok")
}

/// Read a file.
#[tool(
    guidelines = ["Paths are relative to the workspace root.", "Read before you write."],
    snippet = r#"read_file({"path": "src/lib.rs"})"#
)]
fn read_file(path: String) -> String {
    path
}

/// Write a file.
#[tool(guidelines = ["Read before you write.", "Never write outside the workspace."])]
fn write_file(path: String, text: String) -> String {
    format!("{path}: {}", text.len())
}

/// List a directory.
#[tool]
fn list_dir(path: String) -> String {
    path
}

/// Delete a file.
#[tool(guidelines = ["Paths are relative to the workspace root."])]
fn delete_file(path: String) -> String {
    path
}

fn registry() -> Registry<Deps> {
    Registry::new([
        list_dir_tool(),
        read_file_tool(),
        write_file_tool(),
        delete_file_tool(),
        builder("multi_line")
            .guideline("First line.\nSecond line.")
            .snippet("  multi_line({})  ")
            .build()
            .unwrap(),
    ])
    .unwrap()
}

#[test]
fn renders_tools_with_guidance_in_registration_order_without_repeats() {
    let text = render_guidance(&registry()).unwrap();
    let expected = "\
## Tool guidance

### read_file
- Paths are relative to the workspace root.
- Read before you write.

Example:
read_file({\"path\": \"src/lib.rs\"})

### write_file
- Never write outside the workspace.

### multi_line
- First line.
  Second line.

Example:
multi_line({})";
    assert_eq!(text, expected);
    // `list_dir` has nothing to say; `delete_file`'s only rule was already given for `read_file`.
    assert!(!text.contains("list_dir"));
    assert!(!text.contains("delete_file"));
}

#[test]
fn rendering_is_deterministic() {
    let first = render_guidance(&registry());
    for _ in 0..5 {
        assert_eq!(render_guidance(&registry()), first);
    }
}

#[test]
fn nothing_to_render_is_none() {
    assert_eq!(render_guidance(&Registry::<Deps>::default()), None);
    let plain = Registry::new([list_dir_tool::<Deps>(), builder("b").build().unwrap()]).unwrap();
    assert_eq!(render_guidance(&plain), None);
    let blank =
        Registry::new([builder("b").guideline("  ").snippet("\n").build().unwrap()]).unwrap();
    assert_eq!(render_guidance(&blank), None);
}

#[test]
fn a_snippet_alone_is_rendered() {
    let registry = Registry::new([builder("only_snippet")
        .snippet("only_snippet({})")
        .build()
        .unwrap()])
    .unwrap();
    assert_eq!(
        render_guidance(&registry).unwrap(),
        "## Tool guidance\n\n### only_snippet\nExample:\nonly_snippet({})"
    );
}

#[test]
fn visible_variant_leaves_out_deferred_tools_until_loaded() {
    let registry = Registry::new([
        builder("plain").guideline("Plain rule.").build().unwrap(),
        builder("later")
            .guideline("Later rule.")
            .deferred(true)
            .build()
            .unwrap(),
        builder("search")
            .guideline("Search rule.")
            .local_tool_search(true)
            .build()
            .unwrap(),
    ])
    .unwrap();
    let mut loaded = LoadedTools::new();
    let before = render_guidance_for(&registry, &loaded).unwrap();
    assert!(before.contains("Plain rule.") && before.contains("Search rule."));
    assert!(!before.contains("Later rule."), "{before}");

    registry.load_from_search_result(&mut loaded, ["later"]);
    let after = render_guidance_for(&registry, &loaded).unwrap();
    assert!(after.contains("### later\n- Later rule."), "{after}");
    // The full variant always includes every tool.
    assert!(render_guidance(&registry).unwrap().contains("Later rule."));
}
