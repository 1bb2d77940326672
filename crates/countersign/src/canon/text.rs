//! Unicode rules for admitted strings: the pinned version, the assigned-code-point check and NFC.
//!
//! Normalization is only promised stable for code points that are assigned in the Unicode version
//! the normalizer was built from. A code point that is unassigned here may gain a decomposition or
//! a composition in a later version, so a newer verifier could normalize the same text differently
//! and compute a different op_hash. Refusing unassigned code points makes version skew fail closed:
//! text that two versions could disagree on is never hashed at all.

use serde_json::Value;
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// The Unicode version of the NFC tables (and of the assigned-code-point table) in this build.
pub const UNICODE_VERSION: (u8, u8, u8) = unicode_normalization::UNICODE_VERSION;

// The general-category table must describe exactly the version the normalizer implements, or the
// "assigned" check would not protect the normalization. Both crates are pinned with `=` in the
// workspace manifest; this assertion stops the build if either is ever bumped alone.
const _: () = {
    let (a, b, c) = UNICODE_VERSION;
    let (x, y, z) = unicode_properties::UNICODE_VERSION;
    assert!(a as u64 == x && b as u64 == y && c as u64 == z);
};

/// Why a code point is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadCodePoint {
    /// One of the 66 noncharacters (U+FDD0..U+FDEF and U+xxFFFE/U+xxFFFF).
    Noncharacter(u32),
    /// General_Category=Cn (unassigned) in the pinned Unicode version.
    Unassigned(u32),
}

/// Check every code point of `s`: assigned in the pinned version and not a noncharacter.
pub(crate) fn check_code_points(s: &str) -> Result<(), BadCodePoint> {
    // ASCII is all assigned; most admitted text is ASCII, so skip the table lookups.
    if s.is_ascii() {
        return Ok(());
    }
    for c in s.chars().filter(|c| !c.is_ascii()) {
        let cp = u32::from(c);
        if is_noncharacter(cp) {
            return Err(BadCodePoint::Noncharacter(cp));
        }
        if c.general_category() == GeneralCategory::Unassigned {
            return Err(BadCodePoint::Unassigned(cp));
        }
    }
    Ok(())
}

/// Noncharacters are permanently reserved for process-internal use and are never interchanged.
/// They are also Cn, so the unassigned check would catch them; naming them separately gives a
/// clearer error.
pub(crate) fn is_noncharacter(cp: u32) -> bool {
    (0xFDD0..=0xFDEF).contains(&cp) || (cp & 0xFFFE) == 0xFFFE
}

/// Whether `s` is already in NFC (ASCII trivially is).
pub(crate) fn is_nfc(s: &str) -> bool {
    s.is_ascii() || unicode_normalization::is_nfc(s)
}

/// Replace `s` by its NFC form, allocating only when it changes.
pub(crate) fn nfc_in_place(s: &mut String) {
    if !is_nfc(s) {
        *s = s.nfc().collect();
    }
}

/// The NFC form of `s` (used for object keys, which cannot be edited in place inside a map).
pub(crate) fn nfc_owned(s: String) -> String {
    if is_nfc(&s) { s } else { s.nfc().collect() }
}

/// Normalize every string value inside `value` to NFC. Keys are normalized by the parser.
pub(crate) fn nfc_values(value: &mut Value) {
    match value {
        Value::String(s) => nfc_in_place(s),
        Value::Array(items) => items.iter_mut().for_each(nfc_values),
        Value::Object(map) => map.values_mut().for_each(nfc_values),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Append `s` to `out` as a JCS string literal (RFC 8785 section 3.2.2.2): only `"`, `\` and the
/// C0 controls are escaped, with the short forms where JSON has them and lowercase `\u00xx`
/// otherwise. Used for the fixed outer structure of op_hash so that hashing cannot fail.
pub(crate) fn push_jcs_string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push(b'"');
    for &b in s.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            0x09 => out.extend_from_slice(b"\\t"),
            0x0A => out.extend_from_slice(b"\\n"),
            0x0C => out.extend_from_slice(b"\\f"),
            0x0D => out.extend_from_slice(b"\\r"),
            0x00..=0x1F => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX.get(usize::from(b >> 4)).copied().unwrap_or(b'0'));
                out.push(HEX.get(usize::from(b & 0xF)).copied().unwrap_or(b'0'));
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_unicode_version() {
        assert_eq!(UNICODE_VERSION, (18, 0, 0));
        let (a, b, c) = UNICODE_VERSION;
        assert_eq!(
            unicode_properties::UNICODE_VERSION,
            (u64::from(a), u64::from(b), u64::from(c))
        );
    }

    #[test]
    fn noncharacters() {
        for cp in [0xFDD0, 0xFDEF, 0xFFFE, 0xFFFF, 0x1FFFE, 0x10FFFF] {
            assert!(is_noncharacter(cp), "{cp:X}");
        }
        for cp in [0xFDCF, 0xFDF0, 0xFFFD, 0x1FFFD, 0x41] {
            assert!(!is_noncharacter(cp), "{cp:X}");
        }
    }

    #[test]
    fn assigned_and_unassigned() {
        assert_eq!(check_code_points("caf\u{e9} \u{1F600} \u{E000}"), Ok(()));
        assert_eq!(
            check_code_points("a\u{378}"),
            Err(BadCodePoint::Unassigned(0x378))
        );
        assert_eq!(
            check_code_points("\u{FDD0}"),
            Err(BadCodePoint::Noncharacter(0xFDD0))
        );
    }

    #[test]
    fn jcs_string_matches_serde_jcs() {
        let samples = [
            "",
            "plain",
            "q\"b\\s",
            "\u{0}\u{1f}\u{7f}\n\t\r\u{8}\u{c}",
            "é😀/",
        ];
        for s in samples {
            let mut out = Vec::new();
            push_jcs_string(&mut out, s);
            assert_eq!(out, serde_jcs::to_vec(&s).unwrap_or_default(), "{s:?}");
        }
    }
}
