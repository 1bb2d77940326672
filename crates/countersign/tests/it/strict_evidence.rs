//! Where the verifier must read evidence exactly as docs/SPEC.md and docs/spec/webauthn.md say:
//! the places a mass-mutation run found code and specification disagreeing (issue 10, §6).

use super::verify::{alice, alice_registry, approve_a, assert_allow, assert_deny, policy, verify};
use countersign::{
    Action, ApprovalResult, ApprovalStatus, Case, CaseError, Decision, EvidenceEntry,
    EvidenceError, ReasonCode, ResultError, Verdict, VerifyError,
};
use countersign_testkit::{self as kit, Signing};
use serde_json::{Value, json};

fn at(assertion_at: &str, label: &str) -> Verdict {
    let mut signing = Signing::new(Decision::Approved, label);
    signing.assertion_at = assertion_at.into();
    let (action, result) = approve_a(signing);
    verify(&policy(), &action, &result, &alice_registry())
}

fn evidence_error(verdict: &Verdict) -> Option<&EvidenceError> {
    match &verdict.error {
        Some(VerifyError::Evidence { error, .. }) => Some(error),
        _ => None,
    }
}

#[test]
fn freshness_compares_exact_durations() {
    // NOW is 10:00:00; the policy allows 300 s of age and 60 s of skew.
    let stale = at("2026-11-20T09:54:59.5Z", "fresh-300.5");
    assert_deny(&stale, ReasonCode::Stale);
    assert_eq!(
        stale.detail.as_deref(),
        Some("evidence[0]: assertion is 300.5s old, the policy allows 300s")
    );
    assert_deny(
        &at("2026-11-20T09:54:59.999999999Z", "fresh-300+1ns"),
        ReasonCode::Stale,
    );
    assert_allow(&at("2026-11-20T09:55:00Z", "fresh-300"));

    let ahead = at("2026-11-20T10:01:00.5Z", "ahead-60.5");
    assert_deny(&ahead, ReasonCode::Stale);
    assert_eq!(
        ahead.detail.as_deref(),
        Some("evidence[0]: assertion is dated 60.5s in the future, beyond the 60s skew")
    );
    assert_allow(&at("2026-11-20T10:01:00Z", "ahead-60"));
}

#[test]
fn an_undecodable_assertion_at_is_malformed_before_signature_work() {
    let mut signing = Signing::new(Decision::Approved, "bad-at");
    signing.assertion_at = "yesterday".into();
    let (action, mut result) = approve_a(signing);
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::EvidenceMalformed);
    // With a flipped signature bit too, the entry is still malformed first.
    if let Some(countersign::EvidenceSlot::Decoded(entry)) = result.approver_evidence.first_mut()
        && let Some(b) = entry.signature.last_mut()
    {
        *b ^= 1;
    }
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::EvidenceMalformed);
    assert_eq!(
        evidence_error(&verdict),
        Some(&EvidenceError::AssertionAtInvalid("yesterday".into()))
    );
}

/// An entry signed over exactly `client_data` (the challenge must be written into it by the
/// caller, see [`challenge_b64`]).
fn signed_over(client_data: &[u8], action: &Action, label: &str) -> EvidenceEntry {
    let mut signing = Signing::new(Decision::Approved, label);
    signing.request.ceremony.client_data_override = Some(client_data.to_vec());
    kit::evidence(&alice(), action, &signing)
}

fn challenge_b64(action: &Action, label: &str) -> String {
    countersign::b64::encode(&kit::challenge(
        &kit::nonce(label),
        action,
        Decision::Approved,
    ))
}

fn verify_client_data(client_data: &[u8], action: &Action, label: &str) -> Verdict {
    let entry = signed_over(client_data, action, label);
    let result = kit::result(ApprovalStatus::Approved, [entry]);
    verify(&policy(), action, &result, &alice_registry())
}

#[test]
fn invalid_utf8_anywhere_in_client_data_is_malformed_even_when_signed() {
    let action = kit::payment_action("account-A");
    let head = format!(
        r#"{{"type":"webauthn.get","challenge":"{}","origin":"{}","crossOrigin":false"#,
        challenge_b64(&action, "utf8"),
        kit::ORIGIN
    );
    let mut good = head.clone().into_bytes();
    good.extend_from_slice(br#","other":"\u00ff"}"#);
    assert_allow(&verify_client_data(&good, &action, "utf8"));

    let mut bad = head.into_bytes();
    bad.extend_from_slice(b",\"other\":\"\xff\"}");
    let verdict = verify_client_data(&bad, &action, "utf8");
    assert_deny(&verdict, ReasonCode::EvidenceMalformed);
}

#[test]
fn null_cross_origin_or_top_origin_is_a_wrong_type() {
    let action = kit::payment_action("account-A");
    let with = |member: &str| {
        format!(
            r#"{{"type":"webauthn.get","challenge":"{}","origin":"{}",{member}}}"#,
            challenge_b64(&action, "null-co"),
            kit::ORIGIN
        )
    };
    assert_allow(&verify_client_data(
        with(r#""crossOrigin":false"#).as_bytes(),
        &action,
        "null-co",
    ));
    for member in [
        r#""crossOrigin":null"#,
        r#""crossOrigin":false,"topOrigin":null"#,
    ] {
        let verdict = verify_client_data(with(member).as_bytes(), &action, "null-co");
        assert_deny(&verdict, ReasonCode::EvidenceMalformed);
    }
}

fn result_json_with(f: impl FnOnce(&mut Value)) -> Vec<u8> {
    let (_, result) = approve_a(Signing::new(Decision::Approved, "envelope"));
    let mut v = kit::result_json(&result);
    f(&mut v);
    v.to_string().into_bytes()
}

fn verify_json(result: &[u8]) -> Verdict {
    let action = kit::payment_action("account-A");
    let result = ApprovalResult::from_json(result).unwrap();
    verify(&policy(), &action, &result, &alice_registry())
}

#[test]
fn aaguid_and_attestation_ref_are_type_checked() {
    assert_allow(&verify_json(&result_json_with(|v| {
        v["approver_evidence"][0]["aaguid"] = json!("adce0002-35bc-c60a-648b-0b25f1f05503");
        v["approver_evidence"][0]["attestation_ref"] = json!("att_1");
    })));
    assert_allow(&verify_json(&result_json_with(|v| {
        v["approver_evidence"][0]["attestation_ref"] = Value::Null;
    })));
    for (member, value) in [
        ("aaguid", json!(null)),
        ("aaguid", json!("alice")),
        ("aaguid", json!(16)),
        ("attestation_ref", json!(1)),
        ("attestation_ref", json!(["x"])),
    ] {
        let verdict = verify_json(&result_json_with(|v| {
            v["approver_evidence"][0][member] = value.clone();
        }));
        assert_deny(&verdict, ReasonCode::EvidenceMalformed);
    }
}

#[test]
fn null_evidence_and_duplicate_members_make_the_result_unusable() {
    let null = result_json_with(|v| v["approver_evidence"] = Value::Null);
    assert!(matches!(
        ApprovalResult::from_json(&null),
        Err(ResultError::InvalidField {
            field: "approver_evidence",
            ..
        })
    ));
    let text = String::from_utf8(result_json_with(|_| {})).unwrap();
    // A second status after the first; then a second decision inside the entry.
    let dup_status = text.replacen('{', r#"{"status":"DENIED","#, 1);
    assert!(matches!(
        ApprovalResult::from_json(dup_status.as_bytes()),
        Err(ResultError::Inadmissible(_))
    ));
    let dup_decision = text.replacen(
        r#""decision":"APPROVED""#,
        r#""decision":"DENIED","decision":"APPROVED""#,
        1,
    );
    assert_ne!(dup_decision, text);
    assert!(matches!(
        ApprovalResult::from_json(dup_decision.as_bytes()),
        Err(ResultError::Inadmissible(_))
    ));

    // In a CASE, either is unusable (the CLI's exit 2).
    let action = kit::payment_action("account-A");
    let case = |result: &str| {
        let result: &serde_json::value::RawValue = serde_json::from_str(result).unwrap();
        let mut v = kit::case_json(
            &action,
            &Value::Null,
            &kit::registry(vec![kit::enroll(&alice(), "alice@example.com")]),
            &kit::policy_json(),
            kit::NOW,
        )
        .to_string();
        v = v.replace(r#""result":null"#, &format!(r#""result":{}"#, result.get()));
        Case::from_json(v.as_bytes())
    };
    assert!(case(&text).is_ok());
    assert!(matches!(case(&dup_status), Err(CaseError::Result(_))));
    assert!(matches!(
        case(std::str::from_utf8(&null).unwrap()),
        Err(CaseError::Result(_))
    ));
}
