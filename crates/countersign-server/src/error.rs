//! One error type that becomes the HTTP response, one JSON envelope everywhere.
//!
//! `{"error": {"code": "...", "message": "...", "reason_code": "...", "result": {...}}}`: `code`
//! is a stable machine-readable name of what was refused, `reason_code` the core's wire reason
//! when one applies, `result` the approval's current ApprovalResult for conflicts. Internal
//! errors answer a generic 500 and log the detail; they never echo it.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use countersign::{ApprovalResult, NonNfc, ReasonCode};
use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`], its wire names and [`ErrorCode::ALL`] from one list, so the three
/// cannot drift apart.
macro_rules! error_codes {
    ($($(#[$doc:meta])* $variant:ident => $wire:literal,)*) => {
        /// The stable `code` of the error envelope: what was refused, one name per refusal.
        ///
        /// Gateways and approver pages branch on these names, so they are part of the API: each
        /// one is listed, with its status, in docs/API.md (a test checks the list against this
        /// enum). Grouped by the status they travel with; `evidence_rejected` and most conflicts
        /// also carry the core's `reason_code`.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
        #[non_exhaustive]
        pub enum ErrorCode {
            $($(#[$doc])* #[serde(rename = $wire)] $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &[Self] = &[$(Self::$variant,)*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $wire,)*
                }
            }
        }
    };
}

error_codes! {
    // 400: the request is malformed.
    /// A member is missing, out of bounds or not base64url.
    InvalidRequest => "invalid_request",
    /// The body is not JSON.
    InvalidJson => "invalid_json",
    /// A path segment does not parse.
    InvalidPath => "invalid_path",
    /// The query string does not parse.
    InvalidQuery => "invalid_query",
    /// An audit proof range that cannot exist (`seq` outside `1..=size`, `from` beyond `to`).
    BadRange => "bad_range",
    /// An audit proof asked for a size the log has not reached.
    BeyondLog => "beyond_log",
    // 401: who is calling is not established.
    /// No, malformed, unknown or revoked gateway token (or auditor token, where one is asked).
    Unauthenticated => "unauthenticated",
    /// No or bad approver session, or a failed login.
    Unauthorized => "unauthorized",
    // 403: the caller is known and may not do this.
    /// The approver is not eligible for this tool.
    NotEligible => "not_eligible",
    /// The approver is the one the request was made for (its `agent_id`; an ARAP request's
    /// subject): nobody approves their own request (separation of duties).
    SelfApproval => "self_approval",
    /// The credential belongs to another principal than the session.
    NotYourCredential => "not_your_credential",
    /// The decision challenge was issued to another approver.
    NotYourChallenge => "not_your_challenge",
    /// Only the approver who signed a standing grant may revoke it.
    NotYourGrant => "not_your_grant",
    /// An audit line's text asked for by a gateway whose approval it does not record.
    NotYourLine => "not_your_line",
    /// A browser call without an `Origin` header.
    OriginRequired => "origin_required",
    /// A browser call from an origin the service does not serve.
    OriginRefused => "origin_refused",
    /// A browser form post whose CSRF token does not match its session.
    Csrf => "csrf",
    // 404, 405
    /// Unknown approval (or another gateway's), standing grant, checkpoint or route.
    NotFound => "not_found",
    /// The route exists, the method does not.
    MethodNotAllowed => "method_not_allowed",
    // 409: the state has moved on.
    /// The approval was settled first; `result` is the winner.
    AlreadySettled => "already_settled",
    /// The approval's window closed before this arrived.
    Expired => "expired",
    /// A grant asked for an approval that is not APPROVED.
    NotApproved => "not_approved",
    /// The single-use grant was collected already.
    GrantAlreadyCollected => "grant_already_collected",
    /// The call fingerprint (or named tool) differs from the approved action.
    FingerprintMismatch => "fingerprint_mismatch",
    /// The preauthorization that approved the call is disabled, expired or changed.
    PreauthorizationWithdrawn => "preauthorization_withdrawn",
    /// The grant window closed.
    GrantExpired => "grant_expired",
    /// The standing grant was revoked already.
    AlreadyRevoked => "already_revoked",
    /// An extension the tool does not allow: no `max_approval_seconds`, or the window is at
    /// its maximum already.
    NotExtendable => "not_extendable",
    /// A standing grant that was never signed cannot be revoked.
    NotSigned => "not_signed",
    /// Enrollment finished without a started ceremony.
    NoCeremony => "no_ceremony",
    /// The authenticator's credential is enrolled already.
    CredentialExists => "credential_exists",
    // 410
    /// The enrollment invite is unknown, used or expired (one answer for all three).
    InviteUnusable => "invite_unusable",
    // 408
    /// The request's body did not arrive within `timeouts.body_read_seconds`.
    BodyTimeout => "body_timeout",
    // 415
    /// The body is not `application/json`.
    UnsupportedMediaType => "unsupported_media_type",
    // 422: well-formed, and refused.
    /// The core verifier rejected the evidence (`reason_code` says why).
    EvidenceRejected => "evidence_rejected",
    /// The action's fields are not admissible under their profile or tool.
    ActionInadmissible => "action_inadmissible",
    /// A string of the action is not in NFC under `nfc = "require"`.
    NotNfc => "not_nfc",
    /// The profile is not pinned by this service.
    ProfileUnknown => "profile_unknown",
    /// `revises` names no approval of this gateway.
    UnknownRevision => "unknown_revision",
    /// A standing grant's scope is not one the service accepts.
    InvalidScope => "invalid_scope",
    /// The authenticator's registration was refused.
    RegistrationRefused => "registration_refused",
    // 429
    /// Too many sign-in attempts (with `Retry-After`).
    RateLimited => "rate_limited",
    /// Too many long polls waiting at once (with `Retry-After`).
    TooManyWaiters => "too_many_waiters",
    // 500, 503
    /// The service's own failure: logged, never detailed.
    Internal => "internal",
    /// A tlog-tiles entry bundle would hold an audit line longer than its 16-bit length
    /// prefix can say (501: the format cannot carry it; the line is at `/v1/audit/lines`).
    EntryTooLarge => "entry_too_large",
    /// Enrollment is not configured on this service.
    EnrollmentUnavailable => "enrollment_unavailable",
    /// The database cannot take writes now (disk full, read-only, unreachable); nothing was
    /// recorded, and the same request succeeds once the operator has fixed the storage.
    StoreUnavailable => "store_unavailable",
    /// `GET /readyz`: the store cannot take writes now.
    NotReady => "not_ready",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Lets tests and callers compare with the wire name: `err.code == "expired"`.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One string of a request that is not in NFC, as the service reports it: the JSON pointer into
/// the fields and the code points NFC changes, as `U+212A`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotNfc {
    pub path: String,
    pub code_points: Vec<String>,
}

impl From<&NonNfc> for NotNfc {
    fn from(n: &NonNfc) -> Self {
        Self {
            path: n.path.clone(),
            code_points: n
                .code_points
                .iter()
                .map(|c| format!("U+{:04X}", u32::from(*c)))
                .collect(),
        }
    }
}

/// An API refusal or failure.
#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: ErrorCode,
    pub message: String,
    pub reason_code: Option<ReasonCode>,
    pub result: Option<Box<ApprovalResult>>,
    /// For `not_nfc`: every string of the request that is not in NFC.
    pub not_nfc: Option<Vec<NotNfc>>,
    /// Seconds for a `Retry-After` header (429 answers).
    pub retry_after: Option<u64>,
}

#[derive(Serialize)]
struct Envelope<'a> {
    error: Body<'a>,
}

#[derive(Serialize)]
struct Body<'a> {
    code: ErrorCode,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason_code: Option<ReasonCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a ApprovalResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_nfc: Option<&'a [NotNfc]>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
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
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unprocessable(reason: ReasonCode, message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::EvidenceRejected,
            message,
        )
        .reason(reason)
    }
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("{what} not found"),
        )
    }
    pub fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }
    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
    }
    pub fn forbidden(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, code, message)
    }
    /// A failure that is the service's fault: logged, answered generically.
    pub fn internal(detail: impl std::fmt::Display) -> Self {
        tracing::error!(%detail, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error (logged)",
        )
    }
    pub fn reason(mut self, reason: ReasonCode) -> Self {
        self.reason_code = Some(reason);
        self
    }
    /// 429 with `Retry-After: seconds`.
    pub fn too_many(code: ErrorCode, message: impl Into<String>, seconds: u64) -> Self {
        let mut e = Self::new(StatusCode::TOO_MANY_REQUESTS, code, message);
        e.retry_after = Some(seconds.max(1));
        e
    }
    /// Replace the stable error code (a refusal more specific than its constructor's).
    pub fn code(mut self, code: ErrorCode) -> Self {
        self.code = code;
        self
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
                    ErrorCode::StoreUnavailable,
                    "the database cannot take writes now (disk full, read-only or unreachable); \
                     nothing was recorded, retry later",
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_documented_in_the_api_reference() {
        let api = include_str!("../../../docs/API.md");
        let undocumented: Vec<&str> = ErrorCode::ALL
            .iter()
            .map(|c| c.as_str())
            .filter(|c| !api.contains(&format!("| `{c}` |")))
            .collect();
        assert!(
            undocumented.is_empty(),
            "codes missing from docs/API.md's table: {undocumented:?}"
        );
    }

    #[test]
    fn the_envelope_carries_the_wire_name() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, serde_json::Value::from(code.as_str()));
        }
        let mut names: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ErrorCode::ALL.len(), "two codes share a name");
    }
}
