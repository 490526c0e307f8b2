//! How every span of the crate opens: one macro that holds the conventions the spans share (level
//! `INFO`, target `agentloop::telemetry`, the `otel.*` fields the OpenTelemetry layer reads and
//! `error.type`), so each span states only its own name, kind and fields.

/// Opens a span under the crate's telemetry conventions: `INFO`, target `agentloop::telemetry`,
/// the span `name`, `otel.kind` = `kind`, then the `fixed` fields with their values and the
/// `later` fields declared empty. `otel.name`, `otel.status_code` and `error.type` are always
/// declared empty. `tracing` records only the fields a span declared when it opened, hence the
/// list of fields recorded later.
///
/// ```ignore
/// let span = telemetry_span!("hook", kind: "internal",
///     fixed: { agentloop.hook.event = "stop" },
///     later: [agentloop.hook.outcome]);
/// ```
macro_rules! telemetry_span {
    (
        $name:literal, kind: $kind:literal,
        fixed: { $($($fixed:ident).+ = $value:expr),* $(,)? },
        later: [$($($later:ident).+),* $(,)?] $(,)?
    ) => {
        ::tracing::info_span!(
            target: "agentloop::telemetry",
            $name,
            otel.name = ::tracing::field::Empty,
            otel.kind = $kind,
            otel.status_code = ::tracing::field::Empty,
            $($($fixed).+ = $value,)*
            $($($later).+ = ::tracing::field::Empty,)*
            "error.type" = ::tracing::field::Empty,
        )
    };
}

pub(crate) use telemetry_span;
