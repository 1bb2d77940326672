//! Signatures verify with the pure-Rust crates over `authData || SHA-256(clientDataJSON)`.

use countersign_softkey::{AssertionRequest, Ceremony, Part, signed_message};
use sha2::{Digest as _, Sha256};

use crate::{ALG_FIXTURES, ORIGIN, RP, challenge, key, verify};

#[test]
fn assertions_verify_for_every_algorithm() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let resp = k
            .assert(&AssertionRequest::from(Ceremony::get(
                RP,
                ORIGIN,
                challenge(1),
            )))
            .unwrap();
        let message = [
            &resp.authenticator_data[..],
            &Sha256::digest(&resp.client_data_json)[..],
        ]
        .concat();
        assert_eq!(message, resp.signed_message());
        assert!(verify(&k.public_key(), &message, &resp.signature), "{name}");
    }
}

#[test]
fn signature_does_not_verify_under_another_key_or_message() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let other = key(&name.replace("alice", "bob"));
        let resp = k
            .assert(&AssertionRequest::from(Ceremony::get(
                RP,
                ORIGIN,
                challenge(1),
            )))
            .unwrap();
        assert!(
            !verify(&other.public_key(), &resp.signed_message(), &resp.signature),
            "{name}"
        );
        let mut wrong = resp.signed_message();
        wrong[0] ^= 1;
        assert!(!verify(&k.public_key(), &wrong, &resp.signature), "{name}");
    }
}

#[test]
fn tamper_hooks_break_verification_and_are_reversible() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let good = k
            .assert(&AssertionRequest::from(Ceremony::get(
                RP,
                ORIGIN,
                challenge(2),
            )))
            .unwrap();
        for part in [
            Part::Signature,
            Part::AuthenticatorData,
            Part::ClientDataJson,
        ] {
            let mut bad = good.clone();
            bad.flip_bit(part, 77).unwrap();
            assert_ne!(bad, good);
            assert!(
                !verify(&k.public_key(), &bad.signed_message(), &bad.signature),
                "{name} {part:?}"
            );
            bad.flip_bit(part, 77).unwrap();
            assert_eq!(bad, good);
        }
    }
}

#[test]
fn sign_client_data_signs_caller_built_bytes() {
    // An authData no builder would make (AT set, nothing attached) is still signed as given.
    let k = key("bob-es256");
    let mut auth_data = Sha256::digest(b"example.com").to_vec();
    auth_data.extend_from_slice(&[0x45, 0, 0, 0, 9]);
    let cdj = br#"{"type":"webauthn.get","challenge":"AA","origin":"https://x"}"#;
    let sig = k.sign_client_data(&auth_data, cdj).unwrap();
    assert!(verify(
        &k.public_key(),
        &signed_message(&auth_data, cdj),
        &sig
    ));
    // `sign` over the concatenation is the same operation.
    assert_eq!(sig, k.sign(&signed_message(&auth_data, cdj)).unwrap());
}

#[test]
fn every_fixture_key_loads_and_signs() {
    let names = countersign_softkey::SoftKey::fixture_names();
    assert!(names.iter().any(|n| n == "attestation-es256"));
    for name in names {
        let k = key(&name);
        assert_eq!(k.name(), Some(name.as_str()));
        let sig = k.sign(b"hello").unwrap();
        assert!(verify(&k.public_key(), b"hello", &sig), "{name}");
    }
}
