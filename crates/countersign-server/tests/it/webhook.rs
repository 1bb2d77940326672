//! Notifications carry a reference, never the action's parameters.

use crate::support::{Approver, TestApp, config};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test]
async fn the_webhook_carries_no_parameters() {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let router = Router::new().route(
        "/hook",
        post(move |body: String| {
            let tx = tx.clone();
            async move {
                let _ = tx.send(body);
                Json(json!({}))
            }
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let mut config = config();
    config.webhook_url = Some(hook);
    let alice = Approver::alice();
    let app = TestApp::start(config, &[&alice]).await;
    let secret = "IBAN-DE89-SECRET-370400440532013000";
    let id = app
        .create_pending(json!({"to": secret, "amount": "40000.00", "memo": "quarterly"}))
        .await;
    // A bounded wait for the delivery (it is asynchronous); the assertions are on its content.
    let body = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("webhook delivered")
        .expect("channel open");
    let v: Value = serde_json::from_str(&body).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        ["approval_id", "approver_url", "expires_at", "severity"]
    );
    assert_eq!(v["approval_id"], id.as_str());
    assert_eq!(v["severity"], "high");
    assert_eq!(
        v["approver_url"],
        app.url(&format!("/approve/{id}")).as_str()
    );
    for leak in [
        secret,
        "40000",
        "quarterly",
        "agent-7",
        "payments.transfer",
        "params",
    ] {
        assert!(!body.contains(leak), "webhook leaked {leak:?}: {body}");
    }
    // Requests settled at once notify nobody.
    let _ = app.create("read_file", json!({"path": "x"})).await;
    let r = app.create("restart_cluster", json!({})).await;
    assert_eq!(r.body["status"], "DENIED");
    let second = app.create_pending(json!({"n": "2"})).await;
    let next = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        next.contains(&second),
        "the next notification is the next PENDING one"
    );
    server.abort();
}
