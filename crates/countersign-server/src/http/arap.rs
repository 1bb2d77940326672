//! The AuthZEN ARAP Access Request Service routes (docs/API.md §ARAP, docs/spec/arap.md):
//! submit, poll and cancel under the gateway token, the JWK Set and the PDP metadata open.

use super::approvals::Gateway;
use super::{Body, PathArg};
use crate::service::{
    ARAP_JWKS_PATH, ARAP_REQUESTS_PATH, AccessRequest, AppState, ArapError, TaskView,
};
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::json;

pub(super) fn router() -> Router<AppState> {
    Router::new()
        .route(ARAP_REQUESTS_PATH, post(submit))
        .route(&format!("{ARAP_REQUESTS_PATH}/{{id}}"), get(status))
        .route(&format!("{ARAP_REQUESTS_PATH}/{{id}}/cancel"), post(cancel))
        .route(ARAP_JWKS_PATH, get(jwks))
        .route("/.well-known/authzen-configuration", get(metadata))
}

/// An RFC 9457 problem with the profile's type URN; a service error keeps its own envelope.
impl IntoResponse for ArapError {
    fn into_response(self) -> Response {
        let detail = self.to_string();
        let (status, kind) = match self {
            Self::Service(e) => return e.into_response(),
            Self::NotRequestable(_) => (StatusCode::BAD_REQUEST, "not_requestable"),
            Self::InvalidDenialBinding(_) => (StatusCode::BAD_REQUEST, "invalid_denial_binding"),
            Self::ExpiredDenial(_) => (StatusCode::GONE, "expired_denial"),
            Self::UnknownTask => (StatusCode::NOT_FOUND, "unknown_task"),
            Self::InvalidTaskState(_) => (StatusCode::CONFLICT, "invalid_task_state"),
        };
        let body = json!({
            "type": format!("urn:openid:authzen:access-request:error:{kind}"),
            "title": kind.replace('_', " "),
            "status": status.as_u16(),
            "detail": detail,
        });
        (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/problem+json"),
            )],
            body.to_string(),
        )
            .into_response()
    }
}

/// 202 with the pending task, or 201 when it is already terminal (a tool that needs no human,
/// a preauthorization); `Location` is the status endpoint.
async fn submit(
    gateway: Gateway,
    State(state): State<AppState>,
    Body(req): Body<AccessRequest>,
) -> Result<Response, ArapError> {
    let view = state.arap_submit(req, &gateway.0).await?;
    if let Some(id) = view.task.get("id").and_then(|v| v.as_str()) {
        super::trace::record_approval(id);
    }
    let code = if view.is_terminal() {
        StatusCode::CREATED
    } else {
        StatusCode::ACCEPTED
    };
    let location = view
        .task
        .get("status_endpoint")
        .and_then(|v| v.as_str())
        .and_then(|s| HeaderValue::from_str(s).ok());
    let mut response = (code, Json(view)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

async fn status(
    gateway: Gateway,
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
) -> Result<Json<TaskView>, ArapError> {
    state.arap_status(&id, &gateway.0).await.map(Json)
}

async fn cancel(
    gateway: Gateway,
    State(state): State<AppState>,
    PathArg(id): PathArg<String>,
) -> Result<Json<TaskView>, ArapError> {
    state.arap_cancel(&id, &gateway.0).await.map(Json)
}

async fn jwks(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/jwk-set+json")],
        state.arap_jwks().to_string(),
    )
}

async fn metadata(State(state): State<AppState>) -> Json<serde_json::Value> {
    Json(state.arap_metadata())
}
