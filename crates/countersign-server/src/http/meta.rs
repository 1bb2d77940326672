//! Service metadata: health, the OpenAPI document, the registry to trust, the audit key.

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
        .route("/v1/audit/head", get(audit_head))
        .route("/v1/audit/checkpoint", get(audit_checkpoint))
        .route("/v1/audit/checkpoint/witnessed", get(witnessed_checkpoint))
        .route("/v1/audit/proof/inclusion", get(inclusion_proof))
        .route("/v1/audit/proof/consistency", get(consistency_proof))
}

#[derive(serde::Deserialize)]
struct InclusionQuery {
    seq: u64,
    size: u64,
}

#[derive(serde::Deserialize)]
struct ConsistencyQuery {
    from: u64,
    to: u64,
}

/// An RFC 9162 inclusion proof of line `seq` in the tree of the first `size` lines.
async fn inclusion_proof(
    State(state): State<AppState>,
    axum::extract::Query(q): axum::extract::Query<InclusionQuery>,
) -> Result<Json<crate::service::InclusionProof>, ApiError> {
    Ok(Json(state.inclusion_proof(q.seq, q.size).await?))
}

/// An RFC 9162 consistency proof between the trees of the first `from` and `to` lines.
async fn consistency_proof(
    State(state): State<AppState>,
    axum::extract::Query(q): axum::extract::Query<ConsistencyQuery>,
) -> Result<Json<crate::service::ConsistencyProof>, ApiError> {
    Ok(Json(state.consistency_proof(q.from, q.to).await?))
}

/// The latest checkpoint sent to the witnesses, with their cosignature lines (404 until one was
/// witnessed, or when no witness is configured).
async fn witnessed_checkpoint(
    State(state): State<AppState>,
) -> Result<impl IntoResponse, ApiError> {
    let note = state
        .witnessed_checkpoint()
        .ok_or_else(|| ApiError::not_found("witnessed checkpoint"))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        note,
    ))
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

/// The audit chain head: compare with `audit verify`'s `head` to detect a truncated tail.
async fn audit_head(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (seq, hash) = state.blocking(|s| s.audit_head()).await?;
    Ok(Json(
        json!({"seq": seq, "head": countersign::b64::encode(&hash)}),
    ))
}

/// The latest signed checkpoint of the audit log: a C2SP signed note, as text.
async fn audit_checkpoint(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let note = state.checkpoint().await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        note,
    ))
}
