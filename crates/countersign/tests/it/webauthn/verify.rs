//! End-to-end checks with freshly signed assertions: every rule, positive and negative, for every
//! algorithm, on every backend.

use super::support::*;
use countersign::ReasonCode;
use countersign::webauthn::{
    AssertionError, AuthDataError, ClientData, ClientDataError, Flags, PreparedSignature,
    SignatureError, all_backends, default_backend,
};

#[test]
fn every_algorithm_verifies_on_every_backend() {
    note_backends();
    for (name, key) in TestKey::all() {
        let signed = good(&key);
        let origins = origins();
        let verified = verify_all(&key.public(), &signed, &expect(&origins))
            .unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(verified.sign_count, 1, "{name}");
        assert_eq!(verified.flags, Flags(0x05));
        assert_eq!(verified.client_data.challenge, CHALLENGE);
        assert_eq!(verified.client_data.origin, ORIGIN);
    }
}

#[test]
fn default_backend_is_ring_exactly_when_compiled_in() {
    let expected = if cfg!(feature = "ring") {
        "ring"
    } else {
        "rustcrypto"
    };
    assert_eq!(default_backend().name(), expected);
    assert_eq!(
        all_backends().len(),
        if cfg!(feature = "ring") { 2 } else { 1 }
    );
}

#[test]
fn another_keys_signature_is_invalid() {
    for (name, key) in TestKey::all() {
        let other = match &key {
            TestKey::P256(_) => TestKey::p256(9),
            TestKey::P384(_) => TestKey::p384(9),
            TestKey::Ed25519(_) => TestKey::ed25519(9),
            TestKey::Rsa(_) => continue, // one RSA key per run; covered by the bit flips below
        };
        let origins = origins();
        let err = verify_all(&other.public(), &good(&key), &expect(&origins)).unwrap_err();
        assert_eq!(err.reason_code(), ReasonCode::SignatureInvalid, "{name}");
        assert!(
            matches!(
                err,
                AssertionError::Signature(SignatureError::Invalid { .. })
            ),
            "{name}: {err:?}"
        );
    }
}

#[test]
fn any_bit_flip_in_the_signature_fails() {
    for (name, key) in TestKey::all() {
        let signed = good(&key);
        let public = key.public();
        let origins = origins();
        for i in 0..signed.sig.len() {
            let mut bad = signed.clone();
            bad.sig[i] ^= 1 << (i % 8);
            assert!(
                verify_all(&public, &bad, &expect(&origins)).is_err(),
                "{name} byte {i}"
            );
        }
    }
}

#[test]
fn type_must_be_webauthn_get() {
    let key = TestKey::p256(1);
    let cdj = String::from_utf8(client_data(&CHALLENGE, ORIGIN, ""))
        .unwrap()
        .replace("webauthn.get", "webauthn.create");
    let signed = sign(&key, cdj.into_bytes(), auth_data(RP_ID, 0x05, 1, &[]));
    let origins = origins();
    let err = verify_all(&key.public(), &signed, &expect(&origins)).unwrap_err();
    assert!(matches!(
        err,
        AssertionError::ClientData(ClientDataError::WrongType { .. })
    ));
    assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
}

#[test]
fn challenge_must_match() {
    let key = TestKey::p256(1);
    let signed = good(&key);
    let origins = origins();
    let mut e = expect(&origins);
    let other = [0x5b; 64];
    e.challenge = &other;
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &e)),
        ReasonCode::BindingMismatch
    );
    // A challenge that is a prefix of the signed one is not the signed one.
    e.challenge = &CHALLENGE[..32];
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &e)),
        ReasonCode::BindingMismatch
    );
}

#[test]
fn origin_must_be_allowed() {
    let key = TestKey::ed25519(3);
    let signed = good(&key);
    let other = vec!["https://example.com".to_string()];
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &expect(&other))),
        ReasonCode::OriginMismatch
    );
    let with_port = vec!["https://example.org:443".to_string()];
    assert!(verify_all(&key.public(), &signed, &expect(&with_port)).is_ok());
}

#[test]
fn cross_origin_is_refused_unless_allowed() {
    let key = TestKey::p256(1);
    let cdj = String::from_utf8(client_data(&CHALLENGE, ORIGIN, ""))
        .unwrap()
        .replace(r#""crossOrigin":false"#, r#""crossOrigin":true"#);
    let signed = sign(&key, cdj.into_bytes(), auth_data(RP_ID, 0x05, 1, &[]));
    let origins = origins();
    let mut e = expect(&origins);
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &e)),
        ReasonCode::OriginMismatch
    );
    e.allow_cross_origin = true;
    assert!(verify_all(&key.public(), &signed, &e).is_ok());
}

#[test]
fn top_origin_must_be_allowed() {
    let key = TestKey::p256(1);
    let cdj = String::from_utf8(client_data(
        &CHALLENGE,
        ORIGIN,
        r#","topOrigin":"https://shop.example""#,
    ))
    .unwrap()
    .replace(r#""crossOrigin":false"#, r#""crossOrigin":true"#);
    let signed = sign(&key, cdj.into_bytes(), auth_data(RP_ID, 0x05, 1, &[]));
    let origins = origins();
    let tops = vec!["https://shop.example".to_string()];
    let mut e = expect(&origins);
    e.allow_cross_origin = true;
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &e)),
        ReasonCode::OriginMismatch
    );
    e.allowed_top_origins = &tops;
    assert!(verify_all(&key.public(), &signed, &e).is_ok());
}

#[test]
fn rp_id_hash_must_match() {
    let key = TestKey::p384(2);
    let signed = sign(
        &key,
        client_data(&CHALLENGE, ORIGIN, ""),
        auth_data("evil.example", 0x05, 1, &[]),
    );
    let origins = origins();
    let err = verify_all(&key.public(), &signed, &expect(&origins)).unwrap_err();
    assert!(matches!(
        err,
        AssertionError::AuthData(AuthDataError::RpIdHashMismatch { .. })
    ));
    assert_eq!(err.reason_code(), ReasonCode::RpMismatch);
    let mut e = expect(&origins);
    e.rp_id = "evil.example";
    assert!(verify_all(&key.public(), &signed, &e).is_ok());
}

#[test]
fn flags_user_presence_and_verification() {
    let key = TestKey::ed25519(3);
    let origins = origins();
    let with_flags = |flags| {
        sign(
            &key,
            client_data(&CHALLENGE, ORIGIN, ""),
            auth_data(RP_ID, flags, 1, &[]),
        )
    };
    let mut e = expect(&origins);
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x04), &e)),
        ReasonCode::UserNotPresent
    );
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x01), &e)),
        ReasonCode::UserNotVerified
    );
    e.require_user_verification = false;
    assert!(verify_all(&key.public(), &with_flags(0x01), &e).is_ok());
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x00), &e)),
        ReasonCode::UserNotPresent
    );
}

#[test]
fn backup_flags() {
    let key = TestKey::p256(1);
    let origins = origins();
    let with_flags = |flags| {
        sign(
            &key,
            client_data(&CHALLENGE, ORIGIN, ""),
            auth_data(RP_ID, flags, 1, &[]),
        )
    };
    let mut e = expect(&origins);
    // BS without BE.
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x15), &e)),
        ReasonCode::EvidenceMalformed
    );
    // BE unknown at enrollment: either value passes.
    assert!(verify_all(&key.public(), &with_flags(0x0d), &e).is_ok());
    assert!(verify_all(&key.public(), &with_flags(0x1d), &e).is_ok());
    e.backup_eligible = Some(false);
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x0d), &e)),
        ReasonCode::BackupEligibilityMismatch
    );
    assert!(verify_all(&key.public(), &with_flags(0x05), &e).is_ok());
    e.backup_eligible = Some(true);
    assert_eq!(
        reason(verify_all(&key.public(), &with_flags(0x05), &e)),
        ReasonCode::BackupEligibilityMismatch
    );
    assert!(verify_all(&key.public(), &with_flags(0x1d), &e).is_ok());
}

#[test]
fn sign_count() {
    let key = TestKey::p256(1);
    let origins = origins();
    let with_count = |count| {
        sign(
            &key,
            client_data(&CHALLENGE, ORIGIN, ""),
            auth_data(RP_ID, 0x05, count, &[]),
        )
    };
    let mut e = expect(&origins);
    e.stored_sign_count = 0;
    assert_eq!(
        verify_all(&key.public(), &with_count(0), &e)
            .unwrap()
            .sign_count,
        0
    );
    e.stored_sign_count = 41;
    assert_eq!(
        verify_all(&key.public(), &with_count(42), &e)
            .unwrap()
            .sign_count,
        42
    );
    for count in [41, 40, 0] {
        let err = verify_all(&key.public(), &with_count(count), &e).unwrap_err();
        assert_eq!(
            err,
            AssertionError::AuthData(AuthDataError::CounterRegression {
                stored: 41,
                got: count
            })
        );
    }
}

#[test]
fn counter_is_only_judged_after_the_signature() {
    let key = TestKey::p256(1);
    let origins = origins();
    let mut signed = sign(
        &key,
        client_data(&CHALLENGE, ORIGIN, ""),
        auth_data(RP_ID, 0x05, 3, &[]),
    );
    signed.auth_data[36] = 2; // a forged, lower counter
    let mut e = expect(&origins);
    e.stored_sign_count = 5;
    assert_eq!(
        reason(verify_all(&key.public(), &signed, &e)),
        ReasonCode::SignatureInvalid
    );
}

#[test]
fn attested_data_and_extensions_inside_an_assertion_verify() {
    let key = TestKey::p256(1);
    let origins = origins();
    let mut tail = vec![0u8; 16];
    tail.extend_from_slice(&3u16.to_be_bytes());
    tail.extend_from_slice(&[1, 2, 3]);
    tail.extend_from_slice(&key.cose());
    tail.extend_from_slice(&Cbor::Map(vec![(Cbor::Text("credProtect"), Cbor::Int(2))]).encode());
    let signed = sign(
        &key,
        client_data(&CHALLENGE, ORIGIN, ""),
        auth_data(RP_ID, 0xc5, 1, &tail),
    );
    let verified = verify_all(&key.public(), &signed, &expect(&origins)).unwrap();
    assert_eq!(verified.flags, Flags(0xc5));

    // The same bytes without the ED flag leave the extensions unaccounted for.
    let mut no_ed = signed.clone();
    no_ed.auth_data[32] = 0x45;
    let err = verify_all(&key.public(), &no_ed, &expect(&origins)).unwrap_err();
    assert!(matches!(
        err,
        AssertionError::AuthData(AuthDataError::TrailingBytes { .. })
    ));
}

#[test]
fn long_authenticator_data_takes_the_heap_path() {
    let key = TestKey::ed25519(3);
    let origins = origins();
    let mut ext = Vec::new();
    let big = Cbor::Map(vec![(Cbor::Text("blob"), Cbor::Bytes(vec![7; 2000]))]);
    ext.extend_from_slice(&big.encode());
    let signed = sign(
        &key,
        client_data(&CHALLENGE, ORIGIN, ""),
        auth_data(RP_ID, 0x85, 1, &ext),
    );
    assert!(verify_all(&key.public(), &signed, &expect(&origins)).is_ok());
}

#[test]
fn client_data_parse_is_the_entry_point_for_the_challenge() {
    let signed = good(&TestKey::p256(1));
    let cd = ClientData::parse(&signed.cdj).unwrap();
    assert_eq!(cd.challenge, CHALLENGE);
    assert_eq!(cd.cross_origin, Some(false));
}

#[test]
fn ecdsa_high_s_is_accepted_on_every_backend() {
    // (r, n - s) verifies whenever (r, s) does; WebAuthn does not ask for low S.
    let key = TestKey::p256(1);
    let origins = origins();
    let signed = good(&key);
    let public = key.public();
    let fixed = match PreparedSignature::new(&public, &signed.sig, Default::default()).unwrap() {
        PreparedSignature::EcdsaP256(fixed) => fixed,
        other => panic!("{other:?}"),
    };
    let (r, s) = fixed.split_at(32);
    let flipped = be_sub(&countersign_p256_order(), s);
    let mut high = signed.clone();
    high.sig = der_sig(r, &flipped);
    assert_ne!(high.sig, signed.sig);
    assert!(verify_all(&public, &signed, &expect(&origins)).is_ok());
    assert!(verify_all(&public, &high, &expect(&origins)).is_ok());
}

#[test]
fn ed25519_unreduced_s_is_refused_before_the_backend() {
    let key = TestKey::ed25519(3);
    let origins = origins();
    let signed = good(&key);
    // S + L encodes the same scalar modulo L; only the reduced form is accepted.
    let mut bad = signed.clone();
    let mut s: Vec<u8> = bad.sig[32..].iter().rev().copied().collect();
    s = be_add(&s, &ED25519_L_BE);
    s.reverse();
    bad.sig[32..].copy_from_slice(&s);
    let err = verify_all(&key.public(), &bad, &expect(&origins)).unwrap_err();
    assert!(matches!(
        err,
        AssertionError::Signature(SignatureError::Ed25519Rejected { .. })
    ));
    assert_eq!(err.reason_code(), ReasonCode::SignatureInvalid);
}

#[test]
fn ed25519_small_order_r_is_refused_before_the_backend() {
    let key = TestKey::ed25519(3);
    let origins = origins();
    let mut bad = good(&key);
    bad.sig[..32].copy_from_slice(&[0; 32]);
    bad.sig[0] = 1; // the identity
    let err = verify_all(&key.public(), &bad, &expect(&origins)).unwrap_err();
    assert_eq!(
        err,
        AssertionError::Signature(SignatureError::Ed25519Rejected {
            check: "R of small order"
        })
    );
}

#[test]
fn signature_lengths() {
    let origins = origins();
    for key in [TestKey::ed25519(3), TestKey::rsa()] {
        let signed = good(&key);
        for len in [0, signed.sig.len() - 1, signed.sig.len() + 1] {
            let mut bad = signed.clone();
            bad.sig.resize(len, 0);
            let err = verify_all(&key.public(), &bad, &expect(&origins)).unwrap_err();
            assert!(
                matches!(
                    err,
                    AssertionError::Signature(SignatureError::WrongLength { .. })
                ),
                "{err:?}"
            );
            assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
        }
    }
}

#[test]
fn rsa_signature_not_below_the_modulus_is_refused() {
    let key = TestKey::rsa();
    let origins = origins();
    let mut bad = good(&key);
    bad.sig.iter_mut().for_each(|b| *b = 0xff);
    let err = verify_all(&key.public(), &bad, &expect(&origins)).unwrap_err();
    assert_eq!(
        err,
        AssertionError::Signature(SignatureError::RsaSignatureOutOfRange)
    );
}

#[test]
fn prepared_signature_for_another_algorithm_is_api_misuse() {
    let p256 = TestKey::p256(1);
    let ed = TestKey::ed25519(3);
    let sig = [1u8; 64];
    let prepared = PreparedSignature::new(&ed.public(), &sig, Default::default()).unwrap();
    for backend in all_backends() {
        assert!(matches!(
            backend.verify(&p256.public(), b"m", &prepared),
            Err(SignatureError::AlgorithmMismatch { .. })
        ));
    }
}

// --- small big-endian helpers ---

const ED25519_L_BE: [u8; 32] = [
    0x10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x14, 0xde, 0xf9, 0xde, 0xa2, 0xf7, 0x9c,
    0xd6, 0x58, 0x12, 0x63, 0x1a, 0x5c, 0xf5, 0xd3, 0xed,
];

pub(crate) fn countersign_p256_order() -> [u8; 32] {
    let hex = "ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551";
    let mut out = [0; 32];
    hex::decode_to_slice(hex, &mut out).unwrap();
    out
}

/// a - b for equal-length big-endian numbers with a >= b.
pub(crate) fn be_sub(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = vec![0; a.len()];
    let mut borrow = 0i16;
    for i in (0..a.len()).rev() {
        let mut d = a[i] as i16 - b[i] as i16 - borrow;
        borrow = (d < 0) as i16;
        if d < 0 {
            d += 256;
        }
        out[i] = d as u8;
    }
    out
}

/// a + b for equal-length big-endian numbers (no overflow expected).
fn be_add(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = vec![0; a.len()];
    let mut carry = 0u16;
    for i in (0..a.len()).rev() {
        let s = a[i] as u16 + b[i] as u16 + carry;
        out[i] = s as u8;
        carry = s >> 8;
    }
    assert_eq!(carry, 0);
    out
}

/// Canonical DER for fixed-width big-endian r and s.
pub(crate) fn der_sig(r: &[u8], s: &[u8]) -> Vec<u8> {
    fn int(x: &[u8]) -> Vec<u8> {
        let start = x.iter().position(|&b| b != 0).unwrap_or(x.len() - 1);
        let mut body = x[start..].to_vec();
        if body[0] & 0x80 != 0 {
            body.insert(0, 0);
        }
        let mut out = vec![0x02, body.len() as u8];
        out.extend_from_slice(&body);
        out
    }
    let mut body = int(r);
    body.extend_from_slice(&int(s));
    let mut out = vec![0x30, body.len() as u8];
    out.extend_from_slice(&body);
    out
}
