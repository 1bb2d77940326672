//! The responses the HTTP transport writes itself: a JSON-RPC message as a body, the transport's
//! own refusals (403, 401, 404, 400, 502: before the relay sees a message, or when the upstream
//! fails it), and a bare status.

use super::UNAUTHORIZED_CODE;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};

pub(super) fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A response whose body is one JSON-RPC error.
pub(super) fn rpc_error(
    status: StatusCode,
    id: Option<&Value>,
    code: i64,
    message: &str,
) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    });
    json_status(status, body.to_string())
}

/// The 502 for a request whose upstream could not be reached (`what` says how it failed).
pub(super) fn bad_gateway(id: Option<&Value>, what: &str) -> Response {
    rpc_error(StatusCode::BAD_GATEWAY, id, -32603, what)
}

/// The 404 for a session id this agent does not hold.
pub(super) fn session_not_found(id: Option<&Value>, message: &str) -> Response {
    rpc_error(StatusCode::NOT_FOUND, id, -32001, message)
}

/// A JSON-RPC message (its text) as the body of a response with `status`.
pub(super) fn json_status(status: StatusCode, frame: String) -> Response {
    let mut r = json_response(frame);
    *r.status_mut() = status;
    r
}

pub(super) fn json_response(frame: String) -> Response {
    let mut r = Response::new(Body::from(frame));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(super) fn status_only(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

pub(super) fn unauthorized(id: Option<&Value>) -> Response {
    let mut r = rpc_error(
        StatusCode::UNAUTHORIZED,
        id,
        UNAUTHORIZED_CODE,
        "Unauthorized: present this agent's bearer credential (Authorization: Bearer ...)",
    );
    r.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"countersign-mcp\""),
    );
    r
}
