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

#[tokio::test]
async fn a_receiver_that_fails_for_a_while_still_gets_the_notification_once() {
    // The receiver answers 503 twice (restarting, say), then accepts.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(u16, Option<String>, String)>();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let hook = format!("http://{}/hook", listener.local_addr().unwrap());
    let router = Router::new().route(
        "/hook",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let (tx, calls) = (tx.clone(), calls.clone());
            async move {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let status = if n < 2 { 503 } else { 200 };
                let key = headers
                    .get("idempotency-key")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let _ = tx.send((status, key, body));
                axum::http::StatusCode::from_u16(status).unwrap()
            }
        }),
    );
    let server = tokio::spawn(async move { axum::serve(listener, router).await });

    let mut config = config();
    config.webhook_url = Some(hook);
    let app = TestApp::start(config, &[&Approver::alice()]).await;
    let id = app.create_pending(json!({"to": "A"})).await;
    // Bounded waits for the asynchronous attempts (about 1.5 s of backoff in all); the
    // assertions are on what arrived, not on when.
    let mut attempts = Vec::new();
    while attempts.last().is_none_or(|(status, _, _)| *status != 200) {
        let next = tokio::time::timeout(Duration::from_secs(60), rx.recv())
            .await
            .expect("another attempt")
            .expect("channel open");
        attempts.push(next);
    }
    let statuses: Vec<u16> = attempts.iter().map(|(s, _, _)| *s).collect();
    assert_eq!(statuses, [503, 503, 200]);
    for (_, key, body) in &attempts {
        assert_eq!(key.as_deref(), Some(id.as_str()), "one idempotency key");
        assert_eq!(body, &attempts[0].2, "the same body every time");
    }
    // The two failed attempts were counted before the third was sent (the delivered one may
    // still be on its way back, so it is not asserted).
    let metrics = app.get_text("/metrics").await;
    assert!(
        metrics.contains("countersign_webhook_attempts_total{outcome=\"status_5xx\"} 2"),
        "{metrics}"
    );
    server.abort();
}
