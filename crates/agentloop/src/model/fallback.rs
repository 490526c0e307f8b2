//! [`FallbackModel`]: an ordered list of models, possibly of different providers, answering as
//! one. When a model's call fails — after its own retries, or at once for an error retries
//! cannot fix (401, a context overflow, a bad request) — and nothing of its reply has been
//! streamed yet, the next model gets the same request. A [`ModelEvent::Fallback`] says which
//! model gave way to which; the reply that completes carries the provider and model that
//! produced it, so the transcript records who answered.

use std::sync::Arc;

use futures::StreamExt;

use super::{Model, ModelEvent, ModelRequest, ModelStream};

/// Models tried in order until one answers (see the module docs).
///
/// The first model gets the request as the agent built it; a fallback gets it with `model`
/// cleared, so each fallback uses the model it was configured with. A failure after deltas
/// were streamed is not retried elsewhere (the caller has already shown part of that reply).
///
/// ```
/// use std::sync::Arc;
/// use agentloop::model::{FallbackModel, Model, ScriptedModel, ScriptedTurn};
///
/// let primary = ScriptedModel::new(vec![ScriptedTurn::error("HTTP 500")]);
/// let backup = ScriptedModel::new(vec![ScriptedTurn::text("from the backup")]);
/// let model = FallbackModel::new(Arc::new(primary)).with_fallback(Arc::new(backup));
/// assert_eq!(model.models().len(), 2);
/// ```
#[derive(Clone)]
pub struct FallbackModel {
    models: Vec<Arc<dyn Model>>,
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let labels: Vec<String> = self.models.iter().map(|m| label(&**m)).collect();
        f.debug_struct("FallbackModel")
            .field("models", &labels)
            .finish()
    }
}

impl FallbackModel {
    /// A fallback chain starting with `primary`.
    pub fn new(primary: Arc<dyn Model>) -> Self {
        FallbackModel {
            models: vec![primary],
        }
    }

    /// Adds `model` at the end of the chain.
    pub fn with_fallback(mut self, model: Arc<dyn Model>) -> Self {
        self.models.push(model);
        self
    }

    /// The models, in the order they are tried.
    pub fn models(&self) -> &[Arc<dyn Model>] {
        &self.models
    }
}

/// How a model is named in [`ModelEvent::Fallback`]: `provider:model` (or the provider alone).
pub(crate) fn label(model: &dyn Model) -> String {
    match model.model_id() {
        Some(id) => format!("{}:{id}", model.provider()),
        None => model.provider().to_owned(),
    }
}

/// The stream's state between events.
struct Chain {
    models: Vec<Arc<dyn Model>>,
    /// Which model is answering.
    index: usize,
    current: ModelStream,
    /// The request for fallbacks (owned, `model` cleared), built before the first call.
    request: ModelRequest<'static>,
    /// A delta of the current model's reply has been handed out.
    delivered: bool,
}

impl Model for FallbackModel {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let Some(first) = self.models.first() else {
            // Unreachable through the constructors; answer like an exhausted chain.
            let error = super::ModelError::InvalidRequest("a fallback chain with no model".into());
            return Box::pin(futures::stream::iter([ModelEvent::Error {
                message: crate::transcript::Message::assistant(
                    Vec::new(),
                    crate::transcript::StopReason::Error,
                ),
                error,
            }]));
        };
        if self.models.len() == 1 {
            return first.stream(request);
        }
        // The copy a fallback needs is made now: the caller's request is only borrowed for the
        // duration of this call.
        let mut owned = request.to_owned_request();
        let current = first.stream(request);
        owned.model = None;
        let chain = Chain {
            models: self.models.clone(),
            index: 0,
            current,
            request: owned,
            delivered: false,
        };
        Box::pin(futures::stream::unfold(chain, |mut chain| async move {
            let event = chain.current.next().await?;
            let event = match event {
                ModelEvent::Error { error, .. }
                    if !chain.delivered && chain.index + 1 < chain.models.len() =>
                {
                    let from = label(&*chain.models[chain.index]);
                    chain.index += 1;
                    let next = &chain.models[chain.index];
                    let to = label(&**next);
                    chain.current = next.stream(chain.request.reborrow());
                    ModelEvent::Fallback { from, to, error }
                }
                ModelEvent::Done(mut message) if chain.index > 0 => {
                    let answering = &chain.models[chain.index];
                    if message.model.is_none() {
                        message.model = answering.model_id().map(str::to_owned);
                    }
                    if message.provider.is_none() {
                        message.provider = Some(answering.provider().to_owned());
                    }
                    ModelEvent::Done(message)
                }
                ModelEvent::Delta(delta) => {
                    chain.delivered = true;
                    ModelEvent::Delta(delta)
                }
                other => other,
            };
            Some((event, chain))
        }))
    }

    fn provider(&self) -> &str {
        self.models.first().map_or("unknown", |m| m.provider())
    }

    fn model_id(&self) -> Option<&str> {
        self.models.first().and_then(|m| m.model_id())
    }

    fn base_url(&self) -> Option<&str> {
        self.models.first().and_then(|m| m.base_url())
    }

    /// Only what every model in the chain can do: e.g. native tool search only when every model
    /// runs it (otherwise the loop offers the portable tool, which every model understands).
    fn capabilities(&self) -> super::ModelCapabilities {
        self.models
            .iter()
            .map(|m| m.capabilities())
            .reduce(super::ModelCapabilities::intersect)
            .unwrap_or_default()
    }
}
