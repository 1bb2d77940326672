//! `clientDataJSON` (WebAuthn §5.8.1): what the browser says it asked the authenticator to sign.
//!
//! Parsing is tolerant where clients differ and strict where ambiguity could hide an attack:
//!
//! - Unknown members are ignored. Browsers insert them on purpose (`extra_keys_may_be_added_here`)
//!   and old clients send `clientExtensions` / `hashAlgorithm`; the signature covers the bytes, so an
//!   ignored member cannot be altered unnoticed.
//! - A member we read (`type`, `challenge`, `origin`, `crossOrigin`, `topOrigin`) that appears twice
//!   is refused: JSON parsers disagree on which duplicate wins, and a verifier must not read a value
//!   the client did not mean.
//! - The whole text must be UTF-8, ignored members included: a skipped member is still part of the
//!   signed bytes, and a parser that reads it (or replaces invalid bytes) would see another text.
//! - `crossOrigin` and `topOrigin` are either absent or of their type (boolean, string): `null` is
//!   a wrong type like any other, not another spelling of "absent".
//! - `challenge` is base64url without padding, decoded strictly (no padding, no `+` or `/`, no
//!   non-zero trailing bits), as the specification defines it. Every browser emits exactly this
//!   form, so one challenge has one spelling.
//!
//! Origins are compared as origins, not strings: see [`ClientData::check_origin`].

use super::assertion::AssertionError;
use crate::reason::ReasonCode;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::Deserialize;
use std::borrow::Cow;

/// The `type` of an assertion's client data.
pub const TYPE_GET: &str = "webauthn.get";

/// Parsed clientDataJSON (unknown keys tolerated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientData {
    /// `type`: `webauthn.get` for an assertion (checked by [`crate::webauthn::verify_assertion`]).
    pub type_: String,
    /// `challenge`, decoded from base64url.
    pub challenge: Vec<u8>,
    /// `origin`, exactly as the client wrote it.
    pub origin: String,
    /// `crossOrigin`, when present.
    pub cross_origin: Option<bool>,
    /// `topOrigin`, when present.
    pub top_origin: Option<String>,
}

/// The members we read, borrowing from the input where no JSON escapes force a copy.
#[derive(Deserialize)]
struct Wire<'a> {
    #[serde(rename = "type", borrow)]
    type_: Cow<'a, str>,
    #[serde(borrow)]
    challenge: Cow<'a, str>,
    #[serde(borrow)]
    origin: Cow<'a, str>,
    #[serde(
        rename = "crossOrigin",
        default,
        deserialize_with = "not_null::cross_origin"
    )]
    cross_origin: Option<bool>,
    #[serde(
        rename = "topOrigin",
        default,
        deserialize_with = "not_null::top_origin"
    )]
    top_origin: Option<String>,
}

/// `crossOrigin` and `topOrigin` may be absent; when present they must have their type (`null`
/// is refused, see `crate::absent_or_value`).
mod not_null {
    crate::absent_or_value::refuse_null! {
        cross_origin => "crossOrigin",
        top_origin => "topOrigin",
    }
}

impl ClientData {
    /// Parse clientDataJSON. Checks structure only; the values are checked by
    /// [`crate::webauthn::verify_assertion`] against the expectations. The error is always
    /// [`AssertionError::ClientData`] (the wider type keeps callers' error plumbing uniform).
    pub fn parse(bytes: &[u8]) -> Result<Self, AssertionError> {
        Self::parse_strict(bytes).map_err(AssertionError::ClientData)
    }

    pub(crate) fn parse_strict(bytes: &[u8]) -> Result<Self, ClientDataError> {
        // serde_json validates UTF-8 only inside the strings it decodes, so check all of it first.
        let text = std::str::from_utf8(bytes).map_err(|e| ClientDataError::InvalidUtf8 {
            offset: e.valid_up_to(),
        })?;
        // serde's derived visitor refuses a duplicate of any member it reads and skips the rest.
        let wire: Wire<'_> = serde_json::from_str(text).map_err(|e| ClientDataError::Json {
            detail: e.to_string(),
        })?;
        let challenge = URL_SAFE_NO_PAD
            .decode(wire.challenge.as_bytes())
            .map_err(|_| ClientDataError::ChallengeEncoding {
                challenge: wire.challenge.to_string(),
            })?;
        Ok(Self {
            type_: wire.type_.into_owned(),
            challenge,
            origin: wire.origin.into_owned(),
            cross_origin: wire.cross_origin,
            top_origin: wire.top_origin,
        })
    }

    /// §7.2 step 11: this is an assertion's client data.
    pub fn check_type(&self) -> Result<(), ClientDataError> {
        if self.type_ == TYPE_GET {
            Ok(())
        } else {
            Err(ClientDataError::WrongType {
                got: self.type_.clone(),
            })
        }
    }

    /// §7.2 step 12: the challenge is the one we issued (byte equality; it is public data, so no
    /// constant-time comparison is needed).
    pub fn check_challenge(&self, expected: &[u8]) -> Result<(), ClientDataError> {
        if self.challenge == expected {
            Ok(())
        } else {
            Err(ClientDataError::ChallengeMismatch {
                expected: expected.to_vec(),
                got: self.challenge.clone(),
            })
        }
    }

    /// §7.2 step 13: the origin is one we expect.
    ///
    /// Policy (ours, the specification leaves matching to the relying party):
    /// - `"null"` (an opaque origin) is never accepted.
    /// - An `http`/`https` origin must be a bare `scheme://host[:port]`: no path (not even `/`),
    ///   query, fragment or user info. It matches an allowed origin with the same serialization, so
    ///   default ports, letter case and IDNA spellings do not matter
    ///   (`https://EXAMPLE.org:443` = `https://example.org`).
    /// - Any other scheme (e.g. `android:apk-key-hash:…` from native apps) matches only an allowed
    ///   entry with exactly the same bytes.
    pub fn check_origin(&self, allowed: &[String]) -> Result<(), ClientDataError> {
        match origin_matches(&self.origin, allowed) {
            Ok(true) => Ok(()),
            Ok(false) => Err(ClientDataError::OriginNotAllowed {
                origin: self.origin.clone(),
            }),
            Err(()) => Err(ClientDataError::OriginInvalid {
                origin: self.origin.clone(),
            }),
        }
    }

    /// §7.2 steps 13–14: a cross-origin (iframe) request is accepted only when the relying party
    /// allows it, and its top-level origin must then be one it lists.
    pub fn check_cross_origin(
        &self,
        allow_cross_origin: bool,
        allowed_top_origins: &[String],
    ) -> Result<(), ClientDataError> {
        let cross_origin = self.cross_origin == Some(true);
        if cross_origin && !allow_cross_origin {
            return Err(ClientDataError::CrossOriginNotAllowed);
        }
        let Some(top_origin) = &self.top_origin else {
            return Ok(());
        };
        // The client sets topOrigin only for a cross-origin call; anything else is inconsistent.
        if !cross_origin {
            return Err(ClientDataError::TopOriginWithoutCrossOrigin {
                top_origin: top_origin.clone(),
            });
        }
        match origin_matches(top_origin, allowed_top_origins) {
            Ok(true) => Ok(()),
            Ok(false) | Err(()) => Err(ClientDataError::TopOriginNotAllowed {
                top_origin: top_origin.clone(),
            }),
        }
    }
}

/// `Ok(true)` if `origin` matches an entry of `allowed` (see [`ClientData::check_origin`]),
/// `Err(())` if `origin` is not an acceptable origin at all.
fn origin_matches(origin: &str, allowed: &[String]) -> Result<bool, ()> {
    if origin == "null" {
        return Err(());
    }
    match web_origin(origin) {
        WebOrigin::Tuple(serialized) => {
            Ok(allowed.iter().any(|candidate| match web_origin(candidate) {
                WebOrigin::Tuple(expected) => expected == serialized,
                _ => false,
            }))
        }
        WebOrigin::Invalid => Err(()),
        WebOrigin::OtherScheme => Ok(allowed.iter().any(|candidate| candidate == origin)),
    }
}

enum WebOrigin {
    /// The ASCII serialization of an `http`/`https` tuple origin.
    Tuple(String),
    /// Looks like a web origin but is not a bare one (path, query, user info, unparseable).
    Invalid,
    /// A scheme with no tuple origin; compared byte for byte.
    OtherScheme,
}

fn web_origin(text: &str) -> WebOrigin {
    let Some((scheme, rest)) = text.split_once("://") else {
        return WebOrigin::OtherScheme;
    };
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return WebOrigin::OtherScheme;
    }
    // `url` would accept and normalise these away; an origin never contains them.
    if rest.is_empty() || rest.contains(['/', '\\', '?', '#', '@']) {
        return WebOrigin::Invalid;
    }
    match url::Url::parse(text) {
        Ok(url) => match url.origin() {
            origin @ url::Origin::Tuple(..) => WebOrigin::Tuple(origin.ascii_serialization()),
            url::Origin::Opaque(_) => WebOrigin::Invalid,
        },
        Err(_) => WebOrigin::Invalid,
    }
}

/// Why clientDataJSON was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ClientDataError {
    /// Not JSON, not an object, a required member missing or mistyped, or a member we read
    /// appearing twice.
    #[error("clientDataJSON is malformed: {detail}")]
    Json {
        /// The JSON parser's description.
        detail: String,
    },
    /// The text is not UTF-8 (anywhere, including members the verifier ignores).
    #[error("clientDataJSON is not UTF-8 (invalid byte at {offset})")]
    InvalidUtf8 {
        /// The offset of the first invalid byte.
        offset: usize,
    },
    /// `challenge` is not unpadded base64url.
    #[error("clientDataJSON challenge {challenge:?} is not unpadded base64url")]
    ChallengeEncoding {
        /// The challenge as written.
        challenge: String,
    },
    /// `type` is not `webauthn.get`.
    #[error("clientDataJSON type is {got:?}, expected \"webauthn.get\"")]
    WrongType {
        /// The type as written.
        got: String,
    },
    /// The challenge is not the one the relying party issued.
    #[error("challenge mismatch")]
    ChallengeMismatch {
        /// The challenge issued.
        expected: Vec<u8>,
        /// The challenge signed.
        got: Vec<u8>,
    },
    /// The origin is well formed but not allowed.
    #[error("origin {origin:?} is not allowed")]
    OriginNotAllowed {
        /// The origin as written.
        origin: String,
    },
    /// The origin is `null` or not a bare origin (e.g. it has a path).
    #[error("origin {origin:?} is not a valid origin")]
    OriginInvalid {
        /// The origin as written.
        origin: String,
    },
    /// `crossOrigin` is true and the relying party does not allow cross-origin calls.
    #[error("cross-origin assertion not allowed")]
    CrossOriginNotAllowed,
    /// `topOrigin` is not an allowed top-level origin.
    #[error("top origin {top_origin:?} is not allowed")]
    TopOriginNotAllowed {
        /// The top origin as written.
        top_origin: String,
    },
    /// `topOrigin` present although `crossOrigin` is not true.
    #[error("topOrigin {top_origin:?} present without crossOrigin: true")]
    TopOriginWithoutCrossOrigin {
        /// The top origin as written.
        top_origin: String,
    },
}

impl ClientDataError {
    /// The wire reason code.
    pub fn reason_code(&self) -> ReasonCode {
        match self {
            Self::Json { .. }
            | Self::InvalidUtf8 { .. }
            | Self::ChallengeEncoding { .. }
            | Self::WrongType { .. }
            | Self::TopOriginWithoutCrossOrigin { .. } => ReasonCode::EvidenceMalformed,
            Self::ChallengeMismatch { .. } => ReasonCode::BindingMismatch,
            Self::OriginNotAllowed { .. }
            | Self::OriginInvalid { .. }
            | Self::CrossOriginNotAllowed
            | Self::TopOriginNotAllowed { .. } => ReasonCode::OriginMismatch,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(json: &str) -> Result<ClientData, ClientDataError> {
        ClientData::parse_strict(json.as_bytes())
    }

    fn allowed(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    const GOOD: &str =
        r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org"}"#;

    #[test]
    fn parses_required_members_and_ignores_unknown_ones() {
        let cd = parse(
            r#"{"challenge":"AQID","clientExtensions":{},"hashAlgorithm":"SHA-256",
                "origin":"https://example.org","type":"webauthn.get","other":[1,{"a":null}]}"#,
        )
        .unwrap();
        assert_eq!(cd.type_, "webauthn.get");
        assert_eq!(cd.challenge, [1, 2, 3]);
        assert_eq!(cd.origin, "https://example.org");
        assert_eq!(cd.cross_origin, None);
        assert_eq!(cd.top_origin, None);
        assert!(cd.check_type().is_ok());
    }

    #[test]
    fn invalid_utf8_is_refused_even_in_an_ignored_member() {
        let mut bytes =
            br#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","x":"#
                .to_vec();
        bytes.extend_from_slice(b"\"\xff\"}");
        let offset = bytes.len() - 3;
        let e = ClientData::parse_strict(&bytes);
        assert_eq!(e, Err(ClientDataError::InvalidUtf8 { offset }));
        assert_eq!(
            e.map_err(|e| e.reason_code()),
            Err(ReasonCode::EvidenceMalformed)
        );
        // The same member with valid text is ignored.
        assert!(
            parse(&format!(
                "{}{}",
                &GOOD[..GOOD.len() - 1],
                r#","x":"\u00ff"}"#
            ))
            .is_ok()
        );
    }

    #[test]
    fn null_cross_origin_and_top_origin_are_wrong_types() {
        for bad in [
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","crossOrigin":null}"#,
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","topOrigin":null}"#,
        ] {
            assert!(
                matches!(parse(bad), Err(ClientDataError::Json { .. })),
                "{bad}"
            );
        }
        let ok = parse(
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","crossOrigin":false,"topOrigin":"https://a.example"}"#,
        )
        .unwrap();
        assert_eq!(ok.cross_origin, Some(false));
        assert_eq!(ok.top_origin.as_deref(), Some("https://a.example"));
    }

    #[test]
    fn json_escapes_are_decoded() {
        let cd = parse(
            r#"{"type":"webauthn\u002eget","challenge":"AQID","origin":"https:\/\/example.org"}"#,
        )
        .unwrap();
        assert!(cd.check_type().is_ok());
        assert_eq!(cd.origin, "https://example.org");
    }

    #[test]
    fn refuses_missing_mistyped_and_duplicate_members() {
        for bad in [
            r#"{"type":"webauthn.get","origin":"https://example.org"}"#,
            r#"{"type":"webauthn.get","challenge":"AQID"}"#,
            r#"{"challenge":"AQID","origin":"https://example.org"}"#,
            r#"{"type":1,"challenge":"AQID","origin":"https://example.org"}"#,
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","crossOrigin":"false"}"#,
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","origin":"https://evil.example"}"#,
            r#"{"type":"webauthn.get","challenge":"AQID","challenge":"AQID","origin":"https://example.org"}"#,
            r#"[]"#,
            r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org"} x"#,
            "",
        ] {
            let err = parse(bad).unwrap_err();
            assert!(
                matches!(err, ClientDataError::Json { .. }),
                "{bad}: {err:?}"
            );
            assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
        }
        // Duplicate members we do not read are harmless and tolerated.
        assert!(parse(r#"{"type":"webauthn.get","challenge":"AQID","origin":"https://example.org","x":1,"x":2}"#).is_ok());
        assert!(parse(GOOD).is_ok());
    }

    #[test]
    fn public_parse_wraps_the_error_as_an_assertion_error() {
        let err = ClientData::parse(b"{").unwrap_err();
        assert!(matches!(
            err,
            AssertionError::ClientData(ClientDataError::Json { .. })
        ));
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
        assert!(ClientData::parse(GOOD.as_bytes()).is_ok());
    }

    #[test]
    fn challenge_must_be_strict_unpadded_base64url() {
        for bad in ["AQI=", "AQID+A", "AQID/A", "AQJ", "AQ ID", "A"] {
            let json = GOOD.replace("AQID", bad);
            assert!(
                matches!(parse(&json), Err(ClientDataError::ChallengeEncoding { .. })),
                "{bad}"
            );
        }
        let cd = parse(&GOOD.replace("AQID", "-_8")).unwrap();
        assert_eq!(cd.challenge, [0xfb, 0xff]);
    }

    #[test]
    fn type_must_be_get() {
        let cd = parse(&GOOD.replace("webauthn.get", "webauthn.create")).unwrap();
        let err = cd.check_type().unwrap_err();
        assert_eq!(
            err,
            ClientDataError::WrongType {
                got: "webauthn.create".into()
            }
        );
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
    }

    #[test]
    fn challenge_must_match_exactly() {
        let cd = parse(GOOD).unwrap();
        assert!(cd.check_challenge(&[1, 2, 3]).is_ok());
        for other in [&[1, 2][..], &[1, 2, 3, 0], &[1, 2, 4], &[]] {
            let err = cd.check_challenge(other).unwrap_err();
            assert_eq!(err.reason_code(), ReasonCode::BindingMismatch);
        }
    }

    #[test]
    fn origins_compare_as_origins() {
        let cases = [
            ("https://example.org", "https://example.org", true),
            ("https://example.org", "https://example.org:443", true),
            ("https://example.org:443", "https://example.org", true),
            ("https://EXAMPLE.org", "https://example.org", true),
            ("http://localhost:8080", "http://localhost:8080", true),
            ("https://example.org:8443", "https://example.org", false),
            ("http://example.org", "https://example.org", false),
            ("https://sub.example.org", "https://example.org", false),
            ("https://example.org", "https://example.org.evil", false),
        ];
        for (origin, allow, ok) in cases {
            let cd = parse(&GOOD.replace("https://example.org", origin)).unwrap();
            let result = cd.check_origin(&allowed(&[allow]));
            assert_eq!(result.is_ok(), ok, "{origin} vs {allow}");
            if let Err(err) = result {
                assert_eq!(err.reason_code(), ReasonCode::OriginMismatch);
            }
        }
    }

    #[test]
    fn non_origins_are_invalid_even_if_listed() {
        for origin in [
            "null",
            "https://example.org/",
            "https://example.org/path",
            "https://example.org?q",
            "https://example.org#f",
            "https://user@example.org",
            "https://",
            "https://exa mple.org",
        ] {
            let cd = parse(&GOOD.replace("https://example.org", origin)).unwrap();
            let err = cd.check_origin(&allowed(&[origin])).unwrap_err();
            assert!(
                matches!(err, ClientDataError::OriginInvalid { .. }),
                "{origin}: {err:?}"
            );
            assert_eq!(err.reason_code(), ReasonCode::OriginMismatch);
        }
    }

    #[test]
    fn other_schemes_match_byte_for_byte() {
        let app = "android:apk-key-hash:abc123";
        let cd = parse(&GOOD.replace("https://example.org", app)).unwrap();
        assert!(cd.check_origin(&allowed(&[app])).is_ok());
        assert!(
            cd.check_origin(&allowed(&["android:apk-key-hash:abc124"]))
                .is_err()
        );
        assert!(cd.check_origin(&allowed(&[])).is_err());
    }

    #[test]
    fn cross_origin_needs_permission_and_allowed_top_origin() {
        let same = parse(&GOOD.replace('}', r#","crossOrigin":false}"#)).unwrap();
        assert!(same.check_cross_origin(false, &[]).is_ok());

        let cross = parse(&GOOD.replace('}', r#","crossOrigin":true}"#)).unwrap();
        assert_eq!(
            cross.check_cross_origin(false, &[]),
            Err(ClientDataError::CrossOriginNotAllowed)
        );
        assert!(cross.check_cross_origin(true, &[]).is_ok());

        let top = parse(&GOOD.replace(
            '}',
            r#","crossOrigin":true,"topOrigin":"https://example.com"}"#,
        ))
        .unwrap();
        assert_eq!(
            top.check_cross_origin(false, &allowed(&["https://example.com"])),
            Err(ClientDataError::CrossOriginNotAllowed)
        );
        assert!(
            top.check_cross_origin(true, &allowed(&["https://example.com:443"]))
                .is_ok()
        );
        let err = top
            .check_cross_origin(true, &allowed(&["https://example.net"]))
            .unwrap_err();
        assert_eq!(err.reason_code(), ReasonCode::OriginMismatch);

        let inconsistent =
            parse(&GOOD.replace('}', r#","topOrigin":"https://example.com"}"#)).unwrap();
        let err = inconsistent
            .check_cross_origin(true, &allowed(&["https://example.com"]))
            .unwrap_err();
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
    }
}
