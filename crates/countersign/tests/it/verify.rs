//! verify_evidence end to end with signed evidence from the software authenticator.
//!
//! Every case runs on every compiled-in signature backend and the verdicts must be identical.

use countersign::webauthn::all_backends;
use countersign::{
    Aaguid, Action, ApprovalResult, ApprovalStatus, AssuranceLevel, AssuranceSource,
    AttestationRecord, CredentialRecord, CredentialRegistry, Decision, Effect, EvidenceEntry,
    EvidenceError, EvidenceSlot, MemoryReplayState, Policy, ReasonCode, ReplayState, Verdict,
    VerifyError, replay::danger::OfflineAudit, verify_evidence_with,
};
use countersign_testkit::{self as kit, Flags, Part, Signing};
use serde_json::json;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub(super) fn now() -> OffsetDateTime {
    OffsetDateTime::parse(kit::NOW, &Rfc3339).unwrap()
}

pub(super) fn policy() -> Policy {
    Policy::new(kit::RP_ID, [kit::ORIGIN])
}

pub(super) fn registry_of(records: Vec<CredentialRecord>) -> CredentialRegistry {
    CredentialRegistry::from_document(kit::registry(records)).unwrap()
}

pub(super) fn alice() -> countersign_softkey::SoftKey {
    kit::key("alice-es256")
}

pub(super) fn alice_registry() -> CredentialRegistry {
    registry_of(vec![kit::enroll(&alice(), "alice@example.com")])
}

/// Verify on every backend with a fresh replay state each; the verdicts must agree.
pub(super) fn verify(
    policy: &Policy,
    action: &Action,
    result: &ApprovalResult,
    registry: &CredentialRegistry,
) -> Verdict {
    let mut verdicts = all_backends().into_iter().map(|backend| {
        let mut replay = MemoryReplayState::new();
        (
            backend.name(),
            verify_evidence_with(
                backend,
                policy,
                action,
                result,
                registry,
                &mut replay,
                now(),
            ),
        )
    });
    let (first_name, first) = verdicts.next().unwrap();
    for (name, other) in verdicts {
        // Everything but the human-readable detail, which names the backend, must be identical.
        let comparable = |v: &Verdict| {
            (
                v.effective,
                v.decision,
                v.reason_code,
                v.identity_assurance.clone(),
                v.approvers.clone(),
                v.findings.clone(),
            )
        };
        assert_eq!(
            comparable(&first),
            comparable(&other),
            "backends {first_name} and {name} disagree"
        );
    }
    first
}

pub(super) fn approve_a(signing: Signing) -> (Action, ApprovalResult) {
    let action = kit::payment_action("account-A");
    let entry = kit::evidence(&alice(), &action, &signing);
    (action, kit::result(ApprovalStatus::Approved, [entry]))
}

pub(super) fn assert_deny(verdict: &Verdict, reason: ReasonCode) {
    assert_eq!(
        verdict.effective,
        Effect::Deny,
        "expected DENY {reason}, got {verdict:?}"
    );
    assert_eq!(verdict.reason_code, Some(reason), "{verdict:?}");
}

pub(super) fn assert_allow(verdict: &Verdict) {
    assert_eq!(
        verdict.effective,
        Effect::Allow,
        "expected ALLOW, got {verdict:?}"
    );
    assert_eq!(verdict.reason_code, None);
}

pub(super) fn evidence_error(verdict: &Verdict) -> &EvidenceError {
    match &verdict.error {
        Some(VerifyError::Evidence { error, .. }) => error,
        other => panic!("expected an evidence error, got {other:?}"),
    }
}

// ---- the worked example -------------------------------------------------------------------------

#[test]
fn approval_of_40000_to_account_a_verifies() {
    let (action, result) = approve_a(Signing::new(Decision::Approved, "worked-a"));
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_allow(&verdict);
    assert_eq!(verdict.decision, ApprovalStatus::Approved);
    assert_eq!(verdict.identity_assurance.level, AssuranceLevel::Aal2);
    assert_eq!(verdict.identity_assurance.source, AssuranceSource::Evidence);
    assert_eq!(verdict.approvers.len(), 1);
    assert_eq!(verdict.approvers[0].principal, "alice@example.com");
    assert_eq!(verdict.approvers[0].decision, Decision::Approved);
}

#[test]
fn the_same_evidence_for_account_b_fails_at_the_digest() {
    let (_, result) = approve_a(Signing::new(Decision::Approved, "worked-a"));
    let verdict = verify(
        &policy(),
        &kit::payment_action("account-B"),
        &result,
        &alice_registry(),
    );
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert!(matches!(
        evidence_error(&verdict),
        EvidenceError::ActionMismatch { .. }
    ));
    assert!(verdict.approvers.is_empty(), "nobody approved account B");
}

#[test]
fn the_decision_is_read_from_the_signature_not_the_field_beside_it() {
    let action = kit::payment_action("account-A");
    let signing = Signing::new(Decision::Denied, "flip");
    let mut entry = kit::evidence(&alice(), &action, &signing);
    // An attacker relabels a signed refusal as an approval, op_hash field included.
    entry.decision = Decision::Approved;
    let result = kit::result(ApprovalStatus::Approved, [entry]);
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert_eq!(
        evidence_error(&verdict),
        &EvidenceError::DecisionMismatch {
            claimed: "APPROVED",
            signed: "DENIED"
        }
    );
}

#[test]
fn a_refusal_verifies_as_deny_approver_refused_with_the_approver() {
    let action = kit::payment_action("account-A");
    let entry = kit::evidence(&alice(), &action, &Signing::new(Decision::Denied, "refuse"));
    let result = kit::result(ApprovalStatus::Denied, [entry]);
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::ApproverRefused);
    assert_eq!(verdict.decision, ApprovalStatus::Denied);
    assert_eq!(verdict.approvers[0].principal, "alice@example.com");
    assert_eq!(verdict.approvers[0].decision, Decision::Denied);
    assert_eq!(verdict.identity_assurance.source, AssuranceSource::Evidence);
}

#[test]
fn a_signed_refusal_under_an_approved_status_is_still_a_refusal() {
    let action = kit::payment_action("account-A");
    let entry = kit::evidence(&alice(), &action, &Signing::new(Decision::Denied, "refuse"));
    let result = kit::result(ApprovalStatus::Approved, [entry]);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::ApproverRefused,
    );
}

#[test]
fn a_denied_status_over_a_signed_approval_is_a_contradiction() {
    let action = kit::payment_action("account-A");
    let entry = kit::evidence(
        &alice(),
        &action,
        &Signing::new(Decision::Approved, "contra"),
    );
    let result = kit::result(ApprovalStatus::Denied, [entry]);
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert!(matches!(
        verdict.error,
        Some(VerifyError::StatusContradictsEvidence { .. })
    ));
}

// ---- results without evidence -------------------------------------------------------------------

#[test]
fn approved_without_evidence_is_denied_when_evidence_is_required_and_allowed_otherwise() {
    let action = kit::payment_action("account-A");
    let bare = ApprovalResult::from_json(br#""APPROVED""#).unwrap();
    assert_deny(
        &verify(&policy(), &action, &bare, &alice_registry()),
        ReasonCode::EvidenceMissing,
    );

    let lax = Policy {
        require_evidence: false,
        ..policy()
    };
    let declared = ApprovalResult {
        identity_assurance: Some(json!("AAL3")),
        ..bare
    };
    let verdict = verify(&lax, &action, &declared, &alice_registry());
    assert_allow(&verdict);
    assert_eq!(verdict.identity_assurance.level, AssuranceLevel::Declared);
    assert_eq!(
        verdict.identity_assurance.declared_value,
        Some(json!("AAL3"))
    );
}

#[test]
fn pending_is_never_permission() {
    let action = kit::payment_action("account-A");
    let result =
        ApprovalResult::from_json(br#"{"status":"PENDING","approval_id":"apr_1"}"#).unwrap();
    let lax = Policy {
        require_evidence: false,
        ..policy()
    };
    let verdict = verify(&lax, &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::Pending);
    assert_eq!(verdict.decision, ApprovalStatus::Pending);
}

#[test]
fn denied_without_evidence_keeps_known_transport_reasons_only() {
    let action = kit::payment_action("account-A");
    for (reason, expected) in [
        ("expired_unanswered", ReasonCode::ExpiredUnanswered),
        ("no_eligible_approver", ReasonCode::NoEligibleApprover),
        ("callback_timeout", ReasonCode::CallbackTimeout),
        ("cancelled", ReasonCode::Cancelled),
        ("signature_invalid", ReasonCode::ApproverRefused),
        ("made_up", ReasonCode::ApproverRefused),
    ] {
        let result =
            ApprovalResult::from_value(&json!({"status": "DENIED", "reason_code": reason}))
                .unwrap();
        assert_deny(
            &verify(&policy(), &action, &result, &alice_registry()),
            expected,
        );
    }
}

// ---- assurance ------------------------------------------------------------------------------------

#[test]
fn a_transport_asserted_assurance_is_ignored_when_evidence_verifies() {
    let signing = Signing {
        request: countersign_softkey::AssertionRequest::from(countersign_softkey::Ceremony {
            flags: Flags {
                up: true,
                ..Flags::NONE
            },
            ..Signing::new(Decision::Approved, "x").request.ceremony
        }),
        ..Signing::new(Decision::Approved, "ignored-claim")
    };
    let (action, mut result) = approve_a(signing);
    result.identity_assurance = Some(json!({"level": "AAL3"}));
    let no_uv = Policy {
        require_user_verification: false,
        ..policy()
    };
    let verdict = verify(&no_uv, &action, &result, &alice_registry());
    assert_allow(&verdict);
    assert_eq!(
        verdict.identity_assurance.level,
        AssuranceLevel::Aal1,
        "UP only is AAL1 whatever the transport says"
    );
    assert_eq!(verdict.identity_assurance.declared_value, None);
    let text = serde_json::to_string(&verdict).unwrap();
    assert!(
        !text.contains("AAL3"),
        "the transport claim must not be echoed: {text}"
    );
}

fn attested(mut record: CredentialRecord) -> CredentialRecord {
    record.aaguid = Aaguid::parse("adce0002-35bc-c60a-648b-0b25f1f05503");
    record.backup_eligible = Some(false);
    record.attestation = Some(AttestationRecord {
        format: "packed".into(),
        chain_verified: true,
        root: Some("fixture root".into()),
    });
    record
}

fn with_flags(flags: Flags, label: &str) -> Signing {
    let base = Signing::new(Decision::Approved, label);
    Signing {
        request: countersign_softkey::AssertionRequest::from(countersign_softkey::Ceremony {
            flags,
            ..base.request.ceremony.clone()
        }),
        ..base
    }
}

#[test]
fn aal3_needs_uv_device_binding_verified_attestation_and_an_allowed_aaguid() {
    let registry = registry_of(vec![attested(kit::enroll(&alice(), "alice@example.com"))]);
    let strict = Policy {
        min_assurance: Some(AssuranceLevel::Aal3),
        ..policy()
    };
    let (action, result) = approve_a(with_flags(Flags::UP_UV, "aal3"));
    let verdict = verify(&strict, &action, &result, &registry);
    assert_allow(&verdict);
    assert_eq!(verdict.identity_assurance.level, AssuranceLevel::Aal3);

    // The AAGUID allowlist excludes this model: AAL2 only.
    let other_model = Policy {
        aal3_aaguids: Aaguid::parse("00000000-0000-0000-0000-000000000001").map(|a| vec![a]),
        ..strict.clone()
    };
    assert_deny(
        &verify(&other_model, &action, &result, &registry),
        ReasonCode::InsufficientAssurance,
    );

    // Without verified attestation the same assertion is AAL2.
    let verdict = verify(&strict, &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::InsufficientAssurance);
    assert_eq!(verdict.identity_assurance.level, AssuranceLevel::Aal2);
}

#[test]
fn backup_flags_decide_between_aal2_and_aal3_and_bs_without_be_is_malformed() {
    let mut record = attested(kit::enroll(&alice(), "alice@example.com"));
    record.backup_eligible = Some(true);
    let registry = registry_of(vec![record]);
    let be = Flags {
        be: true,
        ..Flags::UP_UV
    };
    let bs = Flags {
        be: true,
        bs: true,
        ..Flags::UP_UV
    };
    for flags in [be, bs] {
        let (action, result) = approve_a(with_flags(flags, "synced"));
        let verdict = verify(&policy(), &action, &result, &registry);
        assert_allow(&verdict);
        assert_eq!(
            verdict.identity_assurance.level,
            AssuranceLevel::Aal2,
            "a synced passkey is at most AAL2"
        );
    }
    let (action, result) = approve_a(with_flags(
        Flags {
            bs: true,
            ..Flags::UP_UV
        },
        "bs-only",
    ));
    assert_deny(
        &verify(&policy(), &action, &result, &registry),
        ReasonCode::EvidenceMalformed,
    );
}

#[test]
fn backup_eligibility_must_match_enrollment() {
    let registry = registry_of(vec![attested(kit::enroll(&alice(), "alice@example.com"))]);
    let (action, result) = approve_a(with_flags(
        Flags {
            be: true,
            ..Flags::UP_UV
        },
        "be-mismatch",
    ));
    assert_deny(
        &verify(&policy(), &action, &result, &registry),
        ReasonCode::BackupEligibilityMismatch,
    );
}

// ---- per-entry checks -----------------------------------------------------------------------------

fn mutate_entry(f: impl FnOnce(&mut EvidenceEntry)) -> Verdict {
    let action = kit::payment_action("account-A");
    let mut entry = kit::evidence(
        &alice(),
        &action,
        &Signing::new(Decision::Approved, "mutate"),
    );
    f(&mut entry);
    verify(
        &policy(),
        &action,
        &kit::result(ApprovalStatus::Approved, [entry]),
        &alice_registry(),
    )
}

#[test]
fn an_undecodable_entry_is_evidence_malformed() {
    let action = kit::payment_action("account-A");
    let result = ApprovalResult::from_value(&json!({
        "status": "APPROVED",
        "approver_evidence": [{"format": "webauthn.assertion/1", "signature": "not base64url!"}],
    }))
    .unwrap();
    assert!(matches!(
        result.approver_evidence[0],
        EvidenceSlot::Malformed { .. }
    ));
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::EvidenceMalformed,
    );
    assert_deny(
        &mutate_entry(|e| e.nonce.truncate(31)),
        ReasonCode::EvidenceMalformed,
    );
    assert_deny(
        &mutate_entry(|e| e.assertion_at = "yesterday".into()),
        ReasonCode::EvidenceMalformed,
    );
}

#[test]
fn format_and_profile_are_checked_before_anything_else() {
    assert_deny(
        &mutate_entry(|e| e.format = "webauthn.assertion/2".into()),
        ReasonCode::UnsupportedFormat,
    );
    assert_deny(
        &mutate_entry(|e| e.canonicalization_profile = "acme.payment/9".into()),
        ReasonCode::ProfileUnknown,
    );
    let verdict = mutate_entry(|e| e.canonicalization_profile = "countersign.tool-call/1".into());
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert!(matches!(
        evidence_error(&verdict),
        EvidenceError::ProfileMismatch { .. }
    ));
}

#[test]
fn an_action_under_an_unknown_profile_or_inadmissible_fields_is_denied() {
    let (_, result) = approve_a(Signing::new(Decision::Approved, "p"));
    let unknown = Action::new(
        "acme.payment/9",
        kit::payment_fields("account-A").to_string(),
    );
    assert_deny(
        &verify(&policy(), &unknown, &result, &alice_registry()),
        ReasonCode::ProfileUnknown,
    );
    let duplicate = Action::new(
        "countersign.payment/1",
        r#"{"amount":"40000.00","amount":"1.00","currency":"EUR","source_account":"ops-main","destination_account":"account-A","reference":"INV-2291"}"#,
    );
    assert_deny(
        &verify(&policy(), &duplicate, &result, &alice_registry()),
        ReasonCode::ActionInadmissible,
    );
}

#[test]
fn keys_come_from_the_registry_only() {
    let bob = kit::key("bob-es256");
    let action = kit::payment_action("account-A");
    // Bob signs, but only Alice is enrolled.
    let entry = kit::evidence(&bob, &action, &Signing::new(Decision::Approved, "bob"));
    let result = kit::result(ApprovalStatus::Approved, [entry.clone()]);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::CredentialUnknown,
    );
    // Bob's signature presented under Alice's credential id does not verify under Alice's key.
    let mut stolen_name = entry;
    stolen_name.credential_id = alice().credential_id().to_vec();
    let result = kit::result(ApprovalStatus::Approved, [stolen_name]);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::SignatureInvalid,
    );
}

#[test]
fn a_revoked_credential_is_refused() {
    let mut record = kit::enroll(&alice(), "alice@example.com");
    record.revoked = true;
    let (action, result) = approve_a(Signing::new(Decision::Approved, "revoked"));
    assert_deny(
        &verify(&policy(), &action, &result, &registry_of(vec![record])),
        ReasonCode::CredentialRevoked,
    );
}

#[test]
fn nonce_and_op_hash_beside_the_signature_must_match_the_signed_challenge() {
    let verdict = mutate_entry(|e| e.nonce[0] ^= 1);
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert_eq!(evidence_error(&verdict), &EvidenceError::NonceMismatch);
    let verdict = mutate_entry(|e| e.op_hash[31] ^= 1);
    assert_eq!(
        evidence_error(&verdict),
        &EvidenceError::OpHashFieldMismatch
    );
}

#[test]
fn a_challenge_of_the_wrong_shape_is_a_binding_mismatch() {
    let action = kit::payment_action("account-A");
    let mut signing = Signing::new(Decision::Approved, "short");
    signing.keep_challenge = true;
    signing.request.ceremony.challenge = kit::nonce("short").to_vec();
    let entry = kit::evidence(&alice(), &action, &signing);
    let verdict = verify(
        &policy(),
        &action,
        &kit::result(ApprovalStatus::Approved, [entry]),
        &alice_registry(),
    );
    assert_eq!(
        evidence_error(&verdict),
        &EvidenceError::ChallengeLength { got: 32 }
    );
}

#[test]
fn origin_rp_presence_and_verification_are_enforced() {
    let other_origin = Signing {
        request: countersign_softkey::AssertionRequest::from(countersign_softkey::Ceremony {
            origin: "https://pay.example.com.evil.test".into(),
            ..Signing::new(Decision::Approved, "o").request.ceremony
        }),
        ..Signing::new(Decision::Approved, "origin")
    };
    let (action, result) = approve_a(other_origin);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::OriginMismatch,
    );

    let other_rp = Signing {
        request: countersign_softkey::AssertionRequest::from(countersign_softkey::Ceremony {
            rp_id: "example.com".into(),
            ..Signing::new(Decision::Approved, "r").request.ceremony
        }),
        ..Signing::new(Decision::Approved, "rp")
    };
    let (action, result) = approve_a(other_rp);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::RpMismatch,
    );

    let (action, result) = approve_a(with_flags(
        Flags {
            up: false,
            ..Flags::UP_UV
        },
        "no-up",
    ));
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::UserNotPresent,
    );

    let (action, result) = approve_a(with_flags(
        Flags {
            up: true,
            ..Flags::NONE
        },
        "no-uv",
    ));
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::UserNotVerified,
    );
    let no_uv = Policy {
        require_user_verification: false,
        ..policy()
    };
    assert_allow(&verify(&no_uv, &action, &result, &alice_registry()));
}

#[test]
fn cross_origin_assertions_need_policy_consent() {
    let mut signing = Signing::new(Decision::Approved, "xo");
    signing.request.ceremony.cross_origin = Some(true);
    let (action, result) = approve_a(signing);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::OriginMismatch,
    );
    let allow = Policy {
        allow_cross_origin: true,
        ..policy()
    };
    assert_allow(&verify(&allow, &action, &result, &alice_registry()));
}

#[test]
fn any_one_bit_change_of_signed_bytes_is_refused() {
    let action = kit::payment_action("account-A");
    let signing = Signing::new(Decision::Approved, "bits");
    for (part, bit) in [
        (Part::Signature, 77),
        (Part::AuthenticatorData, 200),
        (Part::ClientDataJson, 20),
    ] {
        let mut response = kit::assert(&alice(), &action, &signing);
        response.flip_bit(part, bit).unwrap();
        let result = kit::result(
            ApprovalStatus::Approved,
            [kit::entry(&response, &action, &signing)],
        );
        let verdict = verify(&policy(), &action, &result, &alice_registry());
        assert_eq!(
            verdict.effective,
            Effect::Deny,
            "{part:?} bit {bit}: {verdict:?}"
        );
    }
}

#[test]
fn the_signature_counter_may_not_go_backwards_but_zero_is_legal() {
    let mut record = kit::enroll(&alice(), "alice@example.com");
    record.sign_count = 5;
    let registry = registry_of(vec![record]);
    let mut signing = Signing::new(Decision::Approved, "counter");
    signing.request.ceremony.sign_count = 5;
    let (action, result) = approve_a(signing.clone());
    assert_deny(
        &verify(&policy(), &action, &result, &registry),
        ReasonCode::CounterRegression,
    );
    signing.request.ceremony.sign_count = 6;
    let (action, result) = approve_a(signing.clone());
    assert_allow(&verify(&policy(), &action, &result, &registry));
    // A credential that never counts (synced passkeys, Apple) stays at zero.
    signing.request.ceremony.sign_count = 0;
    let (action, result) = approve_a(signing);
    assert_allow(&verify(&policy(), &action, &result, &alice_registry()));
}

// ---- replay and freshness -------------------------------------------------------------------------

#[test]
fn a_nonce_is_spent_once_across_verifications_and_within_one_result() {
    let (action, result) = approve_a(Signing::new(Decision::Approved, "once"));
    let registry = alice_registry();
    let mut replay = MemoryReplayState::new();
    let backend = countersign::webauthn::default_backend();
    let first = verify_evidence_with(
        backend,
        &policy(),
        &action,
        &result,
        &registry,
        &mut replay,
        now(),
    );
    assert_allow(&first);
    let again = verify_evidence_with(
        backend,
        &policy(),
        &action,
        &result,
        &registry,
        &mut replay,
        now(),
    );
    assert_deny(&again, ReasonCode::Replayed);

    let entry = kit::evidence(
        &alice(),
        &action,
        &Signing::new(Decision::Approved, "twice"),
    );
    let doubled = kit::result(ApprovalStatus::Approved, [entry.clone(), entry]);
    assert_deny(
        &verify(&policy(), &action, &doubled, &registry),
        ReasonCode::Replayed,
    );
}

#[test]
fn a_rejected_record_burns_no_nonce() {
    let (_, result) = approve_a(Signing::new(Decision::Approved, "burn"));
    let mut replay = MemoryReplayState::new();
    let backend = countersign::webauthn::default_backend();
    let wrong = kit::payment_action("account-B");
    let denied = verify_evidence_with(
        backend,
        &policy(),
        &wrong,
        &result,
        &alice_registry(),
        &mut replay,
        now(),
    );
    assert_deny(&denied, ReasonCode::BindingMismatch);
    assert_eq!(replay.spent_count(), 0);
    assert!(!replay.is_spent(&kit::nonce("burn")));
}

#[test]
fn stale_and_future_dated_assertions_are_refused() {
    let mut signing = Signing::new(Decision::Approved, "old");
    signing.assertion_at = "2026-11-20T09:54:59Z".into(); // 301 s before NOW
    let (action, result) = approve_a(signing.clone());
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::Stale,
    );
    signing.assertion_at = "2026-11-20T09:55:00Z".into(); // exactly 300 s: still fresh
    let (action, result) = approve_a(signing.clone());
    assert_allow(&verify(&policy(), &action, &result, &alice_registry()));
    signing.assertion_at = "2026-11-20T10:01:01Z".into(); // 61 s in the future
    let (action, result) = approve_a(signing);
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::Stale,
    );
}

#[test]
fn offline_audit_reports_replay_and_staleness_instead_of_enforcing() {
    let mut signing = Signing::new(Decision::Approved, "audit");
    signing.assertion_at = "2025-01-01T00:00:00Z".into();
    let (action, result) = approve_a(signing);
    let mut audit = OfflineAudit::new();
    let backend = countersign::webauthn::default_backend();
    let verdict = verify_evidence_with(
        backend,
        &policy(),
        &action,
        &result,
        &alice_registry(),
        &mut audit,
        now(),
    );
    assert_allow(&verdict);
    assert_eq!(verdict.replay, "report_only");
    assert_eq!(verdict.findings.len(), 1);
    assert_eq!(verdict.findings[0].reason_code, ReasonCode::Stale);
    let again = verify_evidence_with(
        backend,
        &policy(),
        &action,
        &result,
        &alice_registry(),
        &mut audit,
        now(),
    );
    assert_allow(&again);
    assert!(
        again
            .findings
            .iter()
            .any(|f| f.reason_code == ReasonCode::Replayed)
    );
    // A signature problem is never merely reported.
    let wrong = kit::payment_action("account-B");
    let denied = verify_evidence_with(
        backend,
        &policy(),
        &wrong,
        &result,
        &alice_registry(),
        &mut audit,
        now(),
    );
    assert_deny(&denied, ReasonCode::BindingMismatch);
}

// ---- quorum ---------------------------------------------------------------------------------------

#[test]
fn quorum_counts_distinct_principals() {
    let bob = kit::key("bob-eddsa");
    let registry = registry_of(vec![
        kit::enroll(&alice(), "alice@example.com"),
        kit::enroll(&bob, "bob@example.com"),
    ]);
    let action = kit::payment_action("account-A");
    let two = Policy {
        quorum: 2,
        ..policy()
    };
    let a = kit::evidence(&alice(), &action, &Signing::new(Decision::Approved, "q-a"));
    let b = kit::evidence(&bob, &action, &Signing::new(Decision::Approved, "q-b"));
    let verdict = verify(
        &two,
        &action,
        &kit::result(ApprovalStatus::Approved, [a.clone(), b]),
        &registry,
    );
    assert_allow(&verdict);
    assert_eq!(verdict.approvers.len(), 2);

    let a2 = kit::evidence(&alice(), &action, &Signing::new(Decision::Approved, "q-a2"));
    let verdict = verify(
        &two,
        &action,
        &kit::result(ApprovalStatus::Approved, [a.clone(), a2]),
        &registry,
    );
    assert_deny(&verdict, ReasonCode::QuorumNotMet);
    assert_eq!(
        verdict.error,
        Some(VerifyError::QuorumNotMet {
            required: 2,
            got: 1
        })
    );

    // A refusal by either approver vetoes.
    let b_refuses = kit::evidence(&bob, &action, &Signing::new(Decision::Denied, "q-b-no"));
    let verdict = verify(
        &two,
        &action,
        &kit::result(ApprovalStatus::Approved, [a, b_refuses]),
        &registry,
    );
    assert_deny(&verdict, ReasonCode::ApproverRefused);
}

#[test]
fn a_quorum_of_zero_still_needs_one_approver() {
    let zero = Policy {
        quorum: 0,
        ..policy()
    };
    // Quorum 0 does not waive evidence: a bare APPROVED still has no approver behind it.
    let bare = ApprovalResult::from_json(br#""APPROVED""#).unwrap();
    assert_deny(
        &verify(
            &zero,
            &kit::payment_action("account-A"),
            &bare,
            &alice_registry(),
        ),
        ReasonCode::EvidenceMissing,
    );
    // One verified approver satisfies it, and is recorded as the approver.
    let (action, result) = approve_a(Signing::new(Decision::Approved, "zero"));
    let verdict = verify(&zero, &action, &result, &alice_registry());
    assert_allow(&verdict);
    assert_eq!(verdict.approvers.len(), 1);
}

// ---- algorithms -----------------------------------------------------------------------------------

#[test]
fn every_supported_algorithm_verifies_on_every_backend() {
    for name in ["alice-es256", "alice-eddsa", "alice-rs256", "alice-es384"] {
        let key = kit::key(name);
        let action = kit::payment_action("account-A");
        let entry = kit::evidence(&key, &action, &Signing::new(Decision::Approved, name));
        let registry = registry_of(vec![kit::enroll(&key, "alice@example.com")]);
        let verdict = verify(
            &policy(),
            &action,
            &kit::result(ApprovalStatus::Approved, [entry]),
            &registry,
        );
        assert_allow(&verdict);
    }
}

#[test]
fn an_entry_of_another_format_is_unsupported_even_with_other_members() {
    let action = kit::payment_action("account-A");
    let result = ApprovalResult::from_value(&json!({
        "status": "APPROVED",
        "approver_evidence": [{"format": "x509.cosign/1", "certificate": "MIIB", "sig": "AA"}],
    }))
    .unwrap();
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::UnsupportedFormat,
    );
    let no_format = ApprovalResult::from_value(
        &json!({"status": "APPROVED", "approver_evidence": [{"sig": "AA"}]}),
    )
    .unwrap();
    assert_deny(
        &verify(&policy(), &action, &no_format, &alice_registry()),
        ReasonCode::EvidenceMalformed,
    );
}
