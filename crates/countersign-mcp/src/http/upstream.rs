//! The upstream's side of an exchange: a request built from the client's (the headers it may
//! see), and the upstream's answer relayed back, JSON or an event stream, each message through
//! the session's upstream hook ([`Interposer::upstream_message`]: the client's id back, the audit
//! outcome, the catalog, a task's end). `GET` is a stream of the upstream's own messages.

use super::response::{bad_gateway, header_str, session_not_found, status_only, unauthorized};
use super::sse::{self, SseSplitter};
use super::{HttpRelay, SESSION_HEADER};
use crate::Interposer;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::Value;
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Request headers passed to the upstream (the agent's `Authorization` is the interposer's, and
/// is never forwarded; the session id is mapped, not copied).
const FORWARDED_REQUEST_HEADERS: [&str; 6] = [
    "accept",
    "content-type",
    "mcp-protocol-version",
    "last-event-id",
    "mcp-method",
    "mcp-name",
];
/// Response headers passed back to the client (the session id is mapped).
const FORWARDED_RESPONSE_HEADERS: [&str; 3] =
    ["content-type", "cache-control", "mcp-protocol-version"];

/// The client's headers the upstream may see, and the upstream's own session id, on `request`.
pub(super) fn upstream_request(
    mut request: reqwest::RequestBuilder,
    headers: &HeaderMap,
    upstream_session: Option<&str>,
) -> reqwest::RequestBuilder {
    for name in FORWARDED_REQUEST_HEADERS {
        for value in headers.get_all(name) {
            request = request.header(name, value.clone());
        }
    }
    if let Some(upstream) = upstream_session {
        request = request.header(SESSION_HEADER, upstream);
    }
    request
}

/// Relay an upstream response: status, the headers the client needs, the body. SSE events pass
/// one by one as they complete, each through the session's upstream hook; `drain` keeps reading
/// after the client went away (a POST's stream, for the audit outcome), else the upstream
/// connection is dropped with the client's (a GET stream). Whatever the request `request_id`
/// got, its call is unanswered once the response is over, unless the stream was resumable: an
/// event with an `id:` lets the client resume it (`GET` with `Last-Event-ID`) and get the answer
/// there, so the call stays in flight (and is recorded `no_answer` when its session ends if the
/// answer never comes).
pub(super) async fn relay_response(
    response: reqwest::Response,
    interposer: Arc<Interposer>,
    session_header: Option<String>,
    request_id: Option<Value>,
    drain: bool,
    reply: oneshot::Sender<Response>,
) {
    let head = response_head(&response, session_header);
    let sse = header_str(response.headers(), "content-type")
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !sse {
        let answer = relay_body(response, &interposer, request_id.as_ref(), head).await;
        // Recorded before the client has the answer.
        unanswered(&interposer, request_id.as_ref());
        let _ = reply.send(answer);
        return;
    }
    let resumable = relay_events(response, &interposer, head, drain, reply).await;
    if !resumable {
        unanswered(&interposer, request_id.as_ref());
    }
}

/// The response for request `id` is over: if it was no JSON-RPC answer to the call (an HTTP
/// error page, a broken stream), the call is recorded unanswered.
fn unanswered(interposer: &Interposer, id: Option<&Value>) {
    if let Some(id) = id {
        interposer.no_answer(id);
    }
}

/// The response's status and the headers the client gets, with our session id if one opened.
fn response_head(response: &reqwest::Response, session_header: Option<String>) -> Response {
    let mut head = Response::new(Body::empty());
    *head.status_mut() = response.status();
    for name in FORWARDED_RESPONSE_HEADERS {
        if let Some(v) = response.headers().get(name) {
            head.headers_mut().insert(name, v.clone());
        }
    }
    if let Some(id) = session_header.and_then(|s| HeaderValue::from_str(&s).ok()) {
        head.headers_mut().insert(SESSION_HEADER, id);
    }
    head
}

/// A JSON (or any non-stream) body: read whole, its message through the upstream hook.
async fn relay_body(
    response: reqwest::Response,
    interposer: &Interposer,
    request_id: Option<&Value>,
    mut head: Response,
) -> Response {
    let bytes = match response.bytes().await {
        Ok(b) => b,
        Err(e) => {
            tracing::warn!(error = %e, "the upstream's answer broke off");
            return bad_gateway(request_id, "the upstream MCP server's answer broke off");
        }
    };
    let body = match std::str::from_utf8(&bytes) {
        Ok(text) if !text.trim().is_empty() => match interposer.upstream_message(text.to_owned()) {
            Some(out) if out == text => bytes,
            Some(out) => Bytes::from(out),
            // The answer to a call a task ran ends the task; it is nobody's to relay.
            None => Bytes::new(),
        },
        _ => bytes,
    };
    *head.body_mut() = Body::from(body);
    head
}

/// An event stream: the head at once, then each event as it completes. Whether any event
/// carried an `id` (the client may resume the stream after it).
async fn relay_events(
    mut response: reqwest::Response,
    interposer: &Interposer,
    mut head: Response,
    drain: bool,
    reply: oneshot::Sender<Response>,
) -> bool {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    *head.body_mut() = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }));
    if reply.send(head).is_err() && !drain {
        return false;
    }
    let mut events = SseSplitter::default();
    let mut client = Some(tx);
    let mut resumable = false;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(c)) => c,
            Ok(None) => break,
            Err(e) => {
                tracing::info!(error = %e, "the upstream's event stream broke off");
                break;
            }
        };
        for event in events.push(&chunk) {
            resumable |= sse::has_event_id(&event);
            if !pass_event(interposer, event, &mut client, drain).await {
                return resumable;
            }
        }
    }
    if let Some(rest) = events.finish() {
        resumable |= sse::has_event_id(&rest);
        pass_event(interposer, rest, &mut client, drain).await;
    }
    resumable
}

/// Pass one event to the client while it is there (`client` becomes `None` when it leaves).
/// Whether to read on: not once the client left, unless `drain`.
async fn pass_event(
    interposer: &Interposer,
    event: Vec<u8>,
    client: &mut Option<mpsc::Sender<Bytes>>,
    drain: bool,
) -> bool {
    let out = relay_event(interposer, event);
    if let Some(tx) = client
        && tx.send(out).await.is_err()
    {
        *client = None;
        return drain;
    }
    true
}

/// One SSE event from the upstream: its `data` (a JSON-RPC message) goes through the upstream
/// hook; an event the hook leaves alone is passed as the exact bytes received.
fn relay_event(interposer: &Interposer, raw: Vec<u8>) -> Bytes {
    let Ok(text) = std::str::from_utf8(&raw) else {
        return Bytes::from(raw);
    };
    let (data, other) = event_fields(text);
    let Some(data) = data else {
        return Bytes::from(raw);
    };
    let Some(out) = interposer.upstream_message(data.clone()) else {
        return Bytes::new();
    };
    if out == data {
        return Bytes::from(raw);
    }
    let mut event = String::new();
    for line in other {
        event.push_str(line);
        event.push('\n');
    }
    event.push_str("data: ");
    event.push_str(&out);
    event.push_str("\n\n");
    Bytes::from(event)
}

/// An event's `data` (its lines joined), and its other non-blank lines as they are.
fn event_fields(text: &str) -> (Option<String>, Vec<&str>) {
    let mut data: Option<String> = None;
    let mut other = Vec::new();
    for line in text.split_inclusive(['\n', '\r']) {
        let bare = line.trim_end_matches(['\n', '\r']);
        let value = match bare.strip_prefix("data") {
            Some("") => Some(""),
            Some(rest) => rest
                .strip_prefix(':')
                .map(|v| v.strip_prefix(' ').unwrap_or(v)),
            None => None,
        };
        match value {
            Some(v) => match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(v);
                }
                None => data = Some(v.to_owned()),
            },
            None if !bare.is_empty() => other.push(bare),
            None => {}
        }
    }
    (data, other)
}

/// `GET /mcp`: the upstream's own stream of messages for the session, relayed as it comes.
pub(super) async fn get_mcp(State(relay): State<Arc<HttpRelay>>, headers: HeaderMap) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    let Some(agent) = relay.authenticate(&headers) else {
        return unauthorized(None);
    };
    let (interposer, upstream_session) = match header_str(&headers, SESSION_HEADER) {
        Some(id) => match relay.session(id, &agent) {
            Some(s) => (s.interposer.clone(), s.upstream_id.clone()),
            None => return session_not_found(None, "Session not found"),
        },
        None => (relay.stateless_for(&agent), None),
    };
    let request = relay.http.get(relay.upstream.clone());
    let request = upstream_request(request, &headers, upstream_session.as_deref());
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "the upstream could not be reached");
            return bad_gateway(None, "the upstream MCP server could not be reached");
        }
    };
    let (reply, answer) = oneshot::channel();
    tokio::spawn(relay_response(
        response, interposer, None, None, false, reply,
    ));
    answer
        .await
        .unwrap_or_else(|_| status_only(StatusCode::BAD_GATEWAY))
}
