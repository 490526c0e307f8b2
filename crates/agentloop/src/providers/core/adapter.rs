//! [`Adapter`]: the [`Model`] for any [`Protocol`] — the shell every provider shares.

use serde_json::Value;

use super::transport::Endpoint;
use super::{ModelCapabilities, Protocol};
use crate::model::{Model, ModelError, ModelRequest, ModelStream};
use crate::providers::ProviderConfig;

/// A provider adapter: a [`Protocol`] with its settings and its connection pool. It is the
/// [`Model`] the agent loop talks to; the built-in providers are aliases of it
/// ([`OpenAiChat`](crate::providers::OpenAiChat) is `Adapter<ChatCompletions>`, …).
///
/// Cloning is cheap and shares the connection pool.
#[derive(Clone, Debug)]
pub struct Adapter<P> {
    protocol: P,
    config: ProviderConfig,
    endpoint: Endpoint,
}

impl<P: Protocol + Default> Adapter<P> {
    /// An adapter with explicit settings. A configuration that cannot work (a base URL that
    /// does not parse, a header that is not valid HTTP) is the error of every request; see
    /// [`try_new`](Self::try_new) to get it here instead.
    pub fn new(config: ProviderConfig) -> Self {
        Adapter::with_protocol(P::default(), config)
    }

    /// Like [`new`](Self::new), but a configuration that cannot work (a base URL that does not
    /// parse, a header that is not valid HTTP) is an error here instead of the error of every
    /// request. The HTTP client itself is built on the first request (building it loads the
    /// TLS root certificates), and an error building it is that request's.
    pub fn try_new(config: ProviderConfig) -> Result<Self, ModelError> {
        Adapter::try_with_protocol(P::default(), config)
    }
}

impl<P: Protocol> Adapter<P> {
    /// An adapter speaking `protocol` (for a protocol with settings of its own).
    pub fn with_protocol(protocol: P, config: ProviderConfig) -> Self {
        let endpoint = Endpoint::new(&config, &protocol.path(&config));
        Adapter {
            protocol,
            config,
            endpoint,
        }
    }

    /// Like [`with_protocol`](Self::with_protocol), checking the configuration as
    /// [`try_new`](Self::try_new) does.
    pub fn try_with_protocol(protocol: P, config: ProviderConfig) -> Result<Self, ModelError> {
        let adapter = Adapter::with_protocol(protocol, config);
        adapter.endpoint.check()?;
        Ok(adapter)
    }

    /// The settings.
    pub fn config(&self) -> &ProviderConfig {
        &self.config
    }

    /// The protocol.
    pub fn protocol(&self) -> &P {
        &self.protocol
    }

    /// The JSON body this adapter sends for `request` (exposed for snapshot tests and
    /// debugging; contains no credentials: they travel in headers).
    pub fn request_body(&self, request: &ModelRequest<'_>) -> Value {
        self.protocol
            .encode(&self.config, request)
            .body
            .into_value()
    }
}

impl<P: Protocol> Model for Adapter<P> {
    fn stream(&self, request: ModelRequest<'_>) -> ModelStream {
        let wire = self.protocol.encode(&self.config, &request);
        let key = request.api_key.as_ref().or(self.config.api_key.as_ref());
        let headers = self.protocol.headers(&self.config, key);
        self.endpoint.post(
            wire.segment.as_deref(),
            headers,
            wire.body.into_bytes(),
            wire.parser,
        )
    }

    fn provider(&self) -> &str {
        self.protocol.provider()
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn model_id(&self) -> Option<&str> {
        self.config.model.as_deref()
    }

    fn capabilities(&self) -> ModelCapabilities {
        self.protocol.capabilities()
    }
}
