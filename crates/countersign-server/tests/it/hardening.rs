//! Issue 10 hardening: signed checkpoints, long-poll wake-ups and cap, sign-in rate limits on the
//! bearer API, logout, and the settlement's compare-and-set at commit time.

use crate::support::{Approver, TestApp, config};
use countersign::{Decision, b64};
use countersign_audit::{Checkpoint, default_origin, line_hash};
use countersign_server::{AssertionBody, Clock, ManualClock};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Poll `done` until it holds, yielding to the server between tries (no timing assertion: the
/// bound only turns a hang into a failure).
async fn until(mut done: impl FnMut() -> bool, what: &str) {
    for _ in 0..20_000 {
        if done() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("never happened: {what}");
}

/// The RFC 9162 root of every line of `log`.
fn merkle_root(log: &str) -> [u8; 32] {
    let tree = countersign_audit::merkle::MerkleTree::from_lines(log.lines().map(str::as_bytes));
    tree.root(tree.size()).unwrap()
}

fn payment() -> serde_json::Value {
    countersign_testkit::payment_fields("A")
}

#[tokio::test]
async fn the_checkpoint_endpoint_serves_a_signed_note_of_the_whole_log() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    app.create_pending(payment()).await;
    let resp = app
        .http
        .get(app.url("/v1/audit/checkpoint"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/plain; charset=utf-8");
    let note = resp.text().await.unwrap();
    let origin = default_origin(&app.base);
    assert!(origin.starts_with("127.0.0.1:") && origin.ends_with("/countersign/audit"));
    let checkpoint = Checkpoint::verify(&note, &app.sealer.public_key(), Some(&origin)).unwrap();
    let log = app.audit_text();
    let last = log.lines().last().unwrap();
    assert_eq!(checkpoint.size, log.lines().count() as u64);
    // Version 2: the Merkle root of every line, not the chain head.
    assert_ne!(checkpoint.hash, line_hash(last));
    assert_eq!(checkpoint.hash, merkle_root(&log));
    assert_eq!(checkpoint.time, "2026-11-20T10:00:00Z");
    // Signed by the audit key and nothing else: another key finds no signature of its own.
    let other = countersign_audit::AuditSealer::from_seed([1; 32]);
    assert!(Checkpoint::verify(&note, &other.public_key(), None).is_err());
}

#[tokio::test]
async fn the_checkpoint_origin_is_configurable() {
    let mut c = config();
    c.audit_origin = Some("approvals.example.org/countersign/audit".into());
    let app = TestApp::start(c, &[]).await;
    let note = app
        .http
        .get(app.url("/v1/audit/checkpoint"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(note.starts_with("approvals.example.org/countersign/audit\n0\n"));
    let cp = Checkpoint::verify(
        &note,
        &app.sealer.public_key(),
        Some("approvals.example.org/countersign/audit"),
    )
    .unwrap();
    assert_eq!(cp.size, 0);
}

#[tokio::test]
async fn the_grant_carries_a_checkpoint_covering_the_grant_and_the_decision() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let params = payment();
    let id = app.create_pending(params.clone()).await;
    let decided = alice.decide(&app, &id, Decision::Approved).await;
    assert_eq!(decided.status, 200, "{:?}", decided.body);
    let action = countersign_testkit::tool_call_action("agent-7", "payments.transfer", params);
    let fp = b64::encode(&countersign_testkit::op_hash_of(
        &action,
        Decision::Approved,
    ));
    let grant = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fp}),
        )
        .await;
    assert_eq!(grant.status, 200, "{:?}", grant.body);
    let note = grant.body["checkpoint"].as_str().unwrap();
    let cp = Checkpoint::verify(note, &app.sealer.public_key(), None).unwrap();
    let log = app.audit_text();
    let seq_of = |kind: &str| app.audit_lines(kind)[0]["seq"].as_u64().unwrap();
    assert!(cp.size >= seq_of("grant") && seq_of("grant") > seq_of("decision"));
    let line = log
        .lines()
        .nth(usize::try_from(cp.size).unwrap() - 1)
        .unwrap();
    assert_ne!(cp.hash, line_hash(line));
    let covered: String = log
        .lines()
        .take(usize::try_from(cp.size).unwrap())
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(cp.hash, merkle_root(&covered));
    assert_eq!(
        cp.compare(log.as_bytes()),
        countersign_audit::LogComparison::Covers
    );
    // The same log without its last line (the grant) is shorter than the checkpoint.
    let cut: String = log
        .lines()
        .take(log.lines().count() - 1)
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(matches!(
        cp.compare(cut.as_bytes()),
        countersign_audit::LogComparison::Shorter { .. }
    ));
}

#[tokio::test]
async fn a_settlement_wakes_only_the_waiters_of_its_own_approval() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    let a = app.create_pending(payment()).await;
    let b = app.create_pending(payment()).await;
    let url = app.url(&format!("/v1/approvals/{b}?wait=30"));
    let http = app.http.clone();
    let waiter = tokio::spawn(async move { http.get(url).send().await.unwrap().text().await });
    let state = app.state.clone();
    until(|| state.long_poll_stats().waiting == 1, "B's poll waits").await;

    let r = app
        .post(&format!("/v1/approvals/{a}/withdraw"), &json!({}))
        .await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    // A's settlement delivered no wake-up: nobody waits on A. B's poll still waits.
    let stats = app.state.long_poll_stats();
    assert_eq!((stats.woken, stats.waiting), (0, 1), "{stats:?}");

    let r = app
        .post(&format!("/v1/approvals/{b}/withdraw"), &json!({}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(app.state.long_poll_stats().woken, 1);
    let body: serde_json::Value = serde_json::from_str(&waiter.await.unwrap().unwrap()).unwrap();
    assert_eq!(body["status"], "DENIED");
    assert_eq!(body["reason_code"], "cancelled");
    until(
        || state.long_poll_stats().waiting == 0,
        "the guard is dropped",
    )
    .await;
}

#[tokio::test]
async fn concurrent_long_polls_are_capped_with_retry_after() {
    let mut c = config();
    c.limits.long_poll_waiters = 2;
    let app = TestApp::start(c, &[&Approver::alice()]).await;
    let id = app.create_pending(payment()).await;
    let mut polls = Vec::new();
    for _ in 0..2 {
        let (http, url) = (
            app.http.clone(),
            app.url(&format!("/v1/approvals/{id}?wait=30")),
        );
        polls.push(tokio::spawn(async move {
            http.get(url).send().await.unwrap().status().as_u16()
        }));
    }
    let state = app.state.clone();
    until(|| state.long_poll_stats().waiting == 2, "two polls wait").await;

    let resp = app
        .http
        .get(app.url(&format!("/v1/approvals/{id}?wait=30")))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_waiters");
    assert_eq!(app.state.long_poll_stats().refused, 1);
    // A poll that does not wait is not capped.
    assert_eq!(app.get(&format!("/v1/approvals/{id}")).await.status, 200);

    app.post(&format!("/v1/approvals/{id}/withdraw"), &json!({}))
        .await;
    for p in polls {
        assert_eq!(p.await.unwrap(), 200);
    }
    until(|| state.long_poll_stats().waiting == 0, "guards dropped").await;
    assert_eq!(
        app.get(&format!("/v1/approvals/{id}?wait=30")).await.status,
        200,
        "the cap frees as polls end"
    );
}

#[tokio::test]
async fn bearer_sign_in_is_rate_limited_like_the_page() {
    let app = TestApp::default_with(&[&Approver::alice()]).await;
    for i in 0..20 {
        let r = app.post("/v1/approver/login/challenge", &json!({})).await;
        assert_eq!(r.status, 200, "attempt {i}");
    }
    let resp = app
        .http
        .post(app.url("/v1/approver/login/challenge"))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "60");
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "rate_limited");
    // The login itself counts against the same budget.
    let r = app.post("/v1/approver/login", &json!({})).await;
    assert_eq!(r.status, 429);
    // A minute later (the service clock, not a sleep) the budget is back.
    app.advance(60);
    assert_eq!(
        app.post("/v1/approver/login/challenge", &json!({}))
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn bearer_logout_ends_the_session_on_the_server() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app.create_pending(payment()).await;
    let token = alice.login(&app).await;
    let review = |token: String| {
        let req = app
            .http
            .get(app.url(&format!("/v1/approver/approvals/{id}")))
            .bearer_auth(token);
        app.send(req)
    };
    assert_eq!(review(token.clone()).await.status, 200);
    let resp = app
        .http
        .post(app.url("/v1/approver/logout"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 204);
    let after = review(token.clone()).await;
    assert_eq!(after.status, 401, "{:?}", after.body);
    // Logging out again is harmless; a logout without a token is refused.
    let again = app
        .http
        .post(app.url("/v1/approver/logout"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 204);
    // (A client of its own: the test app's sends the gateway's bearer token by default.)
    let bare = reqwest::Client::new()
        .post(app.url("/v1/approver/logout"))
        .send()
        .await
        .unwrap();
    assert_eq!(bare.status(), 401);
}

/// A clock that jumps forward on one chosen read: it stands for time passing while the verdict
/// is being verified.
#[derive(Debug)]
struct JumpClock {
    inner: Arc<ManualClock>,
    /// Reads left before the jump; the jump happens on the read that takes it from 1 to 0.
    reads_left: AtomicI64,
    jump: time::Duration,
}

impl Clock for JumpClock {
    fn now(&self) -> OffsetDateTime {
        if self.reads_left.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.inner.advance(self.jump);
        }
        self.inner.now()
    }
}

#[tokio::test]
async fn a_verdict_that_finishes_after_expiry_is_late_at_commit_time() {
    let alice = Approver::alice();
    let manual = Arc::new(ManualClock::new(
        OffsetDateTime::parse(crate::support::START, &Rfc3339).unwrap(),
    ));
    let clock = Arc::new(JumpClock {
        inner: manual.clone(),
        reads_left: AtomicI64::new(i64::MIN / 2),
        jump: time::Duration::seconds(2),
    });
    let app = TestApp::start_with_clock(config(), &[&alice], manual, clock.clone()).await;
    let id = app.create_pending(payment()).await; // expires at START + 300 s
    let token = alice.login(&app).await;
    let prepared = alice.prepare(&app, &token, &id, Decision::Approved).await;
    let body: AssertionBody = serde_json::from_value(prepared).unwrap();
    let session = app.state.authenticate(&token).await.unwrap();
    // One second before expiry the verdict arrives: it is read as pending and in time, and it
    // is verified at that time; then the clock passes expiry before the commit.
    app.advance(299);
    // `decide` reads the clock twice before verifying (the overdue check and the verdict's
    // time); the third read, at commit, sees the jump.
    clock.reads_left.store(3, Ordering::SeqCst);
    let err = app.state.decide(&id, body, &session).await.unwrap_err();
    assert_eq!(err.code, "expired", "{err:?}");
    assert_eq!(
        err.reason_code,
        Some(countersign::ReasonCode::ExpiredUnanswered)
    );
    let r = app.get(&format!("/v1/approvals/{id}")).await;
    assert_eq!(r.body["status"], "DENIED");
    assert_eq!(r.body["reason_code"], "expired_unanswered");
    assert!(app.audit_lines("decision").is_empty());
}
