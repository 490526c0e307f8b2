//! OpenTelemetry export for the CLI (feature `otel`, on by default): when the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` / `OTEL_SERVICE_NAME`
//! variables are set, the run's GenAI spans and metrics go to that collector over OTLP —
//! HTTP/protobuf, or gRPC when `OTEL_EXPORTER_OTLP_PROTOCOL` (or the per-signal
//! `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`) is `grpc`; otherwise nothing is initialised.
//!
//! The pipeline is held in a process-wide slot so that every way out flushes it: the normal end
//! of `main`, a run aborted by Ctrl-C (which ends normally with exit code 130) and the second
//! Ctrl-C that exits at once.

#[cfg(feature = "otel")]
use std::sync::Mutex;

#[cfg(feature = "otel")]
static GUARD: Mutex<Option<agentloop::telemetry::otlp::OtelGuard>> = Mutex::new(None);

/// Installs the OTLP pipeline when the environment asks for it. Call before the async runtime
/// starts (the exporter's HTTP client is blocking). A failure is reported on stderr and the
/// command runs without export.
pub fn init() {
    #[cfg(feature = "otel")]
    match agentloop::telemetry::otlp::install_from_env() {
        Ok(Some(guard)) => {
            *GUARD.lock().unwrap_or_else(|e| e.into_inner()) = Some(guard);
        }
        Ok(None) => {}
        Err(e) => eprintln!("agentloop: warning: OpenTelemetry export disabled: {e}"),
    }
}

/// Flushes and stops the pipeline (a no-op when none was installed, or the second time).
pub fn shutdown() {
    #[cfg(feature = "otel")]
    {
        let guard = GUARD.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(guard) = guard {
            if let Err(e) = guard.shutdown() {
                eprintln!("agentloop: warning: OpenTelemetry export: {e}");
            }
        }
    }
}
