//! One error type that becomes the HTTP response, one JSON envelope everywhere.
//!
//! `{"error": {"code": "...", "message": "...", "reason_code": "...", "result": {...}}}`: `code`
//! is a stable machine-readable name of what was refused, `reason_code` the core's wire reason
//! when one applies, `result` the approval's current ApprovalResult for conflicts. Internal
//! errors answer a generic 500 and log the detail; they never echo it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use countersign::{ApprovalResult, ReasonCode};
use serde::Serialize;

/// An API refusal or failure.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub reason_code: Option<ReasonCode>,
    pub result: Option<Box<ApprovalResult>>,
    /// For `not_nfc`: every string of the request that is not in NFC.
    pub not_nfc: Option<Vec<crate::service::NotNfc>>,
    /// Seconds for a `Retry-After` header (429 answers).
    pub retry_after: Option<u64>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: &'static str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_code: Option<ReasonCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a ApprovalResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_nfc: Option<&'a [crate::service::NotNfc]>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            reason_code: None,
            result: None,
            not_nfc: None,
            retry_after: None,
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unprocessable(reason: ReasonCode, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "evidence_rejected",
            message,
        )
        .reason(reason)
    }
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }
    /// A failure that is the service's fault: logged, answered generically.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error (logged)",
        )
    }
    pub fn reason(mut self, reason: ReasonCode) -> Self {
        self.reason_code = Some(reason);
        self
    }
    /// 429 with `Retry-After: seconds`.
    pub fn too_many(code: &'static str, message: impl Into<String>, seconds: u64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, code, message);
        e.retry_after = Some(seconds.max(1));
        e
    }
    pub fn with_result(mut self, result: ApprovalResult) -> Self {
        self.result = Some(Box::new(result));
        self
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(e: crate::store::StoreError) -> Self {
        match e {
            // The storage's condition, not the service's bug: 503 so that gateways retry, the
            // process stays up, and the same request succeeds once the operator has made room
            // (or the database is writable or reachable again). The detail is logged only.
            crate::store::StoreError::Unavailable(detail) => {
                tracing::error!(%detail, "store unavailable");
                let mut e = Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "store_unavailable",
                    "the database cannot take writes now (disk full, read-only or unreachable);                      nothing was recorded, retry later",
                );
                e.retry_after = Some(1);
                e
            }
            e => Self::internal(e),
        }
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        Self::internal(e)
    }
}

impl From<getrandom::Error> for ApiError {
    fn from(e: getrandom::Error) -> Self {
        Self::internal(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Envelope {
            error: Body {
                code: self.code,
                message: &self.message,
                reason_code: self.reason_code,
                result: self.result.as_deref(),
                not_nfc: self.not_nfc.as_deref(),
            },
        };
        let mut resp = (self.status, Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from(seconds),
            );
        }
        resp
    }
}
