//! [`ToolSource`]: tools that can change while an agent runs — e.g. the tools of MCP servers,
//! which announce `notifications/tools/list_changed` — and the merge of such a source's latest
//! tools with an agent's fixed [`Registry`].
//!
//! The agent loop asks its source before every model call whether the tools changed (a cheap,
//! synchronous question) and only then for the new list, so a source that never changes costs
//! one flag read per turn. This module owns the contract and the merge; it does not decide when
//! to ask (the loop does) and knows nothing about MCP.

use std::sync::{Arc, RwLock};

use futures::future::BoxFuture;

use super::registry::Registry;
use super::spec::ToolSpec;

/// Why a [`ToolSource`] could not produce its tools. The loop keeps the tools it had.
pub type ToolSourceError = Box<dyn std::error::Error + Send + Sync>;

/// A set of tools that can change between model calls.
///
/// Register one with [`AgentLoop::with_tool_source`](crate::agent::AgentLoop::with_tool_source).
/// Before its first model call an agent loads [`current_tools`](Self::current_tools); before each
/// later model call it asks [`changed`](Self::changed) and, when true, loads the list again and
/// replaces the source's previous tools with it (a call the model makes in that reply runs
/// against the new list). The agent's own tools (added with `add_tool`) stay as they are; a
/// source tool whose name is already taken is skipped with a warning.
///
/// ```
/// use std::sync::Mutex;
/// use std::sync::atomic::{AtomicBool, Ordering};
///
/// use agentloop::tooling::{Deps, ToolContext, ToolSource, ToolSourceError, ToolSpec};
/// use futures::future::BoxFuture;
/// use serde_json::Value;
///
/// /// Tools named at run time (e.g. by a plugin directory watcher).
/// #[derive(Default)]
/// struct Plugins {
///     names: Mutex<Vec<String>>,
///     changed: AtomicBool,
/// }
///
/// impl ToolSource<Deps> for Plugins {
///     fn changed(&self) -> bool {
///         self.changed.load(Ordering::Acquire)
///     }
///
///     fn current_tools(&self) -> BoxFuture<'_, Result<Vec<ToolSpec<Deps>>, ToolSourceError>> {
///         Box::pin(async move {
///             self.changed.store(false, Ordering::Release);
///             let names = self.names.lock().unwrap().clone();
///             names
///                 .into_iter()
///                 .map(|name| {
///                     ToolSpec::<Deps>::builder(name, "A plugin.")
///                         .blocking_handler(|_c: ToolContext<Deps>, _a: Value| "ok")
///                         .build()
///                         .map_err(ToolSourceError::from)
///                 })
///                 .collect()
///         })
///     }
/// }
/// ```
pub trait ToolSource<D>: Send + Sync {
    /// Whether the tools changed since the last [`current_tools`](Self::current_tools). Called
    /// before every model call, so keep it cheap (an atomic flag).
    fn changed(&self) -> bool;

    /// The whole current list of the source's tools. A source should clear its "changed" state
    /// before it reads the list, so a change that arrives meanwhile is seen on the next call.
    fn current_tools(&self) -> BoxFuture<'_, Result<Vec<ToolSpec<D>>, ToolSourceError>>;
}

/// A tool source attached to an agent, with the registry last built from it.
pub(crate) struct SourcedTools<D> {
    source: Arc<dyn ToolSource<D>>,
    /// The agent's fixed tools plus the source's tools at the last load, and how many fixed
    /// tools it was built on (a tool added to the agent since makes it stale). `None` until the
    /// first load.
    merged: RwLock<Option<(Arc<Registry<D>>, usize)>>,
}

impl<D> SourcedTools<D> {
    pub(crate) fn new(source: Arc<dyn ToolSource<D>>) -> Self {
        SourcedTools {
            source,
            merged: RwLock::new(None),
        }
    }

    /// The merged registry, when one was built on `fixed` as it is now.
    pub(crate) fn merged(&self, fixed: &Registry<D>) -> Option<Arc<Registry<D>>> {
        let merged = self.merged.read().ok()?;
        match &*merged {
            Some((registry, base)) if *base == fixed.len() => Some(registry.clone()),
            _ => None,
        }
    }

    /// Reloads the source's tools when it changed (or was never loaded, or `fixed` grew since)
    /// and rebuilds the merged registry. Returns whether the tools changed. A failing source
    /// keeps the previous tools.
    pub(crate) async fn refresh(&self, fixed: &Registry<D>) -> bool {
        if self.merged(fixed).is_some() && !self.source.changed() {
            return false;
        }
        let tools = match self.source.current_tools().await {
            Ok(tools) => tools,
            Err(e) => {
                tracing::warn!("could not load the tools of a tool source: {e}");
                if self.merged(fixed).is_some() {
                    return false;
                }
                Vec::new()
            }
        };
        let mut registry = fixed.clone();
        for tool in tools {
            let name = tool.name().to_owned();
            if let Err(e) = registry.add(tool) {
                tracing::warn!(tool = %name, "tool from a tool source skipped: {e}");
            }
        }
        if let Ok(mut merged) = self.merged.write() {
            *merged = Some((Arc::new(registry), fixed.len()));
        }
        true
    }
}

/// The registry a turn uses: the agent's own, or the merge with its tool source.
pub(crate) enum TurnRegistry<'a, D> {
    /// No tool source (or not loaded yet): the agent's registry.
    Fixed(&'a Registry<D>),
    /// The agent's tools plus its source's latest ones.
    Merged(Arc<Registry<D>>),
}

impl<D> std::ops::Deref for TurnRegistry<'_, D> {
    type Target = Registry<D>;

    fn deref(&self) -> &Registry<D> {
        match self {
            TurnRegistry::Fixed(registry) => registry,
            TurnRegistry::Merged(registry) => registry,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    use serde_json::Value;

    use super::*;
    use crate::tooling::{Deps, ToolContext};

    fn tool(name: &str) -> ToolSpec<Deps> {
        ToolSpec::<Deps>::builder(name, "A tool.")
            .blocking_handler(|_c: ToolContext<Deps>, _a: Value| "ok")
            .build()
            .unwrap()
    }

    #[derive(Default)]
    struct Source {
        names: Mutex<Vec<&'static str>>,
        changed: AtomicBool,
        loads: AtomicUsize,
        fail: AtomicBool,
    }

    impl ToolSource<Deps> for Source {
        fn changed(&self) -> bool {
            self.changed.load(Ordering::Acquire)
        }

        fn current_tools(&self) -> BoxFuture<'_, Result<Vec<ToolSpec<Deps>>, ToolSourceError>> {
            Box::pin(async move {
                self.changed.store(false, Ordering::Release);
                self.loads.fetch_add(1, Ordering::AcqRel);
                if self.fail.load(Ordering::Acquire) {
                    return Err("the source is down".into());
                }
                Ok(self.names.lock().unwrap().iter().map(|n| tool(n)).collect())
            })
        }
    }

    fn names(registry: &Registry<Deps>) -> Vec<String> {
        registry.names().to_vec()
    }

    #[tokio::test]
    async fn loads_once_then_only_on_change_and_keeps_fixed_tools() {
        let source = Arc::new(Source::default());
        *source.names.lock().unwrap() = vec!["a", "own"];
        let sourced = SourcedTools::new(source.clone() as Arc<dyn ToolSource<Deps>>);
        let mut fixed = Registry::new([tool("own")]).unwrap();

        assert!(sourced.merged(&fixed).is_none());
        assert!(sourced.refresh(&fixed).await);
        // The colliding `own` from the source is skipped; the agent's own tool stays.
        assert_eq!(names(&sourced.merged(&fixed).unwrap()), ["a", "own"]);
        assert!(!sourced.refresh(&fixed).await, "unchanged: no reload");
        assert_eq!(source.loads.load(Ordering::Acquire), 1);

        *source.names.lock().unwrap() = vec!["b"];
        source.changed.store(true, Ordering::Release);
        assert!(sourced.refresh(&fixed).await);
        assert_eq!(names(&sourced.merged(&fixed).unwrap()), ["b", "own"]);

        // A tool added to the agent since makes the merge stale: rebuilt on the next refresh.
        fixed.add(tool("later")).unwrap();
        assert!(sourced.merged(&fixed).is_none());
        assert!(sourced.refresh(&fixed).await);
        assert_eq!(
            names(&sourced.merged(&fixed).unwrap()),
            ["b", "later", "own"]
        );

        // A failing source keeps the tools it had.
        source.fail.store(true, Ordering::Release);
        source.changed.store(true, Ordering::Release);
        assert!(!sourced.refresh(&fixed).await);
        assert_eq!(
            names(&sourced.merged(&fixed).unwrap()),
            ["b", "later", "own"]
        );
    }
}
