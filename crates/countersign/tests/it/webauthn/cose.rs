//! COSE_Key parsing: every supported key type, the typed refusals, and the shared key policy.

use super::support::*;
use countersign::ReasonCode;
use countersign::webauthn::{
    CborError, CoseAlgorithm, CoseError, CosePublicKey, PublicKeyMaterial, RSA_MAX_BITS,
};

fn parse(params: Vec<(Cbor, Cbor)>) -> Result<CosePublicKey, CoseError> {
    CosePublicKey::from_cose(&Cbor::Map(params).encode())
}

fn set(mut params: Vec<(Cbor, Cbor)>, label: i64, value: Cbor) -> Vec<(Cbor, Cbor)> {
    for (k, v) in &mut params {
        if matches!(k, Cbor::Int(l) if *l == label) {
            *v = value;
            return params;
        }
    }
    params.push((Cbor::Int(label), value));
    params
}

fn remove(mut params: Vec<(Cbor, Cbor)>, label: i64) -> Vec<(Cbor, Cbor)> {
    params.retain(|(k, _)| !matches!(k, Cbor::Int(l) if *l == label));
    params
}

#[test]
fn supported_keys_parse_and_report_their_algorithm() {
    for (name, key, alg) in [
        ("ES256", TestKey::p256(1), CoseAlgorithm::Es256),
        ("ES384", TestKey::p384(2), CoseAlgorithm::Es384),
        ("EdDSA", TestKey::ed25519(3), CoseAlgorithm::EdDsa),
        ("RS256", TestKey::rsa(), CoseAlgorithm::Rs256),
    ] {
        let public =
            CosePublicKey::from_cose(&key.cose()).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(public.algorithm(), alg);
        assert_eq!(public, key.public());
        assert!(format!("{public:?}").contains(&format!("{alg:?}")));
    }
}

#[test]
fn material_is_the_raw_key() {
    let key = TestKey::p256(1);
    let TestKey::P256(signing) = &key else {
        unreachable!()
    };
    let point = signing.verifying_key().to_sec1_point(false);
    match key.public().material() {
        PublicKeyMaterial::P256 { sec1 } => assert_eq!(&sec1[..], point.as_bytes()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn unknown_parameters_are_ignored() {
    let mut params = TestKey::p256(1).cose_params();
    params.push((Cbor::Int(2), Cbor::Bytes(b"kid".to_vec())));
    params.push((Cbor::Int(4), Cbor::Array(vec![Cbor::Int(2)])));
    params.push((Cbor::Text("x-note"), Cbor::Bool(true)));
    assert!(parse(params).is_ok());
}

#[test]
fn unsupported_algorithms_are_typed() {
    for alg in [-36, -37, -38, -39, -47, -53, -65535, 1, 0] {
        let params = set(TestKey::p256(1).cose_params(), 3, Cbor::Int(alg));
        let err = parse(params).unwrap_err();
        assert_eq!(err, CoseError::UnsupportedAlgorithm { alg, crv: None });
        assert_eq!(err.reason_code(), ReasonCode::UnsupportedAlgorithm);
    }
    // EdDSA on Ed448 is a supported algorithm on an unsupported curve.
    let ed448 = okp_params(-8, 7, &[0x11; 57]);
    let err = parse(ed448).unwrap_err();
    assert_eq!(
        err,
        CoseError::UnsupportedAlgorithm {
            alg: -8,
            crv: Some(7)
        }
    );
    assert_eq!(err.reason_code(), ReasonCode::UnsupportedAlgorithm);
}

#[test]
fn missing_and_mistyped_parameters() {
    let base = TestKey::p256(1).cose_params();
    for label in [1, 3, -1, -2, -3] {
        let err = parse(remove(base.clone(), label)).unwrap_err();
        assert_eq!(err, CoseError::MissingParameter { label }, "label {label}");
        assert_eq!(err.reason_code(), ReasonCode::EvidenceMalformed);
    }
    for (label, value) in [
        (1, Cbor::Text("EC2")),
        (3, Cbor::Text("ES256")),
        (-1, Cbor::Text("P-256")),
        (-2, Cbor::Int(5)),
        (-3, Cbor::Bool(true)),
    ] {
        let err = parse(set(base.clone(), label, value)).unwrap_err();
        assert_eq!(
            err,
            CoseError::WrongParameterType { label },
            "label {label}"
        );
    }
}

#[test]
fn duplicate_parameters_are_refused() {
    for label in [1, 3, -1, -2] {
        let mut params = TestKey::p256(1).cose_params();
        let dup = params
            .iter()
            .find(|(k, _)| matches!(k, Cbor::Int(l) if *l == label))
            .unwrap()
            .clone();
        params.push(dup);
        assert_eq!(parse(params), Err(CoseError::DuplicateParameter { label }));
    }
}

#[test]
fn key_type_and_curve_must_match_the_algorithm() {
    let base = TestKey::p256(1).cose_params();
    assert_eq!(
        parse(set(base.clone(), 1, Cbor::Int(3))),
        Err(CoseError::KeyTypeMismatch { alg: -7, kty: 3 })
    );
    assert_eq!(
        parse(set(base.clone(), -1, Cbor::Int(2))),
        Err(CoseError::UnsupportedAlgorithm {
            alg: -7,
            crv: Some(2)
        })
    );
    let ed = TestKey::ed25519(3).cose_params();
    assert_eq!(
        parse(set(ed, 1, Cbor::Int(2))),
        Err(CoseError::KeyTypeMismatch { alg: -8, kty: 2 })
    );
}

#[test]
fn coordinate_lengths_are_exact() {
    let base = TestKey::p256(1).cose_params();
    for len in [0, 31, 33, 48] {
        let err = parse(set(base.clone(), -2, Cbor::Bytes(vec![1; len]))).unwrap_err();
        assert_eq!(
            err,
            CoseError::ParameterLength {
                label: -2,
                expected: 32,
                got: len
            }
        );
    }
    let ed = TestKey::ed25519(3).cose_params();
    assert!(matches!(
        parse(set(ed, -2, Cbor::Bytes(vec![1; 33]))),
        Err(CoseError::ParameterLength { expected: 32, .. })
    ));
}

#[test]
fn points_off_the_curve_are_refused() {
    let base = TestKey::p256(1).cose_params();
    let err = parse(set(base, -3, Cbor::Bytes(vec![0x42; 32]))).unwrap_err();
    assert_eq!(err, CoseError::InvalidPoint { alg: -7 });
    let base = TestKey::p384(2).cose_params();
    let err = parse(set(base, -2, Cbor::Bytes(vec![0x42; 48]))).unwrap_err();
    assert_eq!(err, CoseError::InvalidPoint { alg: -35 });
    // All-zero coordinates (the SEC1 spelling some encoders use for infinity).
    let zero = ec2_params(-7, 1, &[0; 32], &[0; 32]);
    assert_eq!(parse(zero), Err(CoseError::InvalidPoint { alg: -7 }));
}

#[test]
fn ed25519_small_order_and_non_canonical_keys_are_refused() {
    let mut identity = [0u8; 32];
    identity[0] = 1;
    let mut non_canonical = [0xff; 32]; // y = 2^255 - 1 > p
    non_canonical[31] = 0x7f;
    let order8: [u8; 32] =
        hex::decode("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05")
            .unwrap()
            .try_into()
            .unwrap();
    for key in [identity, [0; 32], order8, non_canonical] {
        assert_eq!(
            parse(okp_params(-8, 6, &key)),
            Err(CoseError::InvalidPoint { alg: -8 }),
            "{key:02x?}"
        );
    }
}

#[test]
fn rsa_key_policy() {
    let TestKey::Rsa(private) = TestKey::rsa() else {
        unreachable!()
    };
    use rsa::traits::PublicKeyParts as _;
    let n = private.n().to_bytes_be();
    let e = private.e().to_bytes_be();
    assert!(parse(rsa_params(&n, &e)).is_ok());
    // A leading zero is the same number.
    let mut padded = vec![0];
    padded.extend_from_slice(&n);
    let key = parse(rsa_params(&padded, &[0, 1, 0, 1])).unwrap();
    assert!(
        matches!(key.material(), PublicKeyMaterial::Rsa { n: m, e: x } if m == n && x == [1, 0, 1])
    );

    // 2047 bits.
    let mut small = n.clone();
    small[0] = 0x7f;
    let err = parse(rsa_params(&small, &e)).unwrap_err();
    assert_eq!(err, CoseError::RsaModulusTooSmall { bits: 2047 });
    assert_eq!(err.reason_code(), ReasonCode::UnsupportedAlgorithm);
    assert_eq!(
        parse(rsa_params(&n[1..], &e)),
        Err(CoseError::RsaModulusTooSmall {
            bits: 2040 - n[1].leading_zeros() as usize
        })
    );
    let mut huge = vec![0xff; RSA_MAX_BITS / 8 + 1];
    *huge.last_mut().unwrap() = 0xfd;
    assert_eq!(
        parse(rsa_params(&huge, &e)),
        Err(CoseError::RsaModulusTooLarge {
            bits: RSA_MAX_BITS + 8
        })
    );
    let mut even = n.clone();
    *even.last_mut().unwrap() &= 0xfe;
    assert_eq!(parse(rsa_params(&even, &e)), Err(CoseError::RsaModulusEven));
    for bad_e in [
        &[][..],
        &[1],
        &[2],
        &[4],
        &[1, 0, 0],
        &[2, 0, 0, 0, 1],
        &[1, 0, 0, 0, 0, 1],
    ] {
        assert_eq!(
            parse(rsa_params(&n, bad_e)),
            Err(CoseError::RsaExponentInvalid),
            "e = {bad_e:?}"
        );
    }
    assert!(parse(rsa_params(&n, &[3])).is_ok());
    assert!(parse(rsa_params(&n, &[1, 0xff, 0xff, 0xff, 0xff])).is_ok());
}

#[test]
fn cbor_framing_errors() {
    let good = TestKey::p256(1).cose();
    let mut trailing = good.clone();
    trailing.push(0);
    assert_eq!(
        CosePublicKey::from_cose(&trailing),
        Err(CoseError::Cbor(CborError::TrailingBytes { count: 1 }))
    );
    for cut in 0..good.len() {
        assert!(CosePublicKey::from_cose(&good[..cut]).is_err(), "cut {cut}");
    }
    // An indefinite-length map.
    let mut indefinite = vec![0xbf];
    indefinite.extend_from_slice(&good[1..]);
    indefinite.push(0xff);
    assert!(matches!(
        CosePublicKey::from_cose(&indefinite),
        Err(CoseError::Cbor(CborError::Unsupported { .. }))
    ));
    assert!(matches!(
        CosePublicKey::from_cose(&[0x80]),
        Err(CoseError::Cbor(CborError::UnexpectedType { .. }))
    ));
}
