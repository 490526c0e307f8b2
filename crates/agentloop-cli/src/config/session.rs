//! The settings stored with a session and brought back when it is resumed (`--continue`,
//! `--session`, chat `/resume`, `agentloop resume`): what a run records ([`recorded`]) and how
//! the stored values replace the ones the user did not give on this invocation ([`restore`]).
//!
//! The rule: a flag given on this invocation (typed, its environment variable, or a profile
//! chosen with `--profile`; see [`Explicit`]) wins; otherwise the session's stored value applies,
//! over the config files and the defaults. Provider, model, base URL and reasoning are restored
//! as a unit from sessions that recorded them; the base URL only while the provider stays the
//! stored one (an explicit `--model` of another provider resolves its base URL as usual). What
//! the run then uses is stored again ([`store_if_changed`]), so an override sticks for the next
//! `--continue`. The workspace is never restored: tools work where the user runs them, and the
//! session's workspace becomes that directory.
//!
//! An imported session (`agentloop sessions import`) carries no authority: its stored provider
//! and base URL were written by whoever made the file, so they are not restored (the model id
//! and reasoning only within the provider the user chose here); once it has run here, the
//! settings stored are this machine's and the session counts as local.

use std::path::Path;

use agentloop::session::{SessionInfo, SessionSettings, SessionStore};

use crate::cli::{Explicit, ReasoningArg};
use crate::error::Failure;
use crate::provider::{ModelSpec, Provider};
use crate::ui::safe_text::visible_line;

/// The model-related choices of a run: the values of `--model`, `--base-url` and `--reasoning`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// `PROVIDER:NAME`.
    pub model: String,
    /// `--base-url`.
    pub base_url: Option<String>,
    /// `--reasoning`.
    pub reasoning: Option<ReasoningArg>,
}

impl Choice {
    /// The model this choice names, built as the run asks (its `--fallback-model`s and prompt
    /// cache setting): every place that starts or resumes a session builds it this way.
    pub fn build(
        &self,
        args: &crate::cli::RunArgs,
    ) -> Result<(ModelSpec, std::sync::Arc<dyn agentloop::model::Model>), Failure> {
        let spec = ModelSpec::parse(&self.model)?;
        let model = crate::provider::build_model_chain(
            &spec,
            &args.fallback_model,
            self.base_url.as_deref(),
            !args.no_prompt_cache,
        )?;
        Ok((spec, model))
    }
}

/// The settings a run with `spec`, `base_url` (`--base-url`, else the provider's environment
/// variable, else the official endpoint — the URL requests actually go to) and `reasoning`
/// records, in workspace `workspace` (a canonical path).
pub fn recorded(
    spec: &ModelSpec,
    base_url: Option<&str>,
    reasoning: Option<ReasoningArg>,
    workspace: &Path,
) -> SessionSettings {
    SessionSettings::new()
        .workspace(workspace)
        .provider(spec.provider.name())
        .model(&spec.name)
        .base_url(spec.provider.base_url(base_url))
        .reasoning(reasoning.map(Into::into))
}

/// Replaces the choices the user did not give explicitly with `stored` (see the module docs).
/// Returns a note for the user when the stored settings could not be used.
pub fn restore(
    stored: &SessionSettings,
    explicit: Explicit,
    choice: &mut Choice,
) -> Option<String> {
    if stored.imported {
        return restore_imported(stored, explicit, choice);
    }
    let (Some(provider_name), Some(model)) = (&stored.provider, &stored.model) else {
        return None; // recorded before settings existed, or by another program
    };
    let Some(provider) = Provider::parse(provider_name) else {
        return Some(format!(
            "the session's provider {} is not one this CLI knows; using --model {}",
            visible_line(provider_name),
            visible_line(&choice.model)
        ));
    };
    let same_provider = if explicit.model {
        ModelSpec::parse(&choice.model).is_ok_and(|spec| spec.provider == provider)
    } else {
        choice.model = ModelSpec {
            provider,
            name: model.clone(),
        }
        .flag();
        true
    };
    if !explicit.base_url && same_provider {
        if let Some(url) = &stored.base_url {
            choice.base_url = Some(url.clone());
        }
    }
    if !explicit.reasoning {
        choice.reasoning = stored.reasoning.and_then(ReasoningArg::of);
    }
    None
}

/// [`restore`] for a session created by `agentloop sessions import`: its settings were
/// recorded elsewhere, by whoever wrote the file, so nothing in them may choose where the
/// user's key goes. The stored model id and reasoning apply only within the provider the user
/// chose on this invocation (flags, config, defaults); the stored provider and base URL never
/// do — the user gives them again (`--model`, `--base-url`) to use them.
fn restore_imported(
    stored: &SessionSettings,
    explicit: Explicit,
    choice: &mut Choice,
) -> Option<String> {
    let mine = ModelSpec::parse(&choice.model)
        .ok()
        .map(|spec| spec.provider);
    let theirs = stored.provider.as_deref().and_then(Provider::parse);
    let same_provider = mine.is_some() && mine == theirs;
    if same_provider && !explicit.model {
        if let (Some(provider), Some(model)) = (mine, &stored.model) {
            choice.model = ModelSpec {
                provider,
                name: model.clone(),
            }
            .flag();
        }
    }
    if same_provider && !explicit.reasoning {
        choice.reasoning = stored.reasoning.and_then(ReasoningArg::of);
    }
    let mut unused = Vec::new();
    if let (Some(provider), false) = (&stored.provider, same_provider || explicit.model) {
        unused.push(format!("provider {}", visible_line(provider)));
    }
    if let (Some(url), false) = (&stored.base_url, explicit.base_url) {
        if choice.base_url.as_deref() != Some(url.as_str()) {
            unused.push(format!("base URL {}", visible_line(url)));
        }
    }
    (!unused.is_empty()).then(|| {
        format!(
            "this session was imported: its recorded {} not used (give --model / --base-url \
             to use them)",
            match unused.len() {
                1 => format!("{} is", unused[0]),
                _ => format!("{} are", unused.join(" and ")),
            }
        )
    })
}

/// Stores `settings` with `session` unless they are what it has; says on stderr when the
/// session moves to another workspace.
pub fn store_if_changed(
    store: &dyn SessionStore,
    session: &mut SessionInfo,
    settings: SessionSettings,
) -> Result<(), Failure> {
    if session.settings == settings {
        return Ok(());
    }
    if let (Some(was), Some(now)) = (&session.settings.workspace, &settings.workspace) {
        if was != now {
            eprintln!(
                "agentloop: session {} was recorded in {}; it continues in {} (now its workspace)",
                visible_line(&session.id),
                visible_line(was),
                visible_line(now)
            );
        }
    }
    store.set_settings(&session.id, &settings)?;
    session.settings = settings;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop::model::ReasoningLevel;

    fn stored() -> SessionSettings {
        SessionSettings::new()
            .provider("anthropic")
            .model("claude-x")
            .base_url("http://localhost:9/")
            .reasoning(Some(ReasoningLevel::High))
    }

    fn default_choice() -> Choice {
        Choice {
            model: "openai:gpt-4o-mini".into(),
            base_url: Some("http://from-config/v1".into()),
            reasoning: Some(ReasoningArg(ReasoningLevel::Low)),
        }
    }

    #[test]
    fn stored_settings_replace_what_was_not_given() {
        let mut choice = default_choice();
        assert_eq!(restore(&stored(), Explicit::default(), &mut choice), None);
        assert_eq!(
            choice,
            Choice {
                model: "anthropic:claude-x".into(),
                base_url: Some("http://localhost:9/".into()),
                reasoning: Some(ReasoningArg(ReasoningLevel::High)),
            }
        );
        // Recorded "provider default" reasoning is restored as such.
        let mut choice = default_choice();
        restore(&stored().reasoning(None), Explicit::default(), &mut choice);
        assert_eq!(choice.reasoning, None);
    }

    #[test]
    fn explicit_flags_win_and_another_provider_drops_the_stored_base_url() {
        let mut choice = default_choice();
        let explicit = Explicit {
            model: true,
            reasoning: true,
            ..Explicit::default()
        };
        restore(&stored(), explicit, &mut choice);
        assert_eq!(choice, default_choice());

        let mut choice = Choice {
            model: "anthropic:other".into(),
            ..default_choice()
        };
        restore(&stored(), explicit, &mut choice);
        assert_eq!(choice.model, "anthropic:other");
        assert_eq!(choice.base_url.as_deref(), Some("http://localhost:9/"));
    }

    #[test]
    fn an_imported_session_never_chooses_the_provider_or_the_base_url() {
        let foreign = stored().imported(true);
        let mut choice = default_choice();
        let note = restore(&foreign, Explicit::default(), &mut choice).unwrap();
        assert_eq!(
            choice,
            default_choice(),
            "another provider: nothing applies"
        );
        assert!(
            note.contains("anthropic") && note.contains("localhost:9"),
            "{note}"
        );

        let same = SessionSettings::new()
            .provider("openai")
            .model("gpt-x")
            .base_url("http://evil.example/v1")
            .imported(true);
        let mut choice = default_choice();
        let note = restore(&same, Explicit::default(), &mut choice).unwrap();
        assert_eq!(choice.model, "openai:gpt-x");
        assert_eq!(choice.base_url.as_deref(), Some("http://from-config/v1"));
        assert!(note.contains("evil.example"), "{note}");
    }

    #[test]
    fn sessions_without_settings_change_nothing() {
        let mut choice = default_choice();
        restore(&SessionSettings::new(), Explicit::default(), &mut choice);
        assert_eq!(choice, default_choice());
        let odd = SessionSettings::new().provider("scripted").model("m");
        assert!(restore(&odd, Explicit::default(), &mut choice).is_some());
        assert_eq!(choice, default_choice());
    }
}
