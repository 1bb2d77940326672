//! Properties of the whole verifier: no input panics it, and no change to a signed record's bytes
//! or bindings turns into an ALLOW.

use countersign::{
    ApprovalResult, ApprovalStatus, Case, CredentialRegistry, Decision, MemoryReplayState, Policy,
    verify_evidence,
};
use countersign_testkit::{self as kit, Signing};
use proptest::prelude::*;
use std::sync::OnceLock;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A valid worked-example CASE as JSON text, built once.
fn valid_case_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        let key = kit::key("alice-es256");
        let action = kit::payment_action("account-A");
        let entry = kit::evidence(&key, &action, &Signing::new(Decision::Approved, "props"));
        let result = kit::result_json(&kit::result(ApprovalStatus::Approved, [entry]));
        let registry = kit::registry([kit::enroll(&key, "alice@example.com")]);
        kit::case_json(&action, &result, &registry, &kit::policy_json(), kit::NOW).to_string()
    })
}

fn verify_text(text: &[u8]) -> Option<bool> {
    let case = Case::from_json(text).ok()?;
    let mut replay = MemoryReplayState::new();
    Some(
        case.verify_with(countersign::webauthn::default_backend(), &mut replay)
            .is_allow(),
    )
}

#[test]
fn the_unmutated_case_is_allowed() {
    assert_eq!(verify_text(valid_case_text().as_bytes()), Some(true));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn case_parsing_and_verification_never_panic_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let _ = verify_text(&bytes);
        let _ = ApprovalResult::from_json(&bytes);
        let _ = CredentialRegistry::from_json(&bytes);
    }

    #[test]
    fn mutating_one_byte_of_a_valid_case_never_panics(at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut text = valid_case_text().as_bytes().to_vec();
        let i = at.index(text.len());
        text[i] = byte;
        let _ = verify_text(&text);
    }

    /// Any change to a byte string the verifier binds or checks must deny.
    #[test]
    fn changing_any_signed_or_bound_byte_denies(field in 0usize..6, at in any::<prop::sample::Index>(), xor in 1u8..=255) {
        let key = kit::key("alice-eddsa");
        let action = kit::payment_action("account-A");
        let mut entry = kit::evidence(&key, &action, &Signing::new(Decision::Approved, "prop-mutate"));
        let target = match field {
            0 => &mut entry.client_data_json,
            1 => &mut entry.authenticator_data,
            2 => &mut entry.signature,
            3 => &mut entry.nonce,
            4 => &mut entry.op_hash,
            _ => &mut entry.credential_id,
        };
        let i = at.index(target.len());
        target[i] ^= xor;
        let result = kit::result(ApprovalStatus::Approved, [entry]);
        let registry = CredentialRegistry::from_document(kit::registry([kit::enroll(&key, "alice@example.com")])).unwrap();
        let now = OffsetDateTime::parse(kit::NOW, &Rfc3339).unwrap();
        let policy = Policy::new(kit::RP_ID, [kit::ORIGIN]);
        let verdict = verify_evidence(&policy, &action, &result, &registry, &mut MemoryReplayState::new(), now);
        prop_assert!(!verdict.is_allow(), "field {field} byte {i} ^ {xor:#x} was accepted: {verdict:?}");
    }
}
