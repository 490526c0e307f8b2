//! Deferred tools and client-side tool search (docs/ARCHITECTURE.md, "Tools and the executor"): which tools the model may see
//! ([`LoadedTools`]), what a search result loads ([`SearchLoad`]), and a ready-made keyword
//! search tool ranking the deferred tools by BM25 ([`bm25_tool_search`], [`Bm25Index`]).
//!
//! A *deferred* tool is registered but not sent to the model until a tool search loads it; the
//! registry's single `local_tool_search` tool answers those searches with a list of tool names.
//! This module only decides visibility and ranks; sending schemas and routing the provider's
//! search requests to the search tool is the adapters' and the agent loop's job.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::registry::{Registry, ToolSchema};
use super::spec::{ToolContext, ToolSpec};
use crate::json::schema::closed_object;

/// The name of the tool [`bm25_tool_search`] builds.
pub const TOOL_SEARCH_NAME: &str = "tool_search";

/// The deferred tools the model has loaded through tool search during one conversation.
///
/// Visibility is per conversation, so this set lives with the run (the agent loop, a session),
/// not in the [`Registry`], which stays shareable and immutable. It serializes as a sorted JSON
/// array of names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LoadedTools {
    names: BTreeSet<String>,
}

impl LoadedTools {
    /// No tool loaded.
    pub fn new() -> Self {
        LoadedTools::default()
    }

    /// Whether `name` has been loaded.
    pub fn contains(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    /// Marks a tool loaded; `false` when it already was. Prefer
    /// [`Registry::load_from_search_result`], which only loads deferred tools that exist.
    pub fn insert(&mut self, name: impl Into<String>) -> bool {
        self.names.insert(name.into())
    }

    /// The loaded names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.iter().map(String::as_str)
    }

    /// How many tools are loaded.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Whether no tool is loaded.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// What applying one search result did (see [`Registry::load_from_search_result`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SearchLoad {
    /// Deferred tools the result named, in result order, without repeats: visible from now on
    /// (including ones an earlier search had already loaded).
    pub loaded: Vec<String>,
    /// Named tools that are not deferred: always visible, nothing to load.
    pub already_visible: Vec<String>,
    /// Names that match no loadable tool (not registered, or the search tool itself): ignored.
    pub unknown: Vec<String>,
}

impl SearchLoad {
    /// A one-line note about ignored names, for logs or for the model; `None` when every name
    /// was known.
    pub fn note(&self) -> Option<String> {
        if self.unknown.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .unknown
            .iter()
            .map(|n| Value::String(n.clone()).to_string())
            .collect();
        Some(format!(
            "Ignored unknown tool name{} from the tool search result: {}.",
            if names.len() == 1 { "" } else { "s" },
            names.join(", ")
        ))
    }
}

/// Reads the tool names out of a search tool's output: a JSON array of names (what
/// [`bm25_tool_search`] returns), or an object whose `"tools"` (or `"names"`) array holds names or
/// objects with a `"name"`. `None` when the output has none of these shapes.
pub fn search_result_names(output: &str) -> Option<Vec<String>> {
    let value: Value = serde_json::from_str(output).ok()?;
    let list = match &value {
        Value::Array(items) => items,
        Value::Object(map) => match map.get("tools").or_else(|| map.get("names")) {
            Some(Value::Array(items)) => items,
            _ => return None,
        },
        _ => return None,
    };
    list.iter()
        .map(|item| match item {
            Value::String(name) => Some(name.clone()),
            Value::Object(o) => o.get("name").and_then(Value::as_str).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// A BM25 keyword index over tools' names and descriptions.
///
/// Text is split into lower-case words at every non-alphanumeric character and at camelCase
/// boundaries, a short list of English stop words is dropped, and a plural `s` is stripped
/// (`files` matches `file`). Name words count twice: a tool named `send_email` is a better match
/// for "email" than one that merely mentions email. Scores use the usual `k1 = 1.2`, `b = 0.75`.
#[derive(Clone, Debug, Default)]
pub struct Bm25Index {
    docs: Vec<IndexedTool>,
    doc_freq: HashMap<String, usize>,
    avg_len: f64,
}

#[derive(Clone, Debug)]
struct IndexedTool {
    name: String,
    term_freq: HashMap<String, u32>,
    len: usize,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;
const NAME_WEIGHT: u32 = 2;

impl Bm25Index {
    /// Indexes `tools` (their order breaks ties between equal scores).
    pub fn new<'a>(tools: impl IntoIterator<Item = &'a ToolSchema>) -> Self {
        let mut docs = Vec::new();
        let mut doc_freq: HashMap<String, usize> = HashMap::new();
        for tool in tools {
            let mut term_freq: HashMap<String, u32> = HashMap::new();
            for word in tokenize(&tool.name) {
                *term_freq.entry(word).or_default() += NAME_WEIGHT;
            }
            for word in tokenize(&tool.description) {
                *term_freq.entry(word).or_default() += 1;
            }
            for word in term_freq.keys() {
                *doc_freq.entry(word.clone()).or_default() += 1;
            }
            let len = term_freq.values().map(|&n| n as usize).sum();
            docs.push(IndexedTool {
                name: tool.name.clone(),
                term_freq,
                len,
            });
        }
        let avg_len = if docs.is_empty() {
            0.0
        } else {
            docs.iter().map(|d| d.len as f64).sum::<f64>() / docs.len() as f64
        };
        Bm25Index {
            docs,
            doc_freq,
            avg_len,
        }
    }

    /// Indexes the registry's deferred tools.
    pub fn from_deferred<D>(registry: &Registry<D>) -> Self {
        Bm25Index::new(registry.deferred_schemas())
    }

    /// Number of indexed tools.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The names of at most `top_k` tools matching `query`, best first, with their scores. Tools
    /// sharing no word with the query are never returned.
    pub fn search(&self, query: &str, top_k: usize) -> Vec<(&str, f64)> {
        let mut words = tokenize(query);
        words.sort();
        words.dedup();
        let n = self.docs.len() as f64;
        let mut scored: Vec<(usize, f64)> = self
            .docs
            .iter()
            .enumerate()
            .filter_map(|(i, doc)| {
                let score: f64 = words
                    .iter()
                    .filter_map(|w| {
                        let tf = f64::from(*doc.term_freq.get(w)?);
                        let df = self.doc_freq.get(w).copied().unwrap_or(0) as f64;
                        let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                        let norm = 1.0 - B + B * doc.len as f64 / self.avg_len.max(1.0);
                        Some(idf * tf * (K1 + 1.0) / (tf + K1 * norm))
                    })
                    .sum();
                (score > 0.0).then_some((i, score))
            })
            .collect();
        // Stable sort: equal scores keep registration order.
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored
            .into_iter()
            .take(top_k)
            .map(|(i, score)| (self.docs[i].name.as_str(), score))
            .collect()
    }

    /// A `local_tool_search` tool named [`TOOL_SEARCH_NAME`] answering searches from this index
    /// with a JSON array of at most `top_k` names (the caller may ask for fewer with `limit`).
    pub fn into_tool<D: Send + Sync + 'static>(self, top_k: usize) -> ToolSpec<D> {
        let top_k = top_k.max(1);
        let description = format!(
            "Search the additional tools that are available but not loaded yet, by keywords \
             describing the capability you need. Returns the names of the best matches (at most \
             {top_k}), which become callable. Tools searchable this way: {}.",
            if self.docs.is_empty() {
                "(none)".to_owned()
            } else {
                self.docs
                    .iter()
                    .map(|d| d.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
        let index = Arc::new(self);
        let builder = ToolSpec::<D>::builder(TOOL_SEARCH_NAME, description)
            .parameters(closed_object(
                json!({
                    "query": {
                        "type": "string",
                        "minLength": 1,
                        "description": "Keywords describing the capability you need."
                    },
                    "limit": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": top_k,
                        "description": "At most this many tool names (default and cap: the tool's own limit)."
                    }
                }),
                &["query"],
            ))
            .handler(move |_ctx: ToolContext<D>, args: SearchArgs| {
                let index = index.clone();
                async move {
                    let limit = args.limit.map_or(top_k, |l| l.clamp(1, top_k));
                    let names: Vec<&str> = index
                        .search(&args.query, limit)
                        .into_iter()
                        .map(|(name, _)| name)
                        .collect();
                    Value::from(names)
                }
            })
            .local_tool_search(true);
        match builder.build() {
            Ok(spec) => spec,
            // A constant valid name, a non-empty description, an object schema and a handler.
            Err(e) => unreachable!("the BM25 tool-search spec is valid by construction: {e}"),
        }
    }
}

#[derive(Deserialize)]
struct SearchArgs {
    query: String,
    limit: Option<usize>,
}

/// A ready-made `local_tool_search` tool ranking the registry's *deferred* tools by BM25 over
/// their names and descriptions; it returns a JSON array of at most `top_k` names, best first.
///
/// Build it after registering the deferred tools (it indexes a snapshot of them), then add it to
/// the same registry: `registry.add(bm25_tool_search(&registry, 5))?`. Feed its output to
/// [`Registry::load_from_search_result`] (with [`search_result_names`]).
///
/// ```
/// use agentloop::tooling::{
///     bm25_tool_search, search_result_names, Deps, LoadedTools, Registry, ToolContext, ToolSpec,
/// };
/// use serde_json::{json, Value};
/// use std::sync::Arc;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let tool = |name: &str, description: &str, deferred: bool| {
///     ToolSpec::<Deps>::builder(name, description)
///         .deferred(deferred)
///         .blocking_handler(|_ctx: ToolContext<Deps>, _args: Value| "ok")
///         .build()
///         .unwrap()
/// };
/// let mut registry = Registry::new([
///     tool("read_file", "Read a text file.", false),
///     tool("send_email", "Send an email message to a recipient.", true),
///     tool("create_invoice", "Create an invoice for a customer.", true),
/// ])
/// .unwrap();
/// // Built after the deferred tools are registered: it indexes their names and descriptions.
/// registry.add(bm25_tool_search(&registry, 3)).unwrap();
///
/// let names = |schemas: Vec<&agentloop::tooling::ToolSchema>| -> Vec<String> {
///     schemas.iter().map(|s| s.name.clone()).collect()
/// };
/// let mut loaded = LoadedTools::new();
/// assert_eq!(names(registry.visible_schemas(&loaded)), ["read_file"]);
///
/// // The model searches; the search tool answers with names; those tools get loaded.
/// let search = registry.tool_search().unwrap();
/// let out = search
///     .call(Arc::new(Deps::new()), json!({"query": "email someone"}))
///     .await
///     .unwrap();
/// assert_eq!(out.content, r#"["send_email"]"#);
/// let found = search_result_names(&out.content).unwrap();
/// let load = registry.load_from_search_result(&mut loaded, &found);
/// assert_eq!(load.loaded, ["send_email"]);
/// assert_eq!(names(registry.visible_schemas(&loaded)), ["read_file", "send_email"]);
/// # }
/// ```
pub fn bm25_tool_search<D: Send + Sync + 'static>(
    registry: &Registry<D>,
    top_k: usize,
) -> ToolSpec<D> {
    Bm25Index::from_deferred(registry).into_tool(top_k)
}

const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it", "of",
    "on", "or", "that", "the", "this", "to", "with",
];

/// Lower-case words: split at non-alphanumerics and camelCase boundaries, stop words dropped,
/// a plural `s` stripped.
fn tokenize(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    for chunk in text.split(|c: char| !c.is_alphanumeric()) {
        let mut current = String::new();
        let mut prev_lower = false;
        for c in chunk.chars() {
            if c.is_uppercase() && prev_lower && !current.is_empty() {
                words.push(std::mem::take(&mut current));
            }
            prev_lower = c.is_lowercase() || c.is_numeric();
            current.extend(c.to_lowercase());
        }
        if !current.is_empty() {
            words.push(current);
        }
    }
    words
        .into_iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .map(|w| {
            if w.chars().count() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w[..w.len() - 1].to_owned()
            } else {
                w
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_at_case_and_punctuation() {
        assert_eq!(
            tokenize("readFile send_email HTTPRequest the Files"),
            ["read", "file", "send", "email", "httprequest", "file"]
        );
    }

    #[test]
    fn search_result_shapes() {
        assert_eq!(
            search_result_names(r#"["a","b"]"#),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(
            search_result_names(r#"{"tools":[{"name":"a"},"b"]}"#),
            Some(vec!["a".into(), "b".into()])
        );
        assert_eq!(search_result_names("not json"), None);
        assert_eq!(search_result_names(r#"[1]"#), None);
    }

    #[test]
    fn note_lists_unknown_names() {
        let load = SearchLoad {
            unknown: vec!["x".into()],
            ..SearchLoad::default()
        };
        assert_eq!(
            load.note().as_deref(),
            Some("Ignored unknown tool name from the tool search result: \"x\".")
        );
        assert_eq!(SearchLoad::default().note(), None);
    }
}
