//! The form an MCP server's request for input (`elicitation/create`) shows in the chat.
//!
//! A form request becomes one question per field of the requested schema — strings (with a
//! `format` of `email`, `uri`, `date` or `date-time`, and length bounds), numbers and integers
//! (with bounds), booleans, single- and multi-select enums (with titles: `oneOf`/`anyOf` of
//! `const`+`title`, or the legacy `enumNames`) — with defaults pre-filled (Enter keeps them),
//! required fields enforced, and an invalid answer asked again with the reason. The person
//! first chooses to fill the form in, decline or cancel, and at the end accepts, edits,
//! declines or cancels what they typed. A URL request shows the URL with its domain on a line
//! of its own (the host as the browser will resolve it, so `https://bank.example@evil.example`
//! reads `evil.example`) and asks consent before opening it.
//!
//! Everything is read in raw mode on the controlling terminal, so Ctrl-C or Ctrl-D cancel the
//! form rather than the run, and the chat's type-ahead reader is paused meanwhile
//! ([`ASKING`](crate::ui::prompt::ASKING)). A form and an approval question never share the
//! terminal: whichever comes second waits ([`one_question`](crate::ui::prompt::one_question)).
//! Without a terminal no elicitor is set and the servers' requests are declined at once, or
//! answered with the form's defaults under `--elicitation-defaults`: a request never waits for
//! nobody.

use agentloop_mcp::{ElicitationAnswer, ElicitationRequest, Elicitor, McpServerConfig};
use serde_json::{Map, Value};

use crate::ui::render::Style;
use crate::ui::safe_text::{visible, visible_line};

/// One question of a form.
#[derive(Clone, Debug, PartialEq)]
pub struct Field {
    /// The property's name (the key of the answer).
    pub name: String,
    /// What the person reads: the property's title, else its name.
    pub label: String,
    /// The property's description.
    pub description: Option<String>,
    /// What an answer must be.
    pub kind: Kind,
    /// The schema lists it as required.
    pub required: bool,
    /// The value Enter keeps.
    pub default: Option<Value>,
}

/// The kinds of values a form asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    /// A string, maybe of a `format`, with length bounds in characters.
    Text {
        /// `email`, `uri`, `date`, `date-time` (others are not checked).
        format: Option<String>,
        /// `minLength`.
        min_len: Option<usize>,
        /// `maxLength`.
        max_len: Option<usize>,
    },
    /// A number (an integer when `integer`), within bounds.
    Number {
        /// `type: integer`.
        integer: bool,
        /// `minimum`.
        min: Option<f64>,
        /// `maximum`.
        max: Option<f64>,
    },
    /// Yes or no.
    Boolean,
    /// One of the options.
    Choice(Vec<Choice>),
    /// Some of the options (an array of enum values), how many within bounds.
    Choices {
        /// The options.
        options: Vec<Choice>,
        /// `minItems`.
        min: Option<usize>,
        /// `maxItems`.
        max: Option<usize>,
    },
}

/// One option of an enum.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The value sent.
    pub value: String,
    /// What the person reads, when the schema titles it.
    pub title: Option<String>,
}

impl Choice {
    fn shown(&self) -> String {
        match &self.title {
            Some(title) => format!("{} ({})", visible_line(title), visible_line(&self.value)),
            None => visible_line(&self.value),
        }
    }
}

/// The options of an enum schema: `oneOf`/`anyOf` of `{const, title}`, or `enum` with
/// `enumNames` as titles.
fn choices(schema: &Value) -> Option<Vec<Choice>> {
    for key in ["oneOf", "anyOf"] {
        if let Some(options) = schema[key].as_array() {
            let choices: Option<Vec<Choice>> = options
                .iter()
                .map(|o| {
                    Some(Choice {
                        value: o["const"].as_str()?.to_owned(),
                        title: o["title"].as_str().map(str::to_owned),
                    })
                })
                .collect();
            return choices;
        }
    }
    let values = schema["enum"].as_array()?;
    let names = schema["enumNames"].as_array();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            Some(Choice {
                value: v.as_str()?.to_owned(),
                title: names
                    .and_then(|n| n.get(i))
                    .and_then(Value::as_str)
                    .map(str::to_owned),
            })
        })
        .collect()
}

fn count(v: &Value) -> Option<usize> {
    v.as_u64().and_then(|n| usize::try_from(n).ok())
}

/// The kind of one property, or why it cannot be asked.
fn kind_of(name: &str, property: &Value) -> Result<Kind, String> {
    let kind = match property["type"].as_str() {
        Some("string") => match choices(property) {
            Some(options) if !options.is_empty() => Kind::Choice(options),
            _ => Kind::Text {
                format: property["format"].as_str().map(str::to_owned),
                min_len: count(&property["minLength"]),
                max_len: count(&property["maxLength"]),
            },
        },
        Some(t @ ("number" | "integer")) => Kind::Number {
            integer: t == "integer",
            min: property["minimum"].as_f64(),
            max: property["maximum"].as_f64(),
        },
        Some("boolean") => Kind::Boolean,
        Some("array") => match choices(&property["items"]) {
            Some(options) if !options.is_empty() => Kind::Choices {
                options,
                min: count(&property["minItems"]),
                max: count(&property["maxItems"]),
            },
            _ => return Err(format!("field `{name}` is a list without options")),
        },
        None if choices(property).is_some_and(|o| !o.is_empty()) => {
            Kind::Choice(choices(property).unwrap_or_default())
        }
        other => {
            return Err(format!(
                "field `{name}` has a type a form cannot ask for ({})",
                other.unwrap_or("none")
            ));
        }
    };
    Ok(kind)
}

/// The questions of a requested schema, in `order` (the names in the server's order; the
/// others follow by name); why not, when a property is of a type a form cannot ask for.
pub fn fields(schema: &Value, order: &[String]) -> Result<Vec<Field>, String> {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let Some(properties) = schema["properties"].as_object() else {
        return Ok(Vec::new());
    };
    let mut names: Vec<&String> = order
        .iter()
        .filter(|n| properties.contains_key(*n))
        .collect();
    names.extend(properties.keys().filter(|n| !order.contains(n)));
    names
        .into_iter()
        .map(|name| {
            let property = &properties[name];
            Ok(Field {
                name: name.clone(),
                label: property["title"].as_str().unwrap_or(name).to_owned(),
                description: property["description"].as_str().map(str::to_owned),
                kind: kind_of(name, property)?,
                required: required.contains(&name.as_str()),
                default: property.get("default").cloned(),
            })
        })
        .collect()
}

/// What a field wants, in brackets after its label: `[integer 1–100]`, `[yes/no]`, …
pub fn hint(field: &Field) -> String {
    let bounds = |min: Option<String>, max: Option<String>| match (min, max) {
        (Some(a), Some(b)) => format!(" {a}–{b}"),
        (Some(a), None) => format!(" ≥ {a}"),
        (None, Some(b)) => format!(" ≤ {b}"),
        (None, None) => String::new(),
    };
    let mut hint = match &field.kind {
        Kind::Text {
            format,
            min_len,
            max_len,
        } => {
            let mut h = format.clone().unwrap_or_else(|| "text".into());
            if min_len.is_some() || max_len.is_some() {
                h.push_str(&bounds(
                    min_len.map(|n| n.to_string()),
                    max_len.map(|n| n.to_string()),
                ));
                h.push_str(" characters");
            }
            h
        }
        Kind::Number { integer, min, max } => {
            let kind = if *integer { "integer" } else { "number" };
            format!(
                "{kind}{}",
                bounds(min.map(|n| n.to_string()), max.map(|n| n.to_string()))
            )
        }
        Kind::Boolean => "yes/no".into(),
        Kind::Choice(_) => "number or value".into(),
        Kind::Choices { min, max, .. } => format!(
            "numbers or values, comma-separated{}",
            bounds(min.map(|n| n.to_string()), max.map(|n| n.to_string()))
        ),
    };
    if field.required {
        hint.push_str(", required");
    }
    hint
}

/// The default as the person types it (so Enter keeps it).
fn shown_default(field: &Field) -> Option<String> {
    let default = field.default.as_ref()?;
    Some(match (default, &field.kind) {
        (Value::Bool(b), _) => if *b { "yes" } else { "no" }.into(),
        (Value::String(s), _) => s.clone(),
        (Value::Array(items), _) => items
            .iter()
            .map(|i| {
                i.as_str()
                    .map(str::to_owned)
                    .unwrap_or_else(|| i.to_string())
            })
            .collect::<Vec<_>>()
            .join(", "),
        (other, _) => other.to_string(),
    })
}

/// One option picked by its number (1-based), its value or its title (any case).
fn pick(options: &[Choice], input: &str) -> Result<String, String> {
    let input = input.trim();
    if let Ok(n) = input.parse::<usize>()
        && (1..=options.len()).contains(&n)
    {
        return Ok(options[n - 1].value.clone());
    }
    options
        .iter()
        .find(|o| {
            o.value == input
                || o.title
                    .as_deref()
                    .is_some_and(|t| t.eq_ignore_ascii_case(input))
                || o.value.eq_ignore_ascii_case(input)
        })
        .map(|o| o.value.clone())
        .ok_or_else(|| {
            format!(
                "`{}` is not one of the options (type its number, 1 to {})",
                visible_line(input),
                options.len()
            )
        })
}

/// Checks a string's format; the reason when it does not match.
fn check_format(format: &str, text: &str) -> Result<(), String> {
    let ok = match format {
        "email" => text.split_once('@').is_some_and(|(local, domain)| {
            !local.is_empty()
                && domain.contains('.')
                && !domain.starts_with('.')
                && !domain.ends_with('.')
                && !text.chars().any(char::is_whitespace)
        }),
        "uri" => reqwest::Url::parse(text).is_ok(),
        "date" => is_date(text),
        "date-time" => is_date_time(text),
        _ => true,
    };
    if ok {
        return Ok(());
    }
    let example = match format {
        "email" => "name@example.com",
        "uri" => "https://example.com/page",
        "date" => "2026-01-31",
        _ => "2026-01-31T09:30:00Z",
    };
    Err(format!("not a valid {format} (like {example})"))
}

fn digits(text: &str, n: usize) -> Option<u32> {
    (text.len() == n && text.bytes().all(|b| b.is_ascii_digit()))
        .then(|| text.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD`, a day that exists.
fn is_date(text: &str) -> bool {
    let mut parts = text.split('-');
    let (Some(y), Some(m), Some(d), None) = (
        parts.next().and_then(|p| digits(p, 4)),
        parts.next().and_then(|p| digits(p, 2)),
        parts.next().and_then(|p| digits(p, 2)),
        parts.next(),
    ) else {
        return false;
    };
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&d)
}

/// RFC 3339: `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`.
fn is_date_time(text: &str) -> bool {
    let Some((date, time)) = text.split_once(['T', 't']) else {
        return false;
    };
    let (clock, zone_ok) = if let Some(clock) = time.strip_suffix(['Z', 'z']) {
        (clock, true)
    } else if let Some(at) = time.rfind(['+', '-']) {
        let zone = &time[at + 1..];
        let ok = zone.split_once(':').is_some_and(|(h, m)| {
            digits(h, 2).is_some_and(|h| h < 24) && digits(m, 2).is_some_and(|m| m < 60)
        });
        (&time[..at], ok)
    } else {
        return false;
    };
    let clock = clock.split_once('.').map_or(clock, |(c, frac)| {
        if frac.is_empty() || !frac.bytes().all(|b| b.is_ascii_digit()) {
            ""
        } else {
            c
        }
    });
    let mut hms = clock.split(':');
    let ok = matches!(
        (hms.next().and_then(|h| digits(h, 2)), hms.next().and_then(|m| digits(m, 2)),
         hms.next().and_then(|s| digits(s, 2)), hms.next()),
        (Some(h), Some(m), Some(s), None) if h < 24 && m < 60 && s <= 60
    );
    is_date(date) && zone_ok && ok
}

/// The value of a typed answer to `field`: `Ok(None)` leaves an optional field out; the
/// reason when it is not acceptable. Empty input means the default.
pub fn parse(field: &Field, input: &str) -> Result<Option<Value>, String> {
    let input = input.trim();
    if input.is_empty() {
        return match (&field.default, field.required) {
            (Some(default), _) => Ok(Some(default.clone())),
            (None, true) => Err("this field is required".into()),
            (None, false) => Ok(None),
        };
    }
    let value = match &field.kind {
        Kind::Text {
            format,
            min_len,
            max_len,
        } => {
            let chars = input.chars().count();
            if let Some(min) = min_len.filter(|min| chars < *min) {
                return Err(format!("too short: at least {min} characters"));
            }
            if let Some(max) = max_len.filter(|max| chars > *max) {
                return Err(format!("too long: at most {max} characters"));
            }
            if let Some(format) = format {
                check_format(format, input)?;
            }
            Value::String(input.to_owned())
        }
        Kind::Number { integer, min, max } => parse_number(input, *integer, *min, *max)?,
        Kind::Boolean => match input.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" | "1" => Value::Bool(true),
            "n" | "no" | "false" | "0" => Value::Bool(false),
            _ => return Err("answer yes or no".into()),
        },
        Kind::Choice(options) => Value::String(pick(options, input)?),
        Kind::Choices { options, min, max } => {
            let mut picked: Vec<String> = Vec::new();
            for part in input.split(',').filter(|p| !p.trim().is_empty()) {
                let value = pick(options, part)?;
                if !picked.contains(&value) {
                    picked.push(value);
                }
            }
            if let Some(min) = min.filter(|min| picked.len() < *min) {
                return Err(format!("pick at least {min}"));
            }
            if let Some(max) = max.filter(|max| picked.len() > *max) {
                return Err(format!("pick at most {max}"));
            }
            Value::Array(picked.into_iter().map(Value::String).collect())
        }
    };
    Ok(Some(value))
}

fn parse_number(
    input: &str,
    integer: bool,
    min: Option<f64>,
    max: Option<f64>,
) -> Result<Value, String> {
    let (value, n) = if integer {
        let n: i64 = input.parse().map_err(|_| "not a whole number".to_owned())?;
        (Value::from(n), n as f64)
    } else {
        let n: f64 = input
            .parse()
            .ok()
            .filter(|n: &f64| n.is_finite())
            .ok_or_else(|| "not a number".to_owned())?;
        (Value::from(n), n)
    };
    if let Some(min) = min.filter(|min| n < *min) {
        return Err(format!("too small: at least {min}"));
    }
    if let Some(max) = max.filter(|max| n > *max) {
        return Err(format!("too large: at most {max}"));
    }
    Ok(value)
}

/// The host a URL leads to, as the browser resolves it (`None` when it has none).
pub fn url_domain(url: &str) -> Option<String> {
    reqwest::Url::parse(url)
        .ok()
        .filter(|u| matches!(u.scheme(), "http" | "https"))
        .and_then(|u| u.host_str().map(str::to_owned))
}

/// `servers` with their requests for input asked in this terminal, when there is one; as
/// they were (declined, or answered from the defaults) otherwise.
pub fn in_terminal(servers: Vec<McpServerConfig>) -> Vec<McpServerConfig> {
    match terminal::elicitor() {
        Some(elicitor) => servers
            .into_iter()
            .map(|s| s.with_elicitor(elicitor.clone()))
            .collect(),
        None => servers,
    }
}

mod terminal;

#[cfg(test)]
mod tests;
