//! `countersign mcp http`: the interposer on Streamable HTTP, both sides (docs/MCP.md, "HTTP
//! mode").
//!
//! Each POST carries one JSON-RPC message, admitted as a stdio frame is (a body that is not gets
//! HTTP 400 and goes nowhere), after `Host`, `Origin`, the bearer credential and the routing
//! headers are checked. The relay's decision code then sees it exactly as it sees a stdio frame,
//! with two channels of this request's own: an answer the interposer gives itself (held, refused)
//! comes back on one, a frame to forward on the other. A forwarded frame goes to the upstream as
//! the bytes received (a request under the interposer's own id);
//! the upstream's answer, JSON or an SSE stream, is relayed as it arrives, each message through
//! the relay's upstream hook (audit outcome, `tools/list` catalog).
//!
//! Who is calling comes from the bearer credential the agent presents (`[[agents]]` in the
//! configuration), never from anything in the messages. Sessions: the interposer hands the client
//! its own random session id and maps it to the upstream's; one interposer session (client
//! view, tool catalog) per upstream session, bound to the agent that opened it.

mod agents;
mod guard;
mod sse;

pub use agents::{AgentEntry, Agents, AgentsError, MIN_TOKEN_LEN};
pub(crate) use guard::is_host_name;
use guard::{host_name, is_loopback_host, origin_allowed, routing_headers_match};
use sse::SseSplitter;

use crate::relay;
use crate::relay::Lines;
use crate::{Interposer, admission};
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::convert::Infallible;
use std::future::{Future, IntoFuture as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};
use url::Url;

/// The session header (header names are case-insensitive: 2025-11-25 spells it `MCP-Session-Id`).
pub const SESSION_HEADER: &str = "mcp-session-id";
/// The JSON-RPC error code of a request refused for want of a known bearer credential (HTTP 401).
/// Outside -32000…-32004 (the SDKs' own) and beside the interposer's -32010 / -32011.
pub const UNAUTHORIZED_CODE: i64 = -32012;
/// 2026-07-28: a routing header that disagrees with the body (HTTP 400).
pub const HEADER_MISMATCH_CODE: i64 = -32020;

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
/// Largest request body (tool arguments can be whole files).
const MAX_BODY: usize = 16 << 20;
/// A session nobody used for this long is forgotten (clients often never send DELETE).
const SESSION_IDLE: Duration = Duration::from_secs(3600);
/// At most this many sessions; past it the least recently used is forgotten.
const MAX_SESSIONS: usize = 10_000;
/// How long open streams get to finish after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// One client session: whose it is, the upstream's session id, and the interposer's view of it.
struct Session {
    agent_id: String,
    upstream_id: Option<String>,
    interposer: Arc<Interposer>,
    last_used: Mutex<Instant>,
}

/// The HTTP relay: the agents, the upstream, the sessions.
pub struct HttpRelay {
    /// The template every session is made from (its own session view is never used).
    base: Interposer,
    agents: Agents,
    upstream: Url,
    http: reqwest::Client,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    /// Per agent, the session of requests that carry no session id (2026-07-28 clients, or an
    /// upstream that issues none).
    stateless: Mutex<HashMap<String, Arc<Interposer>>>,
    /// The `Host` names let in besides loopback: `allowed_hosts`, and the address the relay
    /// listens on when that is no loopback one (lower case, without port).
    hosts: std::sync::RwLock<Vec<String>>,
}

impl std::fmt::Debug for HttpRelay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpRelay")
            .field("upstream", &self.upstream.as_str())
            .finish_non_exhaustive()
    }
}

/// What one POST's exchange needs to know about the request.
struct Exchange {
    interposer: Arc<Interposer>,
    headers: HeaderMap,
    /// The client's session id, when it sent one.
    client_session: Option<String>,
    upstream_session: Option<String>,
    /// An `initialize` without a session id: a session is opened if the upstream accepts it.
    opens_session: bool,
    agent_id: String,
    request_id: Option<Value>,
}

fn new_session_id() -> String {
    use ring::rand::SecureRandom as _;
    let mut bytes = [0u8; 18];
    if ring::rand::SystemRandom::new().fill(&mut bytes).is_err() {
        // Not expected on supported platforms; a predictable id would still be bound to the
        // agent's credential, so it could not be used by another agent.
        let t = time::OffsetDateTime::now_utc().unix_timestamp_nanos();
        bytes[..16].copy_from_slice(&t.to_le_bytes());
    }
    countersign::b64::encode(&bytes)
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// A response whose body is one JSON-RPC error.
fn rpc_error(status: StatusCode, id: Option<&Value>, code: i64, message: &str) -> Response {
    let body = json!({
        "jsonrpc": "2.0",
        "id": id.cloned().unwrap_or(Value::Null),
        "error": {"code": code, "message": message},
    });
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// A JSON-RPC message as the body of a response with `status`.
fn rpc_response(status: StatusCode, frame: &Value) -> Response {
    let mut r = json_response(frame.to_string());
    *r.status_mut() = status;
    r
}

fn json_response(frame: String) -> Response {
    let mut r = Response::new(Body::from(frame));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

fn status_only(status: StatusCode) -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = status;
    r
}

fn unauthorized(id: Option<&Value>) -> Response {
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

impl HttpRelay {
    /// A relay in front of `upstream` (its MCP endpoint URL), making every session from `base`.
    pub fn new(base: Interposer, agents: Agents, upstream: Url) -> Arc<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // A redirect would send a judged call (and an approved one) somewhere other than the
            // configured upstream: the upstream's 3xx goes back to the client as it is.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap_or_default();
        let hosts = base
            .config()
            .allowed_hosts
            .iter()
            .filter_map(|h| host_name(h))
            .collect();
        Arc::new(Self {
            base,
            agents,
            upstream,
            http,
            sessions: Mutex::new(HashMap::new()),
            stateless: Mutex::new(HashMap::new()),
            hosts: std::sync::RwLock::new(hosts),
        })
    }

    /// The routes: `POST`, `GET` and `DELETE` on `/mcp`.
    pub fn router(self: Arc<Self>) -> Router {
        Router::new()
            .route(
                "/mcp",
                axum::routing::post(post_mcp)
                    .get(get_mcp)
                    .delete(delete_mcp),
            )
            .layer(DefaultBodyLimit::max(MAX_BODY))
            .with_state(self)
    }

    /// Serve on `listener` until `shutdown` resolves; then give open streams a short grace, end
    /// every session and close the audit log.
    pub async fn serve(
        self: Arc<Self>,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        if let Ok(local) = listener.local_addr()
            && !local.ip().is_loopback()
            && !local.ip().is_unspecified()
            && let Some(host) = host_name(&local.ip().to_string())
        {
            self.hosts
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .push(host);
        }
        let (stopping_tx, stopping_rx) = oneshot::channel::<()>();
        use axum::serve::ListenerExt as _;
        // Small JSON-RPC answers must not wait for Nagle's algorithm.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let server =
            axum::serve(listener, self.clone().router()).with_graceful_shutdown(async move {
                shutdown.await;
                let _ = stopping_tx.send(());
            });
        // Graceful shutdown waits for every connection, and a GET stream never ends by itself.
        let grace = async move {
            match stopping_rx.await {
                Ok(()) => tokio::time::sleep(SHUTDOWN_GRACE).await,
                Err(_) => std::future::pending().await,
            }
        };
        let result = tokio::select! {
            r = server.into_future() => r,
            () = grace => Ok(()),
        };
        self.shutdown();
        result
    }

    /// End every session (parked responses dropped, unanswered calls audited `no_answer`) and
    /// write the audit log's close line.
    pub fn shutdown(&self) {
        let sessions: Vec<_> = self.lock_sessions().drain().map(|(_, s)| s).collect();
        for s in sessions {
            s.interposer.end_session();
        }
        let stateless: Vec<_> = self
            .stateless
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain()
            .map(|(_, i)| i)
            .collect();
        for i in stateless {
            i.end_session();
        }
        self.base.close_audit();
    }

    /// DNS rebinding: a page on an attacker's name that resolves to this machine reaches the
    /// relay with that name in `Host` (and a browser that sends no `Origin` on some requests).
    /// Only loopback names, the listening address and `allowed_hosts` are let in; a request with
    /// no `Host` is not.
    fn host_allowed(&self, headers: &HeaderMap) -> bool {
        let Some(host) = header_str(headers, "host").and_then(host_name) else {
            return false;
        };
        is_loopback_host(&host)
            || self
                .hosts
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .contains(&host)
    }

    fn lock_sessions(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Session>>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The 403 for a request whose `Host` is not this relay's or whose `Origin` is a page the
    /// relay does not serve (DNS rebinding, a browser's cross-site request); `None` to go on.
    fn foreign_caller(&self, headers: &HeaderMap) -> Option<Response> {
        if !self.host_allowed(headers) {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                -32600,
                "Host not allowed",
            ));
        }
        if !origin_allowed(headers) {
            return Some(rpc_error(
                StatusCode::FORBIDDEN,
                None,
                -32600,
                "Origin not allowed",
            ));
        }
        None
    }

    fn authenticate(&self, headers: &HeaderMap) -> Option<String> {
        let value = header_str(headers, header::AUTHORIZATION.as_str())?;
        let (scheme, token) = value.split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.agents.identify(token.trim()).map(str::to_owned)
    }

    /// The client's session `id`, if it exists and is `agent`'s: another agent's session id is
    /// as unknown as a made-up one.
    fn session(&self, id: &str, agent: &str) -> Option<Arc<Session>> {
        let s = self.lock_sessions().get(id).cloned()?;
        if s.agent_id != agent {
            return None;
        }
        *s.last_used.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        Some(s)
    }

    fn open_session(
        &self,
        agent_id: String,
        upstream_id: Option<String>,
        interposer: Arc<Interposer>,
    ) -> String {
        let id = new_session_id();
        let now = Instant::now();
        let mut ended = Vec::new();
        {
            let mut sessions = self.lock_sessions();
            sessions.retain(|_, s| {
                let idle =
                    now.duration_since(*s.last_used.lock().unwrap_or_else(|p| p.into_inner()));
                let keep = idle < SESSION_IDLE;
                if !keep {
                    ended.push(s.interposer.clone());
                }
                keep
            });
            if sessions.len() >= MAX_SESSIONS {
                let oldest = sessions
                    .iter()
                    .min_by_key(|(_, s)| *s.last_used.lock().unwrap_or_else(|p| p.into_inner()))
                    .map(|(k, _)| k.clone());
                if let Some(s) = oldest.and_then(|k| sessions.remove(&k)) {
                    ended.push(s.interposer.clone());
                }
            }
            interposer.set_task_upstream(self.task_forwarder(upstream_id.clone(), &interposer));
            sessions.insert(
                id.clone(),
                Arc::new(Session {
                    agent_id,
                    upstream_id,
                    interposer,
                    last_used: Mutex::new(now),
                }),
            );
        }
        for i in ended {
            i.end_session();
        }
        id
    }

    /// The session's own way to the upstream for the calls its tasks run once approved: no
    /// client request is under way then to carry them. Each frame is POSTed in the session (its
    /// upstream session id, its revision) and the answer, JSON or an event stream, goes through
    /// the session's upstream hook (audit outcome, the task's end) with nobody to relay it to.
    /// It ends with the session's interposer (held weakly: the interposer holds the sender).
    fn task_forwarder(
        &self,
        upstream_session: Option<String>,
        interposer: &Arc<Interposer>,
    ) -> Lines {
        let (lines, mut frames) = mpsc::unbounded_channel::<String>();
        let http = self.http.clone();
        let url = self.upstream.clone();
        let session = Arc::downgrade(interposer);
        tokio::spawn(async move {
            while let Some(frame) = frames.recv().await {
                let Some(interposer) = session.upgrade() else {
                    break;
                };
                let id = serde_json::from_str::<Value>(&frame)
                    .ok()
                    .and_then(|v| v.get("id").cloned());
                let mut request = http
                    .post(url.clone())
                    .header(header::CONTENT_TYPE, "application/json")
                    .header(header::ACCEPT, "application/json, text/event-stream")
                    .body(frame);
                if let Some(revision) = interposer.revision() {
                    request = request.header("mcp-protocol-version", revision);
                }
                if let Some(upstream) = &upstream_session {
                    request = request.header(SESSION_HEADER, upstream.as_str());
                }
                match request.send().await {
                    Ok(response) => {
                        // Nobody reads this reply: the answer ends the task in the upstream hook.
                        let (reply, unread) = oneshot::channel();
                        drop(unread);
                        relay_response(response, interposer.clone(), None, None, true, reply).await;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the upstream could not be reached for a task");
                    }
                }
                if let Some(id) = &id {
                    // The task's call went under the interposer's own id: no client id to map.
                    interposer.no_answer_own(id);
                    interposer.task_unanswered(id);
                }
            }
        });
        lines
    }

    /// End session `id`: its interposer, if it existed.
    fn end_session(&self, id: &str) -> Option<Arc<Interposer>> {
        let removed = self.lock_sessions().remove(id)?;
        removed.interposer.end_session();
        Some(removed.interposer.clone())
    }

    /// End session `id` because its client asked to (DELETE); with `cancel_on_disconnect`, its
    /// pending approvals are withdrawn before this returns. (A session the upstream ended, or
    /// one forgotten idle, keeps them: its client may still retry in a new session.)
    async fn close_session(&self, id: &str) {
        if let Some(interposer) = self.end_session(id) {
            interposer.withdraw_on_disconnect().await;
        }
    }

    fn stateless_for(&self, agent: &str) -> Arc<Interposer> {
        self.stateless
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(agent.to_owned())
            .or_insert_with(|| Arc::new(self.base.session_for(agent.to_owned())))
            .clone()
    }

    /// The first thing the interposer does with the message: answer it, forward it, or neither
    /// (a notification it consumed). Runs detached from the client's request, so a frame the
    /// relay decides to forward (an approved call whose grant it just collected) is forwarded
    /// even if the client has gone.
    async fn exchange(
        self: Arc<Self>,
        x: Exchange,
        mut answers: mpsc::UnboundedReceiver<String>,
        mut forwards: mpsc::UnboundedReceiver<String>,
        mut reply: oneshot::Sender<Response>,
    ) {
        let mut client_gone = false;
        let (mut forwards_open, mut answers_open) = (true, true);
        while forwards_open || answers_open {
            tokio::select! {
                biased;
                frame = forwards.recv(), if forwards_open => match frame {
                    Some(frame) => return self.forward(x, frame, reply).await,
                    None => forwards_open = false,
                },
                answer = answers.recv(), if answers_open => match answer {
                    Some(answer) => {
                        let _ = reply.send(json_response(answer));
                        return;
                    }
                    None => answers_open = false,
                },
                () = reply.closed(), if !client_gone => {
                    // The client dropped its request while the interposer was still deciding
                    // (a parked retry): only the parked response is dropped, exactly as for a
                    // `notifications/cancelled`; the approval stays pending. Whatever the relay
                    // still forwards is forwarded.
                    client_gone = true;
                    if let Some(id) = &x.request_id {
                        let cancel = json!({
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": id, "reason": "the client closed its request"},
                        });
                        let (sink, _) = mpsc::unbounded_channel::<String>();
                        x.interposer.clone().client_frame(cancel.to_string(), &sink, &sink);
                    }
                }
            }
        }
        // Nothing to answer or forward: a notification the interposer consumed (the cancel of
        // a parked retry), or a request whose parked response was dropped.
        let _ = reply.send(status_only(StatusCode::ACCEPTED));
    }

    /// Send `frame` (the exact bytes the client posted) to the upstream and relay its answer.
    async fn forward(&self, x: Exchange, frame: String, reply: oneshot::Sender<Response>) {
        let mut request = self.http.post(self.upstream.clone()).body(frame);
        for name in FORWARDED_REQUEST_HEADERS {
            for value in x.headers.get_all(name) {
                request = request.header(name, value.clone());
            }
        }
        if let Some(upstream) = &x.upstream_session {
            request = request.header(SESSION_HEADER, upstream.as_str());
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "the upstream could not be reached");
                if let Some(id) = &x.request_id {
                    x.interposer.no_answer(id);
                }
                let _ = reply.send(rpc_error(
                    StatusCode::BAD_GATEWAY,
                    x.request_id.as_ref(),
                    -32603,
                    "the upstream MCP server could not be reached",
                ));
                return;
            }
        };
        let status = response.status();
        let mut session_header = None;
        if x.opens_session && status.is_success() {
            let upstream_id = header_str(response.headers(), SESSION_HEADER).map(str::to_owned);
            session_header =
                Some(self.open_session(x.agent_id.clone(), upstream_id, x.interposer.clone()));
        }
        if status == StatusCode::NOT_FOUND
            && let (Some(ours), Some(_)) = (&x.client_session, &x.upstream_session)
        {
            // The upstream ended its session: so does ours, and the client re-initializes.
            self.end_session(ours);
        }
        relay_response(
            response,
            x.interposer,
            session_header,
            x.request_id,
            true,
            reply,
        )
        .await;
    }
}

/// Relay an upstream response: status, the headers the client needs, the body. SSE events pass
/// one by one as they complete, each through the session's upstream hook; `drain` keeps reading
/// after the client went away (a POST's stream, for the audit outcome), else the upstream
/// connection is dropped with the client's (a GET stream).
async fn relay_response(
    mut response: reqwest::Response,
    interposer: Arc<Interposer>,
    session_header: Option<String>,
    request_id: Option<Value>,
    drain: bool,
    reply: oneshot::Sender<Response>,
) {
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
    let sse = header_str(response.headers(), "content-type")
        .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
    if !sse {
        let bytes = match response.bytes().await {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!(error = %e, "the upstream's answer broke off");
                if let Some(id) = &request_id {
                    interposer.no_answer(id);
                }
                let _ = reply.send(rpc_error(
                    StatusCode::BAD_GATEWAY,
                    request_id.as_ref(),
                    -32603,
                    "the upstream MCP server's answer broke off",
                ));
                return;
            }
        };
        let body = match std::str::from_utf8(&bytes) {
            Ok(text) if !text.trim().is_empty() => {
                let out = interposer.upstream_frame(text.to_owned());
                // The answer to a call a task ran ends the task; it is nobody's to relay.
                match interposer.task_answer(out) {
                    Some(out) if out == text => bytes,
                    Some(out) => Bytes::from(out),
                    None => Bytes::new(),
                }
            }
            _ => bytes,
        };
        // An answer that was no JSON-RPC response (an HTTP error page) leaves the call unanswered.
        if let Some(id) = &request_id {
            interposer.no_answer(id);
        }
        *head.body_mut() = Body::from(body);
        let _ = reply.send(head);
        return;
    }
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    *head.body_mut() = Body::from_stream(futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    }));
    if reply.send(head).is_err() && !drain {
        return;
    }
    let mut events = SseSplitter::default();
    let mut client_gone = false;
    // An event with an `id:` makes the stream resumable: its answer may still come on the
    // client's resumed stream (`GET` with `Last-Event-ID`), so the call stays in flight.
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
            let out = relay_event(&interposer, event);
            if !client_gone && tx.send(out).await.is_err() {
                client_gone = true;
                if !drain {
                    return;
                }
            }
        }
    }
    if let Some(rest) = events.finish() {
        let out = relay_event(&interposer, rest);
        if !client_gone {
            let _ = tx.send(out).await;
        }
    }
    // Unanswered on a resumable stream: the answer is awaited on the resumed stream, and a call
    // never answered is audited `no_answer` when its session ends.
    if let Some(id) = &request_id
        && !resumable
    {
        interposer.no_answer(id);
    }
}

/// One SSE event from the upstream: its `data` (a JSON-RPC message) goes through the upstream
/// hook; an event the hook leaves alone is passed as the exact bytes received.
fn relay_event(interposer: &Interposer, raw: Vec<u8>) -> Bytes {
    let Ok(text) = std::str::from_utf8(&raw) else {
        return Bytes::from(raw);
    };
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
    let Some(data) = data else {
        return Bytes::from(raw);
    };
    let out = interposer.upstream_frame(data.clone());
    let Some(out) = interposer.task_answer(out) else {
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

async fn post_mcp(
    State(relay): State<Arc<HttpRelay>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    // The body is admitted before anything in it is believed: what fails is answered here and
    // goes nowhere (docs/MCP.md, "What the interposer admits"). A body may end with one line
    // break; inside, it is one line, as a stdio frame is.
    let frame = body
        .strip_suffix(b"\n")
        .map(|b| b.strip_suffix(b"\r").unwrap_or(b))
        .unwrap_or(&body);
    let (text, message) = match admission::admit_bytes(frame) {
        Ok((text, message)) => (text.to_owned(), message),
        Err(why) => {
            let Some(agent) = relay.authenticate(&headers) else {
                return unauthorized(None);
            };
            let id = admission::recover_id(frame).unwrap_or(Value::Null);
            tracing::warn!(agent, reason = why.reason(), error = %why, "POST body not admitted");
            return rpc_response(
                StatusCode::BAD_REQUEST,
                &relay::inadmissible_error(&id, &why),
            );
        }
    };
    let request_id = message
        .id
        .clone()
        .filter(|_| message.kind == admission::Kind::Request)
        .and_then(|at| serde_json::from_str::<Value>(&text[at]).ok());
    let Some(agent) = relay.authenticate(&headers) else {
        return unauthorized(request_id.as_ref());
    };
    // Headers that restate the body (2026-07-28 routes on them) must say what the body says: a
    // gateway that routes or authorizes on the header must see the call the interposer judges.
    if let Err(mismatch) = routing_headers_match(&headers, &text, &message) {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            request_id.as_ref(),
            HEADER_MISMATCH_CODE,
            mismatch,
        );
    }
    let method = message.method.as_deref();
    let client_session = header_str(&headers, SESSION_HEADER).map(str::to_owned);
    let (interposer, upstream_session, opens_session) = match &client_session {
        Some(id) => match relay.session(id, &agent) {
            Some(s) => (s.interposer.clone(), s.upstream_id.clone(), false),
            None => {
                return rpc_error(
                    StatusCode::NOT_FOUND,
                    request_id.as_ref(),
                    -32001,
                    "Session not found: initialize a new session",
                );
            }
        },
        None if method == Some("initialize") => {
            (Arc::new(relay.base.session_for(agent.clone())), None, true)
        }
        None => (relay.stateless_for(&agent), None, false),
    };
    let (to_client, answers): (Lines, _) = mpsc::unbounded_channel();
    let (to_upstream, forwards): (Lines, _) = mpsc::unbounded_channel();
    interposer
        .clone()
        .client_message(text, message, &to_client, &to_upstream);
    drop((to_client, to_upstream));
    let (reply, response) = oneshot::channel();
    let exchange = Exchange {
        interposer,
        headers,
        client_session,
        upstream_session,
        opens_session,
        agent_id: agent,
        request_id,
    };
    tokio::spawn(relay.exchange(exchange, answers, forwards, reply));
    response.await.unwrap_or_else(|_| {
        rpc_error(
            StatusCode::INTERNAL_SERVER_ERROR,
            None,
            -32603,
            "the interposer lost this request",
        )
    })
}

async fn get_mcp(State(relay): State<Arc<HttpRelay>>, headers: HeaderMap) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    let Some(agent) = relay.authenticate(&headers) else {
        return unauthorized(None);
    };
    let (interposer, upstream_session) = match header_str(&headers, SESSION_HEADER) {
        Some(id) => match relay.session(id, &agent) {
            Some(s) => (s.interposer.clone(), s.upstream_id.clone()),
            None => {
                return rpc_error(StatusCode::NOT_FOUND, None, -32001, "Session not found");
            }
        },
        None => (relay.stateless_for(&agent), None),
    };
    let mut request = relay.http.get(relay.upstream.clone());
    for name in FORWARDED_REQUEST_HEADERS {
        for value in headers.get_all(name) {
            request = request.header(name, value.clone());
        }
    }
    if let Some(upstream) = &upstream_session {
        request = request.header(SESSION_HEADER, upstream.as_str());
    }
    let response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            tracing::warn!(error = %e, "the upstream could not be reached");
            return rpc_error(
                StatusCode::BAD_GATEWAY,
                None,
                -32603,
                "the upstream MCP server could not be reached",
            );
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

async fn delete_mcp(State(relay): State<Arc<HttpRelay>>, headers: HeaderMap) -> Response {
    if let Some(refused) = relay.foreign_caller(&headers) {
        return refused;
    }
    let Some(agent) = relay.authenticate(&headers) else {
        return unauthorized(None);
    };
    let Some(id) = header_str(&headers, SESSION_HEADER).map(str::to_owned) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            None,
            -32600,
            "DELETE needs the session id",
        );
    };
    let Some(session) = relay.session(&id, &agent) else {
        return rpc_error(StatusCode::NOT_FOUND, None, -32001, "Session not found");
    };
    let Some(upstream_id) = &session.upstream_id else {
        // The upstream keeps no session: ending ours is all there is.
        relay.close_session(&id).await;
        return status_only(StatusCode::OK);
    };
    let mut request = relay
        .http
        .delete(relay.upstream.clone())
        .header(SESSION_HEADER, upstream_id.as_str());
    if let Some(v) = headers.get("mcp-protocol-version") {
        request = request.header("mcp-protocol-version", v.clone());
    }
    match request.send().await {
        Ok(r) => {
            let status = r.status();
            // 405: the upstream does not let clients end sessions; both stay.
            if status.is_success() || status == StatusCode::NOT_FOUND {
                relay.close_session(&id).await;
            }
            let mut out = Response::new(Body::from(r.bytes().await.unwrap_or_default()));
            *out.status_mut() = status;
            out
        }
        Err(e) => {
            tracing::warn!(error = %e, "the upstream could not be reached");
            rpc_error(
                StatusCode::BAD_GATEWAY,
                None,
                -32603,
                "the upstream MCP server could not be reached",
            )
        }
    }
}
