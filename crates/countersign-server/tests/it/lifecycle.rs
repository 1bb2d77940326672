//! The approval lifecycle over real HTTP with the software authenticator.

use crate::support::{Approver, TestApp};
use countersign::{
    Action, ApprovalResult, CredentialRegistry, Decision, MemoryReplayState, Policy, ReasonCode,
    RegistryDocument, b64, verify_evidence,
};
use countersign_testkit::{ORIGIN, RP_ID, payment_fields};
use serde_json::{Value, json};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// What the gateway would run: the generic tool-call action for the payment tool.
fn action(params: &Value) -> Action {
    countersign_testkit::tool_call_action("agent-7", "payments.transfer", params.clone())
}

async fn exported_registry(app: &TestApp) -> CredentialRegistry {
    let r = app.get("/v1/registry").await;
    assert_eq!(r.status, 200);
    let doc: RegistryDocument = serde_json::from_value(r.body).unwrap();
    CredentialRegistry::from_document(doc).unwrap()
}

fn offline_verify(
    result: &Value,
    action: &Action,
    registry: &CredentialRegistry,
    now: &str,
) -> countersign::Verdict {
    let result = ApprovalResult::from_value(result).unwrap();
    verify_evidence(
        &Policy::new(RP_ID, [ORIGIN]),
        action,
        &result,
        registry,
        &mut MemoryReplayState::new(),
        OffsetDateTime::parse(now, &Rfc3339).unwrap(),
    )
}

fn fingerprint(action: &Action) -> String {
    b64::encode(&countersign_testkit::op_hash_of(action, Decision::Approved))
}

#[tokio::test]
async fn create_approve_verify_offline_and_collect_the_grant_once() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let params = payment_fields("A");
    let created = app.create("payments.transfer", params.clone()).await;
    assert_eq!(created.status, 200);
    assert_eq!(created.body["status"], "PENDING");
    let id = created.body["approval_id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["expires_at"], "2026-11-20T10:05:00Z");
    let redrive = created.body["redrive_url"].as_str().unwrap();
    assert_eq!(redrive, app.url(&format!("/v1/approvals/{id}")));

    // The approver sees every material field after authenticating.
    let token = alice.login(&app).await;
    let view = app
        .send(
            app.http
                .get(app.url(&format!("/v1/approver/approvals/{id}")))
                .bearer_auth(&token),
        )
        .await;
    assert_eq!(view.status, 200, "{:?}", view.body);
    assert_eq!(view.body["fields"]["params"], params);
    // Without a session, nothing.
    assert_eq!(
        app.get(&format!("/v1/approver/approvals/{id}"))
            .await
            .status,
        401
    );

    let body = alice.prepare(&app, &token, &id, Decision::Approved).await;
    let decided = alice.submit(&app, &token, &id, &body).await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    assert_eq!(decided.body["status"], "APPROVED");

    let result = app.send(app.http.get(redrive)).await;
    assert_eq!(result.body["status"], "APPROVED");
    assert_eq!(
        result.body["approver_evidence"].as_array().map(Vec::len),
        Some(1)
    );

    // Offline: the exported registry and the action are all a verifier needs.
    let registry = exported_registry(&app).await;
    let verdict = offline_verify(
        &result.body,
        &action(&params),
        &registry,
        "2026-11-20T10:01:00Z",
    );
    assert!(verdict.is_allow(), "{verdict:?}");
    assert_eq!(verdict.approvers[0].principal, "alice");

    // The grant: once, for this exact call.
    let grant_path = format!("/v1/approvals/{id}/grant");
    let other = action(&payment_fields("B"));
    let wrong = app
        .post(&grant_path, &json!({"fingerprint": fingerprint(&other)}))
        .await;
    assert_eq!(wrong.status, 409);
    assert_eq!(wrong.body["error"]["code"], "fingerprint_mismatch");
    assert_eq!(wrong.body["error"]["reason_code"], "binding_mismatch");
    let fp = fingerprint(&action(&params));
    let first = app.post(&grant_path, &json!({"fingerprint": fp})).await;
    assert_eq!(first.status, 200, "{:?}", first.body);
    assert_eq!(first.body["fingerprint"], fp.as_str());
    let second = app.post(&grant_path, &json!({"fingerprint": fp})).await;
    assert_eq!(second.status, 409);
    assert_eq!(second.body["error"]["code"], "grant_already_collected");
    assert_eq!(second.body["error"]["reason_code"], "replayed");

    let report = app.audit();
    assert!(report.is_valid(), "{report:?}");
    let head = app.get("/v1/audit/head").await;
    // alice's enrollment (the registry import) opens the log.
    assert_eq!(head.body["seq"], 5);
    assert_eq!(head.body["head"], report.head.as_str());
    let kinds: Vec<String> = app
        .audit_text()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        ["enrollment", "request", "outcome", "decision", "grant"]
    );
    let enrollment = &app.audit_lines("enrollment")[0];
    assert_eq!(enrollment["principal"], "alice");
    assert_eq!(enrollment["source"], "registry");
    let decision = &app.audit_lines("decision")[0];
    assert_eq!(decision["principal"], "alice");
    assert_eq!(decision["identity_assurance"]["source"], "evidence");
    assert!(decision["evidence"]["signature"].is_string());
}

#[tokio::test]
async fn a_grant_expires_and_an_expired_grant_is_refused() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let params = json!({"to": "A"});
    let id = app.create_pending(params.clone()).await;
    assert_eq!(
        alice.decide(&app, &id, Decision::Approved).await.status,
        200
    );
    app.advance(61);
    let r = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint(&action(&params))}),
        )
        .await;
    assert_eq!(r.status, 409);
    assert_eq!(r.body["error"]["code"], "grant_expired");
}

#[tokio::test]
async fn a_refusal_carries_evidence_and_grants_nothing() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let params = payment_fields("A");
    let id = app.create_pending(params.clone()).await;
    let r = alice.decide(&app, &id, Decision::Denied).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.body["status"], "DENIED");
    assert_eq!(r.body["reason_code"], "approver_refused");
    let registry = exported_registry(&app).await;
    let verdict = offline_verify(&r.body, &action(&params), &registry, "2026-11-20T10:00:30Z");
    assert!(!verdict.is_allow());
    assert_eq!(verdict.reason_code, Some(ReasonCode::ApproverRefused));
    assert_eq!(verdict.approvers.len(), 1, "the refusal is signed");
    let g = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint(&action(&params))}),
        )
        .await;
    assert_eq!(g.status, 409);
    assert_eq!(g.body["error"]["code"], "not_approved");
    assert_eq!(g.body["error"]["reason_code"], "approver_refused");
}

#[tokio::test]
async fn unanswered_requests_expire_and_late_verdicts_never_approve() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    let token = alice.login(&app).await;
    let body = alice.prepare(&app, &token, &id, Decision::Approved).await;
    // Exactly at expires_at the window is closed: late by nothing is still late.
    app.advance(300);
    let late = alice.submit(&app, &token, &id, &body).await;
    assert_eq!(late.status, 409, "{:?}", late.body);
    let r = app.get(&format!("/v1/approvals/{id}")).await;
    assert_eq!(r.body["status"], "DENIED");
    assert_eq!(r.body["reason_code"], "expired_unanswered");
    assert!(r.body.get("approver_evidence").is_none());
    assert!(app.audit().is_valid());
    assert_eq!(app.audit_lines("settlement").len(), 1);
    assert!(app.audit_lines("decision").is_empty());

    // One millisecond before the end, a verdict still counts.
    let id = app.create_pending(json!({"to": "A"})).await;
    let body = alice.prepare(&app, &token, &id, Decision::Approved).await;
    app.clock.advance(time::Duration::milliseconds(299_999));
    let ok = alice.submit(&app, &token, &id, &body).await;
    assert_eq!(ok.status, 200, "{:?}", ok.body);
}

#[tokio::test]
async fn a_grant_asked_for_an_unanswered_request_names_its_expiry() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let params = json!({"to": "A"});
    let id = app.create_pending(params.clone()).await;
    let grant = json!({"fingerprint": fingerprint(&action(&params))});
    let early = app.post(&format!("/v1/approvals/{id}/grant"), &grant).await;
    assert_eq!(early.status, 409);
    assert_eq!(early.body["error"]["reason_code"], "pending");
    // No sweep has run: the grant request itself settles the overdue approval first.
    app.advance(300);
    let late = app.post(&format!("/v1/approvals/{id}/grant"), &grant).await;
    assert_eq!(late.status, 409, "{:?}", late.body);
    assert_eq!(late.body["error"]["code"], "not_approved");
    assert_eq!(late.body["error"]["reason_code"], "expired_unanswered");
    assert_eq!(late.body["error"]["result"]["status"], "DENIED");
    assert_eq!(app.audit_lines("settlement").len(), 1);
    assert!(app.audit_lines("grant").is_empty());
}

#[tokio::test]
async fn the_sweeper_settles_overdue_requests() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let a = app.create_pending(json!({"n": "1"})).await;
    app.advance(100);
    let b = app.create_pending(json!({"n": "2"})).await;
    app.advance(250);
    assert_eq!(app.state.expire_overdue().await.unwrap(), 1);
    assert_eq!(
        app.get(&format!("/v1/approvals/{a}")).await.body["status"],
        "DENIED"
    );
    assert_eq!(
        app.get(&format!("/v1/approvals/{b}")).await.body["status"],
        "PENDING"
    );
}

#[tokio::test]
async fn contradictory_concurrent_verdicts_exactly_one_wins() {
    let alice = Approver::alice();
    let bob = Approver::bob();
    let app = TestApp::default_with(&[&alice, &bob]).await;
    for round in 0..4 {
        let id = app
            .create_pending(json!({"round": round.to_string()}))
            .await;
        let ta = alice.login(&app).await;
        let tb = bob.login(&app).await;
        let approve = alice.prepare(&app, &ta, &id, Decision::Approved).await;
        let refuse = bob.prepare(&app, &tb, &id, Decision::Denied).await;
        let (a, b) = tokio::join!(
            alice.submit(&app, &ta, &id, &approve),
            bob.submit(&app, &tb, &id, &refuse)
        );
        let mut statuses = [a.status, b.status];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 409], "{a:?} {b:?}");
        let (winner, loser) = if a.status == 200 { (a, b) } else { (b, a) };
        assert_eq!(loser.body["error"]["code"], "already_settled");
        assert_eq!(
            loser.body["error"]["result"]["status"],
            winner.body["status"]
        );
        let now = app.get(&format!("/v1/approvals/{id}")).await;
        assert_eq!(now.body["status"], winner.body["status"]);
    }
    assert_eq!(app.audit_lines("decision").len(), 4);
    assert!(app.audit().is_valid());
}

#[tokio::test]
async fn replayed_and_misdirected_assertions_are_refused() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let x = app.create_pending(json!({"to": "A"})).await;
    let y = app.create_pending(json!({"to": "A"})).await;
    let token = alice.login(&app).await;
    let for_x = alice.prepare(&app, &token, &x, Decision::Approved).await;

    // Evidence for another approval's challenge.
    let misdirected = alice.submit(&app, &token, &y, &for_x).await;
    assert_eq!(misdirected.status, 422, "{:?}", misdirected.body);
    assert_eq!(misdirected.body["error"]["reason_code"], "binding_mismatch");
    assert_eq!(
        app.get(&format!("/v1/approvals/{y}")).await.body["status"],
        "PENDING"
    );

    // The same assertion twice: the second changes nothing.
    assert_eq!(alice.submit(&app, &token, &x, &for_x).await.status, 200);
    let again = alice.submit(&app, &token, &x, &for_x).await;
    assert_eq!(again.status, 409);
    // Replayed onto y after x settled: the challenge is used up.
    let onto_y = alice.submit(&app, &token, &y, &for_x).await;
    assert_eq!(onto_y.status, 422);

    // A tampered signature is refused by the core verifier, and burns nothing.
    let for_y = alice.prepare(&app, &token, &y, Decision::Approved).await;
    let mut tampered = for_y.clone();
    let mut sig = b64::decode(tampered["signature"].as_str().unwrap()).unwrap();
    let last = sig.len() - 1;
    sig[last] ^= 1;
    tampered["signature"] = b64::encode(&sig).into();
    let bad = alice.submit(&app, &token, &y, &tampered).await;
    assert_eq!(bad.status, 422, "{:?}", bad.body);
    assert_eq!(alice.submit(&app, &token, &y, &for_y).await.status, 200);

    // A login assertion cannot be replayed.
    let c = app.post("/v1/approver/login/challenge", &json!({})).await;
    let login = serde_json::to_value(
        alice.sign(b64::decode(c.body["challenge"].as_str().unwrap()).unwrap()),
    )
    .unwrap();
    assert_eq!(app.post("/v1/approver/login", &login).await.status, 200);
    assert_eq!(app.post("/v1/approver/login", &login).await.status, 401);
}

#[tokio::test]
async fn the_worked_examples_account_b_replay_fails_at_the_digest() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let body = |dest: &str| {
        json!({
            "agent_id": "agent-7",
            "tool_name": "payments.transfer",
            "profile": "countersign.payment/1",
            "params": payment_fields(dest),
        })
    };
    let a = app.post("/v1/approvals", &body("A")).await;
    assert_eq!(a.status, 200, "{:?}", a.body);
    let id_a = a.body["approval_id"].as_str().unwrap().to_owned();
    let decided = alice.decide(&app, &id_a, Decision::Approved).await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);

    // A gateway re-presenting A's approval for a transfer to B: the digest differs.
    let registry = exported_registry(&app).await;
    let to_b = countersign_testkit::payment_action("B");
    let verdict = offline_verify(&decided.body, &to_b, &registry, "2026-11-20T10:00:30Z");
    assert_eq!(
        verdict.reason_code,
        Some(ReasonCode::BindingMismatch),
        "{verdict:?}"
    );
    let to_a = countersign_testkit::payment_action("A");
    assert!(offline_verify(&decided.body, &to_a, &registry, "2026-11-20T10:00:30Z").is_allow());

    // And A's grant cannot be collected for B's fingerprint.
    let g = app
        .post(
            &format!("/v1/approvals/{id_a}/grant"),
            &json!({"fingerprint": fingerprint(&to_b)}),
        )
        .await;
    assert_eq!(g.body["error"]["reason_code"], "binding_mismatch");
}

#[tokio::test]
async fn withdrawal_is_a_settlement_not_a_verdict() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    let token = alice.login(&app).await;
    let prepared = alice.prepare(&app, &token, &id, Decision::Approved).await;
    let w = app
        .post(&format!("/v1/approvals/{id}/withdraw"), &json!({}))
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);
    assert_eq!(w.body["status"], "DENIED");
    assert_eq!(w.body["reason_code"], "cancelled");
    assert_eq!(alice.submit(&app, &token, &id, &prepared).await.status, 409);
    let c = app
        .post_auth(
            &format!("/v1/approver/approvals/{id}/challenge"),
            &token,
            &json!({"decision": "APPROVED"}),
        )
        .await;
    assert_eq!(c.status, 409);
    assert_eq!(
        app.post(&format!("/v1/approvals/{id}/withdraw"), &json!({}))
            .await
            .status,
        409
    );
    let settlements = app.audit_lines("settlement");
    assert_eq!(settlements.len(), 1);
    assert_eq!(settlements[0]["reason_code"], "cancelled");
    assert!(
        app.audit_lines("decision").is_empty(),
        "never dressed up as a human verdict"
    );
    assert!(app.audit().is_valid());
}

#[tokio::test]
async fn policy_answers_at_once_without_a_human() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let free = app.create("read_file", json!({"path": "/etc/motd"})).await;
    assert_eq!(free.status, 200);
    assert_eq!(free.body["status"], "APPROVED");
    let nobody = app.create("restart_cluster", json!({})).await;
    assert_eq!(nobody.body["status"], "DENIED");
    assert_eq!(nobody.body["reason_code"], "no_eligible_approver");
    // With nobody enrolled at all, even the default rule has no eligible approver.
    let empty = TestApp::default_with(&[]).await;
    let r = empty.create("anything", json!({})).await;
    assert_eq!(r.body["reason_code"], "no_eligible_approver");
    // An approver outside the tool's groups may not decide it.
    let carol = Approver::new("carol", "carol-es256");
    let app = TestApp::default_with(&[&alice, &carol]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    let token = carol.login(&app).await;
    let c = app
        .post_auth(
            &format!("/v1/approver/approvals/{id}/challenge"),
            &token,
            &json!({"decision": "APPROVED"}),
        )
        .await;
    assert_eq!(c.status, 403);
}

#[tokio::test]
async fn long_poll_returns_when_the_verdict_lands() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    let token = alice.login(&app).await;
    let body = alice.prepare(&app, &token, &id, Decision::Approved).await;
    let path = format!("/v1/approvals/{id}?wait=60");
    let poll = app.get(&path);
    let decide = async {
        tokio::task::yield_now().await;
        alice.submit(&app, &token, &id, &body).await
    };
    let (polled, decided) = tokio::join!(poll, decide);
    assert_eq!(decided.status, 200);
    // Whether the poll started waiting before the verdict (and was woken) or read after it, it
    // answers the verdict; only a 60 s stall could make it answer PENDING.
    assert_eq!(polled.body["status"], "APPROVED", "{:?}", polled.body);
}

/// The value of the series `name{labels}` in a Prometheus text exposition, if present.
fn series(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

async fn scrape(app: &TestApp) -> String {
    let r = app.anon.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let kind = r.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(kind.starts_with("text/plain; version=0.0.4"), "{kind}");
    r.text().await.unwrap()
}

#[tokio::test]
async fn metrics_move_with_a_lifecycle_and_label_only_configured_tools() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let before = scrape(&app).await;
    assert_eq!(series(&before, "countersign_approvals_pending"), Some(0.0));
    assert_eq!(
        series(&before, "countersign_oldest_pending_age_seconds"),
        Some(0.0)
    );
    assert_eq!(
        series(&before, "countersign_grants_collected_total"),
        Some(0.0)
    );

    let params = payment_fields("A");
    let id = app.create_pending(params.clone()).await;
    let mid = scrape(&app).await;
    assert_eq!(
        series(
            &mid,
            r#"countersign_approvals_created_total{tool="payments.transfer",status="PENDING"}"#
        ),
        Some(1.0),
        "{mid}"
    );
    assert_eq!(series(&mid, "countersign_approvals_pending"), Some(1.0));
    app.advance(30);
    let later = scrape(&app).await;
    assert_eq!(
        series(&later, "countersign_oldest_pending_age_seconds"),
        Some(30.0),
        "{later}"
    );

    let token = alice.login(&app).await;
    let body = alice.prepare(&app, &token, &id, Decision::Approved).await;
    assert_eq!(alice.submit(&app, &token, &id, &body).await.status, 200);
    let fp = fingerprint(&action(&params));
    let grant = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fp}),
        )
        .await;
    assert_eq!(grant.status, 200, "{:?}", grant.body);

    // A tool name the configuration does not list is counted as "other", never as itself.
    let invented = app
        .create("x-invented-by-the-request", json!({"a": "b"}))
        .await;
    assert!(invented.status < 500, "{:?}", invented.body);

    let after = scrape(&app).await;
    assert_eq!(
        series(
            &after,
            r#"countersign_approvals_settled_total{status="APPROVED",reason_code="none"}"#
        ),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        series(
            &after,
            r#"countersign_verifications_total{verdict="ALLOW",reason_code="none"}"#
        ),
        Some(1.0),
        "{after}"
    );
    assert_eq!(
        series(&after, "countersign_verification_seconds_count"),
        Some(1.0)
    );
    assert_eq!(
        series(&after, "countersign_grants_collected_total"),
        Some(1.0)
    );
    assert!(
        after.contains(r#"countersign_approvals_created_total{tool="other","#),
        "{after}"
    );
    assert!(!after.contains("x-invented-by-the-request"), "{after}");
    assert_eq!(series(&after, "countersign_long_poll_waiters"), Some(0.0));
    // create, decision, grant, and the second create: four store commits at least.
    assert!(
        series(&after, "countersign_store_commit_seconds_count") >= Some(4.0),
        "{after}"
    );
}
