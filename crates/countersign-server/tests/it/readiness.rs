//! `GET /readyz`: 200 while the store takes writes, 503 with a JSON reason while it cannot, and
//! 200 again once it can (the process stays up throughout).

use crate::support::{START, config};
use countersign_audit::AuditSealer;
use countersign_server::config::Durability;
use countersign_server::store::SqliteStore;
use countersign_server::{AppState, ManualClock, StateParts};
use serde_json::Value;
use std::sync::Arc;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

async fn readyz(base: &str) -> (u16, Value) {
    let r = reqwest::get(format!("{base}/readyz")).await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn readyz_follows_the_stores_ability_to_write() {
    let dir = std::env::temp_dir().join(format!("countersign-readyz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("db.sqlite");
    let _ = std::fs::remove_file(&path);
    let sealer = AuditSealer::from_seed([42; 32]);
    let store = SqliteStore::open(&path, sealer.clone(), Durability::Normal).unwrap();
    let clock = Arc::new(ManualClock::new(
        OffsetDateTime::parse(START, &Rfc3339).unwrap(),
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let state = AppState::new(StateParts {
        config: config(),
        public_url: base.clone(),
        store: Arc::new(store),
        clock,
        sealer,
        mirror: None,
    })
    .unwrap();
    let router = countersign_server::build_router(state);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });

    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready");

    // Another process holds the database's write lock: no commit could happen now, so the
    // service is not ready (after its busy timeout), though /healthz still answers.
    let other = rusqlite::Connection::open(&path).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "not_ready");
    assert_eq!(body["code"], "not_ready");
    assert!(
        body["detail"].as_str().unwrap().contains("locked"),
        "{body}"
    );
    let health = reqwest::get(format!("{base}/healthz")).await.unwrap();
    assert_eq!(health.status().as_u16(), 200);

    // The lock is released: ready again, without a restart.
    other.execute_batch("ROLLBACK").unwrap();
    let (status, body) = readyz(&base).await;
    assert_eq!(status, 200, "{body}");

    server.abort();
    drop(other);
    let _ = std::fs::remove_dir_all(&dir);
}
