//! # agentloop
//!
//! Run LLM agents in Rust: send a conversation to a model, execute the tools it calls (in
//! parallel, with timeouts, approval and validation), feed the results back, and repeat.
//! `docs/ARCHITECTURE.md` in the repository describes the data flow, the contracts and the
//! decisions behind them.
//!
//! Modules, from the bottom up:
//! - [`transcript`]: the provider-neutral messages and parts everything else exchanges;
//! - [`model`]: the [`Model`](model::Model) trait the loop talks to, its request and streamed
//!   events, and scripted models for tests;
//! - [`providers`]: the HTTP adapters (OpenAI Chat Completions and compatible servers, OpenAI
//!   Responses, Anthropic Messages, Google Gemini), each a [`Protocol`](providers::core::Protocol)
//!   and a stream parser on the shared [`providers::core`] (retries, timeouts, SSE decoding,
//!   message assembly, error and usage mapping), which is public for providers written outside
//!   this crate;
//! - [`tooling`]: tool specifications, the registry, the dependency bundle and approval hook,
//!   and the executor (`run_tools`: one result per call, in call order);
//! - [`builtin`]: the seven coding tools (read, write, edit, list, find, grep, shell), confined
//!   to a workspace, with the approval policy and the shell sandbox;
//! - [`agent`]: the loop — events, hooks, steering, cancellation, limits, context compaction
//!   and runs parked for approval;
//! - [`output`]: typed output — a run that returns a validated value;
//! - [`session`]: durable sessions (SQLite, or PostgreSQL with the `postgres` feature), resume,
//!   fork, live follow, export and import, pending approvals;
//! - [`cost`]: the cost of each assistant message and per-run usage limits;
//! - [`telemetry`]: OpenTelemetry GenAI spans and metrics (OTLP export behind feature `otel`);
//! - [`blocking`]: a synchronous view over the async API.
//!
//! The `#[tool]` attribute (re-exported from `agentloop-macros`) turns a function into a typed
//! tool.
//!
//! # Cargo features
//!
//! All on by default; turn the defaults off and name what you use to compile less:
//!
//! | feature | what it adds |
//! |---|---|
//! | `openai-chat`, `openai-responses`, `anthropic`, `gemini` | one provider adapter each (each turns on `http`) |
//! | `http` | the provider core alone ([`providers::core`]: transport, retries, the generic adapter), for a provider of your own |
//! | `sqlite` | [`session::SqliteStore`] (SQLite bundled: needs a C compiler) |
//! | `postgres` | `session::PostgresStore` (tokio-postgres + deadpool) |
//! | `builtin-tools` | [`builtin`]: the coding tools, workspace confinement, the shell sandbox |
//! | `blocking` | [`blocking`]: the synchronous view |
//! | `otel` | OpenTelemetry metrics and OTLP export in [`telemetry`] |

pub mod agent;
#[cfg(feature = "blocking")]
pub mod blocking;
#[cfg(feature = "builtin-tools")]
pub mod builtin;
pub mod cost;
// The fuzz targets drive every component, so they exist only in a full build.
#[cfg(all(
    feature = "sqlite",
    feature = "builtin-tools",
    feature = "openai-chat",
    feature = "openai-responses",
    feature = "anthropic"
))]
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
