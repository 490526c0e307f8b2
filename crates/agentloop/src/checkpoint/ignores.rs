//! Which paths of a workspace its `.gitignore` files hide, decided as the `ignore` crate's
//! walker decides them with git's rules and no repository required: every `.gitignore` from
//! the filesystem root down to the path's directory and every `.git/info/exclude` on the way
//! apply; the deepest file with a matching line wins (a `!` line re-includes), and a
//! `.gitignore` line wins over an exclude line. Parsed files are kept between snapshots and
//! parsed again only when their stat changes, so an unchanged tree re-reads none of them.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::Entry;
use super::snapshot::{RACY_NS, now_ns, stat_entry};

/// The rules in force in one directory: those of its own ignore files and, through `parent`,
/// of every directory above it. A directory without ignore files shares its parent's rules.
#[derive(Debug)]
pub(crate) struct Rules {
    parent: Option<Arc<Rules>>,
    /// The directory of this level's files relative to the workspace root, `None` for a
    /// directory above the root (matched with absolute paths).
    dir: Option<String>,
    gitignore: Option<Arc<Gitignore>>,
    exclude: Option<Arc<Gitignore>>,
    /// The workspace root, for the absolute paths of the levels above it.
    root: Arc<Path>,
}

/// A parsed ignore file and the stat it was parsed with.
#[derive(Debug)]
struct Parsed {
    stat: Entry,
    parsed_at: i64,
    matcher: Option<Arc<Gitignore>>,
}

/// The ignore files parsed so far, by path (shared by the walk's threads).
#[derive(Debug, Default)]
pub(crate) struct IgnoreCache {
    parsed: Mutex<HashMap<PathBuf, Parsed>>,
}

impl IgnoreCache {
    /// The rules of `file` (matched relative to `base`), `None` when it does not exist or has
    /// no rule. Parsed again only when its stat changed, or changed too recently to be sure.
    fn load(&self, file: &Path, base: &Path) -> Option<Arc<Gitignore>> {
        let Ok(meta) = std::fs::metadata(file) else {
            self.lock().remove(file);
            return None;
        };
        let stat = stat_entry(&meta);
        if let Some(parsed) = self.lock().get(file) {
            if same_stat(&parsed.stat, &stat)
                && stat.mtime.saturating_add(RACY_NS) < parsed.parsed_at
            {
                return parsed.matcher.clone();
            }
        }
        let parsed_at = now_ns();
        let mut builder = GitignoreBuilder::new(base);
        // A line that is not a valid glob is skipped, as git and the `ignore` crate do.
        let _ = builder.add(file);
        let matcher = builder.build().ok().filter(|g| !g.is_empty()).map(Arc::new);
        let parsed = Parsed {
            stat,
            parsed_at,
            matcher: matcher.clone(),
        };
        self.lock().insert(file.to_path_buf(), parsed);
        matcher
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, Parsed>> {
        self.parsed.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The rules in force at the workspace root `root` before its own files: those of every
    /// directory above it.
    pub(crate) fn above(&self, root: &Path) -> Arc<Rules> {
        let root: Arc<Path> = Arc::from(root);
        let mut rules = Arc::new(Rules {
            parent: None,
            dir: None,
            gitignore: None,
            exclude: None,
            root: root.clone(),
        });
        let mut ancestors: Vec<&Path> = root.ancestors().skip(1).collect();
        ancestors.reverse();
        for dir in ancestors {
            let gitignore = self.load(&dir.join(".gitignore"), dir);
            let exclude = self.load(&dir.join(".git/info/exclude"), dir);
            rules = rules.with(None, gitignore, exclude);
        }
        rules
    }

    /// The rules in force in the workspace directory `rel` (`""`: the root), whose parent's
    /// rules are `parent`, given whether it holds a `.gitignore` and a `.git`.
    pub(crate) fn enter(
        &self,
        parent: &Arc<Rules>,
        rel: &str,
        has_gitignore: bool,
        has_git: bool,
    ) -> Arc<Rules> {
        if !has_gitignore && !has_git {
            return parent.clone();
        }
        let dir = parent.root.join(rel);
        let gitignore = has_gitignore
            .then(|| self.load(&dir.join(".gitignore"), &dir))
            .flatten();
        let exclude = has_git
            .then(|| self.load(&dir.join(".git/info/exclude"), &dir))
            .flatten();
        parent.with(Some(rel.to_owned()), gitignore, exclude)
    }
}

fn same_stat(a: &Entry, b: &Entry) -> bool {
    (a.size, a.mtime, a.ctime, a.ino, a.mode) == (b.size, b.mtime, b.ctime, b.ino, b.mode)
}

impl Rules {
    fn with(
        self: &Arc<Self>,
        dir: Option<String>,
        gitignore: Option<Arc<Gitignore>>,
        exclude: Option<Arc<Gitignore>>,
    ) -> Arc<Rules> {
        if gitignore.is_none() && exclude.is_none() {
            return self.clone();
        }
        Arc::new(Rules {
            parent: Some(self.clone()),
            dir,
            gitignore,
            exclude,
            root: self.root.clone(),
        })
    }

    /// Whether the workspace path `rel` (a directory when `is_dir`) is ignored.
    pub(crate) fn is_ignored(&self, rel: &str, is_dir: bool) -> bool {
        if self.gitignore.is_none() && self.exclude.is_none() && self.parent.is_none() {
            return false;
        }
        let (mut gitignore, mut exclude) = (Match::None, Match::None);
        let mut absolute: Option<PathBuf> = None;
        let mut level = Some(self);
        while let Some(rules) = level {
            if !gitignore.is_none() {
                break; // the deepest `.gitignore` match decides, whatever the excludes say
            }
            let path: &Path = match &rules.dir {
                Some(dir) => Path::new(below(rel, dir)),
                None => absolute.get_or_insert_with(|| self.root.join(rel)),
            };
            if let Some(matcher) = &rules.gitignore {
                gitignore = matcher.matched(path, is_dir).map(|_| ());
            }
            if let (true, Some(matcher)) = (exclude.is_none(), &rules.exclude) {
                exclude = matcher.matched(path, is_dir).map(|_| ());
            }
            level = rules.parent.as_deref();
        }
        if gitignore.is_none() {
            exclude.is_ignore()
        } else {
            gitignore.is_ignore()
        }
    }
}

/// `rel` relative to its ancestor directory `dir` (both relative to the workspace root).
fn below<'a>(rel: &'a str, dir: &str) -> &'a str {
    if dir.is_empty() {
        return rel;
    }
    rel.strip_prefix(dir)
        .and_then(|rest| rest.strip_prefix('/'))
        .unwrap_or(rel)
}
