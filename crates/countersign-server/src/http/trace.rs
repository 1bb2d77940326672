//! One tracing span per request, so every log line a request causes names its approval.
//!
//! The span carries the matched route (a template such as `/v1/approvals/{id}`, never the raw
//! path), the method, the gateway (or auditor) the bearer token authenticated as, and the
//! approval id: from the path when the route has one, recorded by the handler when the request
//! creates it. Values from the request reach the log only after a check of their shape, so a
//! crafted path cannot forge log lines.

use axum::extract::rejection::RawPathParamsRejection;
use axum::extract::{MatchedPath, RawPathParams, Request};
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;
use tracing::Instrument as _;

/// The longest approval id the span records; ours are far shorter.
const MAX_ID_LEN: usize = 128;

/// Whether `id` has the shape of an approval id (URL-safe characters only). Anything else is
/// left out of the log rather than escaped: it names no approval.
pub(crate) fn loggable_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Record the approval a request concerns on the current request span (no-op outside one).
pub(crate) fn record_approval(id: &str) {
    if loggable_id(id) {
        tracing::Span::current().record("approval_id", id);
    }
}

/// Record the gateway a bearer token authenticated as (an operator-chosen name).
pub(crate) fn record_gateway(name: &str) {
    tracing::Span::current().record("gateway", name);
}

/// Record the auditor a bearer token authenticated as (an operator-chosen name).
pub(crate) fn record_auditor(name: &str) {
    tracing::Span::current().record("auditor", name);
}

/// One line for what a request did to an approval: its status and, when settled, the reason.
pub(crate) fn log_result(event: &'static str, result: &countersign::ApprovalResult) {
    tracing::info!(
        status = result.status.as_str(),
        reason_code = result.reason_code.as_deref().unwrap_or(""),
        "{event}"
    );
}

/// Route layer: opens the request span, runs the handler inside it, and logs one line with the
/// status and the time taken.
pub(crate) async fn request_span(
    matched: Option<MatchedPath>,
    params: Result<RawPathParams, RawPathParamsRejection>,
    request: Request,
    next: Next,
) -> Response {
    let route = matched.as_ref().map_or("?", MatchedPath::as_str).to_owned();
    let span = tracing::info_span!(
        "request",
        method = %request.method(),
        route = %route,
        gateway = tracing::field::Empty,
        auditor = tracing::field::Empty,
        approval_id = tracing::field::Empty,
    );
    if let Some(id) = params
        .as_ref()
        .ok()
        .and_then(|p| p.iter().find(|(name, _)| *name == "id").map(|(_, v)| v))
        .filter(|id| loggable_id(id))
    {
        span.record("approval_id", id);
    }
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status().as_u16();
    let elapsed_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    span.in_scope(|| {
        if status >= 500 {
            tracing::error!(status, elapsed_us, "served");
        } else {
            tracing::info!(status, elapsed_us, "served");
        }
    });
    response
}

#[cfg(test)]
mod tests {
    use super::loggable_id;

    #[test]
    fn ids_of_our_shape_are_logged() {
        assert!(loggable_id("apr_01HZX3K9Q2"));
        assert!(loggable_id("0f3a-9c_ZZ"));
    }

    #[test]
    fn anything_else_is_left_out_of_the_log() {
        assert!(!loggable_id(""));
        assert!(!loggable_id("a\nlevel=error msg=forged"));
        assert!(!loggable_id("a b"));
        assert!(!loggable_id("%0a"));
        assert!(!loggable_id(&"a".repeat(MAX_ID_LEN_PLUS_ONE)));
    }

    const MAX_ID_LEN_PLUS_ONE: usize = super::MAX_ID_LEN + 1;
}
