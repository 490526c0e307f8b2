//! The options of `#[tool(...)]`, parsed and checked at compile time.
//!
//! Everything that can be wrong with an option (a name providers refuse, a timeout that does not
//! parse, an unknown key) is reported here with the span of the offending token, so the generated
//! code never has to handle a failure at run time.

use proc_macro2::Span;
use syn::meta::ParseNestedMeta;
use syn::punctuated::Punctuated;
use syn::{Lit, LitBool, LitStr, Token};

/// The options given to `#[tool(...)]`.
#[derive(Default)]
pub(crate) struct ToolOptions {
    /// `name = "..."`: the model-visible name (default: the function's name).
    pub(crate) name: Option<LitStr>,
    /// `parallel_safe = false`.
    pub(crate) parallel_safe: Option<bool>,
    /// `timeout = "30s" | "500ms" | 30`, in milliseconds.
    pub(crate) timeout_ms: Option<u64>,
    /// `guidelines = ["...", ...]`.
    pub(crate) guidelines: Vec<LitStr>,
    /// `snippet = "..."`.
    pub(crate) snippet: Option<LitStr>,
    /// `deferred`.
    pub(crate) deferred: bool,
    /// `local_tool_search`.
    pub(crate) local_tool_search: bool,
    /// `requires_approval`.
    pub(crate) requires_approval: bool,
    seen: Vec<String>,
}

const KNOWN: &str = "name, parallel_safe, timeout, guidelines, snippet, deferred, local_tool_search, requires_approval";

impl ToolOptions {
    /// Parses one `key`, `key = value` or `key = [..]` entry (used with `syn::meta::parser`).
    pub(crate) fn parse_one(&mut self, meta: ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        if self.seen.contains(&key) {
            return Err(meta.error(format!("`{key}` is given twice")));
        }
        match key.as_str() {
            "name" => {
                let lit: LitStr = meta.value()?.parse()?;
                check_name(&lit.value(), lit.span())?;
                self.name = Some(lit);
            }
            "parallel_safe" => self.parallel_safe = Some(flag(&meta)?),
            "deferred" => self.deferred = flag(&meta)?,
            "local_tool_search" => self.local_tool_search = flag(&meta)?,
            "requires_approval" => self.requires_approval = flag(&meta)?,
            "timeout" => {
                let lit: Lit = meta.value()?.parse()?;
                self.timeout_ms = Some(parse_timeout(&lit)?);
            }
            "guidelines" => {
                let value = meta.value()?;
                let content;
                syn::bracketed!(content in value);
                let list = Punctuated::<LitStr, Token![,]>::parse_terminated(&content)?;
                for rule in &list {
                    if rule.value().trim().is_empty() {
                        return Err(syn::Error::new(
                            rule.span(),
                            "a guideline must not be empty",
                        ));
                    }
                }
                self.guidelines = list.into_iter().collect();
            }
            "snippet" => {
                let lit: LitStr = meta.value()?.parse()?;
                if lit.value().trim().is_empty() {
                    return Err(syn::Error::new(lit.span(), "the snippet must not be empty"));
                }
                self.snippet = Some(lit);
            }
            _ => {
                return Err(meta.error(format!("unknown #[tool] option; expected one of: {KNOWN}")));
            }
        }
        self.seen.push(key);
        Ok(())
    }
}

/// A boolean option: bare `key` means true, `key = true|false` is explicit.
fn flag(meta: &ParseNestedMeta<'_>) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) {
        let lit: LitBool = meta.value()?.parse()?;
        Ok(lit.value)
    } else {
        Ok(true)
    }
}

/// Checks a tool name against what every provider accepts: `[A-Za-z0-9_-]{1,64}`.
pub(crate) fn check_name(name: &str, span: Span) -> syn::Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(syn::Error::new(
            span,
            format!(
                "tool name {name:?} is not accepted by providers: use 1 to 64 characters from \
                 A-Z, a-z, 0-9, '_' and '-' (set one with #[tool(name = \"...\")])"
            ),
        ))
    }
}

/// `30` (seconds), `1.5` (seconds), `"30s"`, `"500ms"`, `"2m"`, `"1h"` → milliseconds.
pub(crate) fn parse_timeout(lit: &Lit) -> syn::Result<u64> {
    let bad = |detail: &str| {
        syn::Error::new(
            lit.span(),
            format!(
                "{detail}; write the timeout as seconds (`timeout = 30`) or a string with a unit \
                 (`timeout = \"500ms\"`, `\"30s\"`, `\"2m\"`, `\"1h\"`)"
            ),
        )
    };
    let ms = match lit {
        Lit::Int(i) => i
            .base10_parse::<u64>()
            .ok()
            .and_then(|s| s.checked_mul(1000))
            .ok_or_else(|| bad("the timeout is out of range"))?,
        Lit::Float(f) => {
            let secs: f64 = f
                .base10_parse()
                .map_err(|_| bad("the timeout is not a number"))?;
            seconds_to_ms(secs).ok_or_else(|| bad("the timeout is out of range"))?
        }
        Lit::Str(s) => parse_duration_text(&s.value()).map_err(|e| bad(&e))?,
        _ => return Err(bad("unsupported timeout")),
    };
    if ms == 0 {
        return Err(bad("the timeout must be greater than zero"));
    }
    Ok(ms)
}

fn seconds_to_ms(secs: f64) -> Option<u64> {
    let ms = (secs * 1000.0).round();
    (ms.is_finite() && ms >= 0.0 && ms <= u64::MAX as f64).then_some(ms as u64)
}

/// `"500ms"`, `"30s"`, `"1.5s"`, `"2m"`, `"1h"` → milliseconds.
pub(crate) fn parse_duration_text(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("{text:?} has no unit"))?;
    let (number, unit) = text.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} does not start with a number"))?;
    let factor = match unit.trim() {
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        other => return Err(format!("unknown unit {other:?} in {text:?}")),
    };
    seconds_to_ms(number * factor / 1000.0).ok_or_else(|| format!("{text:?} is out of range"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duration_strings_parse() {
        assert_eq!(parse_duration_text("500ms"), Ok(500));
        assert_eq!(parse_duration_text("30s"), Ok(30_000));
        assert_eq!(parse_duration_text("1.5s"), Ok(1_500));
        assert_eq!(parse_duration_text("2m"), Ok(120_000));
        assert_eq!(parse_duration_text(" 1h "), Ok(3_600_000));
        assert!(parse_duration_text("30").is_err());
        assert!(parse_duration_text("30 days").is_err());
        assert!(parse_duration_text("s").is_err());
    }

    #[test]
    fn literal_timeouts_parse() {
        let int: Lit = syn::parse_quote!(30);
        assert_eq!(parse_timeout(&int).ok(), Some(30_000));
        let float: Lit = syn::parse_quote!(0.25);
        assert_eq!(parse_timeout(&float).ok(), Some(250));
        let zero: Lit = syn::parse_quote!("0s");
        assert!(parse_timeout(&zero).is_err());
        let boolean: Lit = syn::parse_quote!(true);
        assert!(parse_timeout(&boolean).is_err());
    }

    #[test]
    fn names_follow_provider_rules() {
        assert!(check_name("read_file", Span::call_site()).is_ok());
        assert!(check_name("a-b", Span::call_site()).is_ok());
        assert!(check_name("", Span::call_site()).is_err());
        assert!(check_name("größe", Span::call_site()).is_err());
        assert!(check_name(&"x".repeat(65), Span::call_site()).is_err());
    }
}
