//! The gateway client against the real service, and against a service that never answers.

use crate::support::{Approver, TestApp, config};
use countersign::{
    AssuranceLevel, CredentialRegistry, Decision, Policy, ReasonCode, RegistryDocument,
};
use countersign_client::{Gateway, GatewayConfig, GatewayToken, ReplayStore, ToolCall};
use countersign_testkit::{ORIGIN, RP_ID};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// A webhook receiver: the approver learns the approval id the way a real one would.
async fn webhook() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    use axum::routing::post;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let router = axum::Router::new().route(
        "/hook",
        post(move |axum::Json(v): axum::Json<Value>| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(v);
                "ok"
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, rx)
}

async fn app_with_webhook(
    enrolled: &[&Approver],
) -> (TestApp, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (url, rx) = webhook().await;
    let mut config = config();
    config.webhook_url = Some(url);
    (TestApp::start(config, enrolled).await, rx)
}

fn gateway(app: &TestApp, registry: RegistryDocument, policy: Policy) -> Gateway {
    gateway_with(app, &app.token, registry, policy, ReplayStore::memory())
}

fn gateway_with(
    app: &TestApp,
    token: &str,
    registry: RegistryDocument,
    policy: Policy,
    replay: ReplayStore,
) -> Gateway {
    let config = GatewayConfig::new(
        app.base.parse().unwrap(),
        GatewayToken::new(token).unwrap(),
        Duration::from_secs(10),
    );
    let clock = app.clock.clone();
    Gateway::new(
        config,
        policy,
        CredentialRegistry::from_document(registry).unwrap(),
        replay,
    )
    .with_clock(move || countersign_server::Clock::now(clock.as_ref()))
}

/// A fresh directory for a gateway's replay store.
fn state_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("cs-gw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A well-formed token for services that never check it.
fn token() -> GatewayToken {
    GatewayToken::new("csg_unused").unwrap()
}

fn call(dest: &str) -> ToolCall {
    ToolCall::new(
        "agent-7",
        "payments.transfer",
        &json!({"to": dest, "amount": "40000.00"}),
    )
}

/// The approver side, driven by the webhook: decide the next notified approval.
async fn approve_next(
    app: &TestApp,
    approver: &Approver,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Value>,
    decision: Decision,
) {
    let note = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    let id = note["approval_id"].as_str().unwrap().to_owned();
    let r = approver.decide(app, &id, decision).await;
    assert_eq!(r.status, 200, "{r:?}");
}

fn registry_of(approvers: &[&Approver]) -> RegistryDocument {
    countersign_testkit::registry(approvers.iter().map(|a| a.record()))
}

#[tokio::test]
async fn the_gateway_holds_verifies_and_collects_the_grant() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    let gw = gateway(&app, registry_of(&[&alice]), Policy::new(RP_ID, [ORIGIN]));
    let the_call = call("A");
    let (grant, ()) = tokio::join!(
        gw.authorize(&the_call),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let grant = grant.unwrap();
    assert_eq!(grant.fingerprint, gw.fingerprint(&the_call).unwrap());
    // The grant comes with the service's signed checkpoint covering it.
    let note = grant.checkpoint.as_deref().unwrap();
    let cp = countersign_audit::Checkpoint::verify(note, &app.sealer.public_key(), None);
    assert!(cp.unwrap().size >= 4, "request, outcome, decision, grant");
    // Permission is an event: the same approval cannot be collected again.
    let again = app
        .post(
            &format!("/v1/approvals/{}/grant", grant.approval_id),
            &json!({"fingerprint": grant.fingerprint}),
        )
        .await;
    assert_eq!(again.status, 409);
}

/// The service names itself `http://127.0.0.1:PORT` (its public_url here); a gateway told
/// `http://localhost:PORT` is asking the same service, and follows its redrive URL there.
#[tokio::test]
async fn a_gateway_naming_the_loopback_service_localhost_is_answered_not_refused() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    let base = app.base.replace("127.0.0.1", "localhost");
    let config = GatewayConfig::new(
        base.parse().unwrap(),
        GatewayToken::new(app.token.as_str()).unwrap(),
        Duration::from_secs(10),
    );
    let clock = app.clock.clone();
    let gw = Gateway::new(
        config,
        Policy::new(RP_ID, [ORIGIN]),
        CredentialRegistry::from_document(registry_of(&[&alice])).unwrap(),
        ReplayStore::memory(),
    )
    .with_clock(move || countersign_server::Clock::now(clock.as_ref()));
    let the_call = call("A");
    let (grant, ()) = tokio::join!(
        gw.authorize(&the_call),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    assert!(grant.is_ok(), "{:?}", grant.err());
}

#[tokio::test]
async fn the_gateway_refuses_what_its_own_trust_refuses() {
    let alice = Approver::alice();
    let bob = Approver::bob();
    let (app, mut rx) = app_with_webhook(&[&alice, &bob]).await;

    let call_a = call("A");
    // A refusal is a refusal.
    let gw = gateway(
        &app,
        registry_of(&[&alice, &bob]),
        Policy::new(RP_ID, [ORIGIN]),
    );
    let (r, ()) = tokio::join!(
        gw.authorize(&call_a),
        approve_next(&app, &alice, &mut rx, Decision::Denied)
    );
    assert_eq!(r.unwrap_err().reason_code, ReasonCode::ApproverRefused);

    // A registry the gateway trusts without bob: bob's approval is not evidence here.
    let gw = gateway(&app, registry_of(&[&alice]), Policy::new(RP_ID, [ORIGIN]));
    let (r, ()) = tokio::join!(
        gw.request_approval(&call_a),
        approve_next(&app, &bob, &mut rx, Decision::Approved)
    );
    assert_eq!(r.unwrap_err().reason_code, ReasonCode::CredentialUnknown);

    // A policy hardened since: the service accepted AAL2, the gateway now demands AAL3.
    let mut hard = Policy::new(RP_ID, [ORIGIN]);
    hard.min_assurance = Some(AssuranceLevel::Aal3);
    let gw = gateway(&app, registry_of(&[&alice]), hard);
    let (r, ()) = tokio::join!(
        gw.authorize(&call_a),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let refusal = r.unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::InsufficientAssurance);
    // Nothing was collected on the refused approval.
    let id = refusal.approval_id.unwrap();
    assert!(
        app.audit_lines("grant")
            .iter()
            .all(|g| g["approval_id"] != id.as_str())
    );

    // A grant is collected only for the call that was approved.
    let gw = gateway(&app, registry_of(&[&alice]), Policy::new(RP_ID, [ORIGIN]));
    let (approval, ()) = tokio::join!(
        gw.request_approval(&call_a),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let approval = approval.unwrap();
    let swapped = gw.collect_grant(&approval, &call("B")).await.unwrap_err();
    assert_eq!(swapped.reason_code, ReasonCode::BindingMismatch);
    assert!(gw.collect_grant(&approval, &call("A")).await.is_ok());
}

#[tokio::test]
async fn the_client_sends_its_token_and_another_gateway_cannot_use_its_approval() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    let trust = || registry_of(&[&alice]);

    // A wrong token gets nothing: no request is even created.
    let stranger = gateway_with(
        &app,
        "csg_not-a-token",
        trust(),
        Policy::new(RP_ID, [ORIGIN]),
        ReplayStore::memory(),
    );
    let refusal = stranger.authorize(&call("A")).await.unwrap_err();
    assert!(
        refusal.detail.starts_with("401") && refusal.detail.contains("unauthenticated"),
        "{refusal:?}"
    );
    assert_eq!(app.state.store().pending_count().unwrap(), 0);

    // Our gateway gets an approval; another live gateway holding its id cannot collect it.
    let ours = gateway(&app, trust(), Policy::new(RP_ID, [ORIGIN]));
    let call_a = call("A");
    let (approval, ()) = tokio::join!(
        ours.request_approval(&call_a),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let approval = approval.unwrap();
    let (other_token, _) = app.other_gateway("other").await;
    let other = gateway_with(
        &app,
        &other_token,
        trust(),
        Policy::new(RP_ID, [ORIGIN]),
        ReplayStore::memory(),
    );
    let taken = other
        .collect_grant(&approval, &call("A"))
        .await
        .unwrap_err();
    assert!(
        taken.detail.starts_with("404") && taken.detail.contains("not_found"),
        "{taken:?}"
    );
    // The real gateway's grant is still there.
    assert!(ours.collect_grant(&approval, &call("A")).await.is_ok());
}

#[tokio::test]
async fn an_unanswered_request_expires_as_denied() {
    let alice = Approver::alice();
    let app = TestApp::default_with(&[&alice]).await;
    let gw = Arc::new(gateway(
        &app,
        registry_of(&[&alice]),
        Policy::new(RP_ID, [ORIGIN]),
    ));
    let g = gw.clone();
    let held = tokio::spawn(async move { g.authorize(&call("A")).await });
    // Wait until the request exists, then let its window close.
    loop {
        if app.state.store().pending_count().unwrap() == 1 {
            break;
        }
        tokio::task::yield_now().await;
    }
    app.advance(301);
    app.state.expire_overdue().await.unwrap();
    let refusal = held.await.unwrap().unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::ExpiredUnanswered);
}

#[tokio::test]
async fn a_callback_that_never_answers_is_a_timeout_deny() {
    // Accepts connections and never writes a byte.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let silent = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let config = GatewayConfig::new(base.parse().unwrap(), token(), Duration::from_millis(300));
    let gw = Gateway::new(
        config,
        Policy::new(RP_ID, [ORIGIN]),
        CredentialRegistry::default(),
        ReplayStore::memory(),
    );
    let refusal = gw.authorize(&call("A")).await.unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::CallbackTimeout);
    silent.abort();

    // Nobody listening at all is no answer either.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let gw = Gateway::new(
        GatewayConfig::new(url.parse().unwrap(), token(), Duration::from_millis(300)),
        Policy::new(RP_ID, [ORIGIN]),
        CredentialRegistry::default(),
        ReplayStore::memory(),
    );
    assert_eq!(
        gw.authorize(&call("A")).await.unwrap_err().reason_code,
        ReasonCode::CallbackTimeout
    );
}

#[tokio::test]
async fn a_restarted_gateway_refuses_evidence_it_already_accepted() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    let dir = state_dir("restart");
    let registry = registry_of(&[&alice]);
    let the_call = call("A");
    let first = gateway_with(
        &app,
        &app.token,
        registry.clone(),
        Policy::new(RP_ID, [ORIGIN]),
        ReplayStore::sqlite(&dir).unwrap(),
    );
    let (approval, ()) = tokio::join!(
        first.request_approval(&the_call),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let approval = approval.unwrap();
    drop(first);

    // The same process restarted over the same directory: the identical call, with the
    // identical evidence, is a replay.
    let restarted = gateway_with(
        &app,
        &app.token,
        registry.clone(),
        Policy::new(RP_ID, [ORIGIN]),
        ReplayStore::sqlite(&dir).unwrap(),
    );
    let refusal = restarted
        .verify_result(&the_call, approval.result.clone())
        .unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::Replayed, "{refusal}");

    // Why the default is durable: an in-memory state forgets, and accepts it again.
    let forgetful = gateway(&app, registry, Policy::new(RP_ID, [ORIGIN]));
    assert!(forgetful.verify_result(&the_call, approval.result).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn params_are_sent_as_the_exact_text_the_gateway_runs() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    let gw = gateway(&app, registry_of(&[&alice]), Policy::new(RP_ID, [ORIGIN]));
    // Re-parsed into a serde_json::Value, `-0` would be sent as `-0.0`: a float, which the
    // tool-call profile refuses, although the gateway's own admission accepts `-0`.
    let the_call = ToolCall::raw("agent-7", "payments.transfer", r#"{"n":-0, "to" : "A"}"#);
    let (grant, ()) = tokio::join!(
        gw.authorize(&the_call),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let grant = grant.unwrap();
    assert_eq!(grant.fingerprint, gw.fingerprint(&the_call).unwrap());
    // Not JSON at all is refused before anything is sent.
    let broken = ToolCall::raw("agent-7", "payments.transfer", "{");
    assert_eq!(
        gw.authorize(&broken).await.unwrap_err().reason_code,
        ReasonCode::ActionInadmissible
    );
}

#[tokio::test]
async fn a_typed_profile_approval_is_granted_only_to_the_tool_it_was_verified_for() {
    let alice = Approver::alice();
    let (app, mut rx) = app_with_webhook(&[&alice]).await;
    // The gateway binds the payment profile to its tool, as the service does.
    let mut policy = Policy::new(RP_ID, [ORIGIN]);
    policy
        .profile_tools
        .insert("countersign.payment/1".into(), "payments.transfer".into());
    let gw = gateway(&app, registry_of(&[&alice]), policy);
    let params = countersign_testkit::payment_fields("A").to_string();
    let mut pay = ToolCall::raw("agent-7", "payments.transfer", params.clone());
    pay.profile = Some("countersign.payment/1".into());
    let (approval, ()) = tokio::join!(
        gw.request_approval(&pay),
        approve_next(&app, &alice, &mut rx, Decision::Approved)
    );
    let approval = approval.unwrap();
    // The same payment under another tool name: the fingerprint is the same, the tool is not.
    let mut other = pay.clone();
    other.tool_name = "payments.transfer.v2".into();
    assert_eq!(gw.fingerprint(&other), gw.fingerprint(&pay));
    let refusal = gw.collect_grant(&approval, &other).await.unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::BindingMismatch);
    // And its evidence does not verify for that tool either.
    let refusal = gw
        .verify_result(&other, approval.result.clone())
        .unwrap_err();
    assert_eq!(refusal.reason_code, ReasonCode::ActionInadmissible);
    assert!(gw.collect_grant(&approval, &pay).await.is_ok());
}
