//! [`Registry`]: the tools of one agent, by name, each with its schema compiled once (and shared
//! with the spec's clones).
//!
//! The registry is the executor's only view of tools: it resolves names, hands out the compiled
//! validator and lists the model-visible schemas. It does not run anything.

use derive_where::derive_where;
use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::Validator;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::error::RegistryError;
use super::search::{LoadedTools, SearchLoad};
use super::spec::ToolSpec;

/// The provider-independent, model-visible description of one tool.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// What the tool does (the model chooses tools by it).
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// A tool as held by the registry: its spec plus the compiled argument validator (shared with
/// the spec and its clones, so it is compiled once however many registries hold the tool).
pub(crate) struct RegisteredTool<D> {
    pub(crate) spec: ToolSpec<D>,
    pub(crate) validator: Arc<Validator>,
}

/// Tools by name. Construction fails on duplicate names or schemas that do not compile.
///
/// ```
/// use agentloop::tooling::{Deps, Registry, ToolContext, ToolSpec};
/// use serde_json::Value;
///
/// let tool = |name: &str| {
///     ToolSpec::<Deps>::builder(name, "A test tool.")
///         .blocking_handler(|_ctx: ToolContext<Deps>, _args: Value| "ok")
///         .build()
///         .unwrap()
/// };
/// let registry = Registry::new(vec![tool("zeta"), tool("alpha")]).unwrap();
/// assert_eq!(registry.names(), vec!["alpha", "zeta"]);
/// assert_eq!(registry.schemas()[0].name, "zeta");
/// assert!(Registry::new(vec![tool("a"), tool("a")]).is_err());
/// ```
// Debug is written below: the tool names, not their specs.
#[derive_where(Clone, Default)]
pub struct Registry<D> {
    tools: Vec<Arc<RegisteredTool<D>>>,
    by_name: HashMap<String, usize>,
    schemas: Vec<ToolSchema>,
    sorted_names: Vec<String>,
}

impl<D> std::fmt::Debug for Registry<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field(
                "tools",
                &self.schemas.iter().map(|s| &s.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl<D> Registry<D> {
    /// Builds a registry from tools, in registration order.
    pub fn new(specs: impl IntoIterator<Item = ToolSpec<D>>) -> Result<Self, RegistryError> {
        let mut registry = Registry::default();
        for spec in specs {
            registry.add(spec)?;
        }
        Ok(registry)
    }

    /// Adds one tool (compiling its schema, unless the spec or a clone of it was compiled
    /// before). Fails on a duplicate name, a schema that does not compile, or a second
    /// `local_tool_search` tool; the registry is unchanged on failure.
    pub fn add(&mut self, spec: ToolSpec<D>) -> Result<(), RegistryError> {
        if self.by_name.contains_key(&spec.name) {
            return Err(RegistryError::DuplicateName(spec.name));
        }
        if spec.local_tool_search {
            if let Some(existing) = self.tools.iter().find(|t| t.spec.local_tool_search) {
                return Err(RegistryError::SecondToolSearch {
                    first: existing.spec.name.clone(),
                    second: spec.name,
                });
            }
        }
        let validator = spec
            .compiled_validator()
            .map_err(|reason| RegistryError::InvalidSchema {
                name: spec.name.clone(),
                reason: reason.to_owned(),
            })?
            .clone();
        self.schemas.push(ToolSchema {
            name: spec.name.clone(),
            description: spec.description.clone(),
            parameters: spec.parameters.clone(),
        });
        let at = self
            .sorted_names
            .binary_search(&spec.name)
            .unwrap_or_else(|i| i);
        self.sorted_names.insert(at, spec.name.clone());
        self.by_name.insert(spec.name.clone(), self.tools.len());
        self.tools
            .push(Arc::new(RegisteredTool { spec, validator }));
        Ok(())
    }

    /// Looks up a tool.
    pub fn get(&self, name: &str) -> Option<&ToolSpec<D>> {
        self.registered(name).map(|t| &t.spec)
    }

    pub(crate) fn registered(&self, name: &str) -> Option<&Arc<RegisteredTool<D>>> {
        self.by_name.get(name).map(|&i| &self.tools[i])
    }

    /// Registered names, sorted.
    pub fn names(&self) -> &[String] {
        &self.sorted_names
    }

    /// Model-visible schemas of every tool, in registration order.
    pub fn schemas(&self) -> &[ToolSchema] {
        &self.schemas
    }

    /// Tools in registration order.
    pub fn specs(&self) -> impl Iterator<Item = &ToolSpec<D>> {
        self.tools.iter().map(|t| &t.spec)
    }

    /// Number of tools.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether the registry holds no tools.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

/// Deferred tools and tool search (docs/ARCHITECTURE.md, "Tools and the executor"); see [`LoadedTools`] and the ready-made
/// [`bm25_tool_search`](crate::tooling::bm25_tool_search).
impl<D> Registry<D> {
    /// Whether a tool is sent to the model: not the `local_tool_search` tool (adapters declare
    /// tool search their own way), and either not deferred or loaded.
    fn visible(spec: &ToolSpec<D>, loaded: &LoadedTools) -> bool {
        !spec.local_tool_search && (!spec.deferred || loaded.contains(&spec.name))
    }

    /// Schemas to send to the model, in registration order: every tool that is not deferred, plus
    /// the deferred tools in `loaded`. The `local_tool_search` tool is never included: the
    /// OpenAI Responses adapter declares tool search itself and routes it to
    /// [`tool_search`](Registry::tool_search); other adapters decide (and document) whether to
    /// offer it as a plain function tool.
    pub fn visible_schemas(&self, loaded: &LoadedTools) -> Vec<&ToolSchema> {
        self.tools
            .iter()
            .zip(&self.schemas)
            .filter(|(t, _)| Self::visible(&t.spec, loaded))
            .map(|(_, schema)| schema)
            .collect()
    }

    /// Whether the tool `name` is sent to the model given `loaded` (see
    /// [`visible_schemas`](Registry::visible_schemas)); `false` for unknown names.
    pub fn is_visible(&self, name: &str, loaded: &LoadedTools) -> bool {
        self.get(name)
            .is_some_and(|spec| Self::visible(spec, loaded))
    }

    /// Names of the deferred tools, in registration order.
    pub fn deferred_names(&self) -> Vec<&str> {
        self.specs()
            .filter(|s| s.deferred)
            .map(|s| s.name.as_str())
            .collect()
    }

    /// Schemas of the deferred tools, in registration order (what a tool search searches).
    pub fn deferred_schemas(&self) -> Vec<&ToolSchema> {
        self.tools
            .iter()
            .zip(&self.schemas)
            .filter(|(t, _)| t.spec.deferred)
            .map(|(_, schema)| schema)
            .collect()
    }

    /// The `local_tool_search` tool, if one is registered (at most one can be).
    pub fn tool_search(&self) -> Option<&ToolSpec<D>> {
        self.specs().find(|s| s.local_tool_search)
    }

    /// Applies a tool search result: every named deferred tool is added to `loaded` (and becomes
    /// visible); names of tools that are not deferred are reported as already visible; any other
    /// name (unregistered, or the search tool itself) is ignored and reported in
    /// [`SearchLoad::unknown`], with a ready-made [`note`](SearchLoad::note).
    pub fn load_from_search_result<S: AsRef<str>>(
        &self,
        loaded: &mut LoadedTools,
        names: impl IntoIterator<Item = S>,
    ) -> SearchLoad {
        let mut load = SearchLoad::default();
        for name in names {
            let name = name.as_ref();
            let seen = load
                .loaded
                .iter()
                .chain(&load.already_visible)
                .chain(&load.unknown);
            if seen.into_iter().any(|n| n == name) {
                continue;
            }
            match self.get(name) {
                Some(spec) if spec.deferred && !spec.local_tool_search => {
                    loaded.insert(name);
                    load.loaded.push(name.to_owned());
                }
                Some(spec) if !spec.local_tool_search => load.already_visible.push(name.to_owned()),
                _ => load.unknown.push(name.to_owned()),
            }
        }
        load
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tooling::{Deps, ToolContext};
    use serde_json::json;

    fn tool(name: &str) -> ToolSpec<Deps> {
        ToolSpec::<Deps>::builder(name, "d")
            .blocking_handler(|_c: ToolContext<Deps>, _a: Value| "ok")
            .build()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn clones_and_handler_copies_share_one_compiled_schema() {
        let spec = tool("a");
        let copy = spec
            .clone()
            .with_handler(|_c: ToolContext<Deps>, _a: Value| async { "copy" });
        let first = Registry::new(vec![spec.clone()]).unwrap_or_else(|e| panic!("{e}"));
        let second = Registry::new(vec![spec]).unwrap_or_else(|e| panic!("{e}"));
        let third = Registry::new(vec![copy]).unwrap_or_else(|e| panic!("{e}"));
        let validator = |r: &Registry<Deps>| {
            r.registered("a")
                .map(|t| Arc::clone(&t.validator))
                .unwrap_or_else(|| panic!("registered"))
        };
        assert!(Arc::ptr_eq(&validator(&first), &validator(&second)));
        assert!(Arc::ptr_eq(&validator(&first), &validator(&third)));
        // A spec built anew compiles its own.
        let fresh = Registry::new(vec![tool("a")]).unwrap_or_else(|e| panic!("{e}"));
        assert!(!Arc::ptr_eq(&validator(&first), &validator(&fresh)));
    }

    #[test]
    fn duplicate_names_are_an_error_naming_the_tool() {
        let err = Registry::new(vec![tool("a"), tool("b"), tool("a")]).err();
        assert_eq!(err, Some(RegistryError::DuplicateName("a".into())));
    }

    #[test]
    fn names_sorted_schemas_in_registration_order() {
        let r = Registry::new(vec![tool("m"), tool("b"), tool("z"), tool("a")])
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.names(), ["a", "b", "m", "z"]);
        let order: Vec<_> = r.schemas().iter().map(|s| s.name.as_str()).collect();
        assert_eq!(order, ["m", "b", "z", "a"]);
        assert!(r.get("z").is_some());
        assert!(r.get("nope").is_none());
    }

    #[test]
    fn schema_that_does_not_compile_is_refused() {
        let bad = ToolSpec::<Deps>::builder("bad", "d")
            .parameters(json!({"type": "object", "properties": {"x": {"type": "nonsense"}}}))
            .blocking_handler(|_c: ToolContext<Deps>, _a: Value| "ok")
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            Registry::new(vec![bad]),
            Err(RegistryError::InvalidSchema { .. })
        ));
    }

    #[test]
    fn at_most_one_local_tool_search() {
        let search = |n: &str| {
            ToolSpec::<Deps>::builder(n, "d")
                .local_tool_search(true)
                .blocking_handler(|_c: ToolContext<Deps>, _a: Value| "ok")
                .build()
                .unwrap_or_else(|e| panic!("{e}"))
        };
        let mut r = Registry::new(vec![search("s1")]).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            r.add(search("s2")),
            Err(RegistryError::SecondToolSearch { .. })
        ));
        assert_eq!(r.len(), 1);
    }
}
