//! Gateway authentication: every gateway call needs a live gateway token, an approval belongs to
//! the gateway that created it, the registry is not public by default, and what a request may
//! name is bounded.

use crate::support::{Approver, GATEWAY, TestApp, config};
use countersign::Decision;
use countersign_audit::AuditSealer;
use countersign_server::config::Durability;
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, StateParts, SystemClock};
use serde_json::{Value, json};
use std::sync::Arc;

/// A raw answer: status, `WWW-Authenticate`, body bytes.
struct Raw {
    status: u16,
    challenge: Option<String>,
    body: String,
}

async fn raw(req: reqwest::RequestBuilder) -> Raw {
    let resp = req.send().await.unwrap();
    Raw {
        status: resp.status().as_u16(),
        challenge: resp
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned()),
        body: resp.text().await.unwrap(),
    }
}

/// The grant fingerprint of agent-7's call of `tool` with `params`.
fn fingerprint_of(tool: &str, params: Value) -> String {
    let action = countersign_testkit::tool_call_action("agent-7", tool, params);
    countersign::b64::encode(&countersign_testkit::op_hash_of(
        &action,
        Decision::Approved,
    ))
}

fn code(r: &Raw) -> String {
    let v: Value = serde_json::from_str(&r.body).unwrap();
    v["error"]["code"].as_str().unwrap_or_default().to_owned()
}

/// The four gateway calls on approval `id`, built on `client`, optionally with `auth` as the
/// whole `Authorization` header.
fn gateway_calls(
    app: &TestApp,
    client: &reqwest::Client,
    id: &str,
    auth: Option<&str>,
) -> Vec<(&'static str, reqwest::RequestBuilder)> {
    let with = |rb: reqwest::RequestBuilder| match auth {
        Some(value) => rb.header("authorization", value),
        None => rb,
    };
    vec![
        (
            "create",
            with(client.post(app.url("/v1/approvals"))).json(&json!({
                "agent_id": "agent-7", "tool_name": "payments.transfer", "params": {}
            })),
        ),
        (
            "redrive",
            with(client.get(app.url(&format!("/v1/approvals/{id}")))),
        ),
        (
            "withdraw",
            with(client.post(app.url(&format!("/v1/approvals/{id}/withdraw")))),
        ),
        (
            "grant",
            with(client.post(app.url(&format!("/v1/approvals/{id}/grant"))))
                .json(&json!({"fingerprint": "AAAA"})),
        ),
    ]
}

#[tokio::test]
async fn every_gateway_call_needs_a_live_gateway_token() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    let (revoked, _) = app.other_gateway("retired").await;
    app.state.revoke_gateway("retired").await.unwrap();

    let missing = None;
    let wrong_token = format!("Bearer {}x", app.token);
    let revoked_token = format!("Bearer {revoked}");
    let basic = format!("Basic {}", app.token);
    let refused: [(Option<&str>, &str); 6] = [
        (missing, "Bearer"),
        (Some("Bearer"), "Bearer error=\"invalid_token\""),
        (Some("Bearer "), "Bearer error=\"invalid_token\""),
        (Some(&basic), "Bearer error=\"invalid_token\""),
        (Some(&wrong_token), "Bearer error=\"invalid_token\""),
        (Some(&revoked_token), "Bearer error=\"invalid_token\""),
    ];
    for (auth, challenge) in refused {
        for (call, req) in gateway_calls(&app, &app.anon, &id, auth) {
            let r = raw(req).await;
            assert_eq!(r.status, 401, "{call} with {auth:?}: {}", r.body);
            assert_eq!(code(&r), "unauthenticated", "{call} with {auth:?}");
            assert_eq!(
                r.challenge.as_deref(),
                Some(challenge),
                "{call} with {auth:?}"
            );
        }
    }
    // Nothing was created, withdrawn or collected by any of that.
    assert_eq!(app.state.store().pending_count().unwrap(), 1);
    assert_eq!(app.audit_lines("request").len(), 1);

    // The live token works for each call; the scheme is case-insensitive.
    let lower = format!("bearer {}", app.token);
    let r = raw(app
        .anon
        .get(app.url(&format!("/v1/approvals/{id}")))
        .header("authorization", lower))
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for (call, req) in gateway_calls(&app, &app.http, &id, None) {
        let r = raw(req).await;
        assert!(
            r.status != 401 && r.challenge.is_none(),
            "{call}: {} {}",
            r.status,
            r.body
        );
    }
}

#[tokio::test]
async fn another_gateways_approval_is_answered_exactly_like_an_unknown_id() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let (_, other) = app.other_gateway("other").await;
    let pending = app.create_pending(json!({"to": "A"})).await;
    let approved = app.create_pending(json!({"to": "B"})).await;
    assert_eq!(
        alice
            .decide(&app, &approved, Decision::Approved)
            .await
            .status,
        200
    );
    // The real fingerprint, so only ownership can refuse the grant below.
    let fingerprint = fingerprint_of("payments.transfer", json!({"to": "B"}));
    let unknown = "apv_AAAAAAAAAAAAAAAAAAAAAA";

    for id in [&pending, &approved] {
        let theirs = [
            raw(other.get(app.url(&format!("/v1/approvals/{id}")))).await,
            raw(other.get(app.url(&format!("/v1/approvals/{id}?wait=5")))).await,
            raw(other.post(app.url(&format!("/v1/approvals/{id}/withdraw")))).await,
            raw(other
                .post(app.url(&format!("/v1/approvals/{id}/grant")))
                .json(&json!({"fingerprint": fingerprint})))
            .await,
        ];
        let none = [
            raw(other.get(app.url(&format!("/v1/approvals/{unknown}")))).await,
            raw(other.get(app.url(&format!("/v1/approvals/{unknown}?wait=5")))).await,
            raw(other.post(app.url(&format!("/v1/approvals/{unknown}/withdraw")))).await,
            raw(other
                .post(app.url(&format!("/v1/approvals/{unknown}/grant")))
                .json(&json!({"fingerprint": fingerprint})))
            .await,
        ];
        for (t, n) in theirs.iter().zip(&none) {
            assert_eq!(t.status, 404, "{}", t.body);
            assert_eq!(t.body, n.body, "byte-identical to an unknown id");
        }
    }
    // `tool_name: null` is refused, not read as absent: absent skips the grant's tool check.
    let null_tool = app
        .post(
            &format!("/v1/approvals/{approved}/grant"),
            &json!({"fingerprint": fingerprint, "tool_name": null}),
        )
        .await;
    assert_eq!(null_tool.status, 422, "{:?}", null_tool.body);
    assert!(
        null_tool.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tool_name")),
        "{:?}",
        null_tool.body
    );
    // The owner still has everything: the pending request, the decided one and its grant.
    assert_eq!(
        app.get(&format!("/v1/approvals/{pending}")).await.body["status"],
        "PENDING"
    );
    let g = app
        .post(
            &format!("/v1/approvals/{approved}/grant"),
            &json!({"fingerprint": fingerprint}),
        )
        .await;
    assert_eq!(g.status, 200, "{:?}", g.body);
    let w = app
        .post(&format!("/v1/approvals/{pending}/withdraw"), &json!({}))
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);
}

#[tokio::test]
async fn request_withdrawal_and_grant_lines_name_the_gateway_and_the_log_verifies() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let withdrawn = app.create_pending(json!({"to": "A"})).await;
    let w = app
        .post(&format!("/v1/approvals/{withdrawn}/withdraw"), &json!({}))
        .await;
    assert_eq!(w.status, 200, "{:?}", w.body);
    let r = app.create("read_file", json!({"path": "/tmp/x"})).await;
    assert_eq!(r.body["status"], "APPROVED");
    let id = r.body["approval_id"].as_str().unwrap();
    let fingerprint = fingerprint_of("read_file", json!({"path": "/tmp/x"}));
    let g = app
        .post(
            &format!("/v1/approvals/{id}/grant"),
            &json!({"fingerprint": fingerprint}),
        )
        .await;
    assert_eq!(g.status, 200, "{:?}", g.body);

    let requests = app.audit_lines("request");
    assert_eq!(requests.len(), 2);
    assert!(
        requests.iter().all(|l| l["gateway"] == GATEWAY),
        "{requests:?}"
    );
    let settlements = app.audit_lines("settlement");
    assert_eq!(settlements.len(), 1);
    assert_eq!(settlements[0]["reason_code"], "cancelled");
    assert_eq!(settlements[0]["gateway"], GATEWAY);
    let grants = app.audit_lines("grant");
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0]["gateway"], GATEWAY);
    // An expiry is no gateway's doing: its settlement line names none.
    let expiring = app.create_pending(json!({"to": "C"})).await;
    app.advance(301);
    app.state.expire_overdue().await.unwrap();
    let expired: Vec<Value> = app
        .audit_lines("settlement")
        .into_iter()
        .filter(|l| l["approval_id"] == expiring.as_str())
        .collect();
    assert_eq!(expired.len(), 1);
    assert!(expired[0].get("gateway").is_none());
    let report = app.audit();
    assert!(report.is_valid(), "{report:?}");
}

#[tokio::test]
async fn the_registry_is_for_gateways_unless_published() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    for path in ["/v1/registry", "/v1/credentials"] {
        let r = raw(app.anon.get(app.url(path))).await;
        assert_eq!(r.status, 401, "{path}: {}", r.body);
        assert_eq!(code(&r), "unauthenticated");
        assert_eq!(r.challenge.as_deref(), Some("Bearer"));
        let r = app.get(path).await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(r.body["credentials"].as_array().map(Vec::len), Some(1));
    }

    let mut published = config();
    published.publish_registry = true;
    let app = TestApp::start(published, &[&alice]).await;
    for path in ["/v1/registry", "/v1/credentials"] {
        let r = raw(app.anon.get(app.url(path))).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
}

#[tokio::test]
async fn agent_id_tool_name_and_severity_are_bounded() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let create = |agent: String, tool: String, severity: Option<&str>| {
        let mut body = json!({"agent_id": agent, "tool_name": tool, "params": {}});
        if let Some(s) = severity {
            body["severity"] = json!(s);
        }
        body
    };
    let limit = countersign_server::MAX_AGENT_TOOL_BYTES;
    // At the limit (counted in bytes: "é" is two), accepted.
    let at_limit = "é".repeat(limit / 2);
    for body in [
        create(at_limit.clone(), "t".into(), None),
        create("a".into(), at_limit.clone(), None),
    ] {
        let r = app.post("/v1/approvals", &body).await;
        assert_eq!(r.status, 200, "{:?}", r.body);
    }
    for severity in ["low", "normal", "high", "critical"] {
        let r = app
            .post(
                "/v1/approvals",
                &create("a".into(), "t".into(), Some(severity)),
            )
            .await;
        assert_eq!(r.status, 200, "{severity}: {:?}", r.body);
        let id = r.body["approval_id"].as_str().unwrap();
        let summary = app.get(&format!("/v1/web/approvals/{id}/summary")).await;
        assert_eq!(summary.body["severity"], severity);
    }

    let over = format!("{at_limit}x");
    let refused = [
        (create(over.clone(), "t".into(), None), "agent_id"),
        (create("a".into(), over, None), "tool_name"),
        (create(String::new(), "t".into(), None), "agent_id"),
        (create("a".into(), String::new(), None), "tool_name"),
        (create("a\nb".into(), "t".into(), None), "agent_id"),
        (create("a".into(), "t\u{7}".into(), None), "tool_name"),
        (create("a".into(), "t\u{9b}".into(), None), "tool_name"),
        (create("a".into(), "t".into(), Some("urgent")), "severity"),
        (create("a".into(), "t".into(), Some("HIGH")), "severity"),
        (create("a".into(), "t".into(), Some("")), "severity"),
    ];
    let before = app.audit_lines("request").len();
    for (body, member) in refused {
        let r = app.post("/v1/approvals", &body).await;
        assert_eq!(r.status, 400, "{member}: {:?}", r.body);
        assert_eq!(r.body["error"]["code"], "invalid_request");
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.starts_with(member), "{member}: {message}");
    }
    assert_eq!(app.audit_lines("request").len(), before, "nothing recorded");
    // A 1.9 MB agent_id is refused without being stored or echoed.
    let huge = create("x".repeat(1_900_000), "t".into(), None);
    let r = raw(app.http.post(app.url("/v1/approvals")).json(&huge)).await;
    assert_eq!(r.status, 400);
    assert!(r.body.len() < 300, "{} bytes", r.body.len());
}

#[tokio::test]
async fn a_gateway_added_or_revoked_in_the_store_is_seen_without_a_restart() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    // Written to the store directly, as `countersign gateway add` does from another process.
    let now = 1_800_000_000_000;
    let token = countersign_server::gateways::add(app.state.store().as_ref(), "cli", now).unwrap();
    let client = TestApp::client_with(&token);
    let probe = |c: &reqwest::Client| raw(c.get(app.url("/v1/approvals/apv_unknown")));
    assert_eq!(probe(&client).await.status, 401, "not loaded yet");
    assert!(
        app.state.refresh_registry().await.unwrap(),
        "the version moved"
    );
    assert_eq!(probe(&client).await.status, 404, "known now");

    assert_eq!(
        countersign_server::gateways::revoke(app.state.store().as_ref(), "cli", now).unwrap(),
        countersign_server::store::RevokeOutcome::Revoked
    );
    assert!(app.state.refresh_registry().await.unwrap());
    assert_eq!(probe(&client).await.status, 401, "revoked");
    // The test gateway was never affected.
    assert_eq!(probe(&app.http).await.status, 404);
}

#[tokio::test]
async fn a_refresh_that_fails_part_way_is_redone_on_the_next_one() {
    // A file database, so that another connection can take the gateways table away for a
    // moment (as a restarting database fails one read of several).
    let dir = std::env::temp_dir().join(format!("countersign-gw-refresh-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.sqlite");
    let _ = std::fs::remove_file(&path);
    let sealer = AuditSealer::from_seed([42; 32]);
    let store = SqliteStore::open(&path, sealer.clone(), Durability::Normal).unwrap();
    let state = AppState::new(StateParts {
        config: config(),
        public_url: "http://127.0.0.1:1".into(),
        store: Arc::new(store),
        clock: Arc::new(SystemClock),
        sealer,
        mirror: None,
    })
    .unwrap();
    // Another process adds a gateway (the credentials version moves) …
    let token =
        countersign_server::gateways::add(state.store().as_ref(), "late", 1_800_000_000_000)
            .unwrap();
    // … and the refresh that sees the new version reads the credentials but not the gateways.
    let other = rusqlite::Connection::open(&path).unwrap();
    other
        .execute_batch("ALTER TABLE gateways RENAME TO gateways_away")
        .unwrap();
    let failed = state.refresh_registry().await;
    assert!(failed.is_err(), "the gateways read failed: {failed:?}");
    assert!(state.gateway_of_token(&token).is_none());
    other
        .execute_batch("ALTER TABLE gateways_away RENAME TO gateways")
        .unwrap();
    // The failed refresh did not record the version as loaded: the next one loads it all.
    assert!(state.refresh_registry().await.unwrap(), "reloaded");
    assert_eq!(state.gateway_of_token(&token).as_deref(), Some("late"));
    assert!(!state.refresh_registry().await.unwrap(), "now up to date");
    drop(other);
    let _ = std::fs::remove_dir_all(&dir);
}
