//! Registration responses: attestation object structure and attestation signatures.

use base64::Engine as _;
use countersign_softkey::{
    Attestation, Ceremony, FIXTURE_AAGUID, Flags, RegistrationRequest, RegistrationResponse,
    SignatureQuirk, SoftKey, fixture_attestation_certificate, signed_message,
};
use sha2::{Digest as _, Sha256};
use x509_parser::prelude::FromDer as _;

use crate::cbor_decode::{Item, decode_all};
use crate::{ALG_FIXTURES, ORIGIN, RP, challenge, key, verify};

fn register(k: &SoftKey, attestation: Attestation) -> RegistrationResponse {
    k.register(&RegistrationRequest {
        attestation,
        ..RegistrationRequest::from(Ceremony::create(RP, ORIGIN, challenge(8)))
    })
    .unwrap()
}

/// Checks authData = rpIdHash || flags || count || AAGUID || len || id || COSE key.
fn check_auth_data(k: &SoftKey, r: &RegistrationResponse) {
    let ad = &r.authenticator_data;
    assert_eq!(&ad[..32], &Sha256::digest(RP.as_bytes())[..]);
    assert_eq!(ad[32], 0x45);
    assert_eq!(ad[33..37], [0, 0, 0, 0]);
    assert_eq!(ad[37..53], FIXTURE_AAGUID);
    let id_len = usize::from(u16::from_be_bytes([ad[53], ad[54]]));
    assert_eq!(&ad[55..55 + id_len], k.credential_id());
    assert_eq!(&ad[55 + id_len..], r.public_key_cose.as_slice());
    assert_eq!(r.public_key_cose, k.cose_public_key());
}

#[test]
fn none_attestation() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let r = register(&k, Attestation::None);
        // Canonical order: fmt (3 chars), attStmt (7), authData (8).
        assert_eq!(&r.attestation_object[..5], &[0xa3, 0x63, b'f', b'm', b't']);
        let obj = decode_all(&r.attestation_object);
        assert_eq!(obj.get_text("fmt"), Some(&Item::Text("none".into())));
        assert_eq!(obj.get_text("attStmt"), Some(&Item::Map(vec![])));
        assert_eq!(
            obj.get_text("authData").unwrap().bytes(),
            r.authenticator_data.as_slice()
        );
        check_auth_data(&k, &r);
        let cdj: serde_json::Value = serde_json::from_slice(&r.client_data_json).unwrap();
        assert_eq!(cdj["type"], "webauthn.create");
        assert!(
            String::from_utf8(r.client_data_json.clone())
                .unwrap()
                .starts_with(r#"{"type":"webauthn.create","challenge":"#)
        );
    }
}

#[test]
fn packed_self_attestation_verifies_with_the_credential_key() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let r = register(&k, Attestation::PackedSelf);
        let obj = decode_all(&r.attestation_object);
        assert_eq!(obj.get_text("fmt"), Some(&Item::Text("packed".into())));
        let stmt = obj.get_text("attStmt").unwrap();
        assert_eq!(
            stmt.get_text("alg"),
            Some(&Item::Int(k.alg().cose_alg().into()))
        );
        assert!(stmt.get_text("x5c").is_none());
        let sig = stmt.get_text("sig").unwrap().bytes();
        let msg = signed_message(&r.authenticator_data, &r.client_data_json);
        assert!(verify(&k.public_key(), &msg, sig), "{name}");
        check_auth_data(&k, &r);
    }
}

#[test]
fn packed_full_attestation_verifies_with_the_certificate_key() {
    for name in ALG_FIXTURES {
        let k = key(name);
        let r = register(&k, Attestation::PackedFull);
        let obj = decode_all(&r.attestation_object);
        let stmt = obj.get_text("attStmt").unwrap();
        assert_eq!(stmt.get_text("alg"), Some(&Item::Int(-7)));
        let Some(Item::Array(x5c)) = stmt.get_text("x5c") else {
            panic!("no x5c")
        };
        assert_eq!(x5c.len(), 1);
        assert_eq!(x5c[0].bytes(), fixture_attestation_certificate());
        let (_, cert) =
            x509_parser::certificate::X509Certificate::from_der(x5c[0].bytes()).unwrap();
        let att_pk =
            p256::ecdsa::VerifyingKey::from_sec1_bytes(&cert.public_key().subject_public_key.data)
                .unwrap();
        let sig = stmt.get_text("sig").unwrap().bytes();
        let msg = signed_message(&r.authenticator_data, &r.client_data_json);
        assert!(
            verify(&countersign_softkey::PublicKey::Es256(att_pk), &msg, sig),
            "{name}"
        );
        // Not signed by the credential key (that would be self attestation).
        assert!(!verify(&k.public_key(), &msg, sig), "{name}");
    }
}

#[test]
fn registration_options_are_honoured() {
    let k = key("bob-es256").with_aaguid([0; 16]);
    let r = k
        .register(&RegistrationRequest {
            cose_key_override: Some(vec![0xa0]),
            attestation: Attestation::PackedFull,
            ..RegistrationRequest::from(Ceremony {
                flags: Flags {
                    at: false,
                    ..Flags::UP_UV
                },
                sign_count: 5,
                signature_quirk: SignatureQuirk::EcdsaRaw,
                ..Ceremony::create(RP, ORIGIN, challenge(8))
            })
        })
        .unwrap();
    let ad = &r.authenticator_data;
    assert_eq!(ad[32], 0x05);
    assert_eq!(ad[33..37], 5u32.to_be_bytes());
    assert_eq!(ad[37..53], [0; 16]);
    assert_eq!(*ad.last().unwrap(), 0xa0);
    assert_eq!(r.public_key_cose, [0xa0]);
    let obj = decode_all(&r.attestation_object);
    assert_eq!(
        obj.get_text("attStmt")
            .unwrap()
            .get_text("sig")
            .unwrap()
            .bytes()
            .len(),
        64
    );
}

#[test]
fn registration_json_shape() {
    let k = key("alice-eddsa");
    let r = register(&k, Attestation::PackedFull);
    let j = r.to_json();
    let d = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(v.as_str().unwrap())
            .unwrap()
    };
    assert_eq!(j["type"], "public-key");
    assert_eq!(d(&j["rawId"]), k.credential_id());
    assert_eq!(d(&j["response"]["attestationObject"]), r.attestation_object);
    assert_eq!(d(&j["response"]["clientDataJSON"]), r.client_data_json);
    assert_eq!(d(&j["response"]["authenticatorData"]), r.authenticator_data);
    assert_eq!(d(&j["response"]["publicKey"]), k.public_key_spki_der());
    assert_eq!(j["response"]["publicKeyAlgorithm"], -8);
}
