//! Configuration: the config files and profiles (`files`), how files, profiles and flags
//! combine (`layers`), settings stored with a session (`session`), project instructions, the
//! workspace trust decision and the extension points it gates (permission rules, hooks,
//! skills, custom commands, agent files).

pub mod agents;
pub mod custom_commands;
pub mod data_dir;
pub mod extensions;
pub mod files;
pub mod hooks;
pub mod instructions;
pub mod layers;
pub mod permissions;
pub mod session;
pub mod skills;
pub mod trust;
