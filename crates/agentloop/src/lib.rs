//! # agentloop
//!
//! Run LLM agents in Rust: send a conversation to a model, execute the tools it calls (in
//! parallel, with timeouts, approval and validation), feed the results back, and repeat.
//!
//! Modules:
//! - [`transcript`]: the provider-neutral messages and parts everything else exchanges;
//! - [`tooling`]: tool specifications, the registry and the executor;
//! - [`telemetry`]: OpenTelemetry GenAI spans and metrics (OTLP export behind feature `otel`);
//! - [`cost`]: the cost of each assistant message and per-run usage limits.

pub mod agent;
pub mod blocking;
pub mod builtin;
pub mod cost;
#[doc(hidden)]
pub mod fuzzing;
#[doc(hidden)]
pub mod macro_support;
pub mod model;
pub mod output;
pub mod providers;
pub mod session;
pub mod telemetry;
pub mod tooling;
pub mod transcript;

pub use agentloop_macros::tool;
/// The `schemars` crate, re-exported so `#[tool]`'s generated code (and applications deriving
/// `JsonSchema` for argument types) use the same version as agentloop.
pub use schemars;

/// The README's Rust examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
