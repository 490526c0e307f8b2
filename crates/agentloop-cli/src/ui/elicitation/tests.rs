//! The form's pure parts: a schema's questions, and typed answers checked against them.
#![allow(clippy::unwrap_used, clippy::panic)]

use serde_json::json;

use super::*;

/// The server's order of the form's properties (the schema map's own order is by name).
const ORDER: [&str; 12] = [
    "name", "email", "site", "born", "at", "age", "ratio", "ok", "friend", "hero", "pet", "fish",
];

fn form() -> Vec<Field> {
    let order: Vec<String> = ORDER.iter().map(|s| (*s).to_owned()).collect();
    fields(
        &json!({"type": "object", "properties": {
        "name": {"type": "string", "title": "Name", "minLength": 2, "maxLength": 5},
        "email": {"type": "string", "format": "email"},
        "site": {"type": "string", "format": "uri"},
        "born": {"type": "string", "format": "date"},
        "at": {"type": "string", "format": "date-time"},
        "age": {"type": "integer", "minimum": 1, "maximum": 100, "default": 42},
        "ratio": {"type": "number", "minimum": 0, "maximum": 1},
        "ok": {"type": "boolean", "default": false},
        "friend": {"type": "string", "enum": ["monica", "ross"]},
        "hero": {"type": "string", "oneOf": [
            {"const": "h1", "title": "Superman"}, {"const": "h2", "title": "Wonder Woman"}]},
        "pet": {"type": "string", "enum": ["p1", "p2"], "enumNames": ["Cats", "Dogs"]},
        "fish": {"type": "array", "minItems": 1, "maxItems": 2,
                 "items": {"anyOf": [{"const": "f1", "title": "Tuna"},
                                      {"const": "f2", "title": "Salmon"},
                                      {"const": "f3", "title": "Trout"}]},
                 "default": ["f1"]}
    }, "required": ["name", "friend"]}),
        &order,
    )
    .unwrap()
}

fn field(name: &str) -> Field {
    form().into_iter().find(|f| f.name == name).unwrap()
}

#[test]
fn a_schema_becomes_one_question_per_property_in_the_servers_order() {
    let all = form();
    let names: Vec<&str> = all.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ORDER);
    // Properties the order does not name follow by name.
    let schema = json!({"properties": {"b": {"type": "boolean"}, "a": {"type": "boolean"},
                                       "c": {"type": "boolean"}}});
    let some: Vec<String> = fields(&schema, &["c".to_owned()])
        .unwrap()
        .into_iter()
        .map(|f| f.name)
        .collect();
    assert_eq!(some, ["c", "a", "b"]);
    let name = field("name");
    let name = &name;
    assert_eq!((name.label.as_str(), name.required), ("Name", true));
    assert_eq!(hint(name), "text 2–5 characters, required");
    assert_eq!(hint(&field("age")), "integer 1–100");
    assert_eq!(hint(&field("ok")), "yes/no");
    assert_eq!(
        field("hero").kind,
        Kind::Choice(vec![
            Choice {
                value: "h1".into(),
                title: Some("Superman".into())
            },
            Choice {
                value: "h2".into(),
                title: Some("Wonder Woman".into())
            },
        ])
    );
    let Kind::Choice(pets) = field("pet").kind else {
        panic!()
    };
    assert_eq!(pets[1].title.as_deref(), Some("Dogs"));
    assert!(matches!(
        field("fish").kind,
        Kind::Choices {
            min: Some(1),
            max: Some(2),
            ..
        }
    ));
    // A property a form cannot ask for makes the whole form unshowable, with the reason.
    let nested = json!({"properties": {"address": {"type": "object"}}});
    assert!(fields(&nested, &[]).unwrap_err().contains("address"));
}

#[test]
fn defaults_fill_empty_answers_and_required_fields_must_be_answered() {
    assert_eq!(parse(&field("age"), "").unwrap(), Some(json!(42)));
    assert_eq!(parse(&field("ok"), "  ").unwrap(), Some(json!(false)));
    assert_eq!(parse(&field("fish"), "").unwrap(), Some(json!(["f1"])));
    assert_eq!(shown_default(&field("fish")).as_deref(), Some("f1"));
    assert_eq!(shown_default(&field("ok")).as_deref(), Some("no"));
    assert_eq!(
        parse(&field("email"), "").unwrap(),
        None,
        "optional: left out"
    );
    assert_eq!(
        parse(&field("name"), "").unwrap_err(),
        "this field is required"
    );
    assert!(parse(&field("friend"), "").is_err());
}

#[test]
fn strings_are_checked_for_length_and_format() {
    let name = field("name");
    assert_eq!(parse(&name, " Ada ").unwrap(), Some(json!("Ada")));
    assert!(parse(&name, "A").unwrap_err().contains("at least 2"));
    assert!(parse(&name, "Adalbert").unwrap_err().contains("at most 5"));
    assert_eq!(
        parse(&name, "Zoë").unwrap(),
        Some(json!("Zoë")),
        "characters, not bytes"
    );
    let email = field("email");
    assert!(parse(&email, "ada@example.com").is_ok());
    for bad in ["ada", "ada@example", "@example.com", "a da@example.com"] {
        assert!(parse(&email, bad).unwrap_err().contains("email"), "{bad}");
    }
    assert!(parse(&field("site"), "https://example.com/x").is_ok());
    assert!(parse(&field("site"), "example dot com").is_err());
    let born = field("born");
    assert!(parse(&born, "2024-02-29").is_ok());
    for bad in ["2023-02-29", "2024-13-01", "24-01-01", "2024-1-1"] {
        assert!(parse(&born, bad).is_err(), "{bad}");
    }
    let at = field("at");
    for good in ["2026-01-31T09:30:00Z", "2026-01-31T09:30:00.5+02:00"] {
        assert!(parse(&at, good).is_ok(), "{good}");
    }
    for bad in ["2026-01-31", "2026-01-31T25:00:00Z", "2026-01-31T09:30:00"] {
        assert!(parse(&at, bad).is_err(), "{bad}");
    }
}

#[test]
fn numbers_booleans_and_choices_are_parsed_with_their_bounds() {
    let age = field("age");
    assert_eq!(parse(&age, "7").unwrap(), Some(json!(7)));
    assert!(parse(&age, "7.5").unwrap_err().contains("whole number"));
    assert!(parse(&age, "0").unwrap_err().contains("at least 1"));
    assert!(parse(&age, "101").unwrap_err().contains("at most 100"));
    let ratio = field("ratio");
    assert_eq!(parse(&ratio, "0.25").unwrap(), Some(json!(0.25)));
    assert!(parse(&ratio, "NaN").is_err());
    assert!(parse(&ratio, "1.5").is_err());
    let ok = field("ok");
    assert_eq!(parse(&ok, "Yes").unwrap(), Some(json!(true)));
    assert_eq!(parse(&ok, "n").unwrap(), Some(json!(false)));
    assert!(parse(&ok, "maybe").is_err());
    let hero = field("hero");
    assert_eq!(parse(&hero, "2").unwrap(), Some(json!("h2")));
    assert_eq!(parse(&hero, "superman").unwrap(), Some(json!("h1")));
    assert_eq!(parse(&hero, "h2").unwrap(), Some(json!("h2")));
    assert!(parse(&hero, "3").unwrap_err().contains("1 to 2"));
    let fish = field("fish");
    assert_eq!(
        parse(&fish, "2, tuna, 2").unwrap(),
        Some(json!(["f2", "f1"]))
    );
    assert!(parse(&fish, "1,2,3").unwrap_err().contains("at most 2"));
    assert!(parse(&fish, "cod").is_err());
}

#[test]
fn a_url_shows_the_host_the_browser_goes_to() {
    assert_eq!(
        url_domain("https://bank.example@evil.example/login").as_deref(),
        Some("evil.example")
    );
    assert_eq!(
        url_domain("https://xn--80ak6aa92e.com/").as_deref(),
        Some("xn--80ak6aa92e.com")
    );
    assert_eq!(
        url_domain("https://аррӏе.com/").as_deref(),
        Some("xn--80ak6aa92e.com")
    );
    assert_eq!(url_domain("javascript:alert(1)"), None);
    assert_eq!(url_domain("file:///etc/passwd"), None);
}
