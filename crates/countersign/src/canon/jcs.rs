//! RFC 8785 (JCS) serialization of admitted values.
//!
//! Admission has already removed everything JCS finds hard (duplicate keys, lone surrogates,
//! non-finite numbers, unsafe integers), so what is left is short: sort object members by the
//! UTF-16 code units of their names, write strings with JCS's minimal escaping, write integers in
//! decimal. Numbers with a fraction or exponent (only in profiles that allow floats) are formatted
//! by `serde_jcs`, the reference implementation the design names, which implements ECMAScript's
//! Number-to-String. Every vector and a property test compare this writer with both `serde_jcs`
//! and `serde_json_canonicalizer` on whole documents; it exists because it is an order of
//! magnitude faster than `serde_jcs` on the verification hot path.

use super::error::CanonError;
use super::text::push_jcs_string;
use serde_json::{Number, Value};

/// The JCS bytes of an admitted value.
pub(crate) fn to_vec(value: &Value) -> Result<Vec<u8>, CanonError> {
    let mut out = Vec::with_capacity(256);
    write_value(&mut out, value)?;
    Ok(out)
}

fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), CanonError> {
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => write_number(out, n)?,
        Value::String(s) => push_jcs_string(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item)?;
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            // The map iterates in UTF-8 byte order, which equals UTF-16 code-unit order unless a
            // name holds a supplementary-plane character (a surrogate pair sorts below U+E000..
            // U+FFFF in UTF-16, above it in UTF-8). Only then is a re-sort needed.
            if members.iter().any(|(k, _)| k.bytes().any(|b| b >= 0xF0)) {
                members.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            }
            out.push(b'{');
            for (i, (key, item)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                push_jcs_string(out, key);
                out.push(b':');
                write_value(out, item)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

fn write_number(out: &mut Vec<u8>, n: &Number) -> Result<(), CanonError> {
    // Admitted integers are within ±(2^53 − 1), where ECMAScript prints exactly the decimal digits.
    if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
        return Ok(());
    }
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
        return Ok(());
    }
    let text = serde_jcs::to_vec(n).map_err(|e| CanonError::Jcs {
        detail: e.to_string(),
    })?;
    out.extend_from_slice(&text);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn same_as_references(value: &Value) {
        let ours = to_vec(value).unwrap_or_default();
        assert_eq!(
            ours,
            serde_jcs::to_vec(value).unwrap_or_default(),
            "serde_jcs on {value}"
        );
        assert_eq!(
            ours,
            serde_json_canonicalizer::to_vec(value).unwrap_or_default(),
            "serde_json_canonicalizer on {value}"
        );
    }

    #[test]
    fn matches_both_reference_implementations() {
        same_as_references(
            &json!({"b": [1, -2, 9007199254740991_i64, null, true, false], "a": {"z": "q\"\\\n\u{1}", "é": 1.5}}),
        );
        same_as_references(&json!({"\u{E000}": 1, "\u{1F600}": 2, "\u{FFFF}x": 3, "a": 4}));
        same_as_references(&json!([1e21, 1e-7, 0.1, -0.0, 123.456, 5e-324]));
        same_as_references(&json!({}));
        same_as_references(&json!([]));
    }

    #[test]
    fn supplementary_names_sort_by_utf16_code_units() {
        let out = to_vec(&json!({"\u{E000}": 1, "\u{1F600}": 2})).unwrap_or_default();
        assert_eq!(
            String::from_utf8(out).unwrap_or_default(),
            "{\"\u{1F600}\":2,\"\u{E000}\":1}"
        );
    }
}
