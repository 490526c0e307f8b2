//! The crate's layering, checked: every top-level module sits in one layer of [`LAYERS`], and a
//! module imports (`crate::<module>` in code, not in comments) only modules of its own layer or
//! below, with no cycle among them. A new module must be placed in the table; an import that
//! points upward or closes a cycle fails this test with the file and line that does it.
//!
//! This reads the source files rather than compiled metadata on purpose: it is cheap, needs no
//! extra tool, and what it checks — the `crate::` paths a reader sees — is what the layering is for.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom up. `lib.rs` and `docs/ARCHITECTURE.md` describe the same order.
const LAYERS: &[&[&str]] = &[
    // Shared types and helpers every layer speaks: messages, JSON helpers, span names, prices,
    // the builder-setter and keyword macros, the `Debug` placeholder for opaque fields.
    &[
        "json",
        "transcript",
        "telemetry",
        "cost",
        "setters",
        "keywords",
        "opaque",
    ],
    // What the loop is made of: tools and their executor, the model interface.
    &["tooling", "model", "macro_support"],
    // Implementations of those interfaces: provider adapters, the built-in coding tools.
    &["providers", "builtin"],
    // The loop itself (with typed output and compaction).
    &["agent"],
    // What is built on the loop: durable sessions, the synchronous view, workspace checkpoints.
    &["session", "blocking", "checkpoint"],
    // The fuzz targets' entry points and the prelude reach into everything.
    &["fuzzing", "prelude"],
];

/// One `crate::<module>` use: the module used, where.
struct Use {
    target: String,
    at: String,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The top-level modules (file or directory names under `src/`, without `lib.rs` and this test).
fn modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let name = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        if name != "lib" && name != "layers_tests" {
            out.insert(name);
        }
    }
    out
}

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            rust_files(&entry.path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_path_buf());
    }
}

/// Every `crate::<module>` in the code (comment lines skipped) of `module`'s files.
fn uses_of(src: &Path, module: &str, known: &BTreeSet<String>) -> Vec<Use> {
    let mut files = Vec::new();
    rust_files(&src.join(module), &mut files);
    rust_files(&src.join(format!("{module}.rs")), &mut files);
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            for (i, _) in code.match_indices("crate::") {
                let rest = &code[i + "crate::".len()..];
                let target: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if target != module && known.contains(&target) {
                    let at = format!("{}:{}", file.display(), n + 1);
                    out.push(Use { target, at });
                }
            }
        }
    }
    out
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&module))
}

/// A cycle through `graph` reachable from `start`, as the list of modules on it.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = path.iter().position(|p| p == node) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, path, done) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|start| visit(start, graph, &mut Vec::new(), &mut done))
}

#[test]
fn every_module_is_in_a_layer_and_imports_only_downward_without_cycles() {
    let src = src_dir();
    let known = modules(&src);
    assert!(
        known.contains("agent"),
        "no modules found under {}",
        src.display()
    );
    let mut problems = Vec::new();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for module in &known {
        let Some(layer) = layer_of(module) else {
            problems.push(format!(
                "module `{module}` is in no layer of LAYERS: place it"
            ));
            continue;
        };
        for used in uses_of(&src, module, &known) {
            if layer_of(&used.target).is_some_and(|target| target > layer) {
                problems.push(format!(
                    "`{module}` imports `{}` from a higher layer at {}",
                    used.target, used.at
                ));
            }
            graph.entry(module.clone()).or_default().insert(used.target);
        }
    }
    if let Some(cycle) = find_cycle(&graph) {
        problems.push(format!("import cycle: {}", cycle.join(" -> ")));
    }
    assert!(
        problems.is_empty(),
        "layering broken:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_finds_a_cycle() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    graph.entry("a".into()).or_default().insert("b".into());
    graph.entry("b".into()).or_default().insert("c".into());
    assert!(find_cycle(&graph).is_none());
    graph.entry("c".into()).or_default().insert("a".into());
    let cycle = find_cycle(&graph).unwrap_or_default();
    assert_eq!(cycle.first(), cycle.last());
    assert_eq!(cycle.len(), 4, "{cycle:?}");
}
