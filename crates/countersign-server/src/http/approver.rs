//! `/v1/approver`: what the approver page and the CLI approver call.

use super::{Body, PathArg};
use crate::error::ApiError;
use crate::service::{
    AppState, AssertionBody, DecisionChallenge, LoginChallenge, LoginResponse, ReviewView,
};
use crate::store::Session;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::{ApprovalResult, Decision};
use serde::Deserialize;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/approver/login/challenge", post(login_challenge))
        .route("/v1/approver/login", post(login))
        .route("/v1/approver/logout", post(logout))
        .route("/v1/approver/approvals/{id}", get(review))
        .route("/v1/approver/approvals/{id}/challenge", post(challenge))
        .route("/v1/approver/approvals/{id}/decision", post(decide))
        .route("/v1/approver/approvals/{id}/extend", post(extend))
        .route("/v1/approver/inbox", get(inbox))
        .route(
            "/v1/approver/standing-grants/{id}/revoke",
            post(revoke_standing),
        )
}

async fn extend(
    State(state): State<AppState>,
    Approver(session): Approver,
    PathArg(id): PathArg<String>,
    Body(body): Body<crate::service::ExtendRequest>,
) -> Result<Json<crate::service::Extended>, ApiError> {
    state.extend(&id, body, &session).await.map(Json)
}

async fn inbox(
    State(state): State<AppState>,
    Approver(session): Approver,
) -> Result<Json<crate::service::Inbox>, ApiError> {
    state.inbox(&session).await.map(Json)
}

async fn revoke_standing(
    State(state): State<AppState>,
    Approver(session): Approver,
    PathArg(id): PathArg<String>,
) -> Result<Json<crate::service::StandingView>, ApiError> {
    state.revoke_standing(&id, &session).await.map(Json)
}

/// An authenticated approver (`Authorization: Bearer <token>`).
struct Approver(Session);

fn bearer(parts: &Parts) -> Result<&str, ApiError> {
    parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .ok_or_else(|| ApiError::unauthorized("missing bearer token"))
}

impl FromRequestParts<AppState> for Approver {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        state.authenticate(bearer(parts)?).await.map(Self)
    }
}

/// A bearer token, live or not (logout accepts either).
struct Token(String);

impl FromRequestParts<AppState> for Token {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        bearer(parts).map(|t| Self(t.to_owned()))
    }
}

/// Sign-in endpoints are rate limited per client address, with the page's budget
/// ([`super::web::SignInAttempt`]): a bearer client gets no more guesses than a browser.
async fn login_challenge(
    State(state): State<AppState>,
    _: super::web::SignInAttempt,
) -> Result<Json<LoginChallenge>, ApiError> {
    state.login_challenge().await.map(Json)
}

async fn login(
    State(state): State<AppState>,
    _: super::web::SignInAttempt,
    Body(body): Body<AssertionBody>,
) -> Result<Json<LoginResponse>, ApiError> {
    state.login(body).await.map(Json)
}

/// End the session on the server: the token opens nothing afterwards. 204 whether or not the
/// token was live.
async fn logout(
    State(state): State<AppState>,
    Token(token): Token,
) -> Result<axum::http::StatusCode, ApiError> {
    state.logout(&token).await?;
    Ok(axum::http::StatusCode::NO_CONTENT)
}

async fn review(
    State(state): State<AppState>,
    Approver(session): Approver,
    PathArg(id): PathArg<String>,
) -> Result<Json<ReviewView>, ApiError> {
    state.review(&id, &session).await.map(Json)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChallengeRequest {
    decision: Decision,
}

async fn challenge(
    State(state): State<AppState>,
    Approver(session): Approver,
    PathArg(id): PathArg<String>,
    Body(req): Body<ChallengeRequest>,
) -> Result<Json<DecisionChallenge>, ApiError> {
    state
        .decision_challenge(&id, req.decision, &session)
        .await
        .map(Json)
}

async fn decide(
    State(state): State<AppState>,
    Approver(session): Approver,
    PathArg(id): PathArg<String>,
    Body(body): Body<AssertionBody>,
) -> Result<Json<ApprovalResult>, ApiError> {
    let result = state.decide(&id, body, &session).await?;
    super::trace::log_result("decision recorded", &result);
    Ok(Json(result))
}
