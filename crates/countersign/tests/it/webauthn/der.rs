//! The DER policy end to end: real signatures re-encoded in the non-canonical forms devices emit.

use super::support::*;
use super::verify::der_sig;
use countersign::ReasonCode;
use countersign::webauthn::{
    AssertionError, DerError, DerPolicy, PreparedSignature, SignatureError,
};

/// Split a canonical DER signature into its INTEGER contents (r, s).
fn integers(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
    assert_eq!(der[0], 0x30);
    let body = &der[2..];
    let r_len = body[1] as usize;
    let r = body[2..2 + r_len].to_vec();
    let rest = &body[2 + r_len..];
    let s = rest[2..2 + rest[1] as usize].to_vec();
    (r, s)
}

fn encode(r: &[u8], s: &[u8]) -> Vec<u8> {
    let mut body = vec![0x02, r.len() as u8];
    body.extend_from_slice(r);
    body.extend_from_slice(&[0x02, s.len() as u8]);
    body.extend_from_slice(s);
    let mut out = vec![0x30, body.len() as u8];
    out.extend_from_slice(&body);
    out
}

/// Sign until r has its high bit set (so the canonical form carries a 0x00 pad), using the
/// counter to vary the message.
fn signed_with_high_r(key: &TestKey) -> Signed {
    for count in 1.. {
        let signed = sign(
            key,
            client_data(&CHALLENGE, ORIGIN, ""),
            auth_data(RP_ID, 0x05, count, &[]),
        );
        if integers(&signed.sig).0[0] == 0x00 {
            return signed;
        }
    }
    unreachable!()
}

fn verify_with(key: &TestKey, signed: &Signed, policy: DerPolicy) -> Result<(), AssertionError> {
    let origins = origins();
    let mut e = expect(&origins);
    e.stored_sign_count = 0;
    e.der_policy = policy;
    verify_all(&key.public(), signed, &e).map(drop)
}

#[test]
fn canonical_der_verifies_under_both_policies() {
    for key in [TestKey::p256(1), TestKey::p384(2)] {
        let signed = signed_with_high_r(&key);
        assert!(verify_with(&key, &signed, DerPolicy::Strict).is_ok());
        assert!(verify_with(&key, &signed, DerPolicy::DangerLenient).is_ok());
    }
}

#[test]
fn missing_zero_pad_is_refused_by_strict_and_verifies_when_lenient() {
    for key in [TestKey::p256(1), TestKey::p384(2)] {
        let signed = signed_with_high_r(&key);
        let (r, s) = integers(&signed.sig);
        let mut bad = signed.clone();
        bad.sig = encode(&r[1..], &s);
        let err = verify_with(&key, &bad, DerPolicy::Strict).unwrap_err();
        assert_eq!(
            err,
            AssertionError::Signature(SignatureError::Der(DerError::NegativeInteger {
                component: "r"
            }))
        );
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
        assert!(verify_with(&key, &bad, DerPolicy::DangerLenient).is_ok());
    }
}

#[test]
fn extra_leading_zeros_are_refused_by_strict_and_verify_when_lenient() {
    for key in [TestKey::p256(1), TestKey::p384(2)] {
        let signed = good(&key);
        let (r, s) = integers(&signed.sig);
        let mut padded_s = vec![0, 0];
        padded_s.extend_from_slice(&s);
        let mut bad = signed.clone();
        bad.sig = encode(&r, &padded_s);
        let err = verify_with(&key, &bad, DerPolicy::Strict).unwrap_err();
        assert!(matches!(
            err,
            AssertionError::Signature(SignatureError::Der(DerError::NonMinimalInteger { .. }))
        ));
        assert!(verify_with(&key, &bad, DerPolicy::DangerLenient).is_ok());
    }
}

#[test]
fn lenient_still_needs_the_right_numbers() {
    let key = TestKey::p256(1);
    let signed = good(&key);
    let (r, s) = integers(&signed.sig);
    let mut other_s = s.clone();
    *other_s.last_mut().unwrap() ^= 1;
    let mut bad = signed.clone();
    bad.sig = encode(&r, &other_s);
    let err = verify_with(&key, &bad, DerPolicy::DangerLenient).unwrap_err();
    assert_eq!(err.reason_code(), ReasonCode::SignatureInvalid);
}

#[test]
fn fixed_form_round_trips_through_der() {
    for key in [TestKey::p256(1), TestKey::p384(2)] {
        let signed = good(&key);
        let public = key.public();
        let prepared = PreparedSignature::new(&public, &signed.sig, DerPolicy::Strict).unwrap();
        let fixed: Vec<u8> = match prepared {
            PreparedSignature::EcdsaP256(f) => f.to_vec(),
            PreparedSignature::EcdsaP384(f) => f.to_vec(),
            other => panic!("{other:?}"),
        };
        let (r, s) = fixed.split_at(fixed.len() / 2);
        assert_eq!(der_sig(r, s), signed.sig);
    }
}
