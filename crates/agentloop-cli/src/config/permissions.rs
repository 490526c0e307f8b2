//! The `[permissions]` table of the config files: `allow` and `deny` lists of rules such as
//! `shell(cargo test*)` or `write_file(src/**)`, checked by the library's
//! [`PermissionRules`] before the approval policy (see `docs/EXTENDING.md`).
//!
//! The user file's rules always apply. A workspace file's `deny` rules always apply too (they
//! can only narrow what runs); its `allow` rules apply only when the workspace is trusted, so a
//! cloned repository cannot grant itself commands.

use std::path::Path;

use agentloop::builtin::{PermissionRule, PermissionRules};
use serde::Deserialize;

use crate::config::files::{ConfigFile, user_config_path};
use crate::error::Failure;

/// One file's `[permissions]` table, every rule already checked.
#[derive(Clone, Debug, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct PermissionsTable {
    /// Rules that run a call without asking.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Rules that refuse a call whatever else says.
    #[serde(default)]
    pub deny: Vec<String>,
}

impl PermissionsTable {
    /// Parses the table's TOML value; `origin` names the file in errors.
    pub fn from_toml(value: toml::Value, origin: &str) -> Result<Self, Failure> {
        let table: PermissionsTable = value.try_into().map_err(|e: toml::de::Error| {
            Failure::usage(format!(
                "invalid config file {origin}: [permissions]: {} (expected `allow` and `deny`, \
                 lists of rules such as \"shell(cargo test*)\")",
                e.message()
            ))
        })?;
        for rule in table.allow.iter().chain(&table.deny) {
            PermissionRule::parse(rule).map_err(|e| {
                Failure::usage(format!("invalid config file {origin}: [permissions]: {e}"))
            })?;
        }
        Ok(table)
    }

    /// Both lists, `other`'s after this one's.
    pub fn concat(mut self, other: PermissionsTable) -> PermissionsTable {
        self.allow.extend(other.allow);
        self.deny.extend(other.deny);
        self
    }

    fn rules(&self, with_allow: bool) -> PermissionRules {
        let allow: &[String] = if with_allow { &self.allow } else { &[] };
        // Every rule was checked when the file was read.
        PermissionRules::new(allow, &self.deny).unwrap_or_default()
    }
}

/// What an untrusted workspace file's table asks for and does not get: its allow rules.
pub fn untrusted_widening(table: &PermissionsTable) -> Vec<crate::config::trust::Ignored> {
    if table.allow.is_empty() {
        return Vec::new();
    }
    vec![crate::config::trust::Ignored {
        key: "permissions.allow".into(),
        value: format!("{:?}", table.allow),
    }]
}

/// The rules in force for `workspace`: the user file's, plus the workspace file's deny rules,
/// plus its allow rules when `trusted`.
pub fn load(workspace: &Path, trusted: bool) -> Result<PermissionRules, Failure> {
    let mut rules = PermissionRules::default();
    if let Some(path) = user_config_path() {
        rules.extend(ConfigFile::read(&path)?.permissions.rules(true));
    }
    let local = ConfigFile::read(&workspace.join(".agentloop").join("config.toml"))?;
    rules.extend(local.permissions.rules(trusted));
    Ok(rules)
}

/// Adds `rules` to the `[permissions] allow` list of the config file at `path` (created, with
/// its directory, when missing), keeping everything else in the file as it was — comments and
/// layout included. Rules already in the list are not added twice.
pub fn save_allow_rules(path: &Path, rules: &[String]) -> Result<(), Failure> {
    let failed = |e: &dyn std::fmt::Display| {
        Failure::new(format!("cannot save the rule to {}: {e}", path.display()))
    };
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(failed(&e)),
    };
    let mut doc: toml_edit::DocumentMut = text.parse().map_err(|e| failed(&e))?;
    let table = doc
        .entry("permissions")
        .or_insert_with(|| toml_edit::Item::Table(toml_edit::Table::new()))
        .as_table_like_mut()
        .ok_or_else(|| failed(&"`permissions` is not a table"))?;
    let allow = table
        .entry("allow")
        .or_insert(toml_edit::Item::Value(toml_edit::Array::new().into()))
        .as_array_mut()
        .ok_or_else(|| failed(&"`permissions.allow` is not a list"))?;
    for rule in rules {
        if !allow.iter().any(|v| v.as_str() == Some(rule.as_str())) {
            allow.push(rule.as_str());
        }
    }
    // The result must still be a valid config file before it replaces the old one.
    ConfigFile::parse(&doc.to_string(), &path.display().to_string())?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| failed(&e))?;
    }
    let temp = path.with_extension("toml.saving");
    std::fs::write(&temp, doc.to_string()).map_err(|e| failed(&e))?;
    std::fs::rename(&temp, path).map_err(|e| failed(&e))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_bad_rule_names_the_file_and_the_rule() {
        let err =
            ConfigFile::parse("[permissions]\nallow = [\"shell(cargo\"]\n", "f.toml").unwrap_err();
        assert!(
            err.message.contains("f.toml") && err.message.contains("shell(cargo"),
            "{}",
            err.message
        );
        let err = ConfigFile::parse("[permissions]\nalow = []\n", "f.toml").unwrap_err();
        assert!(err.message.contains("alow"), "{}", err.message);
    }

    #[test]
    fn untrusted_workspace_files_only_deny() {
        let file = ConfigFile::parse(
            "[permissions]\nallow = [\"shell\"]\ndeny = [\"read_file(.env)\"]\n",
            "f",
        )
        .unwrap();
        let rules = file.permissions.rules(false);
        assert!(rules.allow().is_empty());
        assert_eq!(rules.deny().len(), 1);
        assert_eq!(file.permissions.rules(true).allow().len(), 1);
    }

    #[test]
    fn saved_rules_join_the_allow_list_and_keep_the_rest_of_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentloop").join("config.toml");
        save_allow_rules(&path, &["shell(cargo test)".into()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            ConfigFile::parse(&text, "f").unwrap().permissions.allow,
            ["shell(cargo test)"]
        );
        let original = "# my settings\nmodel = \"openai:gpt-4o\" # pinned\n\n[permissions]\nallow = [\"shell(ls)\"]\ndeny = [\"shell(rm -rf*)\"]\n";
        std::fs::write(&path, original).unwrap();
        save_allow_rules(&path, &["shell(ls)".into(), "write_file".into()]).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with("# my settings\nmodel = \"openai:gpt-4o\" # pinned"),
            "{text}"
        );
        let file = ConfigFile::parse(&text, "f").unwrap();
        assert_eq!(file.permissions.allow, ["shell(ls)", "write_file"]);
        assert_eq!(file.permissions.deny, ["shell(rm -rf*)"]);
        std::fs::write(&path, "permissions = 3\n").unwrap();
        let err = save_allow_rules(&path, &["shell(ls)".into()]).unwrap_err();
        assert!(err.message.contains("not a table"), "{}", err.message);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "permissions = 3\n");
    }
}
