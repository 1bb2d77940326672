//! The generic webhook: `{"approval_id", "severity", "expires_at", "approver_url"}`, the body
//! `webhook_url` has always sent, unchanged on the wire.
//!
//! Every attempt of one step carries the same `Idempotency-Key`, so a receiver that saw an
//! attempt time out and then arrive can drop the repeat: the approval id for the first notice
//! (as before), `ID.reminder-N` / `ID.escalation-N` for the later steps, which are new notices.

use super::{Notice, Notification, Step};

/// The body of a notice.
pub(super) fn body(notice: &Notice) -> Notification {
    Notification {
        approval_id: notice.approval_id.clone(),
        severity: notice.severity.clone(),
        expires_at: notice.expires(),
        approver_url: notice.approver_url.clone(),
    }
}

/// The idempotency key of a notice's step.
pub(super) fn idempotency_key(notice: &Notice) -> String {
    match notice.step {
        Step::New => notice.approval_id.clone(),
        step => format!("{}.{}", notice.approval_id, step.key()),
    }
}

/// The request for a notice.
pub(super) fn request(
    request: reqwest::RequestBuilder,
    notice: &Notice,
) -> reqwest::RequestBuilder {
    request
        .header("Idempotency-Key", idempotency_key(notice))
        .json(&body(notice))
}
