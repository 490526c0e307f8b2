//! Choosing a store from one string (`--store`, `AGENTLOOP_STORE`): a SQLite file path or a
//! PostgreSQL URL, and showing such a string without its password.

use std::path::PathBuf;
use std::sync::Arc;

use super::{SessionError, SessionStore};

/// Where sessions are kept, as given by one string: a `postgres://` or `postgresql://` URL is
/// a PostgreSQL database, anything else a SQLite file path.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// A SQLite database file.
    Sqlite(PathBuf),
    /// A PostgreSQL connection URL (`postgres://user:password@host:port/database?…`).
    Postgres(String),
}

impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreSpec::Postgres(url) => f.debug_tuple("Postgres").field(&redact(url)).finish(),
        }
    }
}

/// The spec as it may be shown: a URL's password replaced by `***`.
impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Sqlite(path) => write!(f, "{}", path.display()),
            StoreSpec::Postgres(url) => f.write_str(&redact(url)),
        }
    }
}

impl StoreSpec {
    /// Reads a spec: `postgres://…` and `postgresql://…` (any case) are PostgreSQL URLs,
    /// anything else is a SQLite file path.
    pub fn parse(spec: &str) -> StoreSpec {
        if is_postgres_url(spec) {
            StoreSpec::Postgres(spec.to_owned())
        } else {
            StoreSpec::Sqlite(PathBuf::from(spec))
        }
    }

    /// Opens the store (creating the SQLite file, or migrating the PostgreSQL schema, as
    /// needed). Errors never contain the URL's password.
    pub fn open(&self) -> Result<Arc<dyn SessionStore>, SessionError> {
        match self {
            #[cfg(feature = "sqlite")]
            StoreSpec::Sqlite(path) => Ok(Arc::new(super::SqliteStore::open(path)?)),
            #[cfg(not(feature = "sqlite"))]
            StoreSpec::Sqlite(_) => Err(self.not_built("SQLite", "file", "sqlite")),
            #[cfg(feature = "postgres")]
            StoreSpec::Postgres(url) => Ok(Arc::new(super::PostgresStore::open(url)?)),
            #[cfg(not(feature = "postgres"))]
            StoreSpec::Postgres(_) => Err(self.not_built("PostgreSQL", "URL", "postgres")),
        }
    }

    /// The error of opening a `backend` store (a `noun`) in a build without its `feature`;
    /// the spec is shown as [`Display`](std::fmt::Display) shows it, without a password.
    #[cfg(not(all(feature = "sqlite", feature = "postgres")))]
    fn not_built(&self, backend: &str, noun: &str, feature: &str) -> SessionError {
        SessionError::Invalid {
            what: "store",
            reason: format!(
                "{self} is a {backend} {noun}, but this build of agentloop has no {backend} \
                 support (the `{feature}` feature)"
            ),
        }
    }
}

/// Whether `spec` is a PostgreSQL URL (`postgres://` or `postgresql://`, any case).
pub fn is_postgres_url(spec: &str) -> bool {
    let spec = spec.trim_start();
    let has = |prefix: &str| {
        spec.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
    };
    has("postgres://") || has("postgresql://")
}

/// Opens the store `spec` names ([`StoreSpec::parse`], then [`StoreSpec::open`]).
///
/// ```
/// # fn main() -> Result<(), agentloop::session::SessionError> {
/// let dir = tempfile::tempdir()?;
/// let path = dir.path().join("sessions.db");
/// let store = agentloop::session::open_store(&path.display().to_string())?;
/// assert!(store.list()?.is_empty());
/// # Ok(()) }
/// ```
pub fn open_store(spec: &str) -> Result<Arc<dyn SessionStore>, SessionError> {
    StoreSpec::parse(spec).open()
}

/// `text` with the password of any URL in it replaced by `***` (`scheme://user:***@host`), and
/// the value of any `password=` parameter too. Text without one is returned as is.
///
/// ```
/// use agentloop::session::redact;
/// assert_eq!(
///     redact("postgres://me:s3cret@db:5432/app?sslmode=disable"),
///     "postgres://me:***@db:5432/app?sslmode=disable"
/// );
/// assert_eq!(redact("postgres://db/app?password=s3cret&x=1"), "postgres://db/app?password=***&x=1");
/// assert_eq!(redact("/var/lib/sessions.db"), "/var/lib/sessions.db");
/// ```
pub fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // `user:password@` right after each `://`.
    while let Some(start) = rest.find("://") {
        let (head, tail) = rest.split_at(start + 3);
        out.push_str(head);
        let authority_end = tail
            .find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace())
            .unwrap_or(tail.len());
        let authority = &tail[..authority_end];
        match authority.rfind('@') {
            Some(at) => {
                let userinfo = &authority[..at];
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push_str(&authority[at..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[authority_end..];
    }
    out.push_str(rest);
    redact_password_params(&out)
}

/// Replaces the value of `password=` parameters (URL query or `key=value` connection strings).
fn redact_password_params(text: &str) -> String {
    let lower = text.to_ascii_lowercase();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut search = 0;
    while let Some(found) = lower[search..].find("password=") {
        let start = search + found;
        let boundary = start == 0
            || matches!(
                lower.as_bytes().get(start - 1),
                Some(b'?' | b'&' | b' ' | b'\t' | b'\n' | b';')
            );
        let value_start = start + "password=".len();
        search = value_start;
        if !boundary {
            continue;
        }
        let value_end = text[value_start..]
            .find(|c: char| c == '&' || c == '#' || c.is_whitespace())
            .map_or(text.len(), |i| value_start + i);
        out.push_str(&text[copied..value_start]);
        out.push_str("***");
        copied = value_end;
        search = value_end;
    }
    out.push_str(&text[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_told_apart_by_scheme() {
        assert!(matches!(
            StoreSpec::parse("postgres://h/db"),
            StoreSpec::Postgres(_)
        ));
        assert!(matches!(
            StoreSpec::parse("PostgreSQL://h/db"),
            StoreSpec::Postgres(_)
        ));
        assert!(matches!(
            StoreSpec::parse("./postgres.db"),
            StoreSpec::Sqlite(_)
        ));
        assert!(matches!(StoreSpec::parse("db"), StoreSpec::Sqlite(_)));
        assert!(matches!(
            StoreSpec::parse("postgres://h"),
            StoreSpec::Postgres(_)
        ));
        assert!(matches!(StoreSpec::parse("é"), StoreSpec::Sqlite(_)));
    }

    #[test]
    fn passwords_never_show() {
        for (text, shown) in [
            ("postgres://u:p@h/d", "postgres://u:***@h/d"),
            (
                "postgresql://u:p:q@h:1/d?x=1",
                "postgresql://u:***@h:1/d?x=1",
            ),
            ("postgres://u@h/d", "postgres://u@h/d"),
            (
                "postgres://h/d?user=u&password=p",
                "postgres://h/d?user=u&password=***",
            ),
            ("postgres://h/d?password=p", "postgres://h/d?password=***"),
            ("host=h password=p user=u", "host=h password=*** user=u"),
            (
                "error at postgres://u:p@h/d: refused",
                "error at postgres://u:***@h/d: refused",
            ),
            ("postgres://u:p%40x@h/d", "postgres://u:***@h/d"),
            ("mypassword=x", "mypassword=x"),
        ] {
            assert_eq!(redact(text), shown, "{text}");
        }
        let spec = StoreSpec::parse("postgres://u:secret@h/d");
        assert!(!format!("{spec} {spec:?}").contains("secret"));
    }
}
