//! Profile rules over the `fields` object: exactly the declared set, declared types, `exact`.

use super::{payment, tool_call};
use countersign::{CanonError, FieldKind, Profile, ReasonCode, admit_fields};
use serde_json::json;

const PAYMENT: &str = r#"{"amount":"40000.00","currency":"EUR","source_account":"DE89370400440532013000","destination_account":"A","reference":"Invoice 7"}"#;

fn payment_with(field: &str, value: serde_json::Value) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_str(PAYMENT).unwrap_or_default();
    v[field] = value;
    serde_json::to_vec(&v).unwrap_or_default()
}

#[test]
fn tool_call_admits_its_three_fields() {
    let raw = r#"{"agent_id":"agent-7","tool_name":"transfer","params":{"to":"A","amount":"40000.00","n":[1,true,null]}}"#;
    let f = admit_fields(&tool_call(), raw.as_bytes());
    assert_eq!(
        f.as_ref().map(|f| f.as_value().clone()).ok(),
        Some(
            json!({"agent_id":"agent-7","tool_name":"transfer","params":{"to":"A","amount":"40000.00","n":[1,true,null]}})
        )
    );
    assert_eq!(
        f.map(|f| f.jcs().to_vec()).ok(),
        Some(br#"{"agent_id":"agent-7","params":{"amount":"40000.00","n":[1,true,null],"to":"A"},"tool_name":"transfer"}"#.to_vec())
    );
}

#[test]
fn fields_are_exactly_the_declared_set() {
    let p = tool_call();
    refused!(admit_fields(&p, br#"{"agent_id":"a","tool_name":"t"}"#), CanonError::MissingField { ref field } if field == "params");
    refused!(
        admit_fields(&p, br#"{"agent_id":"a","tool_name":"t","params":{},"note":"x"}"#),
        CanonError::UnexpectedField { ref field } if field == "note"
    );
    // Case and normalization are not forgiven in field names.
    refused!(
        admit_fields(&p, br#"{"Agent_id":"a","tool_name":"t","params":{}}"#),
        CanonError::UnexpectedField { .. }
    );
    refused!(admit_fields(&p, br#"{}"#), CanonError::MissingField { .. });
}

#[test]
fn fields_must_be_an_object() {
    for raw in ["[]", "\"x\"", "1", "null", "true"] {
        refused!(
            admit_fields(&tool_call(), raw.as_bytes()),
            CanonError::NotAnObject { .. }
        );
    }
}

#[test]
fn field_types_are_enforced() {
    let p = tool_call();
    refused!(
        admit_fields(&p, br#"{"agent_id":7,"tool_name":"t","params":{}}"#),
        CanonError::FieldType { ref field, expected: FieldKind::String, found: "an integer" } if field == "agent_id"
    );
    refused!(
        admit_fields(&p, br#"{"agent_id":"a","tool_name":"t","params":[]}"#),
        CanonError::FieldType {
            expected: FieldKind::Object,
            found: "an array",
            ..
        }
    );
    refused!(
        admit_fields(&p, br#"{"agent_id":"a","tool_name":"t","params":{"x":1.5}}"#),
        CanonError::FloatNotAllowed { ref path, .. } if path == "/params/x"
    );
}

#[test]
fn exact_fields_must_already_be_nfc() {
    let p = tool_call();
    refused!(
        admit_fields(&p, "{\"agent_id\":\"jose\u{301}\",\"tool_name\":\"t\",\"params\":{}}".as_bytes()),
        CanonError::FieldNotNfc { ref field } if field == "agent_id"
    );
    refused!(
        admit_fields(&p, br#"{"agent_id":"a","tool_name":"e\u0301","params":{}}"#),
        CanonError::FieldNotNfc { .. }
    );
    // Already-NFC non-ASCII is fine.
    assert!(
        admit_fields(
            &p,
            "{\"agent_id\":\"jos\u{e9}\",\"tool_name\":\"t\",\"params\":{}}".as_bytes()
        )
        .is_ok()
    );
    // Non-exact content (params) is normalized instead.
    let f = admit_fields(
        &p,
        br#"{"agent_id":"a","tool_name":"t","params":{"e\u0301":"A\u030a"}}"#,
    );
    assert_eq!(
        f.map(|f| f.as_value()["params"].clone()).ok(),
        Some(json!({"\u{e9}": "\u{c5}"}))
    );
}

#[test]
fn payment_admits_the_worked_example() {
    let f = admit_fields(&payment(), PAYMENT.as_bytes());
    assert!(f.is_ok(), "{f:?}");
}

#[test]
fn payment_field_formats() {
    let p = payment();
    for (field, value, kind) in [
        ("amount", json!("40,000.00"), FieldKind::Decimal),
        ("amount", json!("4e4"), FieldKind::Decimal),
        ("amount", json!("-0.00"), FieldKind::Decimal),
        ("amount", json!(""), FieldKind::Decimal),
        ("currency", json!("eur"), FieldKind::Currency),
        ("currency", json!("EURO"), FieldKind::Currency),
        ("source_account", json!("DE89 3704"), FieldKind::Identifier),
        (
            "destination_account",
            json!("caf\u{e9}"),
            FieldKind::Identifier,
        ),
        ("destination_account", json!(""), FieldKind::Identifier),
    ] {
        let r = admit_fields(&p, &payment_with(field, value.clone()));
        assert!(
            matches!(&r, Err(CanonError::FieldFormat { field: f, kind: k, .. }) if f == field && *k == kind),
            "{field}={value}: {r:?}"
        );
    }
    // An amount must travel as a string.
    refused!(
        admit_fields(&p, &payment_with("amount", json!(40000))),
        CanonError::FieldType {
            expected: FieldKind::Decimal,
            ..
        }
    );
    refused!(
        admit_fields(&p, &payment_with("reference", json!("Cafe\u{301}"))),
        CanonError::FieldNotNfc { .. }
    );
    assert!(admit_fields(&p, &payment_with("reference", json!(""))).is_ok());
    assert!(admit_fields(&p, &payment_with("amount", json!("-12.5"))).is_ok());
}

/// A profile using the remaining kinds, and floats.
fn custom(allow_floats: bool) -> Profile {
    let def = format!(
        r#"{{"id":"test.kinds/1","title":"Kinds","allow_floats":{allow_floats},"fields":[
            {{"name":"n","type":"integer","label":"N"}},
            {{"name":"b","type":"boolean","label":"B"}},
            {{"name":"v","type":"any","label":"V"}},
            {{"name":"s","type":"string","label":"S"}}]}}"#
    );
    match Profile::from_definition(def.as_bytes()) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn integer_boolean_any_and_plain_string() {
    let p = custom(false);
    let f = admit_fields(
        &p,
        br#"{"n":-5,"b":false,"v":["e\u0301",{"x":null}],"s":"A\u030a"}"#,
    );
    assert_eq!(
        f.map(|f| f.as_value().clone()).ok(),
        Some(json!({"n":-5,"b":false,"v":["\u{e9}",{"x":null}],"s":"\u{c5}"}))
    );
    refused!(
        admit_fields(&p, br#"{"n":"5","b":false,"v":1,"s":""}"#),
        CanonError::FieldType {
            expected: FieldKind::Integer,
            ..
        }
    );
    refused!(
        admit_fields(&p, br#"{"n":5,"b":0,"v":1,"s":""}"#),
        CanonError::FieldType {
            expected: FieldKind::Boolean,
            ..
        }
    );
    refused!(
        admit_fields(&p, br#"{"n":5,"b":true,"v":1.25,"s":""}"#),
        CanonError::FloatNotAllowed { .. }
    );
}

#[test]
fn allow_floats_admits_floats_but_not_as_integers() {
    let p = custom(true);
    assert!(admit_fields(&p, br#"{"n":5,"b":true,"v":[1.25,2e-3],"s":""}"#).is_ok());
    refused!(
        admit_fields(&p, br#"{"n":5.0,"b":true,"v":1,"s":""}"#),
        CanonError::FieldType {
            expected: FieldKind::Integer,
            found: "a non-integer number",
            ..
        }
    );
    refused!(
        admit_fields(&p, br#"{"n":5,"b":true,"v":1e300,"s":""}"#),
        CanonError::IntegerOutOfRange { .. }
    );
}

#[test]
fn field_errors_map_to_action_inadmissible() {
    let e = admit_fields(&tool_call(), br#"{"agent_id":"a"}"#).err();
    assert_eq!(
        e.map(|e| e.reason_code()),
        Some(ReasonCode::ActionInadmissible)
    );
}
