//! Properties: admission never panics, admitted values round-trip, NFC is idempotent, key order
//! does not matter, and the two JCS implementations agree.

use super::{floats, strict, tool_call};
use countersign::{
    CanonError, CanonLimits, Decision, admit_fields, admit_json, canonical_bytes, op_hash,
};
use proptest::prelude::*;
use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;

const MAX_SAFE: i64 = (1 << 53) - 1;

/// Characters chosen to exercise NFC (combining marks, precomposed forms, singletons, Hangul,
/// a composition exclusion), UTF-16 ordering (astral, private use) and escaping.
fn arb_char() -> impl Strategy<Value = char> {
    prop_oneof![
        4 => prop::char::range('a', 'e'),
        1 => prop::sample::select(vec![
            '\u{301}', '\u{308}', '\u{30a}', '\u{323}', '\u{e9}', '\u{c5}', '\u{212b}', '\u{2126}',
            '\u{1100}', '\u{1161}', '\u{11a8}', '\u{ac00}', '\u{fb33}', '\u{1F600}', '\u{E000}',
            '\u{10000}', '"', '\\', '/', '\n', '\u{0}', '\u{1f}', '\u{7f}', '\u{2028}', ' ',
        ]),
    ]
}

fn arb_string() -> impl Strategy<Value = String> {
    prop::collection::vec(arb_char(), 0..6).prop_map(|v| v.into_iter().collect())
}

fn arb_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-MAX_SAFE..=MAX_SAFE).prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        arb_string().prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 48, 5, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
            prop::collection::vec((arb_string(), inner), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

/// JSON text for `v` with object members in map order, or reversed.
fn render(v: &Value, reverse: bool, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(item, reverse, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            let mut members: Vec<_> = map.iter().collect();
            if reverse {
                members.reverse();
            }
            for (i, (k, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(" , ");
                }
                out.push_str(&serde_json::to_string(k).unwrap_or_default());
                out.push(':');
                render(item, reverse, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).unwrap_or_default()),
    }
}

fn text(v: &Value, reverse: bool) -> String {
    let mut s = String::new();
    render(v, reverse, &mut s);
    s
}

/// Whether some object in `v` has two keys with the same NFC.
fn has_nfc_key_collision(v: &Value) -> bool {
    match v {
        Value::Array(items) => items.iter().any(has_nfc_key_collision),
        Value::Object(map) => {
            let mut seen = std::collections::BTreeSet::new();
            map.keys()
                .any(|k| !seen.insert(k.nfc().collect::<String>()))
                || map.values().any(has_nfc_key_collision)
        }
        _ => false,
    }
}

fn all_nfc(v: &Value) -> bool {
    let nfc = |s: &str| unicode_normalization::is_nfc(s);
    match v {
        Value::String(s) => nfc(s),
        Value::Array(items) => items.iter().all(all_nfc),
        Value::Object(map) => map.iter().all(|(k, v)| nfc(k) && all_nfc(v)),
        _ => true,
    }
}

proptest! {
    #[test]
    fn admission_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = admit_json(&bytes, CanonLimits::STRICT);
        let _ = admit_json(&bytes, CanonLimits::STRICT.with_floats(true));
        let _ = admit_fields(&tool_call(), &bytes);
    }

    #[test]
    fn admission_never_panics_on_json_like_text(s in r#"[\[\]{}",:0-9eE.+\-\\u dDfFtrnlasN\x00\n é́😀]{0,64}"#) {
        let _ = strict(&s);
        let _ = floats(&s);
    }

    #[test]
    fn admission_never_panics_on_mutated_json(v in arb_value(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = text(&v, false).into_bytes();
        if !bytes.is_empty() {
            let i = at.index(bytes.len());
            bytes[i] = byte;
        }
        let _ = admit_json(&bytes, CanonLimits::STRICT);
    }

    #[test]
    fn admitted_values_round_trip_through_jcs(v in arb_value()) {
        let admitted = strict(&text(&v, false));
        if has_nfc_key_collision(&v) {
            prop_assert!(matches!(admitted, Err(CanonError::NfcKeyCollision { .. })), "{admitted:?}");
            return Ok(());
        }
        let Ok(admitted) = admitted else { return Err(TestCaseError::fail(format!("{admitted:?}"))) };
        // Every key and string is NFC, and re-admitting changes nothing (NFC is idempotent).
        prop_assert!(all_nfc(&admitted));
        let jcs = serde_jcs::to_vec(&admitted).unwrap_or_default();
        let again = admit_json(&jcs, CanonLimits::STRICT);
        prop_assert_eq!(again.as_ref(), Ok(&admitted));
        prop_assert_eq!(serde_jcs::to_vec(&again.unwrap_or_default()).unwrap_or_default(), jcs.clone());
        // Differential: the design card's serializer and the alternative agree.
        prop_assert_eq!(serde_json_canonicalizer::to_vec(&admitted).unwrap_or_default(), jcs);
    }

    #[test]
    fn key_order_does_not_change_op_hash(v in arb_value()) {
        prop_assume!(!has_nfc_key_collision(&v));
        let params = match v {
            Value::Object(_) => v,
            other => Value::Object(Map::from_iter([("v".to_owned(), other)])),
        };
        let fields = |reverse: bool| {
            format!(r#"{{"params":{},"tool_name":"t","agent_id":"a"}}"#, text(&params, reverse))
        };
        let p = tool_call();
        let h = |raw: String| admit_fields(&p, raw.as_bytes()).map(|f| op_hash(&p, Decision::Approved, &f));
        let forward = h(fields(false));
        prop_assert!(forward.is_ok(), "{forward:?}");
        prop_assert_eq!(forward, h(fields(true)));
    }

    #[test]
    fn the_jcs_writer_matches_both_reference_implementations(v in arb_value()) {
        prop_assume!(!has_nfc_key_collision(&v));
        let params = match v {
            Value::Object(_) => v,
            other => Value::Object(Map::from_iter([("v".to_owned(), other)])),
        };
        let raw = format!(r#"{{"agent_id":"a","tool_name":"t","params":{}}}"#, text(&params, false));
        let p = tool_call();
        let fields = admit_fields(&p, raw.as_bytes());
        prop_assert!(fields.is_ok(), "{fields:?}");
        let Ok(fields) = fields else { return Ok(()) };
        let ours = canonical_bytes(&p, Decision::Denied, &fields);
        let whole = serde_json::json!({"profile": p.id, "decision": "DENIED", "fields": fields.as_value()});
        prop_assert_eq!(&ours, &serde_jcs::to_vec(&whole).unwrap_or_default());
        prop_assert_eq!(&ours, &serde_json_canonicalizer::to_vec(&whole).unwrap_or_default());
    }

    #[test]
    fn floats_agree_and_round_trip(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assume!(f.is_finite());
        let jcs = serde_jcs::to_string(&f).unwrap_or_default();
        prop_assert_eq!(serde_json_canonicalizer::to_string(&f).unwrap_or_default(), jcs.clone());
        match floats(&jcs) {
            Ok(v) => prop_assert_eq!(v.as_f64().map(f64::to_bits), Some((f + 0.0).to_bits())),
            Err(CanonError::IntegerOutOfRange { .. }) => prop_assert!(f.fract() == 0.0 && f.abs() > MAX_SAFE as f64),
            Err(e) => return Err(TestCaseError::fail(format!("{jcs}: {e}"))),
        }
    }
}
