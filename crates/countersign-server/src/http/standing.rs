//! `/v1/standing-grants`: a gateway proposes a standing grant for an approver to sign. The
//! proposal is then followed like any approval (`GET /v1/approvals/{id}`), and reviewed, signed
//! or refused on the approver page.

use super::Body;
use super::approvals::Gateway;
use crate::error::ApiError;
use crate::service::{AppState, StandingProposal};
use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use countersign::ApprovalResult;

pub(super) fn router() -> Router<AppState> {
    Router::new().route("/v1/standing-grants", post(propose))
}

async fn propose(
    gateway: Gateway,
    State(state): State<AppState>,
    Body(req): Body<StandingProposal>,
) -> Result<Json<ApprovalResult>, ApiError> {
    state.propose_standing(req, &gateway.0).await.map(Json)
}
