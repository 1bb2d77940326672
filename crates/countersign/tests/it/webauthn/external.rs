//! Third-party assertions (real devices and the W3C test vectors) from `shared/vectors/`: each must
//! verify with its own challenge, RP ID and origin on every backend, and fail after any mutation.
//! The file is not part of the repository; the tests skip with a message when it is absent.

use super::support::*;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use countersign::ReasonCode;
use countersign::webauthn::{
    AssertionExpectations, AuthenticatorData, ClientData, CoseError, CosePublicKey,
};
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Deserialize)]
struct Entry {
    source: String,
    rp_id: String,
    origin: String,
    challenge_b64url: String,
    credential_public_key: String,
    client_data_json_b64url: String,
    authenticator_data_b64url: String,
    signature_b64url: String,
    alg: String,
    stored_sign_count: u32,
    #[serde(default)]
    registration_flags: Option<String>,
    expected_result: String,
}

fn decode(text: &str) -> Vec<u8> {
    URL_SAFE_NO_PAD.decode(text).expect("vector base64url")
}

/// The entries, or `None` (after saying why) when the shared folder is not there.
fn entries() -> Option<Vec<Entry>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/vectors/webauthn-external.json");
    let Ok(text) = std::fs::read_to_string(&path) else {
        eprintln!(
            "skipping external WebAuthn vectors: {} not found",
            path.display()
        );
        return None;
    };
    let entries: Vec<Entry> = serde_json::from_str(&text).expect("vector file parses");
    assert_eq!(entries.len(), 23, "the README promises 23 entries");
    Some(entries)
}

/// One entry ready to verify.
struct Case {
    name: String,
    key: CosePublicKey,
    signed: Signed,
    challenge: Vec<u8>,
    rp_id: String,
    origins: Vec<String>,
    top_origins: Vec<String>,
    cross_origin: bool,
    require_uv: bool,
    stored_sign_count: u32,
    backup_eligible: Option<bool>,
}

impl Case {
    /// Expectations taken from the entry itself (its cross-origin context included).
    fn expect(&self) -> AssertionExpectations<'_> {
        let mut e = AssertionExpectations::new(&self.challenge, &self.rp_id, &self.origins);
        e.allow_cross_origin = self.cross_origin;
        e.allowed_top_origins = &self.top_origins;
        e.require_user_verification = self.require_uv;
        e.stored_sign_count = self.stored_sign_count;
        e.backup_eligible = self.backup_eligible;
        e
    }
}

/// The declined algorithms must say so; the rest become cases.
fn cases() -> Option<Vec<Case>> {
    let mut cases = Vec::new();
    for entry in entries()? {
        assert_eq!(entry.expected_result, "valid", "{}", entry.source);
        let cose = decode(&entry.credential_public_key);
        let declined = entry.alg.starts_with("ES512") || entry.alg.starts_with("Ed448");
        match CosePublicKey::from_cose(&cose) {
            Err(e) if declined => {
                assert!(
                    matches!(
                        e,
                        CoseError::UnsupportedAlgorithm {
                            alg: -36 | -53,
                            crv: None
                        }
                    ),
                    "{}: {e:?}",
                    entry.alg
                );
                assert_eq!(e.reason_code(), ReasonCode::UnsupportedAlgorithm);
            }
            Err(e) => panic!("{} ({}): {e:?}", entry.source, entry.alg),
            Ok(key) => {
                assert!(!declined, "{} parsed", entry.alg);
                let signed = Signed {
                    cdj: decode(&entry.client_data_json_b64url),
                    auth_data: decode(&entry.authenticator_data_b64url),
                    sig: decode(&entry.signature_b64url),
                };
                let client_data = ClientData::parse(&signed.cdj).expect("vector clientDataJSON");
                let flags = AuthenticatorData::parse(&signed.auth_data)
                    .expect("vector authenticatorData")
                    .flags;
                let backup_eligible = entry.registration_flags.as_deref().map(|f| {
                    let bits = u8::from_str_radix(f.trim_start_matches("0x"), 16).unwrap();
                    bits & 0x08 != 0
                });
                cases.push(Case {
                    name: format!("{} [{}]", entry.source, entry.alg),
                    key,
                    challenge: decode(&entry.challenge_b64url),
                    rp_id: entry.rp_id,
                    origins: vec![entry.origin],
                    top_origins: client_data.top_origin.iter().cloned().collect(),
                    cross_origin: client_data.cross_origin == Some(true),
                    require_uv: flags.user_verified(),
                    stored_sign_count: entry.stored_sign_count,
                    backup_eligible,
                    signed,
                });
            }
        }
    }
    assert_eq!(cases.len(), 21, "23 entries less ES512 and Ed448");
    Some(cases)
}

#[test]
fn every_supported_vector_verifies_on_every_backend() {
    note_backends();
    let Some(cases) = cases() else { return };
    for case in &cases {
        let verified = verify_all(&case.key, &case.signed, &case.expect())
            .unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        let auth_data = AuthenticatorData::parse(&case.signed.auth_data).unwrap();
        assert_eq!(verified.sign_count, auth_data.sign_count, "{}", case.name);
        assert_eq!(verified.client_data.challenge, case.challenge);
    }
}

#[test]
fn any_bit_flip_in_the_signature_fails() {
    let Some(cases) = cases() else { return };
    for case in &cases {
        for i in 0..case.signed.sig.len() {
            let mut bad = case.signed.clone();
            bad.sig[i] ^= 1 << (i % 8);
            assert!(
                verify_all(&case.key, &bad, &case.expect()).is_err(),
                "{}: signature byte {i}",
                case.name
            );
        }
    }
}

#[test]
fn any_bit_flip_in_authenticator_data_fails() {
    let Some(cases) = cases() else { return };
    for case in &cases {
        for i in 0..case.signed.auth_data.len() {
            for bit in 0..8 {
                let mut bad = case.signed.clone();
                bad.auth_data[i] ^= 1 << bit;
                assert!(
                    verify_all(&case.key, &bad, &case.expect()).is_err(),
                    "{}: authenticatorData byte {i} bit {bit}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn flag_flips_fail_for_the_right_reason() {
    let Some(cases) = cases() else { return };
    for case in &cases {
        let flip = |bit: u8| {
            let mut bad = case.signed.clone();
            bad.auth_data[32] ^= bit;
            reason(verify_all(&case.key, &bad, &case.expect()))
        };
        assert_eq!(flip(0x01), ReasonCode::UserNotPresent, "{}", case.name);
        let uv = flip(0x04);
        if case.require_uv {
            assert_eq!(uv, ReasonCode::UserNotVerified, "{}", case.name);
        } else {
            assert_eq!(uv, ReasonCode::SignatureInvalid, "{}", case.name);
        }
        // BE cleared under a set BS is malformed whatever was enrolled; otherwise a recorded BE
        // catches the flip, and without a record only the signature does.
        let backup_state = case.signed.auth_data[32] & 0x10 != 0;
        let expected_be = match case.backup_eligible {
            _ if backup_state => ReasonCode::EvidenceMalformed,
            Some(_) => ReasonCode::BackupEligibilityMismatch,
            None => ReasonCode::SignatureInvalid,
        };
        assert_eq!(flip(0x08), expected_be, "{}", case.name);
        // AT and ED change the framing: the data no longer parses.
        assert_eq!(flip(0x40), ReasonCode::EvidenceMalformed, "{}", case.name);
        assert_eq!(flip(0x80), ReasonCode::EvidenceMalformed, "{}", case.name);
        // RFU bits are not checked, so only the signature catches them.
        assert_eq!(flip(0x02), ReasonCode::SignatureInvalid, "{}", case.name);
    }
}

#[test]
fn any_bit_flip_in_client_data_fails() {
    let Some(cases) = cases() else { return };
    for case in &cases {
        // Two bits per byte (all eight would quadruple the run time for little gain: any change
        // to these bytes changes the hash the signature covers).
        for i in 0..case.signed.cdj.len() {
            for bit in [i % 8, (i + 4) % 8] {
                let mut bad = case.signed.clone();
                bad.cdj[i] ^= 1 << bit;
                assert!(
                    verify_all(&case.key, &bad, &case.expect()).is_err(),
                    "{}: clientDataJSON byte {i} bit {bit}",
                    case.name
                );
            }
        }
    }
}

#[test]
fn another_rp_id_origin_or_challenge_fails() {
    let Some(cases) = cases() else { return };
    let other_origin = vec!["https://evil.example".to_string()];
    for case in &cases {
        let mut e = case.expect();
        e.rp_id = "evil.example";
        assert_eq!(
            reason(verify_all(&case.key, &case.signed, &e)),
            ReasonCode::RpMismatch,
            "{}",
            case.name
        );

        let mut e = case.expect();
        e.origins = &other_origin;
        assert_eq!(
            reason(verify_all(&case.key, &case.signed, &e)),
            ReasonCode::OriginMismatch,
            "{}",
            case.name
        );

        let mut e = case.expect();
        let mut challenge = case.challenge.clone();
        challenge[0] ^= 1;
        e.challenge = &challenge;
        assert_eq!(
            reason(verify_all(&case.key, &case.signed, &e)),
            ReasonCode::BindingMismatch,
            "{}",
            case.name
        );
    }
}

#[test]
fn default_expectations_refuse_cross_origin_vectors() {
    let Some(cases) = cases() else { return };
    let cross: Vec<_> = cases.iter().filter(|c| c.cross_origin).collect();
    assert_eq!(cross.len(), 2, "the W3C crossOrigin and topOrigin vectors");
    for case in cross {
        let mut e = case.expect();
        e.allow_cross_origin = false;
        assert_eq!(
            reason(verify_all(&case.key, &case.signed, &e)),
            ReasonCode::OriginMismatch,
            "{}",
            case.name
        );
        // With cross-origin allowed, a topOrigin must still be listed.
        if !case.top_origins.is_empty() {
            let mut e = case.expect();
            e.allowed_top_origins = &[];
            assert_eq!(
                reason(verify_all(&case.key, &case.signed, &e)),
                ReasonCode::OriginMismatch,
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn replaying_the_same_counter_is_a_regression() {
    let Some(cases) = cases() else { return };
    let mut checked = 0;
    for case in &cases {
        let count = AuthenticatorData::parse(&case.signed.auth_data)
            .unwrap()
            .sign_count;
        let mut e = case.expect();
        e.stored_sign_count = count;
        let result = verify_all(&case.key, &case.signed, &e);
        if count == 0 {
            assert!(result.is_ok(), "{}: counter 0 on both sides", case.name);
        } else {
            assert_eq!(
                reason(result),
                ReasonCode::CounterRegression,
                "{}",
                case.name
            );
            checked += 1;
        }
    }
    assert!(checked >= 5, "several real devices keep counters");
}
