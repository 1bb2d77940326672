//! The NFC admission rule: an action whose strings are not already in NFC is refused (the
//! default), or normalized when the verifier's policy says its gateway normalizes before executing.
//!
//! op_hash is computed over the NFC form, so canonically equivalent strings share one op_hash:
//! `"\u{212A}evin"` (KELVIN SIGN) and `"Kevin"` hash alike. A gateway that executes the raw bytes
//! would then run an action the approver never saw (a downstream system that does not normalize
//! reads another account). Refusing non-NFC input makes what is shown, what is signed and what is
//! executed the same bytes; `normalize` is for a gateway that executes the NFC form itself.

use super::error::excerpt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::{self, Write as _};
use unicode_normalization::char::canonical_combining_class;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// What admission does with a string that NFC would change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NfcMode {
    /// Refuse it (`CanonError::NotNfc`): the action must already be in NFC. The default.
    #[default]
    Require,
    /// Normalize it (the gateway executes the NFC form, so the normalized form is what runs).
    Normalize,
}

impl NfcMode {
    /// The wire spelling: `require` or `normalize`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Require => "require",
            Self::Normalize => "normalize",
        }
    }
}

/// One decoded string (an object key or a string value) that NFC would change.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NonNfc {
    /// RFC 6901 JSON pointer into the fields, e.g. `/params/user`. For a key, the pointer names
    /// the key itself as submitted.
    pub path: String,
    /// The code points of that string that NFC changes, in order of first appearance, without
    /// repeats.
    pub code_points: Vec<char>,
}

impl fmt::Display for NonNfc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "string at {} is not in NFC (", self.path)?;
        for (i, c) in self.code_points.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "U+{:04X}", u32::from(*c))?;
        }
        f.write_str(")")
    }
}

/// Every string of `value` (keys as parsed, and values) that NFC would change, in the value's
/// key order; stops after the first when `first_only`.
pub(crate) fn find(value: &Value, first_only: bool) -> Vec<NonNfc> {
    let mut out = Vec::new();
    let mut path = String::new();
    walk(value, &mut path, first_only, &mut out);
    out
}

fn walk(value: &Value, path: &mut String, first_only: bool, out: &mut Vec<NonNfc>) {
    let done = |out: &Vec<NonNfc>| first_only && !out.is_empty();
    match value {
        Value::String(s) => check(s, path, out),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                if done(out) {
                    return;
                }
                let len = path.len();
                // Writing into a String cannot fail.
                let _ = write!(path, "/{i}");
                walk(item, path, first_only, out);
                path.truncate(len);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                if done(out) {
                    return;
                }
                let len = path.len();
                path.push('/');
                push_token(path, key);
                check(key, path, out);
                if !done(out) {
                    walk(item, path, first_only, out);
                }
                path.truncate(len);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn check(s: &str, path: &str, out: &mut Vec<NonNfc>) {
    if !super::text::is_nfc(s) {
        out.push(NonNfc {
            path: path.to_owned(),
            code_points: changed_code_points(s),
        });
    }
}

/// RFC 6901 escaping of one reference token, on an excerpt of the key (as error paths do).
fn push_token(path: &mut String, key: &str) {
    for c in excerpt(key).chars() {
        match c {
            '~' => path.push_str("~0"),
            '/' => path.push_str("~1"),
            c => path.push(c),
        }
    }
}

/// The code points of `s` that NFC changes.
///
/// `s` is cut into chunks before every code point that is a starter (combining class 0) with
/// NFC_Quick_Check=Yes: such a code point can neither be reordered nor composed with what precedes
/// it, so NFC works chunk by chunk (UAX #15, stable code points). In a chunk that NFC changes, the
/// culprits are its code points whose quick check is not Yes (KELVIN SIGN is No; a combining acute
/// accent that composes with the `e` before it is Maybe). A chunk changed only by reordering marks
/// has no such code point; its combining marks are named instead.
pub(crate) fn changed_code_points(s: &str) -> Vec<char> {
    let mut out: Vec<char> = Vec::new();
    let mut chunk: Vec<char> = Vec::new();
    for c in s.chars() {
        if is_stable(c) && !chunk.is_empty() {
            collect_chunk(&chunk, &mut out);
            chunk.clear();
        }
        chunk.push(c);
    }
    collect_chunk(&chunk, &mut out);
    out
}

fn is_stable(c: char) -> bool {
    canonical_combining_class(c) == 0 && quick_check(c) == IsNormalized::Yes
}

fn quick_check(c: char) -> IsNormalized {
    is_nfc_quick(std::iter::once(c))
}

fn collect_chunk(chunk: &[char], out: &mut Vec<char>) {
    if chunk.iter().copied().nfc().eq(chunk.iter().copied()) {
        return;
    }
    let mut culprits: Vec<char> = chunk
        .iter()
        .copied()
        .filter(|&c| quick_check(c) != IsNormalized::Yes)
        .collect();
    if culprits.is_empty() {
        culprits = chunk
            .iter()
            .copied()
            .filter(|&c| canonical_combining_class(c) != 0)
            .collect();
    }
    if culprits.is_empty() {
        culprits = chunk.to_vec();
    }
    for c in culprits {
        if !out.contains(&c) {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn singletons_are_named() {
        assert_eq!(changed_code_points("\u{212A}evin"), vec!['\u{212A}']);
        assert_eq!(changed_code_points("10 \u{2126}"), vec!['\u{2126}']);
        assert_eq!(changed_code_points("why\u{37E}"), vec!['\u{37E}']);
        assert_eq!(changed_code_points("\u{F900}\u{F900}"), vec!['\u{F900}']);
        assert_eq!(changed_code_points("Kevin"), Vec::<char>::new());
    }

    #[test]
    fn compositions_name_the_combining_mark() {
        assert_eq!(changed_code_points("cafe\u{301}"), vec!['\u{301}']);
        assert_eq!(changed_code_points("caf\u{e9}"), Vec::<char>::new());
        // Hangul L + V compose; the V is the one whose quick check is Maybe.
        assert_eq!(changed_code_points("\u{1100}\u{1161}"), vec!['\u{1161}']);
        // Reordering only: two marks out of canonical order, neither composes.
        assert_eq!(
            changed_code_points("x\u{315}\u{316}"),
            vec!['\u{315}', '\u{316}']
        );
    }

    #[test]
    fn find_reports_keys_and_values_with_pointers() {
        let v =
            json!({"params": {"user": "\u{212A}evin", "a/\u{2126}": 1, "ok": ["x", "\u{37E}"]}});
        let all = find(&v, false);
        let paths: Vec<&str> = all.iter().map(|n| n.path.as_str()).collect();
        assert_eq!(
            paths,
            ["/params/a~1\u{2126}", "/params/ok/1", "/params/user"]
        );
        assert_eq!(find(&v, true).len(), 1);
        assert!(find(&json!({"a": ["b", {"c": "d"}]}), false).is_empty());
    }

    #[test]
    fn display_names_path_and_code_points() {
        let n = NonNfc {
            path: "/params/user".into(),
            code_points: vec!['\u{212A}', '\u{2126}'],
        };
        assert_eq!(
            n.to_string(),
            "string at /params/user is not in NFC (U+212A, U+2126)"
        );
    }

    #[test]
    fn mode_wire_spelling() {
        assert_eq!(
            serde_json::to_string(&NfcMode::Normalize).ok().as_deref(),
            Some("\"normalize\"")
        );
        assert_eq!(
            serde_json::from_str::<NfcMode>("\"require\"").ok(),
            Some(NfcMode::Require)
        );
        assert!(serde_json::from_str::<NfcMode>("\"Require\"").is_err());
        assert_eq!(NfcMode::default(), NfcMode::Require);
    }
}
