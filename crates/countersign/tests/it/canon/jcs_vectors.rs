//! RFC 8785 vectors (the reference implementation's test data, read from the shared vectors
//! directory, never copied into the repo): raw JCS through both serializers, then through
//! admission, and ES6 number formatting.

use super::{floats, vectors_dir};
use countersign::CanonError;
use serde_json::Value;
use std::path::Path;
use unicode_normalization::UnicodeNormalization;

fn read(path: &Path) -> Vec<u8> {
    match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// (name, input, expected output) for every vector in `input/` and `rfc8785/`.
fn vectors(dir: &Path) -> Vec<(String, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    let mut names: Vec<String> = std::fs::read_dir(dir.join("input"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    for name in names {
        let input = read(&dir.join("input").join(&name));
        let output = read(&dir.join("output").join(&name));
        // The hex rendering must say the same bytes.
        let hex_name = name.replace(".json", ".txt");
        let hex_text =
            String::from_utf8(read(&dir.join("outhex").join(&hex_name))).unwrap_or_default();
        let from_hex: Vec<u8> = hex_text
            .split_whitespace()
            .filter_map(|h| u8::from_str_radix(h, 16).ok())
            .collect();
        assert_eq!(from_hex, output, "outhex/{hex_name}");
        out.push((name, input, output));
    }
    let rfc = dir.join("rfc8785");
    out.push((
        "rfc_sorting".into(),
        read(&rfc.join("rfc_sorting.input.json")),
        read(&rfc.join("rfc_sorting.expected.json")),
    ));
    out
}

fn parse_loose(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_default()
}

/// NFC on every key and string, written independently of the crate's implementation.
fn nfc_all(v: Value) -> Value {
    match v {
        Value::String(s) => Value::String(s.nfc().collect()),
        Value::Array(a) => Value::Array(a.into_iter().map(nfc_all).collect()),
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| (k.nfc().collect(), nfc_all(v)))
                .collect(),
        ),
        other => other,
    }
}

#[test]
fn rfc8785_vectors_through_both_serializers() {
    let Some(dir) = vectors_dir("jcs") else {
        return;
    };
    let all = vectors(&dir);
    assert_eq!(all.len(), 7);
    for (name, input, expected) in all {
        let v = parse_loose(&input);
        assert_eq!(
            serde_jcs::to_vec(&v).ok().as_deref(),
            Some(&expected[..]),
            "serde_jcs {name}"
        );
        assert_eq!(
            serde_json_canonicalizer::to_vec(&v).ok().as_deref(),
            Some(&expected[..]),
            "serde_json_canonicalizer {name}"
        );
    }
}

#[test]
fn rfc8785_vectors_through_admission() {
    let Some(dir) = vectors_dir("jcs") else {
        return;
    };
    let mut changed_by_nfc = Vec::new();
    let mut refused = Vec::new();
    for (name, input, expected) in vectors(&dir) {
        let admitted = floats(std::str::from_utf8(&input).unwrap_or_default());
        match admitted {
            Ok(v) => {
                // Admission = JCS after NFC: equal to the RFC output with NFC applied to it.
                let got = serde_jcs::to_vec(&v).unwrap_or_default();
                let want = serde_jcs::to_vec(&nfc_all(parse_loose(&expected))).unwrap_or_default();
                assert_eq!(
                    String::from_utf8_lossy(&got),
                    String::from_utf8_lossy(&want),
                    "{name}"
                );
                if got != expected {
                    changed_by_nfc.push(name);
                }
            }
            Err(e) => refused.push((name, e)),
        }
    }
    // unicode.json holds "A\u030a" (NFD of U+00C5); weird.json and rfc_sorting hold U+FB33, a
    // composition exclusion that NFC decomposes. Everything else is byte-identical to RFC 8785.
    assert_eq!(
        changed_by_nfc,
        ["unicode.json", "weird.json", "rfc_sorting"]
    );
    // values.json holds 1E30: an integral double beyond 2^53, refused even with floats allowed.
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(matches!(
        &refused[..],
        [(name, CanonError::IntegerOutOfRange { literal, .. })] if name == "values.json" && literal == "1E30"
    ));
}

#[test]
fn es6_number_formatting() {
    let Some(dir) = vectors_dir("jcs/es6numbers") else {
        return;
    };
    let text =
        String::from_utf8(read(&dir.join("es6testfile100m-first1000.txt"))).unwrap_or_default();
    let (mut checked, mut admitted, mut refused_big) = (0, 0, 0);
    for line in text.lines() {
        let Some((bits, expected)) = line.split_once(',') else {
            panic!("bad line {line:?}")
        };
        let Ok(bits) = u64::from_str_radix(bits, 16) else {
            panic!("bad hex {line:?}")
        };
        let f = f64::from_bits(bits);
        if !f.is_finite() {
            continue;
        }
        assert_eq!(
            serde_jcs::to_string(&f).ok().as_deref(),
            Some(expected),
            "serde_jcs {line}"
        );
        assert_eq!(
            serde_json_canonicalizer::to_string(&f).ok().as_deref(),
            Some(expected),
            "serde_json_canonicalizer {line}"
        );
        checked += 1;
        // Through admission (floats allowed): the ES6 form re-admits to the same double, unless
        // it is an integral value beyond 2^53, which admission refuses.
        match floats(expected) {
            Ok(v) => {
                assert_eq!(
                    v.as_f64().map(f64::to_bits),
                    Some((f + 0.0).to_bits()),
                    "{line}"
                );
                admitted += 1;
            }
            Err(CanonError::IntegerOutOfRange { .. }) => {
                assert!(
                    f.fract() == 0.0 && f.abs() > 9_007_199_254_740_991.0,
                    "{line}"
                );
                refused_big += 1;
            }
            Err(e) => panic!("{line}: {e}"),
        }
    }
    assert_eq!(checked, 1000);
    assert!(
        admitted > 500 && refused_big > 0,
        "{admitted} {refused_big}"
    );
}
