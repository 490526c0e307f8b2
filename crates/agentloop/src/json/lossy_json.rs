//! JSON with lone UTF-16 surrogate escapes made readable.
//!
//! Models sometimes emit a `\ud800` escape without its partner (a character cut in half by the
//! tokenizer). `serde_json` rightly refuses such a string, which used to fail the whole reply
//! after every retry. Here an unpaired surrogate escape becomes `\ufffd` (U+FFFD, the
//! replacement character) and the rest of the text is kept. The repair runs only after a strict
//! parse failed, so valid input pays nothing.

/// `json` with every `\uXXXX` escape that encodes an unpaired surrogate (inside a string)
/// replaced by `\ufffd`; `None` when there is none, so the caller's original error stands.
pub(crate) fn replace_lone_surrogates(json: &str) -> Option<String> {
    let bytes = json.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut in_string = false;
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if !in_string {
            in_string = byte == b'"';
            i += 1;
            continue;
        }
        match byte {
            b'"' => {
                in_string = false;
                i += 1;
            }
            b'\\' if bytes.get(i + 1) == Some(&b'u') => match hex4(bytes, i + 2) {
                Some(unit) if (0xD800..0xDC00).contains(&unit) => {
                    let paired = bytes.get(i + 6) == Some(&b'\\')
                        && bytes.get(i + 7) == Some(&b'u')
                        && hex4(bytes, i + 8).is_some_and(|low| (0xDC00..0xE000).contains(&low));
                    if paired {
                        i += 12;
                    } else {
                        replace(json, &mut out, &mut copied, i);
                        i += 6;
                    }
                }
                Some(unit) if (0xDC00..0xE000).contains(&unit) => {
                    replace(json, &mut out, &mut copied, i);
                    i += 6;
                }
                Some(_) => i += 6,
                None => i += 2,
            },
            // Any other escape: skip the escaped byte (it may be a quote).
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    let mut fixed = out?;
    fixed.push_str(&json[copied..]);
    Some(fixed)
}

/// Copies `json[copied..at]` and a replacement escape into `out`; the six bytes of the escape
/// at `at` are skipped.
fn replace(json: &str, out: &mut Option<String>, copied: &mut usize, at: usize) {
    let out = out.get_or_insert_with(|| String::with_capacity(json.len()));
    out.push_str(&json[*copied..at]);
    out.push_str("\\ufffd");
    *copied = at + 6;
}

/// The value of four hex digits at `at`, if they are there.
fn hex4(bytes: &[u8], at: usize) -> Option<u32> {
    let digits = bytes.get(at..at + 4)?;
    digits
        .iter()
        .try_fold(0u32, |acc, &b| Some(acc * 16 + (b as char).to_digit(16)?))
}

/// Parses `json`, falling back to the surrogate repair when the strict parse fails.
pub(crate) fn parse_value(json: &str) -> Result<serde_json::Value, serde_json::Error> {
    serde_json::from_str(json).or_else(|strict| match replace_lone_surrogates(json) {
        Some(fixed) => serde_json::from_str(&fixed).map_err(|_| strict),
        None => Err(strict),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        let cases = [
            (r#"{"t":"a\ud800b"}"#, "a\u{fffd}b"),
            (r#"{"t":"\udc00"}"#, "\u{fffd}"),
            (r#"{"t":"\uD83D"}"#, "\u{fffd}"),
            (r#"{"t":"x\ud83d\ude00y\ud800"}"#, "x😀y\u{fffd}"),
            (r#"{"t":"\ud800\ud800\udc00"}"#, "\u{fffd}𐀀"),
        ];
        for (input, text) in cases {
            assert!(serde_json::from_str::<serde_json::Value>(input).is_err());
            assert_eq!(parse_value(input).unwrap(), json!({ "t": text }), "{input}");
        }
    }

    #[test]
    fn escaped_backslashes_and_keys_are_not_touched() {
        // `\\ud800` is a backslash followed by text, not an escape.
        assert_eq!(replace_lone_surrogates(r#"{"t":"\\ud800"}"#), None);
        assert_eq!(
            replace_lone_surrogates(r#"{"t":"\"\ud800"}"#).unwrap(),
            r#"{"t":"\"\ufffd"}"#
        );
        assert_eq!(replace_lone_surrogates(r#"{"t":"ok"}"#), None);
        assert_eq!(replace_lone_surrogates(r#"{"t":"\u00e9"}"#), None);
        // Not a JSON problem the repair can fix: the strict error is returned.
        assert!(parse_value(r#"{"t":"#).is_err());
    }
}
