//! The profile's rules over a parsed `fields` object: exactly the declared fields, each of its
//! declared type, then NFC on every string that is not `exact`.

use super::error::{CanonError, excerpt};
use super::profile::{FieldKind, FieldSpec, Profile};
use super::text;
use serde_json::{Map, Value};

/// Longest decimal string accepted (sign, digits and point included).
pub(crate) const MAX_DECIMAL_CHARS: usize = 64;
/// Longest identifier accepted.
pub(crate) const MAX_IDENTIFIER_CHARS: usize = 256;

/// Check `value` (fresh from the parser: keys NFC, string values as decoded) against `profile`,
/// normalizing it in place.
pub(crate) fn check(profile: &Profile, value: &mut Value) -> Result<(), CanonError> {
    let map = match value {
        Value::Object(map) => map,
        other => {
            return Err(CanonError::NotAnObject {
                found: kind_of(other),
            });
        }
    };
    // Exactly the declared set. Extra fields first: an undeclared field is what an attacker adds
    // to smuggle content the approver is never shown.
    if let Some(extra) = map.keys().find(|k| profile.field(k).is_none()) {
        return Err(CanonError::UnexpectedField {
            field: excerpt(extra),
        });
    }
    for spec in &profile.fields {
        let field = map
            .get_mut(&spec.name)
            .ok_or_else(|| CanonError::MissingField {
                field: spec.name.clone(),
            })?;
        check_field(spec, field)?;
    }
    Ok(())
}

fn check_field(spec: &FieldSpec, value: &mut Value) -> Result<(), CanonError> {
    let wrong_type = |value: &Value| CanonError::FieldType {
        field: spec.name.clone(),
        expected: spec.kind,
        found: kind_of(value),
    };
    match spec.kind {
        FieldKind::String => {
            let Value::String(s) = value else {
                return Err(wrong_type(value));
            };
            if spec.exact {
                if !text::is_nfc(s) {
                    return Err(CanonError::FieldNotNfc {
                        field: spec.name.clone(),
                    });
                }
            } else {
                text::nfc_in_place(s);
            }
        }
        FieldKind::Decimal | FieldKind::Currency | FieldKind::Identifier => {
            let Value::String(s) = value else {
                return Err(wrong_type(value));
            };
            let ok = match spec.kind {
                FieldKind::Decimal => is_decimal(s),
                FieldKind::Currency => is_currency(s),
                _ => is_identifier(s),
            };
            // All three shapes are ASCII, hence already NFC: `exact` holds trivially.
            if !ok {
                return Err(CanonError::FieldFormat {
                    field: spec.name.clone(),
                    kind: spec.kind,
                    value: excerpt(s),
                });
            }
        }
        FieldKind::Integer => {
            // The parser produced an integer only for literals without fraction or exponent, and
            // only within ±(2^53-1); a float (even `3.0`) is not an integer here.
            if !matches!(value, Value::Number(n) if n.is_i64() || n.is_u64()) {
                return Err(wrong_type(value));
            }
        }
        FieldKind::Boolean => {
            if !value.is_boolean() {
                return Err(wrong_type(value));
            }
        }
        FieldKind::Object => {
            if !value.is_object() {
                return Err(wrong_type(value));
            }
            text::nfc_values(value);
        }
        FieldKind::Any => text::nfc_values(value),
    }
    Ok(())
}

/// `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, at most [`MAX_DECIMAL_CHARS`], and not a negative zero (`-0`,
/// `-0.00`), which would be a second spelling of zero.
pub(crate) fn is_decimal(s: &str) -> bool {
    if s.is_empty() || s.len() > MAX_DECIMAL_CHARS {
        return false;
    }
    let (negative, unsigned) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (int, frac) = match unsigned.split_once('.') {
        Some((int, frac)) => (int, Some(frac)),
        None => (unsigned, None),
    };
    let all_digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let int_ok = all_digits(int) && (int == "0" || !int.starts_with('0'));
    let frac_ok = frac.is_none_or(all_digits);
    let zero = int == "0" && frac.is_none_or(|f| f.bytes().all(|b| b == b'0'));
    int_ok && frac_ok && !(negative && zero)
}

/// Exactly three ASCII capital letters (the shape of ISO 4217, not a list of live codes: the
/// list changes, and a verifier must not start refusing old evidence when it does).
pub(crate) fn is_currency(s: &str) -> bool {
    s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase())
}

/// 1 to [`MAX_IDENTIFIER_CHARS`] printable ASCII characters, no space.
pub(crate) fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.len() <= MAX_IDENTIFIER_CHARS && s.bytes().all(|b| b.is_ascii_graphic())
}

pub(crate) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(n) if n.is_f64() => "a non-integer number",
        Value::Number(_) => "an integer",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The first non-integer number inside `value`, with its path (for documents parsed before their
/// profile, and so before its float policy, was known).
pub(crate) fn find_float(value: &Value) -> Option<(String, String)> {
    match value {
        Value::Number(n) if n.is_f64() => Some((String::new(), n.to_string())),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| find_float(v).map(|(path, lit)| (format!("/{i}{path}"), lit))),
        Value::Object(map) => find_float_in(map),
        _ => None,
    }
}

fn find_float_in(map: &Map<String, Value>) -> Option<(String, String)> {
    map.iter().find_map(|(k, v)| {
        find_float(v).map(|(path, lit)| {
            let token = excerpt(k).replace('~', "~0").replace('/', "~1");
            (format!("/{token}{path}"), lit)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals() {
        for ok in ["0", "0.00", "40000.00", "-1.5", "7", "10.01"] {
            assert!(is_decimal(ok), "{ok}");
        }
        for bad in [
            "", "-", "01", "1.", ".5", "+1", "1e3", "1,000", "-0", "-0.00", " 1", "1.2.3", "١",
        ] {
            assert!(!is_decimal(bad), "{bad}");
        }
        assert!(is_decimal(&"9".repeat(MAX_DECIMAL_CHARS)));
        assert!(!is_decimal(&"9".repeat(MAX_DECIMAL_CHARS + 1)));
    }

    #[test]
    fn currencies() {
        assert!(is_currency("EUR"));
        for bad in ["eur", "EU", "EURO", "E1R", "ÉUR"] {
            assert!(!is_currency(bad), "{bad}");
        }
    }

    #[test]
    fn identifiers() {
        assert!(is_identifier("DE89370400440532013000"));
        assert!(is_identifier("acct:A/1"));
        for bad in ["", "a b", "caf\u{e9}", "a\u{7f}", "\t"] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
        assert!(!is_identifier(&"a".repeat(MAX_IDENTIFIER_CHARS + 1)));
    }
}
