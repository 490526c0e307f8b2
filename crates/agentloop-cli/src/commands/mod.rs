//! One module per subcommand, and the two front ends `run` and `chat`: each works on the
//! settings `crate::config` resolved from the files, the profile and the flags.

#[cfg(feature = "acp")]
pub mod acp;
pub mod approvals;
pub mod chat;
pub mod checkpoints;
pub mod compact;
#[cfg(feature = "demo")]
pub mod demo;
#[cfg(feature = "demo")]
pub mod mock;
pub mod models;
pub mod run;
pub mod sessions;
pub mod worktrees;
