//! Where each setting of `agentloop run` comes from, and the command line with the config files
//! applied.
//!
//! Precedence, highest first: a flag on the command line or its environment variable; the
//! chosen profile (`--profile NAME`, else the `profile` key) as the workspace file defines it,
//! then as the user file does; the workspace file's top level; the user file's top level; the
//! built-in default. The files are `<workspace>/.agentloop/config.toml` and
//! `~/.config/agentloop/config.toml` (see [`crate::config::files`]).
//!
//! The workspace file counts in full only in a trusted directory ([`crate::config::trust`], decided
//! here once and handed to the command as `args.trust`). Otherwise its values that do not
//! narrow the user's ([`narrow_layers`]), its `profile` key and its MCP servers are left out,
//! and one stderr line names them; on a terminal the user is first asked whether to trust the
//! directory. A base URL from the workspace file is never used while the provider's key comes
//! from the environment ([`credential_rule`]).
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

use crate::cli::{Cli, Command, ConfigCommand, ConfigShowArgs, Explicit, McpCommand};
use crate::config::files::{ConfigFile, Settings, project_config_path, user_config_path};
use crate::config::trust::{HOW_TO_TRUST, Ignored, Trust, narrow};
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
    /// The profile name, for a `[profiles.NAME]` table.
    profile: Option<String>,
    /// From the workspace's own file (subject to [`crate::config::trust`]).
    project: bool,
}

/// The config files as the trust decision lets them apply.
struct View {
    /// The layers of settings, highest precedence first.
    layers: Vec<Layer>,
    /// The chosen profile's name.
    profile: Option<String>,
    /// What the untrusted workspace file asked for and does not get.
    ignored: Vec<Ignored>,
    /// The workspace's file.
    project_file: PathBuf,
}

/// The config files of `workspace`: (path, contents, is the workspace's own) of the user file
/// and the workspace file.
fn files(workspace: &Path) -> Result<Vec<(PathBuf, ConfigFile, bool)>, Failure> {
    let mut out = Vec::new();
    if let Some(path) = user_config_path() {
        let file = ConfigFile::read(&path)?;
        out.push((path, file, false));
    }
    let path = project_config_path(workspace);
    let file = ConfigFile::read(&path)?;
    out.push((path, file, true));
    Ok(out)
}

/// The chosen profile: the flag, else the most specific file's `profile` key — the
/// workspace's only when `trusted` (an untrusted file choosing one of the user's profiles is
/// recorded in `ignored`).
fn chosen_profile(
    files: &[(PathBuf, ConfigFile, bool)],
    flag: Option<&str>,
    trusted: bool,
    ignored: &mut Vec<Ignored>,
) -> Option<String> {
    if let Some(name) = flag {
        return Some(name.to_owned());
    }
    let key = |project: bool| {
        files
            .iter()
            .rev()
            .filter(|(_, _, p)| *p == project)
            .find_map(|(_, file, _)| file.profile.clone())
    };
    let (mine, theirs) = (key(false), key(true));
    match theirs {
        Some(name) if trusted => Some(name),
        Some(name) if mine.as_ref() != Some(&name) => {
            ignored.push(Ignored {
                key: "profile".to_owned(),
                value: name,
            });
            mine
        }
        _ => mine,
    }
}

/// The layers of settings for `workspace` (see [`View`]); an untrusted workspace file's
/// settings are narrowed ([`narrow_layers`]) and its MCP servers checked.
fn view(workspace: &Path, profile_flag: Option<&str>, trust: &Trust) -> Result<View, Failure> {
    let files = files(workspace)?;
    let trusted = trust.applies_to(workspace);
    let mut ignored = Vec::new();
    let profile = chosen_profile(&files, profile_flag, trusted, &mut ignored);
    let mut out = Vec::new();
    if let Some(name) = &profile {
        let mut found = false;
        for (path, file, project) in files.iter().rev() {
            if let Some(settings) = file.profiles.get(name) {
                found = true;
                out.push(Layer {
                    origin: format!("{} [profiles.{name}]", path.display()),
                    settings: settings.clone(),
                    profile: Some(name.clone()),
                    project: *project,
                });
            }
        }
        if !found {
            return Err(undefined_profile(name, &files));
        }
    }
    for (path, file, project) in files.iter().rev() {
        out.push(Layer {
            origin: path.display().to_string(),
            settings: file.settings.clone(),
            profile: None,
            project: *project,
        });
    }
    if !trusted {
        narrow_layers(&mut out, &mut ignored)?;
        ignored.extend(ignored_servers(&files));
        let none = ConfigFile::default();
        let theirs = files.iter().find(|f| f.2).map_or(&none, |f| &f.1);
        ignored.extend(crate::config::permissions::untrusted_widening(
            &theirs.permissions,
        ));
        ignored.extend(crate::config::hooks::untrusted_widening(&theirs.hooks));
    }
    Ok(View {
        layers: out,
        profile,
        ignored,
        project_file: project_config_path(workspace),
    })
}

/// The error for a profile no file defines.
fn undefined_profile(name: &str, files: &[(PathBuf, ConfigFile, bool)]) -> Failure {
    let mut known: Vec<&str> = files
        .iter()
        .flat_map(|(_, f, _)| f.profiles.keys().map(String::as_str))
        .collect();
    known.sort_unstable();
    known.dedup();
    Failure::usage(if known.is_empty() {
        format!("profile {name:?} is not defined: no config file has [profiles.*] tables")
    } else {
        format!(
            "profile {name:?} is not defined; the config files define: {}",
            known.join(", ")
        )
    })
}

/// Removes from the workspace file's layers every value that does not narrow what applies
/// without them (the user's layers, else the flag's default); see [`crate::config::trust::narrow`].
/// A value that is not valid at all is still an error, as it is in a trusted file.
fn narrow_layers(layers: &mut [Layer], ignored: &mut Vec<Ignored>) -> Result<(), Failure> {
    for (key, id, _) in KEYS {
        let base = layers
            .iter()
            .filter(|l| !l.project)
            .find_map(|l| l.settings.get(key))
            .or_else(|| run_default(id));
        for layer in layers.iter_mut().filter(|l| l.project) {
            let Some(value) = layer.settings.get(key) else {
                continue;
            };
            if narrow::narrows(key, &value, base.as_deref()) {
                continue;
            }
            check(key, &value, &layer.origin)?;
            layer.settings.clear(key);
            ignored.push(Ignored {
                key: match &layer.profile {
                    Some(name) => format!("profiles.{name}.{key}"),
                    None => (*key).to_owned(),
                },
                value,
            });
        }
    }
    Ok(())
}

/// The credential rule: while the provider of `model` (the effective `--model`) has an API key
/// in the environment, a base URL from the workspace's file — even a trusted one — is not
/// used, so the key only goes to a host the user chose (their own file, a flag, the
/// environment). Returns the note to print when one was dropped.
fn credential_rule(view: &mut View, model: &str) -> Option<String> {
    let provider = crate::provider::ModelSpec::parse(model).ok()?.provider;
    if !provider.key_in_environment() {
        return None;
    }
    let mut dropped = None;
    for layer in view.layers.iter_mut().filter(|l| l.project) {
        if let Some(url) = layer.settings.base_url.take() {
            dropped.get_or_insert((url, layer.origin.clone()));
        }
    }
    let (url, origin) = dropped?;
    Some(crate::ui::safe_text::visible_line(&format!(
        "not using base_url = {url:?} from {origin}: the {} API key in your environment is only          sent to a base URL from your own config file, a flag or the environment",
        provider.name()
    )))
}

/// The default of `run`'s argument `id`, as text.
fn run_default(id: &str) -> Option<String> {
    crate::cli::with_definition(|command| {
        let run = command.find_subcommand("run")?;
        let arg = run.get_arguments().find(|a| a.get_id() == id)?;
        arg.get_default_values()
            .first()
            .map(|v| v.to_string_lossy().into_owned())
    })
}

/// Checks a config value `key = value` from `origin` with its flag's parser, so an error
/// names the file and the key.
fn check(key: &str, value: &str, origin: &str) -> Result<OsString, Failure> {
    let flag = KEYS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map_or("", |(_, _, flag)| *flag);
    let arg = OsString::from(format!("{flag}={value}"));
    let checked = crate::cli::with_definition(|command| {
        command.try_get_matches_from_mut([
            OsString::from("agentloop"),
            OsString::from("run"),
            arg.clone(),
            OsString::from("prompt"),
        ])
    });
    if let Err(e) = checked {
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
    Ok(arg)
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
            || (profile_given
                && lookup_layer(layers, key).is_some_and(|(_, layer)| layer.profile.is_some()))
    };
    Explicit {
        model: is("model", "model"),
        base_url: is("base_url", "base_url"),
        reasoning: is("reasoning", "reasoning"),
    }
}

/// `cli` with the explicit settings of its `run`, `chat` or `resume` command set, and the
/// trust decision of its workspace handed to the commands that read the config files.
fn finish(mut cli: Cli, explicit: Explicit, trust: Option<Trust>) -> Result<Cli, Failure> {
    let flag = cli.trust_project;
    let decide = |dir: &Option<PathBuf>| -> Result<Trust, Failure> {
        match (&trust, dir) {
            (Some(trust), _) => Ok(trust.clone()),
            (None, Some(dir)) => Trust::evaluate(dir, flag),
            (None, None) => Trust::evaluate(&current_dir()?, flag),
        }
    };
    match &mut cli.command {
        Some(Command::Run(args) | Command::Chat(args)) => {
            args.explicit = explicit;
            args.trust = decide(&args.target.workspace)?;
        }
        #[cfg(feature = "acp")]
        Some(Command::Acp(args)) => {
            args.explicit = explicit;
            args.trust = decide(&args.target.workspace)?;
        }
        Some(Command::Resume(args)) => args.explicit = explicit,
        Some(Command::Config(ConfigCommand::Show(args))) => args.trust = decide(&args.workspace)?,
        Some(Command::Mcp(McpCommand::Login(args))) => args.trust = decide(&args.workspace)?,
        Some(Command::Mcp(McpCommand::Logout(args))) => args.trust = decide(&args.workspace)?,
        Some(Command::Mcp(McpCommand::List(args))) => {
            args.trust = decide(&args.workspace)?;
            let workspace = args.workspace.clone().map_or_else(current_dir, Ok)?;
            if !args.trust.applies_to(&workspace) {
                warn_ignored_servers(&workspace, &args.trust)?;
            }
        }
        _ => {}
    }
    Ok(cli)
}

/// What the workspace file's `[mcp_servers]` ask for that an untrusted workspace does not get.
fn ignored_servers(files: &[(PathBuf, ConfigFile, bool)]) -> Vec<Ignored> {
    let none = ConfigFile::default();
    let mine = files.iter().find(|f| !f.2).map_or(&none, |f| &f.1);
    let theirs = files.iter().find(|f| f.2).map_or(&none, |f| &f.1);
    narrow::mcp_servers(&mine.mcp_servers, &theirs.mcp_servers).1
}

/// The stderr line naming the MCP servers an untrusted workspace file defines and does not get.
fn warn_ignored_servers(workspace: &Path, trust: &Trust) -> Result<(), Failure> {
    let ignored = ignored_servers(&files(workspace)?);
    if !ignored.is_empty() {
        let file = project_config_path(workspace);
        eprintln!("agentloop: {}", trust.ignored_line(&file, &ignored));
    }
    Ok(())
}

fn current_dir() -> Result<PathBuf, Failure> {
    std::env::current_dir()
        .map_err(|e| Failure::new(format!("cannot read the current directory: {e}")))
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

/// `argv` parsed by the definition; help, version and usage errors exit as clap does.
fn matches_of(argv: Vec<OsString>) -> ArgMatches {
    crate::cli::with_definition(|command| command.try_get_matches_from_mut(argv))
        .unwrap_or_else(|e| e.exit())
}

/// Parses the command line with the config files applied to `agentloop run` and `chat` (see the module
/// docs). Help, version and usage errors of the user's own arguments exit as clap does.
pub fn parse(argv: Vec<OsString>) -> Result<Cli, Failure> {
    let matches = matches_of(argv.clone());
    let parsed = |matches: &ArgMatches| {
        Cli::from_arg_matches(matches).map_err(|e| Failure::usage(e.to_string()))
    };
    if matches.subcommand().is_none() {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            let mut argv = argv;
            argv.push(OsString::from("chat"));
            return parse(argv);
        }
        return parsed(&matches);
    }
    let Some((subcommand @ ("run" | "chat" | "acp"), run)) = matches.subcommand() else {
        let explicit = match matches.subcommand() {
            Some(("resume", resume)) => explicit(resume, &[], false),
            _ => Explicit::default(),
        };
        return finish(parsed(&matches)?, explicit, None);
    };
    let workspace = match run.get_one::<PathBuf>("workspace") {
        Some(dir) => dir.clone(),
        None => current_dir()?,
    };
    let profile = run.get_one::<String>("profile").map(String::as_str);
    let mut trust = Trust::evaluate(&workspace, matches.get_flag("trust_project"))?;
    let mut view = view(&workspace, profile, &trust)?;
    // First use of an untrusted directory whose file asks for more: the user decides.
    if !view.ignored.is_empty()
        && crate::config::trust::ask(&mut trust, &view.project_file, &view.ignored)?
    {
        view = self::view(&workspace, profile, &trust)?;
    }
    if !view.ignored.is_empty() {
        eprintln!(
            "agentloop: {}",
            trust.ignored_line(&view.project_file, &view.ignored)
        );
    }
    let model = match given(run, "model") {
        true => run.get_one::<String>("model").cloned(),
        false => lookup(&view.layers, "model").map(|(v, _)| v),
    }
    .or_else(|| run_default("model"))
    .unwrap_or_default();
    if !given(run, "base_url") {
        if let Some(note) = credential_rule(&mut view, &model) {
            eprintln!("agentloop: {note}");
        }
    }
    let explicit = explicit(run, &view.layers, given(run, "profile"));
    let mut injected: Vec<OsString> = Vec::new();
    for (key, id, _) in KEYS {
        if given(run, id) {
            continue;
        }
        let Some((value, origin)) = lookup(&view.layers, key) else {
            continue;
        };
        // Checked alone first, so an error names the file and the key.
        injected.push(check(key, &value, origin)?);
    }
    let matches = if injected.is_empty() {
        matches
    } else {
        let at = after_subcommand(&argv, subcommand).unwrap_or(argv.len());
        let mut with_config = argv[..at].to_vec();
        with_config.extend(injected);
        with_config.extend_from_slice(&argv[at..]);
        matches_of(with_config)
    };
    finish(parsed(&matches)?, explicit, Some(trust))
}

/// `agentloop config show`: the workspace's trust state, every run setting's effective value
/// and where it comes from, what an untrusted workspace file asked for and does not get, then
/// the MCP servers.
pub fn show(args: ConfigShowArgs) -> Result<(), Failure> {
    let workspace = match args.workspace {
        Some(dir) => dir,
        None => current_dir()?,
    };
    let mut view = view(&workspace, args.profile.as_deref(), &args.trust)?;
    let command = Cli::command();
    let run = command
        .find_subcommand("run")
        .ok_or_else(|| Failure::new("the `run` subcommand is missing"))?;
    let env_of = |id: &str| {
        run.get_arguments()
            .find(|a| a.get_id() == id)
            .and_then(|a| a.get_env())
            .and_then(|name| std::env::var(name).ok().map(|v| (name.to_owned(), v)))
            .filter(|(_, v)| !v.is_empty())
    };
    let model = env_of("model")
        .map(|(_, v)| v)
        .or_else(|| lookup(&view.layers, "model").map(|(v, _)| v))
        .or_else(|| run_default("model"))
        .unwrap_or_default();
    let credential = credential_rule(&mut view, &model);
    let visible = crate::ui::safe_text::visible_line;
    let mut out = format!(
        "# workspace {}: {}\n",
        visible(&args.trust.dir.display().to_string()),
        args.trust.describe()
    );
    if let Some(name) = &view.profile {
        out.push_str(&format!("# profile: {}\n", visible(name)));
    }
    for (key, id, _) in KEYS {
        let (value, origin) = if let Some((name, value)) = env_of(id) {
            (
                Some(value),
                format!("environment {}", name.to_string_lossy()),
            )
        } else if let Some((value, origin)) = lookup(&view.layers, key) {
            (Some(value), origin.to_owned())
        } else {
            (run_default(id), "default".to_owned())
        };
        let shown = match value {
            // Numbers as numbers, everything else as a TOML string: what one would write.
            Some(v) if v.parse::<f64>().is_ok() => format!("{key} = {v}"),
            Some(v) => format!("{key} = {}", toml::Value::String(v)),
            None => format!("# {key} (not set)"),
        };
        out.push_str(&format!("{}  # {}\n", visible(&shown), visible(&origin)));
    }
    for item in &view.ignored {
        out.push_str(&format!(
            "# ignored (untrusted): {} = {}  # {}\n",
            visible(&item.key),
            visible(&item.value),
            visible(&view.project_file.display().to_string())
        ));
    }
    if let Some(note) = credential {
        out.push_str(&format!("# {note}\n"));
    }
    if !view.ignored.is_empty() {
        out.push_str(&format!("# {HOW_TO_TRUST}\n"));
    }
    let merged = ConfigFile::load(&workspace, &args.trust)?;
    for name in merged.mcp_servers.keys() {
        out.push_str(&format!(
            "[mcp_servers.{}]  # see `agentloop mcp list`\n",
            visible(name)
        ));
    }
    crate::ui::render::out(&out);
    Ok(())
}
