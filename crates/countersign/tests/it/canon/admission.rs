//! Strict admission: one positive and one or more negative cases per rule.

use super::{floats, strict};
use countersign::{CanonError, CanonLimits, MAX_DEPTH, MAX_FIELDS_BYTES, ReasonCode, admit_json};
use serde_json::json;

#[test]
fn well_formed_json_is_admitted() {
    let v = strict(r#" { "a" : [1, -2, true, false, null, "x", {}, []] } "#);
    assert_eq!(v, Ok(json!({"a": [1, -2, true, false, null, "x", {}, []]})));
    assert_eq!(strict("0"), Ok(json!(0)));
    assert_eq!(strict("-0"), Ok(json!(0)));
    assert_eq!(
        strict(r#""\"\\\/\b\f\n\r\t""#),
        Ok(json!("\"\\/\u{8}\u{c}\n\r\t"))
    );
}

#[test]
fn duplicate_keys_are_refused() {
    refused!(strict(r#"{"a":1,"a":2}"#), CanonError::DuplicateKey { ref path, ref key } if path.is_empty() && key == "a");
    // Equal only after unescaping.
    refused!(strict(r#"{"a":1,"\u0061":2}"#), CanonError::DuplicateKey { ref key, .. } if key == "a");
    // The same non-NFC spelling twice is a duplicate, not an NFC collision.
    refused!(
        strict(r#"{"e\u0301":1,"e\u0301":2}"#),
        CanonError::DuplicateKey { .. }
    );
    refused!(strict(r#"{"x":[0,{"k":1,"k":1}]}"#), CanonError::DuplicateKey { ref path, .. } if path == "/x/1");
    // The same key in different objects is fine.
    assert!(strict(r#"{"a":{"a":1},"b":{"a":2}}"#).is_ok());
}

#[test]
fn keys_equal_after_nfc_are_refused() {
    refused!(
        strict(r#"{"\u00e9":1,"e\u0301":2}"#),
        CanonError::NfcKeyCollision { ref first, ref second, .. } if first == "\u{e9}" && second == "e\u{301}"
    );
    refused!(
        strict(r#"{"e\u0301":1,"\u00e9":2}"#),
        CanonError::NfcKeyCollision { .. }
    );
    // U+2126 OHM SIGN normalizes to U+03A9.
    refused!(
        strict("{\"\u{2126}\":1,\"\u{3a9}\":2}"),
        CanonError::NfcKeyCollision { .. }
    );
    // Distinct after NFC: admitted, and the NFD key comes out composed.
    assert_eq!(
        strict(r#"{"e\u0301":1,"e":2}"#),
        Ok(json!({"\u{e9}": 1, "e": 2}))
    );
}

#[test]
fn every_string_is_nfc_after_admission() {
    let v = strict(r#"{"k":["A\u030a", {"n":"e\u0301"}], "\u212b":"\u1100\u1161"}"#);
    assert_eq!(
        v,
        Ok(json!({"k": ["\u{c5}", {"n": "\u{e9}"}], "\u{c5}": "\u{ac00}"}))
    );
}

#[test]
fn lone_surrogates_are_refused() {
    for (raw, unit) in [
        (r#""\ud83d""#, 0xD83D),
        (r#""\ud83dx""#, 0xD83D),
        (r#""\ud83d\u0041""#, 0xD83D),
        (r#""\ud83d\ud83d""#, 0xD83D),
        (r#""\ude00""#, 0xDE00),
        (r#""\ude00\ud83d""#, 0xDE00),
        (r#"{"\udfff":1}"#, 0xDFFF),
    ] {
        refused!(strict(raw), CanonError::LoneSurrogate { unit: u, .. } if u == unit);
    }
    assert_eq!(strict(r#""\ud83d\ude00""#), Ok(json!("\u{1F600}")));
    assert_eq!(strict(r#""\uD83D\uDE00""#), Ok(json!("\u{1F600}")));
}

#[test]
fn invalid_utf8_is_refused() {
    for (raw, at) in [
        (&b"\"\xff\""[..], 1),
        (b"\"ok\xc0\xaf\"", 3),       // overlong '/'
        (b"\"\xed\xa0\x80\"", 1),     // a UTF-8-encoded surrogate
        (b"{\"a\":\"\xe2\x82\"}", 6), // truncated sequence
    ] {
        refused!(admit_json(raw, CanonLimits::STRICT), CanonError::InvalidUtf8 { offset } if offset == at);
    }
    assert!(admit_json("\"\u{20ac}\"".as_bytes(), CanonLimits::STRICT).is_ok());
}

#[test]
fn non_json_numbers_are_named() {
    for (raw, found) in [
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
        ("+1", "a leading '+'"),
        ("01", "a leading zero"),
        ("-01", "a leading zero"),
        ("[00]", "a leading zero"),
    ] {
        refused!(strict(raw), CanonError::NotJsonNumber { found: f, .. } if f == found);
    }
    refused!(strict("-"), CanonError::Syntax { .. });
    refused!(strict("1."), CanonError::Syntax { .. });
    refused!(floats("1e"), CanonError::Syntax { .. });
    refused!(strict(".5"), CanonError::Syntax { .. });
}

#[test]
fn integers_must_be_safe() {
    assert_eq!(
        strict("9007199254740991"),
        Ok(json!(9_007_199_254_740_991_i64))
    );
    assert_eq!(
        strict("-9007199254740991"),
        Ok(json!(-9_007_199_254_740_991_i64))
    );
    for raw in [
        "9007199254740992",
        "-9007199254740992",
        "18446744073709551616",
        "99999999999999999999999999",
    ] {
        refused!(strict(raw), CanonError::IntegerOutOfRange { ref literal, .. } if literal == raw);
        refused!(floats(raw), CanonError::IntegerOutOfRange { .. });
    }
    refused!(strict(r#"{"n":[1,9007199254740993]}"#), CanonError::IntegerOutOfRange { ref path, .. } if path == "/n/1");
}

#[test]
fn floats_are_refused_unless_allowed() {
    // A fraction or an exponent makes a float, even when the value is integral.
    for raw in ["1.0", "1.5", "1e2", "1E+2", "-0.0", "1e300", "5e-324"] {
        refused!(strict(raw), CanonError::FloatNotAllowed { ref literal, .. } if literal == raw);
    }
    assert_eq!(floats("1.5"), Ok(json!(1.5)));
    assert_eq!(floats("1e2"), Ok(json!(100.0)));
    assert!(floats("1.0").is_ok_and(|v| v.is_f64()));
    // Integral doubles past 2^53 are out of range even with floats allowed.
    refused!(floats("1e300"), CanonError::IntegerOutOfRange { .. });
    refused!(
        floats("9007199254740992.0"),
        CanonError::IntegerOutOfRange { .. }
    );
    assert!(floats("1.5e300").is_err()); // 1.5e300 is integral as a double too
    assert!(floats("9007199254740991.0").is_ok());
    // Past the double range entirely.
    refused!(floats("1e400"), CanonError::NonFiniteNumber { .. });
    refused!(
        floats("-1.7976931348623159e308"),
        CanonError::NonFiniteNumber { .. }
    );
}

#[test]
fn nesting_is_capped() {
    let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert!(strict(&nest(MAX_DEPTH)).is_ok());
    refused!(strict(&nest(MAX_DEPTH + 1)), CanonError::TooDeep { limit, .. } if limit == MAX_DEPTH);
    let objects = |n: usize| format!("{}1{}", r#"{"a":"#.repeat(n), "}".repeat(n));
    assert!(strict(&objects(MAX_DEPTH)).is_ok());
    refused!(strict(&objects(MAX_DEPTH + 1)), CanonError::TooDeep { ref path, .. } if path.matches("/a").count() == MAX_DEPTH);
    // Far past the cap: refused, without exhausting the stack.
    refused!(
        strict(
            &nest(100_000)
                .chars()
                .take(MAX_FIELDS_BYTES)
                .collect::<String>()
        ),
        CanonError::TooDeep { .. }
    );
    // The cap can be lowered, not raised.
    let shallow = CanonLimits::STRICT.with_max_depth(2);
    refused!(
        admit_json(b"[[[]]]", shallow),
        CanonError::TooDeep { limit: 2, .. }
    );
    let raised = CanonLimits::STRICT.with_max_depth(1000);
    refused!(
        admit_json(nest(MAX_DEPTH + 1).as_bytes(), raised),
        CanonError::TooDeep { .. }
    );
}

#[test]
fn size_is_capped() {
    let fill = |n: usize| format!("\"{}\"", "a".repeat(n - 2));
    assert!(strict(&fill(MAX_FIELDS_BYTES)).is_ok());
    refused!(
        strict(&fill(MAX_FIELDS_BYTES + 1)),
        CanonError::TooLarge { limit, got } if limit == MAX_FIELDS_BYTES && got == MAX_FIELDS_BYTES + 1
    );
    refused!(
        admit_json(b"[1,2]", CanonLimits::STRICT.with_max_bytes(4)),
        CanonError::TooLarge { limit: 4, got: 5 }
    );
    refused!(
        admit_json(
            fill(MAX_FIELDS_BYTES + 1).as_bytes(),
            CanonLimits::STRICT.with_max_bytes(usize::MAX)
        ),
        CanonError::TooLarge { .. }
    );
}

#[test]
fn trailing_data_is_refused() {
    for raw in ["{} x", "{}{}", "1 2", "[1]]", "\"a\"\"b\"", "null\u{0}"] {
        refused!(strict(raw), CanonError::TrailingData { .. });
    }
    assert!(strict(" {} \n\t\r").is_ok());
}

#[test]
fn unescaped_control_characters_are_refused() {
    for (raw, cp) in [
        ("\"a\nb\"", 0x0A),
        ("\"\t\"", 0x09),
        ("{\"k\u{0}\":1}", 0x00),
        ("\"\u{1f}\"", 0x1F),
    ] {
        refused!(strict(raw), CanonError::UnescapedControl { code_point, .. } if code_point == cp);
    }
    // Escaped, they are ordinary characters; DEL and C1 controls need no escape in JSON.
    assert_eq!(strict(r#""a\nb\u0000""#), Ok(json!("a\nb\u{0}")));
    assert!(strict("\"\u{7f}\u{85}\"").is_ok());
}

#[test]
fn invalid_escapes_are_refused() {
    for raw in [
        r#""\x""#,
        r#""\u12""#,
        r#""\u12G4""#,
        r#""\U0041""#,
        r#""\'""#,
        "\"\\",
    ] {
        assert!(
            matches!(
                strict(raw),
                Err(CanonError::InvalidEscape { .. } | CanonError::Syntax { .. })
            ),
            "{raw}: {:?}",
            strict(raw)
        );
    }
    refused!(
        strict(r#""\x""#),
        CanonError::InvalidEscape { offset: 1, .. }
    );
}

#[test]
fn syntax_errors_are_refused() {
    for raw in [
        "",
        " ",
        "{",
        "[",
        "{\"a\":1,}",
        "[1,]",
        "{'a':1}",
        "{a:1}",
        "{\"a\" 1}",
        "{\"a\":}",
        "\u{feff}{}",
        "tru",
        "nul",
        "True",
        "// c\n{}",
        "[1 2]",
        "{\"a\":1 \"b\":2}",
        "\"open",
    ] {
        refused!(strict(raw), CanonError::Syntax { .. });
    }
    refused!(strict(r#"{"a":[1,}"#), CanonError::Syntax { ref path, .. } if path == "/a/1");
}

#[test]
fn code_points_unassigned_in_the_pinned_version_are_refused() {
    // Version skew must fail closed: a code point this build's tables do not assign might gain a
    // decomposition later, so a newer verifier could normalize it differently. It is refused,
    // escaped or raw, in values and in keys.
    for raw in [
        r#""\u0378""#.to_owned(),
        "\"a\u{378}\"".to_owned(),
        "{\"\u{378}\":1}".to_owned(),
        r#""\udb40\udc80""#.to_owned(),
    ] {
        let r = strict(&raw);
        assert!(
            matches!(r, Err(CanonError::UnassignedCodePoint { .. })),
            "{raw}: {r:?}"
        );
        assert_eq!(
            r.err().map(|e| e.reason_code()),
            Some(ReasonCode::ActionInadmissible)
        );
    }
    refused!(strict(r#"{"p":["\u0378"]}"#), CanonError::UnassignedCodePoint { ref path, code_point: 0x378 } if path == "/p/0");
    refused!(
        strict("\"\u{50000}\""),
        CanonError::UnassignedCodePoint {
            code_point: 0x50000,
            ..
        }
    );
    // Assigned neighbours, private use and astral characters are fine.
    for ok in [
        "\u{377}",
        "\u{37a}",
        "\u{e000}",
        "\u{f0000}",
        "\u{1F600}",
        "\u{20000}",
    ] {
        assert!(strict(&format!("\"{ok}\"")).is_ok(), "{ok:?}");
    }
}

#[test]
fn noncharacters_are_refused() {
    for (raw, cp) in [
        (r#""\ufdd0""#, 0xFDD0),
        (r#""\ufdef""#, 0xFDEF),
        (r#""\ufffe""#, 0xFFFE),
        (r#""\uffff""#, 0xFFFF),
        (r#""\ud83f\udffe""#, 0x1FFFE),
        (r#""\udbff\udfff""#, 0x10FFFF),
    ] {
        refused!(strict(raw), CanonError::Noncharacter { code_point, .. } if code_point == cp);
    }
    assert!(strict(r#""\ufffd""#).is_ok());
}

#[test]
fn every_admission_error_maps_to_action_inadmissible() {
    for raw in [
        "{\"a\":1,\"a\":1}",
        "\"\\ud800\"",
        "1.5",
        "9007199254740992",
        "NaN",
        "[1,]",
        "1 1",
    ] {
        let e = strict(raw).err();
        assert_eq!(
            e.map(|e| e.reason_code()),
            Some(ReasonCode::ActionInadmissible),
            "{raw}"
        );
    }
}
