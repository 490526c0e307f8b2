//! JSON helpers that several layers share: the incremental parser for streamed tool arguments
//! ([`partial_json`]), the lenient parse of text with lone surrogate escapes (`lossy_json`) and
//! the JSON Schema generated for a Rust type (`schema`).
//!
//! They sit at the bottom of the crate, beside [`transcript`](crate::transcript): the transcript,
//! the message assembler, typed output and the provider parsers all use them, so none of those
//! may own them without importing another layer upward.

pub(crate) mod lossy_json;
pub mod partial_json;
pub(crate) mod schema;
