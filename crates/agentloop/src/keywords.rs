//! One way to read and print the closed sets of words that settings are made of: approval
//! policies, sandbox modes, reasoning levels, output strategies, and in the companion crates MCP
//! approval modes and log levels. Surrounding space and case do not matter, `_` reads as `-`, a
//! value may have aliases, and an unknown word is an error that lists the accepted ones.
//! [`keywords!`](crate::keywords!) writes the `as_str`, `Display`, `FromStr` and error type of
//! such an enum from its table of spellings, so every setting reads and reports the same way.
//! Not a public API: it is exported only so the companion crates can use it, and may change in
//! any release.

/// `text` as every keyword setting compares it: trimmed, lower case, `_` as `-`.
#[doc(hidden)]
pub fn normalize(text: &str) -> String {
    text.trim().to_ascii_lowercase().replace('_', "-")
}

/// The words as a sentence lists them: `a`, `a or b`, `a, b or c`.
#[doc(hidden)]
pub fn one_of(words: &[&str]) -> String {
    match words.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// Generates, for a field-less enum whose values are written as words, the methods and traits
/// every such setting has:
/// - `as_str(self) -> &'static str`: the value's canonical spelling (the first one listed);
/// - `Display`, which prints it;
/// - `FromStr`, which reads any listed spelling after [`normalize`](crate::keywords::normalize)
///   (so spellings are written in lower case with `-`);
/// - the error type, `pub struct ERROR(pub String)` holding the text given, whose message is
///   ``unknown WHAT `text`; use a, b or c`` (the canonical spellings).
///
/// ```
/// # #[derive(Clone, Copy, Debug, PartialEq, Eq)]
/// # pub enum Colour { Red, DarkBlue }
/// agentloop::keywords! {
///     Colour;
///     /// An unknown colour name.
///     error ParseColourError: "colour";
///     Red => "red",
///     DarkBlue => "dark-blue" | "navy",
/// }
/// assert_eq!(" Dark_Blue".parse::<Colour>(), Ok(Colour::DarkBlue));
/// assert_eq!(Colour::DarkBlue.to_string(), "dark-blue");
/// assert_eq!(
///     "pink".parse::<Colour>().unwrap_err().to_string(),
///     "unknown colour `pink`; use red or dark-blue"
/// );
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! keywords {
    (
        $ty:ident;
        $(#[$error_meta:meta])*
        error $error:ident: $what:literal;
        $($variant:ident => $name:literal $(| $alias:literal)*,)+
    ) => {
        impl $ty {
            /// The canonical spelling: what `Display` prints and settings show.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$variant => $name,)+
                }
            }
        }

        impl ::core::fmt::Display for $ty {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        $(#[$error_meta])*
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $error(pub String);

        impl ::core::fmt::Display for $error {
            fn fmt(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                let words = $crate::keywords::one_of(&[$($name),+]);
                write!(f, "unknown {} `{}`; use {}", $what, self.0, words)
            }
        }

        impl ::std::error::Error for $error {}

        impl ::core::str::FromStr for $ty {
            type Err = $error;

            fn from_str(text: &str) -> ::core::result::Result<Self, $error> {
                match $crate::keywords::normalize(text).as_str() {
                    $($name $(| $alias)* => Ok($ty::$variant),)+
                    _ => Err($error(text.to_owned())),
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::one_of;

    #[test]
    fn lists_read_as_a_sentence() {
        assert_eq!(one_of(&[]), "");
        assert_eq!(one_of(&["a"]), "a");
        assert_eq!(one_of(&["a", "b"]), "a or b");
        assert_eq!(one_of(&["a", "b", "c"]), "a, b or c");
    }
}
