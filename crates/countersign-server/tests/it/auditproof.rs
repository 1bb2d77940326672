//! `audit verify` re-verifies every Decision's evidence: a holder of the service key who rewrites
//! a Decision's evidence and re-seals the log is caught; the honest log passes.

use crate::support::{Approver, TestApp, audit_of};
use countersign::{Decision, ReasonCode};
use countersign_audit::{AuditEvent, AuditReport, GENESIS_HASH, IssueClass};
use countersign_testkit::payment_fields;
use serde_json::{Map, Value};

/// Two approvals (A approved, B refused), both by alice, and the honest log.
async fn two_decisions() -> (TestApp, String, String) {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let a = app.create_pending(payment_fields("A")).await;
    assert_eq!(alice.decide(&app, &a, Decision::Approved).await.status, 200);
    let b = app.create_pending(payment_fields("B")).await;
    assert_eq!(alice.decide(&app, &b, Decision::Approved).await.status, 200);
    (app, a, b)
}

/// Edit the log's lines with `edit`, then re-seal every line with the service key, as a
/// compromised service could.
fn forge(app: &TestApp, edit: impl Fn(&mut Vec<Map<String, Value>>)) -> String {
    let mut bodies: Vec<Map<String, Value>> = app
        .audit_text()
        .lines()
        .map(|l| match serde_json::from_str(l).unwrap() {
            Value::Object(m) => m,
            _ => unreachable!(),
        })
        .collect();
    edit(&mut bodies);
    let mut prev = GENESIS_HASH;
    let mut out = String::new();
    for (i, body) in bodies.into_iter().enumerate() {
        let sealed = app
            .sealer
            .seal(i as u64 + 1, &prev, &AuditEvent::from_body(body));
        prev = sealed.hash;
        out.push_str(&sealed.line);
        out.push('\n');
    }
    out
}

fn decision_of<'a>(bodies: &'a mut [Map<String, Value>], id: &str) -> &'a mut Map<String, Value> {
    bodies
        .iter_mut()
        .find(|b| b["kind"] == "decision" && b["approval_id"] == id)
        .unwrap()
}

fn violations(report: &AuditReport) -> Vec<(&'static str, Option<ReasonCode>)> {
    report
        .issues
        .iter()
        .filter(|i| i.class == IssueClass::Violation)
        .map(|i| (i.code.as_str(), i.reason_code))
        .collect()
}

#[tokio::test]
async fn the_honest_log_re_verifies_and_its_resealed_copy_too() {
    let (app, _, _) = two_decisions().await;
    let report = app.audit();
    assert!(report.is_valid(), "{:?}", report.issues);
    // Re-sealing without edits changes nothing: the forgeries below fail for their edit alone.
    let same = forge(&app, |_| {});
    let report = audit_of(same.as_bytes(), &app.sealer);
    assert!(report.is_valid(), "{:?}", report.issues);
}

#[tokio::test]
async fn a_forged_signature_is_a_violation() {
    let (app, a, _) = two_decisions().await;
    let log = forge(&app, |bodies| {
        let d = decision_of(bodies, &a);
        let entry = match &mut d["evidence"] {
            Value::Array(entries) => &mut entries[0],
            entry => entry,
        };
        let sig = entry["signature"].as_str().unwrap().to_owned();
        let mut bytes = countersign::b64::decode(&sig).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        entry["signature"] = countersign::b64::encode(&bytes).into();
    });
    let report = audit_of(log.as_bytes(), &app.sealer);
    let v = violations(&report);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].0, "evidence_rejected");
    assert_eq!(v[0].1, Some(ReasonCode::SignatureInvalid));
}

#[tokio::test]
async fn swapped_evidence_is_a_binding_mismatch() {
    let (app, a, b) = two_decisions().await;
    let log = forge(&app, |bodies| {
        let from_b = decision_of(bodies, &b)["evidence"].clone();
        decision_of(bodies, &a).insert("evidence".into(), from_b);
    });
    let report = audit_of(log.as_bytes(), &app.sealer);
    let v = violations(&report);
    assert!(
        v.contains(&("evidence_rejected", Some(ReasonCode::BindingMismatch))),
        "{v:?}"
    );
}

#[tokio::test]
async fn replayed_evidence_for_the_same_action_is_a_violation() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let a = app.create_pending(payment_fields("A")).await;
    assert_eq!(alice.decide(&app, &a, Decision::Approved).await.status, 200);
    let c = app.create_pending(payment_fields("A")).await;
    assert_eq!(alice.decide(&app, &c, Decision::Approved).await.status, 200);
    assert!(app.audit().is_valid());
    let log = forge(&app, |bodies| {
        let from_a = decision_of(bodies, &a)["evidence"].clone();
        decision_of(bodies, &c).insert("evidence".into(), from_a);
    });
    let report = audit_of(log.as_bytes(), &app.sealer);
    let v = violations(&report);
    assert_eq!(v, vec![("evidence_replayed", Some(ReasonCode::Replayed))]);
}

#[tokio::test]
async fn a_flipped_verdict_or_inflated_assurance_is_a_violation() {
    let (app, a, b) = two_decisions().await;
    let log = forge(&app, |bodies| {
        decision_of(bodies, &a).insert("verdict".into(), "DENIED".into());
        decision_of(bodies, &b)["identity_assurance"]["level"] = "AAL3".into();
    });
    let report = audit_of(log.as_bytes(), &app.sealer);
    let lines: Vec<_> = report
        .issues
        .iter()
        .filter(|i| i.code == "evidence_rejected")
        .collect();
    assert_eq!(lines.len(), 2, "{:?}", report.issues);
}

#[tokio::test]
async fn a_decision_by_a_credential_never_enrolled_is_a_violation() {
    let (app, a, _) = two_decisions().await;
    let log = forge(&app, |bodies| {
        bodies.retain(|b| b["kind"] != "enrollment");
        let _ = &a;
    });
    let report = audit_of(log.as_bytes(), &app.sealer);
    let v = violations(&report);
    assert_eq!(
        v,
        vec![
            ("credential_unknown", Some(ReasonCode::CredentialUnknown)),
            ("credential_unknown", Some(ReasonCode::CredentialUnknown)),
        ]
    );
}
