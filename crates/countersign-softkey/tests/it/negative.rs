//! The malformed outputs real devices produce, on request, and that they stay verifiable by a
//! lenient parser (so a vector can say "valid signature, bad encoding").

use countersign_softkey::{
    AssertionRequest, AssertionResponse, Ceremony, Error, Part, SignatureQuirk, SoftKey,
};
use p256::ecdsa::signature::Verifier as _;

use crate::{ORIGIN, RP, challenge, key};

/// A deliberately forgiving ECDSA signature reader: BER lengths, any number of leading zeros,
/// missing sign pads. Returns `r || s` as fixed 32-byte values.
fn lenient_p256(sig: &[u8]) -> Option<[u8; 64]> {
    let (&tag, rest) = sig.split_first()?;
    if tag != 0x30 {
        return None;
    }
    let (len, mut body) = match rest.split_first()? {
        (0x81, r) => (usize::from(*r.first()?), r.get(1..)?),
        (l, r) if *l < 0x80 => (usize::from(*l), r),
        _ => return None,
    };
    if len != body.len() {
        return None;
    }
    let mut out = [0u8; 64];
    for half in out.chunks_mut(32) {
        let [0x02, n, rest @ ..] = body else {
            return None;
        };
        let (int, rest) = rest.split_at_checked(usize::from(*n))?;
        let digits: Vec<u8> = int.iter().copied().skip_while(|b| *b == 0).collect();
        half.get_mut(32 - digits.len()..)?.copy_from_slice(&digits);
        body = rest;
    }
    body.is_empty().then_some(out)
}

fn strict_ok(k: &SoftKey, resp: &AssertionResponse) -> bool {
    crate::verify(&k.public_key(), &resp.signed_message(), &resp.signature)
}

fn lenient_ok(k: &SoftKey, resp: &AssertionResponse) -> bool {
    let countersign_softkey::PublicKey::Es256(pk) = k.public_key() else {
        panic!()
    };
    let Some(rs) =
        lenient_p256(&resp.signature).or_else(|| resp.signature.as_slice().try_into().ok())
    else {
        return false;
    };
    p256::ecdsa::Signature::from_slice(&rs)
        .is_ok_and(|s| pk.verify(&resp.signed_message(), &s).is_ok())
}

fn assert_with(k: &SoftKey, quirk: SignatureQuirk, tag: u8) -> Result<AssertionResponse, Error> {
    k.assert(&AssertionRequest::from(Ceremony {
        signature_quirk: quirk,
        ..Ceremony::get(RP, ORIGIN, challenge(tag))
    }))
}

#[test]
fn der_quirks_fail_strict_parsing_but_carry_a_valid_signature() {
    let k = key("alice-es256");
    let canonical = assert_with(&k, SignatureQuirk::None, 1).unwrap();
    assert!(strict_ok(&k, &canonical));
    assert!(lenient_ok(&k, &canonical));
    for quirk in [
        SignatureQuirk::DerExtraLeadingZero,
        SignatureQuirk::DerLongFormLength,
        SignatureQuirk::EcdsaRaw,
    ] {
        let odd = assert_with(&k, quirk, 1).unwrap();
        assert_ne!(odd.signature, canonical.signature, "{quirk:?}");
        assert_eq!(odd.authenticator_data, canonical.authenticator_data);
        assert!(!strict_ok(&k, &odd), "{quirk:?} should not be strict DER");
        assert!(
            lenient_ok(&k, &odd),
            "{quirk:?} should still be a valid signature"
        );
    }
    let raw = assert_with(&k, SignatureQuirk::EcdsaRaw, 1).unwrap();
    assert_eq!(raw.signature.len(), 64);
}

#[test]
fn missing_pad_applies_when_a_pad_exists_and_errors_otherwise() {
    let k = key("alice-es256");
    let mut applied = 0;
    let mut refused = 0;
    for tag in 0..24u8 {
        let canonical = assert_with(&k, SignatureQuirk::None, tag).unwrap();
        // r's length byte is at index 3; a 33-byte INTEGER means a pad, as does s's.
        let r_len = usize::from(canonical.signature[3]);
        let s_len = usize::from(canonical.signature[5 + r_len]);
        let has_pad = r_len == 33 || s_len == 33;
        match assert_with(&k, SignatureQuirk::DerMissingPad, tag) {
            Ok(odd) => {
                assert!(has_pad);
                assert_eq!(odd.signature.len(), canonical.signature.len() - 1);
                assert!(!strict_ok(&k, &odd));
                assert!(lenient_ok(&k, &odd));
                applied += 1;
            }
            Err(Error::QuirkNotApplicable { .. }) => {
                assert!(!has_pad);
                refused += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        applied > 0 && refused > 0,
        "applied {applied}, refused {refused}"
    );
}

#[test]
fn quirks_are_refused_for_non_ecdsa_keys() {
    for name in ["alice-eddsa", "alice-rs256"] {
        let k = key(name);
        assert!(matches!(
            assert_with(&k, SignatureQuirk::DerExtraLeadingZero, 1),
            Err(Error::QuirkNotApplicable { .. })
        ));
    }
}

#[test]
fn es384_quirks_apply_too() {
    let k = key("alice-es384");
    let odd = assert_with(&k, SignatureQuirk::EcdsaRaw, 1).unwrap();
    assert_eq!(odd.signature.len(), 96);
    assert!(!strict_ok(&k, &odd));
    let countersign_softkey::PublicKey::Es384(pk) = k.public_key() else {
        panic!()
    };
    let sig = p384::ecdsa::Signature::from_slice(&odd.signature).unwrap();
    assert!(pk.verify(&odd.signed_message(), &sig).is_ok());
}

#[test]
fn tamper_out_of_range_is_an_error() {
    let k = key("alice-es256");
    let mut resp = assert_with(&k, SignatureQuirk::None, 1).unwrap();
    let bits = resp.authenticator_data.len() * 8;
    assert!(resp.flip_bit(Part::AuthenticatorData, bits - 1).is_ok());
    assert!(matches!(
        resp.flip_bit(Part::AuthenticatorData, bits),
        Err(Error::BitOutOfRange {
            part: "authenticator_data",
            ..
        })
    ));
}

#[test]
fn flipping_the_up_bit_is_a_targeted_flag_tamper() {
    // Bit 32*8 + 7 is the least significant bit of the flags byte: UP.
    let k = key("alice-es256");
    let mut resp = assert_with(&k, SignatureQuirk::None, 1).unwrap();
    resp.flip_bit(Part::AuthenticatorData, 32 * 8 + 7).unwrap();
    assert_eq!(resp.authenticator_data[32], 0x04);
    assert!(!strict_ok(&k, &resp));
}

#[test]
fn negate_s_gives_the_other_valid_signature() {
    for name in ["alice-es256", "alice-es384"] {
        let k = key(name);
        let canonical = assert_with(&k, SignatureQuirk::None, 3).unwrap();
        let negated = assert_with(&k, SignatureQuirk::EcdsaNegateS, 3).unwrap();
        assert_ne!(negated.signature, canonical.signature, "{name}");
        assert!(
            strict_ok(&k, &negated),
            "{name}: still a valid, canonical-DER signature"
        );
        let back = SignatureQuirk::EcdsaNegateS
            .apply(k.alg(), &negated.signature)
            .unwrap();
        assert_eq!(
            back, canonical.signature,
            "{name}: negating twice is the identity"
        );
    }
    // Exactly one of the pair is low-S.
    let k = key("alice-es256");
    let sigs = [SignatureQuirk::None, SignatureQuirk::EcdsaNegateS]
        .map(|q| assert_with(&k, q, 3).unwrap().signature)
        .map(|der| {
            // Low-S exactly when normalizing changes nothing.
            let sig = p256::ecdsa::Signature::from_der(&der).unwrap();
            sig.normalize_s() == sig
        });
    assert_ne!(sigs[0], sigs[1]);
}
