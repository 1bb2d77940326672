//! Service metadata: health, the OpenAPI document, the registry to trust, the audit key.

use super::approvals::RegistryReader;
use crate::error::ApiError;
use crate::service::AppState;
use axum::extract::State;
use axum::http::header;
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
        .route("/openapi.json", get(openapi))
        .route("/v1/registry", get(registry))
        .route("/v1/service-key", get(service_key))
        .route("/v1/audit/head", get(audit_head))
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
    }))
}

/// The audit chain head: compare with `audit verify`'s `head` to detect a truncated tail.
async fn audit_head(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let (seq, hash) = state.blocking(|s| s.audit_head()).await?;
    Ok(Json(
        json!({"seq": seq, "head": countersign::b64::encode(&hash)}),
    ))
}
