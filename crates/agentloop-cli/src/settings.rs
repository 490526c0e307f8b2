//! Where each setting of `agentloop run` comes from, and the command line with the config files
//! applied.
//!
//! Precedence, highest first: a flag on the command line or its environment variable; the
//! chosen profile (`--profile NAME`, else the `profile` key) as the workspace file defines it,
//! then as the user file does; the workspace file's top level; the user file's top level; the
//! built-in default. The files are `<workspace>/.agentloop/config.toml` and
//! `~/.config/agentloop/config.toml` (see [`crate::config`]).
//!
//! A config value is applied by adding its flag to the command line before clap parses it for
//! real, so a value from a file is checked by exactly the parser (and range) of its flag, and an
//! error names the file and the key.
//!
//! A resumed session's stored model, base URL and reasoning rank between the two groups: they
//! lose to what the user gave on this invocation (a flag, its environment variable, or a
//! profile chosen with `--profile` / `AGENTLOOP_PROFILE`) and win over the config files' top
//! level, a profile chosen by a file's `profile` key, and the defaults. Since config values
//! arrive as flags, [`parse`] records which settings were explicit in [`Explicit`] before
//! injecting anything.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command, ConfigShowArgs, Explicit};
use crate::config::{ConfigFile, Settings, user_config_path};
use crate::error::Failure;

/// The run settings a config file may hold: (key in the file, clap argument id, flag).
pub const KEYS: &[(&str, &str, &str)] = &[
    ("model", "model", "--model"),
    ("base_url", "base_url", "--base-url"),
    ("reasoning", "reasoning", "--reasoning"),
    ("approve", "approve", "--approve"),
    ("sandbox", "sandbox", "--sandbox"),
    ("max_turns", "max_turns", "--max-turns"),
    ("max_requests", "max_requests", "--max-requests"),
    ("max_input_tokens", "max_input_tokens", "--max-input-tokens"),
    (
        "max_output_tokens",
        "max_output_tokens",
        "--max-output-tokens",
    ),
    ("max_total_tokens", "max_total_tokens", "--max-total-tokens"),
    ("max_cost", "max_cost", "--max-cost"),
];

/// One source of settings, with the words that name it.
struct Layer {
    origin: String,
    settings: Settings,
    /// A `[profiles.NAME]` table.
    profile: bool,
}

/// The config files of `workspace`: (path, contents) of the user file and the workspace file.
fn files(workspace: &Path) -> Result<Vec<(PathBuf, ConfigFile)>, Failure> {
    let mut out = Vec::new();
    if let Some(path) = user_config_path() {
        let file = ConfigFile::read(&path)?;
        out.push((path, file));
    }
    let path = workspace.join(".agentloop").join("config.toml");
    let file = ConfigFile::read(&path)?;
    out.push((path, file));
    Ok(out)
}

/// The layers of settings, highest precedence first, and the chosen profile's name.
fn layers(
    workspace: &Path,
    profile_flag: Option<&str>,
) -> Result<(Vec<Layer>, Option<String>), Failure> {
    let files = files(workspace)?;
    // The profile: the flag, else the most specific file's `profile` key.
    let profile = profile_flag.map(str::to_owned).or_else(|| {
        files
            .iter()
            .rev()
            .find_map(|(_, file)| file.profile.clone())
    });
    let mut out = Vec::new();
    if let Some(name) = &profile {
        let mut found = false;
        for (path, file) in files.iter().rev() {
            if let Some(settings) = file.profiles.get(name) {
                found = true;
                out.push(Layer {
                    origin: format!("{} [profiles.{name}]", path.display()),
                    settings: settings.clone(),
                    profile: true,
                });
            }
        }
        if !found {
            let mut known: Vec<&str> = files
                .iter()
                .flat_map(|(_, f)| f.profiles.keys().map(String::as_str))
                .collect();
            known.sort_unstable();
            known.dedup();
            return Err(Failure::usage(if known.is_empty() {
                format!("profile {name:?} is not defined: no config file has [profiles.*] tables")
            } else {
                format!(
                    "profile {name:?} is not defined; the config files define: {}",
                    known.join(", ")
                )
            }));
        }
    }
    for (path, file) in files.iter().rev() {
        out.push(Layer {
            origin: path.display().to_string(),
            settings: file.settings.clone(),
            profile: false,
        });
    }
    Ok((out, profile))
}

/// The value of `key` in the highest layer that sets it, with that layer's name.
fn lookup<'a>(layers: &'a [Layer], key: &str) -> Option<(String, &'a str)> {
    lookup_layer(layers, key).map(|(value, layer)| (value, layer.origin.as_str()))
}

/// The value of `key` in the highest layer that sets it, with that layer.
fn lookup_layer<'a>(layers: &'a [Layer], key: &str) -> Option<(String, &'a Layer)> {
    layers
        .iter()
        .find_map(|layer| layer.settings.get(key).map(|v| (v, layer)))
}

/// Which session-stored settings the user gave for this invocation (see the module docs).
/// `profile_given`: the profile was chosen by `--profile` / `AGENTLOOP_PROFILE`, so the values
/// its tables supply count as given too.
fn explicit(matches: &ArgMatches, layers: &[Layer], profile_given: bool) -> Explicit {
    let is = |id: &str, key: &str| {
        if matches.try_get_raw(id).is_err() {
            return false; // a subcommand without this argument
        }
        given(matches, id)
            || (profile_given && lookup_layer(layers, key).is_some_and(|(_, layer)| layer.profile))
    };
    Explicit {
        model: is("model", "model"),
        base_url: is("base_url", "base_url"),
        reasoning: is("reasoning", "reasoning"),
    }
}

/// `cli` with the explicit settings of its `run`, `chat` or `resume` command set.
fn with_explicit(mut cli: Cli, explicit: Explicit) -> Cli {
    match &mut cli.command {
        Some(Command::Run(args) | Command::Chat(args)) => args.explicit = explicit,
        Some(Command::Resume(args)) => args.explicit = explicit,
        _ => {}
    }
    cli
}

/// Whether the user set argument `id` (on the command line or through its environment variable).
fn given(matches: &ArgMatches, id: &str) -> bool {
    matches!(
        matches.value_source(id),
        Some(ValueSource::CommandLine | ValueSource::EnvVariable)
    )
}

/// Index in `argv` just after the `run` subcommand token (global options such as `--store PATH`
/// may come before it).
fn after_subcommand(argv: &[OsString], name: &str) -> Option<usize> {
    let mut i = 1;
    while i < argv.len() {
        let arg = argv[i].to_string_lossy();
        if arg == name {
            return Some(i + 1);
        }
        if arg == "--db" || arg == "--store" {
            i += 1; // its value
        }
        i += 1;
    }
    None
}

/// Parses the command line with the config files applied to `agentloop run` and `chat` (see the module
/// docs). Help, version and usage errors of the user's own arguments exit as clap does.
pub fn parse(argv: Vec<OsString>) -> Result<Cli, Failure> {
    let matches = Cli::command().get_matches_from(argv.clone());
    if matches.subcommand().is_none() {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            let mut argv = argv;
            argv.push(OsString::from("chat"));
            return parse(argv);
        }
        return Cli::from_arg_matches(&matches).map_err(|e| Failure::usage(e.to_string()));
    }
    let Some((subcommand @ ("run" | "chat"), run)) = matches.subcommand() else {
        let explicit = match matches.subcommand() {
            Some(("resume", resume)) => explicit(resume, &[], false),
            _ => Explicit::default(),
        };
        return Cli::from_arg_matches(&matches)
            .map(|cli| with_explicit(cli, explicit))
            .map_err(|e| Failure::usage(e.to_string()));
    };
    let workspace = match run.get_one::<PathBuf>("workspace") {
        Some(dir) => dir.clone(),
        None => std::env::current_dir()
            .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))?,
    };
    let (layers, _) = layers(
        &workspace,
        run.get_one::<String>("profile").map(String::as_str),
    )?;
    let explicit = explicit(run, &layers, given(run, "profile"));
    let mut injected: Vec<OsString> = Vec::new();
    for (key, id, flag) in KEYS {
        if given(run, id) {
            continue;
        }
        let Some((value, origin)) = lookup(&layers, key) else {
            continue;
        };
        let arg = OsString::from(format!("{flag}={value}"));
        // Checked alone first, so an error names the file and the key.
        if let Err(e) = Cli::command().try_get_matches_from([
            OsString::from("agentloop"),
            OsString::from("run"),
            arg.clone(),
            OsString::from("prompt"),
        ]) {
            // clap's message without its usage and help-hint lines; the valid choices stay.
            let detail = e.to_string();
            let detail = detail
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with("Usage:") && !l.starts_with("For more"))
                .map(|l| l.trim_start_matches("error: "))
                .collect::<Vec<_>>()
                .join(" ");
            return Err(Failure::usage(format!(
                "{origin}: `{key} = {value:?}` is not valid: {detail}"
            )));
        }
        injected.push(arg);
    }
    if injected.is_empty() {
        return Cli::from_arg_matches(&matches)
            .map(|cli| with_explicit(cli, explicit))
            .map_err(|e| Failure::usage(e.to_string()));
    }
    let at = after_subcommand(&argv, subcommand).unwrap_or(argv.len());
    let mut with_config = argv[..at].to_vec();
    with_config.extend(injected);
    with_config.extend_from_slice(&argv[at..]);
    let matches = Cli::command().get_matches_from(with_config);
    Cli::from_arg_matches(&matches)
        .map(|cli| with_explicit(cli, explicit))
        .map_err(|e| Failure::usage(e.to_string()))
}

/// `agentloop config show`: every run setting's effective value and where it comes from, then
/// the MCP servers.
pub fn show(args: ConfigShowArgs) -> Result<(), Failure> {
    let workspace = match args.workspace {
        Some(dir) => dir,
        None => std::env::current_dir()
            .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))?,
    };
    let (layers, profile) = layers(&workspace, args.profile.as_deref())?;
    let command = Cli::command();
    let run = command
        .find_subcommand("run")
        .ok_or_else(|| Failure::new("the `run` subcommand is missing"))?;
    let mut out = String::new();
    if let Some(name) = &profile {
        out.push_str(&format!("# profile: {name}\n"));
    }
    for (key, id, _) in KEYS {
        let arg = run.get_arguments().find(|a| a.get_id() == *id);
        let env = arg
            .and_then(|a| a.get_env())
            .and_then(|name| std::env::var(name).ok().map(|v| (name, v)))
            .filter(|(_, v)| !v.is_empty());
        let (value, origin) = if let Some((name, value)) = env {
            (
                Some(value),
                format!("environment {}", name.to_string_lossy()),
            )
        } else if let Some((value, origin)) = lookup(&layers, key) {
            (Some(value), origin.to_owned())
        } else {
            let default = arg
                .map(|a| a.get_default_values())
                .and_then(|d| d.first())
                .map(|v| v.to_string_lossy().into_owned());
            (default, "default".to_owned())
        };
        let shown = match value {
            // Numbers as numbers, everything else as a TOML string: what one would write.
            Some(v) if v.parse::<f64>().is_ok() => format!("{key} = {v}"),
            Some(v) => format!("{key} = {}", toml::Value::String(v)),
            None => format!("# {key} (not set)"),
        };
        out.push_str(&format!(
            "{}  # {}\n",
            crate::safe_text::visible_line(&shown),
            crate::safe_text::visible_line(&origin)
        ));
    }
    let merged = files(&workspace)?
        .into_iter()
        .fold(ConfigFile::default(), |acc, (_, file)| acc.merge(file));
    for name in merged.mcp_servers.keys() {
        out.push_str(&format!(
            "[mcp_servers.{}]  # see `agentloop mcp list`\n",
            crate::safe_text::visible_line(name)
        ));
    }
    crate::render::out(&out);
    Ok(())
}
