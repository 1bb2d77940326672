//! COSE keys, SPKI, clientDataJSON and authenticator data look exactly as specified.

use base64::Engine as _;
use countersign_softkey::{
    AssertionRequest, CHROME_EXTRA_KEY, Ceremony, Flags, PublicKey, b64url, cbor::Value,
};
use rsa::traits::PublicKeyParts as _;
use sha2::{Digest as _, Sha256};
use x509_parser::prelude::FromDer as _;

use crate::cbor_decode::{Item, decode_all};
use crate::{ORIGIN, RP, challenge, key};

#[test]
fn cose_keys_match_hand_assembled_bytes() {
    // EC2 P-256: {1: 2, 3: -7, -1: 1, -2: x, -3: y}
    let k = key("alice-es256");
    let PublicKey::Es256(pk) = k.public_key() else {
        panic!()
    };
    let point = pk.to_sec1_point(false);
    let expected = [
        &[0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20][..],
        point.x().unwrap(),
        &[0x22, 0x58, 0x20],
        point.y().unwrap(),
    ]
    .concat();
    assert_eq!(k.cose_public_key(), expected);

    // EC2 P-384: {1: 2, 3: -35, -1: 2, -2: x, -3: y}
    let k = key("alice-es384");
    let PublicKey::Es384(pk) = k.public_key() else {
        panic!()
    };
    let point = pk.to_sec1_point(false);
    let expected = [
        &[
            0xa5, 0x01, 0x02, 0x03, 0x38, 0x22, 0x20, 0x02, 0x21, 0x58, 0x30,
        ][..],
        point.x().unwrap(),
        &[0x22, 0x58, 0x30],
        point.y().unwrap(),
    ]
    .concat();
    assert_eq!(k.cose_public_key(), expected);

    // OKP Ed25519: {1: 1, 3: -8, -1: 6, -2: x}
    let k = key("alice-eddsa");
    let PublicKey::EdDsa(pk) = k.public_key() else {
        panic!()
    };
    let expected = [
        &[0xa4, 0x01, 0x01, 0x03, 0x27, 0x20, 0x06, 0x21, 0x58, 0x20][..],
        pk.as_bytes(),
    ]
    .concat();
    assert_eq!(k.cose_public_key(), expected);

    // RSA: {1: 3, 3: -257, -1: n, -2: e}
    let k = key("alice-rs256");
    let PublicKey::Rs256(pk) = k.public_key() else {
        panic!()
    };
    let n = pk.n().to_bytes_be();
    assert_eq!(n.len(), 256);
    let expected = [
        &[
            0xa4, 0x01, 0x03, 0x03, 0x39, 0x01, 0x00, 0x20, 0x59, 0x01, 0x00,
        ][..],
        &n,
        &[0x21, 0x43, 0x01, 0x00, 0x01],
    ]
    .concat();
    assert_eq!(k.cose_public_key(), expected);
}

#[test]
fn cose_keys_decode_with_an_independent_decoder() {
    for name in crate::ALG_FIXTURES {
        let k = key(name);
        let item = decode_all(&k.cose_public_key());
        assert_eq!(
            item.get(&Item::Int(3)),
            Some(&Item::Int(k.alg().cose_alg().into())),
            "{name}"
        );
    }
}

#[test]
fn spki_parses_and_carries_the_key() {
    for name in crate::ALG_FIXTURES {
        let k = key(name);
        let der = k.public_key_spki_der();
        let (rest, spki) = x509_parser::x509::SubjectPublicKeyInfo::from_der(&der).unwrap();
        assert!(rest.is_empty());
        let oid = spki.algorithm.algorithm.to_id_string();
        let bits = &spki.subject_public_key.data;
        match k.public_key() {
            PublicKey::Es256(pk) => {
                assert_eq!(oid, "1.2.840.10045.2.1");
                assert_eq!(&bits[..], pk.to_sec1_point(false).as_bytes());
            }
            PublicKey::Es384(pk) => {
                assert_eq!(oid, "1.2.840.10045.2.1");
                assert_eq!(&bits[..], pk.to_sec1_point(false).as_bytes());
            }
            PublicKey::EdDsa(pk) => {
                assert_eq!(oid, "1.3.101.112");
                assert_eq!(&bits[..], pk.as_bytes());
            }
            PublicKey::Rs256(pk) => {
                assert_eq!(oid, "1.2.840.113549.1.1.1");
                let Ok(x509_parser::public_key::PublicKey::RSA(rsa)) = spki.parsed() else {
                    panic!("not RSA")
                };
                let modulus: Vec<u8> = rsa
                    .modulus
                    .iter()
                    .copied()
                    .skip_while(|b| *b == 0)
                    .collect();
                assert_eq!(modulus, pk.n().to_bytes_be());
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn client_data_json_is_browser_shaped() {
    let k = key("alice-es256");
    let c = challenge(9);
    let resp = k
        .assert(&AssertionRequest::from(Ceremony::get(
            RP,
            ORIGIN,
            c.clone(),
        )))
        .unwrap();
    let expected = format!(
        r#"{{"type":"webauthn.get","challenge":"{}","origin":"https://example.com","crossOrigin":false}}"#,
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(&c)
    );
    assert_eq!(String::from_utf8(resp.client_data_json).unwrap(), expected);
}

#[test]
fn client_data_options_appear() {
    let k = key("alice-es256");
    let req = AssertionRequest::from(Ceremony {
        cross_origin: Some(true),
        top_origin: Some("https://top.example".into()),
        extra_client_data: vec![
            (CHROME_EXTRA_KEY.0.into(), CHROME_EXTRA_KEY.1.into()),
            (
                "tokenBinding".into(),
                serde_json::json!({"status": "supported"}),
            ),
        ],
        client_data_type: "payment.get".into(),
        ..Ceremony::get(RP, ORIGIN, challenge(1))
    });
    let cdj = String::from_utf8(k.assert(&req).unwrap().client_data_json).unwrap();
    assert!(cdj.starts_with(r#"{"type":"payment.get","#));
    assert!(cdj.contains(
        r#","crossOrigin":true,"topOrigin":"https://top.example","other_keys_can_be_added_here":"#
    ));
    assert!(cdj.ends_with(r#","tokenBinding":{"status":"supported"}}"#));

    let omitted = AssertionRequest::from(Ceremony {
        cross_origin: None,
        ..Ceremony::get(RP, ORIGIN, challenge(1))
    });
    let cdj = String::from_utf8(k.assert(&omitted).unwrap().client_data_json).unwrap();
    assert!(!cdj.contains("crossOrigin"));
}

#[test]
fn client_data_override_is_used_verbatim_and_signed() {
    let k = key("alice-es256");
    let raw = b"{\"type\":\"webauthn.get\",\"type\":\"webauthn.create\"}".to_vec();
    let resp = k
        .assert(&AssertionRequest::from(Ceremony {
            client_data_override: Some(raw.clone()),
            ..Ceremony::get(RP, ORIGIN, challenge(1))
        }))
        .unwrap();
    assert_eq!(resp.client_data_json, raw);
    assert!(crate::verify(
        &k.public_key(),
        &resp.signed_message(),
        &resp.signature
    ));
}

#[test]
fn flags_and_counter_appear_in_authenticator_data() {
    let k = key("alice-eddsa");
    let cases = [
        (Flags::UP_UV, 1u32, 0x05u8),
        (
            Flags {
                uv: false,
                ..Flags::UP_UV
            },
            0,
            0x01,
        ),
        (Flags::SYNCED_PASSKEY, 0, 0x1d),
        // BS without BE: malformed, but produced on request.
        (
            Flags {
                bs: true,
                ..Flags::UP_UV
            },
            7,
            0x15,
        ),
        (
            Flags {
                reserved: 0x22,
                ..Flags::NONE
            },
            u32::MAX,
            0x22,
        ),
    ];
    for (flags, count, byte) in cases {
        let resp = k
            .assert(&AssertionRequest::from(Ceremony {
                flags,
                sign_count: count,
                ..Ceremony::get(RP, ORIGIN, challenge(1))
            }))
            .unwrap();
        let ad = &resp.authenticator_data;
        assert_eq!(ad.len(), 37);
        assert_eq!(&ad[..32], &Sha256::digest(RP.as_bytes())[..]);
        assert_eq!(ad[32], byte);
        assert_eq!(ad[33..37], count.to_be_bytes());
        assert_eq!(Flags::from_byte(ad[32]), flags);
    }
}

#[test]
fn at_flag_in_assertion_carries_attested_credential_data() {
    let k = key("alice-es256");
    let resp = k
        .assert(&AssertionRequest::from(Ceremony {
            flags: Flags {
                at: true,
                ..Flags::UP_UV
            },
            ..Ceremony::get(RP, ORIGIN, challenge(1))
        }))
        .unwrap();
    let ad = &resp.authenticator_data;
    assert_eq!(ad[32], 0x45);
    assert_eq!(&ad[37..53], &countersign_softkey::FIXTURE_AAGUID);
    assert_eq!(ad[53..55], 32u16.to_be_bytes());
    assert_eq!(&ad[55..87], k.credential_id());
    assert_eq!(&ad[87..], k.cose_public_key().as_slice());
    assert!(crate::verify(
        &k.public_key(),
        &resp.signed_message(),
        &resp.signature
    ));
}

#[test]
fn extensions_are_appended_and_ed_is_the_callers_choice() {
    let k = key("alice-es256");
    let ext = Value::Map(vec![("credProtect".into(), 2i64.into())]).encode();
    let with_ed = k
        .assert(&AssertionRequest::from(Ceremony {
            flags: Flags {
                ed: true,
                ..Flags::UP_UV
            },
            extensions: Some(ext.clone()),
            ..Ceremony::get(RP, ORIGIN, challenge(1))
        }))
        .unwrap();
    assert_eq!(with_ed.authenticator_data[32], 0x85);
    assert_eq!(&with_ed.authenticator_data[37..], ext.as_slice());
    let item = decode_all(&with_ed.authenticator_data[37..]);
    assert_eq!(item.get_text("credProtect"), Some(&Item::Int(2)));
    // Extensions without ED: bytes still appended, flag left clear (a malformed case).
    let without_ed = k
        .assert(&AssertionRequest::from(Ceremony {
            extensions: Some(ext.clone()),
            ..Ceremony::get(RP, ORIGIN, challenge(1))
        }))
        .unwrap();
    assert_eq!(without_ed.authenticator_data[32], 0x05);
    assert_eq!(without_ed.authenticator_data.len(), 37 + ext.len());
}

#[test]
fn assertion_json_round_trips() {
    let k = key("alice-es256");
    let resp = k
        .assert(&AssertionRequest {
            user_handle: Some(b"user-1".to_vec()),
            ..AssertionRequest::from(Ceremony::get(RP, ORIGIN, challenge(1)))
        })
        .unwrap();
    let json = resp.to_json();
    let d = |v: &serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(v.as_str().unwrap())
            .unwrap()
    };
    assert_eq!(json["type"], "public-key");
    assert_eq!(json["id"], b64url(k.credential_id()));
    assert_eq!(d(&json["rawId"]), k.credential_id());
    assert_eq!(
        d(&json["response"]["clientDataJSON"]),
        resp.client_data_json
    );
    assert_eq!(
        d(&json["response"]["authenticatorData"]),
        resp.authenticator_data
    );
    assert_eq!(d(&json["response"]["signature"]), resp.signature);
    assert_eq!(d(&json["response"]["userHandle"]), b"user-1");
    let no_handle = k
        .assert(&AssertionRequest::from(Ceremony::get(
            RP,
            ORIGIN,
            challenge(1),
        )))
        .unwrap();
    assert!(no_handle.to_json()["response"].get("userHandle").is_none());
}
