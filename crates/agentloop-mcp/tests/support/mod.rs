//! Test support: the fixture server shared with the stdio test binary.
pub mod fixture;
