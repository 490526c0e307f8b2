//! # agentloop
//!
//! Run LLM agents in Rust: send a conversation to a model, execute the tools it calls (in
//! parallel, with timeouts, approval and validation), feed the results back, and repeat.
//! `docs/ARCHITECTURE.md` in the repository describes the data flow, the contracts and the
//! decisions behind them.
//!
//! Modules, in layers from the bottom up (a module imports only from its own layer or below,
//! without cycles; a unit test, `layers_tests`, checks it on every `cargo test`):
//! 1. shared types: [`transcript`] (the provider-neutral messages and parts everything else
//!    exchanges, usage, stop reasons), [`json`] (streamed partial JSON), [`telemetry`]
//!    (OpenTelemetry GenAI span names, the run span, metrics; OTLP export behind feature `otel`)
//!    and [`cost`] (the cost of an assistant message, usage limits' units);
//! 2. the interfaces the loop is made of: [`tooling`] (tool specifications, the registry, the
//!    dependency bundle and approval hook, the executor `run_tools`: one result per call, in call
//!    order) and [`model`] (the [`Model`](model::Model) trait, its request and streamed events,
//!    message assembly, scripted models for tests);
//! 3. implementations of them: [`providers`] (the HTTP adapters for OpenAI Chat Completions and
//!    compatible servers, OpenAI Responses, Anthropic Messages and Google Gemini, on the shared
//!    `providers::core`: retries, timeouts, SSE decoding, error and usage mapping) and
//!    `builtin` (feature `builtin-tools`: the coding tools, confined to a workspace, with
//!    the approval policy and the shell sandbox);
//! 4. the loop: [`agent`] — events, hooks, steering, cancellation, limits, context compaction,
//!    runs parked for approval, and typed output ([`output`], a run that returns a validated
//!    value);
//! 5. built on the loop: [`session`] (durable sessions on SQLite, or PostgreSQL with the
//!    `postgres` feature: resume, fork, live follow, export and import, pending approvals) and
//!    `blocking` (feature `blocking`: a synchronous view over the async API) and `checkpoint`
//!    (feature `builtin-tools`: workspace snapshots before mutating tool calls, and rewind).
//!
//! The `#[tool]` attribute (re-exported from `agentloop-macros`) turns a function into a typed
//! tool. `#[agentloop::schema]` derives the JSON Schema of your own argument and output types
//! (no `schemars` dependency needed: it uses agentloop's), and `#[derive(agentloop::ToolDeps)]`
//! makes a deps bundle of any struct.
//!
//! # Cargo features
//!
//! The default build is the loop, the tooling, typed output, SQLite sessions, the four providers
//! and the blocking view; the rest is opt-in. Turn the defaults off and name what you use to
//! compile less:
//!
//! | feature | what it adds |
//! |---|---|
//! | `openai-chat`, `openai-responses`, `anthropic`, `gemini` | one provider adapter each (each turns on `http`) |
//! | `http` | the provider core alone ([`providers::core`]: transport, retries, the generic adapter), for a provider of your own |
//! | `sqlite` | [`session::SqliteStore`] (SQLite bundled: needs a C compiler) |
//! | `postgres` | `session::PostgresStore` (tokio-postgres + deadpool) |
//! | `builtin-tools` | `builtin`: the coding tools, workspace confinement, the shell sandbox |
//! | `blocking` | [`blocking`]: the synchronous view |
//! | `otel` | OpenTelemetry metrics and OTLP export in [`telemetry`] |
//! | `fuzzing` | the fuzz targets' entry points (used by `fuzz/` only; they panic on a broken invariant) |
//!
//! Default: `openai-chat`, `openai-responses`, `anthropic`, `gemini`, `sqlite`, `blocking`.

pub mod agent;
#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "builtin-tools")]
pub mod builtin;
#[cfg(feature = "builtin-tools")]
pub mod checkpoint;
pub mod cost;
// The fuzz targets' entry points panic on a broken invariant: only the `fuzzing` feature builds them.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod json;
// Exported for the companion crates' `keywords!` expansions, not a public API.
#[doc(hidden)]
pub mod keywords;
#[cfg(test)]
mod layers_tests;
#[doc(hidden)]
pub mod macro_support;
pub mod model;
mod opaque;
pub mod prelude;
/// Typed output is part of the loop (a run that returns a validated value): it lives in
/// [`agent::output`] and is re-exported here, its documented path.
pub use agent::output;
pub mod providers;
pub mod session;
mod setters;
pub mod telemetry;
pub mod tooling;
pub mod transcript;

pub use agentloop_macros::{ToolDeps, schema, tool};
/// The `schemars` crate, re-exported so `#[tool]`'s generated code (and applications deriving
/// `JsonSchema` for argument types) use the same version as agentloop.
pub use schemars;
/// The `JsonSchema` trait and derive. Deriving it through this path needs
/// `#[schemars(crate = "agentloop::schemars")]` on the type; [`macro@schema`] adds both.
pub use schemars::JsonSchema;

/// The README's Rust examples, compiled as doctests so they cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
