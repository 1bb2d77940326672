//! `/v1/approvals`: what a gateway calls.

use super::{Body, PathArg, QueryArg};
use crate::error::ApiError;
use crate::service::{AppState, CreateRequest, GrantReceipt, GrantRequest};
use axum::extract::State;
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::ApprovalResult;
use serde::Deserialize;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/approvals", post(create))
        .route("/v1/approvals/{id}", get(redrive))
        .route("/v1/approvals/{id}/withdraw", post(withdraw))
        .route("/v1/approvals/{id}/grant", post(grant))
}

async fn create(
    State(state): State<AppState>,
    Body(req): Body<CreateRequest>,
) -> Result<Json<ApprovalResult>, ApiError> {
    state.create(req).await.map(Json)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    wait: Option<u64>,
}

async fn redrive(
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
    QueryArg(q): QueryArg<WaitQuery>,
) -> Result<Json<ApprovalResult>, ApiError> {
    state.redrive(&id, q.wait).await.map(Json)
}

async fn withdraw(
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
) -> Result<Json<ApprovalResult>, ApiError> {
    state.withdraw(&id).await.map(Json)
}

async fn grant(
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
    Body(req): Body<GrantRequest>,
) -> Result<Json<GrantReceipt>, ApiError> {
    state.collect_grant(&id, req).await.map(Json)
}
