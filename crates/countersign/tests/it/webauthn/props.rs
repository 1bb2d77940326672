//! Parser robustness: arbitrary and mutated bytes never panic, and round trips hold.

use super::support::*;
use super::verify::der_sig;
use countersign::webauthn::{
    Assertion, AuthenticatorData, ClientData, CosePublicKey, DerPolicy, PreparedSignature,
    all_backends, verify_assertion,
};
use proptest::prelude::*;
use std::sync::OnceLock;

struct Fixture {
    cose: Vec<u8>,
    key: CosePublicKey,
    signed: Signed,
}

/// One key, its COSE encoding and a good assertion per algorithm, made once.
fn fixtures() -> &'static [Fixture] {
    static FIXTURES: OnceLock<Vec<Fixture>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        TestKey::all()
            .into_iter()
            .map(|(_, k)| Fixture {
                cose: k.cose(),
                key: k.public(),
                signed: good(&k),
            })
            .collect()
    })
}

/// Overwrite a few bytes of `base` at chosen positions (mutations near valid input reach deeper
/// code than uniformly random bytes).
fn mutate(base: &[u8], edits: &[(usize, u8)], truncate: Option<usize>) -> Vec<u8> {
    let mut out = base.to_vec();
    for &(at, byte) in edits {
        if !out.is_empty() {
            let i = at % out.len();
            out[i] = byte;
        }
    }
    if let Some(len) = truncate {
        out.truncate(len % (base.len() + 1));
    }
    out
}

proptest! {
    #[test]
    fn auth_data_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = AuthenticatorData::parse(&bytes);
    }

    #[test]
    fn auth_data_with_attested_data_never_panics(
        flags in any::<u8>(),
        tail in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let bytes = auth_data(RP_ID, flags | 0x40, 0, &tail);
        let _ = AuthenticatorData::parse(&bytes);
        let bytes = auth_data(RP_ID, flags | 0x80, 0, &tail);
        let _ = AuthenticatorData::parse(&bytes);
    }

    #[test]
    fn client_data_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(cd) = ClientData::parse(&bytes) {
            let origins = origins();
            let _ = cd.check_origin(&origins);
            let _ = cd.check_cross_origin(true, &origins);
        }
    }

    #[test]
    fn client_data_origin_checks_never_panic(origin in "\\PC{0,40}", top in "\\PC{0,40}") {
        let json = serde_json::json!({
            "type": "webauthn.get", "challenge": "AQID", "origin": origin,
            "crossOrigin": true, "topOrigin": top,
        });
        let cd = ClientData::parse(json.to_string().as_bytes()).unwrap();
        let allowed = vec![origin.clone(), top.clone(), ORIGIN.to_string()];
        let _ = cd.check_origin(&allowed);
        let _ = cd.check_cross_origin(true, &allowed);
    }

    #[test]
    fn cose_parse_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = CosePublicKey::from_cose(&bytes);
    }

    #[test]
    fn mutated_cose_never_panics(
        which in 0usize..4,
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        truncate in proptest::option::of(any::<usize>()),
    ) {
        let cose = &fixtures()[which].cose;
        let _ = CosePublicKey::from_cose(&mutate(cose, &edits, truncate));
    }

    #[test]
    fn signature_preparation_never_panics(
        which in 0usize..4,
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let key = &fixtures()[which].key;
        for policy in [DerPolicy::Strict, DerPolicy::DangerLenient] {
            let _ = PreparedSignature::new(key, &bytes, policy);
        }
    }

    #[test]
    fn mutated_assertions_never_panic_and_backends_agree(
        which in 0usize..4,
        cdj_edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        ad_edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        sig_edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..3),
        truncate in proptest::option::of(any::<usize>()),
    ) {
        let Fixture { key, signed, .. } = &fixtures()[which];
        let bad = Signed {
            cdj: mutate(&signed.cdj, &cdj_edits, None),
            auth_data: mutate(&signed.auth_data, &ad_edits, None),
            sig: mutate(&signed.sig, &sig_edits, truncate),
        };
        let origins = origins();
        let result = verify_all(key, &bad, &expect(&origins));
        if result.is_ok() {
            // Only edits that changed nothing can verify.
            prop_assert_eq!(&bad.cdj, &signed.cdj);
            prop_assert_eq!(&bad.auth_data, &signed.auth_data);
            prop_assert_eq!(&bad.sig, &signed.sig);
        }
    }

    #[test]
    fn arbitrary_assertions_never_panic(
        cdj in proptest::collection::vec(any::<u8>(), 0..200),
        ad in proptest::collection::vec(any::<u8>(), 0..200),
        sig in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let origins = origins();
        let assertion = Assertion { client_data_json: &cdj, authenticator_data: &ad, signature: &sig };
        for fixture in fixtures() {
            for backend in all_backends() {
                let result = verify_assertion(&fixture.key, &assertion, &expect(&origins), backend);
                prop_assert!(result.is_err());
            }
        }
    }

    #[test]
    fn der_round_trips(r in proptest::array::uniform32(any::<u8>()), s in proptest::array::uniform32(any::<u8>())) {
        let key = &fixtures()[0].key;
        let der = der_sig(&r, &s);
        match PreparedSignature::new(key, &der, DerPolicy::Strict) {
            Ok(PreparedSignature::EcdsaP256(fixed)) => {
                prop_assert_eq!(&fixed[..32], &r[..]);
                prop_assert_eq!(&fixed[32..], &s[..]);
            }
            Ok(other) => prop_assert!(false, "{:?}", other),
            // Only out-of-range scalars (zero or >= n) are refused.
            Err(e) => prop_assert_eq!(e.reason_code(), countersign::ReasonCode::SignatureInvalid),
        }
    }
}
