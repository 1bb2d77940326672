//! The policy rules that decide what the evidence may authorize: NFC admission, operation binding,
//! offline eligibility and contradictory policies (docs/SPEC.md §6 steps 3 and 4.4, §8).

use super::verify::{
    alice, alice_registry, assert_allow, assert_deny, evidence_error, policy, registry_of, verify,
};
use countersign::AssuranceLevel;
use countersign::{
    Action, ApprovalResult, ApprovalStatus, CanonError, Case, CaseError, Decision, EvidenceError,
    NfcMode, NonNfc, Policy, PolicyError, ProfileRegistry, ReasonCode, VerifyError, admit_fields,
    admit_fields_with, nfc_changes,
};
use countersign_testkit::{self as kit, Signing};
use serde_json::{Value, json};
use std::collections::BTreeMap;

const PAYMENT: &str = "countersign.payment/1";
const TOOL_CALL: &str = "countersign.tool-call/1";

fn approved(action: &Action, label: &str) -> ApprovalResult {
    let entry = kit::evidence(&alice(), action, &Signing::new(Decision::Approved, label));
    kit::result(ApprovalStatus::Approved, [entry])
}

fn tool_call(params: Value) -> Action {
    kit::tool_call_action("agent-7", "accounts.lookup", params)
}

fn normalizing() -> Policy {
    Policy {
        nfc: NfcMode::Normalize,
        ..policy()
    }
}

fn not_nfc(verdict: &countersign::Verdict) -> Option<&NonNfc> {
    match &verdict.error {
        Some(VerifyError::Action(CanonError::NotNfc(n))) => Some(n),
        _ => None,
    }
}

// ---- NFC admission ----------------------------------------------------------------------------

#[test]
fn a_non_nfc_value_is_refused_by_default_and_admitted_when_the_policy_normalizes() {
    // KELVIN SIGN: shown as "Kevin" once normalized, but a downstream system that does not
    // normalize reads another account.
    let action = tool_call(json!({"user": "\u{212A}evin"}));
    let result = approved(&action, "nfc-kelvin");
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert_eq!(
        not_nfc(&verdict),
        Some(&NonNfc {
            path: "/params/user".into(),
            code_points: vec!['\u{212A}'],
        })
    );
    assert_eq!(
        verdict.detail.as_deref(),
        Some(
            "the action is not admissible under its profile: string at /params/user is not in NFC (U+212A)"
        )
    );
    assert_allow(&verify(&normalizing(), &action, &result, &alice_registry()));
}

#[test]
fn nfc_text_is_admitted_under_require() {
    let action = tool_call(json!({"user": "Kevin", "caf\u{e9}": "\u{3a9}hm"}));
    let result = approved(&action, "nfc-plain");
    assert_allow(&verify(&policy(), &action, &result, &alice_registry()));
}

#[test]
fn a_non_nfc_key_is_refused_and_named_as_submitted() {
    let action = tool_call(json!({"\u{2126}": "10"}));
    let result = approved(&action, "nfc-ohm-key");
    let verdict = verify(&policy(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert_eq!(
        not_nfc(&verdict).map(|n| (n.path.as_str(), n.code_points.clone())),
        Some(("/params/\u{2126}", vec!['\u{2126}']))
    );
    assert_allow(&verify(&normalizing(), &action, &result, &alice_registry()));
}

#[test]
fn admit_fields_keeps_normalizing_and_admit_fields_with_require_refuses() {
    let registry = ProfileRegistry::builtin();
    let profile = registry.get(TOOL_CALL).unwrap();
    let raw = br#"{"agent_id":"a","tool_name":"t","params":{"q":"why\u037E","k":"\uF900"}}"#;
    assert!(admit_fields(profile, raw).is_ok());
    assert!(admit_fields_with(profile, raw, NfcMode::Normalize).is_ok());
    assert_eq!(
        admit_fields_with(profile, raw, NfcMode::Require),
        Err(CanonError::NotNfc(NonNfc {
            path: "/params/k".into(),
            code_points: vec!['\u{F900}'],
        }))
    );
    assert_eq!(
        CanonError::NotNfc(NonNfc {
            path: "/x".into(),
            code_points: vec![]
        })
        .reason_code(),
        ReasonCode::ActionInadmissible
    );
    let nfc = br#"{"agent_id":"a","tool_name":"t","params":{"q":"why;"}}"#;
    assert!(admit_fields_with(profile, nfc, NfcMode::Require).is_ok());
}

#[test]
fn nfc_changes_lists_every_string_and_refuses_what_normalizing_cannot_admit() {
    let registry = ProfileRegistry::builtin();
    let profile = registry.get(TOOL_CALL).unwrap();
    let raw = "{\"agent_id\":\"a\",\"tool_name\":\"t\",\"params\":{\"\u{212A}\":\"\u{2126}\u{2126}x\u{2126}\",\"n\":[\"ok\",\"\u{37E}\"]}}";
    let changes = nfc_changes(profile, raw.as_bytes()).unwrap();
    assert_eq!(
        changes,
        // Keys in code point order ("n" before U+212A), as the admitted object holds them.
        vec![
            NonNfc {
                path: "/params/n/1".into(),
                code_points: vec!['\u{37E}']
            },
            NonNfc {
                path: "/params/\u{212A}".into(),
                code_points: vec!['\u{212A}']
            },
            NonNfc {
                path: "/params/\u{212A}".into(),
                code_points: vec!['\u{2126}']
            },
        ]
    );
    let clean = br#"{"agent_id":"a","tool_name":"t","params":{}}"#;
    assert_eq!(nfc_changes(profile, clean), Ok(vec![]));
    // Two keys equal after NFC are inadmissible in either mode.
    let clash = "{\"agent_id\":\"a\",\"tool_name\":\"t\",\"params\":{\"K\":1,\"\u{212A}\":2}}";
    assert!(matches!(
        nfc_changes(profile, clash.as_bytes()),
        Err(CanonError::NfcKeyCollision { .. })
    ));
}

// ---- operation binding ------------------------------------------------------------------------

fn bound_payments() -> Policy {
    Policy {
        profile_tools: BTreeMap::from([(PAYMENT.to_owned(), "payments.transfer".to_owned())]),
        ..policy()
    }
}

#[test]
fn a_profile_that_signs_its_operation_must_name_the_tool_that_runs() {
    let action = kit::tool_call_action("agent-7", "payments.transfer", json!({"to": "A"}));
    let result = approved(&action, "op-tool-call");
    let same = action.clone().with_tool("payments.transfer");
    assert_allow(&verify(&policy(), &same, &result, &alice_registry()));
    // No tool named: the signed tool_name is what the gateway runs.
    assert_allow(&verify(&policy(), &action, &result, &alice_registry()));

    let other = action.with_tool("payments.transfer.v2");
    let verdict = verify(&policy(), &other, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::BindingMismatch);
    assert_eq!(
        verdict.error,
        Some(VerifyError::OperationMismatch {
            tool: "payments.transfer.v2".into(),
            signed: "payments.transfer".into(),
        })
    );
}

#[test]
fn a_typed_profile_is_usable_only_by_the_tool_bound_to_it() {
    let action = kit::payment_action("account-A");
    let result = approved(&action, "op-payment");
    let registry = alice_registry();
    assert_allow(&verify(
        &bound_payments(),
        &action.clone().with_tool("payments.transfer"),
        &result,
        &registry,
    ));

    let verdict = verify(
        &bound_payments(),
        &action.clone().with_tool("payments.transfer.v2"),
        &result,
        &registry,
    );
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert_eq!(
        verdict.error,
        Some(VerifyError::OperationNotBound {
            profile: PAYMENT.into(),
            tool: "payments.transfer.v2".into(),
            bound: Some("payments.transfer".into()),
        })
    );

    // Unbound profile, tool named: nothing says this tool may use the payment profile.
    let verdict = verify(
        &policy(),
        &action.clone().with_tool("payments.transfer"),
        &result,
        &registry,
    );
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert!(matches!(
        verdict.error,
        Some(VerifyError::OperationNotBound { bound: None, .. })
    ));
}

#[test]
fn an_action_without_a_tool_is_refused_only_when_its_profile_is_bound() {
    let action = kit::payment_action("account-A");
    let result = approved(&action, "op-unnamed");
    let verdict = verify(&bound_payments(), &action, &result, &alice_registry());
    assert_deny(&verdict, ReasonCode::ActionInadmissible);
    assert_eq!(
        verdict.error,
        Some(VerifyError::OperationUnnamed {
            profile: PAYMENT.into(),
            bound: "payments.transfer".into(),
        })
    );
    // A single-purpose verifier: no tool, no binding.
    assert_allow(&verify(&policy(), &action, &result, &alice_registry()));
}

#[test]
fn check_operation_is_the_same_rule_for_the_service() {
    let registry = ProfileRegistry::builtin();
    let payment = registry.get(PAYMENT).unwrap();
    let tool = registry.get(TOOL_CALL).unwrap();
    let pay = kit::payment_action("account-A");
    assert_eq!(
        bound_payments().check_operation(&pay.clone().with_tool("payments.transfer"), payment),
        Ok(())
    );
    assert!(
        bound_payments()
            .check_operation(&pay.with_tool("refunds.issue"), payment)
            .is_err()
    );
    let call = kit::tool_call_action("a", "t", json!({}));
    assert_eq!(
        policy().check_operation(&call.clone().with_tool("t"), tool),
        Ok(())
    );
    assert_eq!(
        policy()
            .check_operation(&call.with_tool("u"), tool)
            .map_err(|e| e.reason_code()),
        Err(ReasonCode::BindingMismatch)
    );
    // The signed tool_name is read from admitted fields: inadmissible fields are an Action error.
    let bad = Action::new(
        TOOL_CALL,
        "{\"agent_id\":\"a\",\"tool_name\":\"\u{212A}\",\"params\":{}}",
    )
    .with_tool("K");
    assert!(matches!(
        policy().check_operation(&bad, tool),
        Err(VerifyError::Action(CanonError::NotNfc(_)))
    ));
}

// ---- offline eligibility ------------------------------------------------------------------------

fn only(principals: &[&str]) -> Policy {
    Policy {
        approvers: Some(principals.iter().map(|p| (*p).to_owned()).collect()),
        ..policy()
    }
}

#[test]
fn evidence_from_an_eligible_principal_verifies() {
    let action = kit::payment_action("account-A");
    let result = approved(&action, "elig-ok");
    assert_allow(&verify(
        &only(&["bob@example.com", "alice@example.com"]),
        &action,
        &result,
        &alice_registry(),
    ));
}

#[test]
fn an_approval_or_refusal_from_another_principal_is_approver_ineligible() {
    let bob = kit::key("bob-eddsa");
    let registry = registry_of(vec![
        kit::enroll(&alice(), "alice@example.com"),
        kit::enroll(&bob, "bob@example.com"),
    ]);
    let action = kit::payment_action("account-A");
    let finance = only(&["alice@example.com"]);
    let by_bob = kit::evidence(&bob, &action, &Signing::new(Decision::Approved, "elig-bob"));
    let verdict = verify(
        &finance,
        &action,
        &kit::result(ApprovalStatus::Approved, [by_bob]),
        &registry,
    );
    assert_deny(&verdict, ReasonCode::ApproverIneligible);
    assert!(matches!(
        evidence_error(&verdict),
        EvidenceError::Ineligible { principal, .. } if principal == "bob@example.com"
    ));

    let bob_refuses = kit::evidence(
        &bob,
        &action,
        &Signing::new(Decision::Denied, "elig-bob-no"),
    );
    let verdict = verify(
        &finance,
        &action,
        &kit::result(ApprovalStatus::Denied, [bob_refuses]),
        &registry,
    );
    assert_deny(&verdict, ReasonCode::ApproverIneligible);
    assert!(verdict.approvers.is_empty());
}

#[test]
fn eligibility_is_checked_before_signature_work() {
    let action = kit::payment_action("account-A");
    let mut entry = kit::evidence(
        &alice(),
        &action,
        &Signing::new(Decision::Approved, "elig-sig"),
    );
    if let Some(b) = entry.signature.last_mut() {
        *b ^= 1;
    }
    let result = kit::result(ApprovalStatus::Approved, [entry]);
    assert_deny(
        &verify(
            &only(&["bob@example.com"]),
            &action,
            &result,
            &alice_registry(),
        ),
        ReasonCode::ApproverIneligible,
    );
    assert_deny(
        &verify(&policy(), &action, &result, &alice_registry()),
        ReasonCode::SignatureInvalid,
    );
}

// ---- contradictory policies ---------------------------------------------------------------------

#[test]
fn contradictory_policies_are_refused_by_validate() {
    let lax = Policy {
        require_evidence: false,
        ..policy()
    };
    assert_eq!(lax.validate(), Ok(()));
    assert_eq!(
        Policy {
            min_assurance: Some(AssuranceLevel::Declared),
            ..lax.clone()
        }
        .validate(),
        Ok(())
    );
    assert!(matches!(
        Policy {
            min_assurance: Some(AssuranceLevel::Aal1),
            ..lax.clone()
        }
        .validate(),
        Err(PolicyError::Contradictory {
            members: "require_evidence, min_assurance",
            ..
        })
    ));
    assert!(matches!(
        Policy {
            quorum: 2,
            ..lax.clone()
        }
        .validate(),
        Err(PolicyError::Contradictory {
            members: "require_evidence, quorum",
            ..
        })
    ));
    assert!(matches!(
        only(&[]).validate(),
        Err(PolicyError::Contradictory {
            members: "approvers",
            ..
        })
    ));
    let two_of_one = Policy {
        quorum: 2,
        ..only(&["alice@example.com", "alice@example.com"])
    };
    assert!(two_of_one.validate().is_err());
    let two_of_two = Policy {
        quorum: 2,
        ..only(&["alice@example.com", "bob@example.com"])
    };
    assert_eq!(two_of_two.validate(), Ok(()));
    assert_eq!(policy().validate(), Ok(()));
}

#[test]
fn verify_evidence_fails_closed_on_a_contradictory_policy() {
    let action = kit::payment_action("account-A");
    let bare = ApprovalResult::from_json(br#""APPROVED""#).unwrap();
    let contradictory = Policy {
        require_evidence: false,
        quorum: 2,
        ..policy()
    };
    assert_deny(
        &verify(&contradictory, &action, &bare, &alice_registry()),
        ReasonCode::EvidenceMissing,
    );
    let min_aal2 = Policy {
        require_evidence: false,
        min_assurance: Some(AssuranceLevel::Aal2),
        ..policy()
    };
    assert_deny(
        &verify(&min_aal2, &action, &bare, &alice_registry()),
        ReasonCode::EvidenceMissing,
    );
}

fn case_with(policy: Value, action: Value) -> Vec<u8> {
    json!({
        "action": action,
        "result": "APPROVED",
        "registry": {"credentials": []},
        "policy": policy,
        "now": kit::NOW,
    })
    .to_string()
    .into_bytes()
}

#[test]
fn a_case_with_a_contradictory_policy_is_unusable() {
    let pay = json!({"profile": PAYMENT, "fields": kit::payment_fields("account-A")});
    let mut p = kit::policy_json();
    p["require_evidence"] = json!(false);
    assert!(Case::from_json(&case_with(p.clone(), pay.clone())).is_ok());
    p["min_assurance"] = json!("AAL2");
    assert!(matches!(
        Case::from_json(&case_with(p, pay.clone())),
        Err(CaseError::ContradictoryPolicy(_))
    ));
    let mut nobody = kit::policy_json();
    nobody["approvers"] = json!([]);
    assert!(matches!(
        Case::from_json(&case_with(nobody, pay)),
        Err(CaseError::ContradictoryPolicy(_))
    ));
}

#[test]
fn a_case_carries_the_new_policy_members_and_the_action_tool() {
    let mut p = kit::policy_json();
    p["nfc"] = json!("normalize");
    p["profile_tools"] = json!({PAYMENT: "payments.transfer"});
    p["approvers"] = json!(["alice@example.com"]);
    let action = json!({"profile": PAYMENT, "fields": kit::payment_fields("A"), "tool": "payments.transfer"});
    let case = Case::from_json(&case_with(p.clone(), action)).unwrap();
    assert_eq!(case.action.tool.as_deref(), Some("payments.transfer"));
    assert_eq!(case.policy.nfc, NfcMode::Normalize);
    assert_eq!(
        case.policy.profile_tools.get(PAYMENT).map(String::as_str),
        Some("payments.transfer")
    );
    assert_eq!(
        case.policy.approvers,
        Some(vec!["alice@example.com".to_owned()])
    );

    let defaults = Case::from_json(&case_with(
        kit::policy_json(),
        json!({"profile": PAYMENT, "fields": kit::payment_fields("A")}),
    ))
    .unwrap();
    assert_eq!(defaults.policy.nfc, NfcMode::Require);
    assert_eq!(defaults.action.tool, None);

    p["nfc"] = json!("NFKC");
    assert!(matches!(
        Case::from_json(&case_with(p, json!({"profile": PAYMENT, "fields": {}}))),
        Err(CaseError::Policy(_))
    ));
    let tool_not_string = json!({"profile": PAYMENT, "fields": {}, "tool": 7});
    assert!(matches!(
        Case::from_json(&case_with(kit::policy_json(), tool_not_string)),
        Err(CaseError::Action(_))
    ));
}
