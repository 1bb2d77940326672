//! `/v1/enroll`: the registration ceremony behind an invite link, and `/v1/credentials`, the
//! published registry of enrolled public keys.

use super::Body;
use super::approvals::RegistryReader;
use super::web::Attempt;
use crate::enroll::EnrolledSummary;
use crate::error::ApiError;
use crate::service::{AppState, EnrollFinish, EnrollOptions, EnrollStart};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::RegistryDocument;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/enroll/start", post(start))
        .route("/v1/enroll/finish", post(finish))
        .route("/v1/credentials", get(credentials))
}

async fn start(
    State(state): State<AppState>,
    _: Attempt,
    headers: HeaderMap,
    Body(req): Body<EnrollStart>,
) -> Result<Json<EnrollOptions>, ApiError> {
    let hints = super::web::hints(&state, &headers);
    state.enroll_start(req, &hints).await.map(Json)
}

async fn finish(
    State(state): State<AppState>,
    _: Attempt,
    Body(req): Body<EnrollFinish>,
) -> Result<Json<EnrolledSummary>, ApiError> {
    state.enroll_finish(req).await.map(Json)
}

/// The same document as `/v1/registry` and `countersign registry export`: what `countersign
/// verify` takes as its `registry`. It names every principal (an org chart of who can approve
/// what, and a list of phishing targets), so only gateways read it unless the operator sets
/// `publish_registry = true`.
async fn credentials(
    _: RegistryReader,
    State(state): State<AppState>,
) -> Result<Json<RegistryDocument>, ApiError> {
    state.registry_document().await.map(Json)
}
