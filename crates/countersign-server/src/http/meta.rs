//! Service metadata: health, the OpenAPI document, the registry to trust, the audit key. The
//! audit log's own endpoints are in `audit`.

use super::approvals::RegistryReader;
use crate::error::{ApiError, ErrorCode};
use crate::service::AppState;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use countersign::RegistryDocument;
use serde_json::{Value, json};

/// The OpenAPI document (docs/API.md describes the same surface in prose).
pub(crate) const OPENAPI: &str = include_str!("openapi.json");

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/openapi.json", get(openapi))
        .route("/v1/registry", get(registry))
        .route("/v1/service-key", get(service_key))
}

/// Readiness, unlike `/healthz` (the process answers): the store is reachable, its schema is
/// current and the audit chain accepts a write. 503 with the reason otherwise, so a load
/// balancer stops routing here while the process stays up to recover.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let store = state.store().clone();
    // The store's own message ("database is locked", "connection refused"): this answer is for
    // the operator and the load balancer, and says which check failed without a log search.
    let outcome = match tokio::task::spawn_blocking(move || store.ready()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("the readiness probe did not finish".to_owned()),
    };
    match outcome {
        Ok(()) => (StatusCode::OK, Json(json!({"status": "ready"}))),
        Err(detail) => {
            tracing::warn!(%detail, "not ready");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(
                    json!({"status": "not_ready", "code": ErrorCode::NotReady.as_str(), "detail": detail}),
                ),
            )
        }
    }
}

/// Prometheus text exposition. Unauthenticated like `/healthz`: it carries counts, reason codes
/// and configured tool names only, never request data; restrict it at the network edge if
/// even those should stay private (docs/OPERATIONS.md §6).
async fn metrics(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let text = state.metrics_text().await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    ))
}

async fn openapi() -> impl IntoResponse {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI)
}

/// Gated like `/v1/credentials` (see [`RegistryReader`]).
async fn registry(
    _: RegistryReader,
    State(state): State<AppState>,
) -> Result<Json<RegistryDocument>, ApiError> {
    state.registry_document().await.map(Json)
}

async fn service_key(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "algorithm": "Ed25519",
        "public_key": state.service_key(),
        "purpose": "audit log signatures (countersign audit verify --key)",
        // The same key as a C2SP note verifier key named by the checkpoint origin: what a
        // witness takes (`countersign witness serve --log-key`).
        "checkpoint_vkey": state.checkpoint_vkey(),
    }))
}
