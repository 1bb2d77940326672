//! A deadline for a request's body: `timeouts.body_read_seconds` from when its headers arrived.
//!
//! The header read timeout (`serve_http`) bounds a client that dribbles its headers; without this
//! one, a client that sends headers and then dribbles its body would hold its request open until
//! the body size limit. The body is streamed through a deadline instead of buffered here, so the
//! extractors keep their own limits and answers (413, 415, 400); when the deadline passes, the
//! extractor sees a read error and the answer becomes 408 `body_timeout`.

use crate::error::{ApiError, ErrorCode};
use crate::service::AppState;
use axum::body::{Body, HttpBody as _};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use futures_util::StreamExt as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub(super) async fn read_body_in_time(
    State(state): State<AppState>,
    req: Request,
    next: Next,
) -> Response {
    let seconds = state.config().timeouts.body_read_seconds;
    if req.body().size_hint().exact() == Some(0) {
        // No body (GET, an empty POST): nothing to wait for.
        return next.run(req).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    let expired = Arc::new(AtomicBool::new(false));
    let (parts, body) = req.into_parts();
    let flag = expired.clone();
    let chunks = futures_util::stream::unfold(Some(body.into_data_stream()), move |stream| {
        let flag = flag.clone();
        async move {
            let mut stream = stream?;
            match tokio::time::timeout_at(deadline, stream.next()).await {
                Ok(Some(chunk)) => Some((chunk, Some(stream))),
                Ok(None) => None,
                Err(_) => {
                    flag.store(true, Ordering::SeqCst);
                    // One error ends the body; nothing more is read.
                    Some((Err(axum::Error::new("the body read timed out")), None))
                }
            }
        }
    });
    let response = next
        .run(Request::from_parts(parts, Body::from_stream(chunks)))
        .await;
    if expired.load(Ordering::SeqCst) {
        return ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::BodyTimeout,
            format!("the request body did not arrive within {seconds} s of its headers"),
        )
        .into_response();
    }
    response
}
