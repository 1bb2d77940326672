//! Revoking a credential: written to the database by another process (the CLI), noticed by the
//! running service's refresh, refused at login and decision, and recorded in the audit log.

use crate::enroll::{enroll_key, invite, now_ms, softkey};
use crate::support::{Approver, TestApp};
use countersign::{Decision, b64};
use countersign_server::store::{RevokeOutcome, revoke};
use serde_json::json;

#[tokio::test]
async fn a_revoked_key_cannot_log_in_or_decide_and_the_log_says_who_enrolled_and_revoked_it() {
    let app = TestApp::default_with(&[]).await;
    // carol enrolls two authenticators through invites; she is in `finance`.
    let (lost, spare) = (softkey(21), softkey(22));
    for key in [&lost, &spare] {
        let created = invite(&app, "carol", Some("finance"));
        let r = enroll_key(&app, &created.token, key).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    let with_lost = Approver::with_key("carol", lost.clone());
    let spare_id = spare.credential_id().to_vec();
    let with_spare = Approver::with_key("carol", spare);
    let old_session = with_lost.login(&app).await;
    let id = app
        .create_pending(json!({"to": "DE89", "amount": "1.00"}))
        .await;

    // Another process (`countersign credential revoke`) writes the database.
    let now = now_ms(&app);
    let store = app.state.store().clone();
    assert_eq!(
        revoke(store.as_ref(), lost.credential_id(), "laptop stolen", now).unwrap(),
        RevokeOutcome::Revoked
    );
    // The service notices on its next refresh (the sweeper's tick), and only once.
    assert!(app.state.refresh_registry().await.unwrap());
    assert!(!app.state.refresh_registry().await.unwrap());

    // Login with the revoked key is refused with credential_revoked.
    let c = app.post("/v1/approver/login/challenge", &json!({})).await;
    let challenge = b64::decode(c.body["challenge"].as_str().unwrap()).unwrap();
    let body = serde_json::to_value(with_lost.sign(challenge)).unwrap();
    let r = app.post("/v1/approver/login", &body).await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert_eq!(r.body["error"]["reason_code"], "credential_revoked");

    // The session the revoked key opened earlier ends with it.
    let r = app
        .post_auth(
            &format!("/v1/approver/approvals/{id}/challenge"),
            &old_session,
            &json!({"decision": Decision::Approved}),
        )
        .await;
    assert_eq!(r.status, 401, "{:?}", r.body);
    assert_eq!(r.body["error"]["reason_code"], "credential_revoked");

    // A decision signed by the revoked key is refused even in a live session of carol's.
    let session = with_spare.login(&app).await;
    let signed = with_lost
        .prepare(&app, &session, &id, Decision::Approved)
        .await;
    let r = with_lost.submit(&app, &session, &id, &signed).await;
    assert_eq!(r.status, 422, "{:?}", r.body);
    assert_eq!(r.body["error"]["reason_code"], "credential_revoked");
    assert_eq!(
        app.get(&format!("/v1/approvals/{id}")).await.body["status"],
        "PENDING"
    );

    // The spare key still decides.
    let signed = with_spare
        .prepare(&app, &session, &id, Decision::Approved)
        .await;
    let r = with_spare.submit(&app, &session, &id, &signed).await;
    assert_eq!(r.status, 200, "{:?}", r.body);

    // Revoking again through the service changes nothing.
    assert_eq!(
        app.state
            .revoke_credential(lost.credential_id().to_vec(), "again".into())
            .await
            .unwrap(),
        RevokeOutcome::AlreadyRevoked
    );

    // The published registry says revoked; the audit log is valid and tells the story.
    let reg = app.get("/v1/registry").await;
    let doc: countersign::RegistryDocument = serde_json::from_value(reg.body).unwrap();
    let revoked: Vec<bool> = doc.credentials.iter().map(|c| c.revoked).collect();
    assert_eq!(revoked.iter().filter(|r| **r).count(), 1);
    let report = app.audit();
    assert!(report.is_valid() && report.issues.is_empty(), "{report:?}");
    let enrollments = app.audit_lines("enrollment");
    assert_eq!(enrollments.len(), 2);
    assert_eq!(enrollments[0]["principal"], "carol");
    assert_eq!(
        enrollments[0]["credential_id"],
        b64::encode(lost.credential_id())
    );
    assert_eq!(enrollments[0]["source"], "invite");
    assert_eq!(enrollments[0]["group"], "finance");
    assert_eq!(enrollments[0]["attestation_format"], "none");
    assert_eq!(enrollments[0]["chain_verified"], false);
    assert!(enrollments[0]["aaguid"].is_string());
    let revocations = app.audit_lines("revocation");
    assert_eq!(revocations.len(), 1);
    assert_eq!(revocations[0]["principal"], "carol");
    assert_eq!(
        revocations[0]["credential_id"],
        b64::encode(lost.credential_id())
    );
    assert_eq!(revocations[0]["reason"], "laptop stolen");
    let decision = &app.audit_lines("decision")[0];
    assert_eq!(
        decision["evidence"]["credential_id"],
        b64::encode(&spare_id)
    );
}
