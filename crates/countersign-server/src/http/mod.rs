//! The HTTP surface: one router per resource, one error envelope, extractors that never answer
//! with a plain-text rejection.

mod approvals;
mod approver;
mod arap;
mod audit;
mod body_deadline;
mod display;
mod enroll;
mod meta;
mod standing;
mod tiles;
mod trace;
mod web;

pub use display::{Display, Mark, Row, Segment, review_display};
pub use tiles::TILES_PREFIX;

use crate::error::{ApiError, ErrorCode};
use crate::service::AppState;
use axum::Router;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

/// The whole service.
pub fn build_router(state: AppState) -> Router {
    Router::new()
        .merge(approvals::router())
        .merge(approver::router())
        .merge(arap::router())
        .merge(audit::router())
        .merge(meta::router())
        .merge(standing::router())
        .merge(tiles::router())
        .merge(web::router())
        // A route layer: it runs after routing, so the span knows the matched route and its id.
        .route_layer(axum::middleware::from_fn(trace::request_span))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            body_deadline::read_body_in_time,
        ))
        .fallback(|| async { ApiError::not_found("route") })
        .method_not_allowed_fallback(|| async {
            ApiError::new(
                axum::http::StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::MethodNotAllowed,
                "method not allowed on this route",
            )
        })
        .with_state(state)
}

/// `Json<T>` whose rejection is our JSON envelope.
pub(crate) struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;
    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(e) => Err(json_rejection(&e)),
        }
    }
}

fn json_rejection(e: &JsonRejection) -> ApiError {
    // axum's own statuses are right (400 syntax, 415 content type, 422 wrong shape, 413 too
    // large); only the body changes, to the envelope.
    let code = match e {
        JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
        JsonRejection::JsonSyntaxError(_) => ErrorCode::InvalidJson,
        _ => ErrorCode::InvalidRequest,
    };
    ApiError::new(e.status(), code, e.body_text())
}

/// `Path<T>` with our envelope.
pub(crate) struct PathArg<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathArg<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Self(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request(ErrorCode::InvalidPath, e.body_text())
            })
    }
}

/// `Query<T>` with our envelope.
pub(crate) struct QueryArg<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for QueryArg<T> {
    type Rejection = ApiError;
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Self(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(ErrorCode::InvalidQuery, e.body_text())
            })
    }
}
