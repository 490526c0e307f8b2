//! Skills: directories holding a `SKILL.md` (front matter `name`, `description`, optional
//! `allowed_tools`, then instructions in Markdown) that the model loads on demand.
//!
//! Only each skill's name and description go in the system prompt ([`Skills::prompt_section`]);
//! the `skill` tool ([`skill_tool`]) returns a skill's instructions when the model asks for them,
//! and any file beside `SKILL.md` by its relative path — confined to the skill's directory the
//! way the file tools are confined to the workspace (no `..`, no symbolic link out). Loading
//! ([`Skills::load_dir`]) is for applications that keep skills on disk; a library user can build
//! [`Skill`] values in code.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::front_matter::{deserialize_name_list, parse_front_matter_as, split_front_matter};
use super::workspace::Workspace;
use crate::tooling::{ToolContext, ToolDeps, ToolError, ToolSpec};

/// The most bytes of one skill file returned by the tool.
pub const MAX_SKILL_FILE_BYTES: u64 = 256 * 1024;

/// The skill tool's name.
pub const SKILL_TOOL_NAME: &str = "skill";

/// One skill.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Skill {
    /// Its name (what the model passes to the `skill` tool).
    pub name: String,
    /// When to use it (shown in the system prompt).
    pub description: String,
    /// The tools its instructions expect (informational; shown with the instructions).
    pub allowed_tools: Vec<String>,
    /// Its instructions: `SKILL.md` after the front matter.
    pub body: String,
    /// Its directory (`None` for a skill built in code: it has no files).
    pub dir: Option<PathBuf>,
}

impl Skill {
    /// A skill with no files and no tool list.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        body: impl Into<String>,
    ) -> Self {
        Skill {
            name: name.into(),
            description: description.into(),
            allowed_tools: Vec::new(),
            body: body.into(),
            dir: None,
        }
    }

    /// Reads `dir/SKILL.md`. The name defaults to the directory's name.
    pub fn read(dir: &Path) -> Result<Skill, String> {
        let path = dir.join("SKILL.md");
        let text = read_capped(&path)?;
        let (front, body) = split_front_matter(&text);
        let fields = parse_front_matter(front.unwrap_or_default())?;
        let name = match fields.name {
            Some(n) => n,
            None => dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        };
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(format!(
                "{}: the skill name {name:?} is not one word",
                path.display()
            ));
        }
        let description = fields.description.unwrap_or_default();
        if description.trim().is_empty() {
            return Err(format!(
                "{}: the front matter has no `description`",
                path.display()
            ));
        }
        Ok(Skill {
            name,
            description,
            allowed_tools: fields.allowed_tools,
            body: body.trim().to_owned(),
            dir: Some(dir.to_path_buf()),
        })
    }
}

fn read_capped(path: &Path) -> Result<String, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let meta = file
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_SKILL_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The front-matter fields of a skill or a command file, as [`parse_front_matter`] reads them
/// (with the spellings Claude Code's files use); other keys are ignored.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[non_exhaustive]
pub struct FrontMatter {
    /// `name`.
    pub name: Option<String>,
    /// `description`.
    #[serde(default, deserialize_with = "deserialize_text")]
    pub description: Option<String>,
    /// `allowed_tools` (also `allowed-tools`): a list, or names separated by commas.
    #[serde(
        default,
        alias = "allowed-tools",
        deserialize_with = "deserialize_name_list"
    )]
    pub allowed_tools: Vec<String>,
    /// `model` (`None` when empty).
    #[serde(default, deserialize_with = "deserialize_non_empty")]
    pub model: Option<String>,
    /// `argument_hint` (also `argument-hint`).
    #[serde(
        default,
        alias = "argument-hint",
        deserialize_with = "deserialize_argument_hint"
    )]
    pub argument_hint: Option<String>,
}

/// Parses the YAML front matter of a skill or a command file (see [`parse_front_matter_as`] for
/// the limits); keys other than those of [`FrontMatter`] are ignored, whatever their shape.
pub fn parse_front_matter(text: &str) -> Result<FrontMatter, String> {
    parse_front_matter_as(text)
}

/// A text without the line break a block scalar (`description: |`) ends with, which is no part
/// of the text.
fn deserialize_text<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    Ok(text.map(|t| t.trim_end().to_owned()))
}

/// A text, `None` when empty.
fn deserialize_non_empty<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    let text = Option::<String>::deserialize(deserializer)?;
    Ok(text.filter(|t| !t.is_empty()))
}

/// `argument-hint` is meant as text (`[file] [line]`), but an unquoted `[message]` is a YAML
/// list; Claude Code accepts that form, so it reads here as the text it was written as.
fn deserialize_argument_hint<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    struct Hint;
    impl<'de> serde::de::Visitor<'de> for Hint {
        type Value = Option<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a text")
        }
        fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }
        fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Self::Value, E> {
            Ok(Some(n.to_string()))
        }
        fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Self::Value, E> {
            Ok(Some(n.to_string()))
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut items = Vec::new();
            while let Some(item) = seq.next_element::<String>()? {
                items.push(item);
            }
            Ok(Some(format!("[{}]", items.join(", "))))
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    deserializer.deserialize_any(Hint)
}

/// A set of skills, by name (the first one of a name wins).
#[derive(Clone, Debug, Default)]
pub struct Skills {
    skills: Vec<Skill>,
}

impl Skills {
    /// The skills given, in order; a later skill with a name already taken is dropped.
    pub fn new(skills: impl IntoIterator<Item = Skill>) -> Self {
        let mut set = Skills::default();
        for skill in skills {
            set.push(skill);
        }
        set
    }

    /// Adds `skill` unless its name is taken; returns whether it was added.
    pub fn push(&mut self, skill: Skill) -> bool {
        if self.get(&skill.name).is_some() {
            return false;
        }
        self.skills.push(skill);
        true
    }

    /// Every `*/SKILL.md` under `root`, in name order; `Err` lines for skills that could not be
    /// read. A missing `root` is no skills.
    pub fn load_dir(root: &Path) -> (Vec<Skill>, Vec<String>) {
        let mut skills = Vec::new();
        let mut problems = Vec::new();
        let Ok(entries) = std::fs::read_dir(root) else {
            return (skills, problems);
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").exists())
            .collect();
        dirs.sort();
        for dir in dirs {
            match Skill::read(&dir) {
                Ok(skill) => skills.push(skill),
                Err(why) => problems.push(why),
            }
        }
        (skills, problems)
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    /// All skills.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.skills.is_empty()
    }

    /// The system-prompt section listing the skills (names and descriptions only); empty when
    /// there are none.
    pub fn prompt_section(&self) -> String {
        if self.skills.is_empty() {
            return String::new();
        }
        let mut text = format!(
            "# Skills\n\nThese skills hold instructions for particular tasks. When a task matches \
             one, call the `{SKILL_TOOL_NAME}` tool with its name to load its instructions \
             before starting.\n"
        );
        for skill in &self.skills {
            text.push_str(&format!(
                "\n- {}: {}",
                skill.name,
                skill.description.replace('\n', " ")
            ));
        }
        text
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    name: String,
    file: Option<String>,
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "The skill's name, as listed in the system prompt."},
            "file": {"type": "string", "description": "A file of the skill to read, relative to its directory (default: its instructions)."}
        },
        "required": ["name"],
        "additionalProperties": false
    })
}

/// The `skill` tool over `skills` (read-only: it never needs approval).
pub fn skill_tool<D: ToolDeps>(skills: Skills) -> Result<ToolSpec<D>, crate::tooling::SpecError> {
    ToolSpec::builder(
        SKILL_TOOL_NAME,
        "Load a skill's instructions by name (the skills are listed in the system prompt), or \
         one of the files beside them with `file`.",
    )
    .parameters(schema())
    .blocking_handler(move |_ctx: ToolContext<D>, args: Args| load(&skills, args))
    .build()
}

fn load(skills: &Skills, args: Args) -> Result<String, ToolError> {
    let Some(skill) = skills.get(&args.name) else {
        let names: Vec<&str> = skills.iter().map(|s| s.name.as_str()).collect();
        return Err(ToolError::new(format!(
            "there is no skill {:?}; the skills are: {}",
            args.name,
            names.join(", ")
        )));
    };
    let Some(file) = args.file.filter(|f| !f.is_empty() && f != "SKILL.md") else {
        let mut text = skill.body.clone();
        if !skill.allowed_tools.is_empty() {
            text.push_str(&format!(
                "\n\n(This skill uses the tools: {}.)",
                skill.allowed_tools.join(", ")
            ));
        }
        if let Some(dir) = &skill.dir {
            text.push_str(&format!(
                "\n\n(Files of this skill are read with `{SKILL_TOOL_NAME}` and `file`, relative to {}.)",
                dir.display()
            ));
        }
        return Ok(text);
    };
    let Some(dir) = &skill.dir else {
        return Err(ToolError::new(format!(
            "the skill {:?} has no files",
            skill.name
        )));
    };
    let confined = Workspace::new(dir)
        .map_err(|e| ToolError::new(format!("cannot open the skill's directory: {e}")))?;
    let path = confined.resolve(&file)?;
    let handle = confined.open_read(&path).map_err(|e| {
        ToolError::new(format!(
            "cannot read `{file}` of skill {:?}: {e}",
            skill.name
        ))
    })?;
    let mut bytes = Vec::new();
    handle
        .take(MAX_SKILL_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::new(format!("cannot read `{file}`: {e}")))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn front_matter_in_its_common_shapes() {
        let (front, body) = split_front_matter(
            "---\nname: pdf\ndescription: \"Fill PDF forms\"\nallowed-tools: Read, Grep\n---\n# Body\n",
        );
        let fields = parse_front_matter(front.unwrap()).unwrap();
        assert_eq!(fields.name.as_deref(), Some("pdf"));
        assert_eq!(fields.description.as_deref(), Some("Fill PDF forms"));
        assert_eq!(fields.allowed_tools, ["Read", "Grep"]);
        assert_eq!(body, "# Body\n");
        let fields = parse_front_matter("allowed_tools:\n  - shell\n  - read_file\n").unwrap();
        assert_eq!(fields.allowed_tools, ["shell", "read_file"]);
        let fields = parse_front_matter("allowed_tools: [a, 'b']\n").unwrap();
        assert_eq!(fields.allowed_tools, ["a", "b"]);
        assert_eq!(split_front_matter("no front matter").0, None);
        assert!(parse_front_matter("just text").is_err());
    }

    #[test]
    fn front_matter_is_yaml_with_block_scalars_escapes_comments_and_ignored_maps() {
        let fields = parse_front_matter(
            "# Written by hand.
name: pdf   # the skill's name
description: |
  Fill PDF forms.
  Use when: a form is given.
model: \"\"
argument-hint: \"<file> [pages]\"
metadata:
  version: 2
  owners: [a, {b: c}]
allowed_tools:
  - Read
  - 'Bash(git log:*)'
",
        )
        .unwrap();
        assert_eq!(fields.name.as_deref(), Some("pdf"));
        assert_eq!(
            fields.description.as_deref(),
            Some("Fill PDF forms.\nUse when: a form is given.")
        );
        assert_eq!(fields.model, None);
        assert_eq!(fields.argument_hint.as_deref(), Some("<file> [pages]"));
        assert_eq!(fields.allowed_tools, ["Read", "Bash(git log:*)"]);

        let fields = parse_front_matter(
            "description: >-\n  Folded\n  into one.\nname: \"a\\u0062c\"\nmodel: gpt-4.1\n",
        )
        .unwrap();
        assert_eq!(fields.description.as_deref(), Some("Folded into one."));
        assert_eq!(fields.name.as_deref(), Some("abc"));
        assert_eq!(fields.model.as_deref(), Some("gpt-4.1"));
        let fields = parse_front_matter("description: \"Two\\nlines: yes\"\n").unwrap();
        assert_eq!(fields.description.as_deref(), Some("Two\nlines: yes"));
    }

    #[test]
    fn claude_code_command_keys_in_their_spellings() {
        // An unquoted `[message]` is a YAML list; it reads back as the hint it was written as.
        let fields = parse_front_matter("argument-hint: [message]\n").unwrap();
        assert_eq!(fields.argument_hint.as_deref(), Some("[message]"));
        let fields = parse_front_matter("argument_hint: <pr> [priority]\n").unwrap();
        assert_eq!(fields.argument_hint.as_deref(), Some("<pr> [priority]"));
        let fields =
            parse_front_matter("allowed-tools: Bash(git add:*), Bash(git status:*)\n").unwrap();
        assert_eq!(
            fields.allowed_tools,
            ["Bash(git add:*)", "Bash(git status:*)"]
        );
        // Scalars that YAML would type are kept as written.
        let fields = parse_front_matter("name: 2024\ndescription: yes\n").unwrap();
        assert_eq!(fields.name.as_deref(), Some("2024"));
        assert_eq!(fields.description.as_deref(), Some("yes"));
    }

    #[test]
    fn empty_front_matter_has_no_fields() {
        for text in ["", "# nothing yet\n", "\n\n"] {
            assert_eq!(parse_front_matter(text).unwrap(), FrontMatter::default());
        }
    }

    #[test]
    fn hostile_front_matter_is_refused_in_one_line() {
        let mut bomb = String::from("description: d\nl0: &l0 [lol, lol, lol, lol]\n");
        for level in 1..=9 {
            let refs = vec![format!("*l{}", level - 1); 10].join(", ");
            bomb.push_str(&format!("l{level}: &l{level} [{refs}]\n"));
        }
        bomb.push_str("metadata: *l9\n");
        let deep = format!("metadata:\n  {}x\n", "- ".repeat(1000));
        let deep_flow = format!("metadata: {}{}\n", "{a: ".repeat(5000), "}".repeat(5000));
        let long = format!("description: \"{}\"\n", "x".repeat(65 * 1024));
        for text in [bomb, deep, deep_flow, long] {
            let err = parse_front_matter(&text).unwrap_err();
            assert!(!err.contains('\n') && err.len() < 400, "{err}");
        }
    }
}
