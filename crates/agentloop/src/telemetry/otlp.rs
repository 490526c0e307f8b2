//! OTLP export of the GenAI spans and metrics, configured from the standard OpenTelemetry
//! environment variables (feature `otel`).
//!
//! [`install_from_env`] does nothing unless `OTEL_EXPORTER_OTLP_ENDPOINT`,
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_SERVICE_NAME` is set (and `OTEL_SDK_DISABLED` is
//! not `true`). Otherwise it builds an OTLP span exporter behind a batch processor, installs a
//! global `tracing` subscriber that turns agentloop's spans into OpenTelemetry spans, and — when
//! a metrics endpoint is configured — a periodic metric reader as the global meter provider.
//! Keep the returned [`OtelGuard`] alive and call [`OtelGuard::shutdown`] before the process
//! exits: it flushes what is still buffered.
//!
//! Export never slows the traced work: spans and metrics are handed to the exporters' own
//! threads, and the shutdown flush waits at most [`SHUTDOWN_TIMEOUT`] (1 s) — a collector that
//! refuses connections, or accepts them and never answers, costs a process at most that at
//! exit, and what it did not take is dropped with one plain error line.
//!
//! The transport is chosen per signal as the OpenTelemetry specification says:
//! `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` (or `…_METRICS_PROTOCOL`), else
//! `OTEL_EXPORTER_OTLP_PROTOCOL`, one of `http/protobuf` (the default, port 4318) and `grpc`
//! (port 4317); `http/json` is refused with a clear error. Endpoints, headers and timeouts come
//! from the standard variables, which the exporters read themselves.
//!
//! The HTTP exporter uses a blocking client on its own thread; the gRPC exporter runs on a
//! small Tokio runtime the guard owns (so it needs none from the caller and never blocks the
//! caller's). Call `install_from_env` and `shutdown` outside an async context (e.g. before
//! building the Tokio runtime and after it finished), as the `agentloop` CLI does.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;

/// The service name used when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "agentloop";

/// Why the OTLP pipeline could not be installed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OtelError {
    /// The exporter could not be built (an invalid endpoint, an unsupported protocol…).
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// Another global `tracing` subscriber is already installed.
    #[error("cannot install the tracing subscriber: {0}")]
    Subscriber(String),
    /// An `OTEL_EXPORTER_OTLP_*PROTOCOL` variable names a protocol this build cannot use.
    #[error("{variable}={value:?} is not supported (use \"http/protobuf\" or \"grpc\")")]
    Protocol {
        /// The variable that named it.
        variable: &'static str,
        /// Its value.
        value: String,
    },
}

/// An OTLP transport, as named by the `OTEL_EXPORTER_OTLP_*PROTOCOL` variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OtlpProtocol {
    /// `http/protobuf`: protobuf over HTTP (the specification's default).
    HttpProtobuf,
    /// `grpc`: OTLP/gRPC.
    Grpc,
}

impl OtlpProtocol {
    /// The protocol of a signal (`"TRACES"` or `"METRICS"`) from the environment: the
    /// signal's variable, else the general one, else [`HttpProtobuf`](Self::HttpProtobuf).
    pub fn from_env(signal: &str) -> Result<OtlpProtocol, OtelError> {
        let specific: &'static str = match signal {
            "METRICS" => "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
            _ => "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        };
        for variable in [specific, "OTEL_EXPORTER_OTLP_PROTOCOL"] {
            let value = std::env::var(variable).unwrap_or_default();
            let value = value.trim();
            if value.is_empty() {
                continue;
            }
            return OtlpProtocol::parse(value).ok_or_else(|| OtelError::Protocol {
                variable,
                value: value.to_owned(),
            });
        }
        Ok(OtlpProtocol::HttpProtobuf)
    }

    /// `http/protobuf` or `grpc` (case-insensitive); `None` for anything else.
    pub fn parse(value: &str) -> Option<OtlpProtocol> {
        match value.trim().to_ascii_lowercase().as_str() {
            "http/protobuf" => Some(OtlpProtocol::HttpProtobuf),
            "grpc" => Some(OtlpProtocol::Grpc),
            _ => None,
        }
    }
}

/// The longest [`OtelGuard::shutdown`] waits for the collector: what it has not taken by then
/// is dropped, so an unreachable or silent collector adds at most this much to a process's exit.
pub const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(1);

/// The installed pipeline. Dropping it shuts it down (flushing, within [`SHUTDOWN_TIMEOUT`]);
/// [`shutdown`](Self::shutdown) does the same and reports failures.
#[derive(Debug)]
pub struct OtelGuard {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    /// The gRPC exporters' runtime (none for HTTP only); stopped after the providers.
    runtime: Option<tokio::runtime::Runtime>,
    /// Where the spans go, to name it in a failure.
    endpoint: String,
}

impl OtelGuard {
    /// Flushes every buffered span and metric to the collector and stops the exporters, waiting
    /// at most [`SHUTDOWN_TIMEOUT`]. The error is one plain line saying what was lost.
    pub fn shutdown(self) -> Result<(), String> {
        self.shutdown_within(SHUTDOWN_TIMEOUT)
    }

    /// [`shutdown`](Self::shutdown) with another bound. The flush runs on a thread of its own:
    /// when the bound passes first, that thread is left to finish (or to be ended by the
    /// process's exit) and the caller goes on.
    pub fn shutdown_within(mut self, limit: Duration) -> Result<(), String> {
        self.stop(limit)
    }

    fn stop(&mut self, limit: Duration) -> Result<(), String> {
        let (tracer, meter, runtime) = (self.tracer.take(), self.meter.take(), self.runtime.take());
        if tracer.is_none() && meter.is_none() {
            return Ok(());
        }
        let (done, finished) = std::sync::mpsc::channel();
        let flush = move || {
            let result = flush_and_stop(tracer, meter, limit);
            if let Some(runtime) = runtime {
                // Everything was flushed above; never block (nor panic) if called from async
                // code.
                runtime.shutdown_background();
            }
            let _ = done.send(result);
        };
        if let Err(e) = std::thread::Builder::new()
            .name("agentloop-otlp-shutdown".into())
            .spawn(flush)
        {
            return Err(format!("cannot stop the OpenTelemetry exporters: {e}"));
        }
        let endpoint = &self.endpoint;
        match finished.recv_timeout(limit) {
            Ok(Ok(())) => Ok(()),
            Ok(Err(what)) => Err(format!(
                "the collector at {endpoint} did not take the telemetry ({what}); it is dropped"
            )),
            Err(_) => Err(format!(
                "nothing reached the collector at {endpoint} within {:.1} s (down, or not \
                 answering); the telemetry still buffered is dropped",
                limit.as_secs_f64()
            )),
        }
    }
}

/// Flushes and stops both providers; the failures named plainly (the exporters' own errors
/// can carry a whole chain of debug text).
fn flush_and_stop(
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    limit: Duration,
) -> Result<(), String> {
    let mut failures = Vec::new();
    if let Some(tracer) = tracer {
        if tracer.force_flush().is_err() {
            failures.push("spans not exported");
        }
        let _ = tracer.shutdown_with_timeout(limit);
    }
    if let Some(meter) = meter {
        if meter.shutdown_with_timeout(limit).is_err() {
            failures.push("metrics not exported");
        }
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join(", "))
    }
}

impl Drop for OtelGuard {
    fn drop(&mut self) {
        let _ = self.stop(SHUTDOWN_TIMEOUT);
    }
}

/// The traces endpoint the exporter sends to, as the environment names it (for messages).
fn traces_endpoint(protocol: OtlpProtocol) -> String {
    for name in [
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
    ] {
        if let Ok(value) = std::env::var(name) {
            if !value.trim().is_empty() {
                return without_userinfo(value.trim());
            }
        }
    }
    match protocol {
        OtlpProtocol::Grpc => "http://localhost:4317".to_owned(),
        OtlpProtocol::HttpProtobuf => "http://localhost:4318".to_owned(),
    }
}

fn env_set(name: &str) -> bool {
    std::env::var_os(name).is_some_and(|v| !v.is_empty())
}

/// `url` without a `user:password@` part (never printed).
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    if scheme.is_empty() {
        format!("{host}{path}")
    } else {
        format!("{scheme}://{host}{path}")
    }
}

/// Whether the environment asks for OTLP export (see the module docs).
pub fn requested_by_env() -> bool {
    let disabled =
        std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.trim().eq_ignore_ascii_case("true"));
    !disabled
        && (env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            || env_set("OTEL_SERVICE_NAME"))
}

/// Installs the OTLP pipeline when the environment asks for it; `Ok(None)` when it does not.
pub fn install_from_env() -> Result<Option<OtelGuard>, OtelError> {
    if !requested_by_env() {
        return Ok(None);
    }
    let traces = OtlpProtocol::from_env("TRACES")?;
    let metrics = metrics_protocol()?;
    // tonic's channel lives on a Tokio runtime: a private one, entered while the exporters are
    // built so their background tasks are spawned on it.
    let runtime =
        grpc_runtime(traces == OtlpProtocol::Grpc || metrics == Some(OtlpProtocol::Grpc))?;
    let entered = runtime.as_ref().map(|r| r.enter());
    let resource = service_resource();
    let tracer_provider = SdkTracerProvider::builder()
        .with_batch_exporter(span_exporter(traces)?)
        .with_resource(resource.clone())
        .build();
    let meter_provider = match metrics {
        Some(protocol) => Some(meter_provider(protocol, resource)?),
        None => None,
    };
    drop(entered);

    let guard = OtelGuard {
        tracer: Some(tracer_provider.clone()),
        meter: meter_provider.clone(),
        runtime,
        endpoint: traces_endpoint(traces),
    };
    let subscriber = tracing_subscriber::registry()
        .with(layer(tracer_provider.tracer("agentloop")))
        .with(Targets::new().with_target("agentloop", LevelFilter::INFO));
    tracing::subscriber::set_global_default(subscriber)
        .map_err(|e| OtelError::Subscriber(e.to_string()))?;
    if let Some(meter) = meter_provider {
        opentelemetry::global::set_meter_provider(meter);
    }
    Ok(Some(guard))
}

/// The metrics exporter's protocol, when metrics are exported at all: only a general or
/// metrics-specific endpoint turns them on (a service name alone exports traces only).
fn metrics_protocol() -> Result<Option<OtlpProtocol>, OtelError> {
    let wants_metrics =
        env_set("OTEL_EXPORTER_OTLP_ENDPOINT") || env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT");
    if wants_metrics {
        OtlpProtocol::from_env("METRICS").map(Some)
    } else {
        Ok(None)
    }
}

/// The private runtime gRPC exporters need (one worker thread), when one is `needed`.
fn grpc_runtime(needed: bool) -> Result<Option<tokio::runtime::Runtime>, OtelError> {
    if !needed {
        return Ok(None);
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("agentloop-otlp")
        .enable_all()
        .build()
        .map(Some)
        .map_err(|e| OtelError::Exporter(format!("cannot start the gRPC runtime: {e}")))
}

/// The exported resource: the environment's attributes, with this library's service name
/// when `OTEL_SERVICE_NAME` does not give one.
fn service_resource() -> Resource {
    let mut resource = Resource::builder();
    if !env_set("OTEL_SERVICE_NAME") {
        resource = resource.with_service_name(DEFAULT_SERVICE_NAME);
    }
    resource.build()
}

/// The exporter of one signal (`$exporter`: `SpanExporter`, `MetricExporter`; `$signal`: its
/// name in the environment's variables) for `$protocol`: gRPC, or HTTP/protobuf with a client
/// built on first export. A macro because the exporters' builders share no trait for `build`.
macro_rules! exporter {
    ($exporter:ident, $protocol:expr, $signal:literal) => {
        match $protocol {
            OtlpProtocol::Grpc => $exporter::builder().with_tonic().build(),
            OtlpProtocol::HttpProtobuf => $exporter::builder()
                .with_http()
                .with_protocol(Protocol::HttpBinary)
                .with_http_client(LazyHttpClient::new($signal))
                .build(),
        }
        .map_err(|e| OtelError::Exporter(e.to_string()))
    };
}

/// The span exporter for `protocol`.
fn span_exporter(protocol: OtlpProtocol) -> Result<SpanExporter, OtelError> {
    exporter!(SpanExporter, protocol, "TRACES")
}

/// The meter provider exporting periodically over `protocol`.
fn meter_provider(
    protocol: OtlpProtocol,
    resource: Resource,
) -> Result<SdkMeterProvider, OtelError> {
    let metrics = exporter!(MetricExporter, protocol, "METRICS")?;
    Ok(SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .build())
}

/// The OTLP/HTTP exporters' client, built on the first export — on the exporter's own thread —
/// instead of when the pipeline is installed: building one loads every root certificate of the
/// system's store, which would otherwise delay the start of every traced program (seconds on a
/// machine with a large store).
#[derive(Debug)]
struct LazyHttpClient {
    timeout: Duration,
    client: std::sync::OnceLock<Result<reqwest::blocking::Client, String>>,
}

impl LazyHttpClient {
    /// A client for `signal` (`"TRACES"`, `"METRICS"`) with the export timeout the environment
    /// sets (`OTEL_EXPORTER_OTLP_{SIGNAL}_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`, in
    /// milliseconds; default 10 s).
    fn new(signal: &str) -> Self {
        let timeout = [
            format!("OTEL_EXPORTER_OTLP_{signal}_TIMEOUT"),
            "OTEL_EXPORTER_OTLP_TIMEOUT".to_owned(),
        ]
        .iter()
        .find_map(|name| std::env::var(name).ok()?.trim().parse::<u64>().ok())
        .map_or(Duration::from_secs(10), Duration::from_millis);
        LazyHttpClient {
            timeout,
            client: std::sync::OnceLock::new(),
        }
    }

    fn client(&self) -> Result<&reqwest::blocking::Client, opentelemetry_http::HttpError> {
        let built = self.client.get_or_init(|| {
            reqwest::blocking::Client::builder()
                .timeout(self.timeout)
                .build()
                .map_err(|e| format!("cannot build the OTLP HTTP client: {e}"))
        });
        built.as_ref().map_err(|e| e.clone().into())
    }
}

type Exported =
    Result<opentelemetry_http::Response<opentelemetry_http::Bytes>, opentelemetry_http::HttpError>;

impl opentelemetry_http::HttpClient for LazyHttpClient {
    // The trait is declared with `async_trait`; this is its expansion.
    fn send_bytes<'client, 'call>(
        &'client self,
        request: opentelemetry_http::Request<opentelemetry_http::Bytes>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Exported> + Send + 'call>>
    where
        'client: 'call,
        Self: 'call,
    {
        Box::pin(async move {
            let client = self.client()?;
            opentelemetry_http::HttpClient::send_bytes(client, request).await
        })
    }
}

/// The `tracing` → OpenTelemetry layer as agentloop configures it: span name, kind and status
/// from the `otel.*` fields, and none of the layer's own extras (source location, thread,
/// busy/idle times), so the spans carry exactly the GenAI attributes. Use it to put agentloop's
/// spans into a pipeline of your own (tests use it with the SDK's in-memory exporter).
pub fn layer<S, T>(tracer: T) -> tracing_opentelemetry::OpenTelemetryLayer<S, T>
where
    S: tracing::Subscriber + for<'span> tracing_subscriber::registry::LookupSpan<'span>,
    T: opentelemetry::trace::Tracer + 'static,
    T::Span: Send + Sync,
{
    tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
}

#[cfg(test)]
mod tests {
    use super::OtlpProtocol;

    #[test]
    fn endpoints_are_named_without_their_credentials() {
        assert_eq!(
            super::without_userinfo("https://user:secret@collector:4318/v1/traces"),
            "https://collector:4318/v1/traces"
        );
        assert_eq!(
            super::without_userinfo("http://127.0.0.1:4318"),
            "http://127.0.0.1:4318"
        );
    }

    #[test]
    fn protocols_are_parsed_as_the_specification_names_them() {
        assert_eq!(
            OtlpProtocol::parse("http/protobuf"),
            Some(OtlpProtocol::HttpProtobuf)
        );
        assert_eq!(OtlpProtocol::parse(" gRPC "), Some(OtlpProtocol::Grpc));
        assert_eq!(OtlpProtocol::parse("http/json"), None);
        assert_eq!(OtlpProtocol::parse("grpc/protobuf"), None);
    }
}
