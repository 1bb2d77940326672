//! `/v1/approvals`: what a gateway calls, each call authenticated by the gateway's bearer token.

use super::{Body, PathArg, QueryArg};
use crate::error::{ApiError, ErrorCode};
use crate::service::{AppState, CreateRequest, GrantReceipt, GrantRequest};
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use countersign::ApprovalResult;
use serde::Deserialize;
use std::sync::Arc;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/approvals", post(create))
        .route("/v1/approvals/{id}", get(redrive))
        .route("/v1/approvals/{id}/withdraw", post(withdraw))
        .route("/v1/approvals/{id}/grant", post(grant))
}

/// The gateway a request authenticated as (`Authorization: Bearer TOKEN`).
///
/// Handlers take it first, so an unauthenticated caller learns nothing else: not whether its
/// body would have been accepted, not whether an approval id exists.
pub(super) struct Gateway(pub(super) Arc<str>);

/// A 401 `unauthenticated` with the `WWW-Authenticate` challenge RFC 6750 asks for.
pub(super) struct Unauthenticated {
    error: ApiError,
    challenge: &'static str,
}

impl Unauthenticated {
    fn missing() -> Self {
        Self::needs(
            "this call needs a gateway token: Authorization: Bearer TOKEN \
             (countersign gateway add NAME prints one)",
        )
    }

    fn invalid() -> Self {
        Self::refused("the bearer token is not a live gateway token")
    }

    /// No credential was sent; `message` says which one this call needs.
    pub(super) fn needs(message: &'static str) -> Self {
        Self {
            error: ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthenticated,
                message,
            ),
            challenge: "Bearer",
        }
    }

    /// A credential was sent and is not one this call takes. One message for malformed,
    /// unknown, revoked and other-kind tokens alike.
    pub(super) fn refused(message: &'static str) -> Self {
        Self {
            error: ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthenticated,
                message,
            ),
            challenge: "Bearer error=\"invalid_token\"",
        }
    }
}

impl IntoResponse for Unauthenticated {
    fn into_response(self) -> Response {
        let mut response = self.error.into_response();
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static(self.challenge),
        );
        response
    }
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme is case-insensitive,
/// RFC 9110 §11.1); `Err` when there is no such header or it is not a bearer credential.
pub(super) fn bearer(headers: &HeaderMap) -> Result<Option<&str>, Unauthenticated> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Ok(None);
    };
    let text = value.to_str().map_err(|_| Unauthenticated::invalid())?;
    let (scheme, token) = text.split_once(' ').ok_or_else(Unauthenticated::invalid)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(Unauthenticated::invalid());
    }
    Ok(Some(token))
}

impl FromRequestParts<AppState> for Gateway {
    type Rejection = Unauthenticated;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Unauthenticated> {
        let token = bearer(&parts.headers)?.ok_or_else(Unauthenticated::missing)?;
        let name = state
            .gateway_of_token(token)
            .ok_or_else(Unauthenticated::invalid)?;
        super::trace::record_gateway(&name);
        Ok(Self(name))
    }
}

/// A caller allowed to read the registry: anyone when the operator publishes it
/// (`publish_registry = true`), otherwise an authenticated gateway.
pub(super) struct RegistryReader;

impl FromRequestParts<AppState> for RegistryReader {
    type Rejection = Unauthenticated;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Unauthenticated> {
        if state.config().publish_registry {
            return Ok(Self);
        }
        Gateway::from_request_parts(parts, state)
            .await
            .map(|_| Self)
    }
}

async fn create(
    gateway: Gateway,
    State(state): State<AppState>,
    Body(req): Body<CreateRequest>,
) -> Result<Json<ApprovalResult>, ApiError> {
    let result = state.create(req, &gateway.0).await?;
    if let Some(id) = &result.approval_id {
        super::trace::record_approval(id);
    }
    super::trace::log_result("approval created", &result);
    Ok(Json(result))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitQuery {
    wait: Option<u64>,
}

/// A settled result with the tlog-proof of the line that settled it (docs/API.md).
#[derive(serde::Serialize)]
struct Settled {
    #[serde(flatten)]
    result: ApprovalResult,
    #[serde(skip_serializing_if = "Option::is_none")]
    tlog_proof: Option<String>,
}

async fn redrive(
    gateway: Gateway,
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
    QueryArg(q): QueryArg<WaitQuery>,
) -> Result<Json<Settled>, ApiError> {
    let result = state.redrive(&id, q.wait, &gateway.0).await?;
    let tlog_proof = match result.status {
        countersign::ApprovalStatus::Pending => None,
        _ => {
            state
                .tlog_proof_of(&id, crate::service::LineOf::Settlement)
                .await
        }
    };
    Ok(Json(Settled { result, tlog_proof }))
}

async fn withdraw(
    gateway: Gateway,
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
) -> Result<Json<ApprovalResult>, ApiError> {
    let result = state.withdraw(&id, &gateway.0).await?;
    super::trace::log_result("approval withdrawn", &result);
    Ok(Json(result))
}

async fn grant(
    gateway: Gateway,
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
    Body(req): Body<GrantRequest>,
) -> Result<Json<GrantReceipt>, ApiError> {
    let receipt = state.collect_grant(&id, req, &gateway.0).await?;
    tracing::info!("grant collected");
    Ok(Json(receipt))
}
