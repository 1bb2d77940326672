//! clientDataJSON the way browsers write it.
//!
//! WebAuthn L3 §5.8.1.1 fixes the serialization of the leading members (type, challenge, origin,
//! crossOrigin, then topOrigin) and the string escaping (CCDToString); Chrome emits exactly that
//! and appends further keys afterwards. We follow the same order so verifiers that (wrongly) depend
//! on a template and verifiers that parse properly can both be exercised.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The key Chrome sometimes appends to discourage template matching, with its value.
pub const CHROME_EXTRA_KEY: (&str, &str) = (
    "other_keys_can_be_added_here",
    "do not compare clientDataJSON against a template. See https://goo.gl/yabPex",
);

/// What goes into a clientDataJSON.
pub(crate) struct Spec<'a> {
    pub(crate) typ: &'a str,
    pub(crate) challenge: &'a [u8],
    pub(crate) origin: &'a str,
    pub(crate) cross_origin: Option<bool>,
    pub(crate) top_origin: Option<&'a str>,
    pub(crate) extra: &'a [(String, serde_json::Value)],
}

pub(crate) fn build(spec: &Spec<'_>) -> Vec<u8> {
    let mut out = String::from("{\"type\":");
    ccd_string(spec.typ, &mut out);
    out.push_str(",\"challenge\":");
    ccd_string(&URL_SAFE_NO_PAD.encode(spec.challenge), &mut out);
    out.push_str(",\"origin\":");
    ccd_string(spec.origin, &mut out);
    if let Some(cross) = spec.cross_origin {
        out.push_str(if cross {
            ",\"crossOrigin\":true"
        } else {
            ",\"crossOrigin\":false"
        });
    }
    if let Some(top) = spec.top_origin {
        out.push_str(",\"topOrigin\":");
        ccd_string(top, &mut out);
    }
    for (key, value) in spec.extra {
        out.push(',');
        ccd_string(key, &mut out);
        out.push(':');
        match value {
            serde_json::Value::String(s) => ccd_string(s, &mut out),
            // Serializing a Value cannot fail; an empty fallback keeps this total.
            other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
        }
    }
    out.push('}');
    out.into_bytes()
}

/// CCDToString (WebAuthn L3 §5.8.1.2): quote, escape `"` and `\`, write every other code point
/// below U+0020 as `\u` plus four lower-case hex digits, and everything else verbatim.
fn ccd_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec<'a>(extra: &'a [(String, serde_json::Value)]) -> Spec<'a> {
        Spec {
            typ: "webauthn.get",
            challenge: &[0xfb, 0xff, 0x00],
            origin: "https://example.com",
            cross_origin: Some(false),
            top_origin: None,
            extra,
        }
    }

    #[test]
    fn chrome_key_order_and_b64url_challenge() {
        assert_eq!(
            String::from_utf8(build(&spec(&[]))).unwrap(),
            r#"{"type":"webauthn.get","challenge":"-_8A","origin":"https://example.com","crossOrigin":false}"#
        );
    }

    #[test]
    fn top_origin_follows_cross_origin_and_extras_come_last() {
        let extra = vec![
            (CHROME_EXTRA_KEY.0.to_owned(), CHROME_EXTRA_KEY.1.into()),
            ("n".to_owned(), serde_json::json!(1)),
        ];
        let mut s = spec(&extra);
        s.cross_origin = Some(true);
        s.top_origin = Some("https://top.example");
        let json = String::from_utf8(build(&s)).unwrap();
        assert!(json.starts_with(
            r#"{"type":"webauthn.get","challenge":"-_8A","origin":"https://example.com","crossOrigin":true,"topOrigin":"https://top.example","other_keys_can_be_added_here":"#
        ));
        assert!(json.ends_with(r#","n":1}"#));
    }

    #[test]
    fn cross_origin_can_be_omitted() {
        let mut s = spec(&[]);
        s.cross_origin = None;
        let json = String::from_utf8(build(&s)).unwrap();
        assert!(!json.contains("crossOrigin"));
    }

    #[test]
    fn ccd_escaping() {
        let mut out = String::new();
        ccd_string("a\"b\\c\n\u{1f}é\u{7f}", &mut out);
        assert_eq!(out, "\"a\\\"b\\\\c\\u000a\\u001fé\u{7f}\"");
    }

    proptest::proptest! {
        #[test]
        fn output_is_json_with_the_given_values(origin in proptest::prelude::any::<String>(), key in "[a-z]{1,8}", val in proptest::prelude::any::<String>()) {
            let extra = vec![(format!("x{key}"), serde_json::Value::String(val.clone()))];
            let mut s = spec(&extra);
            s.origin = &origin;
            let parsed: serde_json::Value = serde_json::from_slice(&build(&s)).unwrap();
            proptest::prop_assert_eq!(parsed["origin"].as_str(), Some(origin.as_str()));
            proptest::prop_assert_eq!(parsed[format!("x{key}")].as_str(), Some(val.as_str()));
        }
    }
}
